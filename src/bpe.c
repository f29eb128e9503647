/* Byte-level BPE (bpe.h): the two files, GPT-2's pre-tokenizer over ICU's
 * Unicode classes, and tiktoken's merge order. */
#include "bpe.h"
#include "bpe_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unistd.h>

#define BPE_MAX_VOCAB 65536
#define BPE_MAX_TOKEN 4096   /* bytes of the longest token */
#define BPE_CACHE 65536      /* pieces one context remembers (cleared when full) */
#define BPE_MAX_PIECE 1024   /* longer pieces (long runs) are not cached */

struct rumor_bpe {
    int V, nmerges;
    uint32_t *off, *len;   /* (V) token bytes in pool */
    uint8_t *pool;
    int32_t *rank;         /* (V) merge priority; -1 a byte, INT_MAX special */
    int byte_id[256];
    uint32_t hmask;
    int32_t *htab;         /* bytes -> id, open addressing, -1 empty */
};

struct cache_ent {
    uint64_t h;
    uint32_t at, n;        /* the piece's ids in cpool */
    uint32_t bat, plen;    /* its bytes in cbytes */
    int used;
};

struct hent;

struct rumor_bpe_ctx {
    const rumor_bpe_t *b;
    struct cache_ent *ce;  /* (BPE_CACHE x 2 slots) */
    uint16_t *cpool;
    uint8_t *cbytes;       /* the pieces' bytes, to tell collisions apart */
    size_t cpool_len, cpool_cap, cbytes_len, cbytes_cap, centries;
    uint32_t *nxt, *prv, *ver; /* merge scratch (scap each) */
    struct hent *heap;     /* (2 scap) */
    size_t scap;
};

/* ------------------------------------------------------------ bytes */

uint64_t rumor_bpe_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* GPT-2's byte-to-character map: byte b <-> code point cp_of[b] (bpe_int.h) */
void rumor_bpe_byte_map(uint32_t cp_of[256])
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of[b] = printable ? (uint32_t)b : 256u + (uint32_t)n++;
    }
}

/* UTF-8 text in the byte map -> bytes (out: at least strlen(s) bytes).
 * Returns the bytes, or -1 with *bad the code point (or 0xFFFFFFFF for
 * malformed UTF-8). */
static long unmap(const char *s, const int16_t *byte_of, uint8_t *out, uint32_t *bad)
{
    const uint8_t *p = (const uint8_t *)s;
    long n = 0;
    while (*p) {
        uint32_t cp;
        int k;
        if (p[0] < 0x80)
            cp = p[0], k = 1;
        else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80)
            cp = ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F), k = 2;
        else {
            *bad = 0xFFFFFFFFu;
            return -1;
        }
        if (cp >= 512 || byte_of[cp] < 0) {
            *bad = cp;
            return -1;
        }
        out[n++] = (uint8_t)byte_of[cp];
        p += k;
    }
    return n;
}

static int32_t lookup(const rumor_bpe_t *b, const uint8_t *p, size_t n)
{
    for (uint64_t i = rumor_bpe_hash(p, n) & b->hmask;; i = (i + 1) & b->hmask) {
        int32_t id = b->htab[i];
        if (id < 0)
            return -1;
        if (b->len[id] == n && memcmp(b->pool + b->off[id], p, n) == 0)
            return id;
    }
}

/* the merge priority of p[0..n) as one token, INT_MAX when it is none */
static int32_t rank_of(const rumor_bpe_t *b, const uint8_t *p, size_t n)
{
    int32_t id = lookup(b, p, n);
    return id < 0 || b->rank[id] < 0 ? INT_MAX : b->rank[id];
}

/* ------------------------------------------------------------ loading */

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        rumor_err_set(RUMOR_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (len < cap)
            break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) {
        rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    if (err) {
        free(buf);
        rumor_err_set(RUMOR_EIO, "%s: read error", path);
        return NULL;
    }
    buf[len] = '\0';
    *n = len;
    return buf;
}

static int load_encoder(rumor_bpe_t *b, const char *path, const int16_t *byte_of)
{
    size_t n;
    char *text = slurp(path, &n);
    if (!text)
        return rumor_err_code();
    const char *endp = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, n, &endp, 0);
    if (!j || !cJSON_IsObject(j)) {
        long at = endp ? (long)(endp - text) : -1;
        cJSON_Delete(j);
        free(text);
        return rumor_err_set(RUMOR_EINVAL, "%s: not a JSON object of tokens and ids (at byte "
                                           "%ld); is it GPT-2's encoder.json?", path, at);
    }
    int V = cJSON_GetArraySize(j);
    int rc = 0;
    if (V < 256 || V > BPE_MAX_VOCAB)
        rc = rumor_err_set(RUMOR_EINVAL, "%s: %d tokens; a byte-level BPE has 256 to %d", path, V,
                           BPE_MAX_VOCAB);
    b->V = V;
    b->off = calloc((size_t)V, sizeof *b->off);
    b->len = calloc((size_t)V, sizeof *b->len);
    b->rank = malloc((size_t)V * sizeof *b->rank);
    b->pool = malloc(n + 1);
    uint32_t hcap = 1;
    while (hcap < 2u * (uint32_t)(V > 0 ? V : 1))
        hcap <<= 1;
    b->hmask = hcap - 1;
    b->htab = malloc(hcap * sizeof *b->htab);
    uint8_t *seen = calloc((size_t)(V > 0 ? V : 1), 1);
    if (rc == 0 && (!b->off || !b->len || !b->rank || !b->pool || !b->htab || !seen))
        rc = rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
    if (rc == 0)
        memset(b->htab, 0xff, hcap * sizeof *b->htab);
    size_t used = 0;
    for (cJSON *e = j->child; rc == 0 && e; e = e->next) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        int id = (int)d;
        if (!cJSON_IsNumber(e) || d != (double)id || id < 0 || id >= V) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s: token \"%.40s\": id %s is not a whole number "
                                             "from 0 to %d", path, e->string,
                               cJSON_IsNumber(e) ? "" : "(not a number)", V - 1);
            break;
        }
        if (seen[id]) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s: id %d is given to two tokens (\"%.40s\" is "
                                             "the second)", path, id, e->string);
            break;
        }
        seen[id] = 1;
        uint32_t bad = 0;
        long k = unmap(e->string, byte_of, b->pool + used, &bad);
        if (k < 0) {
            rc = bad == 0xFFFFFFFFu
                     ? rumor_err_set(RUMOR_EINVAL, "%s: token %d is not in GPT-2's byte map "
                                                   "(malformed or wide UTF-8)", path, id)
                     : rumor_err_set(RUMOR_EINVAL, "%s: token %d has U+%04X, outside GPT-2's "
                                                   "byte map", path, id, bad);
            break;
        }
        if (k == 0 || k > BPE_MAX_TOKEN) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s: token %d is %ld bytes long (1 to %d)", path, id,
                               k, BPE_MAX_TOKEN);
            break;
        }
        b->off[id] = (uint32_t)used;
        b->len[id] = (uint32_t)k;
        used += (size_t)k;
        if (lookup(b, b->pool + b->off[id], (size_t)k) >= 0) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s: token %d's bytes are another token's too", path,
                               id);
            break;
        }
        for (uint64_t i = rumor_bpe_hash(b->pool + b->off[id], (size_t)k) & b->hmask;; i = (i + 1) & b->hmask)
            if (b->htab[i] < 0) {
                b->htab[i] = id;
                break;
            }
        b->rank[id] = INT_MAX; /* special until a byte or a merge says otherwise */
    }
    free(seen);
    cJSON_Delete(j);
    free(text);
    if (rc < 0)
        return rc;
    for (int c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        int id = lookup(b, &byte, 1);
        if (id < 0)
            return rumor_err_set(RUMOR_EINVAL, "%s: byte 0x%02x has no token: a byte-level BPE "
                                               "has all 256", path, c);
        b->byte_id[c] = id;
        b->rank[id] = -1;
    }
    return 0;
}

static int load_merges(rumor_bpe_t *b, const char *path, const int16_t *byte_of)
{
    size_t n;
    char *text = slurp(path, &n);
    if (!text)
        return rumor_err_code();
    uint8_t *buf = malloc(2 * BPE_MAX_TOKEN + 8);
    if (!buf) {
        free(text);
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
    }
    int rc = 0, line = 0;
    b->nmerges = 0;
    for (char *p = text, *nl; rc == 0 && *p; p = nl ? nl + 1 : p + strlen(p)) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        line++;
        size_t L = strlen(p);
        if (L && p[L - 1] == '\r')
            p[--L] = '\0';
        if (line == 1 && !strncmp(p, "#version", 8))
            continue;
        if (L == 0)
            continue;
        char *sp = strchr(p, ' ');
        if (!sp || sp == p || !sp[1] || strchr(sp + 1, ' ')) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s:%d: expected two tokens separated by one space, "
                                             "got \"%.60s\"", path, line, p);
            break;
        }
        *sp = '\0';
        if (strlen(p) > BPE_MAX_TOKEN || strlen(sp + 1) > BPE_MAX_TOKEN) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s:%d: a part longer than %d bytes", path, line,
                               BPE_MAX_TOKEN);
            break;
        }
        const char *part[2] = { p, sp + 1 };
        long k[2];
        int id[2];
        for (int s = 0; s < 2 && rc == 0; s++) {
            uint32_t bad = 0;
            k[s] = unmap(part[s], byte_of, buf + (s ? k[0] : 0), &bad);
            if (k[s] < 0) {
                rc = rumor_err_set(RUMOR_EINVAL, "%s:%d: \"%.60s\" is not in GPT-2's byte map",
                                   path, line, part[s]);
                break;
            }
            id[s] = lookup(b, buf + (s ? k[0] : 0), (size_t)k[s]);
            if (id[s] < 0 || b->rank[id[s]] == INT_MAX)
                rc = rumor_err_set(RUMOR_EINVAL, "%s:%d: \"%.60s\" is %s", path, line, part[s],
                                   id[s] < 0 ? "not a token of the encoder file"
                                             : "neither a byte nor the result of an earlier "
                                               "merge");
        }
        if (rc < 0)
            break;
        int m = lookup(b, buf, (size_t)(k[0] + k[1]));
        if (m < 0) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s:%d: the merge \"%s\" + \"%s\" makes no token of "
                                             "the encoder file", path, line, part[0], part[1]);
            break;
        }
        if (b->rank[m] == INT_MAX) /* a token made twice keeps its first rank */
            b->rank[m] = b->nmerges;
        b->nmerges++;
    }
    free(buf);
    free(text);
    return rc;
}

int rumor_bpe_load(const char *encoder_json, const char *vocab_bpe, rumor_bpe_t **out)
{
    *out = NULL;
    rumor_bpe_t *b = calloc(1, sizeof *b);
    if (!b)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    uint32_t cp_of[256];
    int16_t byte_of[512];
    rumor_bpe_byte_map(cp_of);
    memset(byte_of, 0xff, sizeof byte_of);
    for (int c = 0; c < 256; c++)
        byte_of[cp_of[c]] = (int16_t)c;
    int rc = load_encoder(b, encoder_json, byte_of);
    if (rc == 0)
        rc = load_merges(b, vocab_bpe, byte_of);
    if (rc < 0) {
        rumor_bpe_free(&b);
        return rc;
    }
    *out = b;
    return 0;
}

int rumor_bpe_load_dir(const char *dir, rumor_bpe_t **out)
{
    char e[4096], v[4096];
    snprintf(e, sizeof e, "%s/encoder.json", dir);
    snprintf(v, sizeof v, "%s/vocab.bpe", dir);
    return rumor_bpe_load(e, v, out);
}

void rumor_bpe_free(rumor_bpe_t **bp)
{
    rumor_bpe_t *b = *bp;
    if (!b)
        return;
    free(b->off);
    free(b->len);
    free(b->rank);
    free(b->pool);
    free(b->htab);
    free(b);
    *bp = NULL;
}

int rumor_bpe_digest_dir(const char *dir, char hex[65])
{
    crypto_generichash_state st;
    unsigned char h[32];
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    static const char *names[2] = { "encoder.json", "vocab.bpe" };
    for (int k = 0; k < 2; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        size_t n;
        char *text = slurp(p, &n);
        if (!text)
            return rumor_err_code();
        crypto_generichash_update(&st, (const unsigned char *)text, n);
        free(text);
    }
    crypto_generichash_final(&st, h, sizeof h);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", h[i]);
    return 0;
}

int rumor_bpe_data_tokenizer(const char *spec, char *buf, size_t cap)
{
    if (!spec || strncmp(spec, "tokens:", 7) || strchr(spec, ','))
        return 0;
    char p[4200], real[PATH_MAX];
    snprintf(p, sizeof p, "%s/tokenizer/encoder.json", spec + 7);
    if (access(p, R_OK) != 0)
        return 0;
    snprintf(p, sizeof p, "%s/tokenizer", spec + 7);
    if (!realpath(p, real))
        return 0;
    snprintf(buf, cap, "%s", real);
    return 1;
}

int rumor_bpe_vocab(const rumor_bpe_t *b) { return b->V; }
int rumor_bpe_merges(const rumor_bpe_t *b) { return b->nmerges; }

const uint8_t *rumor_bpe_token(const rumor_bpe_t *b, int id, size_t *len)
{
    if (id < 0 || id >= b->V)
        return NULL;
    *len = b->len[id];
    return b->pool + b->off[id];
}

int rumor_bpe_special(const rumor_bpe_t *b, const char *text)
{
    int id = lookup(b, (const uint8_t *)text, strlen(text));
    return id >= 0 && b->rank[id] == INT_MAX ? id : -1;
}

/* ------------------------------------------------------------ encoding */

int rumor_bpe_ctx_create(const rumor_bpe_t *b, rumor_bpe_ctx_t **out)
{
    *out = NULL;
    rumor_bpe_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    c->b = b;
    c->ce = calloc(2 * BPE_CACHE, sizeof *c->ce);
    if (!c->ce) {
        rumor_bpe_ctx_free(&c);
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    *out = c;
    return 0;
}

void rumor_bpe_ctx_free(rumor_bpe_ctx_t **cp)
{
    rumor_bpe_ctx_t *c = *cp;
    if (!c)
        return;
    free(c->ce);
    free(c->cpool);
    free(c->cbytes);
    free(c->nxt);
    free(c->prv);
    free(c->ver);
    free(c->heap);
    free(c);
    *cp = NULL;
}

static int push(uint16_t **ids, size_t *len, size_t *cap, int id)
{
    if (*len == *cap) {
        size_t nc = *cap ? 2 * *cap : 4096;
        uint16_t *n = realloc(*ids, nc * sizeof *n);
        if (!n)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory for tokens");
        *ids = n;
        *cap = nc;
    }
    (*ids)[(*len)++] = (uint16_t)id;
    return 0;
}

/* tiktoken's merge, in O(m log m): the parts are a linked list over the
 * piece's bytes, each part's pair (it and the next) in a min-heap keyed by
 * (rank, position): the lowest rank goes, the leftmost on a tie, as
 * tiktoken's scan picks; entries whose part changed since are skipped. */
struct hent {
    int32_t rank;
    uint32_t at, ver;
};

static int hless(const struct hent *a, const struct hent *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->at < b->at);
}

static void hpush(struct hent *h, size_t *n, struct hent e)
{
    size_t i = (*n)++;
    while (i > 0 && hless(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static struct hent hpop(struct hent *h, size_t *n)
{
    struct hent top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct hent *best = &last;
        if (l < *n && hless(&h[l], best))
            m = l, best = &h[l];
        if (r < *n && hless(&h[r], best))
            m = r;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (*n)
        h[i] = last;
    return top;
}

static int merge_piece(rumor_bpe_ctx_t *c, const uint8_t *p, size_t m, uint16_t **ids, size_t *len,
                       size_t *cap)
{
    const rumor_bpe_t *b = c->b;
    if (m > c->scap) {
        size_t nc = 2 * m;
        uint32_t *nx = realloc(c->nxt, nc * sizeof *nx), *pv = NULL, *vr = NULL;
        if (nx)
            c->nxt = nx;
        pv = realloc(c->prv, nc * sizeof *pv);
        if (pv)
            c->prv = pv;
        vr = realloc(c->ver, nc * sizeof *vr);
        if (vr)
            c->ver = vr;
        struct hent *hp = realloc(c->heap, 2 * nc * sizeof *hp);
        if (hp)
            c->heap = hp;
        if (!nx || !pv || !vr || !hp)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        c->scap = nc;
    }
    uint32_t *nxt = c->nxt, *prv = c->prv, *ver = c->ver; /* nxt == m: the end */
    struct hent *h = c->heap;
    size_t nh = 0;
    for (size_t i = 0; i < m; i++) {
        nxt[i] = (uint32_t)i + 1;
        prv[i] = (uint32_t)i - 1; /* prv[0] unused */
        ver[i] = 0;
    }
    for (size_t i = 0; i + 1 < m; i++) {
        int32_t r = rank_of(b, p + i, 2);
        if (r != INT_MAX)
            hpush(h, &nh, (struct hent){ r, (uint32_t)i, 0 });
    }
    while (nh) {
        struct hent e = hpop(h, &nh);
        uint32_t i = e.at;
        if (e.ver != ver[i] || nxt[i] >= m) /* stale, or i was absorbed (ver moved) */
            continue;
        uint32_t j = nxt[i];
        nxt[i] = nxt[j];                    /* i absorbs j */
        if (nxt[i] < m)
            prv[nxt[i]] = i;
        ver[j] = UINT32_MAX;                /* j is gone: its entries are stale */
        ver[i]++;
        if (nxt[i] < m) {
            uint32_t end = nxt[nxt[i]] < m ? nxt[nxt[i]] : (uint32_t)m;
            int32_t r = rank_of(b, p + i, end - i);
            if (r != INT_MAX)
                hpush(h, &nh, (struct hent){ r, i, ver[i] });
        }
        if (i > 0) {
            uint32_t q = prv[i];
            ver[q]++;
            uint32_t end = nxt[i] < m ? nxt[i] : (uint32_t)m;
            int32_t r = rank_of(b, p + q, end - q);
            if (r != INT_MAX)
                hpush(h, &nh, (struct hent){ r, q, ver[q] });
        }
    }
    for (uint32_t i = 0; i < m; i = nxt[i])
        RUMOR_CHECK(push(ids, len, cap, lookup(b, p + i, nxt[i] - i)));
    return 0;
}

/* Drops every cached piece; allocates the pools on first use (0 without
 * them: no cache, still correct). */
static int cache_reset(rumor_bpe_ctx_t *c)
{
    if (!c->cpool) {
        c->cpool_cap = 8 * BPE_CACHE;
        c->cbytes_cap = 16 * BPE_CACHE;
        c->cpool = malloc(c->cpool_cap * sizeof *c->cpool);
        c->cbytes = malloc(c->cbytes_cap);
        if (!c->cpool || !c->cbytes) {
            free(c->cpool);
            free(c->cbytes);
            c->cpool = NULL;
            c->cbytes = NULL;
            return 0;
        }
    }
    memset(c->ce, 0, 2 * BPE_CACHE * sizeof *c->ce);
    c->cpool_len = c->cbytes_len = c->centries = 0;
    return 1;
}

/* A piece: one token if it is one, else from the cache, else merged (and
 * cached: two entries a hash bucket, the piece's bytes compared). */
static int encode_piece(rumor_bpe_ctx_t *c, const uint8_t *p, size_t m, uint16_t **ids,
                        size_t *len, size_t *cap)
{
    const rumor_bpe_t *b = c->b;
    if (m == 1)
        return push(ids, len, cap, b->byte_id[p[0]]);
    int32_t whole = lookup(b, p, m);
    if (whole >= 0 && b->rank[whole] != INT_MAX)
        return push(ids, len, cap, whole);
    if (m > BPE_MAX_PIECE) /* a long run: merged without the cache */
        return merge_piece(c, p, m, ids, len, cap);
    uint64_t h = rumor_bpe_hash(p, m);
    struct cache_ent *e = &c->ce[2 * (h % BPE_CACHE)];
    for (int s = 0; s < 2; s++)
        if (e[s].used && e[s].h == h && e[s].plen == m &&
            memcmp(c->cbytes + e[s].bat, p, m) == 0) {
            const uint16_t *v = c->cpool + e[s].at;
            for (uint32_t i = 0; i < e[s].n; i++)
                RUMOR_CHECK(push(ids, len, cap, v[i]));
            return 0;
        }
    size_t l0 = *len;
    RUMOR_CHECK(merge_piece(c, p, m, ids, len, cap));
    size_t k = *len - l0;
    if ((!c->cpool || c->centries >= BPE_CACHE || c->cpool_len + k > c->cpool_cap ||
         c->cbytes_len + m > c->cbytes_cap) &&
        !cache_reset(c))
        return 0;
    int s = e[0].used ? 1 : 0;
    e[s].used = 1;
    e[s].h = h;
    e[s].plen = (uint32_t)m;
    e[s].at = (uint32_t)c->cpool_len;
    e[s].bat = (uint32_t)c->cbytes_len;
    e[s].n = (uint32_t)k;
    memcpy(c->cpool + c->cpool_len, *ids + l0, k * sizeof **ids);
    memcpy(c->cbytes + c->cbytes_len, p, m);
    c->cpool_len += k;
    c->cbytes_len += m;
    c->centries++;
    return 0;
}

/* ------------------------------------------------------ pre-tokenizer */

/* GPT-2's pattern, as tiktoken runs it:
 *   '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * scanned by hand over Unicode's classes (ICU's: letters L*, numbers N*,
 * the White_Space property): at each place the first alternative that
 * matches, each as long as it goes. */
enum { C_L, C_N, C_WS, C_OTHER, C_BAD };

/* The character at t[i]: its class, and *k its bytes (a byte that starts
 * no valid UTF-8 character is C_BAD, one byte). */
static int char_at(const uint8_t *t, size_t n, size_t i, size_t *k)
{
    uint8_t b0 = t[i];
    if (b0 < 0x80) {
        *k = 1;
        if ((b0 >= 'a' && b0 <= 'z') || (b0 >= 'A' && b0 <= 'Z'))
            return C_L;
        if (b0 >= '0' && b0 <= '9')
            return C_N;
        if (b0 == ' ' || (b0 >= '\t' && b0 <= '\r'))
            return C_WS;
        return C_OTHER; /* U+001C..U+001F are not White_Space */
    }
    uint32_t cp, min;
    size_t len;
    if (b0 >= 0xC2 && b0 <= 0xDF)
        len = 2, cp = b0 & 0x1F, min = 0x80;
    else if (b0 >= 0xE0 && b0 <= 0xEF)
        len = 3, cp = b0 & 0x0F, min = 0x800;
    else if (b0 >= 0xF0 && b0 <= 0xF4)
        len = 4, cp = b0 & 0x07, min = 0x10000;
    else {
        *k = 1;
        return C_BAD;
    }
    if (i + len > n) {
        *k = 1;
        return C_BAD;
    }
    for (size_t q = 1; q < len; q++) {
        if ((t[i + q] & 0xC0) != 0x80) {
            *k = 1;
            return C_BAD;
        }
        cp = (cp << 6) | (t[i + q] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        *k = 1;
        return C_BAD;
    }
    *k = len;
    if (u_isUWhiteSpace((UChar32)cp))
        return C_WS;
    switch (u_charType((UChar32)cp)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
        return C_L;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
        return C_N;
    default:
        return C_OTHER;
    }
}

/* the end of the run of class cls that starts at i */
static size_t run_end(const uint8_t *t, size_t n, size_t i, int cls)
{
    size_t k;
    while (i < n && char_at(t, n, i, &k) == cls)
        i += k;
    return i;
}

/* The end of the piece that starts at i (bpe_int.h). */
size_t rumor_bpe_piece_end(const uint8_t *t, size_t n, size_t i)
{
    size_t k, k2;
    int c = char_at(t, n, i, &k);
    if (c == C_BAD) /* bytes that are not UTF-8: a piece of their own */
        return run_end(t, n, i, C_BAD);
    if (t[i] == '\'' && i + 1 < n) {
        uint8_t a = t[i + 1], z = i + 2 < n ? t[i + 2] : 0;
        if (a == 's' || a == 'd' || a == 'm' || a == 't')
            return i + 2;
        if ((a == 'l' && z == 'l') || (a == 'v' && z == 'e') || (a == 'r' && z == 'e'))
            return i + 3;
    }
    if (t[i] == ' ' && i + 1 < n) {
        int c2 = char_at(t, n, i + 1, &k2);
        if (c2 == C_L || c2 == C_N || c2 == C_OTHER)
            return run_end(t, n, i + 1, c2);
    }
    if (c != C_WS)
        return run_end(t, n, i, c);
    /* white space: all of it before the end (or bytes that are not
     * UTF-8), else all but its last character, which goes with what
     * follows; a single one alone */
    size_t j = i, last = i;
    while (j < n && char_at(t, n, j, &k) == C_WS) {
        last = j;
        j += k;
    }
    if (j == n || char_at(t, n, j, &k) == C_BAD || last == i)
        return j;
    return last;
}

int rumor_bpe_encode(rumor_bpe_ctx_t *c, const char *text, size_t n, uint16_t **ids, size_t *len,
                     size_t *cap)
{
    const uint8_t *t = (const uint8_t *)text;
    for (size_t at = 0; at < n;) {
        size_t e = rumor_bpe_piece_end(t, n, at);
        RUMOR_CHECK(encode_piece(c, t + at, e - at, ids, len, cap));
        at = e;
    }
    return 0;
}

long rumor_bpe_decode(const rumor_bpe_t *b, const uint16_t *ids, size_t n, char *out, size_t cap)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= b->V) {
            rumor_err_set(RUMOR_EINVAL, "token %zu is %u, outside the vocabulary of %d", i,
                          (unsigned)ids[i], b->V);
            return -1;
        }
        size_t l = b->len[ids[i]];
        if (w < cap)
            memcpy(out + w, b->pool + b->off[ids[i]], w + l <= cap ? l : cap - w);
        w += l;
    }
    return (long)w;
}
