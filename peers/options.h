/* Command-line and INI options from one table.
 *
 * A binary describes its options once (name, kind, bounds, where the value
 * goes in its options struct); rumor_opts_parse reads an INI file named by
 * -c/--config (every key is an option name, in any section) and then the
 * command line, whose flags override the file. Values are checked against
 * their bounds; an error names the flag ("--epochs '0': expected an integer in
 * [1, 100000]") or the file and line ("peer.ini:7: unknown key 'epoch'").
 *
 * Paths: a relative path read from an INI file is taken from the file's
 * directory (as a unit in /etc/rumor with WorkingDirectory=/var/lib/rumor
 * needs), one on the command line from the working directory. The options
 * that hold paths say so by their kind: RUMOR_OPT_PATH for a value that is
 * a path, RUMOR_OPT_PATHS for a spec with paths inside. A config file that
 * is no regular file (-c <(...), a pipe) or is read through /dev or /proc
 * (-c /dev/stdin) has no directory: its paths stay relative to the working
 * directory. */
#ifndef RUMOR_OPTIONS_H
#define RUMOR_OPTIONS_H

#include <stddef.h>

typedef enum {
    RUMOR_OPT_STR,     /* const char * (points into argv or a kept copy) */
    RUMOR_OPT_INT,     /* int within [lo, hi] */
    RUMOR_OPT_LONG,    /* long within [lo, hi] */
    RUMOR_OPT_DOUBLE,  /* finite double within [lo, hi] */
    RUMOR_OPT_FLAG,    /* int set to `value` (no argument; INI: true/false) */
    RUMOR_OPT_CHOICE,  /* const char *, one of `choices` ("sgd|adamw") */
    RUMOR_OPT_PATH,    /* const char *, a file or directory ("-" stays: standard
                        * output) */
    RUMOR_OPT_PATHS    /* const char *, a spec with paths: after one of the
                        * prefixes in `choices` ("file:", "text:|tokens:") a
                        * comma-separated list of paths; without one, when
                        * `value` is 1, a comma-separated list whose items are
                        * paths where they name a file in the INI file's
                        * directory (a bare DIR among names such as
                        * fashion-mnist, .pub files among Z85 keys), names or
                        * keys otherwise */
} rumor_opt_kind;

typedef struct rumor_opt {
    const char *name;      /* long name without "--" and INI key */
    char short_name;       /* or 0 */
    rumor_opt_kind kind;
    size_t offset;         /* offsetof(struct options, field) */
    double lo, hi;         /* numeric bounds */
    const char *choices;   /* RUMOR_OPT_CHOICE; RUMOR_OPT_PATHS: its prefixes */
    int value;             /* RUMOR_OPT_FLAG: what the flag sets; RUMOR_OPT_PATHS:
                            * 1 when a value without a prefix may hold paths */
} rumor_opt_t;

/* Results of rumor_opts_parse besides "go on" (0). */
enum { RUMOR_OPTS_HELP = 1, RUMOR_OPTS_VERSION = 2, RUMOR_OPTS_ERROR = -1 };

/* Parses argv (and the --config file) into dst. table ends with a zeroed
 * entry. -h/--help, -V/--version and -c/--config are built in. On error
 * prints "PROG: message" and "Try 'PROG --help'" to stderr and returns
 * RUMOR_OPTS_ERROR. Strings from the INI file (paths resolved against its
 * directory) are kept until exit. */
int rumor_opts_parse(const char *prog, const rumor_opt_t *table, void *dst, int argc, char **argv);

/* Sets one option by name (for tests and callers that build configs); a
 * path is taken as given. */
int rumor_opts_set(const rumor_opt_t *table, void *dst, const char *name, const char *value,
                   const char *where);

#endif
