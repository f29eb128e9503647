/* The peer list and its endpoints: ports outside 1-65535 (ZeroMQ would
 * wrap 99999 to 34463) and port 0 or '*' (a port nobody else can know) are
 * refused with the endpoint and the range in the message, wherever an
 * endpoint comes in (--peers, a peers file, SWIM's own endpoint and seeds);
 * a peers file's second column keeps a Z85 key's '#' (Z85's alphabet has
 * it: about 38% of keys do), while '#' at a line's start or after a blank
 * still starts a comment. */
#include "peerlist.h"

#include <sys/stat.h>

#include "curve.h"
#include "swim.h"
#include "testutil.h"

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(99);
    }
}

static const char *tmp_file(const char *name)
{
    static char buf[16][512];
    static int i;
    char *p = buf[i++ % 16];
    snprintf(p, 512, "%s/%s", tu_tmpdir(), name);
    return p;
}

/* A fresh public key whose Z85 text has a '#' somewhere but at the start
 * (no key can start with one: a group's first digit is at most 82). */
static void key_with_hash(char z85[RUMOR_CURVE_Z85_LEN + 1])
{
    for (int t = 0; t < 1000; t++) {
        rumor_curve_keypair_t kp;
        if (rumor_curve_keygen(&kp) < 0) {
            fprintf(stderr, "keygen: %s\n", rumor_err_msg());
            exit(99);
        }
        memcpy(z85, kp.public_z85, RUMOR_CURVE_Z85_LEN + 1);
        rumor_curve_keypair_clear(&kp);
        if (strchr(z85, '#'))
            return;
    }
    fprintf(stderr, "no key with '#' in 1000 tries\n");
    exit(99);
}

static void test_endpoints(void)
{
    static const char *const good[] = {
        "tcp://127.0.0.1:7000", "tcp://h:1",          "tcp://h:65535",   "tcp://10.0.0.1:065535",
        "tcp://[::1]:7000",     "tcp://*:7000",       "tcp://0.0.0.0:80", "tcp://eth0;10.0.0.2:7000",
        "ipc:///tmp/peer-0",    "inproc://peer-0",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        int rc = rumor_peerlist_check_endpoint(good[i]);
        CHECKF(rc == 0, "%s: %s", good[i], rumor_err_msg());
    }
    /* Out of range: the message quotes the endpoint and the range. */
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://127.0.0.1:99999"), RUMOR_EINVAL,
              "endpoint 'tcp://127.0.0.1:99999': port 99999 is outside 1-65535");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:65536"), RUMOR_EINVAL,
              "port 65536 is outside 1-65535");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:0"), RUMOR_EINVAL,
              "'tcp://h:0': port 0 is outside 1-65535");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:00000"), RUMOR_EINVAL, "outside 1-65535");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:*"), RUMOR_EINVAL, "1-65535");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:18446744073709551617"), RUMOR_EINVAL,
              "outside 1-65535"); /* 2^64 + 1: no wrap to 1 */
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:4294967297"), RUMOR_EINVAL, "outside");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:-1"), RUMOR_EINVAL, "not a number in 1-65535");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:+80"), RUMOR_EINVAL, "not a number");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:80x"), RUMOR_EINVAL, "not a number");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h:"), RUMOR_EINVAL, "not a number");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h"), RUMOR_EINVAL, "tcp://HOST:PORT");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://:7000"), RUMOR_EINVAL, "tcp://HOST:PORT");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://[::1]"), RUMOR_EINVAL, "tcp://HOST:PORT");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://h;g:0"), RUMOR_EINVAL, "port 0");
    CHECK_ERR(rumor_peerlist_check_endpoint("tcp://a b:1"), RUMOR_EINVAL, "space");
    CHECK_ERR(rumor_peerlist_check_endpoint("127.0.0.1:7000"), RUMOR_EINVAL, "ZeroMQ endpoint");
    CHECK_ERR(rumor_peerlist_check_endpoint(""), RUMOR_EINVAL, "empty");
    CHECK_ERR(rumor_peerlist_check_endpoint(NULL), RUMOR_EINVAL, "empty");
}

static void test_string(void)
{
    rumor_peerlist_t pl;
    CHECK_OK(rumor_peerlist_parse_string("tcp://127.0.0.1:7000,-,tcp://127.0.0.1:7002", &pl));
    CHECK(pl.n == 3 && pl.unknown == 1);
    if (pl.n == 3) {
        CHECK(strcmp(pl.ep[0], "tcp://127.0.0.1:7000") == 0);
        CHECK(pl.ep[1] == NULL);
        CHECK(strcmp(pl.ep[2], "tcp://127.0.0.1:7002") == 0);
        CHECK(!pl.key[0] && !pl.key[1] && !pl.key[2]);
    }
    rumor_peerlist_clear(&pl);
    CHECK(pl.n == 0 && !pl.ep && !pl.buf);
    rumor_peerlist_clear(&pl); /* twice: harmless */

    CHECK_ERR(rumor_peerlist_parse_string("tcp://127.0.0.1:7000,tcp://127.0.0.1:99999", &pl),
              RUMOR_EINVAL, "peer 1: endpoint 'tcp://127.0.0.1:99999': port 99999 is outside "
                            "1-65535");
    CHECK(pl.n == 0 && !pl.ep);
    CHECK_ERR(rumor_peerlist_parse_string("tcp://127.0.0.1:0,tcp://127.0.0.1:7001", &pl),
              RUMOR_EINVAL, "peer 0: endpoint 'tcp://127.0.0.1:0': port 0 is outside 1-65535");
    CHECK_ERR(rumor_peerlist_parse_string("tcp://a:1,,tcp://b:2", &pl), RUMOR_EINVAL,
              "peer 1 is empty");
    CHECK_ERR(rumor_peerlist_parse_string("tcp://a:1,", &pl), RUMOR_EINVAL, "peer 1 is empty");
    CHECK_ERR(rumor_peerlist_parse_string("", &pl), RUMOR_EINVAL, "peer 0 is empty");
    CHECK_ERR(rumor_peerlist_parse_string("tcp://a:1,tcp://b:2,tcp://a:1", &pl), RUMOR_EINVAL,
              "peers 0 and 2 are both 'tcp://a:1'");
    CHECK_ERR(rumor_peerlist_parse_string("tcp://a:1,host:2", &pl), RUMOR_EINVAL,
              "peer 1 'host:2': expected a ZeroMQ endpoint");
}

static void test_file(void)
{
    char k0[41], k1[41], k3[41];
    key_with_hash(k0);
    key_with_hash(k1);
    key_with_hash(k3);
    /* A key whose last character is '#' (group value 84 mod 85), right
     * before a comment. */
    uint8_t raw[32] = { 0 };
    raw[31] = 84;
    char k2[41];
    rumor_curve_z85_encode(raw, k2);
    CHECK(k2[39] == '#');

    const char *f = tmp_file("peers.txt");
    char text[2048];
    char comment[1200];
    memset(comment, 'x', sizeof comment - 1);
    comment[sizeof comment - 1] = '\0';
    snprintf(text, sizeof text,
             "# the swarm: ENDPOINT KEY\n"
             "tcp://127.0.0.1:7000 %s\n"
             "  tcp://127.0.0.1:7001\t%s   # peer one, a comment after a blank\r\n"
             "\n"
             "#%s\n"
             "tcp://127.0.0.1:7002 %s#not-a-comment\n"
             "- %s\n"
             "tcp://127.0.0.1:7004 -\n"
             "tcp://127.0.0.1:7005\n",
             k0, k1, comment, k2, k3);
    write_text(f, text);
    rumor_peerlist_t pl;
    CHECK_OK(rumor_peerlist_parse_file(f, &pl));
    CHECK(pl.n == 6 && pl.unknown == 1);
    if (pl.n == 6) {
        CHECK(strcmp(pl.ep[0], "tcp://127.0.0.1:7000") == 0);
        CHECKF(pl.key[0] && strcmp(pl.key[0], k0) == 0, "key 0 '%s', expected '%s'",
               pl.key[0] ? pl.key[0] : "(none)", k0);
        CHECK(strcmp(pl.ep[1], "tcp://127.0.0.1:7001") == 0);
        CHECKF(pl.key[1] && strcmp(pl.key[1], k1) == 0, "key 1 '%s', expected '%s'",
               pl.key[1] ? pl.key[1] : "(none)", k1);
        /* a '#' inside a word is part of it (this key is not valid Z85
         * text, but the column is kept whole for the caller to judge) */
        CHECK(pl.key[2] && strncmp(pl.key[2], k2, 40) == 0 &&
              strcmp(pl.key[2] + 40, "#not-a-comment") == 0);
        CHECK(pl.ep[3] == NULL && pl.key[3] && strcmp(pl.key[3], k3) == 0);
        CHECK(strcmp(pl.ep[4], "tcp://127.0.0.1:7004") == 0 && pl.key[4] == NULL);
        CHECK(strcmp(pl.ep[5], "tcp://127.0.0.1:7005") == 0 && pl.key[5] == NULL);
        uint8_t pk[32];
        CHECK(pl.key[0] && rumor_curve_z85_decode(pl.key[0], pk) == 0);
    }
    rumor_peerlist_clear(&pl);

    /* A key file holding a key with '#' and a comment after it. */
    snprintf(text, sizeof text, "tcp://h:1 %s # the last character of the key is '#'\n", k2);
    write_text(f, text);
    CHECK_OK(rumor_peerlist_parse_file(f, &pl));
    CHECK(pl.n == 1 && pl.key && pl.key[0] && strcmp(pl.key[0], k2) == 0);
    rumor_peerlist_clear(&pl);

    /* Errors name file:line. */
    snprintf(text, sizeof text, "tcp://h:1\n# x\ntcp://h:99999 %s\n", k0);
    write_text(f, text);
    CHECK_ERR(rumor_peerlist_parse_file(f, &pl), RUMOR_EINVAL,
              "peers.txt:3: peer 1: endpoint 'tcp://h:99999': port 99999 is outside 1-65535");
    CHECK(pl.n == 0 && !pl.ep && !pl.keybuf);
    write_text(f, "tcp://h:0\n");
    CHECK_ERR(rumor_peerlist_parse_file(f, &pl), RUMOR_EINVAL,
              "peers.txt:1: peer 0: endpoint 'tcp://h:0': port 0 is outside 1-65535");
    write_text(f, "tcp://h:1\ntcp://h:2 KEY extra\n");
    CHECK_ERR(rumor_peerlist_parse_file(f, &pl), RUMOR_EFORMAT,
              "peers.txt:2: expected 'ENDPOINT [PUBLIC-KEY]'");
    write_text(f, "tcp://h:1\ntcp://h:2\n\ntcp://h:1 # again\n");
    CHECK_ERR(rumor_peerlist_parse_file(f, &pl), RUMOR_EINVAL,
              "peers.txt:4: peers 0 and 2 are both 'tcp://h:1'");
    write_text(f, "# nobody\n\n   # at all\n");
    CHECK_ERR(rumor_peerlist_parse_file(f, &pl), RUMOR_EFORMAT, "lists no endpoint");
    CHECK_ERR(rumor_peerlist_parse_file(tmp_file("missing.txt"), &pl), RUMOR_ESYS,
              "missing.txt");
    CHECK_ERR(rumor_peerlist_parse_file(tu_tmpdir(), &pl), RUMOR_ESYS, "is a directory");
    unlink(f);
}

static int no_send(void *ctx, uint64_t to, const char *ep, int type, uint32_t seq,
                   const void *body, size_t len)
{
    (void)ctx, (void)to, (void)ep, (void)type, (void)seq, (void)body, (void)len;
    return 0;
}

/* SWIM's own endpoint and its seeds go through the same check. */
static void test_swim(void)
{
    rumor_swim_config_t c = { 0 };
    c.self_id = 0x1111;
    c.self_endpoint = "tcp://10.9.0.1:99999";
    rumor_swim_t *sw = NULL;
    CHECK_ERR(rumor_swim_create(&c, no_send, NULL, &sw), RUMOR_EINVAL,
              "endpoint 'tcp://10.9.0.1:99999': port 99999 is outside 1-65535");
    CHECK(sw == NULL);
    c.self_endpoint = "tcp://10.9.0.1:7000";
    CHECK_OK(rumor_swim_create(&c, no_send, NULL, &sw));
    if (!sw)
        return;
    CHECK_ERR(rumor_swim_add_seed(sw, "tcp://10.9.0.2:0"), RUMOR_EINVAL,
              "seed: endpoint 'tcp://10.9.0.2:0': port 0 is outside 1-65535");
    CHECK_ERR(rumor_swim_add_seed(sw, "tcp://10.9.0.2:70000"), RUMOR_EINVAL, "1-65535");
    CHECK_OK(rumor_swim_add_seed(sw, "tcp://10.9.0.2:7000"));
    rumor_swim_destroy(&sw);
}

/* --join: "[KEY@]ADDRESS,..." (open membership). */
static void test_join(void)
{
    rumor_peerlist_t pl;
    char z[RUMOR_CURVE_Z85_LEN + 1];
    key_with_hash(z); /* Z85 has '@' and '#' too: the last '@' splits */
    char list[256];
    snprintf(list, sizeof list, "10.0.0.1:7000,peer-0@tcp://h.example:7001,%s@[::1]:7002", z);
    CHECK_OK(rumor_peerlist_parse_join(list, &pl));
    CHECK(pl.n == 3);
    if (pl.n == 3) {
        CHECK(!strcmp(pl.ep[0], "tcp://10.0.0.1:7000") && pl.key[0] == NULL);
        CHECK(!strcmp(pl.ep[1], "tcp://h.example:7001") && !strcmp(pl.key[1], "peer-0"));
        CHECK(!strcmp(pl.ep[2], "tcp://[::1]:7002") && !strcmp(pl.key[2], z));
    }
    rumor_peerlist_clear(&pl);
    struct {
        const char *list, *why;
    } bad[] = {
        { "", "no join address" },
        { "h:7000,,h:7001", "an empty entry" },
        { "h:7000,", "an empty entry" },
        { ",h:7000", "an empty entry" },
        { "h:0", "join address 0: endpoint 'tcp://h:0': port 0 is outside 1-65535" },
        { "h:99999", "port 99999 is outside" },
        { "h", "expected tcp://HOST:PORT" },
        { "ipc:///tmp/x", "peers listen on tcp://" },
        { "@h:7000", "expected KEY@ADDRESS" },
        { "k@", "join address 0 is empty" },
        { "h:7000,tcp://h:7000", "join addresses 0 and 1 are both 'tcp://h:7000'" },
        { "h :7000", "a space or control character" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_ERR(rumor_peerlist_parse_join(bad[i].list, &pl), RUMOR_EINVAL, bad[i].why);
        CHECK(pl.n == 0 && pl.ep == NULL);
    }
    CHECK_ERR(rumor_peerlist_parse_join(NULL, &pl), RUMOR_EINVAL, "no join address");
    char many[2048] = "";
    for (int i = 0; i <= RUMOR_JOIN_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sh:%d", i ? "," : "",
                 7000 + i);
    CHECK_ERR(rumor_peerlist_parse_join(many, &pl), RUMOR_EINVAL, "more than 64 join addresses");
}

/* The address a peer binds: HOST:PORT and tcp://HOST:PORT alike; names
 * become addresses (ZeroMQ binds only numeric ones, '*' and interfaces);
 * a name that does not resolve is refused up front. And whether it can be
 * bound here, tried with a socket of our own. */
static void test_bind(void)
{
    char out[256];
    static const struct {
        const char *given, *want;
    } ok[] = {
        { "127.0.0.1:7000", "tcp://127.0.0.1:7000" },
        { "tcp://127.0.0.1:7000", "tcp://127.0.0.1:7000" },
        { "localhost:7000", "tcp://127.0.0.1:7000" },   /* /etc/hosts */
        { "tcp://localhost:7001", "tcp://127.0.0.1:7001" },
        { "tcp://*:7000", "tcp://*:7000" },
        { "0.0.0.0:7000", "tcp://0.0.0.0:7000" },
        { "tcp://[::1]:7000", "tcp://[::1]:7000" },
        { "tcp://lo:7000", "tcp://lo:7000" },           /* an interface's name */
        { "ipc:///tmp/rumor.sock", "ipc:///tmp/rumor.sock" },
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        out[0] = '\0';
        CHECK_OK(rumor_peerlist_bind_endpoint(ok[i].given, out, sizeof out));
        CHECKF(strcmp(out, ok[i].want) == 0, "%s -> %s, expected %s", ok[i].given, out,
               ok[i].want);
    }
    CHECK_ERR(rumor_peerlist_bind_endpoint("tcp://no-such-host.invalid:7000", out, sizeof out),
              RUMOR_EINVAL, "'no-such-host.invalid' is neither an address of this machine nor a "
                            "name that resolves");
    CHECK_ERR(rumor_peerlist_bind_endpoint("127.0.0.1:0", out, sizeof out), RUMOR_EINVAL,
              "port 0 is outside 1-65535");
    CHECK_ERR(rumor_peerlist_bind_endpoint("127.0.0.1", out, sizeof out), RUMOR_EINVAL,
              "expected tcp://HOST:PORT");
    CHECK_ERR(rumor_peerlist_bind_endpoint("", out, sizeof out), RUMOR_EINVAL, "empty address");

    /* a port we hold is in use; a free one is not; 192.0.2.1 (TEST-NET-1)
     * is no address of this machine */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0 &&
          getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    CHECK_ERR(rumor_peerlist_try_bind(ep), RUMOR_ESYS, "another process listens there");
    close(fd);
    CHECK_OK(rumor_peerlist_try_bind(ep));
    CHECK_ERR(rumor_peerlist_try_bind("tcp://192.0.2.1:7000"), RUMOR_EINVAL,
              "192.0.2.1 is not an address of this machine");
    CHECK_OK(rumor_peerlist_try_bind("ipc:///tmp/x.sock"));
}

int main(void)
{
    test_bind();
    test_endpoints();
    test_string();
    test_file();
    test_swim();
    test_join();
    rmdir(tu_tmpdir());
    return tu_finish("test_peerlist");
}
