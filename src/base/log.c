/* Logging to stderr and the monotonic clock (see log.h). */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
/* the level: RUMOR_LOG's until rumor_log_set_level; read by every thread
 * that logs, so atomic (-1: not read from the environment yet) */
static _Atomic int level = -1;
static char tag[64];

int rumor_log_parse_level(const char *name, rumor_log_level *out)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    for (int i = 0; i < 4; i++)
        if (name && strcasecmp(name, names[i]) == 0) {
            *out = (rumor_log_level)i;
            return 0;
        }
    return rumor_err_set(RUMOR_EINVAL, "log level '%s': expected error, warn, info or debug",
                         name ? name : "(null)");
}

rumor_log_level rumor_log_get_level(void)
{
    int l = atomic_load(&level);
    if (l < 0) {
        /* the first call: threads that race here read the same value */
        rumor_log_level e = RUMOR_LOG_INFO;
        const char *env = getenv("RUMOR_LOG");
        if (env && rumor_log_parse_level(env, &e) < 0)
            e = RUMOR_LOG_INFO;
        int expected = -1;
        atomic_compare_exchange_strong(&level, &expected, (int)e);
        l = atomic_load(&level);
    }
    return (rumor_log_level)l;
}

void rumor_log_set_level(rumor_log_level l)
{
    atomic_store(&level, (int)l);
}

void rumor_log_set_tag(const char *t)
{
    pthread_mutex_lock(&log_mu);
    snprintf(tag, sizeof tag, "%s", t ? t : "");
    pthread_mutex_unlock(&log_mu);
}

void rumor_log(rumor_log_level l, const char *fmt, ...)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    if (l > rumor_log_get_level())
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mu);
    fprintf(stderr, "rumor%s%s%s %02d:%02d:%02d.%03ld %s: %s\n", tag[0] ? "[" : "", tag,
            tag[0] ? "]" : "", tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L,
            names[l], line);
    pthread_mutex_unlock(&log_mu);
}

double rumor_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double rumor_cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void rumor_sleep(double secs)
{
    if (!(secs > 0))
        return;
    struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
