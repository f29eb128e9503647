/* What a long run shows its user: a progress line (step, loss, rate, ETA),
 * rewritten in place on a terminal and printed every few seconds otherwise,
 * and JSON-lines metrics for tools (one object a line, appended in one write
 * each, so processes may share the file). */
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

/* JSON-lines metrics: one object a line, {"time":...,"mono":...,<tags>,
 * <the event's fields>}. "time" is the wall clock (seconds since the Unix
 * epoch, comparable between machines), "mono" the monotonic clock
 * (rumor_now(): comparable between processes of one machine, never steps);
 * the tags are fixed fields set once after opening (rumor-peer: "rank" and
 * "swarm"). Every key appears once in a line: an event's own fields must not
 * repeat "time", "mono" or a tag.
 *
 * The file is opened for appending and never truncated: several processes
 * (the peers of a swarm on one machine) may share one file, and a restarted
 * peer adds to what it wrote before. Each event is formatted into memory and
 * handed to the kernel in one write(2) on an O_APPEND descriptor, so lines of
 * different processes never interleave or overwrite each other (on a local
 * file system; NFS does not honour O_APPEND across clients). Remove the file
 * to start afresh. */
typedef struct rumor_metrics {
    int fd;           /* valid while open */
    int open, own_fd; /* own_fd: not standard output, closed by rumor_metrics_close */
    size_t ntags;     /* bytes of tags: ",\"rank\":0,..." (with the leading comma) */
    char tags[256];
    char path[512];
} rumor_metrics_t;

/* Opens a JSON-lines file for appending (created with mode 0644 when
 * missing, never truncated); "-" is standard output. */
int rumor_metrics_open(rumor_metrics_t *m, const char *path) RUMOR_WUR;

/* Adds a fixed field that every later event carries, after "time" and
 * "mono": an integer, or a string (escaped for JSON). RUMOR_EINVAL when the
 * tags outgrow their 255 bytes or the file is not open. */
int rumor_metrics_tag_int(rumor_metrics_t *m, const char *key, long long value) RUMOR_WUR;
int rumor_metrics_tag_str(rumor_metrics_t *m, const char *key, const char *value) RUMOR_WUR;

/* Writes one event as one write(2). fmt holds the event's fields without
 * braces, e.g. "\"event\":\"step\",\"loss\":%.6g"; "time", "mono" and the
 * tags come first. An event of any length is one write (the buffer grows).
 * A failed write warns once and closes the file. No-op when not open. */
void rumor_metrics_write(rumor_metrics_t *m, const char *fmt, ...) RUMOR_PRINTF(2, 3);

void rumor_metrics_close(rumor_metrics_t *m);

#ifdef __cplusplus
}
#endif
#endif
