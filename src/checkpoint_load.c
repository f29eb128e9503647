/* Reading one checkpoint: every structural check, then the data read into a
 * staging buffer while it is hashed, the digest and the values checked, and
 * only then copied into the model and optimizer. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_int.h"
#include "err.h"

/* Reads exactly len bytes; returns the number read (less at end of file) or -1. */
static ssize_t ckpt_read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* A metadata string, or NULL (with the error set) when missing or not a string. */
static const char *meta_get(const cJSON *meta, const char *path, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(meta, key);
    if (!cJSON_IsString(it) || !it->valuestring) {
        rumor_err_set(RUMOR_EFORMAT, "%s: metadata \"%s\" missing", path, key);
        return NULL;
    }
    return it->valuestring;
}

/* A metadata integer in [lo, hi], written in decimal and nothing else. */
static int meta_int(const cJSON *meta, const char *path, const char *key, long long lo,
                    long long hi, long long *out)
{
    const char *s = meta_get(meta, path, key);
    if (!s)
        return RUMOR_EFORMAT;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return rumor_err_set(RUMOR_EFORMAT, "%s: metadata \"%s\" is \"%s\", not an integer in "
                             "[%lld, %lld]", path, key, s, lo, hi);
    *out = v;
    return 0;
}

/* A JSON number that is an exact integer in [0, 2^53]. */
static int json_u64(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0) || it->valuedouble > JSON_MAX_INT ||
        it->valuedouble != floor(it->valuedouble))
        return -1;
    *out = (uint64_t)it->valuedouble;
    return 0;
}

/* Checks one header entry against the expected layout t[0..nt). */
static int check_tensor(const char *path, const cJSON *e, struct ckpt_tensor *t, int nt, uint64_t total)
{
    const char *name = e->string;
    struct ckpt_tensor *x = NULL;
    for (int k = 0; k < nt && !x; k++)
        if (!strcmp(t[k].name, name))
            x = &t[k];
    if (!x)
        return rumor_err_set(RUMOR_EFORMAT, "%s: unknown tensor \"%s\"", path, name);
    if (x->seen++)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\" appears twice", path, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) ||
        !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": needs dtype, shape and two "
                             "data_offsets", path, name);
    if (strcmp(dtype->valuestring, "F32"))
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": dtype %.16s, expected F32", path,
                             name, dtype->valuestring);
    int nd = cJSON_GetArraySize(shape);
    uint64_t count = 1, dim, bytes, b, en;
    int same = nd == x->ndim;
    for (int d = 0; d < nd; d++) {
        if (json_u64(cJSON_GetArrayItem(shape, d), &dim) < 0 ||
            __builtin_mul_overflow(count, dim, &count))
            return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": shape[%d] is not a size or "
                                 "the element count overflows", path, name, d);
        same = same && dim == x->shape[d];
    }
    if (!same)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": shape has %d dims or other sizes "
                             "than the model's [%" PRIu64 "%s%.0" PRIu64 "]", path, name, nd,
                             x->shape[0], x->ndim > 1 ? "," : "", x->ndim > 1 ? x->shape[1] : 0);
    if (json_u64(cJSON_GetArrayItem(offs, 0), &b) < 0 ||
        json_u64(cJSON_GetArrayItem(offs, 1), &en) < 0)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": data_offsets are not integers in "
                             "[0, 2^53]", path, name);
    if (__builtin_mul_overflow(count, 4, &bytes) || b > en || en - b != bytes)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                             "] do not span its %" PRIu64 " elements", path, name, b, en, count);
    if (en > total)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                             "] out of range (data section %" PRIu64 " bytes)", path, name, b, en,
                             total);
    if (b != x->begin)
        return rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                             "], expected [%" PRIu64 ", %" PRIu64 "] (tensors overlap or are out "
                             "of order)", path, name, b, en, x->begin, x->end);
    return 0;
}

/* Refuses a file whose metadata names another swarm, rank or round than
 * its name says (another peer's checkpoint, renamed or copied). */
static int check_owner(const char *path, const struct ckpt_owner *own, const char *swarm,
                       long long rank, long long round)
{
    char want[64];
    ckpt_swarm_text(own->swarm, want);
    if (!strcmp(swarm, want) && rank == own->rank && round == own->round)
        return 0;
    return rumor_err_set(RUMOR_EFORMAT, "%s: its metadata says rank %lld of swarm \"%.64s\", "
                         "round %lld, but the name says rank %d of swarm \"%s\", round %ld: "
                         "another peer's checkpoint, renamed or copied? Not loading it", path,
                         rank, swarm, round, own->rank, want, own->round);
}

/* Reads and checks the metadata every checkpoint has (format, model,
 * optimizer, swarm, digest and the integers) into ci; *np gets the
 * parameter count and *hex the digest's text. */
static int parse_meta(const char *path, const cJSON *root, rumor_ckpt_info_t *ci, long long *np,
                      const char **hex)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(meta))
        return rumor_err_set(RUMOR_EFORMAT, "%s: header has no __metadata__ object", path);
    const char *fmt = meta_get(meta, path, "format"), *spec = meta_get(meta, path, "model");
    const char *opt = meta_get(meta, path, "optimizer"), *swarm = meta_get(meta, path, "swarm");
    *hex = meta_get(meta, path, "blake2b");
    if (!fmt || !spec || !opt || !swarm || !*hex)
        return RUMOR_EFORMAT;
    if (strcmp(fmt, CKPT_FORMAT))
        return rumor_err_set(RUMOR_EFORMAT, "%s: a safetensors file but not a rumor checkpoint: "
                             "format \"%.40s\", expected \"%s\"", path, fmt, CKPT_FORMAT);
    long long round, epoch, ot, rank, inc;
    RUMOR_CHECK(meta_int(meta, path, "nparams", 0, LLONG_MAX, np));
    RUMOR_CHECK(meta_int(meta, path, "round", 0, CKPT_MAX_ROUND, &round));
    RUMOR_CHECK(meta_int(meta, path, "epoch", INT_MIN, INT_MAX, &epoch));
    RUMOR_CHECK(meta_int(meta, path, "optim_t", 0, LONG_MAX, &ot));
    RUMOR_CHECK(meta_int(meta, path, "rank", INT_MIN, INT_MAX, &rank));
    RUMOR_CHECK(meta_int(meta, path, "incarnation", 0, LLONG_MAX, &inc));
    memset(ci, 0, sizeof *ci);
    ci->round = (long)round;
    ci->epoch = (int)epoch;
    ci->optim_t = (long)ot;
    ci->rank = (int)rank;
    ci->incarnation = (uint64_t)inc;
    snprintf(ci->model, sizeof ci->model, "%s", spec);
    snprintf(ci->optimizer, sizeof ci->optimizer, "%s", opt);
    snprintf(ci->swarm, sizeof ci->swarm, "%s", swarm);
    /* optional: a token model's tokenizer */
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(meta, "tokenizer");
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(meta, "tokenizer_blake2b");
    if (cJSON_IsString(tk) && cJSON_IsString(td) && strlen(td->valuestring) == 64) {
        snprintf(ci->tokenizer, sizeof ci->tokenizer, "%s", tk->valuestring);
        snprintf(ci->tokenizer_digest, sizeof ci->tokenizer_digest, "%s", td->valuestring);
    }
    return 0;
}

/* Whether a checkpoint's model spec, written another way (an older
 * "mlp:784-256-10:relu"), names m: its canonical form is m's. */
static int same_model(const char *spec, const rumor_model_t *m)
{
    rumor_model_t *fm = NULL;
    int rc = rumor_model_create(spec, 0, &fm);
    rumor_err_clear();
    int same = rc == 0 && !strcmp(fm->spec, m->spec);
    rumor_model_destroy(&fm);
    return same;
}

/* Parses and checks the header (metadata and every tensor) against m and o
 * (and own, when not NULL). Fills info, the file's optimizer
 * ("none"/"sgd"/"adamw"), its digest and the data section's length. */
static int check_header(const char *path, const cJSON *root, const rumor_model_t *m,
                        const rumor_optim_t *o, const struct ckpt_owner *own,
                        rumor_ckpt_info_t *ci, unsigned char digest[32], uint64_t *total)
{
    long long np;
    const char *hex;
    RUMOR_CHECK(parse_meta(path, root, ci, &np, &hex));
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    const char *spec = ci->model, *opt = ci->optimizer;
    if (own) /* the metadata's own text: ci->swarm may be cut short */
        RUMOR_CHECK(check_owner(path, own, meta_get(meta, path, "swarm"), ci->rank, ci->round));
    if (strcmp(spec, m->spec) && !same_model(spec, m))
        return rumor_err_set(RUMOR_EFORMAT, "%s: a checkpoint of model \"%.128s\", this model is "
                             "\"%s\"", path, spec, m->spec);
    if ((unsigned long long)np != m->nparams)
        return rumor_err_set(RUMOR_EFORMAT, "%s: %lld parameters, the model has %zu", path, np,
                             m->nparams);
    int has_m = strcmp(opt, "none") != 0, has_v = !strcmp(opt, "adamw");
    if (has_m && !has_v && strcmp(opt, "sgd"))
        return rumor_err_set(RUMOR_EFORMAT, "%s: unknown optimizer \"%.16s\"", path, opt);
    if (o && has_m && has_v != (o->cfg.kind == RUMOR_OPT_ADAMW))
        return rumor_err_set(RUMOR_EFORMAT, "%s: holds %s state, the optimizer is %s: give "
                             "--optimizer %s to go on from it", path, opt,
                             o->cfg.kind == RUMOR_OPT_ADAMW ? "adamw" : "sgd", opt);
    size_t dlen;
    if (strlen(hex) != 64 || sodium_hex2bin(digest, 32, hex, 64, NULL, &dlen, NULL) < 0 || dlen != 32)
        return rumor_err_set(RUMOR_EFORMAT, "%s: metadata \"blake2b\" is not 64 hex digits", path);

    struct ckpt_tensor *t;
    int nt, rc = 0;
    RUMOR_CHECK(ckpt_layout(m, has_m, has_v, &t, &nt, total));
    for (const cJSON *e = root->child; e && rc == 0; e = e->next)
        if (e != meta)
            rc = check_tensor(path, e, t, nt, *total);
    for (int k = 0; k < nt && rc == 0; k++)
        if (!t[k].seen)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s: tensor \"%s\" missing", path, t[k].name);
    free(t);
    if (rc < 0)
        return rc;
    return 0;
}

/* Reads the data section into a new buffer, hashing it on the way, and
 * checks the digest and that every value is finite. *out is the caller's. */
static int read_data(const char *path, int fd, uint64_t total, const unsigned char want[32],
                     const rumor_model_t *m, float **out)
{
    float *buf = malloc(total);
    if (!buf)
        return rumor_err_set(RUMOR_ENOMEM, "%s: no memory for %" PRIu64 " bytes", path, total);
    crypto_generichash_state st;
    unsigned char got[32];
    crypto_generichash_init(&st, NULL, 0, sizeof got);
    for (uint64_t off = 0; off < total;) {
        size_t chunk = total - off < (1u << 20) ? (size_t)(total - off) : (1u << 20);
        ssize_t r = ckpt_read_full(fd, (char *)buf + off, chunk);
        if (r != (ssize_t)chunk) {
            free(buf);
            return r < 0 ? rumor_err_sys(RUMOR_EIO, "%s: read failed", path)
                         : rumor_err_set(RUMOR_EIO, "%s: truncated while reading", path);
        }
        crypto_generichash_update(&st, (const unsigned char *)buf + off, chunk);
        off += chunk;
    }
    crypto_generichash_final(&st, got, sizeof got);
    if (sodium_memcmp(got, want, 32) != 0) {
        free(buf);
        return rumor_err_set(RUMOR_EFORMAT, "%s: digest mismatch (file corrupt)", path);
    }
    size_t n = (size_t)(total / 4);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(buf[i])) {
            free(buf);
            return rumor_err_set(RUMOR_EFORMAT, "%s: non-finite value at element %zu of %s", path,
                                 i % m->nparams, i < m->nparams ? "the parameters" :
                                 i < 2 * m->nparams ? "optim.m" : "optim.v");
        }
    *out = buf;
    return 0;
}

/* Opens path and reads and parses its header: *fd is left open just past
 * it (the caller closes it, also on failure when *fd >= 0), *hdr and *root
 * are the caller's to free. */
static int read_header(const char *path, int *fd, uint64_t *size_out, char **hdr_out,
                       uint64_t *hlen_out, cJSON **root_out)
{
    struct stat sb;
    unsigned char len8[8];
    uint64_t size, hlen = 0;
    char *hdr;
    *hdr_out = NULL;
    *root_out = NULL;
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot open", path);
    if (fstat(*fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return rumor_err_set(RUMOR_EIO, "%s: not a regular file", path);
    size = (uint64_t)sb.st_size;
    if (size < 8 || ckpt_read_full(*fd, len8, 8) != 8)
        return rumor_err_set(RUMOR_EIO, "%s: truncated: %" PRIu64 " bytes, less than the 8-byte "
                             "header length", path, size);
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)len8[i] << (8 * i);
    /* safetensors: the length, then a JSON object. Anything else (a text
     * file, a PyTorch pickle) is named as such, not by the number its
     * first 8 bytes happen to make. */
    unsigned char first;
    if (size > 8 && (pread(*fd, &first, 1, 8) != 1 || first != '{'))
        return rumor_err_set(RUMOR_EFORMAT, "%s: not a safetensors file (no JSON header after "
                             "the 8-byte header length)", path);
    if (hlen > RUMOR_CKPT_MAX_HEADER)
        return rumor_err_set(RUMOR_EFORMAT, "%s: header length %" PRIu64 " exceeds the %u-byte "
                             "limit", path, hlen, RUMOR_CKPT_MAX_HEADER);
    if (hlen > size - 8)
        return rumor_err_set(RUMOR_EIO, "%s: truncated: header %" PRIu64 " bytes, file has %" PRIu64,
                             path, hlen, size);
    if (!(hdr = *hdr_out = malloc(hlen + 1)))
        return rumor_err_set(RUMOR_ENOMEM, "%s: no memory for the header", path);
    if (ckpt_read_full(*fd, hdr, hlen) != (ssize_t)hlen)
        return rumor_err_sys(RUMOR_EIO, "%s: reading the header failed", path);
    hdr[hlen] = '\0';
    const char *end = NULL;
    if (memchr(hdr, '\0', hlen) || !(*root_out = cJSON_ParseWithOpts(hdr, &end, 1)))
        return rumor_err_set(RUMOR_EFORMAT, "%s: header is not valid JSON (near byte %td)", path,
                             end ? end - hdr : (ptrdiff_t)strnlen(hdr, hlen));
    *size_out = size;
    *hlen_out = hlen;
    return 0;
}

int rumor_ckpt_peek(const char *path, rumor_ckpt_info_t *info)
{
    int fd = -1, rc;
    char *hdr = NULL;
    cJSON *root = NULL;
    uint64_t size, hlen;
    long long np;
    const char *hex;
    memset(info, 0, sizeof *info);
    rc = read_header(path, &fd, &size, &hdr, &hlen, &root);
    if (rc == 0)
        rc = parse_meta(path, root, info, &np, &hex);
    cJSON_Delete(root);
    free(hdr);
    if (fd >= 0)
        close(fd);
    return rc;
}

int rumor_ckpt_load(const char *path, rumor_stage_t *st, rumor_optim_t *o, rumor_ckpt_info_t *info)
{
    return ckpt_load_owned(path, NULL, st, o, info);
}

/* See checkpoint_int.h. */
int ckpt_load_owned(const char *path, const struct ckpt_owner *own, rumor_stage_t *st,
                    rumor_optim_t *o, rumor_ckpt_info_t *info)
{
    if (!path || !st)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint load: bad argument");
    const rumor_model_t *m = st->model;
    if (st->lo != 0 || st->n != m->nparams)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint load: the stage holds [%zu, %zu) of %zu "
                             "parameters; checkpoints hold the whole space", st->lo, st->hi,
                             m->nparams);
    if (o && o->n != m->nparams)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint load: optimizer has %zu values, model %zu",
                             o->n, m->nparams);
    if (sodium_init() < 0)
        return rumor_err_set(RUMOR_ESYS, "checkpoint load: libsodium failed to initialize");
    int fd = -1, rc = 0;
    char *hdr = NULL;
    cJSON *root = NULL;
    float *data = NULL;
    unsigned char digest[32];
    rumor_ckpt_info_t ci;
    uint64_t size, hlen, total;
    RUMOR_CHECK_GOTO(read_header(path, &fd, &size, &hdr, &hlen, &root), rc, out);
    RUMOR_CHECK_GOTO(check_header(path, root, m, o, own, &ci, digest, &total), rc, out);
    if (size - 8 - hlen != total) {
        rc = size - 8 - hlen < total
                 ? rumor_err_set(RUMOR_EIO, "%s: truncated: data section %" PRIu64 " bytes, file "
                                 "has %" PRIu64 " after the header", path, total, size - 8 - hlen)
                 : rumor_err_set(RUMOR_EFORMAT, "%s: %" PRIu64 " bytes after the data section",
                                 path, size - 8 - hlen - total);
        goto out;
    }
    RUMOR_CHECK_GOTO(read_data(path, fd, total, digest, m, &data), rc, out);
    /* All checked: only now do m and o change. */
    RUMOR_CHECK_GOTO(rumor_stage_set_params(st, data), rc, out);
    if (o && strcmp(ci.optimizer, "none")) {
        size_t bytes = m->nparams * sizeof(float);
        RUMOR_CHECK_GOTO(o->dev->ops->upload(o->dev, o->m, data + m->nparams, bytes), rc, out);
        if (o->v)
            RUMOR_CHECK_GOTO(o->dev->ops->upload(o->dev, o->v, data + 2 * m->nparams, bytes), rc,
                             out);
        o->t = ci.optim_t;
    }
    if (info)
        *info = ci;
out:
    if (fd >= 0)
        close(fd);
    free(data);
    cJSON_Delete(root);
    free(hdr);
    return rc;
}
