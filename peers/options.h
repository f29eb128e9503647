/* Command-line and INI options from one table.
 *
 * A binary describes its options once (name, kind, bounds, where the value
 * goes in its options struct); rumor_opts_parse reads an INI file named by
 * -c/--config (every key is an option name, in any section) and then the
 * command line, whose flags override the file. Values are checked against
 * their bounds; an error names the flag ("--epochs '0': expected an integer in
 * [1, 100000]") or the file and line ("peer.ini:7: unknown key 'epoch'"). */
#ifndef RUMOR_OPTIONS_H
#define RUMOR_OPTIONS_H

#include <stddef.h>

typedef enum {
    RUMOR_OPT_STR,     /* const char * (points into argv or a kept copy) */
    RUMOR_OPT_INT,     /* int within [lo, hi] */
    RUMOR_OPT_LONG,    /* long within [lo, hi] */
    RUMOR_OPT_DOUBLE,  /* finite double within [lo, hi] */
    RUMOR_OPT_FLAG,    /* int set to `value` (no argument; INI: true/false) */
    RUMOR_OPT_CHOICE   /* const char *, one of `choices` ("sgd|adamw") */
} rumor_opt_kind;

typedef struct rumor_opt {
    const char *name;      /* long name without "--" and INI key */
    char short_name;       /* or 0 */
    rumor_opt_kind kind;
    size_t offset;         /* offsetof(struct options, field) */
    double lo, hi;         /* numeric bounds */
    const char *choices;   /* RUMOR_OPT_CHOICE */
    int value;             /* RUMOR_OPT_FLAG: what the flag sets */
} rumor_opt_t;

/* Results of rumor_opts_parse besides "go on" (0). */
enum { RUMOR_OPTS_HELP = 1, RUMOR_OPTS_VERSION = 2, RUMOR_OPTS_ERROR = -1 };

/* Parses argv (and the --config file) into dst. table ends with a zeroed
 * entry. -h/--help, -V/--version and -c/--config are built in. On error
 * prints "PROG: message" and "Try 'PROG --help'" to stderr and returns
 * RUMOR_OPTS_ERROR. Strings from the INI file are kept until exit. */
int rumor_opts_parse(const char *prog, const rumor_opt_t *table, void *dst, int argc, char **argv);

/* Sets one option by name (for tests and callers that build configs). */
int rumor_opts_set(const rumor_opt_t *table, void *dst, const char *name, const char *value,
                   const char *where);

#endif
