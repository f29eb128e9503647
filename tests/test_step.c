/* The worker pool and the data-parallel step.
 *
 * The reference is the plain single-threaded model: for 2, 3 and 5 workers
 * (batches that split evenly and unevenly) the summed gradient, the loss and
 * the parameters after an optimizer update must equal what one model computes
 * on the whole batch, to float rounding. */
#include "pool.h"
#include "step.h"
#include "testutil.h"

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

static void check_step(int workers, int batch)
{
    rumor_device_t *dev;
    CHECK_OK(rumor_device_open("cpu:1", &dev));
    rumor_model_t *ref, *m;
    CHECK_OK(rumor_model_create(dev, "mlp:20-16-12-5", batch, 9, &ref));
    CHECK_OK(rumor_model_create(dev, "mlp:20-16-12-5", batch, 9, &m));
    rumor_step_t *s;
    CHECK_OK(rumor_step_create(m, workers, &s));
    if (!ref || !m || !s)
        return;
    CHECK(rumor_step_workers(s) == workers);
    float *x = malloc(sizeof(float) * (size_t)batch * 20);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)batch);
    unsigned long long seed = 21;
    rumor_optim_config_t oc;
    rumor_optim_config_default(&oc);
    rumor_optim_t *oa, *ob;
    CHECK_OK(rumor_optim_create(dev, &oc, ref->nparams, &oa));
    CHECK_OK(rumor_optim_create(dev, &oc, ref->nparams, &ob));
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < batch * 20; i++)
            x[i] = tu_randf(&seed);
        for (int b = 0; b < batch; b++)
            y[b] = (int32_t)((b * 7 + step) % 5);
        float l_ref, l;
        CHECK_OK(rumor_model_forward(ref, x, y, batch, 1, &l_ref));
        rumor_model_zero_grad(ref);
        CHECK_OK(rumor_model_backward(ref));
        CHECK_OK(rumor_step_grads(s, x, y, batch, &l));
        CHECK_CLOSE(l, l_ref, 1e-6, 1e-5);
        double worst = 0;
        for (size_t i = 0; i < ref->nparams; i++) {
            double d = fabs((double)m->grads[i] - ref->grads[i]) /
                       (1e-6 + fabs((double)ref->grads[i]));
            worst = d > worst ? d : worst;
        }
        CHECKF(worst < 1e-3, "%d workers, batch %d: gradient differs by %.3g (relative)", workers,
               batch, worst);
        CHECK_OK(rumor_optim_step(oa, ref->params, ref->grads));
        CHECK_OK(rumor_step_update(s, ob));
        double pw = 0;
        for (size_t i = 0; i < ref->nparams; i++)
            pw = fmax(pw, fabs((double)m->params[i] - ref->params[i]));
        CHECKF(pw < 1e-5, "%d workers: parameters differ by %.3g after step %d", workers, pw, step);
    }
    CHECK(ob->t == 3);
    free(x);
    free(y);
    rumor_optim_destroy(&oa);
    rumor_optim_destroy(&ob);
    rumor_step_destroy(&s);
    rumor_step_destroy(&s);
    rumor_model_destroy(&ref);
    rumor_model_destroy(&m);
    rumor_device_close(&dev);
}

int main(void)
{
    check_pool();
    check_step(1, 32);
    check_step(2, 32);
    check_step(3, 31);
    check_step(5, 17);
    return tu_finish("test_step");
}
