/* Checkpoints: round trips, the safetensors layout read back by an independent
 * reader (and by Python's json/struct, and the safetensors package when
 * installed), GPT checkpoints under GPT-2's names and refused by a model of
 * another spec, every kind of corrupt file rejected with the model unchanged,
 * fallback to the previous checkpoint, pruning, file names that carry the
 * swarm (made safe for the file system) and rank, ranks and swarms sharing
 * one directory (each lists, prunes and resumes only its own files; another
 * peer's file renamed to ours is refused; other ranks' temp files are left
 * alone), and a child SIGKILLed at random moments of its checkpoint writes
 * (RUMOR_CKPT_KILLS times, 200 by default) after which the newest checkpoint
 * always loads. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "log.h"
#include "testutil.h"

static rumor_device_t *dev;
static const char *SPEC = "mlp:20-16-5";

/* A whole-model stage of spec on the CPU with random parameters. */
static rumor_stage_t *new_model(const char *spec, unsigned long long seed)
{
    rumor_model_t *m = NULL;
    rumor_stage_t *st = NULL;
    CHECK_OK(rumor_model_create(spec, 0, &m));
    if (!m)
        exit(1);
    rumor_stage_config_t sc = { .model = m, .dev = dev, .first = 0, .last = m->nblocks,
                                .max_B = 4, .T = rumor_model_seq(m), .slots = 1, .seed = seed };
    CHECK_OK(rumor_stage_create(&sc, &st));
    if (!st)
        exit(1);
    for (size_t i = 0; i < st->n; i++)
        st->params[i] = tu_randf(&seed);
    return st;
}

static void free_model(rumor_stage_t **sp)
{
    if (!*sp)
        return;
    rumor_model_t *m = (rumor_model_t *)(*sp)->model;
    rumor_stage_destroy(sp);
    rumor_model_destroy(&m);
}

static rumor_optim_t *new_optim(rumor_optim_kind kind, size_t n, unsigned long long seed, long t)
{
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    c.kind = kind;
    rumor_optim_t *o = NULL;
    CHECK_OK(rumor_optim_create(dev, &c, n, &o));
    if (!o)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        o->m[i] = tu_randf(&seed);
        if (o->v)
            o->v[i] = fabsf(tu_randf(&seed));
    }
    o->t = t;
    return o;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    if (fread(b, 1, *len, f) != *len)
        *len = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, len, f) == len);
    if (f)
        fclose(f);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* DIR/<part>-r<rank>-<round, 12 digits>.safetensors, the name checkpoint.h
 * specifies, spelled out here independently of the library. */
static void ckpt_path(char *out, size_t len, const char *dir, const char *part, int rank,
                      long round)
{
    snprintf(out, len, "%s/%s-r%d-%012ld.safetensors", dir, part, rank, round);
}

/* <safe>+<first 4 bytes of BLAKE2b-256(name), hex>: the file-name part of a
 * swarm name that had to change. */
static void hashed_part(char *out, size_t len, const char *safe, const char *name)
{
    unsigned char h[32];
    crypto_generichash(h, sizeof h, (const unsigned char *)name, strlen(name), NULL, 0);
    snprintf(out, len, "%s+%02x%02x%02x%02x", safe, h[0], h[1], h[2], h[3]);
}

/* A pid that no process has: a child's, once it has exited and been reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* Copies src to dst with the first `from` in the header replaced by `to`,
 * the header re-padded and its length rewritten; the data stays as it was
 * (so the digest still matches and only the header checks can object). */
static void edit_header(const char *src, const char *dst, const char *from, const char *to)
{
    size_t len;
    unsigned char *b = slurp(src, &len);
    uint64_t n = le64(b);
    char *h = calloc(n + strlen(to) + 16, 1);
    memcpy(h, b + 8, n);
    char *at = strstr(h, from);
    CHECKF(at != NULL, "header lacks %s", from);
    if (at) {
        memmove(at + strlen(to), at + strlen(from), strlen(at + strlen(from)) + 1);
        memcpy(at, to, strlen(to));
    }
    size_t hl = strlen(h);
    while (hl && h[hl - 1] == ' ')
        hl--;
    size_t nl = (hl + 7) & ~(size_t)7;
    memset(h + hl, ' ', nl - hl);
    unsigned char *o = malloc(8 + nl + len);
    for (int i = 0; i < 8; i++)
        o[i] = (unsigned char)((uint64_t)nl >> (8 * i));
    memcpy(o + 8, h, nl);
    memcpy(o + 8 + nl, b + 8 + n, len - 8 - n);
    spit(dst, o, 8 + nl + len - 8 - n);
    free(o);
    free(h);
    free(b);
}

static void check_round_trip(rumor_optim_kind kind, const char *dir)
{
    rumor_stage_t *a = new_model(SPEC, 11), *b = new_model(SPEC, 22);
    rumor_optim_t *oa = new_optim(kind, a->n, 33, 17), *ob = new_optim(kind, a->n, 44, 0);
    rumor_ckpt_info_t in = { .round = 42, .epoch = 3, .rank = 2, .incarnation = 0x123456789abcdef0ULL };
    snprintf(in.swarm, sizeof in.swarm, "test swarm");
    rumor_ckpt_info_t out;
    char path[512];
    char part[64], want[600];
    hashed_part(part, sizeof part, "test_swarm", "test swarm");
    ckpt_path(want, sizeof want, dir, part, 2, 42);
    CHECK_OK(rumor_ckpt_save(dir, a, oa, &in, 3));
    CHECK(rumor_ckpt_load_latest(dir, "test swarm", 2, b, ob, &out, path, sizeof path) == 0);
    CHECKF(!strcmp(path, want), "loaded %s, expected %s", path, want);
    CHECK(!memcmp(a->params, b->params, a->n * sizeof(float)));
    CHECK(!memcmp(oa->m, ob->m, a->n * sizeof(float)));
    if (kind == RUMOR_OPT_ADAMW)
        CHECK(!memcmp(oa->v, ob->v, a->n * sizeof(float)));
    CHECK(ob->t == 17 && out.optim_t == 17);
    CHECK(out.round == 42 && out.epoch == 3 && out.rank == 2);
    CHECK(out.incarnation == 0x123456789abcdef0ULL);
    CHECK(!strcmp(out.swarm, "test swarm") && !strcmp(out.model, SPEC));
    CHECK(!strcmp(out.optimizer, kind == RUMOR_OPT_ADAMW ? "adamw" : "sgd"));
    /* State of another kind of optimizer is refused, parameters alone load. */
    rumor_optim_t *other = new_optim(kind == RUMOR_OPT_ADAMW ? RUMOR_OPT_SGD : RUMOR_OPT_ADAMW,
                                     a->n, 55, 5);
    CHECK_ERR(rumor_ckpt_load(path, b, other, NULL), RUMOR_EFORMAT, "state, the optimizer is");
    CHECK(other->t == 5);
    CHECK_OK(rumor_ckpt_load(path, b, NULL, NULL));
    /* Parameters only: an optimizer passed to the load is left alone. */
    in.round = 43;
    CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 3));
    CHECK(rumor_ckpt_load_latest(dir, "test swarm", 2, b, other, &out, NULL, 0) == 0);
    CHECK(!strcmp(out.optimizer, "none") && other->t == 5 && out.round == 43);
    rumor_optim_destroy(&other);
    rumor_optim_destroy(&oa);
    rumor_optim_destroy(&ob);
    free_model(&a);
    free_model(&b);
}

/* Reads a checkpoint with nothing but the safetensors spec: the length, the
 * JSON, offsets contiguous from 0 and covering the data, values in place. */
static void check_layout(const char *path, const rumor_stage_t *m, const rumor_optim_t *o)
{
    size_t len;
    unsigned char *b = slurp(path, &len);
    CHECK(b && len > 8);
    uint64_t n = le64(b);
    CHECK(n % 8 == 0 && 8 + n <= len && b[8] == '{');
    cJSON *h = cJSON_ParseWithLength((const char *)b + 8, n);
    CHECK(h != NULL);
    uint64_t begins[16], ends[16], datalen = len - 8 - n;
    int nt = 0;
    for (cJSON *e = h ? h->child : NULL; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            for (cJSON *s = e->child; s; s = s->next)
                CHECKF(cJSON_IsString(s), "metadata %s is not a string", s->string);
            continue;
        }
        cJSON *off = cJSON_GetObjectItem(e, "data_offsets");
        CHECK(!strcmp(cJSON_GetObjectItem(e, "dtype")->valuestring, "F32"));
        if (nt < 16) {
            begins[nt] = (uint64_t)cJSON_GetArrayItem(off, 0)->valuedouble;
            ends[nt++] = (uint64_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        }
    }
    CHECK(nt == 4 + (o ? 1 : 0) + (o && o->v ? 1 : 0));
    uint64_t at = 0; /* contiguous from 0, in any header order */
    for (int done = 0; done < nt; done++) {
        int k = 0;
        while (k < nt && begins[k] != at)
            k++;
        CHECKF(k < nt, "no tensor begins at %llu", (unsigned long long)at);
        if (k == nt)
            break;
        at = ends[k];
    }
    CHECK(at == datalen);
    static const char *names[] = { "fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias" };
    for (int k = 0; k < 4; k++)
        CHECKF(cJSON_GetObjectItem(h, names[k]) != NULL, "no tensor %s", names[k]);
    cJSON *w = cJSON_GetObjectItem(h, "fc0.weight");
    cJSON *shape = cJSON_GetObjectItem(w, "shape");
    CHECK(cJSON_GetArraySize(shape) == 2 && cJSON_GetArrayItem(shape, 0)->valueint == 16 &&
          cJSON_GetArrayItem(shape, 1)->valueint == 20);
    uint64_t wb = (uint64_t)cJSON_GetArrayItem(cJSON_GetObjectItem(w, "data_offsets"), 0)->valuedouble;
    float first[20];
    memcpy(first, b + 8 + n + wb, sizeof first);
    CHECK(!memcmp(first, m->params + m->model->blocks[0].w_off, sizeof first)); /* W[0][0..19] */
    cJSON *b1 = cJSON_GetObjectItem(h, "fc1.bias");
    uint64_t bb = (uint64_t)cJSON_GetArrayItem(cJSON_GetObjectItem(b1, "data_offsets"), 0)->valuedouble;
    CHECK(!memcmp(b + 8 + n + bb, m->params + m->model->blocks[1].b_off, 5 * sizeof(float)));
    /* The digest in the metadata is BLAKE2b-256 of the data section. */
    unsigned char dg[32];
    char hex[65];
    crypto_generichash(dg, 32, b + 8 + n, datalen, NULL, 0);
    sodium_bin2hex(hex, sizeof hex, dg, 32);
    cJSON *meta = cJSON_GetObjectItem(h, "__metadata__");
    CHECK(!strcmp(cJSON_GetObjectItem(meta, "blake2b")->valuestring, hex));
    CHECK(!strcmp(cJSON_GetObjectItem(meta, "format")->valuestring, "rumor-checkpoint-1"));
    cJSON_Delete(h);
    free(b);
}

/* Python's strict json module and struct, and the safetensors package when
 * it is installed, read fc0.weight[0][1]. */
static void check_python(const char *path, const rumor_stage_t *m)
{
    if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "python3 not available: skipping the Python readers\n");
        return;
    }
    char cmd[1024], line[128];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, struct, sys\n"
             "b = open(sys.argv[1], \"rb\").read(); n = struct.unpack(\"<Q\", b[:8])[0]\n"
             "h = json.loads(b[8:8 + n].decode(\"utf-8\")); s = h[\"fc0.weight\"][\"data_offsets\"][0]\n"
             "print(repr(struct.unpack(\"<f\", b[8 + n + s + 4:8 + n + s + 8])[0]))\n"
             "try:\n from safetensors.numpy import load_file\n"
             " print(repr(float(load_file(sys.argv[1])[\"fc0.weight\"][0][1])))\n"
             "except ImportError:\n print(\"skip\")' '%s'", path);
    FILE *p = popen(cmd, "r");
    float want = m->params[m->model->blocks[0].w_off + 1];
    CHECK(p && fgets(line, sizeof line, p) && strtod(line, NULL) == (double)want);
    if (p && fgets(line, sizeof line, p)) {
        if (strncmp(line, "skip", 4))
            CHECKF(strtod(line, NULL) == (double)want, "safetensors read %s", line);
        else
            fprintf(stderr, "python safetensors not installed: checked with json/struct only\n");
    }
    CHECK(p && pclose(p) == 0);
}

/* A GPT's checkpoint: GPT-2's tensor names and Conv1D shapes in the order of
 * the flat space, each tensor's data at its offset, no lm_head (tied to
 * wte); it loads back bit for bit, and a model of another spec refuses it,
 * naming both specs, unchanged. */
static void check_gpt(const char *dir)
{
    static const char *spec = "gpt:layers=2,dim=16,heads=4,ctx=8,vocab=11";
    rumor_stage_t *a = new_model(spec, 3), *b = new_model(spec, 4);
    const rumor_model_t *m = a->model;
    rumor_optim_t *oa = new_optim(RUMOR_OPT_ADAMW, a->n, 5, 7);
    rumor_optim_t *ob = new_optim(RUMOR_OPT_ADAMW, a->n, 6, 0);
    rumor_ckpt_info_t in = { .round = 9, .swarm = "gpt" }, out;
    char path[600];
    CHECK_OK(rumor_ckpt_save(dir, a, oa, &in, 2));
    ckpt_path(path, sizeof path, dir, "gpt", 0, 9);
    size_t len;
    unsigned char *f = slurp(path, &len);
    CHECK(f && len > 8);
    if (!f)
        return;
    uint64_t n = le64(f);
    cJSON *h = cJSON_ParseWithLength((const char *)f + 8, n);
    CHECK(h != NULL);
    static const struct { const char *name; int d0, d1; } want[] = {
        { "transformer.wte.weight", 11, 16 },
        { "transformer.wpe.weight", 8, 16 },
        { "transformer.h.0.ln_1.weight", 16, 0 },
        { "transformer.h.0.attn.c_attn.weight", 16, 48 },
        { "transformer.h.0.attn.c_attn.bias", 48, 0 },
        { "transformer.h.0.attn.c_proj.weight", 16, 16 },
        { "transformer.h.1.mlp.c_fc.weight", 16, 64 },
        { "transformer.h.1.mlp.c_proj.weight", 64, 16 },
        { "transformer.ln_f.weight", 16, 0 },
        { "transformer.ln_f.bias", 16, 0 },
    };
    for (size_t i = 0; h && i < sizeof want / sizeof *want; i++) {
        cJSON *t = cJSON_GetObjectItem(h, want[i].name);
        cJSON *shape = cJSON_GetObjectItem(t, "shape");
        int nd = want[i].d1 ? 2 : 1;
        CHECKF(t && cJSON_GetArraySize(shape) == nd &&
               cJSON_GetArrayItem(shape, 0)->valueint == want[i].d0 &&
               (nd == 1 || cJSON_GetArrayItem(shape, 1)->valueint == want[i].d1),
               "%s missing or of another shape", want[i].name);
    }
    CHECK(h && !cJSON_GetObjectItem(h, "lm_head.weight"));
    /* every model tensor, at its offset of the space, with its data */
    int nt = 0;
    for (cJSON *e = h ? h->child : NULL; e; e = e->next)
        nt += strcmp(e->string, "__metadata__") != 0;
    CHECKF(nt == m->ntensors + 2, "%d tensors, expected %d and optim.m, optim.v", nt,
           m->ntensors);
    for (int i = 0; h && i < m->ntensors; i++) {
        const rumor_tensor_t *t = &m->tensors[i];
        cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(h, t->name), "data_offsets");
        uint64_t b0 = o ? (uint64_t)cJSON_GetArrayItem(o, 0)->valuedouble : UINT64_MAX;
        uint64_t b1 = o ? (uint64_t)cJSON_GetArrayItem(o, 1)->valuedouble : 0;
        CHECKF(b0 == t->off * sizeof(float) && b1 == (t->off + t->numel) * sizeof(float) &&
               !memcmp(f + 8 + n + b0, a->params + t->off, t->numel * sizeof(float)),
               "%s: not at its offset %zu of the space, or not its data", t->name, t->off);
    }
    cJSON *meta = h ? cJSON_GetObjectItem(h, "__metadata__") : NULL;
    cJSON *ms = cJSON_GetObjectItem(meta, "model");
    CHECK(ms && !strcmp(ms->valuestring, m->spec));
    cJSON_Delete(h);
    free(f);
    /* round trip */
    CHECK(rumor_ckpt_load_latest(dir, "gpt", 0, b, ob, &out, NULL, 0) == 0);
    CHECK(!memcmp(a->params, b->params, a->n * sizeof(float)));
    CHECK(!memcmp(oa->m, ob->m, a->n * sizeof(float)) &&
          !memcmp(oa->v, ob->v, a->n * sizeof(float)));
    CHECK(ob->t == 7 && out.round == 9 && !strcmp(out.model, m->spec));
    /* other specs: another GPT and an MLP */
    static const char *others[] = { "gpt:layers=1,dim=16,heads=4,ctx=8,vocab=11", "mlp:20-16-5" };
    for (int k = 0; k < 2; k++) {
        rumor_stage_t *c = new_model(others[k], 8);
        float *before = malloc(c->n * sizeof(float));
        memcpy(before, c->params, c->n * sizeof(float));
        char msg[400];
        snprintf(msg, sizeof msg, "\"%s\", this model is \"%s\"", m->spec, c->model->spec);
        CHECK_ERR(rumor_ckpt_load(path, c, NULL, NULL), RUMOR_EFORMAT, msg);
        CHECK(!memcmp(before, c->params, c->n * sizeof(float)));
        free(before);
        free_model(&c);
    }
    rumor_optim_destroy(&oa);
    rumor_optim_destroy(&ob);
    free_model(&a);
    free_model(&b);
}

/* A checkpoint whose metadata spells the model another way (as files
 * written before specs were canonical: "mlp:20-16-5:relu") loads into the
 * canonical model; one of another activation does not. */
static void check_spelling(const char *dir)
{
    rumor_stage_t *a = new_model("mlp:20-16-5", 3), *b = new_model("mlp:20-16-5:relu", 4);
    rumor_model_t *am = (rumor_model_t *)a->model;
    CHECK(!strcmp(am->spec, b->model->spec));
    static const char *const spelled[] = { "mlp:20-16-5:relu", "mlp:20-16-5:gelu" };
    for (int k = 0; k < 2; k++) {
        char path[700];
        snprintf(am->spec, sizeof am->spec, "%s", spelled[k]);
        rumor_ckpt_info_t in = { .round = 2 };
        snprintf(in.swarm, sizeof in.swarm, "old%d", k);
        CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 2));
        snprintf(am->spec, sizeof am->spec, "mlp:20-16-5");
        ckpt_path(path, sizeof path, dir, in.swarm, 0, 2);
        memset(b->params, 0, b->n * sizeof(float));
        if (k == 0) {
            CHECK_OK(rumor_ckpt_load(path, b, NULL, NULL));
            CHECK(!memcmp(a->params, b->params, a->n * sizeof(float)));
        } else {
            CHECK_ERR(rumor_ckpt_load(path, b, NULL, NULL), RUMOR_EFORMAT,
                      "\"mlp:20-16-5:gelu\", this model is \"mlp:20-16-5\"");
            size_t changed = 0;
            for (size_t i = 0; i < b->n; i++)
                changed += b->params[i] != 0.0f;
            CHECKF(changed == 0, "a refused checkpoint changed %zu parameters", changed);
        }
    }
    free_model(&a);
    free_model(&b);
}

/* Loads a broken file into m and o, expecting code `rc` and `msg` in the
 * error, and checks that neither m nor o changed. */
static void expect_reject(const char *path, rumor_stage_t *m, rumor_optim_t *o, int rc,
                          const char *msg)
{
    size_t bytes = m->n * sizeof(float);
    float *before = malloc(bytes), *mbefore = malloc(bytes);
    memcpy(before, m->params, bytes);
    memcpy(mbefore, o->m, bytes);
    long t = o->t;
    rumor_ckpt_info_t ci = { .round = -7 };
    CHECK_ERR(rumor_ckpt_load(path, m, o, &ci), rc, msg);
    CHECKF(strstr(rumor_err_msg(), "bad.safetensors") != NULL, "message lacks the file: %s",
           rumor_err_msg());
    CHECK(!memcmp(before, m->params, bytes) && !memcmp(mbefore, o->m, bytes) && o->t == t);
    CHECK(ci.round == -7);
    free(before);
    free(mbefore);
}

static void check_corruption(const char *dir)
{
    rumor_stage_t *a = new_model(SPEC, 5), *b = new_model(SPEC, 6);
    rumor_optim_t *oa = new_optim(RUMOR_OPT_SGD, a->n, 7, 9);
    rumor_optim_t *ob = new_optim(RUMOR_OPT_SGD, a->n, 8, 1);
    rumor_ckpt_info_t in = { .round = 120, .swarm = "corrupt" };
    CHECK_OK(rumor_ckpt_save(dir, a, oa, &in, 1));
    char good[600], bad[600];
    ckpt_path(good, sizeof good, dir, "corrupt", 0, 120);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    check_layout(good, a, oa);
    check_python(good, a);

    size_t len;
    unsigned char *f = slurp(good, &len);
    uint64_t n = le64(f), data = 8 + n;
    /* One flipped bit in the data. */
    f[data + 100] ^= 1;
    spit(bad, f, len);
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "digest mismatch (file corrupt)");
    f[data + 100] ^= 1;
    spit(bad, f, len - 4);
    f[len - 1] ^= 0x80; /* last byte of optim.m */
    spit(bad, f, len);
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "digest mismatch");
    f[len - 1] ^= 0x80;
    /* Truncated inside the length, the header, the data, the last byte. */
    spit(bad, f, 5);
    expect_reject(bad, b, ob, RUMOR_EIO, "truncated");
    spit(bad, f, 8 + n / 2);
    expect_reject(bad, b, ob, RUMOR_EIO, "truncated: header");
    spit(bad, f, data + 100);
    expect_reject(bad, b, ob, RUMOR_EIO, "truncated: data section");
    spit(bad, f, len - 1);
    expect_reject(bad, b, ob, RUMOR_EIO, "truncated: data section");
    spit(bad, f, 0);
    expect_reject(bad, b, ob, RUMOR_EIO, "truncated");
    /* Trailing bytes after the data section. */
    unsigned char *g = malloc(len + 8);
    memcpy(g, f, len);
    memset(g + len, 0, 8);
    spit(bad, g, len + 8);
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "bytes after the data section");
    /* An absurd header length (2^63, and 2^64-1) is refused before any allocation. */
    memcpy(g, f, len);
    memset(g, 0, 8);
    g[7] = 0x80;
    spit(bad, g, len);
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "exceeds");
    memset(g, 0xff, 8);
    spit(bad, g, len);
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "exceeds");
    free(g);
    free(f);

    /* Header edits (the data and its digest stay valid). */
    static const struct { const char *from, *to, *msg; int rc; } cases[] = {
        { "\"__metadata__\":{", "\"__metadata__\":{{", "not valid JSON", RUMOR_EFORMAT },
        { "}}", "}", "not valid JSON", RUMOR_EFORMAT },
        { "\"__metadata__\"", "\"__metadatum__\"", "no __metadata__", RUMOR_EFORMAT },
        { "\"dtype\":\"F32\"", "\"dtype\":\"F16\"", "dtype F16, expected F32", RUMOR_EFORMAT },
        { "\"dtype\":\"F32\"", "\"dtype\":7", "needs dtype", RUMOR_EFORMAT },
        { "\"shape\":[16,20]", "\"shape\":[20,16]", "shape", RUMOR_EFORMAT },
        { "\"shape\":[16,20]", "\"shape\":[320]", "shape has 1 dims", RUMOR_EFORMAT },
        { "\"shape\":[16,20]", "\"shape\":[4294967296,4294967296]", "overflows", RUMOR_EFORMAT },
        { "\"shape\":[16,20]", "\"shape\":[16,-20]", "not a size", RUMOR_EFORMAT },
        { "\"model\":\"mlp:20-16-5\"", "\"model\":\"mlp:20-16-6\"", "\"mlp:20-16-6\", this model "
          "is \"mlp:20-16-5\"", RUMOR_EFORMAT },
        { "\"format\":\"rumor-checkpoint-1\"", "\"format\":\"rumor-checkpoint-9\"", "format",
          RUMOR_EFORMAT },
        { "\"round\":\"120\"", "\"round\":\"12x\"", "not an integer", RUMOR_EFORMAT },
        { "\"optim_t\":\"9\"", "\"optim_t\":\"-9\"", "not an integer", RUMOR_EFORMAT },
        { "\"nparams\":\"421\"", "\"nparams\":\"420\"", "420 parameters", RUMOR_EFORMAT },
        { "\"blake2b\":\"", "\"blake2b\":\"zz", "not 64 hex", RUMOR_EFORMAT },
        { "\"optimizer\":\"sgd\"", "\"optimizer\":\"none\"", "unknown tensor \"optim.m\"",
          RUMOR_EFORMAT },
        { "\"optimizer\":\"sgd\"", "\"optimizer\":\"lion\"", "unknown optimizer", RUMOR_EFORMAT },
        { "\"data_offsets\":[1280,1344]", "\"data_offsets\":[1276,1340]", "overlap",
          RUMOR_EFORMAT },
        { "\"data_offsets\":[1280,1344]", "\"data_offsets\":[1280,1348]", "do not span",
          RUMOR_EFORMAT },
        { "\"data_offsets\":[1280,1344]", "\"data_offsets\":[100000000,100000064]",
          "out of range", RUMOR_EFORMAT },
        { "\"data_offsets\":[1280,1344]", "\"data_offsets\":[0,18446744073709551615]",
          "not integers", RUMOR_EFORMAT },
        { "\"data_offsets\":[1280,1344]", "\"data_offsets\":[1280.5,1344.5]", "not integers",
          RUMOR_EFORMAT },
        { "\"data_offsets\":[1280,1344]", "\"data_offsets\":[1280]", "two data_offsets",
          RUMOR_EFORMAT },
        { "\"fc0.weight\":", "\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":"
          "[1280,1344]},\"fc0.weight\":", "appears twice", RUMOR_EFORMAT },
        { "\"fc0.weight\":", "\"extra\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"fc0.weight\":", "unknown tensor \"extra\"", RUMOR_EFORMAT },
        { "\"fc1.bias\":", "\"fc1.biaz\":", "unknown tensor", RUMOR_EFORMAT },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        edit_header(good, bad, cases[i].from, cases[i].to);
        expect_reject(bad, b, ob, cases[i].rc, cases[i].msg);
    }
    /* Swapping two tensors' offsets: each lies about where its data is. */
    edit_header(good, bad, "\"shape\":[16],\"data_offsets\":[1280,1344]",
                "\"shape\":[16],\"data_offsets\":[0,64]");
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "out of order");
    /* The unedited file still loads after all that. */
    CHECK_OK(rumor_ckpt_load(good, b, ob, NULL));
    CHECK(!memcmp(a->params, b->params, a->n * sizeof(float)) && ob->t == 9);

    /* A NaN and an Inf with a matching digest: only the value check objects. */
    a->params[7] = NAN;
    in.round = 121;
    CHECK_OK(rumor_ckpt_save(dir, a, oa, &in, 5));
    ckpt_path(good, sizeof good, dir, "corrupt", 0, 121);
    CHECK(rename(good, bad) == 0);
    b->params[0] += 1.0f;
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "non-finite value at element 7 of the parameters");
    a->params[7] = 0.5f;
    oa->m[3] = -INFINITY;
    CHECK_OK(rumor_ckpt_save(dir, a, oa, &in, 5));
    CHECK(rename(good, bad) == 0);
    expect_reject(bad, b, ob, RUMOR_EFORMAT, "element 3 of optim.m");
    unlink(bad);
    CHECK_ERR(rumor_ckpt_load(bad, b, ob, NULL), RUMOR_ESYS, "bad.safetensors: cannot open");
    rumor_optim_destroy(&oa);
    rumor_optim_destroy(&ob);
    free_model(&a);
    free_model(&b);
}

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        n += l > s && !strcmp(e->d_name + l - s, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

static void check_fallback_and_pruning(const char *base)
{
    char dir[300], path[600], stale[600];
    rumor_stage_t *a = new_model(SPEC, 1), *b = new_model(SPEC, 2);
    rumor_ckpt_info_t in = { .swarm = "fb" }, out;
    snprintf(dir, sizeof dir, "%s/fallback", base);
    CHECK(rumor_ckpt_load_latest(dir, "fb", 0, b, NULL, &out, NULL, 0) == RUMOR_CKPT_NONE);
    for (in.round = 1; in.round <= 3; in.round++) {
        a->params[0] = (float)in.round;
        CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 5));
    }
    /* Corrupt the newest: load_latest warns, naming it, and takes round 2. */
    ckpt_path(path, sizeof path, dir, "fb", 0, 3);
    size_t len;
    unsigned char *f = slurp(path, &len);
    f[len - 3] ^= 0x10;
    spit(path, f, len);
    free(f);
    char log[400];
    snprintf(log, sizeof log, "%s/warn.log", base);
    fflush(stderr);
    int saved = dup(2), lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(lfd, 2);
    int rc = rumor_ckpt_load_latest(dir, "fb", 0, b, NULL, &out, path, sizeof path);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(lfd);
    CHECK(rc == 0 && out.round == 2 && b->params[0] == 2.0f);
    CHECK(strstr(path, "/fb-r0-000000000002.safetensors") != NULL);
    f = slurp(log, &len);
    f[len] = '\0';
    CHECKF(strstr((char *)f, "fb-r0-000000000003.safetensors: digest mismatch") != NULL,
           "warning was: %s", (char *)f);
    free(f);
    /* Everything corrupt: RUMOR_CKPT_NONE, the model unchanged. */
    ckpt_path(path, sizeof path, dir, "fb", 0, 2);
    CHECK(truncate(path, 100) == 0);
    ckpt_path(path, sizeof path, dir, "fb", 0, 1);
    CHECK(truncate(path, 3) == 0);
    rumor_log_set_level(RUMOR_LOG_ERROR);
    CHECK(rumor_ckpt_load_latest(dir, "fb", 0, b, NULL, &out, NULL, 0) == RUMOR_CKPT_NONE);
    rumor_log_set_level(RUMOR_LOG_INFO);
    CHECK(strstr(rumor_err_msg(), "none of rank 0's 3 checkpoints loads") != NULL);
    CHECK(b->params[0] == 2.0f);

    /* keep=3 after 5 saves leaves 3; stale temp files go. */
    snprintf(dir, sizeof dir, "%s/keep", base);
    for (in.round = 1; in.round <= 5; in.round++) {
        if (in.round == 4) {
            snprintf(stale, sizeof stale, "%s/.fb-r0-000000000004.%ld.0.tmp", dir,
                     (long)dead_pid());
            spit(stale, "partial", 7);
            CHECK(count_files(dir, ".tmp") == 1);
        }
        CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 3));
    }
    char **paths;
    int n;
    CHECK_OK(rumor_ckpt_list(dir, "fb", 0, &paths, &n));
    CHECK(n == 3 && strstr(paths[0], "fb-r0-000000000005") &&
          strstr(paths[2], "fb-r0-000000000003"));
    rumor_ckpt_list_free(&paths, n);
    rumor_ckpt_list_free(&paths, n);
    CHECK(count_files(dir, ".tmp") == 0 && count_files(dir, ".safetensors") == 3);
    struct stat sb;
    ckpt_path(path, sizeof path, dir, "fb", 0, 5);
    mode_t mask = umask(022);
    umask(mask);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == (0644 & ~mask));
    /* Saving an older round keeps the file just written. */
    in.round = 2;
    CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 2));
    CHECK_OK(rumor_ckpt_list(dir, "fb", 0, &paths, &n));
    CHECK(n == 2 && strstr(paths[0], "fb-r0-000000000005") &&
          strstr(paths[1], "fb-r0-000000000002"));
    rumor_ckpt_list_free(&paths, n);
    /* Bad arguments. */
    CHECK_ERR(rumor_ckpt_save(dir, a, NULL, &in, 0), RUMOR_EINVAL, "keep");
    in.round = -1;
    CHECK_ERR(rumor_ckpt_save(dir, a, NULL, &in, 1), RUMOR_EINVAL, "round");
    in.round = 1;
    in.rank = -1;
    CHECK_ERR(rumor_ckpt_save(dir, a, NULL, &in, 1), RUMOR_EINVAL, "rank >= 0");
    free_model(&a);
    free_model(&b);
}

/* File names: the swarm made safe for the file system, a hash of the name
 * when that changed it, the rank, the round in 12 digits. */
static void check_names(void)
{
    char buf[200], want[200], part[120];
    CHECK_OK(rumor_ckpt_filename("rumor", 3, 1200, buf, sizeof buf));
    CHECK(!strcmp(buf, "rumor-r3-000000001200.safetensors"));
    CHECK_OK(rumor_ckpt_filename("A.z_9-x", 0, 999999999999L, buf, sizeof buf));
    CHECK(!strcmp(buf, "A.z_9-x-r0-999999999999.safetensors"));
    CHECK_OK(rumor_ckpt_filename("a_b", 12, 7, buf, sizeof buf));
    CHECK(!strcmp(buf, "a_b-r12-000000000007.safetensors"));
    char x48[49], x60[61], x70[71];
    memset(x48, 'x', 48), x48[48] = '\0';
    memset(x60, 'x', 60), x60[60] = '\0';
    memset(x70, 'x', 70), x70[70] = '\0';
    CHECK_OK(rumor_ckpt_filename(x48, 0, 1, buf, sizeof buf));
    snprintf(want, sizeof want, "%s-r0-000000000001.safetensors", x48);
    CHECK(!strcmp(buf, want));
    /* name, its file-name part before the hash, the text hashed (the name as
     * the metadata holds it: 63 bytes, non-ASCII as '?') */
    static const struct { const char *name, *safe, *text; } cases[] = {
        { "a b", "a_b", "a b" },
        { "lab/x", "lab_x", "lab/x" },
        { ".hidden", "_hidden", ".hidden" },
        { "../up", "_._up", "../up" },
        { "..", "_.", ".." },
        { "", "", "" },
        { "caf\xc3\xa9", "caf__", "caf??" },
        { "a\tb\"c", "a_b_c", "a?b\"c" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hashed_part(part, sizeof part, cases[i].safe, cases[i].text);
        snprintf(want, sizeof want, "%s-r1-000000000002.safetensors", part);
        CHECK_OK(rumor_ckpt_filename(cases[i].name, 1, 2, buf, sizeof buf));
        CHECKF(!strcmp(buf, want), "swarm '%s': %s, expected %s", cases[i].name, buf, want);
    }
    hashed_part(part, sizeof part, x48, x60); /* cut to 48 characters */
    snprintf(want, sizeof want, "%s-r0-000000000001.safetensors", part);
    CHECK_OK(rumor_ckpt_filename(x60, 0, 1, buf, sizeof buf));
    CHECK(!strcmp(buf, want));
    x70[63] = '\0'; /* the metadata keeps 63 bytes: so does the hash */
    hashed_part(part, sizeof part, x48, x70);
    snprintf(want, sizeof want, "%s-r0-000000000001.safetensors", part);
    x70[63] = 'x';
    CHECK_OK(rumor_ckpt_filename(x70, 0, 1, buf, sizeof buf));
    CHECK(!strcmp(buf, want));
    CHECK_ERR(rumor_ckpt_filename("s", -1, 1, buf, sizeof buf), RUMOR_EINVAL, "rank -1");
    CHECK_ERR(rumor_ckpt_filename("s", 0, -1, buf, sizeof buf), RUMOR_EINVAL, "round -1");
    CHECK_ERR(rumor_ckpt_filename("s", 0, 1000000000000L, buf, sizeof buf), RUMOR_EINVAL, "round");
    CHECK_ERR(rumor_ckpt_filename("s", 0, 1, buf, 20), RUMOR_EINVAL, "too long");
}

/* rumor_ckpt_load_latest with its warnings captured into log. */
static int load_latest_logged(const char *base, const char *dir, const char *swarm, int rank,
                              rumor_stage_t *m, rumor_ckpt_info_t *out, char *log, size_t loglen)
{
    char lp[400];
    snprintf(lp, sizeof lp, "%s/shared.log", base);
    fflush(stderr);
    int saved = dup(2), lfd = open(lp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(lfd, 2);
    int rc = rumor_ckpt_load_latest(dir, swarm, rank, m, NULL, out, NULL, 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(lfd);
    size_t len = 0;
    unsigned char *f = slurp(lp, &len);
    snprintf(log, loglen, "%.*s", (int)len, f ? (char *)f : "");
    free(f);
    return rc;
}

static void copy_file(const char *from, const char *to)
{
    size_t len = 0;
    unsigned char *b = slurp(from, &len);
    CHECKF(b != NULL, "cannot read %s", from);
    if (b)
        spit(to, b, len);
    free(b);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Ranks 0 and 1 of swarm "s" and rank 0 of swarm "s x" in one directory:
 * each keeps, lists and resumes its own files; another peer's file under
 * one of ours is refused with a warning naming it; temp files are removed
 * only by their own rank, and only when their writer is gone. */
static void check_shared_dir(const char *base)
{
    static const struct { const char *swarm; int rank; } who[3] = { { "s", 0 }, { "s", 1 },
                                                                     { "s x", 0 } };
    char dir[300], path[600], from[600], parts[3][64], log[4096];
    snprintf(dir, sizeof dir, "%s/shared", base);
    snprintf(parts[0], sizeof parts[0], "s");
    snprintf(parts[1], sizeof parts[1], "s");
    hashed_part(parts[2], sizeof parts[2], "s_x", "s x");
    rumor_stage_t *a = new_model(SPEC, 1), *b = new_model(SPEC, 2);
    rumor_ckpt_info_t in, out;
    for (long r = 1; r <= 4; r++)
        for (int w = 0; w < 3; w++) {
            memset(&in, 0, sizeof in);
            in.round = r;
            in.rank = who[w].rank;
            snprintf(in.swarm, sizeof in.swarm, "%s", who[w].swarm);
            a->params[0] = (float)(100 * w + r);
            CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 2));
        }
    CHECKF(count_files(dir, ".safetensors") == 6, "%d checkpoints, expected 2 of each of 3 peers",
           count_files(dir, ".safetensors"));
    for (int w = 0; w < 3; w++) {
        char **paths;
        int n;
        CHECK_OK(rumor_ckpt_list(dir, who[w].swarm, who[w].rank, &paths, &n));
        CHECKF(n == 2, "peer %d lists %d checkpoints", w, n);
        for (int i = 0; i < n && i < 2; i++) {
            ckpt_path(path, sizeof path, dir, parts[w], who[w].rank, 4 - i);
            CHECKF(!strcmp(paths[i], path), "peer %d lists %s, expected %s", w, paths[i], path);
        }
        rumor_ckpt_list_free(&paths, n);
        CHECK(load_latest_logged(base, dir, who[w].swarm, who[w].rank, b, &out, log,
                                 sizeof log) == 0);
        CHECKF(out.round == 4 && out.rank == who[w].rank && !strcmp(out.swarm, who[w].swarm) &&
               b->params[0] == (float)(100 * w + 4), "peer %d resumed round %ld of rank %d "
               "(%s), params[0] %g", w, out.round, out.rank, out.swarm, (double)b->params[0]);
        CHECKF(!*log, "peer %d: warnings: %s", w, log);
    }
    /* Rank 1's newest, then swarm "s x"'s, then rank 0's own older one
     * under rank 0's name for round 5: each refused, naming the file and
     * what its metadata says; rank 0's round 4 loads. */
    ckpt_path(path, sizeof path, dir, "s", 0, 5);
    static const struct { int w; long round; const char *says; } impostors[] = {
        { 1, 4, "its metadata says rank 1 of swarm \"s\", round 4" },
        { 2, 4, "its metadata says rank 0 of swarm \"s x\", round 4" },
        { 0, 3, "its metadata says rank 0 of swarm \"s\", round 3" },
    };
    for (size_t i = 0; i < sizeof impostors / sizeof impostors[0]; i++) {
        int w = impostors[i].w;
        ckpt_path(from, sizeof from, dir, parts[w], who[w].rank, impostors[i].round);
        copy_file(from, path);
        b->params[0] = -1.0f;
        CHECK(load_latest_logged(base, dir, "s", 0, b, &out, log, sizeof log) == 0);
        CHECKF(out.round == 4 && out.rank == 0 && b->params[0] == 4.0f,
               "impostor %zu: loaded round %ld of rank %d, params[0] %g", i, out.round, out.rank,
               (double)b->params[0]);
        CHECKF(strstr(log, "/s-r0-000000000005.safetensors: ") && strstr(log, impostors[i].says) &&
               strstr(log, "trying an older checkpoint"), "impostor %zu: warning: %s", i, log);
        /* rumor_ckpt_load of the file itself, asking nothing of its owner, takes it */
        CHECK_OK(rumor_ckpt_load(path, b, NULL, &out));
        CHECK(out.rank == who[w].rank && out.round == impostors[i].round);
    }
    CHECK(unlink(path) == 0);

    /* Temp files: rank 0's save removes only rank 0's of a writer that is
     * gone; a live writer's (this process's) and other peers' stay. */
    char tmp[6][600];
    pid_t dead = dead_pid(), live = getpid();
    struct { const char *part; int rank; pid_t pid; } t[6] = {
        { "s", 0, dead }, { "s", 0, live }, { "s", 1, dead }, { "s", 1, live },
        { parts[2], 0, dead }, { "s", 10, dead },
    };
    for (int i = 0; i < 6; i++) {
        snprintf(tmp[i], sizeof tmp[i], "%s/.%s-r%d-000000000005.%ld.0.tmp", dir, t[i].part,
                 t[i].rank, (long)t[i].pid);
        spit(tmp[i], "partial", 7);
    }
    memset(&in, 0, sizeof in);
    in.round = 6;
    snprintf(in.swarm, sizeof in.swarm, "s");
    CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 2));
    CHECKF(!exists(tmp[0]), "%s: a dead writer's temp file of this rank stayed", tmp[0]);
    for (int i = 1; i < 6; i++)
        CHECKF(exists(tmp[i]), "%s: removed by rank 0 of swarm s", tmp[i]);
    in.rank = 1;
    CHECK_OK(rumor_ckpt_save(dir, a, NULL, &in, 2));
    CHECK(!exists(tmp[2]) && exists(tmp[3]) && exists(tmp[4]) && exists(tmp[5]));
    /* ... and the pruning of each rank left the others' checkpoints. */
    CHECK(count_files(dir, ".safetensors") == 6);
    for (int i = 0; i < 6; i++)
        unlink(tmp[i]);
    free_model(&a);
    free_model(&b);
}

/* The child of the crash test: saves rounds start, start+1, ... for ever,
 * writing each round to the pipe once its save has returned (committed). */
static void saver(rumor_stage_t *m, const char *dir, long start, int fd)
{
    rumor_ckpt_info_t in = { .round = start, .swarm = "crash" };
    for (;; in.round++) {
        for (int i = 0; i < 4; i++)
            m->params[i * 1000] = (float)in.round;
        if (rumor_ckpt_save(dir, m, NULL, &in, 2) < 0) {
            fprintf(stderr, "child: %s\n", rumor_err_msg());
            _exit(3);
        }
        if (write(fd, &in.round, sizeof in.round) != sizeof in.round)
            _exit(4);
    }
}

static void check_crashes(const char *base)
{
    const char *env = getenv("RUMOR_CKPT_KILLS");
    int kills = env && *env ? atoi(env) : 200;
    char dir[300], path[600];
    snprintf(dir, sizeof dir, "%s/crash", base);
    rumor_stage_t *m = new_model("mlp:512-448-64-10", 77); /* 259210 floats, 1.04 MB */
    rumor_ckpt_info_t in = { .round = 0, .swarm = "crash" }, out;
    for (int i = 0; i < 4; i++) /* stamped like the saver's rounds: a load of round 0 */
        m->params[i * 1000] = 0.0f; /* (every child killed before its first save) checks too */
    CHECK_OK(rumor_ckpt_save(dir, m, NULL, &in, 2));
    unsigned long long rng = 0x9e3779b97f4a7c15ULL;
    int loadable = 0, behind = 0, inconsistent = 0, midwrite = 0, nothing = 0, stale_max = 0;
    long commits = 0, start = 1;
    double t0 = rumor_now();
    for (int it = 0; it < kills; it++) {
        int pfd[2];
        if (pipe(pfd) < 0)
            break;
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            saver(m, dir, start, pfd[1]);
        }
        close(pfd[1]);
        long delay_us = (long)((tu_randf(&rng) + 1.0f) * 15000.0f); /* 0-30 ms */
        struct timespec ts = { 0, delay_us * 1000 };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child exited with %d",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        long r, last = start - 1;
        int got = 0;
        while (read(pfd[0], &r, sizeof r) == sizeof r) {
            last = r;
            got++;
        }
        close(pfd[0]);
        commits += got;
        nothing += got == 0;
        int stale = count_files(dir, ".tmp");
        midwrite += stale > 0;
        stale_max = stale > stale_max ? stale : stale_max;
        if (rumor_ckpt_load_latest(dir, "crash", 0, m, NULL, &out, path, sizeof path) != 0) {
            fprintf(stderr, "iteration %d: nothing loads: %s\n", it, rumor_err_msg());
            continue;
        }
        loadable++;
        behind += out.round < last;
        inconsistent += m->params[0] != (float)out.round || m->params[3000] != (float)out.round;
        start = out.round + 1;
    }
    double secs = rumor_now() - t0;
    fprintf(stderr, "crash test: %d/%d loadable, %d resumed before the last committed round, "
            "%d with content of another round; %ld saves committed in all, %d kills before the "
            "first save of their run returned, %d left a temp file (killed mid-write, at most "
            "%d at once); %.1f s\n", loadable, kills, behind, inconsistent, commits, nothing,
            midwrite, stale_max, secs);
    CHECK(loadable == kills && behind == 0 && inconsistent == 0);
    /* Kills between a rename and its pruning leave more than keep=2 behind
     * (one more per such kill in a row); the next save that commits prunes
     * them, as it does temp files of killed writers. */
    int n = count_files(dir, ".safetensors");
    CHECKF(n >= 1, "%d checkpoints left", n);
    in.round = start;
    CHECK_OK(rumor_ckpt_save(dir, m, NULL, &in, 2));
    CHECK(count_files(dir, ".tmp") == 0 && count_files(dir, ".safetensors") == 2);
    free_model(&m);
}

int main(void)
{
    if (rumor_device_open("cpu:1", &dev) < 0)
        TEST_SKIP("no CPU device: %s", rumor_err_msg());
    if (sodium_init() < 0)
        return 1;
    const char *base = tu_tmpdir();
    char dir[300];
    snprintf(dir, sizeof dir, "%s/sgd", base);
    check_round_trip(RUMOR_OPT_SGD, dir);
    snprintf(dir, sizeof dir, "%s/adamw", base);
    check_round_trip(RUMOR_OPT_ADAMW, dir);
    snprintf(dir, sizeof dir, "%s/corrupt", base);
    check_corruption(dir);
    snprintf(dir, sizeof dir, "%s/gpt", base);
    check_gpt(dir);
    snprintf(dir, sizeof dir, "%s/spelling", base);
    check_spelling(dir);
    check_fallback_and_pruning(base);
    check_names();
    check_shared_dir(base);
    check_crashes(base);
    rumor_device_close(&dev);
    if (!tu_failures) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", base);
    }
    return tu_finish("test_checkpoint");
}
