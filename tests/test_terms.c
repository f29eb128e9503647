/* Terms (gossip/terms.h): the settings every peer of a swarm must share, as
 * a HELLO body. Well-formed bodies pass and malformed ones are refused
 * naming the line; two peers' terms compare equal when every key both state
 * agrees, and the first difference names the key and both values; a key
 * only one side states is ignored; building terms refuses what a receiver
 * would refuse. */
#include <string.h>

#include "terms.h"
#include "testutil.h"

static int check(const char *body)
{
    return rumor_terms_check(body, strlen(body));
}

static void test_check(void)
{
    CHECK_OK(check(""));
    CHECK_OK(check("model=mlp:784-256-10\n"));
    CHECK_OK(check("a=\nb-2=x y,z:1\n")); /* empty values, spaces and punctuation */
    static const struct {
        const char *body, *why;
    } bad[] = {
        { "model=mlp", "terms line 1: no newline at its end" },
        { "model\n", "terms line 1: not KEY=VALUE" },
        { "=x\n", "terms line 1: not KEY=VALUE" },
        { "a=1\nModel=x\n", "terms line 2: key character 0x4d" },
        { "a b=1\n", "terms line 1: key character 0x20" },
        { "a=1\nb=\x01\n", "terms line 2: value byte 0x01" },
        { "a=\xc3\xa9\n", "terms line 1: value byte 0xc3" },
        { "a=1\nb=2\na=3\n", "terms line 3: key 'a' a second time" },
        { "abcdefghijabcdefghijabcdefghijabc=1\n", "terms line 1: not KEY=VALUE with a key of "
                                                   "1 to 32" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_ERR(check(bad[i].body), RUMOR_EPROTO, bad[i].why);
    /* a value of 512 bytes passes, 513 does not; a body over the bound */
    char big[RUMOR_TERMS_MAX + 64];
    snprintf(big, sizeof big, "v=%0512d\n", 0);
    CHECK_OK(check(big));
    snprintf(big, sizeof big, "v=%0513d\n", 0);
    CHECK_ERR(check(big), RUMOR_EPROTO, "a value of more than 512 bytes");
    memset(big, 'a', sizeof big);
    CHECK_ERR(rumor_terms_check(big, RUMOR_TERMS_MAX + 1), RUMOR_EPROTO, "terms of 4097 bytes");
    /* a body with a NUL inside is not text */
    CHECK_ERR(rumor_terms_check("a=1\0\n", 5), RUMOR_EPROTO, "value byte 0x00");
}

static void test_compare(void)
{
    const char *mine = "model=mlp:784-256-10\ncompress=none\nlocal-steps=1\n";
    rumor_terms_diff_t d;
    const char *same = "local-steps=1\nmodel=mlp:784-256-10\ncompress=none\n"; /* any order */
    CHECK(rumor_terms_compare(mine, same, strlen(same), &d) == 0);
    /* a key only one side states: ignored (an older peer, a newer one) */
    const char *fewer = "model=mlp:784-256-10\n";
    CHECK(rumor_terms_compare(mine, fewer, strlen(fewer), &d) == 0);
    const char *more = "model=mlp:784-256-10\ncompress=none\nfragments=4\n";
    CHECK(rumor_terms_compare(mine, more, strlen(more), &d) == 0);
    CHECK(rumor_terms_compare(mine, "", 0, &d) == 0);
    /* the first difference in this peer's order, both values named */
    const char *other = "local-steps=8\ncompress=int8\nmodel=mlp:784-256-10\n";
    memset(&d, 0, sizeof d);
    CHECK(rumor_terms_compare(mine, other, strlen(other), &d) == 1);
    CHECKF(!strcmp(d.key, "compress") && !strcmp(d.theirs, "int8") && !strcmp(d.mine, "none"),
           "key %s theirs %s mine %s", d.key, d.theirs, d.mine);
    /* a value that is a prefix of the other differs */
    const char *prefix = "model=mlp:784-256-1\n";
    CHECK(rumor_terms_compare(mine, prefix, strlen(prefix), &d) == 1);
    CHECK(!strcmp(d.key, "model") && !strcmp(d.theirs, "mlp:784-256-1"));
    const char *empty = "compress=\n";
    CHECK(rumor_terms_compare(mine, empty, strlen(empty), &d) == 1);
    CHECK(!strcmp(d.theirs, "") && !strcmp(d.mine, "none"));
    /* a malformed neighbour's body is an error, not a difference */
    CHECK_ERR(rumor_terms_compare(mine, "model", 5, &d), RUMOR_EPROTO, "no newline");
    CHECK(rumor_terms_compare(mine, other, strlen(other), NULL) == 1);
}

static void test_add(void)
{
    char buf[64] = "";
    CHECK_OK(rumor_terms_add(buf, sizeof buf, "model", "mlp:784-10"));
    CHECK_OK(rumor_terms_add(buf, sizeof buf, "local-steps", "8"));
    CHECK(strcmp(buf, "model=mlp:784-10\nlocal-steps=8\n") == 0);
    CHECK_OK(check(buf));
    /* what a receiver would refuse is refused here, and buf is kept */
    CHECK_ERR(rumor_terms_add(buf, sizeof buf, "model", "x"), RUMOR_EINVAL, "a second time");
    CHECK_ERR(rumor_terms_add(buf, sizeof buf, "Bad", "x"), RUMOR_EINVAL, "key character");
    CHECK_ERR(rumor_terms_add(buf, sizeof buf, "v", "line\nbreak"), RUMOR_EINVAL, "");
    CHECK_ERR(rumor_terms_add(buf, sizeof buf, "long", "0123456789012345678901234567890123456789"),
              RUMOR_EINVAL, "does not fit");
    CHECK(strcmp(buf, "model=mlp:784-10\nlocal-steps=8\n") == 0);
    /* a key's value back; one not stated; one that does not fit; a body
     * that is no terms */
    char v[16];
    CHECK(rumor_terms_get(buf, strlen(buf), "local-steps", v, sizeof v) == 1 && !strcmp(v, "8"));
    CHECK(rumor_terms_get(buf, strlen(buf), "model", v, sizeof v) == 1 &&
          !strcmp(v, "mlp:784-10"));
    CHECK(rumor_terms_get(buf, strlen(buf), "local", v, sizeof v) == 0);
    CHECK(rumor_terms_get(buf, strlen(buf), "steps", v, sizeof v) == 0);
    CHECK_ERR(rumor_terms_get(buf, strlen(buf), "model", v, 4), RUMOR_EINVAL, "10 bytes");
    CHECK_ERR(rumor_terms_get("model", 5, "model", v, sizeof v), RUMOR_EPROTO, "");
}

int main(void)
{
    test_check();
    test_compare();
    test_add();
    return tu_finish("test_terms");
}
