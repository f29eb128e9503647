/* Opening devices by spec and picking their ops table (see ops.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blas_tune.h"
#include "log.h"
#include "ops.h"
#ifdef HAVE_CUDA
#include "cuda_backend.h"
#endif

int rumor_cpu_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int rumor_device_count(rumor_dev_kind kind)
{
    if (kind == RUMOR_DEV_CPU)
        return 1;
#ifdef HAVE_CUDA
    return rumor_cuda_device_count();
#else
    return 0;
#endif
}

const char *rumor_device_status(rumor_dev_kind kind)
{
    if (kind == RUMOR_DEV_CPU)
        return "ok";
#ifdef HAVE_CUDA
    return rumor_cuda_status();
#else
    return "this rumor was built without CUDA";
#endif
}

int rumor_device_info(rumor_dev_kind kind, int index, rumor_device_info_t *out)
{
    memset(out, 0, sizeof *out);
    int n = rumor_device_count(kind);
    if (index < 0 || index >= n)
        return rumor_err_set(RUMOR_ENODEV, "%s:%d: %d such device%s here (%s)",
                             kind == RUMOR_DEV_CPU ? "cpu" : "cuda", index, n, n == 1 ? "" : "s",
                             rumor_device_status(kind));
    if (kind == RUMOR_DEV_CPU) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        snprintf(out->name, sizeof out->name, "cpu");
        out->sms = rumor_cpu_cores();
        out->memory = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
        return 0;
    }
#ifdef HAVE_CUDA
    return rumor_cuda_info(index, out);
#else
    return rumor_err_set(RUMOR_ENOTSUP, "this rumor was built without CUDA");
#endif
}

/* Parses the ":N" after a device kind; "" means `dflt`. */
static int parse_index(const char *spec, const char *rest, int dflt, int *out)
{
    if (*rest == '\0') {
        *out = dflt;
        return 0;
    }
    char *end;
    long v = strtol(rest + 1, &end, 10);
    if (rest[0] != ':' || rest[1] == '\0' || *end != '\0' || v < 0 || v > 4096)
        return rumor_err_set(RUMOR_EINVAL,
                             "device '%s': expected cpu, cpu:THREADS[:slow=X], cuda, cuda:INDEX[:PRECISION] "
                             "or auto", spec);
    *out = (int)v;
    return 0;
}

static int open_cpu(rumor_device_t *d, int threads)
{
    d->kind = RUMOR_DEV_CPU;
    d->index = 0;
    d->nthreads = threads > 0 ? threads : rumor_cpu_cores();
    rumor_blas_set_threads(d->nthreads); /* once here, never per GEMM */
    d->ops = &rumor_cpu_ops;
    snprintf(d->name, sizeof d->name, "cpu (%d thread%s, OpenBLAS %s)", d->nthreads,
             d->nthreads == 1 ? "" : "s", rumor_blas_corename());
    return 0;
}

static int open_cuda(rumor_device_t *d, const char *spec, int index)
{
#ifdef HAVE_CUDA
    int n = rumor_cuda_device_count();
    if (n == 0)
        return rumor_err_set(RUMOR_ENODEV, "device '%s': no CUDA GPU is visible (%s)", spec,
                             rumor_cuda_status());
    if (index >= n)
        return rumor_err_set(RUMOR_ENODEV, "device '%s': only %d CUDA GPU%s visible", spec, n,
                             n == 1 ? " is" : "s are");
    d->kind = RUMOR_DEV_CUDA;
    d->index = index;
    d->nthreads = 1;
    RUMOR_CHECK(rumor_cuda_open(d, index));
    return 0;
#else
    (void)d;
    (void)index;
    return rumor_err_set(RUMOR_ENOTSUP,
                         "device '%s': this rumor was built without CUDA (configure --with-cuda)",
                         spec);
#endif
}

/* Opens spec's device, or with dry only checks that spec parses. */
static int device_open(const char *spec, rumor_device_t **out, int dry)
{
    if (out)
        *out = NULL;
    if (!spec || !*spec)
        spec = "auto";
    rumor_device_t *d = calloc(1, sizeof *d);
    if (!d)
        return rumor_err_set(RUMOR_ENOMEM, "device: out of memory");
    int rc, idx;
    if (strcmp(spec, "auto") == 0 && dry) {
        rc = 0;
    } else if (strcmp(spec, "auto") == 0) {
        /* The first GPU when one works; the CPU otherwise, saying why. */
        rc = -1;
        if (rumor_device_count(RUMOR_DEV_CUDA) > 0) {
            rc = open_cuda(d, spec, 0);
            if (rc < 0)
                rumor_info("device auto: %s; using the CPU", rumor_err_msg());
        }
        if (rc < 0) {
            memset(d, 0, sizeof *d);
            rc = open_cpu(d, 0);
        }
        d->slowdown = 1.0;
    } else if (strncmp(spec, "cpu", 3) == 0) {
        /* cpu[:THREADS][:slow=X] */
        char head[64];
        const char *slow = strstr(spec, ":slow=");
        double factor = 1.0;
        if (slow) {
            char *end;
            factor = strtod(slow + 6, &end);
            if (end == slow + 6 || *end || !(factor >= 1.0 && factor <= 100.0))
                rc = rumor_err_set(RUMOR_EINVAL, "device '%s': slow=X must be a number in "
                                   "[1, 100]", spec);
            else
                rc = 0;
            snprintf(head, sizeof head, "%.*s", (int)(slow - spec), spec);
        } else {
            snprintf(head, sizeof head, "%s", spec);
            rc = 0;
        }
        if (rc == 0)
            rc = parse_index(spec, head + 3, 0, &idx);
        if (rc == 0 && head[3] == ':' && idx == 0)
            rc = rumor_err_set(RUMOR_EINVAL, "device '%s': thread count must be at least 1", spec);
        if (rc == 0 && !dry)
            rc = open_cpu(d, idx);
        if (rc == 0 && !dry && factor > 1.0) {
            size_t len = strlen(d->name);
            snprintf(d->name + len - 1, sizeof d->name - len + 1, ", %gx slower)", factor);
        }
        d->slowdown = factor;
    } else if (strncmp(spec, "cuda", 4) == 0) {
        /* cuda[:N][:fp32|:tf32|:bf16] */
        char head[64];
        rumor_precision prec = RUMOR_PREC_FP32;
        const char *last = strrchr(spec, ':');
        int with_prec = last && (!strcmp(last, ":fp32") || !strcmp(last, ":tf32") ||
                                 !strcmp(last, ":bf16"));
        snprintf(head, sizeof head, "%.*s", with_prec ? (int)(last - spec) : 63, spec);
        rc = with_prec ? rumor_precision_parse(last + 1, &prec) : 0;
        if (rc == 0)
            rc = parse_index(spec, head + 4, 0, &idx);
        if (rc == 0 && !dry)
            rc = open_cuda(d, spec, idx);
        if (rc == 0 && !dry && with_prec && (rc = rumor_device_set_precision(d, prec)) < 0) {
#ifdef HAVE_CUDA
            rumor_cuda_close(d);
#endif
        }
        d->slowdown = 1.0;
    } else {
        rc = rumor_err_set(RUMOR_EINVAL,
                           "device '%s': expected cpu, cpu:THREADS[:slow=X], cuda, cuda:INDEX[:PRECISION] or auto",
                           spec);
    }
    if (rc < 0 || dry) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int rumor_device_open(const char *spec, rumor_device_t **out)
{
    return device_open(spec, out, 0);
}

int rumor_device_check_spec(const char *spec)
{
    return device_open(spec, NULL, 1);
}

void rumor_device_close(rumor_device_t **dp)
{
    if (!dp || !*dp)
        return;
#ifdef HAVE_CUDA
    if ((*dp)->kind == RUMOR_DEV_CUDA)
        rumor_cuda_close(*dp);
#endif
    free(*dp);
    *dp = NULL;
}

/* ----------------------------------------------------------- precision */

static const char *const prec_names[] = { "fp32", "tf32", "bf16" };

const char *rumor_precision_name(rumor_precision p)
{
    return (unsigned)p < 3 ? prec_names[p] : "?";
}

int rumor_precision_parse(const char *s, rumor_precision *out)
{
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, prec_names[i]) == 0) {
            *out = (rumor_precision)i;
            return 0;
        }
    return rumor_err_set(RUMOR_EINVAL, "precision '%s': expected fp32, tf32 or bf16",
                         s ? s : "");
}

int rumor_device_set_precision(rumor_device_t *d, rumor_precision p)
{
    if ((unsigned)p > RUMOR_PREC_BF16)
        return rumor_err_set(RUMOR_EINVAL, "%s: precision %d", d->name, (int)p);
    if (p == RUMOR_PREC_FP32 || d->kind == RUMOR_DEV_CPU) {
        if (p != RUMOR_PREC_FP32)
            return rumor_err_set(RUMOR_ENOTSUP, "%s: computes in fp32 only (%s needs a GPU's "
                                 "tensor cores)", d->name, rumor_precision_name(p));
        d->precision = p;
        return 0;
    }
#ifdef HAVE_CUDA
    return rumor_cuda_set_precision(d, p);
#else
    return rumor_err_set(RUMOR_ENOTSUP, "%s: %s", d->name, rumor_precision_name(p));
#endif
}

/* ------------------------------------------------- copies between devices */

int rumor_device_same_memory(const rumor_device_t *a, const rumor_device_t *b)
{
    if (a->kind != b->kind)
        return 0;
    return a->kind == RUMOR_DEV_CPU || a->index == b->index;
}

int rumor_device_copy(rumor_device_t *dd, void *dst, rumor_device_t *sd, const void *src,
                      size_t bytes)
{
    if (!bytes)
        return 0;
    if (dd->kind == RUMOR_DEV_CPU && sd->kind == RUMOR_DEV_CPU)
        return dd->ops->copy(dd, dst, src, bytes);
    if (dd->kind == RUMOR_DEV_CPU) /* waits for what sd has queued */
        return sd->ops->download(sd, dst, src, bytes);
    if (sd->kind == RUMOR_DEV_CPU)
        return dd->ops->upload(dd, dst, src, bytes);
    /* two GPUs, or two streams of one: what sd queued first, then the copy
     * on dd's stream, done before returning */
    RUMOR_CHECK(sd->ops->sync(sd));
    RUMOR_CHECK(dd->ops->copy_peer(dd, dst, sd, src, bytes, NULL));
    return dd->ops->sync(dd);
}
