/* Options from a table, for the command line and INI files (see options.h). */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "err.h"

static const rumor_opt_t *find(const rumor_opt_t *t, const char *name)
{
    for (; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

/* Parses and stores one value; `where` prefixes the error ("--lr" or
 * "peer.ini:7: lr"). */
static int set(const rumor_opt_t *o, void *dst, const char *v, const char *where)
{
    char *field = (char *)dst + o->offset;
    char *end;
    switch (o->kind) {
    case RUMOR_OPT_STR:
    case RUMOR_OPT_PATH:
    case RUMOR_OPT_PATHS:
        if (!*v)
            return rumor_err_set(RUMOR_EINVAL, "%s: empty value", where);
        *(const char **)field = v;
        return 0;
    case RUMOR_OPT_CHOICE: {
        size_t n = strlen(v);
        for (const char *c = o->choices; *c;) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && strncmp(c, v, n) == 0) {
                *(const char **)field = v;
                return 0;
            }
            c += len + (bar ? 1 : 0);
        }
        char list[256];
        snprintf(list, sizeof list, "%s", o->choices);
        for (char *p = list; *p; p++)
            if (*p == '|')
                *p = ',';
        return rumor_err_set(RUMOR_EINVAL, "%s '%s': expected one of %s", where, v, list);
    }
    case RUMOR_OPT_INT:
    case RUMOR_OPT_LONG: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < o->lo || x > o->hi)
            return rumor_err_set(RUMOR_EINVAL, "%s '%s': expected an integer in [%.0f, %.0f]",
                                 where, v, o->lo, o->hi);
        if (o->kind == RUMOR_OPT_INT)
            *(int *)field = (int)x;
        else
            *(long *)field = x;
        return 0;
    }
    case RUMOR_OPT_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || !isfinite(x) || x < o->lo || x > o->hi)
            return rumor_err_set(RUMOR_EINVAL, "%s '%s': expected a number in [%g, %g]", where,
                                 v, o->lo, o->hi);
        *(double *)field = x;
        return 0;
    }
    case RUMOR_OPT_FLAG:
        if (!v || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
            strcmp(v, "1") == 0 || strcasecmp(v, "on") == 0)
            *(int *)field = o->value;
        else if (strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
                 strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0)
            *(int *)field = !o->value;
        else
            return rumor_err_set(RUMOR_EINVAL, "%s '%s': expected true or false", where, v);
        return 0;
    }
    return rumor_err_set(RUMOR_EINVAL, "%s: bad option table", where);
}

int rumor_opts_set(const rumor_opt_t *table, void *dst, const char *name, const char *value,
                   const char *where)
{
    const rumor_opt_t *o = find(table, name);
    if (!o)
        return rumor_err_set(RUMOR_EINVAL, "%s: unknown option '%s'", where, name);
    return set(o, dst, value, where);
}

/* ------------------------------------------------- paths in an INI file */

/* Appends s[0, n) to b at *len (b has room). */
static void put(char *b, size_t *len, const char *s, size_t n)
{
    memcpy(b + *len, s, n);
    *len += n;
    b[*len] = '\0';
}

/* Appends the path p[0, n) to b at *len, taken from dir when it is
 * relative: always when `always`, else only where dir/p exists (an item
 * that may also be a name or a key). */
static void put_path(char *b, size_t *len, const char *dir, const char *p, size_t n, int always)
{
    if (n == 0 || p[0] == '/') {
        put(b, len, p, n);
        return;
    }
    size_t start = *len;
    put(b, len, dir, strlen(dir));
    if (*len > start && b[*len - 1] != '/')
        put(b, len, "/", 1);
    put(b, len, p, n);
    struct stat st;
    if (!always && stat(b + start, &st) != 0) { /* not a file there: as given */
        *len = start;
        put(b, len, p, n);
    }
}

/* Length of the prefix of v listed in choices ("file:|text:"), or 0. */
static size_t path_prefix(const char *choices, const char *v)
{
    for (const char *c = choices ? choices : ""; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len && strncmp(c, v, len) == 0)
            return len;
        c += len + (bar ? 1 : 0);
    }
    return 0;
}

/* The value of option o read from an INI file in directory dir (NULL: the
 * file has none of its own), as it is kept until exit: a copy, with its
 * relative paths taken from dir. NULL when out of memory. */
static char *ini_value(const rumor_opt_t *o, const char *v, const char *dir)
{
    if (!dir || (o->kind != RUMOR_OPT_PATH && o->kind != RUMOR_OPT_PATHS) || !*v ||
        (o->kind == RUMOR_OPT_PATH && strcmp(v, "-") == 0))
        return strdup(v);
    size_t items = 1;
    for (const char *p = v; *p; p++)
        items += *p == ',';
    char *b = malloc(strlen(v) + items * (strlen(dir) + 1) + 1);
    if (!b)
        return NULL;
    size_t len = 0;
    b[0] = '\0';
    if (o->kind == RUMOR_OPT_PATH) {
        put_path(b, &len, dir, v, strlen(v), 1);
    } else {
        size_t pre = path_prefix(o->choices, v);
        if (!pre && !o->value) { /* a name (ring, mh): no path in it */
            put(b, &len, v, strlen(v));
        } else {
            put(b, &len, v, pre);
            for (const char *p = v + pre;;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                put_path(b, &len, dir, p, n, pre > 0);
                if (!comma)
                    break;
                put(b, &len, ",", 1);
                p = comma + 1;
            }
        }
    }
    char *kept = strdup(b);
    free(b);
    return kept;
}

/* ------------------------------------------------------------ INI files */

struct ini_ctx {
    const char *path;
    const char *dir;   /* the file's directory, for relative paths; NULL: none */
    const rumor_opt_t *table;
    void *dst;
    FILE *f;
    int lineno;  /* lines read so far: the line inih is parsing */
    int failed;
};

/* inih's line reader: counts lines so errors can name them (Debian's inih
 * is built without line numbers in its handler). */
static char *read_line(char *str, int num, void *stream)
{
    struct ini_ctx *c = stream;
    char *r = fgets(str, num, c->f);
    if (r)
        c->lineno++;
    return r;
}

/* inih calls this for each "key = value"; returning 0 stops with an error at
 * the current line (reported by the caller). */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    struct ini_ctx *c = user;
    int lineno = c->lineno;
    char where[600];
    snprintf(where, sizeof where, "%s:%d: %s", c->path, lineno, name);
    const rumor_opt_t *o = find(c->table, name);
    int rc;
    if (!o || strcmp(name, "config") == 0)
        rc = rumor_err_set(RUMOR_EINVAL, "%s:%d: unknown key '%s'", c->path, lineno, name);
    else {
        char *copy = ini_value(o, value, c->dir); /* kept: options point at it until exit */
        rc = copy ? set(o, c->dst, copy, where) : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    if (rc < 0) {
        c->failed = 1;
        return 0;
    }
    return 1;
}

/* Opens a config file to read. fopen opens a directory too, and reading it
 * then fails with EISDIR, which inih takes for the end of an empty file: a
 * directory would run with the defaults. Only a file to read lines from is
 * taken: a regular file (*regular = 1), or a pipe or terminal (-c <(...),
 * -c /dev/stdin). */
static FILE *open_config(const char *path, int *regular)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        rumor_err_sys(RUMOR_ESYS, "config file '%s'", path);
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        rumor_err_sys(RUMOR_ESYS, "config file '%s'", path);
    else if (S_ISDIR(st.st_mode))
        rumor_err_set(RUMOR_EINVAL, "config file '%s': is a directory", path);
    else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
        rumor_err_set(RUMOR_EINVAL, "config file '%s': not a regular file", path);
    else {
        *regular = S_ISREG(st.st_mode);
        return f;
    }
    fclose(f);
    return NULL;
}

static int parse_ini(const char *path, const rumor_opt_t *table, void *dst)
{
    struct ini_ctx c = { path, NULL, table, dst, NULL, 0, 0 };
    int regular = 0;
    c.f = open_config(path, &regular);
    if (!c.f)
        return rumor_err_code();
    /* its directory: what comes before the last slash ("/" for /x.ini); a
     * name without one is in the working directory, where its paths are
     * already taken from. A file reached through /dev or /proc (-c
     * /dev/stdin < swarm.ini) has no directory that means anything. */
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    if (regular && slash && strncmp(path, "/dev/", 5) != 0 && strncmp(path, "/proc/", 6) != 0) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (!dir) {
            fclose(c.f);
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        }
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    c.dir = dir;
    int rc = ini_parse_stream(read_line, &c, on_key, &c);
    /* inih stops at the first NULL from read_line, end of file or not */
    int read_failed = ferror(c.f), err = errno;
    fclose(c.f);
    free(dir);
    if (c.failed)
        return RUMOR_EINVAL;
    if (rc > 0)
        return rumor_err_set(RUMOR_EFORMAT, "%s:%d: not 'key = value' or '[section]'", path, rc);
    if (rc < 0)
        return rumor_err_set(RUMOR_EIO, "config file '%s': read error", path);
    if (read_failed) {
        errno = err;
        return rumor_err_sys(RUMOR_EIO, "config file '%s': read error", path);
    }
    return 0;
}

static int usage_error(const char *prog)
{
    fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", prog, rumor_err_msg(),
            prog);
    return RUMOR_OPTS_ERROR;
}

int rumor_opts_parse(const char *prog, const rumor_opt_t *table, void *dst, int argc, char **argv)
{
    size_t n = 0;
    while (table[n].name)
        n++;
    struct option *longs = calloc(n + 4, sizeof *longs);
    char shorts[128] = ":hVc:";
    if (!longs) {
        rumor_err_set(RUMOR_ENOMEM, "out of memory");
        return usage_error(prog);
    }
    for (size_t i = 0; i < n; i++) {
        longs[i].name = table[i].name;
        longs[i].has_arg = table[i].kind == RUMOR_OPT_FLAG ? no_argument : required_argument;
        longs[i].val = 256 + (int)i;
        if (table[i].short_name) {
            size_t l = strlen(shorts);
            shorts[l] = table[i].short_name;
            shorts[l + 1] = table[i].kind == RUMOR_OPT_FLAG ? '\0' : ':';
            shorts[l + 2] = '\0';
        }
    }
    longs[n] = (struct option){ "help", no_argument, 0, 'h' };
    longs[n + 1] = (struct option){ "version", no_argument, 0, 'V' };
    longs[n + 2] = (struct option){ "config", required_argument, 0, 'c' };

    /* Pass 1: the config file (and help/version); pass 2: the flags. */
    int result = 0;
    for (int pass = 1; pass <= 2 && result == 0; pass++) {
        optind = 1;
        opterr = 0;
        int c, idx;
        while ((c = getopt_long(argc, argv, shorts, longs, &idx)) != -1) {
            if (c == 'h') {
                result = RUMOR_OPTS_HELP;
                break;
            }
            if (c == 'V') {
                result = RUMOR_OPTS_VERSION;
                break;
            }
            if (c == ':' || c == '?') {
                const char *arg = argv[optind - 1];
                if (c == ':')
                    rumor_err_set(RUMOR_EINVAL, "option '%s' needs a value", arg);
                else
                    rumor_err_set(RUMOR_EINVAL, "unknown option '%s'", arg);
                result = usage_error(prog);
                break;
            }
            if (c == 'c') {
                if (pass == 1 && parse_ini(optarg, table, dst) < 0) {
                    result = usage_error(prog);
                    break;
                }
                continue;
            }
            if (pass == 1)
                continue;
            const rumor_opt_t *o = NULL;
            if (c >= 256)
                o = &table[c - 256];
            else
                for (size_t i = 0; i < n; i++)
                    if (table[i].short_name == c)
                        o = &table[i];
            char where[96];
            snprintf(where, sizeof where, "--%s", o->name);
            if (set(o, dst, optarg, where) < 0) {
                result = usage_error(prog);
                break;
            }
        }
        if (result == 0 && pass == 2 && optind < argc) {
            rumor_err_set(RUMOR_EINVAL, "unexpected argument '%s'", argv[optind]);
            result = usage_error(prog);
        }
    }
    free(longs);
    return result;
}
