/* Benchmark: the CUDA backend on one GPU, as ratios measured in the same run.
 *
 *   cuda_bf16_gemm_peak      TFLOP/s of a bf16 GEMM (8192^3) through cuBLAS:
 *                            the peak the MFU divides by
 *   gpt124m_tokens_per_s     full AdamW training steps (forward, backward,
 *                            update) of GPT-2 124M (12 layers, 768 wide, 12
 *                            heads, T 1024, vocabulary 50257) on cuda:0 in
 *                            bf16 through the stage API, random tokens, the
 *                            device synced around rounds of steps after two
 *                            warm-up steps; gpt124m_batch the batch (16, or
 *                            less where its activations would pass 70% of
 *                            the GPU's memory);
 *                            gpt124m_activation_mb_per_example what a stage
 *                            of the model carves for one example, and
 *                            gpt124m_max_batch_80gb the batch that fits in
 *                            90% of 80 GB beside the parameters, gradients
 *                            and AdamW's moments
 *   gpt124m_lt_vs_separate   tokens/s with the MLP's fc GEMM, bias and GELU
 *                            fused in cuBLASLt's epilogue (forward) / with
 *                            them as separate ops (RUMOR_CUDA_NO_LT=1)
 *   gpt124m_lt_dgelu_vs_default tokens/s with cuBLASLt's DGELU epilogue in
 *                            the backward too (RUMOR_CUDA_LT_DGELU=1) / the
 *                            default's
 *   gpt350m_*, gpt774m_*     the same for GPT-2 medium and large
 *   cuda_attention_ms        the attention op's forward + backward (B 16, T
 *                            1024, 12 heads of 64, bf16); _vs_torch_sdpa
 *                            PyTorch's flash SDPA on the same shapes / it
 *                            (bench_cuda_attn.c)
 *   gpt124m_mfu              (6 N + 12 L T C) flops a token x tokens/s / the
 *                            peak above (N: parameters less the position
 *                            embedding; the attention's QK^T and AV forward
 *                            and backward over the whole T x T, as nanoGPT's
 *                            estimate_mfu and PaLM's appendix B count them)
 *   cuda_<op>_vs_copy        element-wise ops and reductions on 256 MiB
 *                            buffers: GB/s / a device-to-device copy's
 *                            (bench_cuda_ops.c)
 *   cuda_gemm_table_vs_cublas_<fp32|tf32|bf16>  the ops table's GEMM / the
 *                            same cuBLAS call made here on fp32 inputs (bf16:
 *                            CUBLAS_COMPUTE_32F_FAST_16BF), on the GPT's
 *                            shapes; _bf16_inputs: / cuBLAS multiplying
 *                            inputs already in bf16 (the table rounds its
 *                            fp32 inputs first: the ceiling)
 *   cuda_pipe4_<1f1b|zbh1>_bubble_vs_theory  a 4-stage pipeline, every stage
 *                            on cuda:0: measured bubble / the schedule's with
 *                            unit costs (_vs_costed: / its simulation at the
 *                            step's measured costs)
 *   gpt124m_vs_torch_eager, _compile  rumor's tokens/s / PyTorch's on the
 *                            same model, batch and AdamW in bf16 autocast
 *                            (tests/bench/torch_gpt_cuda.py, run last under a
 *                            timeout: torch.compile's compile counts), both
 *                            attending through PyTorch's
 *                            scaled_dot_product_attention (flash, as its users
 *                            run it); gpt124m_torch_eager_peak_gib PyTorch's
 *                            peak device memory there
 * Without a GPU it prints why and exits 0 (make bench runs it everywhere).
 * Under the HIP-CPU emulation (tests/cuda-emu) every part runs at tiny
 * sizes: the code paths are checked, the figures mean nothing. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cuda.h"
#include "bench_util.h"
#include "log.h"
#include "pipeline.h"
#include "rng.h"
#include "stage.h"

#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

void bc_die(const char *what)
{
    fprintf(stderr, "bench_cuda: %s: %s\n", what, rumor_err_msg());
    exit(1);
}

static const bc_sizes full = {
    .L = 12, .C = 768, .NH = 12, .T = 1024, .V = 50257, .batches = { 16, 8, 4, 2, 0 },
    .rounds = 5, .steps = 2, .op_n = (size_t)64 << 20, .peak_n = 8192,
    .pipe_L = 8, .pipe_C = 768, .pipe_NH = 12, .pipe_T = 512, .pipe_V = 256, .pipe_B = 32,
    .torch_timeout_s = 150,
};
static const bc_sizes tiny = {
    .emu = 1, .L = 2, .C = 32, .NH = 2, .T = 16, .V = 64, .batches = { 2, 0 },
    .rounds = 2, .steps = 1, .op_n = (size_t)1 << 14, .peak_n = 64,
    .pipe_L = 4, .pipe_C = 16, .pipe_NH = 2, .pipe_T = 8, .pipe_V = 32, .pipe_B = 8,
    .torch_timeout_s = 300, /* torch on the CPU; a cold import takes tens of seconds */
};

static void random_tokens(int32_t *t, size_t n, int V, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)(rumor_splitmix64(&seed) % (uint64_t)V);
}

/* ---------------------------------------------------------- GPT step */

static int gpt_step(rumor_stage_t *st, const rumor_batch_t *b, long step)
{
    if (rumor_stage_zero_grad(st) < 0 || rumor_stage_load(st, 0, b, 0, b->n) < 0 ||
        rumor_stage_forward(st, 0, NULL, 1, step, 0) < 0 ||
        rumor_stage_backward_b(st, 0, NULL, 1.0f / (float)(b->n * b->width)) < 0 ||
        rumor_stage_backward_w(st, 0) < 0 || rumor_stage_step(st) < 0)
        return -1;
    return 0;
}

/* A stage's activation bytes for one example, as the stage carves them:
 * a stage of batch 1 made and measured. */
static double example_bytes(rumor_model_t *m, rumor_device_t *d, int T)
{
    rumor_stage_config_t sc = { .model = m, .dev = d, .first = 0, .last = m->nblocks,
                                .max_B = 1, .T = T, .slots = 1, .seed = 1 };
    rumor_stage_t *st = NULL;
    if (rumor_stage_create(&sc, &st) < 0)
        bc_die("a stage of one example");
    double b = (double)rumor_stage_slot_bytes(st);
    rumor_stage_destroy(&st);
    return b;
}

/* rumor's tokens/s on the GPT `spec` (figures named NAME_...); *batch the
 * batch it ran, *flops_tok the flops a token the MFU counts. 0 when no
 * batch fit. */
static double bench_gpt(rumor_device_t *d, const bc_sizes *z, const char *spec, const char *name,
                        double peak, int *batch, double *flops_tok)
{
    rumor_model_t *m = NULL;
    if (rumor_model_create(spec, 0, &m) < 0)
        bc_die(spec);
    int T = m->ctx, L = m->layers, C = m->dim;
    /* parameters, gradients and AdamW's two moments, fp32 */
    double fixed = 16.0 * (double)m->nparams, per = example_bytes(m, d, T), mem = 0;
    rumor_device_info_t info;
    if (rumor_device_info(RUMOR_DEV_CUDA, d->index, &info) == 0)
        mem = (double)info.memory;
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.kind = RUMOR_OPT_ADAMW;
    oc.lr = 6e-4f;
    oc.weight_decay = 0.01f;
    rumor_stage_t *st = NULL;
    int B = 0;
    /* the largest batch whose activations fit 70% of the GPU (the rest: the
     * CUDA context, cuBLAS's workspaces, fragmentation), then smaller ones
     * if allocation fails all the same */
    for (int i = 0; !st && z->batches[i]; i++) {
        B = z->batches[i];
        if (mem > 0 && fixed + B * per > 0.7 * mem && z->batches[i + 1])
            continue;
        rumor_stage_config_t sc = { .model = m, .dev = d, .first = 0, .last = m->nblocks,
                                    .max_B = B, .T = T, .slots = 1, .seed = 1, .optim = &oc };
        if (rumor_stage_create(&sc, &st) < 0)
            printf("# batch %d: %s\n", B, rumor_err_msg());
    }
    if (!st) {
        printf("bench_cuda: no batch of %s fits %s\n", spec, d->name);
        rumor_model_destroy(&m);
        return 0;
    }
    printf("# %s, %zu parameters, batch %d x %d tokens, %s: activations %.4g GiB, %.4g MB an "
           "example, parameters + gradients + AdamW %.4g GiB, of %.4g GiB\n",
           spec, m->nparams, B, T, rumor_precision_name(d->precision),
           rumor_stage_slot_bytes(st) / 1073741824.0, per / 1e6, fixed / 1073741824.0,
           mem / 1073741824.0);
    printf("bench: %s_activation_mb_per_example = %.1f MB\n", name, per / 1e6);
    /* the largest batch an 80 GB GPU holds, 90% of it usable */
    printf("bench: %s_max_batch_80gb = %.0f examples\n", name,
           floor((0.9 * 80e9 - fixed) / per));
    size_t ntok = (size_t)B * T;
    int32_t *tok = malloc(ntok * sizeof *tok), *y = malloc(ntok * sizeof *y);
    if (!tok || !y)
        bc_die("out of memory");
    random_tokens(tok, ntok, m->vocab, 7);
    random_tokens(y, ntok, m->vocab, 8);
    rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = B, .width = T, .tok = tok, .y = y };
    double rate[16], loss = 0;
    long step = 0;
    for (int w = 0; w < 2; w++) /* warm-up: cuBLAS's heuristics, first touches */
        if (gpt_step(st, &b, step++) < 0)
            bc_die("GPT step");
    for (int r = 0; r < z->rounds && r < 16; r++) {
        if (d->ops->sync(d) < 0)
            bc_die("sync");
        double t0 = rumor_now();
        for (int i = 0; i < z->steps; i++)
            if (gpt_step(st, &b, step++) < 0)
                bc_die("GPT step");
        if (d->ops->sync(d) < 0)
            bc_die("GPT step");
        rate[r] = (double)ntok * z->steps / (rumor_now() - t0);
    }
    if (rumor_stage_loss(st, 0, &loss, NULL) < 0)
        bc_die("loss");
    double tps = bench_median(rate, z->rounds < 16 ? z->rounds : 16);
    double n = (double)m->nparams - (double)T * C; /* less wpe */
    double flops = 6.0 * n + 12.0 * L * (double)T * C;
    printf("# %.1f ms a step; loss %.3f after %ld AdamW steps (ln V = %.3f)\n",
           1e3 * ntok / tps, loss / (double)ntok, step, log((double)m->vocab));
    printf("bench: %s_batch = %d examples\n", name, B);
    printf("bench: %s_tokens_per_s = %.0f tokens/s\n", name, tps);
    printf("# %.4g flops a token (6 x %.0f + 12 x %d x %d x %d): %.4g TFLOP/s\n", flops, n, L, T,
           C, flops * tps / 1e12);
    if (peak > 0)
        printf("bench: %s_mfu = %.3f x\n", name, flops * tps / (peak * 1e12));
    fflush(stdout);
    free(tok), free(y);
    rumor_stage_destroy(&st);
    rumor_model_destroy(&m);
    *batch = B;
    *flops_tok = flops;
    return tps;
}

/* ---------------------------------------------------- 4 stages, one GPU */

/* Measured bubble / the schedule's with unit costs, for 1F1B and ZB-H1 over
 * 4 stages that each open cuda:0 (a stream and a cuBLAS handle a rank, as
 * the trainer opens them). The stages share the GPU's SMs: one stage's
 * kernels run in another's idle time, and a busy stage's run longer, so
 * the bubble measured from each rank's busy time is not the idle share of
 * the GPU. */
static int bench_pipe(const bc_sizes *z, rumor_precision prec)
{
    enum { P = 4, M = 8, NS = 2, ROUNDS = 5 };
    static const char *const sched[NS] = { "1f1b", "zb-h1" }, *const name[NS] = { "1f1b", "zbh1" };
    char spec[128], cut[96];
    snprintf(spec, sizeof spec, "gpt:layers=%d,dim=%d,heads=%d,ctx=%d,vocab=%d", z->pipe_L,
             z->pipe_C, z->pipe_NH, z->pipe_T, z->pipe_V);
    /* L / 4 transformer blocks a stage; the embedding (block 0) joins the
     * first, the head (block L + 1) the last */
    int q = z->pipe_L / P;
    snprintf(cut, sizeof cut, "0-%d,%d-%d,%d-%d,%d-%d", q, q + 1, 2 * q, 2 * q + 1, 3 * q,
             3 * q + 1, z->pipe_L + 1);
    rumor_model_t *m = NULL;
    rumor_device_t *devs[P] = { NULL };
    rumor_pipeline_t *p[NS] = { NULL };
    int cuts[P + 1], rc = -1;
    size_t ntok = (size_t)z->pipe_B * z->pipe_T;
    int32_t *tok = malloc(ntok * sizeof *tok), *y = malloc(ntok * sizeof *y);
    if (!tok || !y || rumor_model_create(spec, 0, &m) < 0 ||
        rumor_pipeline_partition(m, cut, P, cuts) < 0)
        goto done;
    random_tokens(tok, ntok, z->pipe_V, 9);
    random_tokens(y, ntok, z->pipe_V, 10);
    rumor_batch_t b = { .kind = RUMOR_BATCH_TOKENS, .n = z->pipe_B, .width = z->pipe_T,
                        .tok = tok, .y = y };
    for (int i = 0; i < P; i++)
        if (rumor_device_open("cuda:0", &devs[i]) < 0 ||
            rumor_device_set_precision(devs[i], prec) < 0)
            goto done;
    for (int k = 0; k < NS; k++) {
        rumor_pipeline_config_t pc = { .model = m, .devs = devs, .ndevs = P, .schedule = sched[k],
                                       .microbatches = M, .cuts = cuts, .max_B = z->pipe_B,
                                       .T = z->pipe_T, .seed = 1 };
        if (rumor_pipeline_create(&pc, &p[k]) < 0)
            goto done;
        p[k]->timed = 1; /* each GPU action waited for: busy times are the GPU's */
    }
    printf("# pipeline: %s cut %s, %d stages on cuda:0 (%s), %d micro-batches of %d x %d tokens\n",
           spec, cut, P, rumor_precision_name(prec), M, z->pipe_B / M, z->pipe_T);
    double ratio[NS][ROUNDS], costed[NS][ROUNDS], bub[NS][ROUNDS], ms[NS][ROUNDS];
    float loss;
    for (int r = -2; r < ROUNDS; r++) /* two warm-up steps */
        for (int k = 0; k < NS; k++) {
            double t0 = rumor_now(), expect;
            if (rumor_pipeline_grads(p[k], &b, r + 2, &loss) < 0 ||
                rumor_pipeline_expected_bubble(p[k], &expect) < 0)
                goto done;
            if (r < 0)
                continue;
            ms[k][r] = 1e3 * (rumor_now() - t0);
            bub[k][r] = rumor_pipeline_bubble(p[k]);
            ratio[k][r] = bub[k][r] / p[k]->sched->bubble;
            costed[k][r] = bub[k][r] / expect;
        }
    for (int k = 0; k < NS; k++) {
        printf("bench: cuda_pipe4_%s_bubble_vs_theory = %.3f x\n", name[k],
               bench_median(ratio[k], ROUNDS));
        printf("bench: cuda_pipe4_%s_bubble_vs_costed = %.3f x\n", name[k],
               bench_median(costed[k], ROUNDS));
        printf("# %s: bubble %.3f measured, %.3f in theory; %.1f ms a step (%.0f tokens/s), %.2f "
               "ms of F + B + W a micro-batch on a stage\n", sched[k],
               bench_median(bub[k], ROUNDS), p[k]->sched->bubble, bench_median(ms[k], ROUNDS),
               1e3 * ntok / bench_median(ms[k], ROUNDS), 1e3 * p[k]->busy_s[1] / M);
    }
    printf("# four stages share one GPU's SMs: a rank's busy time includes waiting for the SMs "
           "the others hold, so these bubbles are not the GPU's idle share\n");
    fflush(stdout);
    rc = 0;
done:
    if (rc < 0)
        fprintf(stderr, "bench_cuda: pipeline: %s\n", rumor_err_msg());
    for (int k = 0; k < NS; k++)
        rumor_pipeline_destroy(&p[k]);
    for (int i = 0; i < P; i++)
        rumor_device_close(&devs[i]);
    rumor_model_destroy(&m);
    free(tok), free(y);
    return rc;
}

/* ------------------------------------------------------------ PyTorch */

enum { T_EAGER, T_COMPILE, NT };
static const char *const torch_mode[NT] = { "eager_sdpa", "compile_sdpa" };
static const char *const torch_name[NT] = { "eager", "compile" };

/* Runs torch_gpt_cuda.py under `timeout` with each Python in turn (RUMOR_PYTHON,
 * else python3 and Debian's /usr/bin/python3) until one reports a figure:
 * the one with torch and CUDA. Its output goes to a file read once it
 * exits, so that no process it leaves behind (torch.compile's workers)
 * holds a pipe open. rate[k]: tokens/s of torch_mode[k], 0 if none. */
static void run_torch(const bc_sizes *z, int B, double rate[NT], double peak_gib[NT])
{
    const char *src = getenv("RUMOR_SRCDIR"), *env_py = getenv("RUMOR_PYTHON");
    const char *pys[3] = { "python3", "/usr/bin/python3", NULL };
    if (env_py)
        pys[0] = env_py, pys[1] = NULL;
    if (!src)
        src = BENCH_SRCDIR;
    for (int k = 0; k < NT; k++)
        rate[k] = peak_gib[k] = 0;
    char out[] = "/tmp/bench_cuda_torch.XXXXXX";
    int fd = mkstemp(out);
    if (fd < 0) {
        perror("bench_cuda: mkstemp");
        return;
    }
    close(fd);
    for (int i = 0; pys[i]; i++) {
        char cmd[4096], line[1024];
        snprintf(cmd, sizeof cmd, "%stimeout -k 10 %.0f %s '%s/tests/bench/torch_gpt_cuda.py' "
                 "%d %d %d %d %d %d %d eager_sdpa compile_sdpa > %s", z->emu ? "RUMOR_TORCH_DEVICE=cpu " : "",
                 z->torch_timeout_s, pys[i], src, z->L, z->C, z->NH, z->T, z->V, B,
                 z->emu ? 2 : 10, out);
        int st = system(cmd), got = 0;
        FILE *f = fopen(out, "r");
        while (f && fgets(line, sizeof line, f)) {
            if (line[0] != '{')
                continue;
            printf("# torch: %s", line);
            const char *mo = strstr(line, "\"mode\": \""), *tp = strstr(line, "\"tokens_per_s\": ");
            const char *pk = strstr(line, "\"peak_gib\": ");
            for (int k = 0; mo && k < NT; k++)
                if (!strncmp(mo + 9, torch_mode[k], strlen(torch_mode[k])) &&
                    mo[9 + strlen(torch_mode[k])] == '"') {
                    got = 1;
                    if (tp)
                        rate[k] = strtod(tp + 16, NULL);
                    if (pk)
                        peak_gib[k] = strtod(pk + 12, NULL);
                }
        }
        if (f)
            fclose(f);
        int code = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (code == 124)
            printf("# torch: %s stopped at the %.0f s limit\n", pys[i], z->torch_timeout_s);
        if (got)
            break;
        printf("# torch: %s: no figures (exit %d)\n", pys[i], code);
    }
    unlink(out);
}

static void report_torch(const bc_sizes *z, int B, double tps, double flops_tok, double peak)
{
    double rate[NT], peak_gib[NT];
    run_torch(z, B, rate, peak_gib);
    for (int k = 0; k < NT; k++) {
        if (rate[k] <= 0 || tps <= 0) {
            printf("bench_cuda: PyTorch %s gave no figure: gpt124m_vs_torch_%s skipped\n",
                   torch_mode[k], torch_name[k]);
            continue;
        }
        printf("bench: gpt124m_torch_%s_tokens_per_s = %.0f tokens/s\n", torch_name[k], rate[k]);
        printf("bench: gpt124m_vs_torch_%s = %.3f x\n", torch_name[k], tps / rate[k]);
        if (peak_gib[k] > 0)
            printf("bench: gpt124m_torch_%s_peak_gib = %.2f GiB\n", torch_name[k], peak_gib[k]);
        if (peak > 0) /* the same count of flops, whatever PyTorch skips */
            printf("# PyTorch %s: MFU %.3f\n", torch_mode[k], flops_tok * rate[k] / (peak * 1e12));
    }
}

/* bench_gpt's tokens/s for spec on a cuda:0 opened with the environment's
 * ENV=1 (the device reads its switches when it opens); 0 when it does not
 * open or run */
static double bench_variant(const bc_sizes *z, rumor_precision prec, const char *spec,
                            const char *env, const char *name, double peak)
{
    rumor_device_t *v = NULL;
    double tps = 0, flops;
    int batch;
    setenv(env, "1", 1);
    if (rumor_device_open("cuda:0", &v) == 0 && rumor_device_set_precision(v, prec) == 0)
        tps = bench_gpt(v, z, spec, name, peak, &batch, &flops);
    rumor_device_close(&v);
    unsetenv(env);
    return tps > 0 ? tps : 0;
}

/* RUMOR_BENCH_CUDA_ONLY=PART,... runs those parts alone (gpt124m, separate,
 * dgelu, attention, big, eltwise, gemm, pipe, torch; torch, separate and
 * dgelu need gpt124m): a
 * short call on a lent GPU after one kernel changed */
static int part(const char *name)
{
    const char *only = getenv("RUMOR_BENCH_CUDA_ONLY");
    if (!only || !*only)
        return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

int main(void)
{
    if (rumor_device_count(RUMOR_DEV_CUDA) == 0) {
        printf("bench_cuda: no GPU (%s): skipped\n", rumor_device_status(RUMOR_DEV_CUDA));
        return 0;
    }
    rumor_device_t *d = NULL;
    if (rumor_device_open("cuda:0", &d) < 0)
        bc_die("cuda:0");
    const bc_sizes *z = strstr(d->name, "emulation") ? &tiny : &full;
    printf("# %s%s\n", d->name, z->emu ? ": emulated, tiny sizes, the figures mean nothing" : "");
    rumor_precision prec = d->ops->supports(d, RUMOR_CAP_BF16) ? RUMOR_PREC_BF16 : RUMOR_PREC_FP32;
    double peak = bc_bf16_peak(d, z);
    if (rumor_device_set_precision(d, prec) < 0)
        bc_die("precision");
    int B = 0, rc = 0;
    char spec[128];
    snprintf(spec, sizeof spec, "gpt:layers=%d,dim=%d,heads=%d,ctx=%d,vocab=%d", z->L, z->C,
             z->NH, z->T, z->V);
    double flops_tok = 0, tps = 0;
    if (part("gpt124m") && (tps = bench_gpt(d, z, spec, "gpt124m", peak, &B, &flops_tok)) <= 0)
        rc = 1;
    /* the same steps with the MLP's GEMM, bias and GELU as separate ops:
     * what the cuBLASLt epilogue gives; and with cuBLASLt's DGELU epilogue
     * in the backward too (off by default: slower than the GEMM and GELU's
     * backward apart where measured) */
    double tsep = tps > 0 && part("separate")
                      ? bench_variant(z, prec, spec, "RUMOR_CUDA_NO_LT", "gpt124m_separate", peak)
                      : 0;
    if (tsep > 0)
        printf("bench: gpt124m_lt_vs_separate = %.3f x\n", tps / tsep);
    double tdg = tps > 0 && part("dgelu")
                     ? bench_variant(z, prec, spec, "RUMOR_CUDA_LT_DGELU", "gpt124m_lt_dgelu", peak)
                     : 0;
    if (tdg > 0)
        printf("bench: gpt124m_lt_dgelu_vs_default = %.3f x\n", tdg / tps);
    if (part("attention"))
        bc_attention(d, z);
    /* GPT-2's larger sizes on one GPU (not emulated: minutes on a CPU) */
    static const char *const big[][2] = { { "gpt2-medium", "gpt350m" },
                                          { "gpt2-large", "gpt774m" } };
    for (int i = 0; !z->emu && part("big") && i < 2; i++) {
        int bb;
        double ft;
        if (bench_gpt(d, z, big[i][0], big[i][1], peak, &bb, &ft) <= 0)
            rc = 1;
    }
    if (rumor_device_set_precision(d, RUMOR_PREC_FP32) < 0)
        bc_die("precision");
    if (part("eltwise"))
        bc_eltwise(d, z);
    if (part("gemm"))
        bc_gemm_vs_cublas(d, z, (B ? B : 8) * z->T);
    rumor_device_close(&d);
    if (part("pipe") && bench_pipe(z, prec) < 0)
        rc = 1;
    /* last: the GPU's memory is all PyTorch's now, and a slow compile costs
     * no other figure */
    if (tps > 0 && part("torch"))
        report_torch(z, B, tps, flops_tok, peak);
    return rc;
}
