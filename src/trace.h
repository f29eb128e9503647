/* Chrome trace files: spans of time on named rows, for Perfetto
 * (https://ui.perfetto.dev) or chrome://tracing.
 *
 * A trace is a JSON array of events. Each row (a pipeline device, a peer's
 * gossip) is a "thread" of one process with a name; each span is an "X"
 * (complete) event with its start and duration in microseconds from the
 * trace's origin and a few arguments. rumor-train and rumor-peer write one
 * with --trace FILE.json. The first event, metadata named "clock_origin",
 * gives the origin in seconds of the monotonic clock (args.monotonic_s), so
 * that the traces of several processes on one machine line up. */
#ifndef RUMOR_TRACE_H
#define RUMOR_TRACE_H

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rumor_trace rumor_trace_t;

/* Creates (truncates) path; times are seconds of rumor_now(), shown from
 * `origin`. */
int rumor_trace_open(const char *path, double origin, rumor_trace_t **out) RUMOR_WUR;

/* Names row `row` (shown in row order). */
void rumor_trace_row(rumor_trace_t *t, int row, const char *name);

/* A span [t0, t1] (rumor_now seconds) on a row: its name, its category and
 * its arguments as JSON members without braces ("\"step\":3,\"micro\":1"),
 * or NULL. */
void rumor_trace_span(rumor_trace_t *t, int row, const char *name, const char *cat, double t0,
                      double t1, const char *args);

/* Writes what is buffered, so that a process killed later leaves a file
 * that reads (the format allows the array's closing bracket to be
 * missing). */
void rumor_trace_flush(rumor_trace_t *t);

/* Ends the array and closes the file: 0, or RUMOR_EIO when a write failed.
 * Sets *tp to NULL; NULL is a no-op. */
int rumor_trace_close(rumor_trace_t **tp) RUMOR_WUR;

#ifdef __cplusplus
}
#endif
#endif
