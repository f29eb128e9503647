/* Checkpoints as safetensors files: layout, atomic save, listing, and the
 * fallback load (checkpoint_load.c reads and verifies one file). See
 * checkpoint.h for the format; the safetensors spec is at
 * https://github.com/huggingface/safetensors (header, then data, offsets
 * relative to the data section, tensors contiguous and covering it). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "checkpoint_int.h"
#include "err.h"
#include "log.h"

/* See checkpoint_int.h. */
int ckpt_layout(const rumor_model_t *m, int with_m, int with_v, struct ckpt_tensor **out, int *n,
                uint64_t *total)
{
    struct ckpt_tensor *t = calloc((size_t)m->ntensors + 2, sizeof *t);
    if (!t)
        return rumor_err_set(RUMOR_ENOMEM, "checkpoint: out of memory");
    int k = 0;
    size_t off = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const rumor_tensor_t *mt = &m->tensors[i];
        if (mt->off != off) {
            free(t);
            return rumor_err_set(RUMOR_EINVAL, "checkpoint: model %s: tensor %s is not stored "
                                 "back to back with the previous one", m->spec, mt->name);
        }
        snprintf(t[k].name, sizeof t[k].name, "%s", mt->name);
        t[k].ndim = mt->ndim;
        for (int d = 0; d < mt->ndim; d++)
            t[k].shape[d] = (uint64_t)mt->shape[d];
        t[k].begin = off * 4;
        off += mt->numel;
        t[k++].end = off * 4;
    }
    if (off != m->nparams) {
        free(t);
        return rumor_err_set(RUMOR_EINVAL, "checkpoint: model %s: tensors cover %zu of %zu "
                             "parameters", m->spec, off, m->nparams);
    }
    const char *extra[2] = { with_m ? "optim.m" : NULL, with_v ? "optim.v" : NULL };
    for (int i = 0; i < 2; i++) {
        if (!extra[i])
            continue;
        snprintf(t[k].name, sizeof t[k].name, "%s", extra[i]);
        t[k].ndim = 1;
        t[k].shape[0] = m->nparams;
        t[k].begin = off * 4;
        off += m->nparams;
        t[k++].end = off * 4;
    }
    *out = t;
    *n = k;
    *total = (uint64_t)off * 4;
    return 0;
}

/* A host-memory view of n floats of device memory: the pointer itself on the
 * CPU, else a download into *tmp (the caller frees *tmp). */
static int host_view(rumor_device_t *dev, const float *p, size_t n, const float **view, float **tmp)
{
    *tmp = NULL;
    if (dev->kind == RUMOR_DEV_CPU) {
        *view = p;
        return 0;
    }
    if (!(*tmp = malloc(n * sizeof(float))))
        return rumor_err_set(RUMOR_ENOMEM, "checkpoint: out of memory for %zu floats", n);
    *view = *tmp;
    return dev->ops->download(dev, *tmp, p, n * sizeof(float));
}

/* Writes all of buf or fails with errno set (EINTR and short writes retried). */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Makes a rename or unlink in dir durable. */
static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot open directory to fsync", dir);
    int rc = fsync(fd);
    close(fd);
    if (rc < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s: fsync of the directory failed", dir);
    return 0;
}

/* See checkpoint_int.h. */
void ckpt_swarm_text(const char *swarm, char out[64])
{
    size_t i;
    /* safetensors requires UTF-8: keep the caller's free text printable ASCII. */
    for (i = 0; i < 63 && swarm && swarm[i]; i++) {
        unsigned char c = (unsigned char)swarm[i];
        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[i] = '\0';
}

/* See checkpoint_int.h and checkpoint.h for the rule. */
int ckpt_prefix(const char *swarm, int rank, char *buf, size_t len)
{
    char text[64], safe[CKPT_NAME_KEEP + 10];
    size_t n = 0;
    int changed = 0;
    ckpt_swarm_text(swarm, text);
    for (size_t i = 0; text[i]; i++) {
        char c = text[i];
        if (n == CKPT_NAME_KEEP) {
            changed = 1;
            break;
        }
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || (c == '.' && i > 0))) {
            c = '_';
            changed = 1;
        }
        safe[n++] = c;
    }
    safe[n] = '\0';
    if (changed || n == 0) {
        /* Two names that sanitize alike still name different files. */
        unsigned char h[32];
        if (sodium_init() < 0)
            return rumor_err_set(RUMOR_ESYS, "checkpoint: libsodium failed to initialize");
        crypto_generichash(h, sizeof h, (const unsigned char *)text, strlen(text), NULL, 0);
        snprintf(safe + n, sizeof safe - n, "+%02x%02x%02x%02x", h[0], h[1], h[2], h[3]);
    }
    if (rank < 0)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint: rank %d is negative", rank);
    if ((size_t)snprintf(buf, len, "%s-r%d-", safe, rank) >= len)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint: file name too long");
    return 0;
}

int rumor_ckpt_filename(const char *swarm, int rank, long round, char *buf, size_t len)
{
    char pre[128];
    if (round < 0 || round > CKPT_MAX_ROUND)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint: round %ld out of range", round);
    RUMOR_CHECK(ckpt_prefix(swarm, rank, pre, sizeof pre));
    if ((size_t)snprintf(buf, len, "%s%012ld" CKPT_SUFFIX, pre, round) >= len)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint: file name too long");
    return 0;
}

/* Adds a string member; returns 0 or RUMOR_ENOMEM. */
static int meta_add(cJSON *meta, const char *key, const char *fmt, ...) RUMOR_PRINTF(3, 4);
static int meta_add(cJSON *meta, const char *key, const char *fmt, ...)
{
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cJSON_AddStringToObject(meta, key, buf) ? 0 : RUMOR_ENOMEM;
}

/* The header JSON, padded with spaces to a multiple of 8, with a placeholder
 * digest of 64 '0's at *digest_at (patched once the data has been hashed).
 * *out is the caller's to free. */
static int build_header(const rumor_model_t *m, const rumor_optim_t *o,
                        const rumor_ckpt_info_t *info, const struct ckpt_tensor *t, int nt,
                        char **out, size_t *len, size_t *digest_at)
{
    char swarm[64];
    ckpt_swarm_text(info->swarm, swarm);
    const char *opt = !o ? "none" : o->cfg.kind == RUMOR_OPT_ADAMW ? "adamw" : "sgd";
    char zeros[65];
    memset(zeros, '0', 64);
    zeros[64] = '\0';

    int rc = RUMOR_ENOMEM;
    char *json = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    if (!meta || meta_add(meta, "format", CKPT_FORMAT) || meta_add(meta, "model", "%s", m->spec) ||
        meta_add(meta, "nparams", "%zu", m->nparams) || meta_add(meta, "round", "%ld", info->round) ||
        meta_add(meta, "epoch", "%d", info->epoch) || meta_add(meta, "optimizer", "%s", opt) ||
        meta_add(meta, "optim_t", "%ld", o ? o->t : 0L) || meta_add(meta, "rank", "%d", info->rank) ||
        meta_add(meta, "incarnation", "%" PRIu64, info->incarnation) ||
        meta_add(meta, "swarm", "%s", swarm) || meta_add(meta, "blake2b", "%s", zeros))
        goto done;
    if (info->tokenizer[0] && (meta_add(meta, "tokenizer", "%s", info->tokenizer) ||
                               meta_add(meta, "tokenizer_blake2b", "%s", info->tokenizer_digest)))
        goto done;
    for (int k = 0; k < nt; k++) {
        cJSON *e = cJSON_AddObjectToObject(root, t[k].name), *shape;
        if (!e || !cJSON_AddStringToObject(e, "dtype", "F32") ||
            !(shape = cJSON_AddArrayToObject(e, "shape")))
            goto done;
        for (int d = 0; d < t[k].ndim; d++)
            if (!cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[k].shape[d])))
                goto done;
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        if (!offs || !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)t[k].begin)) ||
            !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)t[k].end)))
            goto done;
    }
    if (!(json = cJSON_PrintUnformatted(root)))
        goto done;
    size_t n = strlen(json), padded = (n + 7) & ~(size_t)7;
    char *hdr = malloc(padded + 1);
    const char *at = strstr(json, "\"blake2b\":\"");
    if (!hdr || !at) {
        free(hdr);
        goto done;
    }
    memcpy(hdr, json, n);
    memset(hdr + n, ' ', padded - n);
    hdr[padded] = '\0';
    *out = hdr;
    *len = padded;
    *digest_at = (size_t)(at - json) + strlen("\"blake2b\":\"");
    rc = 0;
done:
    cJSON_free(json);
    cJSON_Delete(root);
    return rc < 0 ? rumor_err_set(rc, "checkpoint: cannot build the header: out of memory") : 0;
}

/* Writes the header and the data (hashing it on the way) to fd, then patches
 * the digest into the header and fsyncs. The caller closes fd. */
static int write_file(int fd, const char *tmp, char *hdr, size_t hlen, size_t digest_at,
                      const float *const *parts, int nparts, size_t nparams)
{
    unsigned char len8[8], digest[32];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    if (write_all(fd, len8, 8) < 0 || write_all(fd, hdr, hlen) < 0)
        return rumor_err_sys(RUMOR_EIO, "%s: write failed", tmp);
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof digest);
    for (int i = 0; i < nparts; i++) {
        crypto_generichash_update(&st, (const unsigned char *)parts[i], nparams * sizeof(float));
        if (write_all(fd, parts[i], nparams * sizeof(float)) < 0)
            return rumor_err_sys(RUMOR_EIO, "%s: write failed", tmp);
    }
    crypto_generichash_final(&st, digest, sizeof digest);
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    memcpy(hdr + digest_at, hex, 64);
    if (pwrite(fd, hdr + digest_at, 64, (off_t)(8 + digest_at)) != 64)
        return rumor_err_sys(RUMOR_EIO, "%s: write of the digest failed", tmp);
    if (fsync(fd) < 0)
        return rumor_err_sys(RUMOR_EIO, "%s: fsync failed", tmp);
    return 0;
}

/* The pid in the name of a temp file of prefix pre,
 * ".<pre><round>.<pid>.<n>.tmp", or -1 when name is not one. */
static long temp_pid(const char *name, const char *pre)
{
    size_t pl = strlen(pre);
    if (name[0] != '.' || strncmp(name + 1, pre, pl))
        return -1;
    const char *p = name + 1 + pl;
    for (int i = 0; i < 12; i++)
        if (p[i] < '0' || p[i] > '9')
            return -1;
    p += 12;
    if (*p++ != '.' || *p < '1' || *p > '9')
        return -1;
    long pid = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((pid = pid * 10 + (*p - '0')) > INT_MAX)
            return -1;
    if (*p++ != '.' || *p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    return strcmp(p, ".tmp") ? -1 : pid;
}

/* Removes this swarm and rank's stale temp files and all but `keep` of its
 * checkpoints (always keeping `written`). A temp file is stale when the
 * process that writes it is gone from this machine (killed mid-write): one
 * of a live process may be in use. Other ranks' files are left alone.
 * Failures only warn: the new checkpoint is committed. */
static void prune(const char *dir, const char *swarm, int rank, const char *pre,
                  const char *written, int keep)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            long pid = temp_pid(e->d_name, pre);
            if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                continue;
            if (unlinkat(dirfd(d), e->d_name, 0) < 0 && errno != ENOENT)
                rumor_warn("%s/%s: cannot remove stale temp file: %s", dir, e->d_name,
                           strerror(errno));
        }
        closedir(d);
    }
    char **paths;
    int n, kept = 1;
    if (rumor_ckpt_list(dir, swarm, rank, &paths, &n) < 0) {
        rumor_warn("%s: cannot list old checkpoints: %s", dir, rumor_err_msg());
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!strcmp(paths[i], written))
            continue;
        if (kept < keep)
            kept++;
        else if (unlink(paths[i]) < 0 && errno != ENOENT)
            rumor_warn("%s: cannot remove old checkpoint: %s", paths[i], strerror(errno));
    }
    rumor_ckpt_list_free(&paths, n);
}

int rumor_ckpt_save(const char *dir, const rumor_stage_t *st, const rumor_optim_t *o,
                    const rumor_ckpt_info_t *info, int keep)
{
    if (!dir || !*dir || !st || !info || keep < 1 || info->rank < 0)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint save: bad argument (keep must be >= 1, "
                             "rank >= 0)");
    if (info->round < 0 || info->round > CKPT_MAX_ROUND)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint save: round %ld out of range", info->round);
    const rumor_model_t *m = st->model;
    if (st->lo != 0 || st->n != m->nparams)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint save: the stage holds [%zu, %zu) of %zu "
                             "parameters; checkpoints hold the whole space", st->lo, st->hi,
                             m->nparams);
    if (o && o->n != m->nparams)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint save: optimizer has %zu values, model %zu",
                             o->n, m->nparams);
    if (sodium_init() < 0)
        return rumor_err_set(RUMOR_ESYS, "checkpoint save: libsodium failed to initialize");
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot create checkpoint directory", dir);

    int with_v = o && o->cfg.kind == RUMOR_OPT_ADAMW;
    struct ckpt_tensor *t = NULL;
    int nt, nparts = 0, fd = -1, rc;
    uint64_t total;
    char *hdr = NULL, tmp[4096], final[4096];
    size_t hlen = 0, digest_at = 0;
    const float *parts[3];
    float *owned[3] = { NULL, NULL, NULL };
    tmp[0] = '\0';
    RUMOR_CHECK_GOTO(ckpt_layout(m, o != NULL, with_v, &t, &nt, &total), rc, out);
    RUMOR_CHECK_GOTO(host_view(st->dev, st->params, m->nparams, &parts[0], &owned[0]), rc, out);
    nparts = 1;
    if (o) {
        RUMOR_CHECK_GOTO(host_view(o->dev, o->m, o->n, &parts[1], &owned[1]), rc, out);
        nparts = 2;
    }
    if (with_v) {
        RUMOR_CHECK_GOTO(host_view(o->dev, o->v, o->n, &parts[2], &owned[2]), rc, out);
        nparts = 3;
    }
    RUMOR_CHECK_GOTO(build_header(m, o, info, t, nt, &hdr, &hlen, &digest_at), rc, out);

    char pre[128], name[160];
    RUMOR_CHECK_GOTO(ckpt_prefix(info->swarm, info->rank, pre, sizeof pre), rc, out);
    RUMOR_CHECK_GOTO(rumor_ckpt_filename(info->swarm, info->rank, info->round, name, sizeof name),
                     rc, out);
    if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, name) >= sizeof final) {
        rc = rumor_err_set(RUMOR_EINVAL, "%s: checkpoint directory name too long", dir);
        goto out;
    }
    for (unsigned i = 0; fd < 0; i++) {
        snprintf(tmp, sizeof tmp, "%s/.%s%012ld.%ld.%u.tmp", dir, pre, info->round,
                 (long)getpid(), i);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && (errno != EEXIST || i >= 100)) {
            rc = rumor_err_sys(RUMOR_ESYS, "%s: cannot create temp file", tmp);
            tmp[0] = '\0';
            goto out;
        }
    }
    rc = write_file(fd, tmp, hdr, hlen, digest_at, parts, nparts, m->nparams);
    if (close(fd) < 0 && rc == 0)
        rc = rumor_err_sys(RUMOR_EIO, "%s: close failed", tmp);
    fd = -1;
    if (rc < 0)
        goto out;
    if (rename(tmp, final) < 0) {
        rc = rumor_err_sys(RUMOR_ESYS, "%s: cannot rename to %s", tmp, final);
        goto out;
    }
    tmp[0] = '\0';
    RUMOR_CHECK_GOTO(fsync_dir(dir), rc, out);
    prune(dir, info->swarm, info->rank, pre, final, keep);
out:
    if (fd >= 0)
        close(fd);
    if (tmp[0])
        unlink(tmp);
    for (int i = 0; i < 3; i++)
        free(owned[i]);
    free(hdr);
    free(t);
    return rc;
}


/* The round of the file name of a checkpoint of prefix pre, or -1 when
 * name is not one. */
static long name_round(const char *name, const char *pre)
{
    size_t pl = strlen(pre);
    if (strlen(name) != pl + 12 + strlen(CKPT_SUFFIX) || strncmp(name, pre, pl) ||
        strcmp(name + pl + 12, CKPT_SUFFIX))
        return -1;
    long r = 0;
    for (size_t i = pl; i < pl + 12; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        r = r * 10 + (name[i] - '0');
    }
    return r;
}

static int cmp_desc(const void *a, const void *b)
{
    return strcmp(*(char *const *)b, *(char *const *)a);
}

int rumor_ckpt_list(const char *dir, const char *swarm, int rank, char ***paths, int *n)
{
    char pre[128];
    *paths = NULL;
    *n = 0;
    RUMOR_CHECK(ckpt_prefix(swarm, rank, pre, sizeof pre));
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : rumor_err_sys(RUMOR_ESYS, "%s: cannot list checkpoints", dir);
    char **v = NULL;
    int cnt = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (name_round(e->d_name, pre) < 0)
            continue;
        if (cnt == cap) {
            char **nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *v);
            if (!nv) {
                rc = rumor_err_set(RUMOR_ENOMEM, "%s: out of memory listing checkpoints", dir);
                break;
            }
            v = nv;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(v[cnt] = malloc(len))) {
            rc = rumor_err_set(RUMOR_ENOMEM, "%s: out of memory listing checkpoints", dir);
            break;
        }
        snprintf(v[cnt++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (rc < 0) {
        rumor_ckpt_list_free(&v, cnt);
        return rc;
    }
    /* Same directory prefix and fixed-width names: string order is round order. */
    if (cnt > 1)
        qsort(v, (size_t)cnt, sizeof *v, cmp_desc);
    *paths = v;
    *n = cnt;
    return 0;
}

void rumor_ckpt_list_free(char ***paths, int n)
{
    if (!paths || !*paths)
        return;
    for (int i = 0; i < n; i++)
        free((*paths)[i]);
    free(*paths);
    *paths = NULL;
}

int rumor_ckpt_load_latest(const char *dir, const char *swarm, int rank, rumor_stage_t *m,
                           rumor_optim_t *o, rumor_ckpt_info_t *info, char *path_out,
                           size_t path_len)
{
    char **paths, last[512] = "";
    int n;
    if (!dir || !m)
        return rumor_err_set(RUMOR_EINVAL, "checkpoint load: bad argument");
    RUMOR_CHECK(rumor_ckpt_list(dir, swarm, rank, &paths, &n));
    for (int i = 0; i < n; i++) {
        /* The name ends in <round, 12 digits>.safetensors (listed so). */
        size_t len = strlen(paths[i]);
        struct ckpt_owner own = { swarm, rank,
                                  strtol(paths[i] + len - strlen(CKPT_SUFFIX) - 12, NULL, 10) };
        if (ckpt_load_owned(paths[i], &own, m, o, info) == 0) {
            if (path_out && path_len)
                snprintf(path_out, path_len, "%s", paths[i]);
            rumor_ckpt_list_free(&paths, n);
            return 0;
        }
        snprintf(last, sizeof last, "%s", rumor_err_msg());
        rumor_warn("%s; %s", last, i + 1 < n ? "trying an older checkpoint" : "none left");
    }
    rumor_ckpt_list_free(&paths, n);
    if (n == 0)
        rumor_err_set(RUMOR_EIO, "%s: no checkpoint of rank %d", dir, rank);
    else
        rumor_err_set(RUMOR_EIO, "%s: none of rank %d's %d checkpoints loads (last: %s)", dir,
                      rank, n, last);
    return RUMOR_CKPT_NONE;
}
