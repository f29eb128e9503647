/* The trainer: its configuration checked, and the device, model, data,
 * stages and pipeline opened and fitted together (see trainer.h). Steps are
 * in trainer_step.c, evaluation and rumor-train's run in trainer_run.c,
 * checkpoints in trainer_ckpt.c. */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "trainer_int.h"

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
    /* the tokenizer the tokens were made with, for the checkpoints */
    if (rc == 0 && rumor_bpe_data_tokenizer(c->data, t->tokenizer, sizeof t->tokenizer))
        rc = rumor_bpe_digest_dir(t->tokenizer, t->tokenizer_digest);
    if (rc < 0) {
        rumor_trainer_destroy(&t);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    *out = t;
    return 0;
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
        /* its peak: a step allocates nothing on the device */
        fprintf(out, "%s:   stage %d on %s: blocks %d-%d, %zu parameters%s, %.1f MiB of device "
                     "memory\n", prog, s, p->st[s]->dev->name, p->cut[s], p->cut[s + 1] - 1,
                p->st[s]->n, pred, (double)rumor_stage_device_bytes(p->st[s]) / (1 << 20));
    }
}

const rumor_model_t *rumor_trainer_model(const rumor_trainer_t *t)
{
    return t->model;
}

float *rumor_trainer_params(const rumor_trainer_t *t)
{
    return t->stage->params;
}

rumor_device_t *rumor_trainer_device(const rumor_trainer_t *t)
{
    return t->dev;
}

rumor_source_t *rumor_trainer_source(const rumor_trainer_t *t)
{
    return t->src;
}

int rumor_trainer_pipelined(const rumor_trainer_t *t)
{
    return t->pipe != NULL;
}

int rumor_trainer_is_lm(const rumor_trainer_t *t)
{
    return t->lm;
}

long rumor_trainer_steps_per_epoch(const rumor_trainer_t *t)
{
    return t->steps_per_epoch;
}

long rumor_trainer_total_steps(const rumor_trainer_t *t)
{
    return t->total_steps;
}

double rumor_trainer_bubble(const rumor_trainer_t *t)
{
    return t->bubble;
}

double rumor_trainer_step_wait(const rumor_trainer_t *t)
{
    return t->wait_s;
}
