/* bench_cuda's attention figures: the ops table's causal attention,
 * forward and backward, on the GPT's shapes in the device's precision,
 * against PyTorch's scaled_dot_product_attention (flash) on the same
 * shapes in bf16, run in the same call (tests/bench/torch_gpt_cuda.py
 * attn_sdpa). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cuda.h"
#include "bench_util.h"
#include "log.h"
#include "rng.h"

#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

static float *device_random(rumor_device_t *d, size_t n, uint64_t seed)
{
    float *h = malloc(n * sizeof *h), *g = d->ops->alloc(d, n * sizeof *g);
    if (!h || !g)
        bc_die("attention buffers");
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((double)(rumor_splitmix64(&seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    if (d->ops->upload(d, g, h, n * sizeof *g) < 0)
        bc_die("upload");
    free(h);
    return g;
}

/* PyTorch's SDPA forward + backward in ms (and the forward's), 0 if none */
static double torch_attention(const bc_sizes *z, int B, double *fwd_ms)
{
    const char *src = getenv("RUMOR_SRCDIR"), *py = getenv("RUMOR_PYTHON");
    char out[] = "/tmp/bench_cuda_attn.XXXXXX", cmd[4096], line[1024];
    int fd = mkstemp(out);
    if (fd < 0)
        return 0;
    close(fd);
    snprintf(cmd, sizeof cmd, "%stimeout -k 5 60 %s '%s/tests/bench/torch_gpt_cuda.py' "
             "1 %d %d %d 2 %d %d attn_sdpa > %s 2>/dev/null", z->emu ? "RUMOR_TORCH_DEVICE=cpu " : "",
             py ? py : "python3", src ? src : BENCH_SRCDIR, z->C, z->NH, z->T, B,
             z->emu ? 2 : 20, out);
    double ms = 0;
    if (system(cmd) != -1) {
        FILE *f = fopen(out, "r");
        while (f && fgets(line, sizeof line, f)) {
            const char *a = strstr(line, "\"ms\": "), *b = strstr(line, "\"fwd_ms\": ");
            if (!strstr(line, "\"attn_sdpa\""))
                continue;
            printf("# torch: %s", line);
            if (a)
                ms = strtod(a + 6, NULL);
            if (b)
                *fwd_ms = strtod(b + 10, NULL);
        }
        if (f)
            fclose(f);
    }
    unlink(out);
    return ms;
}

void bc_attention(rumor_device_t *d, const bc_sizes *z)
{
    int B = z->emu ? 1 : 16, T = z->T, C = z->C, NH = z->NH, reps = z->emu ? 1 : 20;
    size_t rows = (size_t)B * T;
    float *qkv = device_random(d, rows * 3 * C, 11), *dout = device_random(d, rows * C, 12);
    float *out = d->ops->alloc(d, rows * C * sizeof(float));
    float *dqkv = d->ops->alloc(d, rows * 3 * C * sizeof(float));
    float *lse = d->ops->alloc(d, (size_t)B * NH * T * sizeof(float));
    if (!out || !dqkv || !lse)
        bc_die("attention buffers");
    double both[5], fwd[5];
    for (int r = -1; r < 5; r++) { /* a warm-up round */
        if (d->ops->sync(d) < 0)
            bc_die("sync");
        double t0 = rumor_now();
        for (int i = 0; i < reps; i++)
            d->ops->attention_forward(d, out, lse, qkv, B, T, C, NH);
        if (d->ops->sync(d) < 0)
            bc_die("attention forward");
        double t1 = rumor_now();
        for (int i = 0; i < reps; i++)
            d->ops->attention_backward(d, dqkv, dout, qkv, out, lse, B, T, C, NH);
        if (d->ops->sync(d) < 0)
            bc_die("attention backward");
        if (r < 0)
            continue;
        fwd[r] = 1e3 * (t1 - t0) / reps;
        both[r] = 1e3 * (rumor_now() - t0) / reps;
    }
    double ms = bench_median(both, 5), fms = bench_median(fwd, 5), tfwd = 0;
    /* causal: half the (T, T) products; forward 2 products, backward 5 */
    double flops = 7.0 * 2.0 * B * NH * (double)T * T * (C / NH) / 2.0;
    printf("# attention, %s, B %d, T %d, %d heads of %d: forward %.3f ms, forward + backward "
           "%.3f ms (%.1f TFLOP/s)\n", rumor_precision_name(d->precision), B, T, NH, C / NH, fms,
           ms, flops / (ms * 1e9));
    printf("bench: cuda_attention_ms = %.3f ms\n", ms);
    double tf = torch_attention(z, B, &tfwd);
    if (tf > 0) {
        printf("bench: cuda_attention_vs_torch_sdpa = %.3f x\n", tf / ms);
        if (tfwd > 0)
            printf("bench: cuda_attention_forward_vs_torch_sdpa = %.3f x\n", tfwd / fms);
    } else {
        printf("bench_cuda: PyTorch's SDPA gave no figure: cuda_attention_vs_torch_sdpa "
               "skipped\n");
    }
    fflush(stdout);
    d->ops->free(d, qkv), d->ops->free(d, dout), d->ops->free(d, out);
    d->ops->free(d, dqkv), d->ops->free(d, lse);
}
