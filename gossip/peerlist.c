/* The peer list: --peers and --peers-file, and endpoint checks (see
 * peerlist.h). */
#include "peerlist.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define EP_SHOW 200 /* characters of an endpoint a message quotes */

/* ------------------------------------------------------- endpoints */

int rumor_peerlist_check_endpoint(const char *ep)
{
    if (!ep || !*ep)
        return rumor_err_set(RUMOR_EINVAL, "empty endpoint: expected one such as tcp://HOST:PORT");
    for (const char *c = ep; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': a space or control character",
                                 EP_SHOW, ep);
    const char *sep = strstr(ep, "://");
    if (!sep || sep == ep)
        return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': expected a ZeroMQ endpoint such as "
                                           "tcp://HOST:PORT", EP_SHOW, ep);
    if (sep - ep != 3 || memcmp(ep, "tcp", 3) != 0)
        return 0; /* ipc://, inproc://, ...: no port */
    const char *addr = sep + 3;
    const char *semi = strrchr(addr, ';'); /* "SOURCE;HOST:PORT": the peer is after it */
    if (semi)
        addr = semi + 1;
    const char *colon = strrchr(addr, ':');
    const char *bracket = strrchr(addr, ']'); /* "[::1]:7000" */
    if (!colon || colon == addr || (bracket && colon < bracket))
        return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': expected tcp://HOST:PORT with a "
                                           "port in %d-%d", EP_SHOW, ep, RUMOR_PORT_MIN,
                             RUMOR_PORT_MAX);
    const char *port = colon + 1;
    size_t len = strlen(port);
    if (!len || strspn(port, "0123456789") != len) {
        if (strcmp(port, "*") == 0)
            return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': port * (any free port) cannot "
                                               "be known by the other peers: give a port in "
                                               "%d-%d", EP_SHOW, ep, RUMOR_PORT_MIN,
                                 RUMOR_PORT_MAX);
        return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': port '%.*s' is not a number in "
                                           "%d-%d", EP_SHOW, ep, EP_SHOW, port, RUMOR_PORT_MIN,
                             RUMOR_PORT_MAX);
    }
    /* Decimal digits only: no sign, no overflow past 6 digits (ZeroMQ keeps
     * the low 16 bits of whatever it parsed, so 99999 would be 34463). */
    unsigned long v = 0;
    for (const char *d = port; *d && v <= RUMOR_PORT_MAX; d++)
        v = v * 10 + (unsigned long)(*d - '0');
    if (v < RUMOR_PORT_MIN || v > RUMOR_PORT_MAX)
        return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': port %.*s is outside %d-%d%s",
                             EP_SHOW, ep, EP_SHOW, port, RUMOR_PORT_MIN, RUMOR_PORT_MAX,
                             v ? "" : " (0 is any free port, which the other peers cannot "
                                      "know)");
    return 0;
}

/* Splits a checked tcp:// endpoint (after "tcp://" and any "SOURCE;")
 * into its host (brackets of an IPv6 address removed) and port. */
static int split_host_port(const char *ep, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *addr = strstr(ep, "://") + 3;
    const char *semi = strrchr(addr, ';');
    if (semi)
        addr = semi + 1;
    const char *colon = strrchr(addr, ':');
    const char *h = addr, *hend = colon;
    if (*h == '[' && hend > h && hend[-1] == ']')
        h++, hend--;
    if ((size_t)(hend - h) >= hcap || strlen(colon + 1) >= pcap)
        return rumor_err_set(RUMOR_EINVAL, "endpoint '%.*s': too long", EP_SHOW, ep);
    memcpy(host, h, (size_t)(hend - h));
    host[hend - h] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

/* 4 or 6 for a numeric IPv4 or IPv6 address, else 0. */
static int numeric_family(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, host, buf) == 1)
        return 4;
    if (inet_pton(AF_INET6, host, buf) == 1)
        return 6;
    return 0;
}

int rumor_peerlist_bind_endpoint(const char *given, char *out, size_t cap)
{
    char ep[600];
    if (!given || !*given)
        return rumor_err_set(RUMOR_EINVAL, "empty address: expected HOST:PORT or tcp://HOST:PORT");
    /* HOST:PORT, as --join takes it */
    if (!strstr(given, "://"))
        snprintf(ep, sizeof ep, "tcp://%s", given);
    else
        snprintf(ep, sizeof ep, "%s", given);
    RUMOR_CHECK(rumor_peerlist_check_endpoint(ep));
    if (strncmp(ep, "tcp://", 6) != 0 || strchr(ep + 6, ';')) {
        if ((size_t)snprintf(out, cap, "%s", ep) >= cap)
            return rumor_err_set(RUMOR_EINVAL, "address '%.*s': too long", EP_SHOW, given);
        return 0;
    }
    char host[256], port[16];
    RUMOR_CHECK(split_host_port(ep, host, sizeof host, port, sizeof port));
    char addr[256] = "";
    int fam = numeric_family(host);
    if (!strcmp(host, "*") || fam || if_nametoindex(host) != 0) {
        snprintf(addr, sizeof addr, "%s", host);
    } else {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(host, NULL, &hints, &res);
        if (g != 0)
            return rumor_err_set(RUMOR_EINVAL, "address '%.*s': '%s' is neither an address of "
                                 "this machine nor a name that resolves (%s)", EP_SHOW, given,
                                 host, gai_strerror(g));
        const struct addrinfo *pick = res;
        for (const struct addrinfo *a = res; a; a = a->ai_next)
            if (a->ai_family == AF_INET) { /* IPv4 first: what ZeroMQ dials by default */
                pick = a;
                break;
            }
        const void *src = pick->ai_family == AF_INET
                              ? (const void *)&((const struct sockaddr_in *)pick->ai_addr)->sin_addr
                              : (const void *)&((const struct sockaddr_in6 *)pick->ai_addr)->sin6_addr;
        inet_ntop(pick->ai_family, src, addr, sizeof addr);
        fam = pick->ai_family == AF_INET ? 4 : 6;
        freeaddrinfo(res);
    }
    if ((size_t)snprintf(out, cap, fam == 6 ? "tcp://[%s]:%s" : "tcp://%s:%s", addr, port) >= cap)
        return rumor_err_set(RUMOR_EINVAL, "address '%.*s': too long", EP_SHOW, given);
    return 0;
}

int rumor_peerlist_try_bind(const char *ep)
{
    if (strncmp(ep, "tcp://", 6) != 0 || strchr(ep + 6, ';'))
        return 0;
    char host[256], port[16];
    RUMOR_CHECK(split_host_port(ep, host, sizeof host, port, sizeof port));
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    int fam = numeric_family(host);
    unsigned short p = (unsigned short)atoi(port);
    if (!strcmp(host, "*") || fam == 4) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(p);
        if (fam == 4)
            inet_pton(AF_INET, host, &a->sin_addr);
        else
            a->sin_addr.s_addr = htonl(INADDR_ANY);
        len = sizeof *a;
    } else if (fam == 6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(p);
        inet_pton(AF_INET6, host, &a->sin6_addr);
        len = sizeof *a;
    } else {
        return 0; /* an interface name: ZeroMQ resolves it */
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "cannot open a socket to try %.*s", EP_SHOW, ep);
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as ZeroMQ does */
    int rc = bind(fd, (struct sockaddr *)&ss, len), e = errno;
    close(fd);
    if (rc == 0)
        return 0;
    if (e == EADDRNOTAVAIL)
        return rumor_err_set(RUMOR_EINVAL, "cannot listen on %.*s: %s is not an address of this "
                             "machine", EP_SHOW, ep, host);
    errno = e;
    return rumor_err_sys(RUMOR_ESYS, "cannot listen on %.*s%s", EP_SHOW, ep,
                         e == EADDRINUSE ? " (another process listens there)" : "");
}

/* ------------------------------------------------------- the list */

void rumor_peerlist_clear(rumor_peerlist_t *pl)
{
    if (!pl)
        return;
    free(pl->ep);
    free(pl->key);
    free(pl->buf);
    free(pl->keybuf);
    memset(pl, 0, sizeof *pl);
}

/* Checks every entry: "-" becomes NULL (counted in unknown), the others must
 * be endpoints and distinct. line: each entry's line in the file at path,
 * or NULL for --peers. Clears *pl on error. */
static int check_entries(rumor_peerlist_t *pl, const char *path, const int *line)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < pl->n; i++) {
        if (strcmp(pl->ep[i], "-") == 0) { /* address not known: membership learns it */
            pl->ep[i] = NULL;
            pl->unknown++;
            continue;
        }
        if (!strstr(pl->ep[i], "://"))
            rc = rumor_err_set(RUMOR_EINVAL, "peer %d '%.*s': expected a ZeroMQ endpoint such as "
                                             "tcp://HOST:PORT, or - for an address not known",
                               i, EP_SHOW, pl->ep[i]);
        else if ((rc = rumor_peerlist_check_endpoint(pl->ep[i])) < 0)
            rumor_err_prefix(rc, "peer %d", i);
        for (int j = 0; rc == 0 && j < i; j++)
            if (pl->ep[j] && strcmp(pl->ep[i], pl->ep[j]) == 0)
                rc = rumor_err_set(RUMOR_EINVAL, "peers %d and %d are both '%.*s'", j, i, EP_SHOW,
                                   pl->ep[i]);
        if (rc < 0 && path)
            rumor_err_prefix(rc, "%s:%d", path, line[i]);
    }
    if (rc < 0)
        rumor_peerlist_clear(pl);
    return rc;
}

int rumor_peerlist_parse_string(const char *list, rumor_peerlist_t *pl)
{
    memset(pl, 0, sizeof *pl);
    if (!list)
        return rumor_err_set(RUMOR_EINVAL, "no peer list");
    int n = 1;
    for (const char *c = list; *c; c++)
        n += *c == ',';
    if (n > (1 << 20))
        return rumor_err_set(RUMOR_EINVAL, "peer list: more than %d entries", 1 << 20);
    pl->buf = strdup(list);
    pl->ep = calloc((size_t)n, sizeof *pl->ep);
    pl->key = calloc((size_t)n, sizeof *pl->key);
    if (!pl->buf || !pl->ep || !pl->key) {
        rumor_peerlist_clear(pl);
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    }
    char *tok = pl->buf;
    for (int i = 0; i < n; i++) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        if (!*tok) {
            rumor_peerlist_clear(pl);
            return rumor_err_set(RUMOR_EINVAL, "peer list '%.*s': peer %d is empty", EP_SHOW,
                                 list, i);
        }
        pl->ep[pl->n++] = tok;
        tok = comma ? comma + 1 : tok + strlen(tok);
    }
    return check_entries(pl, NULL, NULL);
}

/* A growing run of NUL-terminated strings. */
struct strs {
    char *s;
    size_t len, cap;
};

/* Appends tok and a NUL; *off gets where it starts. */
static int strs_add(struct strs *b, const char *tok, size_t *off)
{
    size_t n = strlen(tok) + 1;
    if (b->len + n > b->cap) {
        size_t nc = (b->len + n) * 2;
        char *p = realloc(b->s, nc);
        if (!p)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        b->s = p;
        b->cap = nc;
    }
    memcpy(b->s + b->len, tok, n);
    *off = b->len;
    b->len += n;
    return 0;
}

/* Splits a line into at most 3 words at spaces and tabs, stopping at a
 * comment: a '#' that starts a word (at the start of the line or after a
 * blank). A '#' inside a word, as in a Z85 key, is part of the word.
 * Returns the number of words (3: too many). */
static int split_line(char *s, char *word[3])
{
    int n = 0;
    for (;;) {
        s += strspn(s, " \t");
        if (!*s || *s == '#' || n == 3)
            return n;
        word[n++] = s;
        s += strcspn(s, " \t");
        if (*s)
            *s++ = '\0';
    }
}

/* Where the entries of a peers file go while it is read. */
struct reading {
    struct strs eps, keys;
    size_t *ep_off, *key_off; /* key_off: SIZE_MAX for none */
    int *line;
    int n, cap;
};

static int add_entry(struct reading *r, const char *ep, const char *key, int lineno)
{
    if (r->n == r->cap) {
        int nc = r->cap ? 2 * r->cap : 16;
        size_t *a = realloc(r->ep_off, (size_t)nc * sizeof *a);
        if (a)
            r->ep_off = a;
        size_t *b = realloc(r->key_off, (size_t)nc * sizeof *b);
        if (b)
            r->key_off = b;
        int *c = realloc(r->line, (size_t)nc * sizeof *c);
        if (c)
            r->line = c;
        if (!a || !b || !c)
            return rumor_err_set(RUMOR_ENOMEM, "out of memory");
        r->cap = nc;
    }
    r->key_off[r->n] = SIZE_MAX;
    RUMOR_CHECK(strs_add(&r->eps, ep, &r->ep_off[r->n]));
    if (key && strcmp(key, "-") != 0)
        RUMOR_CHECK(strs_add(&r->keys, key, &r->key_off[r->n]));
    r->line[r->n++] = lineno;
    return 0;
}

/* A key column naming a file beside the peers file (a relative path from
 * the file's directory that exists there) becomes that file's path, as an
 * INI file's paths are its directory's; anything else (a Z85 key, an
 * absolute path, one relative to the working directory) stays as written. */
static const char *beside(const char *path, const char *key, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    struct stat st;
    if (!slash || key[0] == '/' || !strcmp(key, "-"))
        return key;
    if ((size_t)snprintf(buf, cap, "%.*s/%s", (int)(slash - path), path, key) >= cap ||
        stat(buf, &st) != 0 || !S_ISREG(st.st_mode))
        return key;
    return buf;
}

/* Reads every "ENDPOINT [KEY]" line of f. */
static int read_lines(FILE *f, const char *path, struct reading *r)
{
    char near[4096];
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    errno = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        char shown[EP_SHOW + 1];
        snprintf(shown, sizeof shown, "%s", line + strspn(line, " \t"));
        char *word[3];
        int n = split_line(line, word);
        if (n == 3)
            rc = rumor_err_set(RUMOR_EFORMAT, "%s:%d: expected 'ENDPOINT [PUBLIC-KEY]' (a comment "
                                              "starts with '#' after a blank), got '%s'",
                               path, lineno, shown);
        else if (n > 0)
            rc = add_entry(r, word[0], n == 2 ? beside(path, word[1], near, sizeof near) : NULL,
                           lineno);
    }
    if (rc == 0 && ferror(f))
        rc = rumor_err_sys(RUMOR_ESYS, "peers file '%s': read", path);
    free(line);
    return rc;
}

static void reading_free(struct reading *r)
{
    free(r->eps.s);
    free(r->keys.s);
    free(r->ep_off);
    free(r->key_off);
    free(r->line);
}

/* Moves what was read into pl: its endpoints and keys (NULL where none). */
static int take_entries(rumor_peerlist_t *pl, struct reading *r)
{
    pl->ep = calloc((size_t)r->n, sizeof *pl->ep);
    pl->key = calloc((size_t)r->n, sizeof *pl->key);
    if (!pl->ep || !pl->key)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    pl->buf = r->eps.s;
    pl->keybuf = r->keys.s;
    r->eps.s = r->keys.s = NULL;
    for (int i = 0; i < r->n; i++) {
        pl->ep[i] = pl->buf + r->ep_off[i];
        pl->key[i] = r->key_off[i] == SIZE_MAX ? NULL : pl->keybuf + r->key_off[i];
    }
    pl->n = r->n;
    return 0;
}

int rumor_peerlist_parse_file(const char *path, rumor_peerlist_t *pl)
{
    memset(pl, 0, sizeof *pl);
    FILE *f = fopen(path, "r");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "peers file '%s'", path);
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return rumor_err_set(RUMOR_ESYS, "peers file '%s': is a directory", path);
    }
    struct reading r;
    memset(&r, 0, sizeof r);
    int rc = read_lines(f, path, &r);
    fclose(f);
    if (rc == 0 && r.n == 0)
        rc = rumor_err_set(RUMOR_EFORMAT, "peers file '%s' lists no endpoint", path);
    if (rc == 0)
        rc = take_entries(pl, &r);
    if (rc == 0)
        rc = check_entries(pl, path, r.line);
    else
        rumor_peerlist_clear(pl);
    reading_free(&r);
    return rc;
}

/* ------------------------------------------------------- join addresses */

/* One "[KEY@]ADDRESS" of --join into the two runs of strings. */
static int join_entry(const char *tok, int i, struct reading *r)
{
    const char *at = strrchr(tok, '@'); /* Z85 keys may hold '@'; addresses do not */
    char key[256] = "", ep[512];
    if (at) {
        if (at == tok || (size_t)(at - tok) >= sizeof key)
            return rumor_err_set(RUMOR_EINVAL, "join address %d '%.*s': expected KEY@ADDRESS with "
                                               "a key name, a Z85 key or a .pub file before '@'",
                                 i, EP_SHOW, tok);
        memcpy(key, tok, (size_t)(at - tok));
        key[at - tok] = '\0';
        tok = at + 1;
    }
    if (!*tok)
        return rumor_err_set(RUMOR_EINVAL, "join address %d is empty", i);
    int n = snprintf(ep, sizeof ep, "%s%s", strstr(tok, "://") ? "" : "tcp://", tok);
    if (n < 0 || (size_t)n >= sizeof ep)
        return rumor_err_set(RUMOR_EINVAL, "join address %d '%.*s' is too long", i, EP_SHOW, tok);
    int rc = rumor_peerlist_check_endpoint(ep);
    if (rc < 0)
        return rumor_err_prefix(rc, "join address %d", i);
    if (strncmp(ep, "tcp://", 6) != 0)
        return rumor_err_set(RUMOR_EINVAL, "join address %d '%.*s': peers listen on tcp://", i,
                             EP_SHOW, ep);
    return add_entry(r, ep, at ? key : NULL, i);
}

int rumor_peerlist_parse_join(const char *list, rumor_peerlist_t *pl)
{
    memset(pl, 0, sizeof *pl);
    if (!list || !*list)
        return rumor_err_set(RUMOR_EINVAL, "no join address: expected HOST:PORT[,HOST:PORT...]");
    char *copy = strdup(list);
    struct reading r;
    memset(&r, 0, sizeof r);
    int rc = copy ? 0 : rumor_err_set(RUMOR_ENOMEM, "out of memory");
    char *save = NULL;
    int i = 0;
    for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; rc == 0 && tok;
         tok = strtok_r(NULL, ",", &save), i++)
        rc = i >= RUMOR_JOIN_MAX
                 ? rumor_err_set(RUMOR_EINVAL, "more than %d join addresses", RUMOR_JOIN_MAX)
                 : join_entry(tok, i, &r);
    if (rc == 0 && (r.n == 0 || strstr(list, ",,") || list[0] == ',' ||
                    list[strlen(list) - 1] == ','))
        rc = rumor_err_set(RUMOR_EINVAL, "join addresses '%.*s': an empty entry", EP_SHOW, list);
    if (rc == 0)
        rc = take_entries(pl, &r);
    for (int k = 0; rc == 0 && k < pl->n; k++)
        for (int j = 0; rc == 0 && j < k; j++)
            if (strcmp(pl->ep[j], pl->ep[k]) == 0)
                rc = rumor_err_set(RUMOR_EINVAL, "join addresses %d and %d are both '%.*s'", j, k,
                                   EP_SHOW, pl->ep[k]);
    if (rc < 0)
        rumor_peerlist_clear(pl);
    free(copy);
    reading_free(&r);
    return rc;
}
