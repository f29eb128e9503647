/* GEMM through the ops table, against cblas_sgemm and the CPU's FMA peak.
 *
 * Three figures for each shape and thread count (1 and 2):
 *   gemm_ops_*   dev->ops->gemm on "cpu:T", in GFLOP/s
 *   gemm_cblas_* a direct cblas_sgemm with OpenBLAS at T threads
 *   gemm_ops_vs_cblas_*, gemm_vs_peak_*: the ratios
 * and the peak itself, fma_peak_1t and fma_peak_2t, measured in the same run
 * by a kernel of independent vfmadd231ps chains (zmm with AVX-512F, else ymm).
 *
 * This VM's speed drifts up to 2x within minutes, so nothing is compared
 * across time: each sample is a triple (peak, ops, cblas) run back to back,
 * and a ratio is the median of the per-triple ratios. Shapes: n x n x n for n = 256..2048, and the
 * MLP's forward GEMMs MxKxN = 128x784x256 and 128x256x256 (B transposed, as
 * the layers store weights (out, in)). `bench_gemm -v` prints every sample. */
#include "config.h"

#include <cblas.h>
#include <cpuid.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blas_tune.h"
#include "err.h"
#include "log.h"
#include "ops.h"
#include "bench_util.h"

enum { REPS = 9, MAX_SAMPLES = 128 }; /* samples per shape and thread count */
static const double SAMPLE_S = 0.04; /* time one GEMM sample runs for */
static const double PEAK_S = 0.05;   /* time one peak sample runs for */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ FMA peak */

typedef enum { ISA_NONE, ISA_AVX2, ISA_AVX512 } isa_t;

/* AVX-512F with ZMM state enabled by the OS, else AVX2+FMA with YMM state. */
static isa_t detect_isa(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 12)))
        return ISA_NONE; /* no OSXSAVE or no FMA */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return ISA_NONE;
    if ((b & (1u << 16)) && (lo & 0xe6) == 0xe6)
        return ISA_AVX512;
    if ((b & (1u << 5)) && (lo & 0x6) == 0x6)
        return ISA_AVX2;
    return ISA_NONE;
}

/* 12 independent accumulators: an FMA's latency (4 cycles) times two FMA
 * pipes needs at least 8 chains in flight. Written in asm so the compiler
 * cannot merge or drop them; `iters` arrives in a register it cannot know,
 * and the accumulators are stored to `out` for the caller to consume. */
static void fma_loop_zmm(uint64_t iters, float *out /* 12*16 */)
{
    static const float one = 1.0f, tiny = 1e-9f;
    __asm__ volatile(
        "vbroadcastss %[one], %%zmm12\n\t"
        "vbroadcastss %[tiny], %%zmm13\n\t"
        "vxorps %%xmm0, %%xmm0, %%xmm0\n\t"
        "vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t"
        "vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t vmovaps %%zmm0, %%zmm6\n\t"
        "vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t vmovaps %%zmm0, %%zmm9\n\t"
        "vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n\t"
        ".p2align 5\n"
        "1:\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm0\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm1\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm2\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm3\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm4\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm5\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm6\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm7\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm8\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm9\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm10\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm11\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "vmovups %%zmm0, 0(%[out])\n\t vmovups %%zmm1, 64(%[out])\n\t"
        "vmovups %%zmm2, 128(%[out])\n\t vmovups %%zmm3, 192(%[out])\n\t"
        "vmovups %%zmm4, 256(%[out])\n\t vmovups %%zmm5, 320(%[out])\n\t"
        "vmovups %%zmm6, 384(%[out])\n\t vmovups %%zmm7, 448(%[out])\n\t"
        "vmovups %%zmm8, 512(%[out])\n\t vmovups %%zmm9, 576(%[out])\n\t"
        "vmovups %%zmm10, 640(%[out])\n\t vmovups %%zmm11, 704(%[out])\n\t"
        "vzeroupper\n\t"
        : [n] "+r"(iters)
        : [out] "r"(out), [one] "m"(one), [tiny] "m"(tiny)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "memory", "cc");
}

static void fma_loop_ymm(uint64_t iters, float *out /* 12*8 */)
{
    static const float one = 1.0f, tiny = 1e-9f;
    __asm__ volatile(
        "vbroadcastss %[one], %%ymm12\n\t"
        "vbroadcastss %[tiny], %%ymm13\n\t"
        "vxorps %%xmm0, %%xmm0, %%xmm0\n\t"
        "vmovaps %%ymm0, %%ymm1\n\t vmovaps %%ymm0, %%ymm2\n\t vmovaps %%ymm0, %%ymm3\n\t"
        "vmovaps %%ymm0, %%ymm4\n\t vmovaps %%ymm0, %%ymm5\n\t vmovaps %%ymm0, %%ymm6\n\t"
        "vmovaps %%ymm0, %%ymm7\n\t vmovaps %%ymm0, %%ymm8\n\t vmovaps %%ymm0, %%ymm9\n\t"
        "vmovaps %%ymm0, %%ymm10\n\t vmovaps %%ymm0, %%ymm11\n\t"
        ".p2align 5\n"
        "1:\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "vmovups %%ymm0, 0(%[out])\n\t vmovups %%ymm1, 32(%[out])\n\t"
        "vmovups %%ymm2, 64(%[out])\n\t vmovups %%ymm3, 96(%[out])\n\t"
        "vmovups %%ymm4, 128(%[out])\n\t vmovups %%ymm5, 160(%[out])\n\t"
        "vmovups %%ymm6, 192(%[out])\n\t vmovups %%ymm7, 224(%[out])\n\t"
        "vmovups %%ymm8, 256(%[out])\n\t vmovups %%ymm9, 288(%[out])\n\t"
        "vmovups %%ymm10, 320(%[out])\n\t vmovups %%ymm11, 352(%[out])\n\t"
        "vzeroupper\n\t"
        : [n] "+r"(iters)
        : [out] "r"(out), [one] "m"(one), [tiny] "m"(tiny)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "memory", "cc");
}

static isa_t isa;
static volatile float sink; /* where the accumulators end up */

/* FLOPs one loop iteration does: 12 FMAs of 16 (zmm) or 8 (ymm) lanes. */
static double flops_per_iter(void)
{
    return 12.0 * 2.0 * (isa == ISA_AVX512 ? 16 : 8);
}

static void fma_run(uint64_t iters)
{
    float acc[12 * 16];
    if (isa == ISA_AVX512)
        fma_loop_zmm(iters, acc);
    else
        fma_loop_ymm(iters, acc);
    float s = 0;
    for (int i = 0; i < 12 * 16; i += 7)
        s += acc[i];
    sink = s;
}

typedef struct {
    int cpu;               /* core to pin to, -1 for none */
    uint64_t iters;
    pthread_barrier_t *go;
    double t0, t1;
} peak_arg;

static void *peak_thread(void *p)
{
    peak_arg *a = p;
    if (a->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(a->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    fma_run(1000); /* wake the vector units before the clock starts */
    pthread_barrier_wait(a->go);
    a->t0 = now();
    fma_run(a->iters);
    a->t1 = now();
    return NULL;
}

static int cores[2] = { -1, -1 }; /* the first two cores this process may use */

/* One sample of the peak on `threads` threads, one per core, in GFLOP/s. */
static double peak_sample(int threads, uint64_t iters)
{
    pthread_t th[2];
    peak_arg a[2];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        a[i] = (peak_arg){ .cpu = cores[i], .iters = iters, .go = &go };
        pthread_create(&th[i], NULL, peak_thread, &a[i]);
    }
    double t0 = 1e300, t1 = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        t0 = a[i].t0 < t0 ? a[i].t0 : t0;
        t1 = a[i].t1 > t1 ? a[i].t1 : t1;
    }
    pthread_barrier_destroy(&go);
    return threads * (double)iters * flops_per_iter() / (t1 - t0) * 1e-9;
}

/* Iterations for about PEAK_S seconds of one thread. */
static uint64_t peak_iters;

/* The peak right now. After a multi-threaded call OpenBLAS's worker threads
 * spin (sched_yield) for about 2^28 cycles before they sleep, and would steal
 * cycles from the FMA threads: wait them out first. */
static double peak_now(int threads)
{
    if (threads > 1)
        sleep_s(0.15);
    return peak_sample(threads, peak_iters);
}

static void print_load(const char *when)
{
    FILE *f = fopen("/proc/loadavg", "r");
    char buf[64] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    printf("# load average %s: %s (other work on these cores skews every figure)\n", when,
           buf);
}

/* ---------------------------------------------------------------- GEMM */

typedef struct {
    const char *name; /* "1024", "128x784x256" */
    int m, k, n, tb;
} shape;

typedef struct {
    rumor_device_t *dev;
    const shape *s;
    const float *a, *b;
    float *c;
} gemm_job;

static void run_ops(const gemm_job *j)
{
    const shape *s = j->s;
    j->dev->ops->gemm(j->dev, 0, s->tb, s->m, s->n, s->k, 1.0f, j->a, s->k, j->b,
                      s->tb ? s->k : s->n, 0.0f, j->c, s->n);
}

static void run_cblas(const gemm_job *j)
{
    const shape *s = j->s;
    /* The same thread count the device uses; rumor_blas_set_threads and not
     * openblas_set_num_threads, so the two never disagree about it. */
    rumor_blas_set_threads(j->dev->nthreads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->m, s->n,
                s->k, 1.0f, j->a, s->k, j->b, s->tb ? s->k : s->n, 0.0f, j->c, s->n);
}

/* Calls `fn` until SAMPLE_S has passed; GFLOP/s. */
static double gemm_sample(void (*fn)(const gemm_job *), const gemm_job *j)
{
    double flops = 2.0 * j->s->m * j->s->n * j->s->k;
    long calls = 0;
    double t0 = now(), t;
    do {
        fn(j);
        calls++;
        t = now();
    } while (t - t0 < SAMPLE_S);
    return calls * flops / (t - t0) * 1e-9;
}

static void fill(float *x, size_t n)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)(s >> 40) * (1.0f / 16777216.0f) - 0.5f;
    }
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0; /* print every sample */
    const char *from = getenv("RUMOR_BLAS_AUTOTUNED_FROM");
    printf("# openblas core: %s", rumor_blas_corename());
    if (from)
        printf(" (autotuned from %s)", from);
    printf("\n");

    /* The first two cores we may run on, for the peak threads. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &set))
                cores[k++] = c;
    if (cores[1] < 0)
        printf("# only one core: the 2-thread figures share it\n");

    isa = detect_isa();
    if (isa == ISA_NONE) {
        printf("# no AVX2/FMA: the FMA peak is not measured\n");
    } else {
        printf("# fma peak kernel: %s, 12 accumulators\n",
               isa == ISA_AVX512 ? "zmm vfmadd231ps (AVX-512F)" : "ymm vfmadd231ps (AVX2)");
        /* Calibrate: iterations for PEAK_S seconds on one thread. */
        uint64_t it = 1 << 16;
        for (;;) {
            double t0 = now();
            fma_run(it);
            double dt = now() - t0;
            if (dt > 0.01) {
                peak_iters = (uint64_t)(it * PEAK_S / dt) + 1;
                break;
            }
            it *= 4;
        }
    }

    static const shape shapes[] = {
        { "256", 256, 256, 256, 0 },          { "512", 512, 512, 512, 0 },
        { "1024", 1024, 1024, 1024, 0 },      { "2048", 2048, 2048, 2048, 0 },
        { "128x784x256", 128, 784, 256, 1 },  { "128x256x256", 128, 256, 256, 1 },
    };
    size_t amax = 0, bmax = 0, cmax = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        amax = (size_t)s->m * s->k > amax ? (size_t)s->m * s->k : amax;
        bmax = (size_t)s->k * s->n > bmax ? (size_t)s->k * s->n : bmax;
        cmax = (size_t)s->m * s->n > cmax ? (size_t)s->m * s->n : cmax;
    }

    /* Every peak sample of each thread count, for fma_peak_1t and _2t. */
    double peaks[2][MAX_SAMPLES];
    int npeaks[2] = { 0, 0 };
    double t_start = now();
    print_load("before");

    for (int threads = 1; threads <= 2; threads++) {
        char spec[16];
        snprintf(spec, sizeof spec, "cpu:%d", threads);
        rumor_device_t *dev = NULL;
        if (rumor_device_open(spec, &dev) < 0) {
            fprintf(stderr, "bench_gemm: %s\n", rumor_err_msg());
            return 1;
        }
        /* CPU memory from the ops table is host memory (ops.h). */
        float *a = dev->ops->alloc(dev, amax * sizeof(float));
        float *b = dev->ops->alloc(dev, bmax * sizeof(float));
        float *c = dev->ops->alloc(dev, cmax * sizeof(float));
        if (!a || !b || !c) {
            fprintf(stderr, "bench_gemm: %s\n", rumor_err_msg());
            return 1;
        }
        fill(a, amax);
        fill(b, bmax);
        printf("# device: %s\n", dev->name);

        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const shape *s = &shapes[si];
            gemm_job j = { dev, s, a, b, c };
            run_ops(&j); /* warm: OpenBLAS's buffers, page faults */
            run_cblas(&j);
            double ops[REPS], cb[REPS], vs_cb[REPS], vs_pk[REPS];
            for (int r = 0; r < REPS; r++) {
                double pk = isa != ISA_NONE ? peak_now(threads) : 0;
                /* Alternate which goes first, so neither always follows. */
                if (r % 2 == 0) {
                    ops[r] = gemm_sample(run_ops, &j);
                    cb[r] = gemm_sample(run_cblas, &j);
                } else {
                    cb[r] = gemm_sample(run_cblas, &j);
                    ops[r] = gemm_sample(run_ops, &j);
                }
                vs_cb[r] = ops[r] / cb[r];
                if (verbose)
                    printf("# %s %dt sample %d: peak %.1f ops %.1f cblas %.1f GFLOP/s\n",
                           s->name, threads, r, pk, ops[r], cb[r]);
                if (isa != ISA_NONE) {
                    vs_pk[r] = ops[r] / pk;
                    peaks[threads - 1][npeaks[threads - 1]++] = pk;
                }
            }
            printf("bench: gemm_ops_%s_%dt = %.1f GFLOP/s\n", s->name, threads,
                   bench_median(ops, REPS));
            printf("bench: gemm_cblas_%s_%dt = %.1f GFLOP/s\n", s->name, threads,
                   bench_median(cb, REPS));
            printf("bench: gemm_ops_vs_cblas_%s_%dt = %.3f x\n", s->name, threads,
                   bench_median(vs_cb, REPS));
            if (isa != ISA_NONE)
                printf("bench: gemm_vs_peak_%s_%dt = %.3f x\n", s->name, threads,
                       bench_median(vs_pk, REPS));
            fflush(stdout);
        }
        dev->ops->free(dev, a);
        dev->ops->free(dev, b);
        dev->ops->free(dev, c);
        rumor_device_close(&dev);
    }
    if (isa != ISA_NONE) {
        printf("bench: fma_peak_1t = %.1f GFLOP/s\n", bench_median(peaks[0], npeaks[0]));
        double p1 = bench_median(peaks[0], npeaks[0]), p2 = bench_median(peaks[1], npeaks[1]);
        printf("bench: fma_peak_2t = %.1f GFLOP/s\n", p2);
        /* Two cores of our own give twice one core; much less means other
         * processes ran on them and the 2-thread figures are not GEMM's. */
        if (cores[1] >= 0 && p2 < 1.8 * p1)
            printf("# warning: fma_peak_2t is %.2f x fma_peak_1t: the cores were shared, "
                   "so the 2-thread figures are unreliable\n", p2 / p1);
    }
    printf("# target: gemm_vs_peak_1024_2t >= 0.85\n");
    print_load("after");
    printf("# bench_gemm: %.1f s\n", now() - t_start);
    return 0;
}
