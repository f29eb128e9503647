/* Error codes and the per-thread last-error message (see err.h). */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MSG_MAX 1024
#define TRACE_MAX 512

static _Thread_local int last_rc;
static _Thread_local char last_msg[MSG_MAX];
static _Thread_local char last_trace[TRACE_MAX];

const char *rumor_strerror(int rc)
{
    switch (rc) {
    case RUMOR_OK: return "success";
    case RUMOR_EINVAL: return "invalid argument";
    case RUMOR_ENOMEM: return "out of memory";
    case RUMOR_ESYS: return "system error";
    case RUMOR_EIO: return "I/O error";
    case RUMOR_EFORMAT: return "malformed file";
    case RUMOR_EPROTO: return "protocol error";
    case RUMOR_ETIMEOUT: return "timed out";
    case RUMOR_ECUDA: return "CUDA error";
    case RUMOR_ENOTSUP: return "not supported";
    case RUMOR_ENODEV: return "no such device";
    case RUMOR_ESTATE: return "invalid state";
    case RUMOR_EAUTH: return "not authorized";
    default: return "unknown error";
    }
}

/* Strips the build directory from __FILE__ so traces read "src/data.c". */
static const char *short_file(const char *file)
{
    static const char *const roots[] = { "src/", "kernels/", "topo/", "gossip/",
                                         "peers/", "tests/", "examples/" };
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        const char *p = strstr(file, roots[i]);
        if (p && (p == file || p[-1] == '/'))
            return p;
    }
    return file;
}

static void vset(const char *file, int line, int rc, const char *fmt, va_list ap)
{
    last_rc = rc;
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    snprintf(last_trace, sizeof last_trace, "%s:%d", short_file(file), line);
}

int rumor_err_set_at(const char *file, int line, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(file, line, rc, fmt, ap);
    va_end(ap);
    return rc;
}

int rumor_err_sys_at(const char *file, int line, int rc, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vset(file, line, rc, fmt, ap);
    va_end(ap);
    size_t n = strlen(last_msg);
    if (n < sizeof last_msg - 3)
        snprintf(last_msg + n, sizeof last_msg - n, ": %s", strerror(saved));
    errno = saved;
    return rc;
}

int rumor_err_trace_add(const char *file, int line, int rc)
{
    if (last_rc == 0) { /* a callee returned an error without a message */
        last_rc = rc;
        snprintf(last_msg, sizeof last_msg, "%s", rumor_strerror(rc));
        last_trace[0] = '\0';
    }
    size_t n = strlen(last_trace);
    if (n + 8 < sizeof last_trace)
        snprintf(last_trace + n, sizeof last_trace - n, "%s%s:%d", n ? " <- " : "",
                 short_file(file), line);
    return rc;
}

int rumor_err_prefix(int rc, const char *fmt, ...)
{
    char prefix[MSG_MAX], old[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (last_rc == 0) {
        last_rc = rc;
        snprintf(last_msg, sizeof last_msg, "%s", rumor_strerror(rc));
    }
    memcpy(old, last_msg, sizeof old);
    snprintf(last_msg, sizeof last_msg, "%.400s: %.600s", prefix, old);
    return rc;
}

const char *rumor_err_msg(void) { return last_msg; }
int rumor_err_code(void) { return last_rc; }
const char *rumor_err_trace(void) { return last_trace; }

void rumor_err_clear(void)
{
    last_rc = 0;
    last_msg[0] = '\0';
    last_trace[0] = '\0';
}
