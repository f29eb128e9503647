/* The outer optimizer of local SGD (outer.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "outer.h"

static int parse_num(const char *spec, const char *key, const char *val, size_t len, float lo,
                     float hi, int lo_open, float *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return rumor_err_set(RUMOR_EINVAL, "--outer '%s': %s needs a number", spec, key);
    memcpy(buf, val, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double x = strtod(buf, &end);
    if (*end || errno || !isfinite(x) || x > hi || x < lo || (lo_open && x == lo))
        return rumor_err_set(RUMOR_EINVAL, "--outer '%s': %s '%s' is not in %s%g, %g%s", spec,
                             key, buf, lo_open ? "(" : "[", (double)lo, (double)hi,
                             key[0] == 'm' ? ")" : "]");
    *out = (float)x;
    return 0;
}

int rumor_outer_parse(const char *spec, rumor_outer_config_t *out)
{
    if (!spec || !out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_outer_parse: NULL argument");
    rumor_outer_config_t c = { RUMOR_OUTER_NESTEROV, 0.7f, 0.9f };
    const char *colon = strchr(spec, ':');
    size_t nl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (nl == 3 && !strncmp(spec, "sgd", 3)) {
        c.kind = RUMOR_OUTER_SGD;
        c.lr = 1.0f;
        c.momentum = 0.0f;
    } else if (nl == 5 && !strncmp(spec, "optim", 5)) {
        if (colon)
            return rumor_err_set(RUMOR_EINVAL, "--outer '%s': optim takes no keys (its rate and "
                                 "state are --optimizer's, --lr's and --lr-schedule's)", spec);
        c.kind = RUMOR_OUTER_OPTIM;
        c.lr = 1.0f;
        c.momentum = 0.0f;
    } else if (!(nl == 8 && !strncmp(spec, "nesterov", 8))) {
        return rumor_err_set(RUMOR_EINVAL, "--outer '%s': expected sgd[:lr=X], "
                             "nesterov[:lr=X,momentum=Y] or optim", spec);
    }
    for (const char *p = colon ? colon + 1 : NULL; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return rumor_err_set(RUMOR_EINVAL, "--outer '%s': '%.*s' is not KEY=VALUE", spec,
                                 (int)len, p);
        size_t kl = (size_t)(eq - p), vl = len - kl - 1;
        if (kl == 2 && !strncmp(p, "lr", 2)) {
            RUMOR_CHECK(parse_num(spec, "lr", eq + 1, vl, 0.0f, 10.0f, 1, &c.lr));
        } else if (kl == 8 && !strncmp(p, "momentum", 8) && c.kind == RUMOR_OUTER_NESTEROV) {
            RUMOR_CHECK(parse_num(spec, "momentum", eq + 1, vl, 0.0f, 0.999999f, 0, &c.momentum));
        } else {
            return rumor_err_set(RUMOR_EINVAL, "--outer '%s': unknown key '%.*s' (%s)", spec,
                                 (int)kl, p, c.kind == RUMOR_OUTER_SGD ? "sgd takes lr" :
                                 "nesterov takes lr and momentum");
        }
        p = comma ? comma + 1 : NULL;
    }
    *out = c;
    return 0;
}

int rumor_outer_create(const rumor_outer_config_t *cfg, const float *x, size_t n,
                       rumor_outer_t **out)
{
    *out = NULL;
    rumor_outer_t *o = calloc(1, sizeof *o);
    if (!o)
        return rumor_err_set(RUMOR_ENOMEM, "outer optimizer: out of memory");
    o->cfg = *cfg;
    o->n = n;
    o->anchor = malloc((n ? n : 1) * sizeof *o->anchor);
    if (cfg->kind == RUMOR_OUTER_NESTEROV)
        o->v = calloc(n ? n : 1, sizeof *o->v);
    if (!o->anchor || (cfg->kind == RUMOR_OUTER_NESTEROV && !o->v)) {
        rumor_outer_destroy(&o);
        return rumor_err_set(RUMOR_ENOMEM, "outer optimizer: cannot hold 2 copies of %zu "
                             "parameters", n);
    }
    memcpy(o->anchor, x, n * sizeof *x);
    *out = o;
    return 0;
}

void rumor_outer_destroy(rumor_outer_t **op)
{
    if (!op || !*op)
        return;
    free((*op)->anchor);
    free((*op)->v);
    free(*op);
    *op = NULL;
}

void rumor_outer_reset(rumor_outer_t *o, const float *x)
{
    memcpy(o->anchor, x, o->n * sizeof *x);
    if (o->v)
        memset(o->v, 0, o->n * sizeof *o->v);
}

void rumor_outer_step_range(rumor_outer_t *o, float *x, size_t lo, size_t hi)
{
    const float lr = o->cfg.lr, mu = o->cfg.momentum;
    float *a = o->anchor + lo, *v = o->v ? o->v + lo : NULL;
    size_t n = hi - lo;
    if (o->cfg.kind == RUMOR_OUTER_OPTIM)
        return; /* the peer steps with its optimizer */
    if (o->cfg.kind == RUMOR_OUTER_SGD) {
        for (size_t i = 0; i < n; i++) {
            float d = a[i] - x[i];
            a[i] -= lr * d;
            x[i] = a[i];
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float d = a[i] - x[i];
        v[i] = mu * v[i] + d;
        a[i] -= lr * (d + mu * v[i]);
        x[i] = a[i];
    }
}

void rumor_outer_step(rumor_outer_t *o, float *x)
{
    rumor_outer_step_range(o, x, 0, o->n);
}
