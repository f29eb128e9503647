/* The worker pool and the data-parallel step.
 *
 * The reference is one stage running the whole batch as one micro-batch: for 2, 3 and 5 workers
 * (batches that split evenly and unevenly), on an MLP and a small GPT, the
 * summed gradient must equal what one model computes on the whole batch to
 * 2e-6 of its largest element and of its norm (sums taken in another order:
 * float rounding, ~3e-7), and the loss and the parameters after an optimizer
 * update to float rounding. */
#include "pool.h"
#include "stage.h"
#include "step.h"
#include "testutil.h"

static double worst_seen; /* the largest gradient difference, for the summary */

static void count_job(void *arg, int w, int n)
{
    int *hits = arg;
    __atomic_add_fetch(&hits[w], 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&hits[63], n, __ATOMIC_SEQ_CST);
}

static void check_pool(void)
{
    for (int n = 1; n <= 4; n++) {
        rumor_pool_t *p;
        CHECK_OK(rumor_pool_create(n, &p));
        if (!p)
            continue;
        int hits[64] = { 0 };
        for (int k = 0; k < 100; k++)
            rumor_pool_run(p, count_job, hits);
        for (int w = 0; w < n; w++)
            CHECKF(hits[w] == 100, "pool of %d: worker %d ran %d times", n, w, hits[w]);
        CHECK(hits[63] == 100 * n * n);
        rumor_pool_destroy(&p);
        rumor_pool_destroy(&p);
    }
    /* Splits cover [0, n) exactly, in order, 16-aligned. */
    size_t sizes[] = { 0, 1, 15, 16, 17, 1000, 269322 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int k = 1; k <= 5; k++) {
            size_t expect = 0;
            for (int w = 0; w < k; w++) {
                size_t lo, hi;
                rumor_pool_split(sizes[i], w, k, &lo, &hi);
                CHECK(lo == expect && hi >= lo && (lo % 16 == 0 || lo == sizes[i]));
                expect = hi;
            }
            CHECK(expect == sizes[i]);
        }
    rumor_pool_t *p = NULL;
    CHECK_ERR(rumor_pool_create(0, &p), RUMOR_EINVAL, "workers");
}

/* A whole-model stage of spec on dev with SGD state. */
static rumor_stage_t *new_stage(rumor_device_t *dev, const rumor_model_t *m, int batch,
                                const rumor_optim_config_t *oc)
{
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = 0, .last = m->nblocks,
                                .max_B = batch, .T = rumor_model_seq(m), .slots = 1, .seed = 9,
                                .optim = oc };
    rumor_stage_t *st = NULL;
    CHECK_OK(rumor_stage_create(&sc, &st));
    return st;
}

/* rumor_step_update_range over uneven ranges gives rumor_step_update's
 * parameters and optimizer state bit for bit, and advances the step once. */
static void check_update_ranges(rumor_step_t *s, rumor_stage_t *st)
{
    rumor_optim_t *o = st->opt;
    size_t n = st->n, bytes = n * sizeof(float);
    float *p0 = malloc(bytes), *m0 = malloc(bytes), *whole = malloc(bytes), *wm = malloc(bytes);
    if (!p0 || !m0 || !whole || !wm)
        return;
    memcpy(p0, st->params, bytes);
    memcpy(m0, o->m, bytes);
    long t0 = o->t;
    CHECK_OK(rumor_step_update(s));
    memcpy(whole, st->params, bytes);
    memcpy(wm, o->m, bytes);
    memcpy(st->params, p0, bytes);
    memcpy(o->m, m0, bytes);
    o->t = t0;
    CHECK(rumor_step_update_range(s, 0, n + 1, 0) < 0); /* outside the space */
    size_t cell = n / 5 + 3;
    for (size_t lo = 0; lo < n; lo += cell) {
        size_t hi = n - lo > cell ? lo + cell : n;
        CHECK_OK(rumor_step_update_range(s, lo, hi, hi == n));
        CHECKF(o->t == t0 + (hi == n), "the step advanced after range [%zu, %zu)", lo, hi);
    }
    CHECKF(!memcmp(whole, st->params, bytes) && !memcmp(wm, o->m, bytes),
           "a step range by range differs from the whole step");
    free(p0);
    free(m0);
    free(whole);
    free(wm);
}

static void check_step(const char *spec, int workers, int batch)
{
    rumor_device_t *dev;
    CHECK_OK(rumor_device_open("cpu:1", &dev));
    rumor_model_t *m;
    CHECK_OK(rumor_model_create(spec, 0, &m));
    if (!m)
        return;
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    rumor_stage_t *ref = new_stage(dev, m, batch, &oc), *st = new_stage(dev, m, batch, &oc);
    rumor_step_t *s;
    CHECK_OK(rumor_step_create(st, workers, &s));
    if (!ref || !st || !s)
        return;
    CHECK(rumor_step_workers(s) == workers);
    int T = rumor_model_seq(m), gpt = m->kind == RUMOR_MODEL_GPT;
    size_t rows = (size_t)batch * T;
    float *x = gpt ? NULL : malloc(sizeof(float) * rows * m->in_dim);
    int32_t *tok = malloc(sizeof(int32_t) * rows), *y = malloc(sizeof(int32_t) * rows);
    rumor_batch_t b = { .kind = gpt ? RUMOR_BATCH_TOKENS : RUMOR_BATCH_IMAGES, .n = batch,
                        .width = gpt ? T : m->in_dim, .x = x, .tok = gpt ? tok : NULL, .y = y };
    unsigned long long seed = 21;
    float scale = (float)(1.0 / (double)rows);
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; x && i < rows * m->in_dim; i++)
            x[i] = tu_randf(&seed);
        for (size_t r = 0; r < rows; r++) {
            tok[r] = (int32_t)(tu_randu(&seed) % (unsigned)m->classes);
            y[r] = (int32_t)((r * 7 + step) % (unsigned)m->classes);
        }
        /* the reference: the whole batch as one micro-batch, no workers */
        double sum;
        CHECK_OK(rumor_stage_load(ref, 0, &b, 0, batch));
        CHECK_OK(rumor_stage_forward(ref, 0, NULL, 1, step, 0));
        CHECK_OK(rumor_stage_loss(ref, 0, &sum, NULL));
        CHECK_OK(rumor_stage_zero_grad(ref));
        CHECK_OK(rumor_stage_backward_b(ref, 0, NULL, scale));
        CHECK_OK(rumor_stage_backward_w(ref, 0));
        float l;
        CHECK_OK(rumor_step_grads(s, &b, step, &l));
        CHECK_CLOSE(l, sum / (double)rows, 1e-6, 1e-5);
        /* the same sums in another order: a few float roundings (~3e-7 here) */
        double num = 0, den = 0, dmax = 0, gmax = 0;
        for (size_t i = 0; i < ref->n; i++) {
            double e = fabs((double)st->grads[i] - ref->grads[i]);
            num += e * e;
            den += (double)ref->grads[i] * ref->grads[i];
            dmax = fmax(dmax, e);
            gmax = fmax(gmax, fabs((double)ref->grads[i]));
        }
        CHECKF(gmax > 0 && dmax <= 2e-6 * gmax && sqrt(num) <= 2e-6 * sqrt(den),
               "%s, %d workers, batch %d: gradient differs by %.3g of its largest element, "
               "%.3g in norm", spec, workers, batch, dmax / gmax, sqrt(num / den));
        worst_seen = fmax(worst_seen, dmax / gmax);
        CHECK_OK(rumor_stage_step(ref));
        if (step == 1) /* range by range (a mix handed over cell by cell) */
            check_update_ranges(s, st);
        else
            CHECK_OK(rumor_step_update(s));
        double pw = 0;
        for (size_t i = 0; i < ref->n; i++)
            pw = fmax(pw, fabs((double)st->params[i] - ref->params[i]));
        CHECKF(pw < 1e-5, "%s, %d workers: parameters differ by %.3g after step %d", spec, workers,
               pw, step);
        /* evaluation splits the batch too, and sums the same losses */
        double es = 0;
        long targets = 0, correct = 0;
        CHECK_OK(rumor_step_eval(s, &b, &es, &targets, &correct));
        CHECK(targets == (long)rows && correct >= 0 && correct <= (long)rows);
    }
    CHECK(st->opt->t == 3);
    free(x);
    free(tok);
    free(y);
    rumor_step_destroy(&s);
    rumor_step_destroy(&s);
    rumor_stage_destroy(&ref);
    rumor_stage_destroy(&st);
    rumor_model_destroy(&m);
    rumor_device_close(&dev);
}

int main(void)
{
    check_pool();
    check_step("mlp:20-16-12-5", 1, 32);
    check_step("mlp:20-16-12-5", 2, 32);
    check_step("mlp:20-16-12-5", 3, 31);
    check_step("mlp:20-16-12-5", 5, 17);
    check_step("gpt:layers=2,dim=16,heads=2,ctx=8,vocab=13", 2, 4);
    check_step("gpt:layers=2,dim=16,heads=2,ctx=8,vocab=13", 3, 5);
    fprintf(stderr, "workers' gradients within %.2g (relative to the largest) of one model's\n",
            worst_seen);
    return tu_finish("test_step");
}
