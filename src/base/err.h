/* rumor error codes and the per-thread last-error message.
 *
 * Every library function returns 0 (or a non-negative count) on success and a
 * negative rumor_rc on failure, after recording a message that says what and
 * where ("train-images-idx3-ubyte.gz: truncated: 784 of 47040000 bytes").
 * RUMOR_CHECK passes a failure up and appends "file:line" at each level, a
 * cheap backtrace that rumor_err_trace() returns. The library never exits. */
#ifndef RUMOR_ERR_H
#define RUMOR_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rumor_rc {
    RUMOR_OK = 0,
    RUMOR_EINVAL = -1,   /* bad argument, flag or value */
    RUMOR_ENOMEM = -2,   /* allocation failed */
    RUMOR_ESYS = -3,     /* a system call failed (errno in the message) */
    RUMOR_EIO = -4,      /* read/write failed or a file is truncated */
    RUMOR_EFORMAT = -5,  /* a file's content is malformed */
    RUMOR_EPROTO = -6,   /* a peer's message is malformed */
    RUMOR_ETIMEOUT = -7, /* a deadline passed */
    RUMOR_ECUDA = -8,    /* a CUDA, cuBLAS or NCCL call failed */
    RUMOR_ENOTSUP = -9,  /* feature not built or not supported */
    RUMOR_ENODEV = -10,  /* the requested device does not exist */
    RUMOR_ESTATE = -11,  /* call not valid in the object's current state */
    RUMOR_EAUTH = -12    /* authentication or authorization failed */
} rumor_rc;

/* RUMOR_INTERNAL marks a function that the library's own sources share
 * through a header that is not installed (gossip/idmap.h, topo/topo_text.h,
 * kernels/cuda/cuda_backend.h): its name begins with rumor_ like the
 * interface's, but its visibility is hidden, so librumor.so does not export
 * it (Makefile.am). A test that calls one compiles its source in. */
#if defined(__GNUC__)
#define RUMOR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define RUMOR_WUR __attribute__((warn_unused_result))
#define RUMOR_INTERNAL __attribute__((visibility("hidden")))
#else
#define RUMOR_PRINTF(a, b)
#define RUMOR_WUR
#define RUMOR_INTERNAL
#endif

/* Discards a result the callee marks warn_unused_result, where the caller
 * has already checked the inputs that could make it fail. */
#define RUMOR_IGNORE(call)                                                    \
    do {                                                                      \
        if ((call) < 0) {                                                     \
        }                                                                     \
    } while (0)

/* A short name for a code: "invalid argument", "timed out", ... */
const char *rumor_strerror(int rc);

/* Records rc and a formatted message as this thread's last error and returns
 * rc, so that `return rumor_err_set(RUMOR_EINVAL, "...")` reads naturally.
 * The message replaces any earlier one and clears the trace. */
int rumor_err_set_at(const char *file, int line, int rc, const char *fmt, ...)
    RUMOR_PRINTF(4, 5);
#define rumor_err_set(rc, ...) rumor_err_set_at(__FILE__, __LINE__, (rc), __VA_ARGS__)

/* Like rumor_err_set with strerror(errno) appended ("...: No such file"). */
int rumor_err_sys_at(const char *file, int line, int rc, const char *fmt, ...)
    RUMOR_PRINTF(4, 5);
#define rumor_err_sys(rc, ...) rumor_err_sys_at(__FILE__, __LINE__, (rc), __VA_ARGS__)

/* Appends "file:line" to the trace of the last error; returns rc. */
int rumor_err_trace_add(const char *file, int line, int rc);

/* Prefixes the last message with "prefix: " (e.g. a file name known only to
 * the caller); returns rc. */
int rumor_err_prefix(int rc, const char *fmt, ...) RUMOR_PRINTF(2, 3);

/* The last error message of this thread ("" when none). Valid until the next
 * rumor call on this thread. */
const char *rumor_err_msg(void);

/* The last error's code (0 when none). */
int rumor_err_code(void);

/* "src/data.c:88 <- src/train.c:40": where the last error was raised and
 * each RUMOR_CHECK level it passed through. */
const char *rumor_err_trace(void);

/* Forgets the last error. */
void rumor_err_clear(void);

/* Passes a negative return code up, recording this call site. */
#define RUMOR_CHECK(call)                                                     \
    do {                                                                      \
        int rumor_check_rc_ = (call);                                         \
        if (rumor_check_rc_ < 0)                                              \
            return rumor_err_trace_add(__FILE__, __LINE__, rumor_check_rc_);  \
    } while (0)

/* Same, but jumps to a cleanup label with rc set. */
#define RUMOR_CHECK_GOTO(call, rc, label)                                     \
    do {                                                                      \
        (rc) = (call);                                                        \
        if ((rc) < 0) {                                                       \
            rumor_err_trace_add(__FILE__, __LINE__, (rc));                    \
            goto label;                                                       \
        }                                                                     \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
