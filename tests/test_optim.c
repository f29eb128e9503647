/* Optimizer steps and the learning-rate schedule against values computed by
 * hand (the arithmetic is written out next to each expected number). */
#include "optim.h"
#include "testutil.h"

static rumor_device_t *dev;

static void sgd_case(int nesterov, const double expect[3][2])
{
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    c.kind = RUMOR_OPT_SGD;
    c.lr = 0.1f;
    c.momentum = 0.9f;
    c.weight_decay = 0.01f;
    c.nesterov = nesterov;
    rumor_optim_t *o;
    CHECK_OK(rumor_optim_create(dev, &c, 2, &o));
    if (!o)
        return;
    float p[2] = { 1.0f, -2.0f }, g[2] = { 0.5f, 0.25f };
    for (int k = 0; k < 3; k++) {
        CHECK_OK(rumor_optim_step(o, p, g));
        CHECK_CLOSE(p[0], expect[k][0], 1e-6, 1e-6);
        CHECK_CLOSE(p[1], expect[k][1], 1e-6, 1e-6);
    }
    CHECK(o->t == 3);
    rumor_optim_destroy(&o);
    rumor_optim_destroy(&o);
}

static void check_sgd(void)
{
    /* Plain momentum, p = (1, -2), g = (0.5, 0.25), lr .1, mu .9, wd .01:
     * step 1: g' = g + wd p = (0.51, 0.23); m = g'; p -= 0.1 m -> (0.949, -2.023)
     * step 2: g' = (0.5 + 0.00949, 0.25 - 0.02023) = (0.50949, 0.22977);
     *         m = 0.9 (0.51, 0.23) + g' = (0.96849, 0.43677);
     *         p -= 0.1 m -> (0.852151, -2.066677)
     * step 3: g' = (0.50852151, 0.22933323); m = (1.380493, 0.62242623);
     *         p -> (0.714134749, -2.128919623) */
    static const double plain[3][2] = { { 0.949, -2.023 },
                                        { 0.852151, -2.066677 },
                                        { 0.714134749, -2.128919623 } };
    /* Nesterov: step = g' + mu m. step 1: 0.51 + 0.9*0.51 = 0.969 ->
     * p0 = 1 - 0.0969 = 0.9031; 0.23 + 0.207 = 0.437 -> p1 = -2.0437.
     * step 2: g' = (0.509031, 0.229563); m = (0.968031, 0.436563);
     *         step = (1.3792589, 0.6224697) -> (0.76507411, -2.10594697) */
    static const double nest[3][2] = { { 0.9031, -2.0437 },
                                       { 0.76507411, -2.10594697 },
                                       { 0.590209958, -2.184807274 } };
    sgd_case(0, plain);
    sgd_case(1, nest);

    /* No momentum, no decay: p -= lr g exactly. */
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    c.momentum = 0;
    c.nesterov = 0;
    c.weight_decay = 0;
    c.lr = 0.5f;
    rumor_optim_t *o;
    CHECK_OK(rumor_optim_create(dev, &c, 1, &o));
    float p = 3.0f, g = 2.0f;
    CHECK_OK(rumor_optim_step(o, &p, &g));
    CHECK_CLOSE(p, 2.0, 0, 0);
    rumor_optim_destroy(&o);
}

static void check_adamw(void)
{
    /* p = 1, lr .01, betas (.9, .999), eps 1e-8, wd .1; g = .5, -.25, .125.
     * step 1: p = 1 - .01*.1*1 = .999; m = .05; v = .00025;
     *         m^ = .05/.1 = .5; v^ = .00025/.001 = .25; p -= .01*.5/.5 -> .989
     * step 2: p = .989*.999 = .988011; m = .045 - .025 = .02;
     *         v = .00024975 + .0000625 = .00031225; m^ = .02/.19 = .1052632;
     *         v^ = .00031225/.001999 = .1562031; sqrt = .3952254;
     *         p -= .01 * .1052632/.3952254 = .0026634 -> .9853476 */
    static const double expect[3] = { 0.989, 0.98534763, 0.98095799 };
    static const float g[3] = { 0.5f, -0.25f, 0.125f };
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    c.kind = RUMOR_OPT_ADAMW;
    c.lr = 0.01f;
    c.weight_decay = 0.1f;
    rumor_optim_t *o;
    CHECK_OK(rumor_optim_create(dev, &c, 1, &o));
    if (!o)
        return;
    float p = 1.0f;
    for (int k = 0; k < 3; k++) {
        CHECK_OK(rumor_optim_step(o, &p, &g[k]));
        CHECK_CLOSE(p, expect[k], 2e-7, 1e-6);
    }
    rumor_optim_destroy(&o);
}

/* A range step touches only its range, and two half-range steps equal one
 * whole step (what pipeline stages rely on). */
static void check_ranges(void)
{
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    c.kind = RUMOR_OPT_ADAMW;
    rumor_optim_t *a, *b;
    CHECK_OK(rumor_optim_create(dev, &c, 10, &a));
    CHECK_OK(rumor_optim_create(dev, &c, 10, &b));
    if (!a || !b)
        return;
    float pa[10], pb[10], g[10];
    unsigned long long s = 3;
    for (int i = 0; i < 10; i++) {
        pa[i] = pb[i] = tu_randf(&s);
        g[i] = tu_randf(&s);
    }
    float before = pb[7];
    CHECK_OK(rumor_optim_step_range(b, pb, g, 0, 4, 0, c.lr));
    CHECK(pb[7] == before);
    CHECK_OK(rumor_optim_step_range(b, pb, g, 4, 10, 0, c.lr));
    CHECK_OK(rumor_optim_step(a, pa, g));
    CHECK(memcmp(pa, pb, sizeof pa) == 0);
    CHECK_ERR(rumor_optim_step_range(a, pa, g, 4, 11, 0, c.lr), RUMOR_EINVAL, "outside");
    rumor_optim_destroy(&a);
    rumor_optim_destroy(&b);
}

static void check_schedule(void)
{
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    c.lr = 0.2f;
    c.warmup_steps = 10;
    c.total_steps = 110;
    c.min_lr_ratio = 0.1f;
    /* warm-up: lr (t+1)/10 */
    CHECK_CLOSE(rumor_optim_lr_at(&c, 0), 0.02, 1e-7, 0);
    CHECK_CLOSE(rumor_optim_lr_at(&c, 4), 0.10, 1e-7, 0);
    CHECK_CLOSE(rumor_optim_lr_at(&c, 9), 0.20, 1e-7, 0);
    /* cosine from .2 to .02 over 100 steps: start .2, middle .11, end .02 */
    CHECK_CLOSE(rumor_optim_lr_at(&c, 10), 0.20, 1e-7, 0);
    CHECK_CLOSE(rumor_optim_lr_at(&c, 60), 0.11, 1e-7, 0);
    CHECK_CLOSE(rumor_optim_lr_at(&c, 110), 0.02, 1e-7, 0);
    CHECK_CLOSE(rumor_optim_lr_at(&c, 500), 0.02, 1e-7, 0);
    /* a quarter of the way: .02 + .09 (1 + cos(pi/4)) = .173639610 */
    CHECK_CLOSE(rumor_optim_lr_at(&c, 35), 0.17363961, 1e-7, 0);
    c.warmup_steps = 0;
    c.total_steps = 0;
    CHECK_CLOSE(rumor_optim_lr_at(&c, 1000), 0.2, 1e-7, 0); /* constant */
}

static void check_bad_config(void)
{
    rumor_optim_config_t c;
    rumor_optim_t *o = NULL;
    rumor_optim_config_default(&c);
    c.lr = -1;
    CHECK_ERR(rumor_optim_create(dev, &c, 4, &o), RUMOR_EINVAL, "learning rate");
    rumor_optim_config_default(&c);
    c.momentum = 1.0f;
    CHECK_ERR(rumor_optim_create(dev, &c, 4, &o), RUMOR_EINVAL, "momentum");
    rumor_optim_config_default(&c);
    c.kind = RUMOR_OPT_ADAMW;
    c.beta2 = 1.5f;
    CHECK_ERR(rumor_optim_create(dev, &c, 4, &o), RUMOR_EINVAL, "betas");
    rumor_optim_kind k;
    CHECK_ERR(rumor_optim_parse_kind("adam", &k), RUMOR_EINVAL, "expected sgd or adamw");
    CHECK_OK(rumor_optim_parse_kind("adamw", &k));
    CHECK(k == RUMOR_OPT_ADAMW);
    CHECK(o == NULL);
}

int main(void)
{
    if (rumor_device_open("cpu:1", &dev) < 0)
        return 1;
    check_sgd();
    check_adamw();
    check_ranges();
    check_schedule();
    check_bad_config();
    rumor_device_close(&dev);
    return tu_finish("test_optim");
}
