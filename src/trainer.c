/* The trainer (see trainer.h). */
#include "trainer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "log.h"

/* Returns a failing call's code with "what: " before its message. */
#define TRY(what, call)                                                                      \
    do {                                                                                     \
        int try_rc_ = (call);                                                                \
        if (try_rc_ < 0)                                                                     \
            return rumor_err_prefix(try_rc_, "%s", what);                                    \
    } while (0)

void rumor_trainer_config_default(rumor_trainer_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->data = "fashion-mnist";
    c->model = "mlp:784-256-256-10";
    c->world = 1;
    c->seed = 1;
    c->batch = 128;
    c->epochs = 10;
    rumor_optim_config_default(&c->optim);
    c->warmup_epochs = 0.2;
    c->cosine = 1;
}

void rumor_trainer_destroy(rumor_trainer_t **tp)
{
    if (!tp || !*tp)
        return;
    rumor_trainer_t *t = *tp;
    rumor_pipeline_destroy(&t->pipe);
    free(t->stage_pred);
    free(t->acc);
    for (int i = 0; i < t->npdevs; i++)
        rumor_device_close(&t->pdevs[i]);
    rumor_step_destroy(&t->step);
    rumor_stage_destroy(&t->stage);
    if (t->own)
        t->dev->ops->free(t->dev, t->own);
    rumor_model_destroy(&t->model);
    rumor_source_destroy(&t->src);
    rumor_device_close(&t->dev);
    for (int i = 0; i < 6; i++)
        free(t->owned[i]);
    free(t);
    *tp = NULL;
}

/* Copies the config's strings so the trainer outlives the caller's. */
static int own_strings(rumor_trainer_t *t)
{
    const char **s[6] = { &t->cfg.data,    &t->cfg.model,    &t->cfg.device,
                          &t->cfg.devices, &t->cfg.schedule, &t->cfg.partition };
    for (int i = 0; i < 6; i++) {
        if (!*s[i])
            continue;
        if (!(t->owned[i] = strdup(*s[i])))
            return rumor_err_set(RUMOR_ENOMEM, "trainer: out of memory");
        *s[i] = t->owned[i];
    }
    return 0;
}

static int check_images(const rumor_trainer_t *t)
{
    const rumor_model_t *m = t->model;
    int width = rumor_source_width(t->src), classes = rumor_source_vocab(t->src);
    if (m->in_dim != width || m->classes != classes)
        return rumor_err_set(RUMOR_EINVAL,
                             "'%s' takes %d inputs and %d classes; the data have %d and %d",
                             m->spec, m->in_dim, m->classes, width, classes);
    return 0;
}

/* Steps per epoch, total steps and the optimizer's schedule. */
static void size_run(rumor_trainer_t *t)
{
    const rumor_trainer_config_t *c = &t->cfg;
    t->steps_per_epoch = rumor_source_steps_per_epoch(t->src);
    t->total_steps = c->steps > 0 ? c->steps : t->steps_per_epoch * c->epochs;
    t->oc = c->optim;
    t->oc.warmup_steps = (long)(c->warmup_epochs * (double)t->steps_per_epoch);
    if (t->oc.warmup_steps > t->total_steps / 2) /* a run shorter than its warm-up */
        t->oc.warmup_steps = t->total_steps / 10;
    t->oc.total_steps = c->cosine ? t->total_steps : 0;
}

/* How many entries of a comma-separated list are empty. */
static int count_empty(const char *list)
{
    int empty = 0;
    for (const char *p = list;; p++) {
        const char *end = strchr(p, ',');
        empty += end ? end == p : *p == '\0';
        if (!end)
            return empty;
        p = end;
    }
}

/* The entries of a --devices list ("cpu:1,cuda:0"), at most max of them;
 * an empty entry ("cpu:1,,cpu:1", a trailing comma) is an error, not one
 * device fewer. */
static int device_specs(const char *devices, char specs[][32], int max, int *n)
{
    int entries = 1;
    for (const char *p = devices; *p; p++)
        entries += *p == ',';
    *n = 0;
    for (const char *p = devices;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            return rumor_err_set(RUMOR_EINVAL, "--devices '%s': entry %d is empty (%d entries, "
                                 "%d device%s)", devices, *n + 1, entries,
                                 entries - count_empty(devices),
                                 entries - count_empty(devices) == 1 ? "" : "s");
        if (*n == max)
            return rumor_err_set(RUMOR_EINVAL, "--devices '%s': %d devices, at most %d", devices,
                                 entries, max);
        if (len >= 32)
            return rumor_err_set(RUMOR_EINVAL, "--devices: '%.*s' is too long", (int)len, p);
        snprintf(specs[(*n)++], 32, "%.*s", (int)len, p);
        if (!end)
            break;
        p = end;
    }
    return 0;
}

/* Whether a device spec names its precision (cuda:0:bf16): it wins over
 * --precision. */
static int spec_has_precision(const char *spec)
{
    const char *last = strrchr(spec, ':');
    return last && (!strcmp(last, ":fp32") || !strcmp(last, ":tf32") || !strcmp(last, ":bf16"));
}

/* The model fits the data's kind and, on text, its vocabulary. */
static int check_model_data(const rumor_trainer_config_t *c, const rumor_model_t *m)
{
    int vocab, lm = rumor_source_spec_kind(c->data, &vocab) == RUMOR_BATCH_TOKENS;
    if (lm && m->kind != RUMOR_MODEL_GPT)
        return rumor_err_set(RUMOR_EINVAL, "'%s' is not a language model; --data %s is text "
                             "(use --model gpt:layers=L,dim=D,heads=H,ctx=T)", c->model, c->data);
    if (!lm && m->kind != RUMOR_MODEL_MLP)
        return rumor_err_set(RUMOR_EINVAL, "'%s' is a language model; --data %s holds images "
                             "(use --data text:FILE or tokens:TRAIN.bin)", m->spec, c->data);
    if (!lm || vocab != RUMOR_BYTE_VOCAB || m->vocab == vocab)
        return 0; /* token shards do not say their vocabulary (trainer.h) */
    if (m->vocab < vocab)
        return rumor_err_set(RUMOR_EINVAL, "--model %s: vocab=%d is smaller than the data's "
                             "vocabulary (%d: --data %s is bytes); drop vocab= to take the "
                             "data's", c->model, m->vocab, vocab, c->data);
    if (!c->allow_vocab_mismatch)
        return rumor_err_set(RUMOR_EINVAL, "--model %s: vocab=%d is not the data's vocabulary "
                             "(%d: --data %s is bytes); drop vocab= to take the data's, or give "
                             "--allow-vocab-mismatch to train the larger output layer anyway",
                             c->model, m->vocab, vocab, c->data);
    return 0;
}

/* A pipeline's devices, stages, schedule, micro-batches and cut, checked
 * against the model m without opening a device. */
static int check_pipeline(const rumor_trainer_config_t *c, const rumor_model_t *m)
{
    int stages = c->stages;
    if (c->devices) {
        char specs[RUMOR_SCHED_MAX_DEVICES][32];
        int n;
        RUMOR_CHECK(device_specs(c->devices, specs, RUMOR_SCHED_MAX_DEVICES, &n));
        for (int d = 0; d < n; d++) {
            int rc = rumor_device_check_spec(specs[d]);
            if (rc < 0)
                return rumor_err_prefix(rc, "--devices entry %d", d + 1);
        }
        /* one stage a device: more stages than devices (or fewer) would
         * leave the list's meaning to a guess */
        if (stages > 0 && stages != n)
            return rumor_err_set(RUMOR_EINVAL, "--stages %d and --devices '%s' (%d device%s) "
                                 "disagree: a pipeline runs one rank a device; list %d devices "
                                 "(one may repeat) or leave --stages out", stages, c->devices,
                                 n, n == 1 ? "" : "s", stages);
        stages = n;
    }
    if (stages < 1)
        stages = 1;
    if (stages > RUMOR_SCHED_MAX_DEVICES)
        return rumor_err_set(RUMOR_EINVAL, "--stages %d: at most %d", stages,
                             RUMOR_SCHED_MAX_DEVICES);
    const char *sched = c->schedule ? c->schedule : "1f1b";
    rumor_sched_kind kind;
    int V;
    RUMOR_CHECK(rumor_schedule_parse(sched, &kind, &V));
    int S = stages * V;
    if (S > m->nblocks)
        return rumor_err_set(RUMOR_EINVAL, "--stages %d under %s (%d chunk%s a device): %d "
                             "stages for a model of %d blocks", stages, sched, V,
                             V == 1 ? "" : "s", S, m->nblocks);
    rumor_schedule_t *plan = NULL;
    RUMOR_CHECK(rumor_schedule_build(sched, stages, c->microbatches ? c->microbatches : 2 * stages,
                                     m->nblocks, &plan));
    rumor_schedule_destroy(&plan);
    if (c->partition && strcmp(c->partition, "profile") != 0) {
        int cuts[RUMOR_SCHED_MAX_DEVICES * RUMOR_SCHED_MAX_CHUNKS + 1];
        RUMOR_CHECK(rumor_pipeline_partition(m, c->partition, S, cuts));
    }
    return 0;
}

int rumor_trainer_config_check(const rumor_trainer_config_t *c)
{
    if (!c || !c->data || !c->model)
        return rumor_err_set(RUMOR_EINVAL, "trainer: no config, data or model");
    if (c->batch < 1 || c->world < 1 || c->rank < 0 || c->rank >= c->world || c->epochs < 1 ||
        c->steps < 0 || c->threads < 0 || c->eval_batches < 0 || !(c->warmup_epochs >= 0))
        return rumor_err_set(RUMOR_EINVAL, "trainer: batch %d, rank %d of %d, epochs %d, steps "
                             "%ld, threads %d, eval batches %d or warm-up %g out of range",
                             c->batch, c->rank, c->world, c->epochs, c->steps, c->threads,
                             c->eval_batches, c->warmup_epochs);
    if (c->device)
        TRY("--device", rumor_device_check_spec(c->device));
    if (c->precision != RUMOR_PREC_FP32 && (!c->device || !strncmp(c->device, "cpu", 3)) &&
        !(c->devices && strstr(c->devices, "cuda")))
        return rumor_err_set(RUMOR_EINVAL, "--precision %s: the CPU computes in fp32; %s needs "
                             "a GPU (--device cuda:0 or --devices with a GPU)",
                             rumor_precision_name(c->precision),
                             rumor_precision_name(c->precision));
    /* the model as the trainer builds it: a GPT without vocab= takes the
     * data's (any value parses it for a model that cannot fit images) */
    int vocab;
    rumor_source_spec_kind(c->data, &vocab);
    rumor_model_t *m = NULL;
    TRY("model", rumor_model_create(c->model, vocab ? vocab : RUMOR_BYTE_VOCAB, &m));
    int rc = check_model_data(c, m);
    if (rc == 0 && (c->stages > 1 || c->schedule || c->devices))
        rc = check_pipeline(c, m);
    rumor_model_destroy(&m);
    return rc < 0 ? rumor_err_trace_add(__FILE__, __LINE__, rc) : 0;
}

/* Opens a pipeline device and gives it the run's precision (a CPU device
 * stays fp32: it has no tensor cores, and a mixed pipeline's CPU stages
 * compute as they always do). */
static int open_pdev(rumor_trainer_t *t, const char *spec, rumor_device_t **out)
{
    int rc = rumor_device_open(spec, out);
    if (rc < 0)
        return rumor_err_prefix(rc, "--devices %s", spec);
    if ((*out)->kind != RUMOR_DEV_CPU && !spec_has_precision(spec))
        TRY("--precision", rumor_device_set_precision(*out, t->cfg.precision));
    return 0;
}

/* The pipeline: its devices, the cut, the schedule, stages bound to the
 * whole model's parameters. */
static int open_pipeline(rumor_trainer_t *t)
{
    const rumor_trainer_config_t *c = &t->cfg;
    int stages = c->stages;
    rumor_device_t *devs[RUMOR_SCHED_MAX_DEVICES];
    if (c->devices) {
        /* a device per rank, the list repeated; a GPU is opened once per
         * rank (its stream and cuBLAS handle serve one worker), a CPU
         * device object may serve several */
        char specs[RUMOR_SCHED_MAX_DEVICES][32];
        int n;
        RUMOR_CHECK(device_specs(c->devices, specs, RUMOR_SCHED_MAX_DEVICES, &n));
        if (stages < 1)
            stages = n;
        if (stages > RUMOR_SCHED_MAX_DEVICES)
            return rumor_err_set(RUMOR_EINVAL, "--stages %d: at most %d", stages,
                                 RUMOR_SCHED_MAX_DEVICES);
        for (int d = 0; d < stages; d++) {
            if (d < n || strncmp(specs[d % n], "cuda", 4) == 0) {
                RUMOR_CHECK(open_pdev(t, specs[d % n], &t->pdevs[t->npdevs]));
                devs[d] = t->pdevs[t->npdevs++];
            } else {
                devs[d] = t->pdevs[d % n];
            }
        }
    } else {
        if (stages < 1)
            stages = 1;
        if (stages > RUMOR_SCHED_MAX_DEVICES)
            return rumor_err_set(RUMOR_EINVAL, "--stages %d: at most %d", stages,
                                 RUMOR_SCHED_MAX_DEVICES);
        for (; t->npdevs < stages; t->npdevs++)
            RUMOR_CHECK(open_pdev(t, "cpu:1", &t->pdevs[t->npdevs]));
        for (int d = 0; d < stages; d++)
            devs[d] = t->pdevs[d];
    }
    const char *sched = c->schedule ? c->schedule : "1f1b";
    rumor_sched_kind kind;
    int V;
    RUMOR_CHECK(rumor_schedule_parse(sched, &kind, &V));
    int S = stages * V, cuts[RUMOR_SCHED_MAX_DEVICES * RUMOR_SCHED_MAX_CHUNKS + 1];
    if (S > t->model->nblocks)
        return rumor_err_set(RUMOR_EINVAL, "--stages %d under %s (%d chunk%s a device): %d "
                             "stages for a model of %d blocks", stages, sched, V,
                             V == 1 ? "" : "s", S, t->model->nblocks);
    if (c->partition && !strcmp(c->partition, "profile")) {
        /* time the blocks on the stages' devices with real batches */
        int M = c->microbatches ? c->microbatches : 2 * stages;
        rumor_batch_t b;
        if (!(t->stage_pred = calloc((size_t)S, sizeof *t->stage_pred)))
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        RUMOR_CHECK(rumor_trainer_batch(t, 0, &b));
        int dev_of[RUMOR_SCHED_MAX_DEVICES * RUMOR_SCHED_MAX_CHUNKS];
        rumor_schedule_placement(kind, stages, V, dev_of);
        RUMOR_CHECK(rumor_pipeline_profile(t->model, devs, stages, dev_of, S, &b, M,
                                           rumor_model_seq(t->model), c->seed, cuts,
                                           t->stage_pred));
    } else {
        RUMOR_CHECK(rumor_pipeline_partition(t->model, c->partition, S, cuts));
    }
    rumor_pipeline_config_t pc = { .model = t->model, .devs = devs, .ndevs = stages,
                                   .schedule = sched,
                                   .microbatches = c->microbatches ? c->microbatches : 2 * stages,
                                   .cuts = cuts, .max_B = c->batch,
                                   .T = rumor_model_seq(t->model), .seed = c->seed,
                                   .stream = c->data_stream ? c->data_stream : (uint64_t)c->rank,
                                   .optim = &t->oc };
    RUMOR_CHECK(rumor_pipeline_create(&pc, &t->pipe));
    /* the stages train the trainer's parameters in place where they share
     * its device's memory, and accumulate into its flat gradient (which an
     * all-reduce reads); stages elsewhere work on copies, written back
     * after each update; each stage steps its own optimizer over its own
     * range */
    int bound = rumor_pipeline_bind_params(t->pipe, t->stage->params, t->dev);
    RUMOR_CHECK(bound);
    t->params_bound = bound;
    t->grads_bound = rumor_pipeline_bind_grads(t->pipe, t->stage->grads, t->dev);
    return 0;
}

static int open_all(rumor_trainer_t *t)
{
    const rumor_trainer_config_t *c = &t->cfg;
    RUMOR_CHECK(rumor_trainer_config_check(c));
    char devspec[32];
    const char *device = c->device;
    if (device && c->host_params && strncmp(device, "cuda", 4) == 0 && !c->devices) {
        /* a peer gossips host memory: its model runs on the GPU as a stage
         * of one, whose parameters the mixer's buffers load and take back */
        t->cfg.devices = device;
        device = NULL;
    }
    if (!device && c->devices && !c->host_params) {
        /* stages all on one GPU: the whole model's buffers live there too,
         * so the stages train them in place */
        char specs[RUMOR_SCHED_MAX_DEVICES][32];
        int n, same = 1;
        RUMOR_CHECK(device_specs(c->devices, specs, RUMOR_SCHED_MAX_DEVICES, &n));
        for (int i = 1; i < n; i++)
            same &= strcmp(specs[i], specs[0]) == 0;
        if (same && strncmp(specs[0], "cuda", 4) == 0) {
            snprintf(devspec, sizeof devspec, "%s", specs[0]);
            device = devspec;
        }
    }
    if (!device) {
        snprintf(devspec, sizeof devspec, c->threads ? "cpu:%d" : "cpu", c->threads);
        device = devspec;
    }
    TRY("device", rumor_device_open(device, &t->dev));
    if (c->host_params && t->dev->kind != RUMOR_DEV_CPU)
        return rumor_err_set(RUMOR_ENOTSUP, "device %s: peers gossip host memory; use a CPU "
                             "device", t->dev->name);
    if (t->dev->kind != RUMOR_DEV_CPU && !spec_has_precision(device))
        TRY("--precision", rumor_device_set_precision(t->dev, c->precision));
    else if (c->precision != RUMOR_PREC_FP32 && !(t->cfg.devices && strstr(t->cfg.devices, "cuda")))
        return rumor_err_set(RUMOR_ENOTSUP, "--precision %s: the CPU computes in fp32; %s needs "
                             "a GPU (--device cuda:0 or --devices with a GPU)",
                             rumor_precision_name(c->precision),
                             rumor_precision_name(c->precision));
    /* the model first: a language model's context is the data's window, and
     * the data's vocabulary is its default */
    int vocab;
    t->lm = rumor_source_spec_kind(c->data, &vocab) == RUMOR_BATCH_TOKENS;
    TRY("model", rumor_model_create(c->model, vocab, &t->model));
    rumor_source_config_t sc;
    rumor_source_config_default(&sc);
    sc.spec = c->data;
    sc.seed = c->seed;
    sc.rank = c->rank;
    sc.world = c->world;
    sc.stream = c->data_stream;
    sc.batch = c->batch;
    if (t->lm) {
        sc.seq = t->model->ctx;
        sc.vocab = t->model->vocab;
    }
    sc.limit = c->train_limit;
    sc.shuffle_labels = c->shuffle_labels;
    sc.lockstep = c->lockstep;
    TRY("data", rumor_source_open(&sc, &t->src));
    if (!t->lm)
        TRY("model", check_images(t));
    size_run(t);
    int pipelined = c->stages > 1 || c->schedule || t->cfg.devices;
    rumor_stage_config_t stc = { .model = t->model, .dev = t->dev, .first = 0,
                                 .last = t->model->nblocks, .max_B = c->batch,
                                 .T = rumor_model_seq(t->model), .slots = 1, .seed = c->seed,
                                 .stream = c->data_stream ? c->data_stream : (uint64_t)c->rank,
                                 .optim = pipelined ? NULL : &t->oc };
    TRY("model", rumor_stage_create(&stc, &t->stage));
    /* the trainer keeps the stage's own buffer, so that binding another
     * (the mixer's) and back never frees it */
    t->own = t->stage->params;
    t->stage->owns_params = 0;
    /* one worker per CPU thread, each with one BLAS thread (step.h) */
    int workers = t->dev->kind == RUMOR_DEV_CPU ? t->dev->nthreads : 1;
    TRY("workers", rumor_step_create(t->stage, workers, &t->step));
    if (pipelined)
        TRY("pipeline", open_pipeline(t));
    return 0;
}

int rumor_trainer_create(const rumor_trainer_config_t *c, rumor_trainer_t **out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_trainer_create: out is NULL");
    *out = NULL;
    if (!c || !c->data || !c->model)
        return rumor_err_set(RUMOR_EINVAL, "trainer: no config, data or model");
    rumor_trainer_t *t = calloc(1, sizeof *t);
    if (!t)
        return rumor_err_set(RUMOR_ENOMEM, "trainer: out of memory");
    t->cfg = *c;
    int rc = own_strings(t);
    if (rc == 0)
        rc = open_all(t);
    if (rc < 0) {
        rumor_trainer_destroy(&t);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = t;
    return 0;
}

int rumor_trainer_batch(rumor_trainer_t *t, long step, rumor_batch_t *b)
{
    int n = rumor_source_next(t->src, step, b);
    RUMOR_CHECK(n);
    return 0;
}

/* After a pipeline step: zero-bubble lists re-planned for this machine's
 * costs (the first step warms up; the second is measured), and the
 * bubble's running mean. */
static void pipeline_stepped(rumor_trainer_t *t)
{
    if (t->pipe->steps == 2 && (t->pipe->sched->kind == RUMOR_SCHED_ZBH1 ||
                                t->pipe->sched->kind == RUMOR_SCHED_ZBV)) {
        double was, now;
        int rc = rumor_pipeline_replan(t->pipe, NULL, &was, &now);
        if (rc < 0)
            rumor_warn("re-planning the %s lists: %s; keeping them", t->pipe->sched->name,
                       rumor_err_msg());
        else
            rumor_info("%s lists %s for the measured F, B and W times: simulated bubble "
                       "%.1f%% -> %.1f%%", t->pipe->sched->name,
                       rc ? "rebuilt" : "kept", 100.0 * was, 100.0 * now);
    }
    double bub = rumor_pipeline_bubble(t->pipe);
    t->bubble = t->bubble > 0 ? 0.9 * t->bubble + 0.1 * bub : bub;
}

static int check_loss(const rumor_trainer_t *t, long step, float loss)
{
    if (!isfinite(loss))
        return rumor_err_set(RUMOR_EINVAL, "training diverged: loss is %g at step %ld: lower --lr (now %g)",
                             (double)loss, step, (double)rumor_trainer_lr(t));
    return 0;
}

int rumor_trainer_grads(rumor_trainer_t *t, const rumor_batch_t *b, long step, float *loss)
{
    if (t->pipe) {
        RUMOR_CHECK(rumor_pipeline_grads(t->pipe, b, step, loss));
        pipeline_stepped(t);
        t->grads_on_stages = !t->grads_bound; /* copied only when asked for */
    } else {
        RUMOR_CHECK(rumor_step_grads(t->step, b, step, loss));
    }
    return check_loss(t, step, *loss);
}

/* rumor_trainer_grads_step's hand-over: each stage's buffer is recorded (all
 * must be one) */
struct next_wrap {
    rumor_pipeline_next_fn fn;
    void *ctx;
    float **base; /* (S) */
};

static int next_wrapped(void *ctx, int s, size_t lo, size_t hi, double wait, float **params)
{
    struct next_wrap *nw = ctx;
    int rc = nw->fn(nw->ctx, s, lo, hi, wait, params);
    if (rc > 0)
        nw->base[s] = *params;
    return rc;
}

int rumor_trainer_grads_step(rumor_trainer_t *t, const rumor_batch_t *b, long step, float *loss,
                             rumor_pipeline_next_fn next, void *ctx)
{
    float *base = NULL;
    double t0 = rumor_now();
    if (!t->pipe) {
        RUMOR_CHECK(rumor_step_grads(t->step, b, step, loss));
        RUMOR_CHECK(check_loss(t, step, *loss));
        double t1 = rumor_now();
        size_t n = t->model->nparams;
        size_t cell = t->stepped && t->step_cell > 0 ? t->step_cell : n;
        for (size_t lo = 0; lo < n; lo += cell) {
            size_t hi = n - lo > cell ? lo + cell : n;
            float *mixed = NULL;
            int rc;
            while ((rc = next(ctx, 0, lo, hi, 1.0, &mixed)) == 0)
                ;
            RUMOR_CHECK(rc);
            if (!base)
                RUMOR_CHECK(rumor_trainer_bind(t, base = mixed));
            else if (mixed != base)
                return rumor_err_set(RUMOR_ESTATE, "trainer: ranges of one step were handed "
                                                   "different buffers");
            RUMOR_CHECK(rumor_step_update_range(t->step, lo, hi, hi == n));
            if (hi < n && t->stepped)
                RUMOR_CHECK(t->stepped(ctx, base, hi));
        }
        t->wait_s = rumor_now() - t1;
        return 0;
    }
    int S = t->pipe->S;
    struct next_wrap nw = { next, ctx, calloc((size_t)S, sizeof(float *)) };
    if (!nw.base)
        return rumor_err_set(RUMOR_ENOMEM, "trainer: out of memory");
    int rc = rumor_pipeline_grads_step(t->pipe, b, step, loss, t->dev, next_wrapped, &nw);
    for (int s = 0; rc == 0 && s < S; s++) { /* (a stage without parameters gets none) */
        if (nw.base[s] && base && nw.base[s] != base)
            rc = rumor_err_set(RUMOR_ESTATE, "trainer: the stages were handed different "
                               "buffers");
        if (nw.base[s])
            base = nw.base[s];
    }
    if (rc == 0 && !base)
        rc = rumor_err_set(RUMOR_ESTATE, "trainer: no stage was handed parameters");
    free(nw.base);
    RUMOR_CHECK(rc);
    pipeline_stepped(t);
    t->wait_s = rumor_now() - t0 - t->pipe->step_s;
    t->grads_on_stages = 0; /* stepped on */
    /* the whole model (evaluation, checkpoints) reads the new buffer */
    rumor_step_bind_params(t->step, base);
    return check_loss(t, step, *loss);
}

float *rumor_trainer_flat_grads(rumor_trainer_t *t)
{
    if (t->grads_on_stages) {
        if (rumor_pipeline_gather_grads(t->pipe, t->stage->grads, t->dev) < 0)
            return NULL;
        t->grads_on_stages = 0;
    }
    return t->stage->grads;
}

int rumor_trainer_params_ready(rumor_trainer_t *t)
{
    return t->pipe && !t->params_bound ? rumor_pipeline_params_ready(t->pipe) : 1;
}

int rumor_trainer_sync_params(rumor_trainer_t *t)
{
    return t->pipe && !t->params_bound ? rumor_pipeline_params_sync(t->pipe) : 0;
}

int rumor_trainer_fills_cores(const rumor_trainer_t *t)
{
    if (!t->pipe)
        return 0;
    long threads = 0, cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int d = 0; d < t->pipe->P; d++) {
        if (t->pipe->dev[d]->kind != RUMOR_DEV_CPU)
            return 0; /* a GPU stage's thread mostly waits for its device */
        threads += t->pipe->dev[d]->nthreads;
    }
    return threads >= cores;
}

rumor_device_t *rumor_trainer_host_mem(const rumor_trainer_t *t)
{
    if (!t->pipe || t->dev->kind != RUMOR_DEV_CPU)
        return NULL;
    for (int s = 0; s < t->pipe->S; s++)
        if (t->pipe->st[s]->dev->kind != RUMOR_DEV_CPU)
            return t->pipe->st[s]->dev;
    return NULL;
}

int rumor_trainer_grads_many(rumor_trainer_t *t, long first, int batches, float *loss,
                             long *examples)
{
    if (batches < 1)
        return rumor_err_set(RUMOR_EINVAL, "trainer: %d batches", batches);
    rumor_batch_t b;
    if (batches == 1) {
        RUMOR_CHECK(rumor_trainer_batch(t, first, &b));
        *examples = b.n;
        return rumor_trainer_grads(t, &b, first, loss);
    }
    size_t n = t->model->nparams;
    if (t->dev->kind != RUMOR_DEV_CPU)
        return rumor_err_set(RUMOR_ENOTSUP, "trainer: several batches a step need the "
                             "gradient in host memory (a CPU device)");
    if (!t->acc && !(t->acc = malloc(n * sizeof *t->acc)))
        return rumor_err_set(RUMOR_ENOMEM, "trainer: out of memory");
    /* each batch's gradient is a mean over its targets: weighted by them,
     * the sum over batches is the mean over all targets */
    double lsum = 0.0;
    long targets = 0;
    *examples = 0;
    for (int i = 0; i < batches; i++) {
        float l;
        RUMOR_CHECK(rumor_trainer_batch(t, first + i, &b));
        RUMOR_CHECK(rumor_trainer_grads(t, &b, first + i, &l));
        long w = rumor_batch_targets(&b);
        const float *g = rumor_trainer_flat_grads(t);
        if (!g)
            return rumor_err_trace_add(__FILE__, __LINE__, rumor_err_code());
        if (i == 0)
            for (size_t j = 0; j < n; j++)
                t->acc[j] = (float)w * g[j];
        else
            for (size_t j = 0; j < n; j++)
                t->acc[j] += (float)w * g[j];
        lsum += (double)l * (double)w;
        targets += w;
        *examples += b.n;
    }
    float inv = (float)(1.0 / (double)targets);
    for (size_t j = 0; j < n; j++)
        t->stage->grads[j] = t->acc[j] * inv; /* rumor_trainer_update reads it */
    *loss = (float)(lsum / (double)targets);
    return 0;
}

float rumor_trainer_lr(const rumor_trainer_t *t)
{
    return rumor_optim_lr_at(&t->oc, rumor_trainer_optim_steps(t));
}

void rumor_trainer_set_optim_steps(rumor_trainer_t *t, long step)
{
    if (step < 0)
        step = 0;
    if (t->pipe)
        rumor_pipeline_set_optim_steps(t->pipe, step);
    if (t->stage->opt)
        t->stage->opt->t = step;
}

long rumor_trainer_optim_steps(const rumor_trainer_t *t)
{
    return t->pipe ? rumor_pipeline_optim_steps(t->pipe) : t->stage->opt->t;
}

void rumor_trainer_set_step_ranges(rumor_trainer_t *t, size_t cell,
                                   rumor_trainer_stepped_fn stepped)
{
    t->step_cell = cell;
    t->stepped = stepped;
}

int rumor_trainer_update(rumor_trainer_t *t, float *lr)
{
    if (lr)
        *lr = rumor_trainer_lr(t);
    if (!t->pipe)
        return rumor_step_update(t->step);
    /* each stage steps its own range where it lives; the flat gradient is
     * what counts (an all-reduce may have replaced it) */
    if (!t->grads_bound && !t->grads_on_stages)
        RUMOR_CHECK(rumor_pipeline_scatter_grads(t->pipe, t->stage->grads, t->dev));
    t->grads_on_stages = 0;
    RUMOR_CHECK(rumor_pipeline_update(t->pipe));
    /* stages working on copies: the whole buffer is current again */
    if (!t->params_bound)
        RUMOR_CHECK(rumor_pipeline_write_params(t->pipe, t->stage->params, t->dev));
    return 0;
}

/* A pipeline's optimizer state lives in its stages; checkpoints hold the
 * whole space, so it is gathered into (or scattered from) a whole-model
 * optimizer on the host for the save or the load. */
static int whole_optim(rumor_trainer_t *t, rumor_optim_t **o)
{
    *o = t->stage->opt;
    if (!t->pipe)
        return 0;
    RUMOR_CHECK(rumor_optim_create(t->dev, &t->oc, t->model->nparams, o));
    return 0;
}

static void whole_optim_done(rumor_trainer_t *t, rumor_optim_t **o)
{
    if (t->pipe)
        rumor_optim_destroy(o);
}

int rumor_trainer_epoch(const rumor_trainer_t *t, long step)
{
    return (int)(step / t->steps_per_epoch) + 1;
}

int rumor_trainer_bind(rumor_trainer_t *t, float *params)
{
    rumor_step_bind_params(t->step, params ? params : t->own);
    if (t->pipe) /* stages on another device load their range */
        RUMOR_CHECK(rumor_pipeline_bind_params(t->pipe, params ? params : t->own, t->dev));
    return 0;
}

int rumor_evaluate(rumor_step_t *s, rumor_source_t *src, int batch, int max_batches,
                   rumor_eval_t *e)
{
    double sum = 0.0;
    long targets = 0, correct = 0;
    int images = rumor_source_kind(src) == RUMOR_BATCH_IMAGES;
    int nb = rumor_source_val_batches(src, batch);
    if (max_batches > 0 && max_batches < nb)
        nb = max_batches;
    for (int i = 0; i < nb; i++) {
        rumor_batch_t b;
        int got = rumor_source_val(src, i, batch, &b);
        RUMOR_CHECK(got);
        if (got == 0)
            break;
        RUMOR_CHECK(rumor_step_eval(s, &b, &sum, &targets, images ? &correct : NULL));
    }
    if (targets == 0)
        return rumor_err_set(RUMOR_EINVAL, "evaluation: no validation data in %s",
                             rumor_source_describe(src));
    e->loss = sum / (double)targets;
    e->accuracy = images ? (double)correct / (double)targets : -1.0;
    e->targets = targets;
    return 0;
}

int rumor_trainer_evaluate(rumor_trainer_t *t, float *params, rumor_eval_t *e)
{
    RUMOR_CHECK(rumor_trainer_sync_params(t));
    float *bound = t->stage->params;
    if (params)
        rumor_step_bind_params(t->step, params);
    int rc = rumor_evaluate(t->step, t->src, t->cfg.batch, t->cfg.eval_batches, e);
    if (params)
        rumor_step_bind_params(t->step, bound);
    return rc;
}

/* What a checkpoint of `step` says of itself. */
static rumor_ckpt_info_t ckpt_info(const rumor_trainer_t *t, const char *swarm, int rank,
                                   long step)
{
    rumor_ckpt_info_t ci;
    memset(&ci, 0, sizeof ci);
    ci.round = step;
    ci.epoch = rumor_trainer_epoch(t, step);
    ci.rank = rank;
    snprintf(ci.swarm, sizeof ci.swarm, "%s", swarm);
    return ci;
}

int rumor_trainer_save(rumor_trainer_t *t, const char *dir, const char *swarm, int rank,
                       long step, int keep)
{
    rumor_ckpt_info_t ci = ckpt_info(t, swarm, rank, step);
    RUMOR_CHECK(rumor_trainer_sync_params(t));
    rumor_optim_t *o;
    RUMOR_CHECK(whole_optim(t, &o));
    int rc = t->pipe ? rumor_pipeline_optim_state(t->pipe, o, 1) : 0;
    if (rc == 0)
        rc = rumor_ckpt_save(dir, t->stage, o, &ci, keep > 0 ? keep : 3);
    whole_optim_done(t, &o);
    return rc;
}

int rumor_trainer_save_params(rumor_trainer_t *t, const float *params, const char *dir,
                              const char *swarm, int rank, long step)
{
    rumor_ckpt_info_t ci = ckpt_info(t, swarm, rank, step);
    RUMOR_CHECK(rumor_trainer_sync_params(t));
    /* the checkpoint reads the stage's parameters only: point it at these
     * for the write (the trainer, not the stage, owns its buffer) */
    float *bound = t->stage->params;
    t->stage->params = (float *)params;
    int rc = rumor_ckpt_save(dir, t->stage, NULL, &ci, 1);
    t->stage->params = bound;
    return rc;
}

int rumor_trainer_resume(rumor_trainer_t *t, const char *path, long *step)
{
    rumor_ckpt_info_t ci;
    rumor_optim_t *o;
    RUMOR_CHECK(whole_optim(t, &o));
    int rc = rumor_ckpt_load(path, t->stage, o, &ci);
    if (rc == 0 && t->pipe)
        rc = rumor_pipeline_optim_state(t->pipe, o, 0);
    if (rc == 0 && t->pipe && !t->params_bound) /* stages on copies load what was read */
        rc = rumor_pipeline_bind_params(t->pipe, t->stage->params, t->dev);
    if (rc > 0)
        rc = 0;
    whole_optim_done(t, &o);
    RUMOR_CHECK(rc);
    *step = ci.round;
    return 0;
}

int rumor_trainer_resume_latest(rumor_trainer_t *t, const char *dir, const char *swarm, int rank,
                                long *step, char *path, size_t path_len)
{
    rumor_ckpt_info_t ci;
    rumor_optim_t *o;
    RUMOR_CHECK(whole_optim(t, &o));
    int rc = rumor_ckpt_load_latest(dir, swarm, rank, t->stage, o, &ci, path, path_len);
    if (rc == 0 && t->pipe) {
        int r2 = rumor_pipeline_optim_state(t->pipe, o, 0);
        if (r2 == 0 && !t->params_bound)
            r2 = rumor_pipeline_bind_params(t->pipe, t->stage->params, t->dev);
        rc = r2 < 0 ? r2 : rc;
    }
    whole_optim_done(t, &o);
    RUMOR_CHECK(rc);
    if (rc == 0)
        *step = ci.round;
    return rc;
}

void rumor_trainer_describe(const rumor_trainer_t *t, FILE *out, const char *prog)
{
    const rumor_trainer_config_t *c = &t->cfg;
    int w = rumor_step_workers(t->step);
    fprintf(out, "%s: %s, %zu parameters, %s, %d worker%s\n", prog, t->model->spec,
            t->model->nparams, t->dev->name, w, w == 1 ? "" : "s");
    fprintf(out, "%s: %s%s\n", prog, rumor_source_describe(t->src),
            c->shuffle_labels ? ", labels shuffled" : "");
    char per[64] = "";
    if (t->lm)
        snprintf(per, sizeof per, " x %d tokens", t->model->ctx);
    fprintf(out, "%s: %s lr %g, batch %d%s, %ld steps (%ld an epoch)\n", prog,
            t->oc.kind == RUMOR_OPT_ADAMW ? "adamw" : "sgd", (double)t->oc.lr, c->batch, per,
            t->total_steps, t->steps_per_epoch);
    rumor_trainer_describe_pipeline(t, out, prog);
}

void rumor_trainer_describe_pipeline(const rumor_trainer_t *t, FILE *out, const char *prog)
{
    if (!t->pipe)
        return;
    const rumor_pipeline_t *p = t->pipe;
    fprintf(out, "%s: pipeline %s over %d device%s, %d micro-batches (schedule bubble %.1f%%, "
                 "peak activations", prog, p->sched->name, p->P, p->P == 1 ? "" : "s", p->M,
            100.0 * p->sched->bubble);
    for (int d = 0; d < p->P; d++)
        fprintf(out, " %d", p->sched->peak[d]);
    fprintf(out, ")\n");
    for (int s = 0; s < p->S; s++) {
        char pred[64] = "";
        if (t->stage_pred)
            snprintf(pred, sizeof pred, ", predicted %.1f ms a step", 1e3 * t->stage_pred[s]);
        fprintf(out, "%s:   stage %d on %s: blocks %d-%d, %zu parameters%s\n", prog, s,
                p->st[s]->dev->name, p->cut[s], p->cut[s + 1] - 1, p->st[s]->n, pred);
    }
}

/* ------------------------------------------------------------------ run */

/* Where a run stands, for its lines and events. */
struct run_state {
    rumor_progress_t prog;
    double start, epoch_start, loss_ema, epoch_loss;
    long units, epoch_rows, epoch_steps;
    rumor_eval_t ev;
    long evaluated_at;
};

static void epoch_end(rumor_trainer_t *t, const rumor_run_config_t *rc, struct run_state *s,
                      long step)
{
    int epoch = (int)((step - 1) / t->steps_per_epoch) + 1, epochs = (int)
        ((t->total_steps + t->steps_per_epoch - 1) / t->steps_per_epoch);
    double secs = rumor_now() - s->epoch_start;
    double train_loss = s->epoch_rows ? s->epoch_loss / (double)s->epoch_rows : 0.0;
    int fresh = s->evaluated_at == step;
    if (!rc->quiet) {
        char ev[96] = "";
        if (fresh && t->lm)
            snprintf(ev, sizeof ev, "  validation loss %.4f", s->ev.loss);
        else if (fresh)
            snprintf(ev, sizeof ev, "  test loss %.4f  test accuracy %.2f%%", s->ev.loss,
                     100.0 * s->ev.accuracy);
        rumor_progress_print(&s->prog, "epoch %d/%d  train loss %.4f%s  %.1f s  %.0f %s/s", epoch,
                             epochs, train_loss, ev, secs, (double)s->epoch_rows / secs,
                             t->lm ? "windows" : "ex");
    }
    if (t->lm)
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,"
                            "\"train_loss\":%.6g,\"val_loss\":%.6g,\"seconds\":%.3f,"
                            "\"examples_per_s\":%.1f",
                            epoch, step, train_loss, fresh ? s->ev.loss : -1.0, secs,
                            (double)s->epoch_rows / secs);
    else
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,"
                            "\"train_loss\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6f,"
                            "\"seconds\":%.3f,\"examples_per_s\":%.1f",
                            epoch, step, train_loss, fresh ? s->ev.loss : -1.0,
                            fresh ? s->ev.accuracy : -1.0, secs, (double)s->epoch_rows / secs);
    s->epoch_start = rumor_now();
    s->epoch_loss = 0;
    s->epoch_rows = 0;
}

static int evaluate_now(rumor_trainer_t *t, const rumor_run_config_t *rc, struct run_state *s,
                        long step)
{
    TRY("evaluation", rumor_trainer_evaluate(t, NULL, &s->ev));
    s->evaluated_at = step;
    /* accuracy is a classifier's: a language model's event has none */
    if (t->lm)
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"eval\",\"step\":%ld,\"val_loss\":%.6g,"
                            "\"train_loss\":%.6g", step, s->ev.loss, s->loss_ema);
    else
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"eval\",\"step\":%ld,\"test_loss\":%.6g,"
                            "\"accuracy\":%.6f,\"train_loss\":%.6g",
                            step, s->ev.loss, s->ev.accuracy, s->loss_ema);
    if (rc->checkpoint_dir)
        TRY("checkpoint", rumor_trainer_save(t, rc->checkpoint_dir, "train",
                                                        t->cfg.rank, step, rc->keep_checkpoints));
    return 0;
}

int rumor_trainer_trace_rows(const rumor_trainer_t *t, rumor_trace_t *tr)
{
    if (t->pipe) {
        rumor_pipeline_trace_rows(t->pipe, tr);
        return t->pipe->P;
    }
    char name[96];
    snprintf(name, sizeof name, "compute: %s", t->dev->name);
    rumor_trace_row(tr, 0, name);
    return 1;
}

void rumor_trainer_trace(const rumor_trainer_t *t, rumor_trace_t *tr, long step, double g0,
                         double g1, double u0, double u1)
{
    char args[48];
    snprintf(args, sizeof args, "\"step\":%ld", step);
    if (t->pipe)
        rumor_pipeline_trace(t->pipe, tr, step);
    else
        rumor_trace_span(tr, 0, "gradient", "compute", g0, g1, args);
    if (!t->pipe || !rumor_pipeline_stepped(t->pipe)) /* else each stage's step is traced */
        rumor_trace_span(tr, 0, "update", "optimizer", u0, u1, args);
}

/* rumor_trainer_run's steps from *stepp to the end. */
static int run_steps(rumor_trainer_t *t, const rumor_run_config_t *rc, struct run_state *s,
                     long *stepp, long first, rumor_trace_t *trace)
{
    long total = t->total_steps, step = *stepp;
    const char *unit = t->lm ? "tok/s" : "ex/s";
    while (step < total) {
        long k = step;
        rumor_batch_t b;
        float loss, lr;
        TRY("data", rumor_trainer_batch(t, step, &b));
        double t0 = rumor_now();
        TRY("training step", rumor_trainer_grads(t, &b, step, &loss));
        double t1 = rumor_now();
        TRY("optimizer step", rumor_trainer_update(t, &lr));
        if (trace) /* every action of the step, for Perfetto */
            rumor_trainer_trace(t, trace, k, t0, t1, t1, rumor_now());
        (*stepp)++;
        step = *stepp;
        s->units += rumor_batch_targets(&b);
        s->epoch_rows += b.n;
        s->epoch_steps++;
        s->epoch_loss += (double)loss * b.n;
        s->loss_ema = isnan(s->loss_ema) ? loss : 0.9 * s->loss_ema + 0.1 * loss;
        int at_epoch_end = step % t->steps_per_epoch == 0 || step == total;
        int evaluate = rc->eval_every > 0 ? step % rc->eval_every == 0 || step == total
                                          : at_epoch_end;
        if (evaluate)
            RUMOR_CHECK(evaluate_now(t, rc, s, step));
        double rate = (double)s->units / (rumor_now() - s->start);
        char ev[48] = "", bub[32] = "";
        if (s->evaluated_at >= 0)
            snprintf(ev, sizeof ev, t->lm ? "  val %.4f" : "  acc %.2f%%",
                     t->lm ? s->ev.loss : 100.0 * s->ev.accuracy);
        if (t->pipe) /* the measured idle share of the pipeline's devices */
            snprintf(bub, sizeof bub, "  bubble %.0f%%", 100.0 * t->bubble);
        if (rumor_progress_update(&s->prog, step - first, evaluate,
                                  "epoch %d/%d  step %ld/%ld  loss %.4f%s  lr %.3g  %.0f %s%s",
                                  rumor_trainer_epoch(t, step - 1),
                                  (int)((total + t->steps_per_epoch - 1) / t->steps_per_epoch),
                                  step, total, s->loss_ema, ev, (double)lr, rate, unit, bub))
            rumor_metrics_write(rc->metrics,
                                "\"event\":\"step\",\"epoch\":%d,\"step\":%ld,\"loss\":%.6g,"
                                "\"lr\":%.6g,\"%s\":%.1f,\"bubble\":%.4f",
                                rumor_trainer_epoch(t, step - 1), step, (double)loss, (double)lr,
                                t->lm ? "tokens_per_s" : "examples_per_s", rate,
                                t->pipe ? t->bubble : 0.0);
        if (at_epoch_end)
            epoch_end(t, rc, s, step);
    }
    return 0;
}

int rumor_trainer_run(rumor_trainer_t *t, const rumor_run_config_t *given, rumor_run_result_t *res)
{
    const rumor_trainer_config_t *c = &t->cfg;
    rumor_metrics_t closed; /* writes to it do nothing */
    memset(&closed, 0, sizeof closed);
    rumor_run_config_t r = *given;
    if (!r.metrics)
        r.metrics = &closed;
    const rumor_run_config_t *rc = &r;
    FILE *out = rc->out ? rc->out : stdout;
    long total = t->total_steps, step = rc->first;
    if (step < 0)
        return rumor_err_set(RUMOR_EINVAL, "run: first step %ld", step);
    if (step >= total) /* a run resumed at its end would report what it did not do */
        return rumor_err_set(RUMOR_ESTATE, "run: step %ld is already at or past the run's last "
                             "step (%ld): nothing to train", step, total);
    struct run_state s;
    memset(&s, 0, sizeof s);
    s.loss_ema = NAN;
    s.ev.loss = NAN;
    s.ev.accuracy = -1.0;
    s.evaluated_at = -1;
    rumor_metrics_write(rc->metrics,
                        "\"event\":\"start\",\"model\":\"%s\",\"params\":%zu,\"device\":\"%s\","
                        "\"data\":\"%s\",\"steps\":%ld,\"steps_per_epoch\":%ld,\"first\":%ld,"
                        "\"batch\":%d,\"ctx\":%d,\"optimizer\":\"%s\",\"lr\":%g,\"seed\":%llu",
                        t->model->spec, t->model->nparams, t->dev->name,
                        rumor_source_describe(t->src), total, t->steps_per_epoch, step, c->batch,
                        rumor_model_seq(t->model), rc->optimizer ? rc->optimizer : "",
                        (double)t->oc.lr, (unsigned long long)c->seed);
    rumor_progress_begin(&s.prog, out, total - step, rc->progress, rc->quiet);
    s.start = s.epoch_start = rumor_now();
    long first = step;
    rumor_trace_t *trace = NULL;
    if (rc->trace) {
        RUMOR_CHECK(rumor_trace_open(rc->trace, s.start, &trace));
        rumor_trainer_trace_rows(t, trace);
    }
    int rrc = run_steps(t, rc, &s, &step, first, trace);
    int trc = rumor_trace_close(&trace);
    if (rrc == 0)
        rrc = trc;
    if (rrc == 0) /* the caller may read the parameters now */
        rrc = rumor_trainer_sync_params(t);
    RUMOR_CHECK(rrc);
    double secs = rumor_now() - s.start, rate = secs > 0 ? (double)s.units / secs : 0.0;
    long ran = step - first;
    if (t->lm) {
        fprintf(out, "validation loss %.4f (%.4f bits per token) after %ld steps in %.1f s, "
                     "%.0f tokens/s\n", s.ev.loss, s.ev.loss / log(2.0), step, secs, rate);
    } else if (step % t->steps_per_epoch == 0) {
        long e = step / t->steps_per_epoch;
        fprintf(out, "test accuracy %.2f%% (test loss %.4f) after %ld epoch%s in %.1f s, "
                     "%.0f examples/s\n", 100.0 * s.ev.accuracy, s.ev.loss, e, e == 1 ? "" : "s",
                secs, rate);
    } else {
        fprintf(out, "test accuracy %.2f%% (test loss %.4f) after %ld steps in %.1f s, "
                     "%.0f examples/s\n", 100.0 * s.ev.accuracy, s.ev.loss, step, secs, rate);
    }
    fflush(out);
    if (t->lm)
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"done\",\"val_loss\":%.6g,\"steps\":%ld,\"ran\":%ld,"
                            "\"seconds\":%.3f,\"tokens_per_s\":%.1f",
                            s.ev.loss, step, ran, secs, rate);
    else
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"done\",\"test_accuracy\":%.6f,\"test_loss\":%.6g,"
                            "\"steps\":%ld,\"ran\":%ld,\"seconds\":%.3f,\"examples_per_s\":%.1f",
                            s.ev.accuracy, s.ev.loss, step, ran, secs, rate);
    if (res) {
        res->eval = s.ev;
        res->steps = step;
        res->seconds = secs;
        res->rate = rate;
    }
    return 0;
}
