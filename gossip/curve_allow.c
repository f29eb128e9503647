/* The swarm's allow-list: a sorted set of public keys with names, loaded
 * from a list file, a key file or a directory of .pub files (see curve.h). */
#include "curve.h"

#include <dirent.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "curve_int.h"

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
    curve_keyfile_t kf;
    int rc = curve_parse_keyfile(path, text, 1, &kf);
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
    RUMOR_CHECK(curve_slurp(path, ALLOWFILE_MAX, &text, &len, &st));
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
        curve_cut_comment(s);
        s = curve_trim(s);
        if (!*s)
            continue;
        size_t klen = strcspn(s, " \t");
        char *rest = curve_trim(s + klen);
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
            rc = curve_at_line(RUMOR_EFORMAT, path, line);
            break;
        }
        char *name = rest;
        size_t nlen = strcspn(rest, " \t");
        char *after = curve_trim(rest + nlen);
        if (*after) {
            rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: unexpected text after the key's name: '%.40s'",
                               path, line, after);
            break;
        }
        name[nlen] = '\0';
        if ((rc = push(al, pk, name)) < 0)
            rc = curve_at_line(rc, path, line);
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
