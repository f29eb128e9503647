/* Chrome trace files (see trace.h). */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rumor_trace {
    FILE *f;
    char *path;
    double origin;
};

int rumor_trace_open(const char *path, double origin, rumor_trace_t **out)
{
    *out = NULL;
    rumor_trace_t *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return rumor_err_set(RUMOR_ENOMEM, "trace: out of memory");
    }
    if (!(t->f = fopen(path, "w"))) {
        int e = errno;
        free(t->path);
        free(t);
        return rumor_err_set(RUMOR_ESYS, "--trace %s: %s", path, strerror(e));
    }
    t->origin = origin;
    /* where ts 0 is on the monotonic clock: traces of processes on one
     * machine (a swarm's peers) line up by it */
    fprintf(t->f, "[\n{\"name\":\"clock_origin\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
                  "\"args\":{\"monotonic_s\":%.6f}}", origin);
    *out = t;
    return 0;
}

/* A JSON string's characters: quotes, backslashes and controls escaped. */
static void put_json(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

void rumor_trace_row(rumor_trace_t *t, int row, const char *name)
{
    if (!t)
        return;
    fprintf(t->f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                  "\"args\":{\"name\":\"", row);
    put_json(t->f, name);
    fprintf(t->f, "\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                  "\"args\":{\"sort_index\":%d}}", row, row);
}

void rumor_trace_span(rumor_trace_t *t, int row, const char *name, const char *cat, double t0,
                      double t1, const char *args)
{
    if (!t)
        return;
    fputs(",\n{\"name\":\"", t->f);
    put_json(t->f, name);
    fputs("\",\"cat\":\"", t->f);
    put_json(t->f, cat);
    fprintf(t->f, "\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.1f,\"dur\":%.1f", row,
            (t0 - t->origin) * 1e6, (t1 > t0 ? t1 - t0 : 0.0) * 1e6);
    if (args)
        fprintf(t->f, ",\"args\":{%s}", args);
    fputc('}', t->f);
}

void rumor_trace_flush(rumor_trace_t *t)
{
    if (t)
        fflush(t->f);
}

int rumor_trace_close(rumor_trace_t **tp)
{
    if (!tp || !*tp)
        return 0;
    rumor_trace_t *t = *tp;
    fputs("\n]\n", t->f);
    int bad = ferror(t->f);
    bad |= fclose(t->f) != 0;
    int rc = bad ? rumor_err_set(RUMOR_EIO, "--trace %s: write failed", t->path) : 0;
    free(t->path);
    free(t);
    *tp = NULL;
    return rc;
}
