/* What a long run shows its user: a progress line (step, loss, rate, ETA),
 * rewritten in place on a terminal and printed every few seconds otherwise,
 * and JSON-lines metrics for tools (one object a line, flushed as written). */
#ifndef RUMOR_PROGRESS_H
#define RUMOR_PROGRESS_H

#include <stdio.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_progress {
    FILE *out;          /* stderr by default */
    int tty;            /* rewrite one line in place */
    double interval;    /* seconds between lines; 0 prints every update */
    double start, last; /* rumor_now() at begin and at the last line */
    long total;         /* units of work in the run (steps) */
    int line_open;      /* a \r line is on screen and needs a newline */
    int quiet;
} rumor_progress_t;

/* Starts timing a run of `total` steps. interval < 0 picks the default:
 * 0.5 s on a terminal, 10 s otherwise. */
void rumor_progress_begin(rumor_progress_t *p, FILE *out, long total, double interval, int quiet);

/* Shows "prefix  step 1200/4690  <fields>  ETA 0:32" when the interval has
 * passed (or force). `done` is the steps completed. Returns 1 if printed. */
int rumor_progress_update(rumor_progress_t *p, long done, int force, const char *fmt, ...)
    RUMOR_PRINTF(4, 5);

/* Prints a line that stays (epoch summaries), clearing an open \r line. */
void rumor_progress_print(rumor_progress_t *p, const char *fmt, ...) RUMOR_PRINTF(2, 3);

/* Formats seconds as "1:02:03" or "2:03". */
void rumor_format_duration(double seconds, char *buf, size_t len);

/* ------------------------------------------------------------- metrics */

typedef struct rumor_metrics {
    FILE *f;
    char path[512];
} rumor_metrics_t;

/* Opens (truncates) a JSON-lines file; "-" is stdout. */
int rumor_metrics_open(rumor_metrics_t *m, const char *path) RUMOR_WUR;

/* Writes one object. fmt holds the fields without braces, e.g.
 * "\"event\":\"step\",\"loss\":%.6g"; a "time" field (seconds since the Unix
 * epoch) is added first. No-op when the file is not open. */
void rumor_metrics_write(rumor_metrics_t *m, const char *fmt, ...) RUMOR_PRINTF(2, 3);

void rumor_metrics_close(rumor_metrics_t *m);

#ifdef __cplusplus
}
#endif
#endif
