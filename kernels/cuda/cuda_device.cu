/* CUDA devices: discovery, the context, memory, streams and events, and the
 * ops table (see cuda_backend.h and cuda_int.h).
 *
 * A rumor device on a GPU owns one non-blocking stream and one cuBLAS
 * handle; opening the same GPU twice (two pipeline stages on cuda:0) gives
 * two streams, so their work may overlap. Memory ops are ordered on the
 * current stream: upload and download return when the bytes have landed (the
 * host buffer may be reused), copy and the math ops are queued. */
#include "config.h" /* HAVE_NCCL: the table's clique ops */

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_int.h"

static int probed = 0;
static int count = 0;
static char status[256] = "not probed";

extern "C" int rumor_cuda_device_count(void)
{
    if (!probed) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            snprintf(status, sizeof status, "%s", cudaGetErrorString(e));
            n = 0;
            (void)cudaGetLastError(); /* clear the error state */
        } else {
            snprintf(status, sizeof status, n ? "ok" : "no CUDA GPU found");
        }
        count = n;
        probed = 1;
    }
    return count;
}

extern "C" const char *rumor_cuda_status(void)
{
    rumor_cuda_device_count();
    return status;
}

/* ------------------------------------------------------------- errors */

const char *cu_blas_status(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate";
    case CUBLAS_STATUS_INVALID_VALUE: return "cuBLAS: invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "cuBLAS: not supported by this GPU";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "cuBLAS: execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "cuBLAS: not supported";
    default: return "cuBLAS error";
    }
}

static void keep(const rumor_device_t *d, const char *fmt, ...)
{
    cu_ctx *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    if (!c->failed) {
        c->failed = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, sizeof c->why, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&c->mu);
}

void cu_keep(const rumor_device_t *d, cudaError_t e, const char *what, const char *file, int line)
{
    if (e != cudaSuccess)
        keep(d, "%s: %s: %s (%s:%d)", d->name, what, cudaGetErrorString(e), file, line);
}

void cu_keep_blas(const rumor_device_t *d, cublasStatus_t s, const char *what, const char *file,
                  int line)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        keep(d, "%s: %s: %s (%s:%d)", d->name, what, cu_blas_status(s), file, line);
}

int cu_report(const rumor_device_t *d)
{
    cu_ctx *c = cu_of(d);
    char why[sizeof c->why];
    pthread_mutex_lock(&c->mu);
    int failed = c->failed;
    if (failed)
        memcpy(why, c->why, sizeof why);
    c->failed = 0;
    pthread_mutex_unlock(&c->mu);
    return failed ? rumor_err_set(RUMOR_ECUDA, "%s", why) : 0;
}

static __thread int current = -1;
static __thread int op_depth = 0;  /* ops inside ops count as the outer one */
static __thread float part_ms = 0; /* the outer op's parts, timed on their own */
int cu_profiling = -1;             /* -1: RUMOR_CUDA_PROFILE not read yet */
static int prof_shapes;            /* RUMOR_CUDA_PROFILE=shapes */

const char *cu_prof_shape(const char *fmt, ...)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char names[CU_PROF_MAX][64];
    static int n;
    if (cu_profiling != 1 || !prof_shapes)
        return NULL;
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const char *r = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n && !r; i++)
        if (strcmp(names[i], name) == 0)
            r = names[i];
    if (!r && n < CU_PROF_MAX / 2) { /* half the profile: room for the other ops */
        memcpy(names[n], name, sizeof name);
        r = names[n++];
    }
    pthread_mutex_unlock(&mu);
    return r;
}

static void prof_add(const rumor_device_t *d, const char *name, float ms)
{
    cu_ctx *c = cu_of(d);
    pthread_mutex_lock(&c->mu);
    int i = 0;
    while (i < c->nprof && strcmp(c->prof[i].name, name) != 0)
        i++;
    if (i < CU_PROF_MAX) {
        if (i == c->nprof) {
            c->prof[i].name = name;
            c->prof[i].first = ms;
            c->nprof++;
        } else {
            c->prof[i].ms += ms;
            c->prof[i].calls++;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* e0 recorded on d's stream: 1, or 0 when it could not be */
static int prof_start(const rumor_device_t *d, cudaEvent_t *e0)
{
    return cudaEventCreate(e0) == cudaSuccess && cudaEventRecord(*e0, cu_of(d)->cur) == cudaSuccess;
}

/* ms from e0 to now on d's stream (waiting for it); e0 destroyed */
static float prof_stop(const rumor_device_t *d, cudaEvent_t e0)
{
    cudaEvent_t e1;
    float ms = 0;
    if (cudaEventCreate(&e1) == cudaSuccess) {
        if (cudaEventRecord(e1, cu_of(d)->cur) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess)
            cudaEventElapsedTime(&ms, e0, e1);
        cudaEventDestroy(e1);
    }
    cudaEventDestroy(e0);
    return ms;
}

cu_op_scope::cu_op_scope(const rumor_device_t *dev, const char *op) : d(dev), name(op), e0(0), on(0)
{
    cu_enter(d);
    if (cu_profiling != 1 || op_depth++ > 0)
        return;
    part_ms = 0;
    on = prof_start(d, &e0);
}

cu_op_scope::~cu_op_scope()
{
    if (cu_profiling != 1)
        return;
    op_depth--;
    if (!on)
        return;
    float ms = prof_stop(d, e0) - part_ms;
    part_ms = 0;
    prof_add(d, name, ms > 0 ? ms : 0);
}

cu_part_scope::cu_part_scope(const rumor_device_t *dev, const char *part)
    : d(dev), name(part), e0(0), on(0)
{
    if (cu_profiling == 1 && op_depth == 1)
        on = prof_start(d, &e0);
}

cu_part_scope::~cu_part_scope()
{
    if (!on)
        return;
    float ms = prof_stop(d, e0);
    part_ms += ms;
    prof_add(d, name, ms);
}

/* The device's profile, the costliest op first, on stderr. */
static void prof_print(const rumor_device_t *d)
{
    cu_ctx *c = cu_of(d);
    double total = 0, first = 0;
    for (int i = 0; i < c->nprof; i++) {
        total += c->prof[i].ms;
        first += c->prof[i].first;
    }
    if (c->nprof == 0 || total + first <= 0)
        return;
    for (int i = 1; i < c->nprof; i++) /* few entries: insertion sort by time */
        for (int j = i; j > 0 && c->prof[j].ms > c->prof[j - 1].ms; j--) {
            struct cu_ctx::cu_prof t = c->prof[j];
            c->prof[j] = c->prof[j - 1];
            c->prof[j - 1] = t;
        }
    fprintf(stderr, "%s: op profile (RUMOR_CUDA_PROFILE): %.1f ms in ops after each op's first "
            "call, %.1f ms in first calls (loading kernels, growing scratch, one-off uploads)\n",
            d->name, total, first);
    fprintf(stderr, "  %-30s %10s %8s %10s %6s %10s\n", "op", "ms", "calls", "us/call", "share",
            "first ms");
    for (int i = 0; i < c->nprof; i++) {
        const struct cu_ctx::cu_prof *p = &c->prof[i];
        char per[32] = "-";
        if (p->calls > 0)
            snprintf(per, sizeof per, "%.1f", 1e3 * p->ms / (double)p->calls);
        fprintf(stderr, "  %-30s %10.2f %8ld %10s %5.1f%% %10.2f\n", p->name + 3 /* cu_ */, p->ms,
                p->calls, per, total > 0 ? 100.0 * p->ms / total : 0.0, p->first);
    }
}

void cu_enter(const rumor_device_t *d)
{
    if (current != d->index) {
        if (cudaSetDevice(d->index) == cudaSuccess)
            current = d->index;
    }
}

/* ------------------------------------------------------------- memory */

void *cu_alloc(rumor_device_t *d, size_t bytes)
{
    cu_enter(d);
    cu_ctx *c = cu_of(d);
    void *p = NULL;
    size_t n = bytes ? bytes : 64;
    CU_COUNT(d, n_malloc);
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        rumor_err_set(RUMOR_ENOMEM, "%s: cannot allocate %zu bytes: %s", d->name, bytes,
                      cudaGetErrorString(e));
        return NULL;
    }
    /* zeroed before any stream may use it */
    e = cudaMemsetAsync(p, 0, n, c->stream);
    CU_COUNT(d, n_host_wait);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        cudaFree(p);
        rumor_err_set(RUMOR_ECUDA, "%s: zeroing %zu bytes: %s", d->name, bytes,
                      cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void cu_free(rumor_device_t *d, void *p)
{
    if (!p)
        return;
    cu_enter(d);
    /* nothing queued may still read it, on any stream of the GPU (another
     * stage's, a link's): cudaFree waits for the whole device anyway. Not
     * in a step: a step allocates and frees nothing (test_cuda_train counts) */
    CU_COUNT(d, n_free);
    CU_COUNT(d, n_device_sync);
    CU_KEEP(d, cudaDeviceSynchronize());
    CU_KEEP(d, cudaFree(p));
}

int cu_upload(rumor_device_t *d, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return 0;
    CU_ENTER(d);
    cu_ctx *c = cu_of(d);
    RUMOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->cur));
    CU_COUNT(d, n_host_wait);
    RUMOR_CUDA_CHECK(cudaStreamSynchronize(c->cur));
    return cu_report(d);
}

int cu_download(rumor_device_t *d, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return cu_sync(d);
    CU_ENTER(d);
    cu_ctx *c = cu_of(d);
    RUMOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->cur));
    CU_COUNT(d, n_host_wait);
    RUMOR_CUDA_CHECK(cudaStreamSynchronize(c->cur));
    return cu_report(d);
}

int cu_copy(rumor_device_t *d, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return 0;
    CU_ENTER(d);
    RUMOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu_of(d)->cur));
    return 0;
}

int cu_sync(rumor_device_t *d)
{
    cu_enter(d);
    cu_ctx *c = cu_of(d);
    CU_COUNT(d, n_host_wait);
    cudaError_t e = cudaStreamSynchronize(c->cur);
    if (e == cudaSuccess && c->cur != c->stream)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess)
        return rumor_err_set(RUMOR_ECUDA, "%s: %s", d->name, cudaGetErrorString(e));
    return cu_report(d);
}

/* ------------------------------------------------------ streams, events */

static cudaStream_t stream_of(const rumor_device_t *d, rumor_stream_t *s)
{
    return s ? (cudaStream_t)s : cu_of(d)->stream;
}

static int cu_stream_create(rumor_device_t *d, rumor_stream_t **out)
{
    cu_enter(d);
    cudaStream_t s;
    RUMOR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = (rumor_stream_t *)s;
    return 0;
}

static void cu_stream_destroy(rumor_device_t *d, rumor_stream_t *s)
{
    if (!s)
        return;
    cu_enter(d);
    cu_ctx *c = cu_of(d);
    if (c->cur == (cudaStream_t)s) {
        c->cur = c->stream;
        CUBLAS_KEEP(d, cublasSetStream(c->blas, c->cur));
    }
    CU_KEEP(d, cudaStreamDestroy((cudaStream_t)s));
}

static int cu_set_stream(rumor_device_t *d, rumor_stream_t *s)
{
    cu_enter(d);
    cu_ctx *c = cu_of(d);
    c->cur = stream_of(d, s);
    RUMOR_CUBLAS_CHECK(cublasSetStream(c->blas, c->cur));
    return 0;
}

static int cu_stream_sync(rumor_device_t *d, rumor_stream_t *s)
{
    cu_enter(d);
    CU_COUNT(d, n_host_wait);
    RUMOR_CUDA_CHECK(cudaStreamSynchronize(stream_of(d, s)));
    return cu_report(d);
}

static int cu_event_create(rumor_device_t *d, rumor_event_t **out)
{
    cu_enter(d);
    cudaEvent_t e;
    RUMOR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *out = (rumor_event_t *)e;
    return 0;
}

static void cu_event_destroy(rumor_device_t *d, rumor_event_t *e)
{
    if (!e)
        return;
    cu_enter(d);
    CU_KEEP(d, cudaEventDestroy((cudaEvent_t)e));
}

static int cu_event_record(rumor_device_t *d, rumor_event_t *e, rumor_stream_t *s)
{
    cu_enter(d);
    RUMOR_CUDA_CHECK(cudaEventRecord((cudaEvent_t)e, stream_of(d, s)));
    return 0;
}

static int cu_stream_wait(rumor_device_t *d, rumor_stream_t *s, rumor_event_t *e)
{
    cu_enter(d);
    RUMOR_CUDA_CHECK(cudaStreamWaitEvent(stream_of(d, s), (cudaEvent_t)e, 0));
    return 0;
}

static int cu_event_sync(rumor_device_t *d, rumor_event_t *e)
{
    cu_enter(d);
    if (cudaEventQuery((cudaEvent_t)e) == cudaSuccess) /* done: no wait */
        return cu_report(d);
    CU_COUNT(d, n_host_wait);
    RUMOR_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)e));
    return cu_report(d);
}

/* cudaErrorNotReady is an answer, not a failure: it is not kept as the
 * device's first error */
static int cu_event_query(rumor_device_t *d, rumor_event_t *e)
{
    cu_enter(d);
    cudaError_t rc = cudaEventQuery((cudaEvent_t)e);
    if (rc == cudaErrorNotReady)
        return 0;
    if (rc != cudaSuccess)
        return rumor_err_set(RUMOR_ECUDA, "cudaEventQuery: %s", cudaGetErrorString(rc));
    int r = cu_report(d);
    return r < 0 ? r : 1;
}

static int cu_upload_async(rumor_device_t *d, void *dst, const void *src, size_t bytes,
                           rumor_stream_t *s)
{
    if (!bytes)
        return 0;
    cu_enter(d);
    RUMOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(d, s)));
    return 0;
}

static int cu_download_async(rumor_device_t *d, void *dst, const void *src, size_t bytes,
                             rumor_stream_t *s)
{
    if (!bytes)
        return 0;
    cu_enter(d);
    RUMOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(d, s)));
    return 0;
}

static int cu_copy_peer(rumor_device_t *dd, void *dst, rumor_device_t *sd, const void *src,
                        size_t bytes, rumor_stream_t *s)
{
    if (!bytes)
        return 0;
    if (sd->kind != RUMOR_DEV_CUDA)
        return rumor_err_set(RUMOR_EINVAL, "%s: copy_peer from %s, not a GPU", dd->name, sd->name);
    cu_enter(dd);
    cudaStream_t st = stream_of(dd, s);
    if (dd->index == sd->index)
        RUMOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    else
        RUMOR_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dd->index, src, sd->index, bytes, st));
    return 0;
}

static void *cu_host_alloc(rumor_device_t *d, size_t bytes)
{
    cu_enter(d);
    void *p = NULL;
    CU_COUNT(d, n_malloc);
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 64);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        rumor_err_set(RUMOR_ENOMEM, "%s: cannot allocate %zu bytes of page-locked host memory: %s",
                      d->name, bytes, cudaGetErrorString(e));
        return NULL;
    }
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

static void cu_host_free(rumor_device_t *d, void *p)
{
    if (!p)
        return;
    cu_enter(d);
    CU_COUNT(d, n_free);
    CU_COUNT(d, n_device_sync);
    CU_KEEP(d, cudaDeviceSynchronize()); /* no copy may still read it */
    CU_KEEP(d, cudaFreeHost(p));
}

static int cu_supports(const rumor_device_t *d, rumor_cap cap)
{
    const cu_ctx *c = cu_of(d);
    switch (cap) {
    case RUMOR_CAP_ASYNC_COPY:
    case RUMOR_CAP_PEER_COPY:
    case RUMOR_CAP_PINNED:
        return 1;
    case RUMOR_CAP_BF16:
    case RUMOR_CAP_TF32:
        return c->cc_major >= 8; /* tensor cores for them: Ampere and later */
    default:
        return 0;
    }
}

static void cu_counters(const rumor_device_t *d, rumor_dev_counters_t *out)
{
    cu_ctx *c = cu_of(d);
    out->mallocs = __atomic_load_n(&c->n_malloc, __ATOMIC_RELAXED);
    out->frees = __atomic_load_n(&c->n_free, __ATOMIC_RELAXED);
    out->device_syncs = __atomic_load_n(&c->n_device_sync, __ATOMIC_RELAXED);
    out->host_waits = __atomic_load_n(&c->n_host_wait, __ATOMIC_RELAXED);
}

static const rumor_ops_t rumor_cuda_ops = {
    .name = "cuda",
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .copy = cu_copy,
    .sync = cu_sync,
    .gemm = cu_gemm,
    .add_bias = cu_add_bias,
    .sum_rows = cu_sum_rows,
    .axpy = cu_axpy,
    .scale = cu_scale,
    .relu_forward = cu_relu_forward,
    .relu_backward = cu_relu_backward,
    .gelu_forward = cu_gelu_forward,
    .gelu_backward = cu_gelu_backward,
    .gemm_bias_gelu = cu_gemm_bias_gelu,
    .gemm_dgelu = cu_gemm_dgelu,
    .dropout_forward = cu_dropout_forward,
    .dropout_backward = cu_dropout_backward,
    .softmax_xent = cu_softmax_xent,
    .sgd_step = cu_sgd_step,
    .adamw_step = cu_adamw_step,
    .fill = cu_fill,
    .add = cu_add,
    .axpby = cu_axpby,
    .axpy_dist = cu_axpy_dist,
    .sumsq = cu_sumsq,
    .gemm_batched = cu_gemm_batched,
    .layernorm_forward = cu_layernorm_forward,
    .layernorm_backward_x = cu_layernorm_backward_x,
    .layernorm_backward_w = cu_layernorm_backward_w,
    .attention_forward = cu_attention_forward,
    .attention_backward = cu_attention_backward,
    .embed_forward = cu_embed_forward,
    .embed_backward = cu_embed_backward,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .set_stream = cu_set_stream,
    .stream_sync = cu_stream_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .stream_wait = cu_stream_wait,
    .event_sync = cu_event_sync,
    .event_query = cu_event_query,
    .upload_async = cu_upload_async,
    .download_async = cu_download_async,
    .copy_peer = cu_copy_peer,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .supports = cu_supports,
    .counters = cu_counters,
#ifdef HAVE_NCCL
    .clique_open = cu_clique_open,
    .clique_close = cu_clique_close,
    .clique_copy = cu_clique_copy,
#endif
};

/* ------------------------------------------------------- open and close */

static void ctx_free(cu_ctx *c)
{
    if (!c)
        return;
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->red)
        cudaFree(c->red);
    if (c->sr_part)
        cudaFree(c->sr_part);
    cu_matmul_free(c);
    cu_lt_free(c);
    if (c->red_host)
        cudaFreeHost(c->red_host);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int ctx_open(rumor_device_t *d, int index, cu_ctx *c)
{
    cudaDeviceProp prop;
    RUMOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    snprintf(d->name, sizeof d->name, "cuda:%d (%s)", index, prop.name);
    c->index = index;
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    c->sm_count = prop.multiProcessorCount;
    RUMOR_CUDA_CHECK(cudaSetDevice(index));
    current = index;
    RUMOR_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    c->cur = c->stream;
    RUMOR_CUBLAS_CHECK(cublasCreate(&c->blas));
    RUMOR_CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    RUMOR_CUDA_CHECK(cudaMalloc((void **)&c->red, (CU_RED_BLOCKS + 1) * 2 * sizeof(double)));
    RUMOR_CUDA_CHECK(cudaMallocHost((void **)&c->red_host, 2 * sizeof(double)));
    /* sum_rows' partial column sums, once: no step allocates */
    RUMOR_CUDA_CHECK(cudaMalloc((void **)&c->sr_part, CU_SR_PART * sizeof(float)));
    cudaError_t e = cudaSuccess;
    RUMOR_CUDA_CHECK(e);
    return 0;
}

extern "C" int rumor_cuda_open(rumor_device_t *d, int index)
{
    if (cu_profiling < 0) {
        const char *e = getenv("RUMOR_CUDA_PROFILE");
        cu_profiling = e && *e && strcmp(e, "0") != 0;
        prof_shapes = e && strcmp(e, "shapes") == 0;
    }
    cu_ctx *c = (cu_ctx *)calloc(1, sizeof *c);
    if (!c)
        return rumor_err_set(RUMOR_ENOMEM, "cuda:%d: out of memory", index);
    pthread_mutex_init(&c->mu, NULL);
    d->ctx = c;
    d->ops = &rumor_cuda_ops;
    d->precision = RUMOR_PREC_FP32;
    int rc = ctx_open(d, index, c);
    if (rc < 0) {
        ctx_free(c);
        d->ctx = NULL;
        d->ops = NULL;
        return rumor_err_prefix(rc, "cuda:%d", index);
    }
    return 0;
}

extern "C" void rumor_cuda_close(rumor_device_t *d)
{
    cu_ctx *c = cu_of(d);
    if (!c)
        return;
    cu_enter(d);
    cudaStreamSynchronize(c->stream);
    prof_print(d);
    ctx_free(c);
    d->ctx = NULL;
}

extern "C" int rumor_cuda_info(int index, rumor_device_info_t *out)
{
    cudaDeviceProp prop;
    RUMOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->sms = prop.multiProcessorCount;
    out->memory = prop.totalGlobalMem;
    return 0;
}

extern "C" int rumor_cuda_set_precision(rumor_device_t *d, rumor_precision p)
{
    if (p != RUMOR_PREC_FP32 && !cu_supports(d, p == RUMOR_PREC_BF16 ? RUMOR_CAP_BF16
                                                                     : RUMOR_CAP_TF32))
        return rumor_err_set(RUMOR_ENOTSUP, "%s: no tensor cores for %s (compute capability "
                             "%d.%d; 8.0 or later has them)", d->name,
                             p == RUMOR_PREC_BF16 ? "bf16" : "tf32", cu_of(d)->cc_major,
                             cu_of(d)->cc_minor);
    d->precision = p;
    return 0;
}
