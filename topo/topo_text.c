/* Bounded line reading and strict number parsing (see topo_text.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "topo_text.h"

int rumor_topo_readline(FILE *f, char *buf, size_t size, int *lineno, const char *what)
{
    if (!fgets(buf, (int)size, f)) {
        if (ferror(f))
            return rumor_err_sys(RUMOR_EIO, "%s: read error after line %d", what, *lineno);
        return 0;
    }
    (*lineno)++;
    size_t len = strlen(buf);
    if (len + 1 == size && buf[len - 1] != '\n' && !feof(f))
        return rumor_err_set(RUMOR_EFORMAT, "%s:%d: line longer than %zu bytes", what, *lineno,
                             size - 1);
    /* fgets stops at NUL silently; a NUL before the newline means binary
     * input, which must not be read as a shorter line. */
    if (len > 0 && buf[len - 1] != '\n' && !feof(f))
        return rumor_err_set(RUMOR_EFORMAT, "%s:%d: NUL byte in text", what, *lineno);
    char *hash = strchr(buf, '#');
    if (hash)
        *hash = 0;
    len = strlen(buf);
    while (len && isspace((unsigned char)buf[len - 1]))
        buf[--len] = 0;
    size_t lead = 0;
    while (isspace((unsigned char)buf[lead]))
        lead++;
    memmove(buf, buf + lead, len - lead + 1);
    return 1;
}

int rumor_topo_parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int rumor_topo_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || (errno == ERANGE && fabs(v) > 1))
        return -1;
    *out = v;
    return 0;
}

int rumor_topo_split(char *buf, char **field, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == max)
            return max + 1;
        field[n++] = t;
    }
    return n;
}
