/* Terms every peer of a swarm shares (see terms.h). */
#include "terms.h"

#include <stdio.h>
#include <string.h>

/* One line of a terms body: [key, key + klen) = [val, val + vlen). */
struct line {
    const char *key, *val;
    size_t klen, vlen;
};

static int key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* The next line of p[0..len) at *pos into *l: 1, 0 at the end, or
 * RUMOR_EPROTO naming line `no`. */
static int next_line(const char *p, size_t len, size_t *pos, int no, struct line *l)
{
    if (*pos >= len)
        return 0;
    const char *s = p + *pos, *end = memchr(s, '\n', len - *pos);
    if (!end)
        return rumor_err_set(RUMOR_EPROTO, "terms line %d: no newline at its end", no);
    const char *eq = memchr(s, '=', (size_t)(end - s));
    if (!eq || eq == s || eq - s > RUMOR_TERMS_KEY_MAX)
        return rumor_err_set(RUMOR_EPROTO, "terms line %d: not KEY=VALUE with a key of 1 to %d "
                             "characters", no, RUMOR_TERMS_KEY_MAX);
    for (const char *c = s; c < eq; c++)
        if (!key_char(*c))
            return rumor_err_set(RUMOR_EPROTO, "terms line %d: key character 0x%02x (a-z, 0-9 "
                                 "and '-' only)", no, (unsigned char)*c);
    if (end - eq - 1 > RUMOR_TERMS_VALUE_MAX)
        return rumor_err_set(RUMOR_EPROTO, "terms line %d: a value of more than %d bytes", no,
                             RUMOR_TERMS_VALUE_MAX);
    for (const char *c = eq + 1; c < end; c++)
        if (*c < 0x20 || *c > 0x7e)
            return rumor_err_set(RUMOR_EPROTO, "terms line %d: value byte 0x%02x (printable "
                                 "ASCII only)", no, (unsigned char)*c);
    l->key = s;
    l->klen = (size_t)(eq - s);
    l->val = eq + 1;
    l->vlen = (size_t)(end - eq - 1);
    *pos = (size_t)(end - p) + 1;
    return 1;
}

/* Finds key in p[0..len) (well-formed): 1 and *l, or 0. */
static int find(const char *p, size_t len, const char *key, size_t klen, struct line *l)
{
    size_t pos = 0;
    for (int no = 1; next_line(p, len, &pos, no, l) == 1; no++)
        if (l->klen == klen && memcmp(l->key, key, klen) == 0)
            return 1;
    return 0;
}

int rumor_terms_check(const void *body, size_t len)
{
    const char *p = body;
    if (len > RUMOR_TERMS_MAX)
        return rumor_err_set(RUMOR_EPROTO, "terms of %zu bytes, at most %d", len,
                             RUMOR_TERMS_MAX);
    size_t pos = 0;
    struct line l, o;
    int rc, no = 1;
    for (; (rc = next_line(p, len, &pos, no, &l)) == 1; no++) {
        /* no key twice: the lines before this one */
        if (find(p, (size_t)(l.key - p), l.key, l.klen, &o))
            return rumor_err_set(RUMOR_EPROTO, "terms line %d: key '%.*s' a second time", no,
                                 (int)l.klen, l.key);
    }
    return rc;
}

int rumor_terms_compare(const char *mine, const void *theirs, size_t len,
                        rumor_terms_diff_t *diff)
{
    RUMOR_CHECK(rumor_terms_check(theirs, len));
    size_t mlen = strlen(mine), pos = 0;
    struct line l, t;
    for (int no = 1; next_line(mine, mlen, &pos, no, &l) == 1; no++) {
        if (!find(theirs, len, l.key, l.klen, &t))
            continue; /* a term the neighbour does not state */
        if (t.vlen == l.vlen && memcmp(t.val, l.val, l.vlen) == 0)
            continue;
        if (diff) {
            snprintf(diff->key, sizeof diff->key, "%.*s", (int)l.klen, l.key);
            snprintf(diff->theirs, sizeof diff->theirs, "%.*s", (int)t.vlen, t.val);
            snprintf(diff->mine, sizeof diff->mine, "%.*s", (int)l.vlen, l.val);
        }
        return 1;
    }
    return 0;
}

int rumor_terms_get(const void *body, size_t len, const char *key, char *out, size_t cap)
{
    RUMOR_CHECK(rumor_terms_check(body, len));
    struct line t;
    if (!find(body, len, key, strlen(key), &t))
        return 0;
    if (t.vlen + 1 > cap)
        return rumor_err_set(RUMOR_EINVAL, "terms: the value of '%s' is %zu bytes", key, t.vlen);
    memcpy(out, t.val, t.vlen);
    out[t.vlen] = '\0';
    return 1;
}

int rumor_terms_add(char *buf, size_t cap, const char *key, const char *value)
{
    size_t have = strlen(buf), klen = strlen(key), vlen = strlen(value);
    if (have + klen + vlen + 2 >= cap || have + klen + vlen + 2 > RUMOR_TERMS_MAX)
        return rumor_err_set(RUMOR_EINVAL, "terms: '%s' does not fit", key);
    snprintf(buf + have, cap - have, "%s=%s\n", key, value);
    if (rumor_terms_check(buf, strlen(buf)) < 0) {
        buf[have] = '\0';
        return rumor_err_prefix(RUMOR_EINVAL, "terms: %s", key);
    }
    return 0;
}
