/* CurveZMQ keys and key files (see curve.h): Z85, keypairs, peer ids, and
 * reading and writing key files; the text parsing the allow-lists share
 * (curve_int.h). Allow-lists are in curve_allow.c, the ZAP handler in
 * curve_zap.c. */
#include "curve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curve_int.h"
#include "wire.h"

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

/* ------------------------------------------------------- key files
 * (the text helpers are curve_int.h's, shared with the allow-lists) */

int curve_slurp(const char *path, size_t cap, char **out, size_t *len, struct stat *st)
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

char *curve_trim(char *s)
{
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        s[--n] = '\0';
    return s;
}

void curve_cut_comment(char *s)
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

int curve_at_line(int rc, const char *path, int line)
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
        return curve_at_line(RUMOR_EFORMAT, path, line);
    }
    return 0;
}

int curve_parse_keyfile(const char *path, char *text, int bare, curve_keyfile_t *kf)
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
        curve_cut_comment(s);
        s = curve_trim(s);
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
        char *name = curve_trim(s), *value = curve_trim(eq + 1);
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
    RUMOR_CHECK(curve_slurp(path, KEYFILE_MAX, &text, &len, &st));
    curve_keyfile_t kf;
    int rc = curve_parse_keyfile(path, text, 0, &kf);
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
    RUMOR_CHECK(curve_slurp(path, KEYFILE_MAX, &text, &len, &st));
    curve_keyfile_t kf;
    int rc = curve_parse_keyfile(path, text, 1, &kf);
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
