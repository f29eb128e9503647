/* Fuzz target: the INI config files of rumor-peer and rumor-train
 * (peers/options.h, read with libinih).
 *
 * The input is written to a file under $TMPDIR and parsed with
 * rumor_opts_parse("rumor-peer", table, &opts, "-c FILE") against a table
 * made of the real shared block (RUMOR_TRAIN_OPTIONS, peers/trainopts.h) and
 * a copy of rumor-peer's own entries (peers/peer_opts.c keeps them in the
 * program, out of reach of a library). After a successful parse every
 * value the file set must be within its entry's bounds or choices.
 *
 * Then the input's lines, as command-line arguments after "-c FILE": flags
 * override the file. Lines naming a config file (-c, --c...) are dropped so
 * that the only file read is ours.
 *
 * options.c keeps the strings it reads from INI files until exit (options.h),
 * by strdup. This target's builds compile options.c with
 * -Dstrdup=fuzz_opts_strdup: the copies are recorded here and freed after
 * each input, so LeakSanitizer reports only what options.c loses itself. */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "options.h"
#include "trainopts.h"

#define MAX_ARGS 32
#define MAX_ARG_LEN 256

struct peer_options {
    struct rumor_train_opts t;
    int rank, eval_every, no_average, keep_checkpoints;
    long checkpoint_every;
    const char *peers, *peers_file, *listen, *swarm, *topology, *weights, *mode, *checkpoint_dir;
    double round_timeout, start_timeout, chunk_mb, leave_timeout;
};

#define PO struct peer_options
static const rumor_opt_t table[] = {
    { "rank", 0, RUMOR_OPT_INT, offsetof(PO, rank), 0, 1 << 20, NULL, 0 },
    { "peers", 0, RUMOR_OPT_STR, offsetof(PO, peers), 0, 0, NULL, 0 },
    { "peers-file", 0, RUMOR_OPT_STR, offsetof(PO, peers_file), 0, 0, NULL, 0 },
    { "listen", 0, RUMOR_OPT_STR, offsetof(PO, listen), 0, 0, NULL, 0 },
    { "swarm", 0, RUMOR_OPT_STR, offsetof(PO, swarm), 0, 0, NULL, 0 },
    { "topology", 0, RUMOR_OPT_STR, offsetof(PO, topology), 0, 0, NULL, 0 },
    { "weights", 0, RUMOR_OPT_STR, offsetof(PO, weights), 0, 0, NULL, 0 },
    { "mode", 0, RUMOR_OPT_CHOICE, offsetof(PO, mode), 0, 0, "dpsgd|allreduce", 0 },
    { "round-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(PO, round_timeout), 0.01, 86400, NULL, 0 },
    { "start-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(PO, start_timeout), 0, 86400, NULL, 0 },
    { "chunk-mb", 0, RUMOR_OPT_DOUBLE, offsetof(PO, chunk_mb), 0.001, 256, NULL, 0 },
    { "eval-every", 0, RUMOR_OPT_INT, offsetof(PO, eval_every), 1, 100000, NULL, 0 },
    { "no-average", 0, RUMOR_OPT_FLAG, offsetof(PO, no_average), 0, 0, NULL, 1 },
    { "checkpoint-dir", 0, RUMOR_OPT_STR, offsetof(PO, checkpoint_dir), 0, 0, NULL, 0 },
    { "checkpoint-every", 0, RUMOR_OPT_LONG, offsetof(PO, checkpoint_every), 0, 1e12, NULL, 0 },
    { "keep-checkpoints", 0, RUMOR_OPT_INT, offsetof(PO, keep_checkpoints), 1, 1000, NULL, 0 },
    { "leave-timeout", 0, RUMOR_OPT_DOUBLE, offsetof(PO, leave_timeout), 0.1, 3600, NULL, 0 },
    RUMOR_TRAIN_OPTIONS(PO, t),
    { NULL, 0, 0, 0, 0, 0, NULL, 0 }
};

/* ------------------------------------------------- strdup of options.c */

static char **copies;
static size_t ncopies, capcopies;

char *fuzz_opts_strdup(const char *s)
{
    if (ncopies == capcopies) {
        size_t cap = capcopies ? 2 * capcopies : 64;
        char **nc = realloc(copies, cap * sizeof *nc);
        if (!nc)
            return NULL;
        copies = nc;
        capcopies = cap;
    }
    size_t len = strlen(s) + 1;
    char *p = malloc(len);
    if (p) {
        memcpy(p, s, len);
        copies[ncopies++] = p;
    }
    return p;
}

static void free_copies(void)
{
    for (size_t i = 0; i < ncopies; i++)
        free(copies[i]);
    ncopies = 0;
    if (capcopies > 4096) { /* one odd input does not keep a big array */
        free(copies);
        copies = NULL;
        capcopies = 0;
    }
}

/* ----------------------------------------------------------- the checks */

static void fail(const char *name, const char *what)
{
    fprintf(stderr, "fuzz_config: option '%s': %s\n", name, what);
    abort();
}

/* Each value differs from the zeroed start only as its entry allows. */
static void check_values(const PO *o)
{
    for (const rumor_opt_t *e = table; e->name; e++) {
        const char *f = (const char *)o + e->offset;
        switch (e->kind) {
        case RUMOR_OPT_INT: {
            int v;
            memcpy(&v, f, sizeof v);
            if (v != 0 && (v < e->lo || v > e->hi))
                fail(e->name, "integer outside its bounds");
            break;
        }
        case RUMOR_OPT_LONG: {
            long v;
            memcpy(&v, f, sizeof v);
            if (v != 0 && (v < e->lo || v > e->hi))
                fail(e->name, "integer outside its bounds");
            break;
        }
        case RUMOR_OPT_DOUBLE: {
            double v;
            memcpy(&v, f, sizeof v);
            if (v != 0 && (!isfinite(v) || v < e->lo || v > e->hi))
                fail(e->name, "number outside its bounds");
            break;
        }
        case RUMOR_OPT_FLAG: {
            int v;
            memcpy(&v, f, sizeof v);
            if (v != 0 && v != 1)
                fail(e->name, "flag neither 0 nor 1");
            break;
        }
        case RUMOR_OPT_STR:
        case RUMOR_OPT_PATH:
        case RUMOR_OPT_PATHS:
        case RUMOR_OPT_CHOICE: {
            const char *v;
            memcpy(&v, f, sizeof v);
            if (v && !*v)
                fail(e->name, "empty string accepted");
            if (v && e->kind == RUMOR_OPT_CHOICE) {
                size_t n = strlen(v);
                const char *c = e->choices, *hit = strstr(c, v);
                int ok = 0;
                for (; hit && !ok; hit = strstr(hit + 1, v))
                    ok = (hit == c || hit[-1] == '|') && (hit[n] == '|' || hit[n] == '\0');
                if (!ok)
                    fail(e->name, "value not one of the choices");
            }
            break;
        }
        }
    }
}

/* glibc's getopt keeps a pointer into the last argv when a parse stops in a
 * bundle of short options ("-qh"); optind = 0 makes it start afresh, as a new
 * process would (rumor_opts_parse sets optind = 1, which does not). */
static void reset_getopt(void)
{
    char prog[] = "fuzz", *argv[] = { prog, NULL };
    optind = 0;
    opterr = 0;
    while (getopt(1, argv, "") != -1)
        ;
}

/* The input's lines as arguments (at most MAX_ARGS, each cut to MAX_ARG_LEN
 * bytes); 0 when a line names a config file or an argument would be empty. */
static int split_args(const uint8_t *data, size_t size, char *store, char **argv, int *argc)
{
    size_t i = 0;
    while (i < size && *argc < MAX_ARGS + 3) {
        char *a = store;
        size_t len = 0;
        while (i < size && data[i] != '\n') {
            if (len < MAX_ARG_LEN && data[i] != '\0')
                a[len++] = (char)data[i];
            i++;
        }
        i++;
        a[len] = '\0';
        store += len + 1;
        if (!strncmp(a, "--c", 3) || (a[0] == '-' && a[1] != '-' && strchr(a, 'c')))
            return 0;
        argv[(*argc)++] = a;
    }
    argv[*argc] = NULL;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    const char *path = fuzz_tmpfile("ini", ".ini");
    if (!path || fuzz_write(path, data, size) < 0)
        abort();
    char prog[] = "rumor-peer", c[] = "-c", file[4096];
    snprintf(file, sizeof file, "%s", path);
    char *argv[MAX_ARGS + 4] = { prog, c, file, NULL };
    PO o;
    memset(&o, 0, sizeof o);
    reset_getopt();
    int rc = rumor_opts_parse(prog, table, &o, 3, argv);
    if (rc == 0)
        check_values(&o);
    else if (rc != RUMOR_OPTS_ERROR)
        fail("-c", "neither success nor error for a config file alone");

    /* the same file, then the input's lines as flags */
    char *store = malloc(size + MAX_ARGS + 4);
    int argc = 3;
    if (store && split_args(data, size, store, argv, &argc)) {
        memset(&o, 0, sizeof o);
        reset_getopt();
        rc = rumor_opts_parse(prog, table, &o, argc, argv);
        if (rc == 0)
            check_values(&o);
    }
    free(store);
    reset_getopt();
    free_copies();
    return 0;
}
