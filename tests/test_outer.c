/* The outer optimizer of local SGD (src/outer.h) against hand-computed
 * steps, and its spec parser's errors.
 *
 * nesterov lr 0.7, momentum 0.9 from the anchor (1, 2):
 *   round 1, mix (0.5, 2.5): d = (0.5, -0.5), v = d,
 *            anchor = (1, 2) - 0.7 (d + 0.9 d) = (0.335, 2.665)
 *   round 2, mix (0.3, 2.6): d = (0.035, 0.065), v = 0.9 (0.5, -0.5) + d
 *            = (0.485, -0.385), anchor = (0.335, 2.665) - 0.7 (d + 0.9 v)
 *            = (0.00495, 2.86205)
 * sgd lr 1 is plain local SGD (the anchor becomes the mix); sgd lr 0.5 goes
 * half way. */
#include "err.h"
#include "outer.h"
#include "testutil.h"

int main(void)
{
    rumor_outer_config_t c;
    CHECK_OK(rumor_outer_parse("nesterov", &c));
    CHECK(c.kind == RUMOR_OUTER_NESTEROV && c.lr == 0.7f && c.momentum == 0.9f);
    CHECK_OK(rumor_outer_parse("nesterov:lr=0.5,momentum=0.8", &c));
    CHECK(c.lr == 0.5f && c.momentum == 0.8f);
    CHECK_OK(rumor_outer_parse("sgd", &c));
    CHECK(c.kind == RUMOR_OUTER_SGD && c.lr == 1.0f);
    CHECK_ERR(rumor_outer_parse("adam", &c), RUMOR_EINVAL,
              "expected sgd[:lr=X], nesterov[:lr=X,momentum=Y] or optim");
    CHECK_OK(rumor_outer_parse("optim", &c));
    CHECK(c.kind == RUMOR_OUTER_OPTIM);
    CHECK_ERR(rumor_outer_parse("optim:lr=0.1", &c), RUMOR_EINVAL, "optim takes no keys");
    CHECK_ERR(rumor_outer_parse("optimizer", &c), RUMOR_EINVAL, "expected sgd");
    CHECK_ERR(rumor_outer_parse("nesterov:lr=0", &c), RUMOR_EINVAL, "lr '0' is not in (0, 10]");
    CHECK_ERR(rumor_outer_parse("nesterov:momentum=1", &c), RUMOR_EINVAL, "momentum '1'");
    CHECK_ERR(rumor_outer_parse("nesterov:lr=abc", &c), RUMOR_EINVAL, "lr 'abc'");
    CHECK_ERR(rumor_outer_parse("nesterov:lr", &c), RUMOR_EINVAL, "'lr' is not KEY=VALUE");
    CHECK_ERR(rumor_outer_parse("sgd:momentum=0.5", &c), RUMOR_EINVAL, "unknown key 'momentum'");
    CHECK_ERR(rumor_outer_parse("nesterov:lr=", &c), RUMOR_EINVAL, "lr needs a number");

    float x[2] = { 1, 2 };
    rumor_outer_t *o = NULL;
    CHECK_OK(rumor_outer_parse("nesterov:lr=0.7,momentum=0.9", &c));
    CHECK_OK(rumor_outer_create(&c, x, 2, &o));
    if (o) {
        x[0] = 0.5f, x[1] = 2.5f;
        rumor_outer_step(o, x);
        CHECK_CLOSE(x[0], 0.335, 1e-6, 0);
        CHECK_CLOSE(x[1], 2.665, 1e-6, 0);
        CHECK(o->anchor[0] == x[0] && o->anchor[1] == x[1]);
        x[0] = 0.3f, x[1] = 2.6f;
        rumor_outer_step(o, x);
        CHECK_CLOSE(x[0], 0.00495, 1e-6, 0);
        CHECK_CLOSE(x[1], 2.86205, 1e-6, 0);
        const float y[2] = { 7, 8 };
        rumor_outer_reset(o, y);
        CHECK(o->anchor[0] == 7 && o->anchor[1] == 8 && o->v[0] == 0 && o->v[1] == 0);
    }
    rumor_outer_destroy(&o);
    CHECK(o == NULL);

    float z[2] = { 1, 2 };
    CHECK_OK(rumor_outer_parse("sgd", &c));
    CHECK_OK(rumor_outer_create(&c, z, 2, &o));
    if (o) {
        z[0] = 3, z[1] = -1;
        rumor_outer_step(o, z); /* lr 1: the mix itself */
        CHECK(z[0] == 3 && z[1] == -1 && o->v == NULL);
        o->cfg.lr = 0.5f;
        z[0] = 5, z[1] = 1;
        rumor_outer_step(o, z); /* half way from (3, -1) to (5, 1) */
        CHECK_CLOSE(z[0], 4, 1e-6, 0);
        CHECK_CLOSE(z[1], 0, 0, 1e-6);
    }
    rumor_outer_destroy(&o);
    return tu_finish("test_outer");
}
