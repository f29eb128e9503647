/* Training on a GPU against the CPU: a GPT step, bf16 steps, pipelines on
 * one GPU and across the CPU and a GPU, the links between them and NCCL.
 *
 * - A GPT training step on cuda:0 (fp32) gives the CPU's loss to 1e-5
 *   relative and its gradient to 1e-4 of its norm (the same dropout masks:
 *   counter-based, ops.h).
 * - Ten AdamW steps in bf16 follow the fp32 loss curve within 1% at every
 *   step (tf32 too), from the same start; parameters stay fp32.
 * - Pipelines of 2 and 4 stages on cuda:0 (a device object per stage, as
 *   the trainer opens them) and a mixed one (stage 0 on the CPU, stage 1 on
 *   the GPU) give the whole model's gradient over the same micro-batches to
 *   1e-5 of its norm, and after three optimizer steps (each stage its own)
 *   the same parameters.
 * - Two stages on cuda:0 training a host buffer (page-locked, from the
 *   GPU's host_alloc), as a GPU peer's stages train its mixer's buffer:
 *   each step's copy back lands asynchronously (params_ready turns 1, never
 *   an error), the buffer then holds the whole model's parameters after
 *   that many steps, and a change made to it between steps (a mix) is what
 *   the next step trains from.
 * - Links carry bytes intact both ways (host <-> GPU, within the GPU), and
 *   NCCL, where built, sends through a one-rank communicator to itself.
 * Without a GPU: exit 77. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"
#include "log.h"
#include "pipeline.h"
#include "stageutil.h"
#include "testutil.h"

#define SPEC "gpt:layers=4,dim=32,heads=4,ctx=16,vocab=50,dropout=0.1"
enum { NB = 6, T = 16, V = 50 };

static rumor_device_t *cpu, *gpu;
static int32_t tok[NB * T], tgt[NB * T];
static rumor_batch_t batch = { .kind = RUMOR_BATCH_TOKENS, .n = NB, .width = T, .tok = tok,
                               .y = tgt };

/* relative L2 distance of b from a */
static double rel(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)a[i] * a[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* One step's loss and gradient (host copy) of a whole-model stage. */
static float step_of(rumor_stage_t *st, float *grad, long step)
{
    double sum = 0;
    CHECK_OK(rumor_stage_zero_grad(st));
    CHECK_OK(rumor_stage_load(st, 0, &batch, 0, NB));
    CHECK_OK(rumor_stage_forward(st, 0, NULL, 1, step, 0));
    CHECK_OK(rumor_stage_backward_b(st, 0, NULL, 1.0f / (float)(NB * T)));
    CHECK_OK(rumor_stage_backward_w(st, 0));
    CHECK_OK(rumor_stage_loss(st, 0, &sum, NULL));
    if (grad)
        CHECK_OK(st->dev->ops->download(st->dev, grad, st->grads, st->n * sizeof(float)));
    return (float)(sum / (NB * T));
}

static void check_step(void)
{
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.kind = RUMOR_OPT_ADAMW;
    oc.lr = 3e-3f;
    oc.weight_decay = 0.01f;
    rumor_stage_t *c = su_stage_new(cpu, SPEC, NB, 7, &oc), *g = su_stage_new(gpu, SPEC, NB, 7, &oc);
    CHECKF(c && g, "stages: %s", rumor_err_msg());
    if (!c || !g)
        return;
    size_t n = c->n;
    float *gc = malloc(n * 4), *gg = malloc(n * 4);
    float lc = step_of(c, gc, 0), lg = step_of(g, gg, 0);
    CHECKF(fabsf(lc - lg) <= 1e-5f * fabsf(lc), "fp32 step: loss %.8f on %s, %.8f on the CPU",
           (double)lg, gpu->name, (double)lc);
    double e = rel(gc, gg, n);
    CHECKF(e <= 1e-4, "fp32 step: gradient off by %.3g of its norm", e);
    fprintf(stderr, "# GPT step on %s: loss %.6f (CPU %.6f), gradient within %.2g\n", gpu->name,
            (double)lg, (double)lc, e);
    /* ten steps: fp32 on the GPU (and the CPU), then bf16 and tf32 from the same start */
    float curve[3][10], cpu_curve[10];
    float *start = malloc(n * 4);
    CHECK_OK(rumor_stage_get_params(g, start));
    for (int k = 0; k < 10; k++) {
        cpu_curve[k] = step_of(c, NULL, 100 + k);
        CHECK_OK(rumor_stage_step(c));
    }
    for (int prec = 0; prec < 3; prec++) {
        if (prec && !gpu->ops->supports(gpu, prec == 1 ? RUMOR_CAP_TF32 : RUMOR_CAP_BF16))
            continue;
        CHECK_OK(rumor_device_set_precision(gpu, (rumor_precision)prec));
        rumor_stage_t *s = su_stage_new(gpu, SPEC, NB, 7, &oc);
        CHECK_OK(rumor_stage_set_params(s, start));
        for (int k = 0; k < 10; k++) {
            curve[prec][k] = step_of(s, NULL, 100 + k);
            CHECK_OK(rumor_stage_step(s));
        }
        su_stage_free(&s);
    }
    CHECK_OK(rumor_device_set_precision(gpu, RUMOR_PREC_FP32));
    for (int k = 0; k < 10; k++) {
        CHECKF(fabsf(curve[0][k] - cpu_curve[k]) <= 1e-4f * cpu_curve[k],
               "fp32 step %d: %.6f on the GPU, %.6f on the CPU", k, (double)curve[0][k],
               (double)cpu_curve[k]);
        for (int prec = 1; prec < 3; prec++)
            if (gpu->ops->supports(gpu, prec == 1 ? RUMOR_CAP_TF32 : RUMOR_CAP_BF16))
                CHECKF(fabsf(curve[prec][k] - curve[0][k]) <= 0.01f * curve[0][k],
                       "%s step %d: loss %.5f, fp32 %.5f (beyond 1%%)",
                       prec == 1 ? "tf32" : "bf16", k, (double)curve[prec][k],
                       (double)curve[0][k]);
    }
    fprintf(stderr, "# ten AdamW steps: fp32 %.4f -> %.4f, bf16 %.4f -> %.4f\n",
            (double)curve[0][0], (double)curve[0][9], (double)curve[2][0], (double)curve[2][9]);
    CHECKF(curve[0][9] < curve[0][0], "ten steps did not lower the loss (%.4f -> %.4f)",
           (double)curve[0][0], (double)curve[0][9]);
    free(gc), free(gg), free(start);
    su_stage_free(&c);
    su_stage_free(&g);
}

/* The sum of the counters of the GPUs among devs (P). */
static rumor_dev_counters_t gpu_counters(rumor_device_t **devs, int P)
{
    rumor_dev_counters_t sum = { 0 };
    for (int d = 0; d < P; d++) {
        rumor_dev_counters_t c = { 0 };
        if (devs[d]->ops->counters)
            devs[d]->ops->counters(devs[d], &c);
        sum.mallocs += c.mallocs;
        sum.frees += c.frees;
        sum.device_syncs += c.device_syncs;
        sum.host_waits += c.host_waits;
    }
    return sum;
}

/* A pipeline over devs (P ranks) against one whole-model stage on ref_dev,
 * micro-batches run one after another there. After the first step, a step
 * allocates, frees and waits for no GPU, and where every stage is on a GPU
 * the host waits for their streams a few times a step, not once an action
 * (the losses once, the tied embedding's copies). */
static void check_pipeline(const char *what, rumor_device_t **devs, int P, const char *schedule,
                           int M)
{
    rumor_model_t *m = NULL;
    CHECK_OK(rumor_model_create(SPEC, 0, &m));
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    oc.lr = 0.05f;
    rumor_pipeline_config_t pc = { .model = m, .devs = devs, .ndevs = P, .schedule = schedule,
                                   .microbatches = M, .max_B = NB, .T = T, .seed = 7,
                                   .optim = &oc };
    rumor_pipeline_t *p = NULL;
    rumor_stage_t *ref = su_stage_new(cpu, SPEC, NB, 7, &oc);
    int rc = rumor_pipeline_create(&pc, &p);
    CHECKF(rc == 0 && ref, "%s: %s", what, rumor_err_msg());
    if (rc < 0 || !ref) {
        su_stage_free(&ref);
        rumor_model_destroy(&m);
        return;
    }
    size_t n = m->nparams;
    float *gp = malloc(n * 4), *gr = malloc(n * 4), *pp = malloc(n * 4), *pr = malloc(n * 4);
    for (int step = 0; step < 3; step++) {
        float lp, lr = 0;
        rumor_dev_counters_t c0 = gpu_counters(devs, P);
        CHECK_OK(rumor_pipeline_grads(p, &batch, step, &lp));
        rumor_dev_counters_t c1 = gpu_counters(devs, P);
        int all_gpu = 1;
        for (int d = 0; d < P; d++)
            all_gpu &= devs[d]->kind == RUMOR_DEV_CUDA;
        long waits = c1.host_waits - c0.host_waits;
        /* the first two steps of a zero-bubble schedule wait for each
         * action (timed for its re-plan) */
        int queued = step >= 2 || (strcmp(schedule, "zb-h1") && strcmp(schedule, "zbv"));
        if (step > 0)
            CHECKF(c1.mallocs == c0.mallocs && c1.frees == c0.frees &&
                   c1.device_syncs == c0.device_syncs &&
                   (!all_gpu || !queued || waits <= 2 * P + 2),
                   "%s step %d: %ld allocations, %ld frees, %ld device syncs, %ld host waits "
                   "in a step", what, step, c1.mallocs - c0.mallocs, c1.frees - c0.frees,
                   c1.device_syncs - c0.device_syncs, waits);
        if (step == 2)
            fprintf(stderr, "# %s: %ld host waits in a step of %d micro-batches\n", what, waits,
                    M);
        /* the reference: the same micro-batches one after another */
        double sum = 0;
        CHECK_OK(rumor_stage_zero_grad(ref));
        for (int k = 0; k < M; k++) {
            int row0, rows;
            double part;
            rumor_pipeline_micro_rows(NB, M, k, &row0, &rows);
            CHECK_OK(rumor_stage_load(ref, 0, &batch, row0, rows));
            CHECK_OK(rumor_stage_forward(ref, 0, NULL, 1, step, k));
            CHECK_OK(rumor_stage_backward_b(ref, 0, NULL, 1.0f / (float)(NB * T)));
            CHECK_OK(rumor_stage_backward_w(ref, 0));
            CHECK_OK(rumor_stage_loss(ref, 0, &part, NULL));
            sum += part;
        }
        lr = (float)(sum / (NB * T));
        CHECK_OK(rumor_pipeline_gather_grads(p, gp, cpu));
        memcpy(gr, ref->grads, n * 4);
        double e = rel(gr, gp, n);
        CHECKF(fabsf(lp - lr) <= 1e-5f * lr && e <= 1e-5, "%s step %d: loss %.7f against %.7f, "
               "gradient off by %.3g of its norm", what, step, (double)lp, (double)lr, e);
        CHECK_OK(rumor_pipeline_update(p));
        CHECK_OK(rumor_stage_step(ref));
    }
    for (int s = 0; s < p->S; s++)
        CHECK_OK(rumor_device_copy(cpu, pp + p->st[s]->lo, p->st[s]->dev, p->st[s]->params,
                                   p->st[s]->n * sizeof(float)));
    memcpy(pr, ref->params, n * 4);
    double e = rel(pr, pp, n);
    CHECKF(e <= 1e-5, "%s: parameters after 3 steps off by %.3g", what, e);
    fprintf(stderr, "# %s (%s, %d micro-batches): matches the whole model (%.2g)\n", what,
            schedule, M, e);
    free(gp), free(gr), free(pp), free(pr);
    rumor_pipeline_destroy(&p);
    su_stage_free(&ref);
    rumor_model_destroy(&m);
}

/* The model and the 2-stage 1F1B pipeline over devs (SGD, lr 0.05) that
 * check_host_params and check_stepped build. */
static rumor_model_t *two_stages(rumor_device_t **devs, rumor_optim_config_t *oc,
                                 rumor_pipeline_config_t *pc)
{
    rumor_model_t *m = NULL;
    CHECK_OK(rumor_model_create(SPEC, 0, &m));
    rumor_optim_config_default(oc);
    oc->lr = 0.05f;
    *pc = (rumor_pipeline_config_t){ .model = m, .devs = devs, .ndevs = 2, .schedule = "1f1b",
                                     .microbatches = 2, .max_B = NB, .T = T, .seed = 7,
                                     .optim = oc };
    return m;
}

static void check_host_params(rumor_device_t **devs)
{
    const char *what = "2 stages on cuda:0 training a host buffer";
    rumor_optim_config_t oc;
    rumor_pipeline_config_t pc;
    rumor_model_t *m = two_stages(devs, &oc, &pc);
    rumor_pipeline_t *p = NULL;
    rumor_stage_t *ref = su_stage_new(cpu, SPEC, NB, 7, &oc);
    int rc = rumor_pipeline_create(&pc, &p);
    CHECKF(rc == 0 && ref, "%s: %s", what, rumor_err_msg());
    size_t n = m ? m->nparams : 0;
    float *host = rc == 0 ? devs[0]->ops->host_alloc(devs[0], n * sizeof(float)) : NULL;
    if (rc == 0 && ref && host) {
        memcpy(host, ref->params, n * sizeof(float));
        CHECKF(rumor_pipeline_bind_params(p, host, cpu) == 0, "%s: bound in place", what);
        for (int step = 0; step < 3; step++) {
            float lp;
            CHECK_OK(rumor_pipeline_grads(p, &batch, step, &lp));
            CHECK_OK(rumor_pipeline_update(p));
            CHECK_OK(rumor_pipeline_write_params(p, host, cpu));
            /* the reference: the whole model, the same micro-batches */
            CHECK_OK(rumor_stage_zero_grad(ref));
            for (int k = 0; k < 2; k++) {
                int row0, rows;
                rumor_pipeline_micro_rows(NB, 2, k, &row0, &rows);
                CHECK_OK(rumor_stage_load(ref, 0, &batch, row0, rows));
                CHECK_OK(rumor_stage_forward(ref, 0, NULL, 1, step, k));
                CHECK_OK(rumor_stage_backward_b(ref, 0, NULL, 1.0f / (float)(NB * T)));
                CHECK_OK(rumor_stage_backward_w(ref, 0));
            }
            CHECK_OK(rumor_stage_step(ref));
            double t0 = rumor_now();
            int r;
            while ((r = rumor_pipeline_params_ready(p)) == 0 && rumor_now() - t0 < 10)
                ;
            CHECKF(r == 1, "%s step %d: params_ready %d after %.1f s (%s)", what, step, r,
                   rumor_now() - t0, r < 0 ? rumor_err_msg() : "still copying");
            double e = rel(ref->params, host, n);
            CHECKF(e <= 1e-5, "%s step %d: the host buffer is off the whole model's parameters "
                   "by %.3g of their norm", what, step, e);
            /* a mix between steps: both halve their parameters; the stages
             * must train the halved ones */
            for (size_t i = 0; i < n; i++)
                host[i] *= 0.5f, ref->params[i] *= 0.5f;
            CHECK_OK(rumor_pipeline_bind_params(p, host, cpu));
        }
        CHECK_OK(rumor_pipeline_params_sync(p));
        fprintf(stderr, "# %s: asynchronous copies back match the whole model\n", what);
    }
    if (host)
        devs[0]->ops->host_free(devs[0], host);
    rumor_pipeline_destroy(&p);
    su_stage_free(&ref);
    rumor_model_destroy(&m);
}

/* rumor_pipeline_grads_step's source: the buffer holding the "mix",
 * handed to each stage on its second ask (the first says not yet) */
struct stepped_src {
    float *buf;
    int calls[2];
};

static int stepped_next(void *ctx, int s, size_t lo, size_t hi, double wait, float **params)
{
    struct stepped_src *src = ctx;
    (void)lo, (void)hi;
    if (wait < 0 || src->calls[s]++ == 0)
        return 0;
    *params = src->buf;
    return 1;
}

/* GPU stages stepping one at a time on their range of a new host buffer
 * (rumor_pipeline_grads_step: upload the range, step, copy back on the copy
 * stream) end where the whole-round order does (bind the whole new buffer,
 * step every stage, write back), for 3 steps with a "mix" (halving) between
 * them. */
static void check_stepped(rumor_device_t **devs)
{
    const char *what = "2 stages on cuda:0 stepping one at a time";
    rumor_optim_config_t oc;
    rumor_pipeline_config_t pc;
    rumor_model_t *m = two_stages(devs, &oc, &pc);
    rumor_pipeline_t *pa = NULL, *pb = NULL;
    rumor_stage_t *init = su_stage_new(cpu, SPEC, NB, 7, &oc);
    int rc = rumor_pipeline_create(&pc, &pa);
    if (rc == 0)
        rc = rumor_pipeline_create(&pc, &pb);
    CHECKF(rc == 0 && init, "%s: %s", what, rumor_err_msg());
    size_t n = m ? m->nparams : 0, bytes = n * sizeof(float);
    float *buf[4] = { NULL };
    for (int i = 0; rc == 0 && i < 4; i++)
        buf[i] = devs[0]->ops->host_alloc(devs[0], bytes);
    if (rc == 0 && init && buf[0] && buf[1] && buf[2] && buf[3]) {
        float *ra = buf[0], *rmix = buf[1], *sa = buf[2], *smix = buf[3];
        memcpy(ra, init->params, bytes);
        memcpy(sa, init->params, bytes);
        CHECK(rumor_pipeline_bind_params(pa, ra, cpu) == 0);
        CHECK(rumor_pipeline_bind_params(pb, sa, cpu) == 0);
        for (int step = 0; step < 3; step++) {
            float la, lb;
            /* the whole round: gradient, mix, every stage steps, copy back */
            CHECK_OK(rumor_pipeline_grads(pa, &batch, step, &la));
            for (size_t i = 0; i < n; i++)
                rmix[i] = 0.5f * ra[i];
            CHECK_OK(rumor_pipeline_bind_params(pa, rmix, cpu));
            CHECK_OK(rumor_pipeline_update(pa));
            CHECK_OK(rumor_pipeline_write_params(pa, rmix, cpu));
            CHECK_OK(rumor_pipeline_params_sync(pa));
            /* stage by stage */
            for (size_t i = 0; i < n; i++)
                smix[i] = 0.5f * sa[i];
            struct stepped_src src = { smix, { 0, 0 } };
            CHECK_OK(rumor_pipeline_grads_step(pb, &batch, step, &lb, cpu, stepped_next, &src));
            CHECK_OK(rumor_pipeline_params_sync(pb));
            CHECKF(src.calls[0] == 2 && src.calls[1] == 2, "%s step %d: stages asked %d and %d "
                   "times", what, step, src.calls[0], src.calls[1]);
            CHECKF(rumor_pipeline_stepped(pb), "%s step %d: not every stage stepped", what, step);
            CHECKF(la == lb, "%s step %d: loss %.9g against %.9g", what, step, (double)lb,
                   (double)la);
            double e = rel(rmix, smix, n);
            CHECKF(e <= 1e-6, "%s step %d: off the whole-round order by %.3g of the norm", what,
                   step, e);
            float *t = ra;
            ra = rmix, rmix = t;
            t = sa;
            sa = smix, smix = t;
        }
        fprintf(stderr, "# %s: the whole-round order's parameters after 3 steps\n", what);
    }
    for (int i = 0; i < 4; i++)
        if (buf[i])
            devs[0]->ops->host_free(devs[0], buf[i]);
    rumor_pipeline_destroy(&pa);
    rumor_pipeline_destroy(&pb);
    su_stage_free(&init);
    rumor_model_destroy(&m);
}

static void check_links(void)
{
    size_t n = 100003;
    float *h = malloc(n * 4), *back = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)i * 0.5f - 7.0f;
    rumor_device_t *g2 = NULL;
    CHECK_OK(rumor_device_open("cuda:0", &g2));
    float *d1 = gpu->ops->alloc(gpu, n * 4), *d2 = g2 ? g2->ops->alloc(g2, n * 4) : NULL;
    rumor_link_t *up = NULL, *within = NULL;
    CHECK_OK(rumor_link_create(cpu, gpu, 1, &up));
    CHECK_OK(g2 ? rumor_link_create(gpu, g2, 1, &within) : -1);
    if (up && within && d1 && d2) {
        CHECK(rumor_link_get_kind(up) == RUMOR_LINK_UPLOAD);
        CHECK(rumor_link_get_kind(within) == RUMOR_LINK_DEVICE);
        CHECK_OK(rumor_link_copy(up, 1, d1, h, n * 4));         /* host -> GPU */
        CHECK_OK(rumor_link_copy(within, 1, d2, d1, n * 4));    /* GPU -> GPU (one GPU) */
        CHECK_OK(rumor_link_copy(within, 0, d1, d2, n * 4));    /* and back */
        memset(back, 0, n * 4);
        CHECK_OK(rumor_link_copy(up, 0, back, d1, n * 4));      /* GPU -> host */
        CHECKF(memcmp(back, h, n * 4) == 0, "links: the bytes came back changed");
    }
#ifdef HAVE_NCCL
    /* NCCL through the CUDA table's clique ops, as links use it */
    rumor_clique_t *nc = NULL;
    CHECKF(gpu->ops->clique_open && gpu->ops->clique_copy && gpu->ops->clique_close,
           "built with NCCL, but the CUDA table has no clique ops");
    if (gpu->ops->clique_open) {
        CHECK_OK(gpu->ops->clique_open(&gpu, 1, &nc));
        if (nc && d1 && d2) {
            gpu->ops->fill(gpu, d2, 0.0f, n);
            CHECK_OK(gpu->ops->sync(gpu));
            CHECK_OK(gpu->ops->clique_copy(nc, gpu, d2, NULL, gpu, d1, NULL, n * 4)); /* itself */
            CHECK_OK(gpu->ops->stream_sync(gpu, NULL));
            memset(back, 0, n * 4);
            CHECK_OK(gpu->ops->download(gpu, back, d2, n * 4));
            CHECKF(memcmp(back, h, n * 4) == 0, "NCCL: a one-rank send to itself changed the bytes");
            fprintf(stderr, "# NCCL: a one-rank communicator sent %zu bytes to itself\n", n * 4);
        }
        gpu->ops->clique_close(nc);
        nc = NULL;
        rumor_device_t *two[2] = { gpu, g2 ? g2 : gpu }; /* one GPU, twice */
        CHECK_ERR(gpu->ops->clique_open(two, 2, &nc), RUMOR_EINVAL, "twice");
    }
#else
    CHECKF(!gpu->ops->clique_open, "built without NCCL, but the CUDA table has clique ops");
    fprintf(stderr, "# built without NCCL: GPUs exchange by peer copies\n");
#endif
    rumor_link_destroy(&up);
    rumor_link_destroy(&within);
    if (d1)
        gpu->ops->free(gpu, d1);
    if (d2)
        g2->ops->free(g2, d2);
    rumor_device_close(&g2);
    free(h), free(back);
}

int main(void)
{
    if (rumor_device_count(RUMOR_DEV_CUDA) == 0)
        TEST_SKIP("no GPU (CUDA build with a GPU, or the emulation of tests/cuda-emu)");
    CHECK_OK(rumor_device_open("cpu:1", &cpu));
    CHECK_OK(rumor_device_open("cuda:0", &gpu));
    if (!cpu || !gpu)
        return tu_finish("test_cuda_train");
    for (int i = 0; i < NB * T; i++) {
        tok[i] = (int32_t)((i * 7 + i / 5) % V);
        tgt[i] = (int32_t)((i * 7 + i / 5 + 3) % V);
    }
    check_step();
    check_links();
    /* pipelines: a device object per rank on the one GPU */
    rumor_device_t *g[4] = { NULL };
    for (int i = 0; i < 4; i++)
        CHECK_OK(rumor_device_open("cuda:0", &g[i]));
    if (g[0] && g[1] && g[2] && g[3]) {
        check_pipeline("2 stages on cuda:0", g, 2, "1f1b", 4);
        check_pipeline("4 stages on cuda:0", g, 4, "zb-h1", 6);
        rumor_device_t *mixed[2] = { cpu, g[0] };
        check_pipeline("stage 0 on the CPU, stage 1 on cuda:0", mixed, 2, "gpipe", 3);
        rumor_device_t *back[2] = { g[1], cpu };
        check_pipeline("stage 0 on cuda:0, stage 1 on the CPU", back, 2, "1f1b", 2);
        check_host_params(g);
        check_stepped(g);
    }
    for (int i = 0; i < 4; i++)
        rumor_device_close(&g[i]);
    rumor_device_close(&gpu);
    rumor_device_close(&cpu);
    return tu_finish("test_cuda_train");
}
