/* The trainer (src/trainer.h): the policy rumor-train and rumor-peer share.
 *
 * - sizing: steps per epoch, total steps and warm-up against hand-computed
 *   values, lockstep epochs the same on every rank of an uneven split;
 * - keyed steps: a run stopped half-way, checkpointed and resumed in a new
 *   trainer ends with the parameters of the run that never stopped, bit for
 *   bit (batches drawn by step number, optimizer state and schedule
 *   restored);
 * - evaluation of other parameters: all-zero weights score ln 10 and the
 *   share of class 0 in the test set (100 of every 1000 in Fashion-MNIST),
 *   and the bound parameters stay bound and unchanged;
 * - a language model on real English (the GPL's text from base-files)
 *   learns: its validation loss falls from about ln 256 to below the
 *   validation text's unigram entropy;
 * - peers share the initial model but not their dropout masks;
 * - a pipelined trainer trains what the unpipelined one does, each stage
 *   stepping its own optimizer over its own range into the trainer's flat
 *   buffers; its checkpoint holds the whole space: resumed with 3 stages or
 *   with none, the run ends where the unpipelined run that never stopped
 *   does (AdamW's moments restored: lost, they would move every weight);
 * - every misfit (a GPT on images, an MLP on text, widths, divergence) is an
 *   error that says what. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "testutil.h"
#include "text.h"
#include "trainer.h"
#include "trainer_int.h" /* white-box: the stages and pipeline inside */

static char fashion[4200];

static int have_fashion(void)
{
    struct stat sb;
    char probe[4300];
    snprintf(fashion, sizeof fashion, "fashion-mnist:%s", tu_fashion_dir());
    snprintf(probe, sizeof probe, "%s/train-labels-idx1-ubyte.gz", tu_fashion_dir());
    if (stat(probe, &sb) == 0)
        return 1;
    snprintf(probe, sizeof probe, "%s/train-labels-idx1-ubyte", tu_fashion_dir());
    return stat(probe, &sb) == 0;
}

static rumor_trainer_config_t images(int batch, long limit)
{
    rumor_trainer_config_t c;
    rumor_trainer_config_default(&c);
    c.data = fashion;
    c.model = "mlp:784-32-10";
    c.threads = 2;
    c.batch = batch;
    c.train_limit = limit;
    c.epochs = 2;
    c.optim.kind = RUMOR_OPT_ADAMW;
    c.optim.lr = 2e-3f;
    return c;
}

static void check_sizing(void)
{
    rumor_trainer_t *t = NULL;
    /* 1000 examples in batches of 64: 15 full and one of 40 */
    rumor_trainer_config_t c = images(64, 1000);
    CHECK_OK(rumor_trainer_create(&c, &t));
    if (t) {
        CHECK(t->steps_per_epoch == 16 && t->total_steps == 32);
        CHECK(t->oc.warmup_steps == 3 && t->oc.total_steps == 32); /* 0.2 of 16, floored */
        /* the first update's rate: warm-up from lr / 3 */
        CHECK_CLOSE(rumor_trainer_lr(t), 2e-3 / 3, 0, 1e-6);
        CHECK(rumor_trainer_epoch(t, 15) == 1 && rumor_trainer_epoch(t, 16) == 2);
        rumor_batch_t b;
        CHECK_OK(rumor_trainer_batch(t, 15, &b));
        CHECK(b.n == 40 && b.width == 784);
    }
    rumor_trainer_destroy(&t);
    /* steps instead of epochs: a run shorter than its warm-up gets a tenth */
    c.steps = 4;
    c.warmup_epochs = 1;
    c.cosine = 0;
    CHECK_OK(rumor_trainer_create(&c, &t));
    if (t)
        CHECK(t->total_steps == 4 && t->oc.warmup_steps == 0 && t->oc.total_steps == 0);
    rumor_trainer_destroy(&t);
    /* lockstep: 60000 examples over 7 ranks are shards of 8571 and 8572;
     * every rank takes 8571 / 128 = 66 steps an epoch */
    c = images(128, 0);
    c.world = 7;
    c.lockstep = 1;
    for (int r = 0; r < 7; r += 3) {
        c.rank = r;
        CHECK_OK(rumor_trainer_create(&c, &t));
        CHECK(t && t->steps_per_epoch == 66 && t->total_steps == 132);
        rumor_trainer_destroy(&t);
    }
}

/* Runs steps [from, to) by hand. */
static void steps(rumor_trainer_t *t, long from, long to)
{
    for (long k = from; k < to; k++) {
        rumor_batch_t b;
        float loss;
        CHECK_OK(rumor_trainer_batch(t, k, &b));
        CHECK_OK(rumor_trainer_grads(t, &b, k, &loss));
        CHECK_OK(rumor_trainer_update(t, NULL));
    }
}

static void check_resume(const char *spec, const char *data, long limit, const char *dir)
{
    rumor_trainer_config_t c = images(32, limit);
    c.model = spec;
    c.data = data;
    c.steps = 0;
    rumor_trainer_t *a = NULL, *b = NULL, *r = NULL;
    CHECK_OK(rumor_trainer_create(&c, &a));
    CHECK_OK(rumor_trainer_create(&c, &b));
    if (!a || !b) {
        rumor_trainer_destroy(&a);
        rumor_trainer_destroy(&b);
        return;
    }
    long total = a->total_steps, half = a->steps_per_epoch + 3; /* past an epoch's end */
    CHECK(total > half);
    steps(a, 0, total);
    steps(b, 0, half);
    CHECK_OK(rumor_trainer_save(b, dir, "resume", 0, half, 2));
    rumor_trainer_destroy(&b);
    CHECK_OK(rumor_trainer_create(&c, &r));
    long at = -1;
    char path[1024];
    if (r)
        CHECK(rumor_trainer_resume_latest(r, dir, "resume", 0, &at, path, sizeof path) == 0);
    CHECK(at == half);
    if (r && at == half) {
        steps(r, half, total);
        size_t n = a->model->nparams, differ = 0;
        for (size_t i = 0; i < n; i++)
            differ += a->stage->params[i] != r->stage->params[i];
        CHECKF(differ == 0, "%s: %zu of %zu parameters differ after resuming at step %ld of %ld",
               spec, differ, n, half, total);
        CHECK(rumor_trainer_optim_steps(a) == rumor_trainer_optim_steps(r) &&
              rumor_trainer_optim_steps(a) == total);
    }
    rumor_trainer_destroy(&a);
    rumor_trainer_destroy(&r);
}

static void check_evaluate(void)
{
    rumor_trainer_config_t c = images(500, 2000);
    rumor_trainer_t *t = NULL;
    CHECK_OK(rumor_trainer_create(&c, &t));
    if (!t)
        return;
    steps(t, 0, 3);
    rumor_eval_t own, zero, again;
    CHECK_OK(rumor_trainer_evaluate(t, NULL, -1, &own));
    float *z = calloc(t->model->nparams, sizeof *z);
    float *bound = t->stage->params;
    float *copy = malloc(t->model->nparams * sizeof *copy);
    memcpy(copy, bound, t->model->nparams * sizeof *copy);
    CHECK_OK(rumor_trainer_evaluate(t, z, -1, &zero));
    /* zero weights: uniform logits, loss ln 10; ties go to class 0 */
    CHECK_CLOSE(zero.loss, log(10.0), 1e-6, 0);
    CHECK_CLOSE(zero.accuracy, 0.1, 1e-12, 0);
    CHECK(zero.targets == 10000);
    CHECK(t->stage->params == bound && !memcmp(copy, bound, t->model->nparams * sizeof *copy));
    CHECK_OK(rumor_trainer_evaluate(t, NULL, -1, &again));
    CHECK(again.loss == own.loss && again.accuracy == own.accuracy);
    CHECK(own.loss < log(10.0) && own.accuracy > 0.3);
    /* bind another buffer and back: the trainer's own buffer survives */
    CHECK_OK(rumor_trainer_bind(t, z));
    CHECK(t->stage->params == z);
    CHECK_OK(rumor_trainer_bind(t, NULL));
    CHECK(t->stage->params == bound && !memcmp(copy, bound, t->model->nparams * sizeof *copy));
    free(z);
    free(copy);
    rumor_trainer_destroy(&t);
}

/* Peers start from one model (one seed) but draw their own dropout masks:
 * the same batch through rank 0's and rank 1's trainers gives different
 * gradients, and through a second rank 0 the same ones, bit for bit. */
static void check_streams(void)
{
    rumor_trainer_config_t c = images(16, 300);
    c.model = "mlp:784-32-10:dropout=0.5";
    c.world = 2;
    rumor_trainer_t *t[3] = { NULL, NULL, NULL };
    for (int i = 0; i < 3; i++) {
        c.rank = i == 1;
        CHECK_OK(rumor_trainer_create(&c, &t[i]));
    }
    if (t[0] && t[1] && t[2]) {
        size_t n = t[0]->model->nparams;
        CHECK(!memcmp(t[0]->stage->params, t[1]->stage->params, n * sizeof(float)));
        rumor_batch_t b;
        float loss[3];
        CHECK_OK(rumor_trainer_batch(t[0], 0, &b));
        for (int i = 0; i < 3; i++)
            CHECK_OK(rumor_trainer_grads(t[i], &b, 0, &loss[i]));
        CHECK(memcmp(t[0]->stage->grads, t[1]->stage->grads, n * sizeof(float)) != 0);
        CHECK(!memcmp(t[0]->stage->grads, t[2]->stage->grads, n * sizeof(float)));
        CHECK(loss[0] == loss[2] && loss[0] != loss[1]);
    }
    for (int i = 0; i < 3; i++)
        rumor_trainer_destroy(&t[i]);
}

/* A pipelined trainer (2 stages, zb-h1, 4 micro-batches, cut by
 * parameters) trains the model the unpipelined one does: after 6 steps the
 * parameters agree to float rounding (the gradient is summed over
 * micro-batches instead of in one GEMM), and the mixer's way of swapping
 * parameter buffers (bind) reaches the stages. */
static void check_pipelined(void)
{
    rumor_trainer_config_t c = images(32, 640);
    c.model = "mlp:784-32-16-10";
    c.threads = 1;
    rumor_trainer_t *a = NULL, *p = NULL;
    CHECK_OK(rumor_trainer_create(&c, &a));
    c.stages = 2;
    c.schedule = "zb-h1";
    c.microbatches = 4;
    c.partition = "params";
    CHECK_OK(rumor_trainer_create(&c, &p));
    if (!a || !p) {
        rumor_trainer_destroy(&a);
        rumor_trainer_destroy(&p);
        return;
    }
    CHECK(p->pipe && p->pipe->S == 2 && p->pipe->M == 4 && p->pipe->cut[1] == 1);
    steps(a, 0, 6);
    steps(p, 0, 6);
    size_t n = a->model->nparams;
    double err = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)a->stage->params[i] - p->stage->params[i]));
        mx = fmax(mx, fabs((double)a->stage->params[i]));
    }
    CHECKF(err <= 1e-5 * mx, "pipelined parameters after 6 steps differ by %.3g (largest %.3g)",
           err, mx);
    /* bind another buffer (a mixer's): the stages train it */
    float *other = malloc(n * sizeof *other);
    memcpy(other, p->stage->params, n * sizeof *other);
    CHECK_OK(rumor_trainer_bind(p, other));
    CHECK(p->pipe->st[0]->params == other && p->pipe->st[1]->params == other + p->pipe->st[1]->lo);
    steps(p, 6, 7);
    CHECK(memcmp(other, p->own, n * sizeof *other) != 0);
    CHECK_OK(rumor_trainer_bind(p, NULL));
    CHECK(p->pipe->st[0]->params == p->own);
    free(other);
    rumor_trainer_destroy(&a);
    rumor_trainer_destroy(&p);
}

/* Several batches a step (--balance batch): the gradient of batches 5, 6
 * and 7 (the last one short: 100 examples in batches of 32 end with 4) is
 * their per-batch gradients averaged by examples, computed here in double
 * from three single-batch calls; the loss likewise. */
static void check_many(void)
{
    rumor_trainer_config_t c = images(32, 100);
    c.threads = 1;
    rumor_trainer_t *t = NULL;
    CHECK_OK(rumor_trainer_create(&c, &t));
    if (!t)
        return;
    size_t n = t->model->nparams;
    double *ref = calloc(n, sizeof *ref), lref = 0;
    long total = 0;
    for (long k = 5; k < 8; k++) {
        rumor_batch_t b;
        float l;
        CHECK_OK(rumor_trainer_batch(t, k, &b));
        CHECK_OK(rumor_trainer_grads(t, &b, k, &l));
        for (size_t i = 0; i < n; i++)
            ref[i] += (double)b.n * t->stage->grads[i];
        lref += (double)b.n * l;
        total += b.n;
    }
    CHECK(total == 32 + 32 + 4); /* the second pass's batches 1 to 3: 32, 32, the last 4 */
    float loss;
    long ex = 0;
    CHECK_OK(rumor_trainer_grads_many(t, 5, 3, &loss, &ex));
    double err = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(t->stage->grads[i] - ref[i] / (double)total));
        big = fmax(big, fabs(ref[i] / (double)total));
    }
    CHECKF(ex == total && err <= 1e-6 * big, "3 batches' gradient off by %.3g (largest %.3g), "
           "%ld examples", err, big, ex);
    CHECK_CLOSE(loss, lref / (double)total, 1e-6, 0);
    CHECK_ERR(rumor_trainer_grads_many(t, 0, 0, &loss, &ex), RUMOR_EINVAL, "0 batches");
    free(ref);
    rumor_trainer_destroy(&t);
}

/* Cut one way, checkpointed, resumed cut another way. */
static void check_recut(const char *dir)
{
    rumor_trainer_config_t c = images(32, 640);
    c.model = "mlp:784-32-16-10";
    c.threads = 1;
    c.steps = 10;
    rumor_trainer_t *a = NULL, *p = NULL, *q = NULL, *r = NULL;
    CHECK_OK(rumor_trainer_create(&c, &a));
    CHECK_OK(rumor_trainer_create(&c, &r));
    rumor_trainer_config_t pc = c;
    pc.stages = 2;
    pc.schedule = "1f1b";
    pc.microbatches = 2;
    CHECK_OK(rumor_trainer_create(&pc, &p));
    pc.stages = 3;
    pc.schedule = "gpipe";
    pc.microbatches = 4;
    CHECK_OK(rumor_trainer_create(&pc, &q));
    if (!a || !p || !q || !r)
        goto out;
    /* the optimizer state lives in the stages, sized to their ranges, and
     * the stages accumulate into the trainer's flat gradient */
    CHECK(p->stage->opt == NULL && q->stage->opt == NULL && p->grads_bound);
    for (int s = 0; s < q->pipe->S; s++) {
        const rumor_stage_t *st = q->pipe->st[s];
        CHECK(st->opt && st->opt->n == st->n && st->grads == q->stage->grads + st->lo);
    }
    steps(a, 0, 10);
    steps(p, 0, 5);
    CHECK(rumor_trainer_optim_steps(p) == 5);
    CHECK_OK(rumor_trainer_save(p, dir, "recut", 0, 5, 2));
    long at_q = -1, at_r = -1;
    char path[1024];
    CHECK(rumor_trainer_resume_latest(q, dir, "recut", 0, &at_q, path, sizeof path) == 0);
    CHECK(rumor_trainer_resume_latest(r, dir, "recut", 0, &at_r, path, sizeof path) == 0);
    CHECK(at_q == 5 && at_r == 5 && rumor_trainer_optim_steps(q) == 5 &&
          rumor_trainer_optim_steps(r) == 5);
    if (at_q != 5 || at_r != 5)
        goto out;
    steps(q, 5, 10);
    steps(r, 5, 10);
    size_t n = a->model->nparams;
    double eq = 0, er = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        eq = fmax(eq, fabs((double)a->stage->params[i] - q->stage->params[i]));
        er = fmax(er, fabs((double)a->stage->params[i] - r->stage->params[i]));
        mx = fmax(mx, fabs((double)a->stage->params[i]));
    }
    CHECKF(eq <= 1e-5 * mx && er <= 1e-5 * mx,
           "saved with 2 stages at step 5, resumed with 3 stages / none: the parameters at "
           "step 10 differ from the uninterrupted run's by %.3g / %.3g (largest %.3g)",
           eq, er, mx);
out:
    rumor_trainer_destroy(&a);
    rumor_trainer_destroy(&p);
    rumor_trainer_destroy(&q);
    rumor_trainer_destroy(&r);
}

static void check_misfits(void)
{
    rumor_trainer_t *t = NULL;
    rumor_trainer_config_t c = images(32, 500);
    c.model = "gpt:layers=1,dim=8,heads=2,ctx=4,vocab=16";
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_EINVAL, "is a language model");
    c.model = "mlp:100-10";
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_EINVAL, "takes 100 inputs and 10 classes; "
                                                          "the data have 784 and 10");
    c.model = "mlp:784-7";
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_EINVAL, "784 and 10");
    c.model = "mlp:784-16-10";
    c.data = "text:/usr/share/common-licenses/GPL-3";
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_EINVAL, "not a language model");
    c.data = "text:/nonexistent/corpus.txt";
    c.model = "gpt:layers=1,dim=8,heads=2,ctx=4";
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_ESYS, "data: ");
    c.data = fashion;
    c.model = "mlp:784-16-10";
    c.device = "tpu:0";
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_EINVAL, "device");
    c.device = NULL;
    c.batch = 0;
    CHECK_ERR(rumor_trainer_create(&c, &t), RUMOR_EINVAL, "batch 0");
    CHECK(t == NULL);
    /* divergence names the step and the rate */
    c = images(64, 1000);
    c.optim.kind = RUMOR_OPT_SGD;
    c.optim.lr = 1e6f;
    c.warmup_epochs = 0;
    c.cosine = 0;
    CHECK_OK(rumor_trainer_create(&c, &t));
    if (t) {
        int diverged = 0;
        for (long k = 0; k < 20 && !diverged; k++) {
            rumor_batch_t b;
            float loss;
            CHECK_OK(rumor_trainer_batch(t, k, &b));
            if (rumor_trainer_grads(t, &b, k, &loss) < 0) {
                diverged = 1;
                CHECKF(strstr(rumor_err_msg(), "training diverged: loss is") &&
                           strstr(rumor_err_msg(), "lower --lr (now 1e+06)"),
                       "%s", rumor_err_msg());
                break;
            }
            CHECK_OK(rumor_trainer_update(t, NULL));
        }
        CHECK(diverged);
    }
    rumor_trainer_destroy(&t);
}

static void check_lm(const char *dir)
{
    static const char *text = "/usr/share/common-licenses/GPL-3";
    struct stat sb;
    if (stat(text, &sb) != 0) {
        fprintf(stderr, "test_trainer: SKIP the language model: no %s\n", text);
        return;
    }
    char data[300];
    snprintf(data, sizeof data, "text:%s", text);
    rumor_trainer_config_t c;
    rumor_trainer_config_default(&c);
    c.data = data;
    c.model = "gpt:layers=2,dim=32,heads=2,ctx=32";
    c.threads = 2;
    c.batch = 16;
    c.steps = 300;
    c.optim.kind = RUMOR_OPT_ADAMW;
    c.optim.lr = 3e-3f;
    c.optim.weight_decay = 0.0f;
    rumor_trainer_t *t = NULL;
    CHECK_OK(rumor_trainer_create(&c, &t));
    if (!t)
        return;
    CHECK(t->lm && t->model->vocab == 256 && t->total_steps == 300);
    /* the GPL's 35 kB: 31.5k training bytes, an epoch of 31.5k / 512 = 61 steps */
    long train = rumor_source_train_size(t->src);
    CHECK(t->steps_per_epoch == train / (16 * 32));
    rumor_eval_t e0;
    CHECK_OK(rumor_trainer_evaluate(t, NULL, -1, &e0));
    CHECK_CLOSE(e0.loss, log(256.0), 0.1, 0); /* small initial weights: near uniform */
    double h;
    CHECK_OK(rumor_unigram_entropy(rumor_source_val_tokens(t->src), &h));
    FILE *quiet = fopen("/dev/null", "w");
    rumor_run_config_t rc = { .eval_every = 100, .checkpoint_dir = dir, .keep_checkpoints = 2,
                              .out = quiet, .quiet = 1 };
    rumor_run_result_t res;
    CHECK_OK(rumor_trainer_run(t, &rc, &res));
    fclose(quiet);
    CHECK(res.steps == 300 && res.eval.accuracy == -1.0);
    CHECKF(res.eval.loss < h, "validation loss %.4f after 300 steps, unigram entropy %.4f",
           res.eval.loss, h);
    fprintf(stderr, "language model: validation loss %.4f -> %.4f nats (unigram entropy %.4f)\n",
            e0.loss, res.eval.loss, h);
    /* checkpoints at steps 100, 200, 300; the newest two kept */
    char **paths = NULL;
    int n = 0;
    CHECK_OK(rumor_ckpt_list(dir, "train", 0, &paths, &n));
    CHECK(n == 2);
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    rumor_trainer_destroy(&t);
}

int main(void)
{
    tu_training_lock(); /* 8 s on both cores */
    char dir[4200];
    int ran_images = have_fashion();
    if (ran_images) {
        check_sizing();
        check_evaluate();
        check_streams();
        check_pipelined();
        check_many();
        check_misfits();
        snprintf(dir, sizeof dir, "%s/mlp", tu_tmpdir());
        mkdir(dir, 0700);
        check_resume("mlp:784-32-10:dropout=0.2", fashion, 700, dir);
        snprintf(dir, sizeof dir, "%s/recut", tu_tmpdir());
        mkdir(dir, 0700);
        check_recut(dir);
    } else {
        fprintf(stderr, "test_trainer: SKIP the image cases: no Fashion-MNIST in %s "
                        "(apt-get install dataset-fashion-mnist)\n", tu_fashion_dir());
    }
    snprintf(dir, sizeof dir, "%s/gpt", tu_tmpdir());
    mkdir(dir, 0700);
    check_resume("gpt:layers=1,dim=16,heads=2,ctx=16,dropout=0.1",
                 "text:/usr/share/common-licenses/GPL-3", 0, dir);
    snprintf(dir, sizeof dir, "%s/lm", tu_tmpdir());
    mkdir(dir, 0700);
    check_lm(dir);
    return tu_finish("test_trainer");
}
