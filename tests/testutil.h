/* A tiny harness shared by rumor's test programs.
 *
 * Each test program checks real things and exits 0 when every check held,
 * 1 when any failed, and 77 (skip) with a reason when it cannot run here
 * (no GPU, feature not built, data missing). Checks keep going after a
 * failure so one run reports them all. */
#ifndef RUMOR_TESTUTIL_H
#define RUMOR_TESTUTIL_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

static int tu_failures;
static int tu_checks;

#define TU_EXIT_SKIP 77

#define CHECK(cond)                                                                \
    do {                                                                           \
        tu_checks++;                                                               \
        if (!(cond)) {                                                             \
            tu_failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
        }                                                                          \
    } while (0)

#define CHECKF(cond, ...)                                                          \
    do {                                                                           \
        tu_checks++;                                                               \
        if (!(cond)) {                                                             \
            tu_failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
        }                                                                          \
    } while (0)

/* |a-b| <= atol + rtol*|b| */
#define CHECK_CLOSE(a, b, atol, rtol)                                              \
    do {                                                                           \
        double tu_a = (double)(a), tu_b = (double)(b);                             \
        tu_checks++;                                                               \
        if (!(fabs(tu_a - tu_b) <= (atol) + (rtol)*fabs(tu_b))) {                  \
            tu_failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s = %.10g, expected %s = %.10g\n",       \
                    __FILE__, __LINE__, #a, tu_a, #b, tu_b);                       \
        }                                                                          \
    } while (0)

/* A call that must succeed (rc >= 0); prints the library's message if not. */
#define CHECK_OK(call)                                                             \
    do {                                                                           \
        int tu_rc = (call);                                                        \
        tu_checks++;                                                               \
        if (tu_rc < 0) {                                                           \
            tu_failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s returned %d: %s [%s]\n", __FILE__,      \
                    __LINE__, #call, tu_rc, rumor_err_msg(), rumor_err_trace());   \
        }                                                                          \
    } while (0)

/* A call that must fail with code `want` and a message containing `substr`. */
#define CHECK_ERR(call, want, substr)                                              \
    do {                                                                           \
        rumor_err_clear();                                                         \
        int tu_rc = (call);                                                        \
        tu_checks++;                                                               \
        if (tu_rc != (want) || !strstr(rumor_err_msg(), (substr))) {               \
            tu_failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s returned %d \"%s\", expected %d with \"%s\"\n", \
                    __FILE__, __LINE__, #call, tu_rc, rumor_err_msg(), (int)(want), \
                    (substr));                                                     \
        }                                                                          \
    } while (0)

#define TEST_SKIP(...)                                                             \
    do {                                                                           \
        fprintf(stderr, "SKIP: ");                                                 \
        fprintf(stderr, __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                       \
        exit(TU_EXIT_SKIP);                                                        \
    } while (0)

/* Tests that keep both cores busy, or that time a swarm, run one at a time
 * even under make -j (the shell tests' need_fashion takes the same lock):
 * the swarm tests' deadlines assume the cores are theirs. Held until exit. */
static inline void tu_training_lock(void)
{
    const char *b = getenv("RUMOR_BUILDDIR");
    char path[4200];
    if (!b || !*b)
        return;
    snprintf(path, sizeof path, "%s/.training-tests.lock", b);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        /* no lock: run anyway */
    }
}

static inline int tu_finish(const char *name)
{
    fprintf(stderr, "%s: %d checks, %d failed\n", name, tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}

/* Deterministic test data: xorshift in [-1, 1). */
static inline float tu_randf(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* Deterministic test data: xorshift, 32 random bits. */
static inline unsigned tu_randu(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (unsigned)(*s >> 32);
}

/* A scratch directory unique to this test run (mkdtemp under TMPDIR). */
static inline const char *tu_tmpdir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/rumor-test-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            exit(99);
        }
    }
    return dir;
}

/* A free TCP port on loopback (bind to 0, read it, close). */
static inline int tu_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        perror("free_port");
        exit(99);
    }
    close(s);
    return ntohs(a.sin_port);
}

/* Where the Fashion-MNIST files are: $RUMOR_DATA, else Debian's location. */
static inline const char *tu_fashion_dir(void)
{
    const char *d = getenv("RUMOR_DATA");
    return d && *d ? d : "/usr/share/datasets/fashion-mnist";
}

#endif
