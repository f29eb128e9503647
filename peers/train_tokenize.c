/* rumor-train tokenize: text files in, llm.c token shards out (src/bpe.h,
 * src/text.h's format). Each file is mapped, cut into blocks at places
 * where GPT-2's pieces cannot straddle (after a newline between two
 * printable ASCII characters), and the blocks are encoded by as many
 * threads as asked, written in order. The last --val-fraction of each
 * file's bytes (cut the same way) is validation. Shards are written under
 * a temporary name and renamed when whole: an interrupted run leaves no
 * shard that looks complete. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpe.h"
#include "log.h"
#include "options.h"
#include "train_cmds.h"

#define SHARD_MAGIC 20240520
#define BLOCK (4u << 20) /* bytes a thread encodes at once */

static const char usage[] =
    "Usage: rumor-train tokenize FILE... --tokenizer gpt2:DIR --out DIR [options]\n"
    "       rumor-train tokenize FILE... --train-bpe V --out DIR [options]\n"
    "Encode text files with a byte-level BPE into llm.c token shards, which\n"
    "--data tokens:DIR reads: DIR/val_000000.bin, ... (the last --val-fraction of\n"
    "each file) and DIR/train_000000.bin, ... (the rest), each a header of 256\n"
    "int32 (20240520, 1, the token count) and the tokens as uint16; the\n"
    "tokenizer's two files go to DIR/tokenizer, and a model trained on tokens:DIR\n"
    "records it in its checkpoints (sample decodes with it, eval gives bits per\n"
    "byte, export writes it for Hugging Face).\n"
    "\n"
    "  --tokenizer gpt2:DIR   the BPE of DIR/encoder.json and DIR/vocab.bpe (GPT-2's\n"
    "                         own: ./bootstrap fetches them to build/tokenizers/gpt2)\n"
    "  --train-bpe V          instead: train a byte-level BPE of V tokens (257..65536,\n"
    "                         <|endoftext|> among them) on the files' training parts,\n"
    "                         save it in GPT-2's two files in DIR/tokenizer, and\n"
    "                         encode the files with it\n"
    "  --out DIR              where the shards go (created; it must hold no shards)\n"
    "  --shard-tokens N       tokens a shard at most, 1024..2^31 (default 100000000)\n"
    "  --val-fraction F       the share of each file's bytes for validation, 0..0.5\n"
    "                         (default 0.1)\n"
    "  --threads T            encoding threads (default: the cores)\n"
    "  --progress S           seconds between progress lines on stderr (default 1;\n"
    "                         0: none)\n"
    "\n"
    "Exit status: 0 on success, 1 on a runtime error (a file that cannot be read,\n"
    "a bad tokenizer), 2 on bad usage.\n"
    "\n"
    "Examples:\n"
    "  rumor-train tokenize build/corpus/kjv.txt --tokenizer gpt2:build/tokenizers/gpt2 \\\n"
    "      --out kjv-gpt2\n"
    "  rumor-train tokenize build/corpus/kjv.txt --train-bpe 4096 --out kjv-4k\n";

struct tok_opts {
    const char *tokenizer, *out;
    int train_bpe;
    long shard_tokens;
    double val_fraction, progress;
    int threads;
};

static const rumor_opt_t table[] = {
    { "tokenizer", 0, RUMOR_OPT_PATHS, offsetof(struct tok_opts, tokenizer), 0, 0, "gpt2:", 0 },
    { "out", 0, RUMOR_OPT_PATH, offsetof(struct tok_opts, out), 0, 0, NULL, 0 },
    { "train-bpe", 0, RUMOR_OPT_INT, offsetof(struct tok_opts, train_bpe), 257, 65536, NULL, 0 },
    { "shard-tokens", 0, RUMOR_OPT_LONG, offsetof(struct tok_opts, shard_tokens), 1024,
      2147483647.0, NULL, 0 },
    { "val-fraction", 0, RUMOR_OPT_DOUBLE, offsetof(struct tok_opts, val_fraction), 0, 0.5, NULL,
      0 },
    { "threads", 0, RUMOR_OPT_INT, offsetof(struct tok_opts, threads), 1, 1024, NULL, 0 },
    { "progress", 0, RUMOR_OPT_DOUBLE, offsetof(struct tok_opts, progress), 0, 86400, NULL, 0 },
    { NULL, 0, 0, 0, 0, 0, NULL, 0 },
};

/* One split's shards (val_ or train_). */
struct sink {
    const char *dir, *kind;
    long max;
    int index;
    FILE *f;
    char path[4200], tmp[4300];
    long in_shard;
    uint64_t total;
};

static int sink_close(struct sink *s)
{
    if (!s->f)
        return 0;
    int32_t hdr[3] = { SHARD_MAGIC, 1, (int32_t)s->in_shard };
    int bad = fseek(s->f, 0, SEEK_SET) != 0 || fwrite(hdr, sizeof hdr, 1, s->f) != 1;
    bad |= fclose(s->f) != 0;
    s->f = NULL;
    if (bad)
        return rumor_err_set(RUMOR_EIO, "%s: %s", s->tmp, strerror(errno));
    if (rename(s->tmp, s->path) < 0)
        return rumor_err_set(RUMOR_EIO, "%s: %s", s->path, strerror(errno));
    s->index++;
    return 0;
}

static int sink_put(struct sink *s, const uint16_t *ids, size_t n)
{
    while (n) {
        if (!s->f) {
            snprintf(s->path, sizeof s->path, "%s/%s_%06d.bin", s->dir, s->kind, s->index);
            snprintf(s->tmp, sizeof s->tmp, "%s.part", s->path);
            s->f = fopen(s->tmp, "wb");
            int32_t hdr[256] = { SHARD_MAGIC, 1, 0 };
            if (!s->f || fwrite(hdr, sizeof hdr, 1, s->f) != 1)
                return rumor_err_set(RUMOR_EIO, "%s: %s", s->tmp, strerror(errno));
            s->in_shard = 0;
        }
        size_t k = (size_t)(s->max - s->in_shard) < n ? (size_t)(s->max - s->in_shard) : n;
        if (fwrite(ids, sizeof *ids, k, s->f) != k)
            return rumor_err_set(RUMOR_EIO, "%s: %s", s->tmp, strerror(errno));
        s->in_shard += (long)k;
        s->total += k;
        ids += k;
        n -= k;
        if (s->in_shard == s->max)
            RUMOR_CHECK(sink_close(s));
    }
    return 0;
}

/* Where a block may end near `want` in t[lo, n): after a '\n' between two
 * printable ASCII characters (no piece runs over it: the newline is one
 * piece whatever follows), else n. */
static size_t cut(const uint8_t *t, size_t n, size_t want)
{
    for (size_t p = want; p + 1 < n; p++)
        if (t[p] == '\n' && p > 0 && t[p - 1] > ' ' && t[p - 1] < 0x7f && t[p + 1] > ' ' &&
            t[p + 1] < 0x7f)
            return p + 1;
    return n;
}

struct job {
    pthread_t th;
    int started;
    rumor_bpe_ctx_t *ctx;
    const char *text;
    size_t n;
    uint16_t *ids;
    size_t len, cap;
    int rc;
    char err[256];
};

static void *encode_job(void *arg)
{
    struct job *j = arg;
    j->len = 0;
    j->rc = rumor_bpe_encode(j->ctx, j->text, j->n, &j->ids, &j->len, &j->cap);
    if (j->rc < 0)
        snprintf(j->err, sizeof j->err, "%s", rumor_err_msg());
    return NULL;
}

struct progress {
    double t0, last, every;
    uint64_t bytes, total, tokens;
};

static void show(struct progress *pg, int force)
{
    double now = rumor_now();
    if (pg->every <= 0 || (!force && now - pg->last < pg->every))
        return;
    pg->last = now;
    double el = now - pg->t0, rate = el > 0 ? pg->bytes / el : 0;
    double eta = rate > 0 ? (pg->total - pg->bytes) / rate : 0;
    fprintf(stderr, "tokenize: %.1f of %.1f MB (%.0f%%), %.1f MB/s, %llu tokens, ETA %d:%02d\n",
            pg->bytes / 1e6, pg->total / 1e6, pg->total ? 100.0 * pg->bytes / pg->total : 100.0,
            rate / 1e6, (unsigned long long)pg->tokens, (int)(eta / 60), (int)eta % 60);
}

/* Encodes t[0, n) into s, T blocks at a time. */
static int encode_range(const uint8_t *t, size_t n, struct job *jobs, int T, struct sink *s,
                        struct progress *pg)
{
    size_t at = 0;
    while (at < n) {
        int k = 0;
        for (; k < T && at < n; k++) {
            size_t e = n - at > BLOCK ? cut(t, n, at + BLOCK) : n;
            jobs[k].text = (const char *)t + at;
            jobs[k].n = e - at;
            at = e;
        }
        for (int i = 0; i < k; i++)
            jobs[i].started = k > 1 && pthread_create(&jobs[i].th, NULL, encode_job, &jobs[i]) == 0;
        for (int i = 0; i < k; i++) {
            if (jobs[i].started)
                pthread_join(jobs[i].th, NULL);
            else
                encode_job(&jobs[i]);
        }
        for (int i = 0; i < k; i++) {
            if (jobs[i].rc < 0)
                return rumor_err_set(RUMOR_EINVAL, "%s", jobs[i].err);
            RUMOR_CHECK(sink_put(s, jobs[i].ids, jobs[i].len));
            pg->bytes += jobs[i].n;
            pg->tokens += jobs[i].len;
        }
        show(pg, 0);
    }
    return 0;
}

static int tokenize(const char **files, int nf, struct tok_opts *opt);

/* Maps a whole file read-only (*t NULL for an empty one). */
static int map_file(const char *path, const uint8_t **t, size_t *n)
{
    struct stat sb;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &sb) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return rumor_err_set(RUMOR_EIO, "%s: %s", path, strerror(e));
    }
    *n = (size_t)sb.st_size;
    *t = NULL;
    if (*n) {
        void *m = mmap(NULL, *n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return rumor_err_set(RUMOR_EIO, "%s: %s", path, strerror(e));
        }
        madvise(m, *n, MADV_SEQUENTIAL);
        *t = m;
    }
    close(fd);
    return 0;
}

/* DIR's two files into a new directory `to` */
static int copy_tokenizer(const char *dir, const char *to)
{
    if (mkdir(to, 0755) < 0 && errno != EEXIST)
        return rumor_err_set(RUMOR_EIO, "%s: %s", to, strerror(errno));
    static const char *names[2] = { "encoder.json", "vocab.bpe" };
    for (int k = 0; k < 2; k++) {
        char a[4200], b[4300];
        snprintf(a, sizeof a, "%s/%s", dir, names[k]);
        snprintf(b, sizeof b, "%s/%s", to, names[k]);
        FILE *in = fopen(a, "rb");
        if (!in)
            return rumor_err_set(RUMOR_EIO, "%s: %s", a, strerror(errno));
        FILE *out = fopen(b, "wb");
        if (!out) {
            fclose(in);
            return rumor_err_set(RUMOR_EIO, "%s: %s", b, strerror(errno));
        }
        char buf[65536];
        size_t r;
        int bad = 0;
        while ((r = fread(buf, 1, sizeof buf, in)) > 0)
            bad |= fwrite(buf, 1, r, out) != r;
        bad |= ferror(in);
        fclose(in);
        if (fclose(out) != 0 || bad)
            return rumor_err_set(RUMOR_EIO, "copying %s to %s: %s", a, b, strerror(errno));
    }
    return 0;
}

/* Maps file `path`, and finds where its validation part begins (*split:
 * the last val_fraction of its bytes, from a place cut() allows) */
static int map_split(const char *path, double val_fraction, const uint8_t **t, size_t *n,
                     size_t *split)
{
    RUMOR_CHECK(map_file(path, t, n));
    *split = val_fraction > 0 ? cut(*t, *n, (size_t)((1 - val_fraction) * (double)*n)) : *n;
    return 0;
}

/* --train-bpe V: a BPE trained on the files' training parts, saved in dir */
static int train_bpe(const char **files, int nf, const struct tok_opts *o, const char *dir)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return rumor_err_set(RUMOR_EIO, "%s: %s", dir, strerror(errno));
    rumor_bpe_trainer_t *tr;
    RUMOR_CHECK(rumor_bpe_trainer_create(&tr));
    double t0 = rumor_now();
    uint64_t bytes = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < nf; i++) {
        const uint8_t *t;
        size_t n, split;
        rc = map_split(files[i], o->val_fraction, &t, &n, &split);
        if (rc < 0)
            break;
        rc = rumor_bpe_trainer_feed(tr, (const char *)t, split);
        bytes += split;
        if (t)
            munmap((void *)t, n);
    }
    int made = 0;
    if (rc == 0)
        rc = rumor_bpe_trainer_save(tr, o->train_bpe, dir, &made);
    rumor_bpe_trainer_free(&tr);
    if (rc == 0)
        printf("tokenize: trained a BPE of %d tokens (%d asked) on %.1f MB in %.1f s: %s\n", made,
               o->train_bpe, bytes / 1e6, rumor_now() - t0, dir);
    return rc;
}

int rumor_train_tokenize_cmd(int argc, char **argv)
{
    const char *prog = "rumor-train tokenize";
    int nf = 0;
    while (1 + nf < argc && argv[1 + nf][0] != '-')
        nf++;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (nf == 0) {
        fprintf(stderr, "%s: expected text files first\n%s", prog, usage);
        return 2;
    }
    const char **files = malloc((size_t)nf * sizeof *files);
    if (!files) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (int i = 0; i < nf; i++)
        files[i] = argv[1 + i];
    struct tok_opts o = { .shard_tokens = 100000000, .val_fraction = 0.1, .progress = 1 };
    argv[nf] = argv[0]; /* the options after the files, parsed as a command line */
    int rc = rumor_opts_parse(prog, table, &o, argc - nf, argv + nf);
    if (rc == RUMOR_OPTS_HELP || rc != 0) {
        free(files);
        if (rc == RUMOR_OPTS_HELP)
            fputs(usage, stdout);
        return rc == RUMOR_OPTS_HELP || rc == RUMOR_OPTS_VERSION ? 0 : 2;
    }
    rc = tokenize(files, nf, &o);
    free(files);
    return rc;
}

static int tokenize(const char **files, int nf, struct tok_opts *opt)
{
    const char *prog = "rumor-train tokenize";
    struct tok_opts o = *opt;
    int rc;
    if (o.tokenizer && o.train_bpe) {
        fprintf(stderr, "%s: --tokenizer and --train-bpe: give one (a tokenizer to use, or one "
                        "to train)\nTry '%s --help' for more information.\n", prog, prog);
        return 2;
    }
    if (!o.train_bpe && (!o.tokenizer || strncmp(o.tokenizer, "gpt2:", 5) || !o.tokenizer[5])) {
        fprintf(stderr, "%s: --tokenizer gpt2:DIR is required (the directory of encoder.json "
                        "and vocab.bpe), or --train-bpe V\nTry '%s --help' for more "
                        "information.\n", prog, prog);
        return 2;
    }
    if (!o.out) {
        fprintf(stderr, "%s: --out DIR is required\nTry '%s --help' for more information.\n",
                prog, prog);
        return 2;
    }
    int T = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (T < 1)
        T = 1;
    /* the output: a directory with no shards in it (nothing saved is replaced) */
    char probe[4200];
    if (mkdir(o.out, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "%s: --out %s: %s\n", prog, o.out, strerror(errno));
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        snprintf(probe, sizeof probe, "%s/%s_000000.bin", o.out, k ? "train" : "val");
        if (access(probe, F_OK) == 0) {
            fprintf(stderr, "%s: --out %s holds shards already (%s): give an empty directory\n",
                    prog, o.out, probe);
            return 1;
        }
    }
    char tdir[4200];
    if (o.train_bpe) {
        snprintf(tdir, sizeof tdir, "%s/tokenizer", o.out);
        if (train_bpe(files, nf, &o, tdir) < 0) {
            fprintf(stderr, "%s: --train-bpe %d: %s\n", prog, o.train_bpe, rumor_err_msg());
            return 1;
        }
    } else {
        /* the shards carry their tokenizer: DIR/tokenizer, which --data
         * tokens:DIR hands to the checkpoints */
        snprintf(tdir, sizeof tdir, "%s/tokenizer", o.out);
        if (copy_tokenizer(o.tokenizer + 5, tdir) < 0) {
            fprintf(stderr, "%s: --tokenizer %s: %s\n", prog, o.tokenizer, rumor_err_msg());
            return 1;
        }
    }
    rumor_bpe_t *bpe = NULL;
    if (rumor_bpe_load_dir(tdir, &bpe) < 0) {
        fprintf(stderr, "%s: tokenizer %s: %s\n", prog, tdir, rumor_err_msg());
        return 1;
    }
    struct job *jobs = calloc((size_t)T, sizeof *jobs);
    int ok = jobs != NULL;
    for (int i = 0; ok && i < T; i++)
        ok = rumor_bpe_ctx_create(bpe, &jobs[i].ctx) == 0;
    struct progress pg = { .t0 = rumor_now(), .every = o.progress };
    struct sink val = { .dir = o.out, .kind = "val", .max = o.shard_tokens };
    struct sink train = { .dir = o.out, .kind = "train", .max = o.shard_tokens };
    struct stat sb;
    rc = ok ? 0 : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < nf; i++) { /* every file readable before any shard */
        if (access(files[i], R_OK) < 0 || stat(files[i], &sb) < 0)
            rc = rumor_err_set(RUMOR_EIO, "%s: %s", files[i], strerror(errno));
        else if (!S_ISREG(sb.st_mode))
            rc = rumor_err_set(RUMOR_EINVAL, "%s: not a regular file", files[i]);
        else
            pg.total += (uint64_t)sb.st_size;
    }
    for (int i = 0; rc == 0 && i < nf; i++) {
        const uint8_t *t;
        size_t n, split;
        rc = map_split(files[i], o.val_fraction, &t, &n, &split);
        if (rc < 0)
            break;
        rc = encode_range(t, split, jobs, T, &train, &pg);
        if (rc == 0)
            rc = encode_range(t + split, n - split, jobs, T, &val, &pg);
        if (t)
            munmap((void *)t, n);
    }
    if (rc == 0)
        rc = sink_close(&train);
    if (rc == 0)
        rc = sink_close(&val);
    for (int i = 0; jobs && i < T; i++) {
        rumor_bpe_ctx_free(&jobs[i].ctx);
        free(jobs[i].ids);
    }
    free(jobs);
    rumor_bpe_free(&bpe);
    if (rc < 0) {
        if (train.f) {
            fclose(train.f);
            unlink(train.tmp);
        }
        if (val.f) {
            fclose(val.f);
            unlink(val.tmp);
        }
        fprintf(stderr, "%s: %s\n", prog, rumor_err_msg());
        return 1;
    }
    show(&pg, 1);
    double el = rumor_now() - pg.t0;
    printf("tokenize: %d file%s, %.1f MB -> %llu train tokens in %d shard%s, %llu validation "
           "tokens in %d shard%s (%.2f bytes a token), %.1f MB/s with %d thread%s, in %s\n",
           nf, nf == 1 ? "" : "s", pg.bytes / 1e6, (unsigned long long)train.total, train.index,
           train.index == 1 ? "" : "s", (unsigned long long)val.total, val.index,
           val.index == 1 ? "" : "s", pg.tokens ? (double)pg.bytes / pg.tokens : 0,
           el > 0 ? pg.bytes / el / 1e6 : 0, T, T == 1 ? "" : "s", o.out);
    return 0;
}
