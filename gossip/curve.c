/* CurveZMQ keys, key files, allow-lists and the ZAP handler (see curve.h). */
#include "curve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "wire.h"

#define KEYFILE_MAX (64 * 1024)         /* a key file is a few lines */
#define ALLOWFILE_MAX ((size_t)256 << 20) /* 1M keys with names fit */

/* ------------------------------------------------------------ keys */

static const char z85_chars[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

void rumor_curve_z85_encode(const uint8_t key[RUMOR_CURVE_KEY_BYTES],
                            char out[RUMOR_CURVE_Z85_LEN + 1])
{
    for (int g = 0; g < RUMOR_CURVE_KEY_BYTES / 4; g++) {
        uint32_t v = (uint32_t)key[4 * g] << 24 | (uint32_t)key[4 * g + 1] << 16 |
                     (uint32_t)key[4 * g + 2] << 8 | key[4 * g + 3];
        for (int i = 4; i >= 0; i--) {
            out[5 * g + i] = z85_chars[v % 85];
            v /= 85;
        }
    }
    out[RUMOR_CURVE_Z85_LEN] = '\0';
}

int rumor_curve_z85_decode(const char *z85, uint8_t key[RUMOR_CURVE_KEY_BYTES])
{
    uint8_t tmp[RUMOR_CURVE_KEY_BYTES];
    for (int g = 0; g < RUMOR_CURVE_KEY_BYTES / 4; g++) {
        uint64_t v = 0;
        for (int i = 0; i < 5; i++) {
            char c = z85[5 * g + i];
            const char *p = c ? strchr(z85_chars, c) : NULL;
            if (!p)
                return rumor_err_set(RUMOR_EINVAL, "character %d of a Z85 key is not Z85",
                                     5 * g + i + 1);
            v = v * 85 + (uint64_t)(p - z85_chars);
        }
        if (v > UINT32_MAX)
            return rumor_err_set(RUMOR_EINVAL, "characters %d-%d of a Z85 key overflow 32 bits",
                                 5 * g + 1, 5 * g + 5);
        tmp[4 * g] = (uint8_t)(v >> 24);
        tmp[4 * g + 1] = (uint8_t)(v >> 16);
        tmp[4 * g + 2] = (uint8_t)(v >> 8);
        tmp[4 * g + 3] = (uint8_t)v;
    }
    memcpy(key, tmp, sizeof tmp);
    sodium_memzero(tmp, sizeof tmp);
    return 0;
}

static int sodium_ready(void)
{
    if (sodium_init() < 0)
        return rumor_err_set(RUMOR_ESYS, "libsodium failed to initialize");
    return 0;
}

int rumor_curve_keygen(rumor_curve_keypair_t *kp)
{
    RUMOR_CHECK(sodium_ready());
    memset(kp, 0, sizeof *kp);
    if (crypto_box_keypair(kp->public_key, kp->secret_key) != 0)
        return rumor_err_set(RUMOR_ESYS, "crypto_box_keypair failed");
    rumor_curve_z85_encode(kp->public_key, kp->public_z85);
    rumor_curve_z85_encode(kp->secret_key, kp->secret_z85);
    kp->has_secret = 1;
    return 0;
}

int rumor_curve_keypair_from_secret(rumor_curve_keypair_t *kp,
                                    const uint8_t secret[RUMOR_CURVE_KEY_BYTES])
{
    RUMOR_CHECK(sodium_ready());
    uint8_t pk[RUMOR_CURVE_KEY_BYTES];
    if (crypto_scalarmult_base(pk, secret) != 0)
        return rumor_err_set(RUMOR_EINVAL, "not a usable Curve25519 secret key");
    memset(kp, 0, sizeof *kp);
    memcpy(kp->public_key, pk, sizeof pk);
    memcpy(kp->secret_key, secret, RUMOR_CURVE_KEY_BYTES);
    rumor_curve_z85_encode(kp->public_key, kp->public_z85);
    rumor_curve_z85_encode(kp->secret_key, kp->secret_z85);
    kp->has_secret = 1;
    return 0;
}

void rumor_curve_keypair_clear(rumor_curve_keypair_t *kp)
{
    if (kp)
        sodium_memzero(kp, sizeof *kp);
}

uint64_t rumor_curve_id(const uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    return rumor_wire_peer_id(pk);
}

/* ------------------------------------------------------- key files */

/* Reads a whole file (at most cap bytes) into a NUL-terminated buffer the
 * caller frees (wiping it first when it may hold a secret). *st gets the
 * open file's status. */
static int slurp(const char *path, size_t cap, char **out, size_t *len, struct stat *st)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    if (fstat(fd, st) != 0) {
        close(fd);
        return rumor_err_sys(RUMOR_ESYS, "%s: fstat", path);
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return rumor_err_set(RUMOR_EFORMAT, "%s: not a regular file", path);
    }
    if ((uint64_t)st->st_size > cap) {
        close(fd);
        return rumor_err_set(RUMOR_EFORMAT, "%s: %lld bytes, more than the %zu a key file may hold",
                             path, (long long)st->st_size, cap);
    }
    size_t n = (size_t)st->st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int rc = r < 0 ? rumor_err_sys(RUMOR_EIO, "%s: read", path)
                           : rumor_err_set(RUMOR_EIO, "%s: shrank while being read", path);
            sodium_memzero(buf, n);
            free(buf);
            close(fd);
            return rc;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static char *trim(char *s)
{
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Ends a line where its comment starts: at a '#' that begins the line or
 * follows a blank, outside double quotes. '#' is in Z85's alphabet, so a
 * '#' inside a word (a key) is not a comment. */
static void cut_comment(char *s)
{
    int quoted = 0;
    for (char *c = s; *c; c++) {
        if (*c == '"')
            quoted = !quoted;
        else if (*c == '#' && !quoted && (c == s || is_space(c[-1]))) {
            *c = '\0';
            return;
        }
    }
}

/* Re-records the last error as rc with "path:line: " before it. */
static int at_line(int rc, const char *path, int line)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", rumor_err_msg());
    return rumor_err_set(rc, "%s:%d: %s", path, line, msg);
}

/* Decodes a field's value: 40 Z85 characters, optionally in double quotes. */
static int parse_key_value(const char *path, int line, const char *field, char *v,
                           uint8_t key[RUMOR_CURVE_KEY_BYTES])
{
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v[n - 1] = '\0';
        v++;
        n -= 2;
    }
    if (n != RUMOR_CURVE_Z85_LEN)
        return rumor_err_set(RUMOR_EFORMAT, "%s:%d: %s: %zu characters, a Z85 key has %d", path,
                             line, field, n, RUMOR_CURVE_Z85_LEN);
    if (rumor_curve_z85_decode(v, key) < 0) {
        rumor_err_prefix(RUMOR_EFORMAT, "%s", field);
        return at_line(RUMOR_EFORMAT, path, line);
    }
    return 0;
}

typedef struct keyfile {
    int have_pub, have_sec;
    uint8_t pub[RUMOR_CURVE_KEY_BYTES], sec[RUMOR_CURVE_KEY_BYTES];
} keyfile_t;

/* Parses a key file's text (modified in place). bare: a line that is only
 * a Z85 key counts as the public key. */
static int parse_keyfile(const char *path, char *text, int bare, keyfile_t *kf)
{
    memset(kf, 0, sizeof *kf);
    int in_metadata = 0, line = 0;
    char *next = text;
    while (next) {
        char *s = next;
        char *nl = strchr(s, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        line++;
        int indented = is_space(*s);
        cut_comment(s);
        s = trim(s);
        if (!*s)
            continue;
        /* '=' is in the Z85 alphabet: a bare key line is tried before the
         * "name = value" reading. */
        if (bare && !indented && strlen(s) == RUMOR_CURVE_Z85_LEN && !strchr(s, ' ')) {
            uint8_t k[RUMOR_CURVE_KEY_BYTES];
            if (rumor_curve_z85_decode(s, k) == 0) {
                if (kf->have_pub)
                    return rumor_err_set(RUMOR_EFORMAT, "%s:%d: a second public key", path, line);
                memcpy(kf->pub, k, sizeof k);
                kf->have_pub = 1;
                continue;
            }
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            if (!indented && (!strcmp(s, "curve") || !strcmp(s, "metadata"))) {
                in_metadata = !strcmp(s, "metadata");
                continue;
            }
            return rumor_err_set(RUMOR_EFORMAT,
                                 "%s:%d: expected 'public-key = \"<Z85>\"' or "
                                 "'secret-key = \"<Z85>\"'",
                                 path, line);
        }
        *eq = '\0';
        char *name = trim(s), *value = trim(eq + 1);
        if (in_metadata && indented)
            continue; /* zcert metadata: not ours to judge */
        int is_pub = !strcmp(name, "public-key"), is_sec = !strcmp(name, "secret-key");
        if (!is_pub && !is_sec)
            return rumor_err_set(RUMOR_EFORMAT, "%s:%d: unknown field '%.40s'", path, line, name);
        if ((is_pub && kf->have_pub) || (is_sec && kf->have_sec))
            return rumor_err_set(RUMOR_EFORMAT, "%s:%d: %s given twice", path, line, name);
        RUMOR_CHECK(parse_key_value(path, line, name, value, is_pub ? kf->pub : kf->sec));
        if (is_pub)
            kf->have_pub = 1;
        else
            kf->have_sec = 1;
    }
    return 0;
}

int rumor_curve_read_keys(const char *path, rumor_curve_keypair_t *kp)
{
    RUMOR_CHECK(sodium_ready());
    char *text;
    size_t len;
    struct stat st;
    RUMOR_CHECK(slurp(path, KEYFILE_MAX, &text, &len, &st));
    keyfile_t kf;
    int rc = parse_keyfile(path, text, 0, &kf);
    /* A public key file given for the secret one: say so, rather than ask
     * for the mode a secret needs (a .pub file is 0644 on purpose). */
    size_t pl = strlen(path);
    if (rc == 0 && !kf.have_sec && kf.have_pub)
        rc = pl > 4 && strcmp(path + pl - 4, ".pub") == 0
                 ? rumor_err_set(RUMOR_EFORMAT, "%s is a public key (no secret-key line); the "
                                                "secret key is %.*s.key", path, (int)(pl - 4),
                                 path)
                 : rumor_err_set(RUMOR_EFORMAT, "%s is a public key (no secret-key line); the "
                                                "secret key is PREFIX.key, written with PREFIX.pub "
                                                "by 'rumor-peer keygen PREFIX'", path);
    else if (rc == 0 && !kf.have_sec)
        rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: no secret-key line", path, 1);
    else if (st.st_mode & 077) /* before a format error: a secret may be exposed */
        rc = rumor_err_set(RUMOR_EAUTH,
                           "%s: secret key file has mode %04o: group or others may read it; "
                           "run 'chmod 600 %s'",
                           path, (unsigned)(st.st_mode & 07777), path);
    rumor_curve_keypair_t tmp;
    if (rc == 0)
        rc = rumor_curve_keypair_from_secret(&tmp, kf.sec);
    if (rc == 0 && kf.have_pub && sodium_memcmp(kf.pub, tmp.public_key, sizeof kf.pub) != 0)
        rc = rumor_err_set(RUMOR_EFORMAT,
                           "%s:%d: the public-key line does not match the secret key", path, 1);
    if (rc == 0)
        *kp = tmp;
    rumor_curve_keypair_clear(&tmp);
    sodium_memzero(&kf, sizeof kf);
    sodium_memzero(text, len);
    free(text);
    return rc;
}

int rumor_curve_read_public(const char *path, uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    char *text;
    size_t len;
    struct stat st;
    RUMOR_CHECK(slurp(path, KEYFILE_MAX, &text, &len, &st));
    keyfile_t kf;
    int rc = parse_keyfile(path, text, 1, &kf);
    if (rc == 0 && !kf.have_pub)
        rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: no public key in the file", path, 1);
    if (rc == 0)
        memcpy(pk, kf.pub, RUMOR_CURVE_KEY_BYTES);
    sodium_memzero(&kf, sizeof kf);
    sodium_memzero(text, len);
    free(text);
    return rc;
}

/* Creates path (O_EXCL) with exactly `mode` and writes text, fsynced. */
static int write_new(const char *path, mode_t mode, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return rumor_err_sys(errno == EEXIST ? RUMOR_EINVAL : RUMOR_ESYS, "%s", path);
    size_t n = strlen(text), done = 0;
    int rc = fchmod(fd, mode) == 0 ? 0 : rumor_err_sys(RUMOR_ESYS, "%s: chmod", path);
    while (rc == 0 && done < n) {
        ssize_t w = write(fd, text + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            rc = rumor_err_sys(RUMOR_ESYS, "%s: write", path);
        else
            done += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = rumor_err_sys(RUMOR_ESYS, "%s: fsync", path);
    if (close(fd) != 0 && rc == 0)
        rc = rumor_err_sys(RUMOR_ESYS, "%s: close", path);
    if (rc < 0)
        unlink(path);
    return rc;
}

int rumor_curve_write_keys(const char *prefix, const rumor_curve_keypair_t *kp, int force)
{
    if (!prefix || !*prefix)
        return rumor_err_set(RUMOR_EINVAL, "write keys: no file name");
    if (!kp->has_secret)
        return rumor_err_set(RUMOR_EINVAL, "write keys: the keypair has no secret key");
    char base[PATH_MAX], keyp[PATH_MAX + 8], pubp[PATH_MAX + 8];
    struct stat st;
    int n = stat(prefix, &st) == 0 && S_ISDIR(st.st_mode)
                ? snprintf(base, sizeof base, "%s/peer", prefix)
                : snprintf(base, sizeof base, "%s", prefix);
    if (n < 0 || (size_t)n + 5 > sizeof base)
        return rumor_err_set(RUMOR_EINVAL, "write keys: path too long: %s", prefix);
    snprintf(keyp, sizeof keyp, "%s.key", base);
    snprintf(pubp, sizeof pubp, "%s.pub", base);
    const char *paths[2] = { keyp, pubp };
    for (int i = 0; i < 2; i++) {
        if (lstat(paths[i], &st) != 0)
            continue;
        if (!force)
            return rumor_err_set(RUMOR_EINVAL,
                                 "%s exists: refusing to overwrite a key (force replaces it)",
                                 paths[i]);
        if (unlink(paths[i]) != 0)
            return rumor_err_sys(RUMOR_ESYS, "%s: cannot remove", paths[i]);
    }
    char idhex[17];
    snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)rumor_curve_id(kp->public_key));
    char sec[512], pub[512];
    snprintf(sec, sizeof sec,
             "# rumor CURVE key pair: keep this file private (mode 0600)\n"
             "# peer id %s\n"
             "public-key = \"%s\"\n"
             "secret-key = \"%s\"\n",
             idhex, kp->public_z85, kp->secret_z85);
    snprintf(pub, sizeof pub,
             "# rumor CURVE public key: share it, it goes in the swarm's allow-list\n"
             "# peer id %s\n"
             "public-key = \"%s\"\n",
             idhex, kp->public_z85);
    int rc = write_new(keyp, 0600, sec);
    sodium_memzero(sec, sizeof sec);
    if (rc == 0) {
        rc = write_new(pubp, 0644, pub);
        if (rc < 0)
            unlink(keyp);
    }
    if (rc < 0)
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    return 0;
}

/* ------------------------------------------------------- allow-list */

typedef struct entry {
    uint8_t key[RUMOR_CURVE_KEY_BYTES];
    uint32_t name; /* offset in names; 0 is "" */
    uint32_t seq;  /* order of addition, to keep the first of duplicates */
} entry_t;

struct rumor_allowlist {
    entry_t *e;
    size_t n, cap;
    char *names;
    size_t nlen, ncap;
    uint32_t seq;
};

int rumor_allowlist_new(rumor_allowlist_t **out)
{
    *out = calloc(1, sizeof **out);
    if (*out)
        (*out)->names = calloc(1, 64);
    if (!*out || !(*out)->names) {
        free(*out);
        *out = NULL;
        return rumor_err_set(RUMOR_ENOMEM, "allow-list: out of memory");
    }
    (*out)->ncap = 64;
    (*out)->nlen = 1; /* offset 0: "" */
    return 0;
}

void rumor_allowlist_destroy(rumor_allowlist_t **alp)
{
    if (!alp || !*alp)
        return;
    free((*alp)->e);
    free((*alp)->names);
    free(*alp);
    *alp = NULL;
}

size_t rumor_allowlist_count(const rumor_allowlist_t *al) { return al ? al->n : 0; }

static int check_name(const char *name)
{
    size_t n = strlen(name);
    if (n > RUMOR_ALLOWLIST_NAME_MAX)
        return rumor_err_set(RUMOR_EINVAL, "key name of %zu characters (at most %d)", n,
                             RUMOR_ALLOWLIST_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return rumor_err_set(RUMOR_EINVAL, "key name with a control character");
    return 0;
}

/* Appends a key and its name without keeping the order (see finish). */
static int push(rumor_allowlist_t *al, const uint8_t pk[RUMOR_CURVE_KEY_BYTES], const char *name)
{
    if (al->n >= RUMOR_ALLOWLIST_MAX)
        return rumor_err_set(RUMOR_EINVAL, "allow-list holds more than %d keys",
                             RUMOR_ALLOWLIST_MAX);
    if (name && *name)
        RUMOR_CHECK(check_name(name));
    if (al->n == al->cap) {
        size_t cap = al->cap ? 2 * al->cap : 16;
        entry_t *e = realloc(al->e, cap * sizeof *e);
        if (!e)
            return rumor_err_set(RUMOR_ENOMEM, "allow-list: out of memory");
        al->e = e;
        al->cap = cap;
    }
    uint32_t off = 0;
    if (name && *name) {
        size_t len = strlen(name) + 1;
        if (al->nlen + len > al->ncap) {
            size_t cap = 2 * al->ncap + len;
            char *p = realloc(al->names, cap);
            if (!p)
                return rumor_err_set(RUMOR_ENOMEM, "allow-list: out of memory");
            al->names = p;
            al->ncap = cap;
        }
        memcpy(al->names + al->nlen, name, len);
        off = (uint32_t)al->nlen;
        al->nlen += len;
    }
    entry_t *e = &al->e[al->n++];
    memcpy(e->key, pk, RUMOR_CURVE_KEY_BYTES);
    e->name = off;
    e->seq = al->seq++;
    return 0;
}

static int cmp_entry(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int c = memcmp(x->key, y->key, RUMOR_CURVE_KEY_BYTES);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Sorts after pushes and drops later duplicates. */
static void finish(rumor_allowlist_t *al)
{
    if (al->n < 2)
        return;
    qsort(al->e, al->n, sizeof *al->e, cmp_entry);
    size_t w = 1;
    for (size_t r = 1; r < al->n; r++)
        if (memcmp(al->e[r].key, al->e[w - 1].key, RUMOR_CURVE_KEY_BYTES) != 0)
            al->e[w++] = al->e[r];
    al->n = w;
}

/* Index of the first entry >= pk. */
static size_t lower_bound(const rumor_allowlist_t *al, const uint8_t *pk)
{
    size_t lo = 0, hi = al->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(al->e[mid].key, pk, RUMOR_CURVE_KEY_BYTES) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const entry_t *find(const rumor_allowlist_t *al, const uint8_t *pk)
{
    if (!al)
        return NULL;
    size_t i = lower_bound(al, pk);
    return i < al->n && memcmp(al->e[i].key, pk, RUMOR_CURVE_KEY_BYTES) == 0 ? &al->e[i] : NULL;
}

int rumor_allowlist_add(rumor_allowlist_t *al, const uint8_t pk[RUMOR_CURVE_KEY_BYTES],
                        const char *name)
{
    if (find(al, pk))
        return 0;
    size_t at = lower_bound(al, pk);
    RUMOR_CHECK(push(al, pk, name));
    entry_t e = al->e[al->n - 1];
    memmove(&al->e[at + 1], &al->e[at], (al->n - 1 - at) * sizeof e);
    al->e[at] = e;
    return 0;
}

int rumor_allowlist_contains(const rumor_allowlist_t *al, const uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    return find(al, pk) != NULL;
}

const char *rumor_allowlist_name(const rumor_allowlist_t *al,
                                 const uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    const entry_t *e = find(al, pk);
    return e ? al->names + e->name : NULL;
}

int rumor_allowlist_lookup_name(const rumor_allowlist_t *al, const char *name,
                                uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    for (size_t i = 0; name && *name && i < al->n; i++)
        if (strcmp(al->names + al->e[i].name, name) == 0) {
            memcpy(pk, al->e[i].key, RUMOR_CURVE_KEY_BYTES);
            return 1;
        }
    return 0;
}

int rumor_allowlist_lookup_id(const rumor_allowlist_t *al, uint64_t id,
                              uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    for (size_t i = 0; id && i < al->n; i++)
        if (rumor_curve_id(al->e[i].key) == id) {
            memcpy(pk, al->e[i].key, RUMOR_CURVE_KEY_BYTES);
            return 1;
        }
    return 0;
}

int rumor_allowlist_key_at(const rumor_allowlist_t *al, size_t i,
                           uint8_t pk[RUMOR_CURVE_KEY_BYTES])
{
    if (i >= al->n)
        return 0;
    memcpy(pk, al->e[i].key, RUMOR_CURVE_KEY_BYTES);
    return 1;
}

rumor_allowlist_t *rumor_allowlist_dup(const rumor_allowlist_t *al)
{
    rumor_allowlist_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    *d = *al;
    d->e = malloc((al->n ? al->n : 1) * sizeof *d->e);
    d->names = malloc(al->nlen);
    if (!d->e || !d->names) {
        free(d->e);
        free(d->names);
        free(d);
        return NULL;
    }
    if (al->n)
        memcpy(d->e, al->e, al->n * sizeof *d->e);
    memcpy(d->names, al->names, al->nlen);
    d->cap = al->n ? al->n : 1;
    d->ncap = al->nlen;
    return d;
}

/* A key's name from its file: "dir/peer-3.pub" -> "peer-3", cut to
 * RUMOR_ALLOWLIST_NAME_MAX, control characters shown as '?'. */
static void name_from_file(char *name, const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".pub") == 0)
        n -= 4;
    if (n > RUMOR_ALLOWLIST_NAME_MAX)
        n = RUMOR_ALLOWLIST_NAME_MAX;
    for (size_t i = 0; i < n; i++)
        name[i] = (unsigned char)base[i] < 0x20 || base[i] == 0x7f ? '?' : base[i];
    name[n] = '\0';
}

/* Whether text is a key file (rumor-peer keygen's PREFIX.pub, a zcert)
 * rather than a list: its first line that is not blank or a comment starts
 * with a key file's field or section rather than a 40-character key. */
static int is_keyfile(const char *text)
{
    static const char *const starts[] = { "public-key", "secret-key", "curve", "metadata" };
    const char *s = text;
    for (;;) {
        s += strspn(s, " \t\r\n");
        if (*s != '#')
            break;
        s += strcspn(s, "\n"); /* a whole-line comment */
    }
    uint8_t pk[RUMOR_CURVE_KEY_BYTES];
    if (strcspn(s, " \t\r\n") == RUMOR_CURVE_Z85_LEN && rumor_curve_z85_decode(s, pk) == 0)
        return 0; /* a key that happens to start with "curve=" */
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++) {
        size_t n = strlen(starts[i]);
        if (strncmp(s, starts[i], n) == 0 && (!s[n] || strchr(" \t\r\n=", s[n])))
            return 1;
    }
    return 0;
}

/* A key file as an allow-list of one key, named by the file. */
static int load_keyfile(rumor_allowlist_t *al, const char *path, char *text)
{
    keyfile_t kf;
    int rc = parse_keyfile(path, text, 1, &kf);
    if (rc == 0 && kf.have_sec)
        rc = rumor_err_set(RUMOR_EINVAL, "%s is a secret key file: an allow-list takes public "
                                         "keys (the .pub file)", path);
    else if (rc == 0 && !kf.have_pub)
        rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: no public key in the file", path, 1);
    char name[RUMOR_ALLOWLIST_NAME_MAX + 1];
    name_from_file(name, path);
    if (rc == 0)
        rc = push(al, kf.pub, name);
    sodium_memzero(&kf, sizeof kf);
    return rc;
}

/* One key a line: "<z85>" or "<z85> name", blank lines and comments
 * skipped; or a single key file (a .pub). */
static int load_file(rumor_allowlist_t *al, const char *path)
{
    char *text;
    size_t len;
    struct stat st;
    RUMOR_CHECK(slurp(path, ALLOWFILE_MAX, &text, &len, &st));
    if (is_keyfile(text)) {
        int rc = load_keyfile(al, path, text);
        sodium_memzero(text, len);
        free(text);
        return rc;
    }
    int rc = 0, line = 0;
    char *next = text;
    while (rc == 0 && next) {
        char *s = next;
        char *nl = strchr(s, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        line++;
        cut_comment(s);
        s = trim(s);
        if (!*s)
            continue;
        size_t klen = strcspn(s, " \t");
        char *rest = trim(s + klen);
        s[klen] = '\0';
        uint8_t pk[RUMOR_CURVE_KEY_BYTES];
        if (klen != RUMOR_CURVE_Z85_LEN) {
            rc = rumor_err_set(RUMOR_EFORMAT,
                               "%s:%d: '%.48s' is not a public key (%zu characters, a Z85 key "
                               "has %d)",
                               path, line, s, klen, RUMOR_CURVE_Z85_LEN);
            break;
        }
        if (rumor_curve_z85_decode(s, pk) < 0) {
            rc = at_line(RUMOR_EFORMAT, path, line);
            break;
        }
        char *name = rest;
        size_t nlen = strcspn(rest, " \t");
        char *after = trim(rest + nlen);
        if (*after) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: unexpected text after the key's name: '%.40s'",
                               path, line, after);
            break;
        }
        name[nlen] = '\0';
        if ((rc = push(al, pk, name)) < 0)
            rc = at_line(rc, path, line);
    }
    free(text);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.pub file of a directory, named by its file name. */
static int load_dir(rumor_allowlist_t *al, const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 5 || strcmp(de->d_name + len - 4, ".pub") != 0)
            continue;
        if (n >= RUMOR_ALLOWLIST_MAX) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s: more than %d .pub files", path,
                               RUMOR_ALLOWLIST_MAX);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                rc = rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
                break;
            }
            names = p;
        }
        if (!(names[n] = strdup(de->d_name)))
            rc = rumor_err_set(RUMOR_ENOMEM, "%s: out of memory", path);
        else
            n++;
    }
    closedir(d);
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof *names, cmp_str); /* the same errors first, every time */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char file[PATH_MAX];
        if (snprintf(file, sizeof file, "%s/%s", path, names[i]) >= (int)sizeof file) {
            rc = rumor_err_set(RUMOR_EINVAL, "%s/%s: path too long", path, names[i]);
            break;
        }
        uint8_t pk[RUMOR_CURVE_KEY_BYTES];
        rc = rumor_curve_read_public(file, pk);
        if (rc == 0) {
            char name[RUMOR_ALLOWLIST_NAME_MAX + 1];
            name_from_file(name, names[i]);
            rc = push(al, pk, name);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int rumor_allowlist_load(const char *path, rumor_allowlist_t **out)
{
    *out = NULL;
    if (!path || !*path)
        return rumor_err_set(RUMOR_EINVAL, "allow-list: no path");
    struct stat st;
    if (stat(path, &st) != 0)
        return rumor_err_sys(RUMOR_ESYS, "allow-list %s", path);
    rumor_allowlist_t *al;
    RUMOR_CHECK(rumor_allowlist_new(&al));
    int rc = S_ISDIR(st.st_mode) ? load_dir(al, path) : load_file(al, path);
    if (rc == 0 && al->n == 0)
        rc = rumor_err_set(RUMOR_EFORMAT, "allow-list %s: no keys (it would admit nobody)%s",
                           path, S_ISDIR(st.st_mode) ? ": no *.pub files in the directory" : "");
    if (rc < 0) {
        rumor_allowlist_destroy(&al);
        return rumor_err_trace_add(__FILE__, __LINE__, rc);
    }
    finish(al);
    *out = al;
    return 0;
}

/* ------------------------------------------------------ ZAP handler */

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_MAX_FRAMES 8

struct rumor_zap {
    void *rep;      /* the handler thread's after start */
    void *ctl_in;   /* the handler thread's: a byte here means stop */
    void *ctl_out;  /* the stopper's */
    pthread_t thread;
    int running;
    rumor_allowlist_t *allow;
    _Atomic uint64_t admitted, not_listed, mechanism, malformed;
};

static int frame_is(zmq_msg_t *m, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size(m) == n && memcmp(zmq_msg_data(m), s, n) == 0;
}

/* Sends the 6-frame reply of RFC 27 (empty metadata). */
static void zap_reply(rumor_zap_t *z, zmq_msg_t *reqid, const char *status, const char *text,
                      const char *user)
{
    zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
    if (reqid)
        zmq_send(z->rep, zmq_msg_data(reqid), zmq_msg_size(reqid), ZMQ_SNDMORE);
    else
        zmq_send(z->rep, "", 0, ZMQ_SNDMORE);
    zmq_send(z->rep, status, strlen(status), ZMQ_SNDMORE);
    zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(z->rep, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(z->rep, "", 0, 0);
}

/* Reads one request and answers it. Frames: version, request id, domain,
 * address, routing id, mechanism, credentials... */
static void zap_handle(rumor_zap_t *z)
{
    zmq_msg_t f[ZAP_MAX_FRAMES];
    int n = 0, more = 1, extra = 0;
    while (more) {
        zmq_msg_t scratch, *m = n < ZAP_MAX_FRAMES ? &f[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, z->rep, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        if (m == &scratch) {
            extra = 1;
            zmq_msg_close(m);
        } else {
            n++;
        }
    }
    zmq_msg_t *reqid = n >= 2 ? &f[1] : NULL;
    if (n < 6 || extra || !frame_is(&f[0], "1.0")) {
        atomic_fetch_add(&z->malformed, 1);
        rumor_debug("zap: malformed request (%d frames) denied", n);
        zap_reply(z, reqid, "400", "malformed ZAP request", "");
    } else if (!frame_is(&f[5], "CURVE")) {
        atomic_fetch_add(&z->mechanism, 1);
        rumor_debug("zap: mechanism %.*s denied", (int)(zmq_msg_size(&f[5]) > 16 ? 16 : zmq_msg_size(&f[5])),
                    (const char *)zmq_msg_data(&f[5]));
        zap_reply(z, reqid, "400", "only CURVE is allowed", "");
    } else if (n != 7 || zmq_msg_size(&f[6]) != RUMOR_CURVE_KEY_BYTES) {
        atomic_fetch_add(&z->malformed, 1);
        zap_reply(z, reqid, "400", "malformed CURVE credentials", "");
    } else {
        const uint8_t *pk = zmq_msg_data(&f[6]);
        char z85[RUMOR_CURVE_Z85_LEN + 1];
        rumor_curve_z85_encode(pk, z85);
        if (rumor_allowlist_contains(z->allow, pk)) {
            atomic_fetch_add(&z->admitted, 1);
            zap_reply(z, reqid, "200", "OK", z85);
        } else {
            atomic_fetch_add(&z->not_listed, 1);
            rumor_debug("zap: key %s is not on the allow-list: denied", z85);
            zap_reply(z, reqid, "400", "key not on the allow-list", "");
        }
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *zap_main(void *arg)
{
    rumor_zap_t *z = arg;
    for (;;) {
        zmq_pollitem_t it[2] = { { z->rep, 0, ZMQ_POLLIN, 0 }, { z->ctl_in, 0, ZMQ_POLLIN, 0 } };
        if (zmq_poll(it, 2, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break; /* ETERM: the context is going away */
        }
        if (it[1].revents & ZMQ_POLLIN)
            break;
        if (it[0].revents & ZMQ_POLLIN)
            zap_handle(z);
    }
    zmq_close(z->rep);
    zmq_close(z->ctl_in);
    return NULL;
}

static void *linger0_socket(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0;
    if (s)
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    return s;
}

int rumor_zap_start(void *ctx, const rumor_allowlist_t *allow, rumor_zap_t **out)
{
    *out = NULL;
    if (!ctx || !allow)
        return rumor_err_set(RUMOR_EINVAL, "zap: %s", ctx ? "no allow-list" : "no context");
    rumor_zap_t *z = calloc(1, sizeof *z);
    if (!z || !(z->allow = rumor_allowlist_dup(allow))) {
        free(z);
        return rumor_err_set(RUMOR_ENOMEM, "zap: out of memory");
    }
    int rc = 0;
    char ctl[64];
    snprintf(ctl, sizeof ctl, "inproc://rumor-zap-ctl-%p", (void *)z);
    z->rep = linger0_socket(ctx, ZMQ_REP);
    z->ctl_in = linger0_socket(ctx, ZMQ_PAIR);
    z->ctl_out = linger0_socket(ctx, ZMQ_PAIR);
    if (!z->rep || !z->ctl_in || !z->ctl_out)
        rc = rumor_err_set(RUMOR_ESYS, "zap: zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == 0 && zmq_bind(z->rep, ZAP_ENDPOINT) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "zap: cannot bind %s: %s%s", ZAP_ENDPOINT,
                           zmq_strerror(zmq_errno()),
                           zmq_errno() == EADDRINUSE ? " (this context has a ZAP handler)" : "");
    if (rc == 0 && (zmq_bind(z->ctl_in, ctl) != 0 || zmq_connect(z->ctl_out, ctl) != 0))
        rc = rumor_err_set(RUMOR_ESYS, "zap: control pipe: %s", zmq_strerror(zmq_errno()));
    if (rc == 0 && pthread_create(&z->thread, NULL, zap_main, z) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "zap: cannot start the handler thread");
    if (rc < 0) {
        if (z->rep)
            zmq_close(z->rep);
        if (z->ctl_in)
            zmq_close(z->ctl_in);
        if (z->ctl_out)
            zmq_close(z->ctl_out);
        rumor_allowlist_destroy(&z->allow);
        free(z);
        return rc;
    }
    z->running = 1;
    *out = z;
    return 0;
}

void rumor_zap_stop(rumor_zap_t **zp)
{
    if (!zp || !*zp)
        return;
    rumor_zap_t *z = *zp;
    if (z->running) {
        /* The PAIR is connected to a bound inproc peer: the byte is queued
         * at once, and the thread leaves its poll on it. */
        zmq_send(z->ctl_out, "", 0, 0);
        pthread_join(z->thread, NULL);
    }
    zmq_close(z->ctl_out);
    rumor_allowlist_destroy(&z->allow);
    free(z);
    *zp = NULL;
}

void rumor_zap_stats(const rumor_zap_t *z, rumor_zap_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!z)
        return;
    rumor_zap_t *m = (rumor_zap_t *)z; /* atomics are read, never written */
    out->admitted = atomic_load(&m->admitted);
    out->denied_not_listed = atomic_load(&m->not_listed);
    out->denied_mechanism = atomic_load(&m->mechanism);
    out->malformed = atomic_load(&m->malformed);
}
