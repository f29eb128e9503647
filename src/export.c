/* Hugging Face export (see export.h). */
#include "export.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes bytes to dir/name through dir/.name.tmp and a rename. */
static int put_file(const char *dir, const char *name, const void *a, size_t na, const void *b,
                    size_t nb)
{
    char tmp[4096], final[4096];
    if (snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= (int)sizeof tmp ||
        snprintf(final, sizeof final, "%s/%s", dir, name) >= (int)sizeof final)
        return rumor_err_set(RUMOR_EINVAL, "%s: path too long", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot create", tmp);
    int bad = write_all(fd, a, na) < 0 || (nb && write_all(fd, b, nb) < 0) || fsync(fd) < 0;
    if (close(fd) < 0)
        bad = 1;
    if (bad || rename(tmp, final) < 0) {
        int rc = rumor_err_sys(RUMOR_EIO, "%s: cannot write", final);
        unlink(tmp);
        return rc;
    }
    return 0;
}

int rumor_export_check_dir(const char *dir, int force)
{
    struct stat sb;
    if (!dir || !*dir)
        return rumor_err_set(RUMOR_EINVAL, "export: empty directory name");
    if (stat(dir, &sb) < 0) {
        if (errno != ENOENT)
            return rumor_err_sys(RUMOR_EINVAL, "%s: cannot be the export directory", dir);
        /* missing: its parent must take a new directory */
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        while (slash && slash > parent && slash[1] == '\0') { /* "out/" */
            *slash = '\0';
            slash = strrchr(parent, '/');
        }
        const char *up = !slash ? "." : slash == parent ? "/" : (*slash = '\0', parent);
        if (stat(up, &sb) < 0)
            return rumor_err_sys(RUMOR_EINVAL, "%s: cannot be created: %s", dir, up);
        if (!S_ISDIR(sb.st_mode))
            return rumor_err_set(RUMOR_EINVAL, "%s: cannot be created: %s is not a directory",
                                 dir, up);
        if (access(up, W_OK | X_OK) < 0)
            return rumor_err_sys(RUMOR_EINVAL, "%s: cannot be created in %s", dir, up);
        return 0;
    }
    if (!S_ISDIR(sb.st_mode))
        return rumor_err_set(RUMOR_EINVAL, "%s: not a directory (an export is a directory of "
                             "two files)", dir);
    if (access(dir, W_OK | X_OK) < 0)
        return rumor_err_sys(RUMOR_EINVAL, "%s: cannot write there", dir);
    if (force)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return rumor_err_sys(RUMOR_EINVAL, "%s: cannot read the directory", dir);
    int n = 0;
    char first[256] = "";
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !n++)
            snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (n)
        return rumor_err_set(RUMOR_EINVAL, "%s is not empty (it holds %s%s): an earlier export "
                             "would be replaced; give --force to write into it anyway, or name "
                             "a new directory", dir, first, n > 1 ? " and more" : "");
    return 0;
}

static int hf_config(const rumor_model_t *m, char **out)
{
    cJSON *c = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    if (arch)
        cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(c, "model_type", "gpt2");
    cJSON_AddNumberToObject(c, "vocab_size", m->vocab);
    cJSON_AddNumberToObject(c, "n_positions", m->ctx);
    cJSON_AddNumberToObject(c, "n_ctx", m->ctx);
    cJSON_AddNumberToObject(c, "n_embd", m->dim);
    cJSON_AddNumberToObject(c, "n_layer", m->layers);
    cJSON_AddNumberToObject(c, "n_head", m->heads);
    cJSON_AddNullToObject(c, "n_inner");
    cJSON_AddStringToObject(c, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(c, "layer_norm_epsilon", 1e-5);
    cJSON_AddNumberToObject(c, "resid_pdrop", m->dropout);
    cJSON_AddNumberToObject(c, "embd_pdrop", m->dropout);
    cJSON_AddNumberToObject(c, "attn_pdrop", 0.0);
    cJSON_AddNumberToObject(c, "initializer_range", 0.02);
    cJSON_AddTrueToObject(c, "tie_word_embeddings");
    cJSON_AddNumberToObject(c, "bos_token_id", m->vocab - 1);
    cJSON_AddNumberToObject(c, "eos_token_id", m->vocab - 1);
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
    cJSON_AddStringToObject(c, "rumor_model", m->spec);
    *out = cJSON_Print(c);
    cJSON_Delete(c);
    return *out ? 0 : rumor_err_set(RUMOR_ENOMEM, "export: out of memory");
}

int rumor_export_hf(const rumor_stage_t *st, const char *dir)
{
    const rumor_model_t *m = st->model;
    if (m->kind != RUMOR_MODEL_GPT)
        return rumor_err_set(RUMOR_EINVAL, "export: %s is not a GPT model", m->spec);
    if (st->lo != 0 || st->n != m->nparams)
        return rumor_err_set(RUMOR_EINVAL, "export: the stage does not hold the whole model");
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot create the export directory", dir);
    /* header: every tensor, data offsets in the order of the flat space */
    cJSON *h = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    for (int i = 0; i < m->ntensors; i++) {
        const rumor_tensor_t *t = &m->tensors[i];
        cJSON *e = cJSON_AddObjectToObject(h, t->name);
        cJSON_AddStringToObject(e, "dtype", "F32");
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber(t->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(t->off * 4)));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)((t->off + t->numel) * 4)));
    }
    char *json = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    float *host = malloc(m->nparams * sizeof(float));
    size_t jl = json ? strlen(json) : 0, padded = (jl + 7) & ~(size_t)7;
    char *head = json ? malloc(8 + padded) : NULL;
    int rc = 0;
    if (!json || !host || !head)
        rc = rumor_err_set(RUMOR_ENOMEM, "export: out of memory");
    if (rc == 0) {
        for (int i = 0; i < 8; i++)
            head[i] = (char)((uint64_t)padded >> (8 * i));
        memcpy(head + 8, json, jl);
        memset(head + 8 + jl, ' ', padded - jl);
        rc = rumor_stage_get_params(st, host);
    }
    if (rc == 0)
        rc = put_file(dir, "model.safetensors", head, 8 + padded, host,
                      m->nparams * sizeof(float));
    char *cfg = NULL;
    if (rc == 0)
        rc = hf_config(m, &cfg);
    if (rc == 0)
        rc = put_file(dir, "config.json", cfg, strlen(cfg), NULL, 0);
    free(cfg);
    free(json);
    free(head);
    free(host);
    return rc;
}

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        rumor_err_sys(RUMOR_EIO, "%s", path);
        return NULL;
    }
    char *buf = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
        fread(buf, 1, (size_t)len, f) == (size_t)len) {
        fclose(f);
        *n = (size_t)len;
        return buf;
    }
    free(buf);
    fclose(f);
    rumor_err_sys(RUMOR_EIO, "%s: cannot read", path);
    return NULL;
}

int rumor_export_tokenizer(const char *tokdir, const char *dir, int ctx)
{
    static const char *from[2] = { "encoder.json", "vocab.bpe" }, *to[2] = { "vocab.json",
                                                                             "merges.txt" };
    for (int k = 0; k < 2; k++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", tokdir, from[k]);
        size_t n;
        char *text = read_all(p, &n);
        if (!text)
            return rumor_err_code();
        int rc = put_file(dir, to[k], text, n, NULL, 0);
        free(text);
        RUMOR_CHECK(rc);
    }
    char cfg[512];
    int n = snprintf(cfg, sizeof cfg,
                     "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"model_max_length\": %d,\n"
                     "  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\",\n"
                     "  \"unk_token\": \"<|endoftext|>\",\n  \"add_prefix_space\": false\n}\n",
                     ctx);
    RUMOR_CHECK(put_file(dir, "tokenizer_config.json", cfg, (size_t)n, NULL, 0));
    static const char map[] = "{\n  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": "
                              "\"<|endoftext|>\",\n  \"unk_token\": \"<|endoftext|>\"\n}\n";
    return put_file(dir, "special_tokens_map.json", map, sizeof map - 1, NULL, 0);
}
