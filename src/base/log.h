/* Logging to stderr: "rumor[peer 3] 12:04:05.123 warn: message".
 * The level comes from rumor_log_set_level() or the RUMOR_LOG environment
 * variable (error, warn, info, debug); the default is info. Thread-safe. */
#ifndef RUMOR_LOG_H
#define RUMOR_LOG_H

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RUMOR_LOG_ERROR = 0, RUMOR_LOG_WARN, RUMOR_LOG_INFO, RUMOR_LOG_DEBUG } rumor_log_level;

void rumor_log_set_level(rumor_log_level level);
/* Parses "error|warn|info|debug"; returns RUMOR_EINVAL on anything else. */
int rumor_log_parse_level(const char *name, rumor_log_level *out);
rumor_log_level rumor_log_get_level(void);
/* A short tag printed in every line, e.g. "peer 3" (copied; NULL clears). */
void rumor_log_set_tag(const char *tag);
void rumor_log(rumor_log_level level, const char *fmt, ...) RUMOR_PRINTF(2, 3);

#define rumor_error(...) rumor_log(RUMOR_LOG_ERROR, __VA_ARGS__)
#define rumor_warn(...) rumor_log(RUMOR_LOG_WARN, __VA_ARGS__)
#define rumor_info(...) rumor_log(RUMOR_LOG_INFO, __VA_ARGS__)
#define rumor_debug(...) rumor_log(RUMOR_LOG_DEBUG, __VA_ARGS__)

/* Monotonic clock in seconds. */
double rumor_now(void);

/* CPU time this process has used, all its threads, user and system, in
 * seconds. */
double rumor_cpu_now(void);

/* Sleeps `secs` seconds (nothing for secs <= 0), resuming after signals. */
void rumor_sleep(double secs);

#ifdef __cplusplus
}
#endif
#endif
