/* Training a byte-level BPE (bpe.h): the text is cut into GPT-2's pieces,
 * the distinct pieces counted; then, until the vocabulary is full, the most
 * frequent adjacent pair of tokens over all pieces (weighted by their
 * counts; on a tie the pair of lower ids) becomes a token, and every piece
 * that holds it is rewritten. A pair whose bytes are a token already is
 * passed over (the encoder merges it anyway). Ids: the 256 bytes in GPT-2's
 * order, the merges in theirs, <|endoftext|> last. */
#include "bpe.h"
#include "bpe_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct word {
    uint32_t at, n;   /* its tokens in the symbol pool */
    uint64_t count;
};

struct rumor_bpe_trainer {
    /* distinct pieces: open addressing over their bytes */
    uint8_t *bytes;
    size_t nbytes, capbytes;
    struct { uint64_t h; uint32_t off, len; uint64_t count; } *slot;
    size_t nslot, used;
    uint64_t pieces;
};

int rumor_bpe_trainer_create(rumor_bpe_trainer_t **out)
{
    rumor_bpe_trainer_t *t = calloc(1, sizeof *t);
    if (t) {
        t->nslot = 1 << 16;
        t->slot = calloc(t->nslot, sizeof *t->slot);
    }
    if (!t || !t->slot) {
        free(t);
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    *out = t;
    return 0;
}

void rumor_bpe_trainer_free(rumor_bpe_trainer_t **tp)
{
    if (!*tp)
        return;
    free((*tp)->bytes);
    free((*tp)->slot);
    free(*tp);
    *tp = NULL;
}

static int grow(rumor_bpe_trainer_t *t)
{
    size_t nn = 2 * t->nslot;
    __typeof__(t->slot) ns = calloc(nn, sizeof *ns);
    if (!ns)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory for pieces");
    for (size_t i = 0; i < t->nslot; i++)
        if (t->slot[i].count)
            for (size_t j = t->slot[i].h & (nn - 1);; j = (j + 1) & (nn - 1))
                if (!ns[j].count) {
                    ns[j] = t->slot[i];
                    break;
                }
    free(t->slot);
    t->slot = ns;
    t->nslot = nn;
    return 0;
}

static int add_piece(rumor_bpe_trainer_t *t, const uint8_t *p, size_t n)
{
    uint64_t h = rumor_bpe_hash(p, n);
    size_t j = h & (t->nslot - 1);
    for (;; j = (j + 1) & (t->nslot - 1)) {
        if (!t->slot[j].count)
            break;
        if (t->slot[j].h == h && t->slot[j].len == n && !memcmp(t->bytes + t->slot[j].off, p, n)) {
            t->slot[j].count++;
            return 0;
        }
    }
    if (t->nbytes + n > t->capbytes) {
        size_t nc = t->capbytes ? 2 * t->capbytes : 1 << 20;
        while (nc < t->nbytes + n)
            nc *= 2;
        uint8_t *nb = realloc(t->bytes, nc);
        if (!nb)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory for pieces");
        t->bytes = nb;
        t->capbytes = nc;
    }
    if (t->nbytes + n > UINT32_MAX)
        return rumor_err_set(RUMOR_EINVAL, "more than 4 GB of distinct pieces");
    memcpy(t->bytes + t->nbytes, p, n);
    t->slot[j].h = h;
    t->slot[j].off = (uint32_t)t->nbytes;
    t->slot[j].len = (uint32_t)n;
    t->slot[j].count = 1;
    t->nbytes += n;
    if (++t->used * 2 > t->nslot)
        RUMOR_CHECK(grow(t));
    return 0;
}

int rumor_bpe_trainer_feed(rumor_bpe_trainer_t *t, const char *text, size_t n)
{
    const uint8_t *p = (const uint8_t *)text;
    for (size_t at = 0; at < n;) {
        size_t e = rumor_bpe_piece_end(p, n, at);
        RUMOR_CHECK(add_piece(t, p + at, e - at));
        t->pieces++;
        at = e;
    }
    return 0;
}

/* ------------------------------------------------------------ merging */

struct tokens {                 /* id -> bytes, and bytes -> id */
    uint8_t *pool;
    uint32_t *off, *len;
    int n;
    int32_t *h;                 /* (hcap) ids, -1 empty */
    uint32_t hmask;
};

static int tok_find(const struct tokens *k, const uint8_t *p, size_t n)
{
    for (uint64_t i = rumor_bpe_hash(p, n) & k->hmask;; i = (i + 1) & k->hmask) {
        int id = k->h[i];
        if (id < 0)
            return -1;
        if (k->len[id] == n && !memcmp(k->pool + k->off[id], p, n))
            return id;
    }
}

static void tok_add(struct tokens *k, const uint8_t *p, size_t n, size_t at)
{
    int id = k->n++;
    memmove(k->pool + at, p, n);
    k->off[id] = (uint32_t)at;
    k->len[id] = (uint32_t)n;
    for (uint64_t i = rumor_bpe_hash(p, n) & k->hmask;; i = (i + 1) & k->hmask)
        if (k->h[i] < 0) {
            k->h[i] = id;
            return;
        }
}

/* pair counts: open addressing on (a << 32 | b); idx lists the slots in
 * use, so that a round clears and scans only those */
struct pairs {
    uint64_t *key, *count;
    size_t *idx;
    size_t cap, used;
};

static void pair_add(struct pairs *pc, uint64_t key, uint64_t c)
{
    size_t m = pc->cap - 1;
    for (size_t i = (key * 0x9E3779B97F4A7C15ULL) >> 20 & m;; i = (i + 1) & m) {
        if (pc->count[i] == 0) {
            pc->key[i] = key;
            pc->count[i] = c;
            pc->idx[pc->used++] = i;
            return;
        }
        if (pc->key[i] == key) {
            pc->count[i] += c;
            return;
        }
    }
}

static void write_mapped(FILE *f, const uint8_t *p, size_t n, const uint32_t *cp_of, int json)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp_of[p[i]];
        if (json && (c == '"' || c == '\\'))
            fprintf(f, "\\%c", (int)c);
        else if (c < 0x80)
            fputc((int)c, f);
        else
            fprintf(f, "%c%c", (int)(0xC0 | (c >> 6)), (int)(0x80 | (c & 0x3F)));
    }
}

static int create_in(const char *dir, const char *name, char *path, size_t cap, FILE **f)
{
    snprintf(path, cap, "%s/%s", dir, name);
    *f = fopen(path, "w");
    return *f ? 0 : rumor_err_set(RUMOR_EIO, "%s: %s", path, strerror(errno));
}

static int close_out(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return rumor_err_set(RUMOR_EIO, "%s: %s", path, strerror(errno));
    return 0;
}

int rumor_bpe_trainer_save(rumor_bpe_trainer_t *t, int V, const char *dir, int *made)
{
    if (V < 257 || V > 65536)
        return rumor_err_set(RUMOR_EINVAL, "a vocabulary of %d: expected 257 to 65536", V);
    uint32_t cp_of[256];
    rumor_bpe_byte_map(cp_of);
    size_t nw = 0;
    for (size_t i = 0; i < t->nslot; i++)
        nw += t->slot[i].count > 0;
    struct word *w = calloc(nw ? nw : 1, sizeof *w);
    uint16_t *sym = malloc((t->nbytes ? t->nbytes : 1) * sizeof *sym);
    struct tokens k = { 0 };
    size_t pool_cap = 256 + (size_t)V * 64;
    k.pool = malloc(pool_cap);
    k.off = calloc((size_t)V, sizeof *k.off);
    k.len = calloc((size_t)V, sizeof *k.len);
    uint32_t hc = 1;
    while (hc < 2u * (uint32_t)V)
        hc <<= 1;
    k.hmask = hc - 1;
    k.h = malloc(hc * sizeof *k.h);
    struct pairs pc = { 0 };
    pc.cap = 1;
    while (pc.cap < 4 * (t->nbytes + 16))
        pc.cap <<= 1;
    pc.key = malloc(pc.cap * sizeof *pc.key);
    pc.count = calloc(pc.cap, sizeof *pc.count);
    pc.idx = malloc(pc.cap * sizeof *pc.idx);
    uint64_t *banned = calloc(1024, sizeof *banned);
    size_t nbanned = 0, capbanned = 1024;
    int (*mleft)[2] = malloc((size_t)V * sizeof *mleft);
    int rc = 0;
    if (!w || !sym || !k.pool || !k.off || !k.len || !k.h || !pc.key || !pc.count || !pc.idx || !banned ||
        !mleft)
        rc = rumor_err_set(RUMOR_ENOMEM, "out of memory for the BPE's training");
    size_t pool_used = 0;
    if (rc == 0) {
        memset(k.h, 0xff, hc * sizeof *k.h);
        /* the bytes, in GPT-2's order: the printable ones, then the rest */
        for (int pass = 0; pass < 2; pass++)
            for (int c = 0; c < 256; c++)
                if ((cp_of[c] == (uint32_t)c) == (pass == 0)) {
                    uint8_t b = (uint8_t)c;
                    tok_add(&k, &b, 1, pool_used++);
                }
        size_t at = 0, j = 0;
        for (size_t i = 0; i < t->nslot; i++) {
            if (!t->slot[i].count)
                continue;
            w[j].at = (uint32_t)at;
            w[j].n = t->slot[i].len;
            w[j].count = t->slot[i].count;
            for (uint32_t q = 0; q < t->slot[i].len; q++)
                sym[at++] = (uint16_t)tok_find(&k, t->bytes + t->slot[i].off + q, 1);
            j++;
        }
    }
    int nmerge = 0;
    while (rc == 0 && k.n < V - 1) {
        for (size_t i = 0; i < pc.used; i++)
            pc.count[pc.idx[i]] = 0;
        pc.used = 0;
        for (size_t i = 0; i < nw; i++)
            for (uint32_t q = 0; q + 1 < w[i].n; q++)
                pair_add(&pc, (uint64_t)sym[w[i].at + q] << 32 | sym[w[i].at + q + 1], w[i].count);
        uint64_t best = 0, bc = 0;
        for (size_t u = 0; u < pc.used; u++) {
            size_t i = pc.idx[u];
            if (pc.count[i] < 2 || pc.count[i] < bc || (pc.count[i] == bc && pc.key[i] > best))
                continue;
            int skip = 0;
            for (size_t q = 0; q < nbanned && !skip; q++)
                skip = banned[q] == pc.key[i];
            if (!skip)
                best = pc.key[i], bc = pc.count[i];
        }
        if (bc == 0)
            break; /* no pair twice: the text has no more to give */
        int a = (int)(best >> 32), b = (int)(best & 0xffffffffu);
        size_t la = k.len[a], lb = k.len[b];
        int ban = la + lb > 4096; /* the loader's longest token */
        if (!ban && pool_used + la + lb > pool_cap) {
            uint8_t *np = realloc(k.pool, 2 * pool_cap);
            if (!np) {
                rc = rumor_err_set(RUMOR_ENOMEM, "out of memory for tokens");
                break;
            }
            k.pool = np;
            pool_cap *= 2;
        }
        uint8_t *cat = k.pool + pool_used; /* the new token's bytes, in place */
        if (!ban) {
            memmove(cat, k.pool + k.off[a], la);
            memmove(cat + la, k.pool + k.off[b], lb);
            ban = tok_find(&k, cat, la + lb) >= 0; /* made already by another pair */
        }
        if (ban) {
            if (nbanned == capbanned) {
                uint64_t *nb = realloc(banned, 2 * capbanned * sizeof *nb);
                if (!nb) {
                    rc = rumor_err_set(RUMOR_ENOMEM, "out of memory");
                    break;
                }
                banned = nb;
                capbanned *= 2;
            }
            banned[nbanned++] = best;
            continue;
        }
        int id = k.n;
        tok_add(&k, cat, la + lb, pool_used); /* cat is at pool_used already */
        pool_used += la + lb;
        mleft[nmerge][0] = a;
        mleft[nmerge][1] = b;
        nmerge++;
        for (size_t i = 0; i < nw; i++) { /* rewrite the pieces that hold it */
            uint16_t *s = sym + w[i].at;
            uint32_t o = 0;
            for (uint32_t q = 0; q < w[i].n; q++) {
                if (q + 1 < w[i].n && s[q] == a && s[q + 1] == b) {
                    s[o++] = (uint16_t)id;
                    q++;
                } else {
                    s[o++] = s[q];
                }
            }
            w[i].n = o;
        }
    }
    /* the two files */
    char path[4200];
    FILE *f = NULL;
    if (rc == 0)
        rc = create_in(dir, "encoder.json", path, sizeof path, &f);
    if (rc == 0) {
        fputc('{', f);
        for (int id = 0; id < k.n; id++) {
            fputs(id ? ", \"" : "\"", f);
            write_mapped(f, k.pool + k.off[id], k.len[id], cp_of, 1);
            fprintf(f, "\": %d", id);
        }
        fprintf(f, ", \"<|endoftext|>\": %d}", k.n);
        rc = close_out(f, path);
    }
    if (rc == 0)
        rc = create_in(dir, "vocab.bpe", path, sizeof path, &f);
    if (rc == 0) {
        fputs("#version: 0.2\n", f);
        for (int m = 0; m < nmerge; m++) {
            write_mapped(f, k.pool + k.off[mleft[m][0]], k.len[mleft[m][0]], cp_of, 0);
            fputc(' ', f);
            write_mapped(f, k.pool + k.off[mleft[m][1]], k.len[mleft[m][1]], cp_of, 0);
            fputc('\n', f);
        }
        rc = close_out(f, path);
    }
    if (made)
        *made = k.n + 1;
    free(w);
    free(sym);
    free(k.pool);
    free(k.off);
    free(k.len);
    free(k.h);
    free(pc.key);
    free(pc.count);
    free(pc.idx);
    free(banned);
    free(mleft);
    return rc;
}
