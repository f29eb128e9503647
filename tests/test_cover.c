/* The interval set that tells a receiver which element ranges of a round
 * have arrived (gossip/cover.h), on its own, without sockets:
 *
 * 1. Cases by hand: ranges that are adjacent (one interval), that overlap
 *    by one element on either side (a duplicate, nothing changes), that
 *    touch both neighbours (the gap between them filled: two intervals
 *    become one), that sit inside a gap (a new interval); counts of a
 *    query range that starts in a gap and reaches one element into the next
 *    interval, that ends one element into it, that spans several intervals;
 *    membership and runs at every interval boundary; the limit of
 *    MX_COVER_MAX_IVS intervals.
 * 2. Random ranges against a bitmap, the obvious reference: for thousands
 *    of sets built from random ranges (short ones, so that ranges touch and
 *    overlap by one often), every verdict of mx_cover_check, the count of
 *    covered elements, the intervals themselves (sorted, disjoint, never
 *    adjacent, the bitmap's runs), and mx_cover_within, mx_cover_has and
 *    mx_cover_run for random queries agree with the bitmap.
 *
 * A round is judged complete where mx_cover_within(range) equals the
 * range's length: one element counted too many makes a round with a hole
 * look complete, so every count here is exact. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cover.h"
#include "err.h"
#include "testutil.h"

/* Adds [lo, hi), which must be accepted. */
static void add(mx_cover_t *c, uint64_t lo, uint64_t hi)
{
    int r = mx_cover_check(c, lo, hi);
    CHECKF(r == 0, "mx_cover_check([%llu, %llu)) = %d, expected 0 (new)", (unsigned long long)lo,
           (unsigned long long)hi, r);
    if (r == 0)
        mx_cover_add(c, lo, hi);
}

/* The set holds exactly the n intervals iv (flat lo, hi pairs). */
static int holds(const mx_cover_t *c, const uint64_t *iv, int n)
{
    uint64_t sum = 0;
    if (c->n != n)
        return 0;
    for (int i = 0; i < n; i++) {
        if (c->iv[i][0] != iv[2 * i] || c->iv[i][1] != iv[2 * i + 1])
            return 0;
        sum += iv[2 * i + 1] - iv[2 * i];
    }
    return c->covered == sum;
}

static void print_set(const char *what, const mx_cover_t *c)
{
    fprintf(stderr, "  %s: %d intervals, %llu covered:", what, c->n,
            (unsigned long long)c->covered);
    for (int i = 0; i < c->n && i < 16; i++)
        fprintf(stderr, " [%llu, %llu)", (unsigned long long)c->iv[i][0],
                (unsigned long long)c->iv[i][1]);
    fputc('\n', stderr);
}

#define HOLDS(c, ...)                                                                    \
    do {                                                                                 \
        static const uint64_t want_[] = { __VA_ARGS__ };                                 \
        int ok_ = holds(c, want_, (int)(sizeof want_ / sizeof want_[0] / 2));            \
        CHECKF(ok_, "expected the intervals %s", #__VA_ARGS__);                          \
        if (!ok_)                                                                        \
            print_set("got", c);                                                         \
    } while (0)

#define WITHIN(c, lo, hi, want)                                                          \
    CHECKF(mx_cover_within(c, lo, hi) == (want), "mx_cover_within([%d, %d)) = %llu, "    \
           "expected %d", (int)(lo), (int)(hi),                                          \
           (unsigned long long)mx_cover_within(c, lo, hi), (int)(want))

/* ------------------------------------------------------------ by hand */

static void test_merging(void)
{
    mx_cover_t c = { 0 };
    /* empty: nothing held, one run to the end of the space */
    uint64_t end = 0;
    CHECK(mx_cover_within(&c, 0, 100) == 0 && !mx_cover_has(&c, 0));
    CHECK(mx_cover_run(&c, 5, &end) == 0 && end == UINT64_MAX);

    /* adjacent, in order (one FIFO connection): one interval */
    add(&c, 0, 10);
    add(&c, 10, 20);
    add(&c, 20, 21);
    HOLDS(&c, 0, 21);
    /* adjacent on the left of an interval */
    add(&c, 40, 50);
    add(&c, 35, 40);
    HOLDS(&c, 0, 21, 35, 50);

    /* overlapping by one element, on either side and inside: duplicates,
     * and the set is unchanged */
    CHECK(mx_cover_check(&c, 20, 25) == 1);  /* shares 20 */
    CHECK(mx_cover_check(&c, 30, 36) == 1);  /* shares 35 */
    CHECK(mx_cover_check(&c, 49, 60) == 1);  /* shares 49 */
    CHECK(mx_cover_check(&c, 21, 36) == 1);  /* fills the gap and one more */
    CHECK(mx_cover_check(&c, 20, 35) == 1);  /* one before the gap */
    CHECK(mx_cover_check(&c, 40, 41) == 1);  /* inside */
    CHECK(mx_cover_check(&c, 0, 100) == 1);  /* over everything */
    HOLDS(&c, 0, 21, 35, 50);
    /* ... while touching without overlap is new */
    CHECK(mx_cover_check(&c, 21, 35) == 0);
    CHECK(mx_cover_check(&c, 50, 51) == 0);
    HOLDS(&c, 0, 21, 35, 50); /* checking changes nothing */

    /* inside a gap, touching neither side: a new interval */
    add(&c, 25, 30);
    HOLDS(&c, 0, 21, 25, 30, 35, 50);
    /* touching both neighbours: the gaps close, three intervals become one */
    add(&c, 21, 25);
    HOLDS(&c, 0, 30, 35, 50);
    add(&c, 30, 35);
    HOLDS(&c, 0, 50);

    /* a gap of one element, filled */
    add(&c, 51, 60);
    HOLDS(&c, 0, 50, 51, 60);
    CHECK(mx_cover_check(&c, 50, 52) == 1);
    add(&c, 50, 51);
    HOLDS(&c, 0, 60);

    /* cleared: empty, and ranges come in again */
    mx_cover_clear(&c);
    CHECK(c.n == 0 && c.covered == 0 && mx_cover_within(&c, 0, 100) == 0);
    add(&c, 5, 6);
    HOLDS(&c, 5, 6);
    mx_cover_free(&c);
    CHECK(c.iv == NULL && c.n == 0 && c.cap == 0);
    mx_cover_free(&c); /* twice is fine */
}

static void test_counts(void)
{
    mx_cover_t c = { 0 };
    add(&c, 10, 20);
    add(&c, 30, 40);
    add(&c, 50, 60);
    HOLDS(&c, 10, 20, 30, 40, 50, 60);

    /* starts in a gap, reaches one element into the next interval */
    WITHIN(&c, 5, 11, 1);
    WITHIN(&c, 25, 31, 1);
    WITHIN(&c, 29, 31, 1);
    WITHIN(&c, 45, 51, 1);
    WITHIN(&c, 0, 11, 1);
    /* ... or stops just before it */
    WITHIN(&c, 5, 10, 0);
    WITHIN(&c, 25, 30, 0);
    WITHIN(&c, 20, 30, 0);
    /* starts one element before an interval's end, ends in the gap */
    WITHIN(&c, 19, 25, 1);
    WITHIN(&c, 19, 21, 1);
    WITHIN(&c, 20, 25, 0);
    WITHIN(&c, 59, 100, 1);
    /* one element: at each boundary */
    WITHIN(&c, 9, 10, 0);
    WITHIN(&c, 10, 11, 1);
    WITHIN(&c, 19, 20, 1);
    WITHIN(&c, 20, 21, 0);
    /* inside one interval, and exactly one */
    WITHIN(&c, 12, 15, 3);
    WITHIN(&c, 30, 40, 10);
    /* spanning several intervals, from gaps and from inside */
    WITHIN(&c, 5, 55, 25);
    WITHIN(&c, 15, 55, 20);
    WITHIN(&c, 15, 31, 6);
    WITHIN(&c, 0, 1000, 30);
    WITHIN(&c, 10, 60, 30);
    WITHIN(&c, 11, 59, 28);
    /* past the last interval */
    WITHIN(&c, 60, 1000, 0);

    /* membership and runs at every boundary */
    static const struct { uint64_t p; int has; uint64_t end; } runs[] = {
        { 0, 0, 10 },  { 9, 0, 10 },  { 10, 1, 20 }, { 19, 1, 20 }, { 20, 0, 30 },
        { 29, 0, 30 }, { 30, 1, 40 }, { 39, 1, 40 }, { 40, 0, 50 }, { 59, 1, 60 },
        { 60, 0, UINT64_MAX }, { 1000, 0, UINT64_MAX },
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        uint64_t end = 0;
        int in = mx_cover_run(&c, runs[i].p, &end);
        CHECKF(mx_cover_has(&c, runs[i].p) == runs[i].has && in == runs[i].has &&
               end == runs[i].end, "element %llu: has %d, run %d to %llu; expected %d to %llu",
               (unsigned long long)runs[i].p, mx_cover_has(&c, runs[i].p), in,
               (unsigned long long)end, runs[i].has, (unsigned long long)runs[i].end);
    }

    /* far up the 64-bit space */
    mx_cover_clear(&c);
    const uint64_t big = UINT64_MAX - 100;
    add(&c, big, big + 10);
    WITHIN(&c, big - 5, big + 1, 1);
    CHECK(mx_cover_has(&c, big + 9) && !mx_cover_has(&c, big + 10));
    mx_cover_free(&c);
}

/* At most MX_COVER_MAX_IVS intervals: a new one beyond is refused (2), a
 * range that merges is still taken. */
static void test_limit(void)
{
    mx_cover_t c = { 0 };
    int refused = 0;
    for (uint64_t i = 0; i < MX_COVER_MAX_IVS && !refused; i++) {
        int r = mx_cover_check(&c, 2 * i, 2 * i + 1);
        refused = r != 0;
        if (r == 0)
            mx_cover_add(&c, 2 * i, 2 * i + 1);
    }
    CHECKF(!refused && c.n == MX_COVER_MAX_IVS, "%d intervals of %d taken", c.n,
           MX_COVER_MAX_IVS);
    const uint64_t top = 2 * (uint64_t)MX_COVER_MAX_IVS;
    CHECK(mx_cover_check(&c, top + 1, top + 2) == 2); /* a new interval: refused */
    CHECK(mx_cover_check(&c, 1, 2) == 0);             /* closes a gap: taken */
    mx_cover_add(&c, 1, 2);
    CHECK(c.n == MX_COVER_MAX_IVS - 1 && c.covered == MX_COVER_MAX_IVS + 1);
    CHECK(mx_cover_check(&c, top + 1, top + 2) == 0); /* room again */
    CHECK(mx_cover_check(&c, top - 2, top) == 1);     /* overlap first: a duplicate */
    mx_cover_free(&c);
}

/* ------------------------------------------------- random, against a bitmap */

#define SPACE_MAX 300

struct ref {
    unsigned char bit[SPACE_MAX];
    uint64_t space;
};

static uint64_t ref_count(const struct ref *r, uint64_t lo, uint64_t hi)
{
    uint64_t n = 0;
    for (uint64_t e = lo; e < hi && e < r->space; e++)
        n += r->bit[e];
    return n;
}

/* The set against the bitmap: its intervals are the bitmap's runs, in
 * order, and its count the bitmap's. Returns 1 when they agree. */
static int same_as_ref(const mx_cover_t *c, const struct ref *r)
{
    int k = 0;
    uint64_t covered = 0;
    for (uint64_t e = 0; e < r->space;) {
        if (!r->bit[e]) {
            e++;
            continue;
        }
        uint64_t s = e;
        while (e < r->space && r->bit[e])
            e++;
        if (k >= c->n || c->iv[k][0] != s || c->iv[k][1] != e)
            return 0;
        covered += e - s;
        k++;
    }
    return k == c->n && c->covered == covered;
}

/* A random range of the space: mostly short (1-4 elements, so neighbours
 * touch and overlap by one often), sometimes long. */
static void rand_range(unsigned long long *s, uint64_t space, uint64_t *lo, uint64_t *hi)
{
    uint64_t len = tu_randu(s) % 4 ? 1 + tu_randu(s) % 4 : 1 + tu_randu(s) % space;
    *lo = tu_randu(s) % space;
    *hi = *lo + len > space ? space : *lo + len;
}

static void test_random(void)
{
    unsigned long long s = 0x243f6a8885a308d3ULL;
    mx_cover_t c = { 0 };
    long ops = 0, dups = 0, queries = 0, bad = 0;
    for (int trial = 0; trial < 3000 && bad < 5; trial++) {
        struct ref r;
        memset(&r, 0, sizeof r);
        r.space = 8 + tu_randu(&s) % (SPACE_MAX - 8);
        mx_cover_clear(&c);
        int nops = 1 + (int)(tu_randu(&s) % 200);
        for (int op = 0; op < nops && bad < 5; op++) {
            uint64_t lo, hi;
            rand_range(&s, r.space, &lo, &hi);
            int want = ref_count(&r, lo, hi) > 0; /* anything held: a duplicate */
            int got = mx_cover_check(&c, lo, hi);
            ops++;
            dups += want;
            if (got != want) {
                fprintf(stderr, "FAIL trial %d: mx_cover_check([%llu, %llu)) = %d, the bitmap "
                        "says %d\n", trial, (unsigned long long)lo, (unsigned long long)hi, got,
                        want);
                print_set("set", &c);
                bad++;
                break;
            }
            if (got == 0) {
                mx_cover_add(&c, lo, hi);
                memset(r.bit + lo, 1, hi - lo);
            }
            if (!same_as_ref(&c, &r)) {
                fprintf(stderr, "FAIL trial %d: after adding [%llu, %llu) the set is not the "
                        "bitmap's runs\n", trial, (unsigned long long)lo,
                        (unsigned long long)hi);
                print_set("set", &c);
                bad++;
                break;
            }
            /* queries: counts of random ranges (a quarter of them reaching
             * a little past the space), membership and runs */
            for (int q = 0; q < 8; q++) {
                uint64_t a = tu_randu(&s) % (r.space + 1), b;
                b = a + 1 + tu_randu(&s) % (q < 2 ? r.space + 1 : 6);
                uint64_t w = mx_cover_within(&c, a, b), ref = ref_count(&r, a, b);
                uint64_t p = tu_randu(&s) % (r.space + 2), end = 0, ref_end = p;
                int in = mx_cover_run(&c, p, &end);
                int ref_in = p < r.space && r.bit[p];
                while (ref_end < r.space && r.bit[ref_end] == ref_in)
                    ref_end++;
                if (!ref_in && ref_end >= r.space)
                    ref_end = UINT64_MAX; /* no interval after p */
                queries++;
                if (w != ref || in != ref_in || mx_cover_has(&c, p) != ref_in ||
                    end != ref_end) {
                    fprintf(stderr, "FAIL trial %d: within([%llu, %llu)) = %llu (bitmap %llu); "
                            "element %llu: has %d, run %d to %llu (bitmap %d to %llu)\n", trial,
                            (unsigned long long)a, (unsigned long long)b,
                            (unsigned long long)w, (unsigned long long)ref,
                            (unsigned long long)p, mx_cover_has(&c, p), in,
                            (unsigned long long)end, ref_in, (unsigned long long)ref_end);
                    print_set("set", &c);
                    bad++;
                    break;
                }
            }
        }
        /* and the whole space, as a round's completeness test asks */
        CHECKF(bad || mx_cover_within(&c, 0, r.space) == ref_count(&r, 0, r.space),
               "trial %d: the whole space", trial);
    }
    tu_checks++;
    tu_failures += bad > 0;
    fprintf(stderr, "random: %ld ranges (%ld duplicates), %ld queries against a bitmap, %ld "
            "disagreements\n", ops, dups, queries, bad);
    mx_cover_free(&c);
}

int main(void)
{
    test_merging();
    test_counts();
    test_limit();
    test_random();
    return tu_finish("test_cover");
}
