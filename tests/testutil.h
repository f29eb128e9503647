/* A tiny harness shared by rumor's test programs.
 *
 * Each test program checks real things and exits 0 when every check held,
 * 1 when any failed, and 77 (skip) with a reason when it cannot run here
 * (no GPU, feature not built, data missing). Checks keep going after a
 * failure so one run reports them all, except in the peers of a swarm test
 * (tu_swarm), where the first failure ends the peer and the swarm at once. */
#ifndef RUMOR_TESTUTIL_H
#define RUMOR_TESTUTIL_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int tu_failures;
static int tu_checks;

/* Set in the peers that tu_swarm forks: a failed check ends the process at
 * once (exit 1, after its message), since its neighbours would otherwise
 * wait out round deadlines for a peer that has gone wrong. */
static int tu_fail_fast;

/* Counts a failed check (its message already printed). */
static inline void tu_failed(void)
{
    tu_failures++;
    if (tu_fail_fast)
        _exit(1);
}

#define TU_EXIT_SKIP 77

#define CHECK(cond)                                                                \
    do {                                                                           \
        tu_checks++;                                                               \
        if (!(cond)) {                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            tu_failed();                                                           \
        }                                                                          \
    } while (0)

#define CHECKF(cond, ...)                                                          \
    do {                                                                           \
        tu_checks++;                                                               \
        if (!(cond)) {                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
            tu_failed();                                                           \
        }                                                                          \
    } while (0)

/* |a-b| <= atol + rtol*|b| */
#define CHECK_CLOSE(a, b, atol, rtol)                                              \
    do {                                                                           \
        double tu_a = (double)(a), tu_b = (double)(b);                             \
        tu_checks++;                                                               \
        if (!(fabs(tu_a - tu_b) <= (atol) + (rtol)*fabs(tu_b))) {                  \
            fprintf(stderr, "FAIL %s:%d: %s = %.10g, expected %s = %.10g\n",       \
                    __FILE__, __LINE__, #a, tu_a, #b, tu_b);                       \
            tu_failed();                                                           \
        }                                                                          \
    } while (0)

/* A call that must succeed (rc >= 0); prints the library's message if not. */
#define CHECK_OK(call)                                                             \
    do {                                                                           \
        int tu_rc = (call);                                                        \
        tu_checks++;                                                               \
        if (tu_rc < 0) {                                                           \
            fprintf(stderr, "FAIL %s:%d: %s returned %d: %s [%s]\n", __FILE__,      \
                    __LINE__, #call, tu_rc, rumor_err_msg(), rumor_err_trace());   \
            tu_failed();                                                           \
        }                                                                          \
    } while (0)

/* A call that must fail with code `want` and a message containing `substr`. */
#define CHECK_ERR(call, want, substr)                                              \
    do {                                                                           \
        rumor_err_clear();                                                         \
        int tu_rc = (call);                                                        \
        tu_checks++;                                                               \
        if (tu_rc != (want) || !strstr(rumor_err_msg(), (substr))) {               \
            fprintf(stderr, "FAIL %s:%d: %s returned %d \"%s\", expected %d with \"%s\"\n", \
                    __FILE__, __LINE__, #call, tu_rc, rumor_err_msg(), (int)(want), \
                    (substr));                                                     \
            tu_failed();                                                           \
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

/* A watchdog: the message written and exit 1 when the process is still
 * running `seconds` from now (0: cancels it). For a test whose waits are
 * all bounded, a bug that makes one of them unbounded still ends the test
 * in bounded time, saying where it was. */
static char tu_watch_msg[256];
static size_t tu_watch_len;

static void tu_watch_fired(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, tu_watch_msg, tu_watch_len);
    (void)w;
    _exit(1);
}

static inline void tu_watchdog(unsigned seconds, const char *what)
{
    int n = snprintf(tu_watch_msg, sizeof tu_watch_msg,
                     "FAIL: %s: still running after %u s: stopped\n", what ? what : "", seconds);
    tu_watch_len = n < 0 ? 0 : (size_t)n < sizeof tu_watch_msg ? (size_t)n : sizeof tu_watch_msg - 1;
    signal(SIGALRM, tu_watch_fired);
    alarm(seconds);
}

/* Runs fn(0, arg) ... fn(n - 1, arg) in n forked processes, the peers of a
 * swarm, and returns how many failed. Each peer fails fast (tu_fail_fast)
 * and has `seconds` to finish (tu_watchdog). The first peer that fails
 * (an exit status other than 0, or a signal) stops the others at once: they
 * would only wait for it, round deadline after round deadline. what names
 * the swarm in messages. */
static inline int tu_swarm(const char *what, int n, int (*fn)(int peer, void *arg), void *arg,
                           unsigned seconds)
{
    pid_t pid[64];
    int failed = 0, left = 0;
    if (n > 64)
        n = 64;
    fflush(NULL); /* nothing buffered is written twice */
    for (int p = 0; p < n; p++) {
        pid[p] = fork();
        if (pid[p] < 0) {
            perror("fork");
            exit(99);
        }
        if (pid[p] == 0) {
            char who[200];
            snprintf(who, sizeof who, "%s, peer %d", what, p);
            tu_failures = 0; /* the parent's failures are not this peer's */
            tu_fail_fast = 1;
            tu_watchdog(seconds, who);
            _exit(fn(p, arg));
        }
        left++;
    }
    int stopping = 0;
    while (left > 0) {
        int st;
        pid_t w = waitpid(-1, &st, 0);
        if (w < 0)
            break;
        int p = 0;
        while (p < n && pid[p] != w)
            p++;
        if (p == n)
            continue; /* not one of the peers */
        pid[p] = 0;
        left--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            continue;
        failed++;
        if (stopping)
            continue; /* stopped by us: the failure is the first peer's */
        fprintf(stderr, "%s: peer %d %s %d%s\n", what, p, WIFEXITED(st) ? "exited with" : "killed by signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                left ? "; the other peers stopped" : "");
        stopping = 1;
        for (int q = 0; q < n; q++)
            if (pid[q] > 0)
                kill(pid[q], SIGKILL);
    }
    return failed;
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
