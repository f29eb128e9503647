/* Model specs and the layout of the flat parameter space (see model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define MAX_LAYERS 64
#define MAX_GPT_LAYERS 256

/* ------------------------------------------------------------ building */

typedef struct {
    rumor_model_t *m;
    int cap_t, cap_b;
    size_t off;
} builder_t;

static int add_tensor(builder_t *b, const char *name, int d0, int d1, rumor_init_kind init,
                      float scale, size_t *off_out)
{
    rumor_model_t *m = b->m;
    if (m->ntensors == b->cap_t) {
        int cap = b->cap_t ? 2 * b->cap_t : 16;
        rumor_tensor_t *t = realloc(m->tensors, (size_t)cap * sizeof *t);
        if (!t)
            return rumor_err_set(RUMOR_ENOMEM, "model: out of memory");
        m->tensors = t;
        b->cap_t = cap;
    }
    rumor_tensor_t *t = &m->tensors[m->ntensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->off = b->off;
    t->init = init;
    t->scale = scale;
    b->off += t->numel;
    if (off_out)
        *off_out = t->off;
    return 0;
}

static rumor_block_t *begin_block(builder_t *b, const rumor_block_type_t *type, const char *name,
                                  int in_width, int out_width)
{
    rumor_model_t *m = b->m;
    if (m->nblocks == b->cap_b) {
        int cap = b->cap_b ? 2 * b->cap_b : 8;
        rumor_block_t *nb = realloc(m->blocks, (size_t)cap * sizeof *nb);
        if (!nb) {
            rumor_err_set(RUMOR_ENOMEM, "model: out of memory");
            return NULL;
        }
        m->blocks = nb;
        b->cap_b = cap;
    }
    rumor_block_t *k = &m->blocks[m->nblocks];
    memset(k, 0, sizeof *k);
    k->type = type;
    snprintf(k->name, sizeof k->name, "%s", name);
    k->index = m->nblocks++;
    k->lo = b->off;
    k->first_tensor = m->ntensors;
    k->in_width = in_width;
    k->out_width = out_width;
    k->tied_off = SIZE_MAX;
    return k;
}

static void end_block(builder_t *b, rumor_block_t *k)
{
    k->hi = b->off;
    k->ntensors = b->m->ntensors - k->first_tensor;
}

/* ------------------------------------------------------------------ MLP */

static int parse_mlp(const char *spec, int *dims, int *ndims, int *act, float *dropout)
{
    const char *s = spec + 4;
    *ndims = 0;
    *act = 1;
    *dropout = 0.0f;
    for (;;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > (1 << 20))
            return rumor_err_set(RUMOR_EINVAL,
                                 "model '%s': layer width at offset %d must be an integer in [1, 1048576]",
                                 spec, (int)(s - spec));
        if (*ndims == MAX_LAYERS)
            return rumor_err_set(RUMOR_EINVAL, "model '%s': more than %d layers", spec, MAX_LAYERS);
        dims[(*ndims)++] = (int)v;
        s = end;
        if (*s == '-') {
            s++;
            continue;
        }
        break;
    }
    if (*ndims < 2)
        return rumor_err_set(RUMOR_EINVAL, "model '%s': needs at least an input and an output width",
                             spec);
    while (*s == ':') {
        s++;
        if (strncmp(s, "relu", 4) == 0 && (s[4] == ':' || s[4] == '\0')) {
            *act = 1;
            s += 4;
        } else if (strncmp(s, "gelu", 4) == 0 && (s[4] == ':' || s[4] == '\0')) {
            *act = 2;
            s += 4;
        } else if (strncmp(s, "dropout=", 8) == 0) {
            char *end;
            double p = strtod(s + 8, &end);
            if (end == s + 8 || !(p >= 0.0 && p < 1.0) || (*end != ':' && *end != '\0'))
                return rumor_err_set(RUMOR_EINVAL, "model '%s': dropout must be a number in [0, 1)",
                                     spec);
            *dropout = (float)p;
            s = end;
        } else {
            return rumor_err_set(RUMOR_EINVAL,
                                 "model '%s': unknown option at offset %d (expected relu, gelu or dropout=P)",
                                 spec, (int)(s - spec));
        }
    }
    if (*s != '\0')
        return rumor_err_set(RUMOR_EINVAL, "model '%s': unexpected text at offset %d", spec,
                             (int)(s - spec));
    return 0;
}

static int build_mlp(builder_t *b, const char *spec)
{
    int dims[MAX_LAYERS], nd, act;
    float dropout;
    RUMOR_CHECK(parse_mlp(spec, dims, &nd, &act, &dropout));
    rumor_model_t *m = b->m;
    m->kind = RUMOR_MODEL_MLP;
    m->input = RUMOR_BATCH_IMAGES;
    m->in_dim = dims[0];
    m->classes = dims[nd - 1];
    m->dropout = dropout;
    /* the canonical spec, from the parsed values: "mlp:784-256-10:relu" and
     * "mlp:784-256-10" are one model (relu is the default), and so are
     * dropout=0.10 and dropout=0.1 */
    size_t at = (size_t)snprintf(m->spec, sizeof m->spec, "mlp:%d", dims[0]);
    for (int i = 1; i < nd && at < sizeof m->spec; i++)
        at += (size_t)snprintf(m->spec + at, sizeof m->spec - at, "-%d", dims[i]);
    if (act == 2 && at < sizeof m->spec)
        at += (size_t)snprintf(m->spec + at, sizeof m->spec - at, ":gelu");
    if (dropout > 0.0f && at < sizeof m->spec)
        at += (size_t)snprintf(m->spec + at, sizeof m->spec - at, ":dropout=%g", dropout);
    if (at >= sizeof m->spec)
        return rumor_err_set(RUMOR_EINVAL, "model '%s': spec longer than %zu characters", spec,
                             sizeof m->spec - 1);
    int nlin = nd - 1;
    for (int i = 0; i < nlin; i++) {
        char name[RUMOR_TENSOR_NAME];
        int last = i == nlin - 1;
        snprintf(name, sizeof name, "fc%d", i);
        rumor_block_t *k = begin_block(b, &rumor_block_dense, name, dims[i], dims[i + 1]);
        if (!k)
            return RUMOR_ENOMEM;
        double bound = last ? 1.0 / sqrt((double)dims[i]) : sqrt(6.0 / (double)dims[i]);
        snprintf(name, sizeof name, "fc%d.weight", i);
        RUMOR_CHECK(add_tensor(b, name, dims[i + 1], dims[i], RUMOR_INIT_UNIFORM, (float)bound,
                               &k->w_off));
        snprintf(name, sizeof name, "fc%d.bias", i);
        RUMOR_CHECK(add_tensor(b, name, dims[i + 1], 0, RUMOR_INIT_ZERO, 0.0f, &k->b_off));
        k->act = last ? 0 : act;
        k->dropout = last ? 0.0f : dropout;
        end_block(b, k);
    }
    rumor_block_t *h = begin_block(b, &rumor_block_xent, "head", m->classes, 1);
    if (!h)
        return RUMOR_ENOMEM;
    h->V = m->classes;
    end_block(b, h);
    return 0;
}

/* ------------------------------------------------------------------ GPT */

static int gpt_field(const char *spec, const char **s, const char *key, long lo, long hi,
                     long *out)
{
    size_t n = strlen(key);
    if (strncmp(*s, key, n) != 0 || (*s)[n] != '=')
        return 0;
    char *end;
    long v = strtol(*s + n + 1, &end, 10);
    if (end == *s + n + 1 || v < lo || v > hi || (*end != ',' && *end != '\0'))
        return rumor_err_set(RUMOR_EINVAL, "model '%s': %s must be an integer in [%ld, %ld]", spec,
                             key, lo, hi);
    *out = v;
    *s = end;
    return 1;
}

static int build_gpt(builder_t *b, const char *spec, int data_vocab)
{
    long L = -1, D = -1, H = -1, T = -1, V = -1;
    double P = 0.0;
    const char *s = spec + 4;
    while (*s) {
        int r = 0;
        if ((r = gpt_field(spec, &s, "layers", 1, MAX_GPT_LAYERS, &L)) == 0 &&
            (r = gpt_field(spec, &s, "dim", 1, 1 << 16, &D)) == 0 &&
            (r = gpt_field(spec, &s, "heads", 1, 1 << 10, &H)) == 0 &&
            (r = gpt_field(spec, &s, "ctx", 1, 1 << 16, &T)) == 0 &&
            (r = gpt_field(spec, &s, "vocab", 2, 1 << 20, &V)) == 0) {
            if (strncmp(s, "dropout=", 8) == 0) {
                char *end;
                P = strtod(s + 8, &end);
                if (end == s + 8 || !(P >= 0.0 && P < 1.0) || (*end != ',' && *end != '\0'))
                    return rumor_err_set(RUMOR_EINVAL,
                                         "model '%s': dropout must be a number in [0, 1)", spec);
                s = end;
                r = 1;
            } else {
                return rumor_err_set(RUMOR_EINVAL,
                                     "model '%s': unknown field at offset %d (expected layers=, "
                                     "dim=, heads=, ctx=, vocab= or dropout=)",
                                     spec, (int)(s - spec));
            }
        }
        if (r < 0)
            return r;
        if (*s == ',')
            s++;
    }
    if (L < 0 || D < 0 || H < 0 || T < 0)
        return rumor_err_set(RUMOR_EINVAL,
                             "model '%s': layers=, dim=, heads= and ctx= are required (e.g. "
                             "gpt:layers=4,dim=128,heads=4,ctx=128)",
                             spec);
    if (D % H)
        return rumor_err_set(RUMOR_EINVAL, "model '%s': dim %ld is not a multiple of heads %ld",
                             spec, D, H);
    if (V < 0) {
        if (data_vocab < 2)
            return rumor_err_set(RUMOR_EINVAL, "model '%s': vocab= is required here", spec);
        V = data_vocab;
    }
    if ((double)V * D + (double)L * 12.0 * D * D > 4e9)
        return rumor_err_set(RUMOR_EINVAL, "model '%s': more than 4e9 parameters", spec);
    rumor_model_t *m = b->m;
    m->kind = RUMOR_MODEL_GPT;
    m->input = RUMOR_BATCH_TOKENS;
    m->layers = (int)L;
    m->dim = (int)D;
    m->heads = (int)H;
    m->ctx = (int)T;
    m->vocab = (int)V;
    m->dropout = (float)P;
    m->classes = (int)V;
    snprintf(m->spec, sizeof m->spec, "gpt:layers=%ld,dim=%ld,heads=%ld,ctx=%ld,vocab=%ld,dropout=%g",
             L, D, H, T, V, P);

    int C = (int)D;
    const float std = 0.02f, proj_std = (float)(0.02 / sqrt(2.0 * (double)L));
    rumor_block_t *k = begin_block(b, &rumor_block_embed, "embed", 0, C);
    if (!k)
        return RUMOR_ENOMEM;
    RUMOR_CHECK(add_tensor(b, "transformer.wte.weight", (int)V, C, RUMOR_INIT_NORMAL, std,
                           &k->w_off));
    RUMOR_CHECK(add_tensor(b, "transformer.wpe.weight", (int)T, C, RUMOR_INIT_NORMAL, 0.01f,
                           &k->b_off));
    k->C = C;
    k->V = (int)V;
    k->T = (int)T;
    k->dropout = (float)P;
    end_block(b, k);
    size_t wte = k->w_off;

    for (int i = 0; i < L; i++) {
        char name[RUMOR_TENSOR_NAME], bname[RUMOR_BLOCK_NAME];
        snprintf(bname, sizeof bname, "h.%d", i);
        k = begin_block(b, &rumor_block_gpt, bname, C, C);
        if (!k)
            return RUMOR_ENOMEM;
        static const struct {
            const char *suffix;
            int d0, d1; /* in multiples of C (0: none) */
            rumor_init_kind init;
            int proj;
        } t[12] = {
            {"ln_1.weight", 1, 0, RUMOR_INIT_ONE, 0},       {"ln_1.bias", 1, 0, RUMOR_INIT_ZERO, 0},
            {"attn.c_attn.weight", 1, 3, RUMOR_INIT_NORMAL, 0},
            {"attn.c_attn.bias", 3, 0, RUMOR_INIT_ZERO, 0},
            {"attn.c_proj.weight", 1, 1, RUMOR_INIT_NORMAL, 1},
            {"attn.c_proj.bias", 1, 0, RUMOR_INIT_ZERO, 0}, {"ln_2.weight", 1, 0, RUMOR_INIT_ONE, 0},
            {"ln_2.bias", 1, 0, RUMOR_INIT_ZERO, 0},
            {"mlp.c_fc.weight", 1, 4, RUMOR_INIT_NORMAL, 0},
            {"mlp.c_fc.bias", 4, 0, RUMOR_INIT_ZERO, 0},
            {"mlp.c_proj.weight", 4, 1, RUMOR_INIT_NORMAL, 1},
            {"mlp.c_proj.bias", 1, 0, RUMOR_INIT_ZERO, 0},
        };
        for (int j = 0; j < 12; j++) {
            snprintf(name, sizeof name, "transformer.h.%d.%s", i, t[j].suffix);
            RUMOR_CHECK(add_tensor(b, name, t[j].d0 * C, t[j].d1 * C, t[j].init,
                                   t[j].init == RUMOR_INIT_NORMAL ? (t[j].proj ? proj_std : std)
                                                                  : 0.0f,
                                   &k->sub[j]));
        }
        k->C = C;
        k->NH = (int)H;
        k->T = (int)T;
        k->dropout = (float)P;
        end_block(b, k);
    }
    k = begin_block(b, &rumor_block_lm_head, "head", C, 1);
    if (!k)
        return RUMOR_ENOMEM;
    RUMOR_CHECK(add_tensor(b, "transformer.ln_f.weight", C, 0, RUMOR_INIT_ONE, 0.0f, &k->w_off));
    RUMOR_CHECK(add_tensor(b, "transformer.ln_f.bias", C, 0, RUMOR_INIT_ZERO, 0.0f, &k->b_off));
    k->C = C;
    k->V = (int)V;
    k->tied_off = wte;
    end_block(b, k);
    return 0;
}

/* GPT-2's sizes by name (OpenAI's 124M, 350M and 774M models: vocabulary
 * 50257, context 1024), optionally followed by ":" and gpt: fields that
 * replace the preset's (gpt2:ctx=256,dropout=0.1). Writes the gpt: spec to
 * full and returns 1; 0 when spec names no preset; an error when its
 * fields do not fit. */
static int gpt_preset(const char *spec, char *full, size_t cap)
{
    static const struct {
        const char *name, *fields;
    } presets[] = {
        {"gpt2", "layers=12,dim=768,heads=12"},
        {"gpt2-medium", "layers=24,dim=1024,heads=16"},
        {"gpt2-large", "layers=36,dim=1280,heads=20"},
    };
    size_t n = strcspn(spec, ":");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strlen(presets[i].name) != n || strncmp(spec, presets[i].name, n) != 0)
            continue;
        const char *more = spec[n] == ':' ? spec + n + 1 : "";
        if (spec[n] == ':' && !*more)
            return rumor_err_set(RUMOR_EINVAL, "model '%s': nothing after ':' (expected "
                                 "fields such as ctx=256)", spec);
        int w = snprintf(full, cap, "gpt:%s,ctx=1024,vocab=50257%s%s", presets[i].fields,
                         *more ? "," : "", more);
        if (w < 0 || (size_t)w >= cap)
            return rumor_err_set(RUMOR_EINVAL, "model '%s': too long", spec);
        return 1;
    }
    return 0;
}

int rumor_model_create(const char *spec, int data_vocab, rumor_model_t **out)
{
    *out = NULL;
    if (!spec || strlen(spec) >= RUMOR_MODEL_SPEC - 40)
        return rumor_err_set(RUMOR_EINVAL, "model: spec missing or longer than %d characters",
                             RUMOR_MODEL_SPEC - 40);
    rumor_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return rumor_err_set(RUMOR_ENOMEM, "model: out of memory");
    builder_t b = {.m = m};
    char full[RUMOR_MODEL_SPEC];
    int rc;
    if (strncmp(spec, "mlp:", 4) == 0)
        rc = build_mlp(&b, spec);
    else if (strncmp(spec, "gpt:", 4) == 0)
        rc = build_gpt(&b, spec, data_vocab);
    else if ((rc = gpt_preset(spec, full, sizeof full)) == 1)
        rc = build_gpt(&b, full, data_vocab);
    else if (rc == 0)
        rc = rumor_err_set(RUMOR_EINVAL,
                           "model '%s': unknown kind (expected mlp:D0-D1-...-Dn, "
                           "gpt:layers=L,dim=D,heads=H,ctx=T[,vocab=V][,dropout=P] or a preset: "
                           "gpt2, gpt2-medium, gpt2-large[:FIELD=VALUE,...])",
                           spec);
    if (rc < 0) {
        rumor_model_destroy(&m);
        return rc;
    }
    m->nparams = b.off;
    *out = m;
    return 0;
}

void rumor_model_destroy(rumor_model_t **mp)
{
    if (!mp || !*mp)
        return;
    free((*mp)->blocks);
    free((*mp)->tensors);
    free(*mp);
    *mp = NULL;
}

int rumor_model_find_tensor(const rumor_model_t *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return i;
    return -1;
}

int rumor_model_init_host(const rumor_model_t *m, uint64_t seed, float *host)
{
    uint64_t s = seed ^ 0x72756d6f72ULL; /* "rumor" */
    for (int i = 0; i < m->ntensors; i++) {
        const rumor_tensor_t *t = &m->tensors[i];
        float *p = host + t->off;
        switch (t->init) {
        case RUMOR_INIT_ZERO:
            memset(p, 0, t->numel * sizeof(float));
            break;
        case RUMOR_INIT_ONE:
            for (size_t j = 0; j < t->numel; j++)
                p[j] = 1.0f;
            break;
        case RUMOR_INIT_UNIFORM:
            for (size_t j = 0; j < t->numel; j++)
                p[j] = (float)((2.0 * rumor_rand_unit(&s) - 1.0) * t->scale);
            break;
        case RUMOR_INIT_NORMAL:
            for (size_t j = 0; j < t->numel; j += 2) {
                double u1 = rumor_rand_unit(&s), u2 = rumor_rand_unit(&s);
                double r = sqrt(-2.0 * log(1.0 - u1)), a = 6.283185307179586 * u2;
                p[j] = (float)(r * cos(a) * t->scale);
                if (j + 1 < t->numel)
                    p[j + 1] = (float)(r * sin(a) * t->scale);
            }
            break;
        }
    }
    return 0;
}

size_t rumor_model_act_bytes(const rumor_model_t *m, int first, int last, int B, int T)
{
    size_t total = 0;
    for (int i = first; i < last; i++) {
        const rumor_block_t *k = &m->blocks[i];
        size_t rows = (size_t)B * (size_t)T;
        /* output and its gradient, plus the block's own state */
        total += 2 * rows * (size_t)k->out_width * sizeof(float) + 64 * 4;
        total += k->type->saved_bytes(k, B, T) + 64;
    }
    return total;
}
