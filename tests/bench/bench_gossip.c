/* Benchmark: gossip exchange throughput and compute/communication overlap.
 *
 * 1. Throughput. 3 processes on ring:3 (2 neighbours each) exchange a 64 MiB
 *    model (16M floats) over tcp://127.0.0.1 in rounds: each round a peer
 *    sends 64 MiB to each neighbour and receives 2 x 64 MiB. Three ways,
 *    window by window, back to back:
 *      gossip   rumor_mixer rounds (round_begin; round_end), no compute,
 *               with the mixer's default 1 MiB chunks;
 *      zmq_raw  ZeroMQ PUSH/PULL, zero-copy 4 MiB messages (its best size;
 *               1 MiB messages moved less here)
 *               (zmq_msg_init_data), SNDHWM 4, one poll loop a process;
 *      tcp_raw  one TCP connection a direction, non-blocking send/recv.
 *    Figure: bytes received per second per peer (a window's bytes over the
 *    slowest peer's time); ratios are medians of per-window ratios. The CPU
 *    time of each thread (main, mixer comm thread, ZeroMQ I/O thread) is
 *    read per window (and page faults): on this 2-core machine the three
 *    processes saturate the CPU, so CPU per byte decides the throughput.
 *    The mixer's own passes over memory are also timed alone, in one
 *    process, as mixer_comm.c writes them and vectorized.
 * 2. Overlap. 2 processes on ring:2 run D-PSGD rounds of an MLP (1 worker,
 *    1 BLAS thread each): compute alone (rumor_step_grads), communication
 *    alone (rounds, no compute) and full rounds (round_begin; step_grads;
 *    round_end), interleaved. Figure: round / max(compute, comm).
 * 3. The same for pipelined peers: a GPT cut into 2 stages on CPU devices
 *    of one thread, through the trainer as rumor-peer --stages 2 runs it
 *    (compute: gradient and each stage's optimizer step; full rounds: each
 *    stage steps on its range of the mix as soon as both are ready,
 *    rumor_trainer_grads_step, and mixes that range in its idle time when
 *    the stages fill the cores, as rumor-peer decides). Against the same
 *    rounds mixing the whole round on the comm thread before any stage
 *    steps (stagewise_vs_whole), and stepping stage by stage with the comm
 *    thread mixing (bubble_mix_vs_comm_mix). Figures pipe2_...
 *
 * Children synchronize through a process-shared barrier, guard against hangs
 * with alarm(), and send their timings to the parent through pipes. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "blas_tune.h"
#include "log.h"
#include "mixer.h"
#include "model.h"
#include "step.h"
#include "trainer.h"
#include "../stageutil.h"
#include "bench_util.h"

#define NP (16u << 20)              /* model floats: 64 MiB */
#define CHUNK_ELEMS (1u << 20)      /* raw ZeroMQ/TCP: 4 MiB messages, their best */
#define CHUNK_BYTES ((size_t)CHUNK_ELEMS * sizeof(float))
#define MODEL_BYTES ((size_t)NP * sizeof(float))
#define NCHUNK ((int)(NP / CHUNK_ELEMS))
#define NPEERS 3
#define NNBR 2
#define T_ROUNDS 8                  /* rounds a window: 8 x 128 MiB = 1 GiB received */
#define T_REPS 5                    /* windows of each variant */
#define NVAR 3                      /* gossip, zmq_raw, tcp_raw */
#define NCLS 3                      /* CPU classes: main, other (comm thread), ZeroMQ */

#define O_SPEC "mlp:784-2048-2048-2048-10"
#define O_BATCH 128               /* compute ~ comm on a 2-core VM */
#define O_PEERS 2
#define O_ROUNDS 5
#define O_REPS 5

static const char *var_name[NVAR] = { "gossip", "zmq_raw", "tcp_raw" };
static const char *cls_name[NCLS] = { "main", "comm", "zmq_io" };

static pthread_barrier_t *bar; /* process-shared, in an anonymous shared mapping */

static void sync_all(void) { pthread_barrier_wait(bar); }

static void die(const char *what)
{
    fprintf(stderr, "bench_gossip[%d]: %s: %s\n", (int)getpid(), what, rumor_err_msg());
    _exit(2);
}

/* A free TCP port on loopback (bind to 0, read it, close). */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        perror("free_port");
        exit(1);
    }
    close(s);
    return ntohs(a.sin_port);
}

/* A listening TCP socket on a free loopback port, made before fork so that
 * children connect to it without a race. */
static int listen_any(int *port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 8) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        perror("listen_any");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return s;
}

static void write_full(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            _exit(3);
        c += k;
        n -= (size_t)k;
    }
}

static int read_full(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* CPU seconds used so far by this process's threads, by class: the main
 * thread, ZeroMQ's background threads ("ZMQbg/..."), and the rest (the
 * mixer's comm thread). A thread's CPU clock id is built from its tid
 * (Linux: CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD), so threads the library
 * started need no handle. */
static void cpu_by_class(double out[NCLS])
{
    memset(out, 0, NCLS * sizeof *out);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    pid_t me = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int tid = atoi(e->d_name);
        char path[64], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(name, sizeof name, f))
                name[0] = 0;
            fclose(f);
        }
        clockid_t cid = (clockid_t)((~(unsigned)tid << 3) | 6u);
        struct timespec ts;
        if (clock_gettime(cid, &ts) != 0)
            continue;
        int cls = tid == me ? 0 : strncmp(name, "ZMQbg", 5) == 0 ? 2 : 1;
        out[cls] += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    closedir(d);
}

/* ------------------------------------------------ 1. throughput: peers */

struct thr_result {
    double t[T_REPS][NVAR];             /* seconds a window */
    double cpu[T_REPS][NVAR][NCLS];     /* CPU seconds a window, by class */
    double faults[T_REPS][NVAR];        /* minor page faults a window */
};

static char mx_ep[NPEERS][64], zq_ep[NPEERS][64];
static int tcp_lfd[NPEERS], tcp_port[NPEERS];

struct rawz {
    void *ctx, *pull, *push[NNBR];
    atomic_int refs;                    /* zero-copy messages ZeroMQ still holds */
};

/* ZeroMQ's free callback for the zero-copy sends: runs on its I/O thread. */
static void zfree(void *data, void *hint)
{
    (void)data;
    atomic_fetch_sub_explicit((atomic_int *)hint, 1, memory_order_release);
}

static void *zsock(void *ctx, int type, int hwm_opt, int hwm)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0, one = 1;
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(s, hwm_opt, &hwm, sizeof hwm) != 0 ||
        (type == ZMQ_PUSH && zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one) != 0)) {
        fprintf(stderr, "bench_gossip: zmq socket: %s\n", zmq_strerror(zmq_errno()));
        _exit(2);
    }
    return s;
}

/* The raw ZeroMQ peer: the mixer's socket settings (PULL with RCVHWM 64,
 * one PUSH a neighbour with SNDHWM 4 and IMMEDIATE, LINGER 0). */
static void rawz_open(struct rawz *z, int self, const int *nb)
{
    z->ctx = zmq_ctx_new();
    atomic_init(&z->refs, 0);
    z->pull = zsock(z->ctx, ZMQ_PULL, ZMQ_RCVHWM, 64);
    if (zmq_bind(z->pull, zq_ep[self]) != 0) {
        fprintf(stderr, "bench_gossip: bind %s: %s\n", zq_ep[self], zmq_strerror(zmq_errno()));
        _exit(2);
    }
    for (int i = 0; i < NNBR; i++) {
        z->push[i] = zsock(z->ctx, ZMQ_PUSH, ZMQ_SNDHWM, 4);
        if (zmq_connect(z->push[i], zq_ep[nb[i]]) != 0)
            _exit(2);
    }
}

static void rawz_close(struct rawz *z)
{
    for (int i = 0; i < NNBR; i++)
        zmq_close(z->push[i]);
    zmq_close(z->pull);
    zmq_ctx_term(z->ctx);
}

/* One round: NCHUNK zero-copy messages to each neighbour, 2 x NCHUNK in. A
 * neighbour already in its next round may have sent some of the 2 x NCHUNK:
 * a window of rounds still counts its bytes exactly. */
static int rawz_round(struct rawz *z, const char *buf)
{
    int sent[NNBR] = { 0 }, got = 0, need = NNBR * NCHUNK;
    double deadline = rumor_now() + 60;
    for (;;) {
        for (int i = 0; i < NNBR; i++)
            while (sent[i] < NCHUNK) {
                zmq_msg_t msg;
                atomic_fetch_add_explicit(&z->refs, 1, memory_order_relaxed);
                if (zmq_msg_init_data(&msg, (void *)(buf + (size_t)sent[i] * CHUNK_BYTES),
                                      CHUNK_BYTES, zfree, &z->refs) != 0)
                    return -1;
                if (zmq_msg_send(&msg, z->push[i], ZMQ_DONTWAIT) < 0) {
                    int e = zmq_errno();
                    zmq_msg_close(&msg); /* runs zfree */
                    if (e != EAGAIN)
                        return -1;
                    break;
                }
                sent[i]++;
            }
        while (got < need) {
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, z->pull, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&msg);
                if (zmq_errno() != EAGAIN)
                    return -1;
                break;
            }
            got++;
            zmq_msg_close(&msg);
        }
        int busy = got < need;
        for (int i = 0; i < NNBR; i++)
            busy |= sent[i] < NCHUNK;
        if (!busy)
            return 0;
        if (rumor_now() > deadline)
            return -1;
        zmq_pollitem_t it[1 + NNBR];
        int n = 0;
        if (got < need)
            it[n++] = (zmq_pollitem_t){ z->pull, 0, ZMQ_POLLIN, 0 };
        for (int i = 0; i < NNBR; i++)
            if (sent[i] < NCHUNK)
                it[n++] = (zmq_pollitem_t){ z->push[i], 0, ZMQ_POLLOUT, 0 };
        if (zmq_poll(it, n, 100) < 0 && zmq_errno() != EINTR)
            return -1;
    }
}

struct rawt {
    int out[NNBR], in[NNBR];
    char *rbuf[NNBR];                   /* (CHUNK_BYTES) receive buffers, reused */
};

/* The raw TCP peer: a connection to each neighbour's listening socket (made
 * by the parent), and one accepted from each; a 4-byte hello says who. */
static void rawt_open(struct rawt *t, int self, const int *nb)
{
    for (int i = 0; i < NNBR; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)tcp_port[nb[i]]),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int32_t id = self;
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0)
            _exit(2);
        write_full(s, &id, sizeof id);
        t->out[i] = s;
    }
    for (int k = 0; k < NNBR; k++) {
        int s = accept(tcp_lfd[self], NULL, NULL);
        int32_t id = -1;
        if (s < 0 || read_full(s, &id, sizeof id) != 0)
            _exit(2);
        for (int i = 0; i < NNBR; i++)
            if (nb[i] == id)
                t->in[i] = s;
    }
    for (int i = 0; i < NNBR; i++) {
        fcntl(t->out[i], F_SETFL, fcntl(t->out[i], F_GETFL) | O_NONBLOCK);
        fcntl(t->in[i], F_SETFL, fcntl(t->in[i], F_GETFL) | O_NONBLOCK);
        t->rbuf[i] = malloc(CHUNK_BYTES);
        if (!t->rbuf[i])
            _exit(2);
        memset(t->rbuf[i], 0, CHUNK_BYTES);
    }
}

static void rawt_close(struct rawt *t)
{
    for (int i = 0; i < NNBR; i++) {
        close(t->out[i]);
        close(t->in[i]);
        free(t->rbuf[i]);
    }
}

/* One round: MODEL_BYTES to each neighbour, MODEL_BYTES from each, with
 * plain send/recv of at most 4 MiB a call. */
static int rawt_round(struct rawt *t, const char *buf)
{
    size_t so[NNBR] = { 0 }, ri[NNBR] = { 0 };
    for (;;) {
        struct pollfd p[2 * NNBR];
        int who[2 * NNBR], n = 0;
        for (int i = 0; i < NNBR; i++) {
            if (so[i] < MODEL_BYTES) {
                p[n] = (struct pollfd){ t->out[i], POLLOUT, 0 };
                who[n++] = i;
            }
            if (ri[i] < MODEL_BYTES) {
                p[n] = (struct pollfd){ t->in[i], POLLIN, 0 };
                who[n++] = NNBR + i;
            }
        }
        if (n == 0)
            return 0;
        if (poll(p, (nfds_t)n, 60000) <= 0)
            return -1;
        for (int q = 0; q < n; q++) {
            if (!p[q].revents)
                continue;
            int i = who[q] % NNBR;
            ssize_t k;
            if (who[q] < NNBR) {
                size_t len = MODEL_BYTES - so[i];
                len = len < CHUNK_BYTES ? len : CHUNK_BYTES;
                k = send(t->out[i], buf + so[i], len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (k > 0)
                    so[i] += (size_t)k;
            } else {
                size_t o = ri[i] % CHUNK_BYTES, len = MODEL_BYTES - ri[i];
                len = len < CHUNK_BYTES - o ? len : CHUNK_BYTES - o;
                k = recv(t->in[i], t->rbuf[i] + o, len, MSG_DONTWAIT);
                if (k == 0)
                    return -1;
                if (k > 0)
                    ri[i] += (size_t)k;
            }
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                return -1;
        }
    }
}

static int gossip_round(rumor_mixer_t *mx, long k)
{
    rumor_round_stats_t st;
    float *x;
    if (rumor_mixer_round_begin(mx, k) < 0 || rumor_mixer_round_end(mx, k, &x, &st) < 0)
        return -1;
    if (st.timed_out || st.complete != st.in_neighbors) {
        rumor_err_set(RUMOR_ETIMEOUT, "round %ld: %d of %d neighbours in time", k, st.complete,
                      st.in_neighbors);
        return -1;
    }
    return 0;
}

static int thr_child(int self, int wfd)
{
    alarm(150);
    rumor_log_set_level(RUMOR_LOG_WARN);
    int nb[NNBR] = { (self + 1) % NPEERS, (self + 2) % NPEERS };
    rumor_topo_t *topo;
    if (rumor_topo_parse("ring:3", &topo) < 0)
        die("topology");
    float *payload = NULL;
    if (posix_memalign((void **)&payload, 64, MODEL_BYTES) != 0)
        _exit(2);
    for (size_t i = 0; i < NP; i++)
        payload[i] = 0.001f * (float)(i % 1000) - 0.5f;

    const char *eps[NPEERS];
    for (int p = 0; p < NPEERS; p++)
        eps[p] = mx_ep[p];
    rumor_mixer_config_t c = { 0 };
    c.topo = topo;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("bench_gossip");
    c.nparams = NP;
    c.chunk_elems = 0; /* the mixer's default (1 MiB), as rumor-peer runs it */
    /* a fixed deadline: a benchmark measures rounds, it must never cut one
     * (the adaptive one starts at 2 s, short for 128 MiB on a slow core) */
    c.round_timeout = c.min_round_timeout = 60;
    rumor_mixer_t *mx;
    if (rumor_mixer_create(&c, payload, &mx) < 0)
        die("mixer");
    if (rumor_mixer_barrier(mx, 30) < NNBR)
        die("mixer barrier");
    struct rawz z;
    rawz_open(&z, self, nb);
    struct rawt t;
    rawt_open(&t, self, nb);
    for (int p = 0; p < NPEERS; p++)
        close(tcp_lfd[p]);

    /* Warm-up: buffers touched, connections up, TCP windows grown. */
    long k = 0;
    sync_all();
    for (int r = 0; r < 2; r++)
        if (gossip_round(mx, k++) < 0)
            die("gossip warm-up");
    sync_all();
    if (rawz_round(&z, (const char *)payload) < 0)
        die("zmq warm-up");
    sync_all();
    if (rawt_round(&t, (const char *)payload) < 0)
        die("tcp warm-up");

    struct thr_result res;
    memset(&res, 0, sizeof res);
    for (int rep = 0; rep < T_REPS; rep++)
        for (int v = 0; v < NVAR; v++) {
            double c0[NCLS], c1[NCLS];
            struct rusage u0, u1;
            sync_all();
            cpu_by_class(c0);
            getrusage(RUSAGE_SELF, &u0);
            double t0 = rumor_now();
            for (int r = 0; r < T_ROUNDS; r++) {
                int rc = v == 0   ? gossip_round(mx, k++)
                         : v == 1 ? rawz_round(&z, (const char *)payload)
                                  : rawt_round(&t, (const char *)payload);
                if (rc < 0)
                    die(var_name[v]);
            }
            res.t[rep][v] = rumor_now() - t0;
            cpu_by_class(c1);
            getrusage(RUSAGE_SELF, &u1);
            res.faults[rep][v] = (double)(u1.ru_minflt - u0.ru_minflt);
            for (int q = 0; q < NCLS; q++)
                res.cpu[rep][v][q] = c1[q] - c0[q];
        }
    sync_all(); /* everyone has everything before anyone closes */
    write_full(wfd, &res, sizeof res);
    close(wfd);
    rumor_mixer_destroy(&mx, 5.0);
    rawz_close(&z);
    rawt_close(&t);
    free(payload);
    rumor_topo_destroy(&topo);
    return 0;
}

/* ------------------------------------------------ 2. overlap: peers */

struct ovl_result {
    double t[O_REPS][5];                /* seconds a round: compute, comm, full, and
                                         * (pipelined) full with the whole round
                                         * mixed before any stage steps, and full
                                         * with the comm thread mixing */
    double cpu[O_REPS][5];              /* CPU seconds (all threads) a round */
    int caller_mixes;                   /* the full rounds' stages mix in their bubbles */
    size_t nparams;
};

/* What a peer computes in a round, for ovl_measure: the gradient of step
 * `step`, the binding of the mixed parameters, the optimizer step (NULL:
 * none). */
struct ovl_ops {
    int (*grads)(void *ctx, long step);
    void (*bind)(void *ctx, float *params);
    int (*update)(void *ctx);
    void *ctx;
    /* full rounds as rumor-peer runs them, when not NULL: the gradient and
     * each stage's step on its range of round k's mix */
    int (*grads_step)(void *ctx, long step, rumor_mixer_t *mx, long k);
    int caller_mixes; /* rumor-peer's choice for these full rounds */
};

/* The three variants (compute alone, communication alone, full rounds),
 * O_REPS windows of O_ROUNDS rounds each, interleaved; k is the next round. */
static void ovl_measure(rumor_mixer_t *mx, const struct ovl_ops *o, long *k, long *step,
                        struct ovl_result *res)
{
    float *px;
    for (int rep = 0; rep < O_REPS; rep++)
        for (int v = 0; v < (o->grads_step ? 5 : 3); v++) {
            /* 2: as rumor-peer; 3: the whole round mixed (comm thread),
             * then every stage steps; 4: as 2, the comm thread mixing */
            rumor_mixer_set_caller_mixes(mx, v == 2 && o->caller_mixes);
            sync_all();
            double t0 = rumor_now(), c0 = rumor_cpu_now();
            for (int r = 0; r < O_ROUNDS; r++) {
                if (v != 0 && rumor_mixer_round_begin(mx, *k) < 0)
                    die("round_begin");
                int stagewise = (v == 2 || v == 4) && o->grads_step;
                if (stagewise && o->grads_step(o->ctx, (*step)++, mx, *k) < 0)
                    die("gradient and step");
                if (v != 1 && !stagewise && o->grads(o->ctx, (*step)++) < 0)
                    die("gradient");
                if (v != 0) {
                    rumor_round_stats_t st;
                    if (rumor_mixer_round_end(mx, *k, &px, &st) < 0)
                        die("round_end");
                    if (st.timed_out)
                        die("round timed out");
                    if (!stagewise)
                        o->bind(o->ctx, px); /* the model reads the mixed parameters */
                    (*k)++;
                }
                if (v != 1 && !stagewise && o->update && o->update(o->ctx) < 0)
                    die("update");
            }
            res->t[rep][v] = (rumor_now() - t0) / O_ROUNDS;
            res->cpu[rep][v] = (rumor_cpu_now() - c0) / O_ROUNDS;
        }
}

struct ovl_mlp {
    rumor_step_t *s;
    rumor_batch_t *batch;
};
static int mlp_grads(void *ctx, long step)
{
    struct ovl_mlp *c = ctx;
    float loss;
    return rumor_step_grads(c->s, c->batch, step, &loss);
}
static void mlp_bind(void *ctx, float *params) { rumor_step_bind_params(((struct ovl_mlp *)ctx)->s, params); }

static int ovl_child(int self, int wfd)
{
    alarm(150);
    rumor_log_set_level(RUMOR_LOG_WARN);
    rumor_device_t *dev;
    rumor_stage_t *m = NULL;
    rumor_step_t *s;
    rumor_topo_t *topo;
    if (rumor_device_open("cpu:1", &dev) < 0 || !(m = su_stage_new(dev, O_SPEC, O_BATCH, 1, NULL)) ||
        rumor_step_create(m, 1, &s) < 0 ||
        rumor_topo_parse("ring:2", &topo) < 0)
        die("model");
    const char *eps[O_PEERS];
    for (int p = 0; p < O_PEERS; p++)
        eps[p] = mx_ep[p];
    rumor_mixer_config_t c = { 0 };
    c.topo = topo;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("bench_gossip_overlap");
    c.nparams = m->n;
    c.round_timeout = c.min_round_timeout = 60;
    rumor_mixer_t *mx;
    if (rumor_mixer_create(&c, m->params, &mx) < 0)
        die("mixer");
    if (rumor_mixer_barrier(mx, 30) < 1)
        die("mixer barrier");
    rumor_step_bind_params(s, rumor_mixer_params(mx)); /* the mixer owns the buffers now */

    float *x = malloc(sizeof(float) * O_BATCH * 784);
    int32_t *y = malloc(sizeof(int32_t) * O_BATCH);
    if (!x || !y)
        _exit(2);
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(self + 1);
    for (int i = 0; i < O_BATCH * 784; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)(seed >> 40) / (float)(1 << 24);
    }
    for (int b = 0; b < O_BATCH; b++)
        y[b] = b % 10;
    rumor_batch_t batch = { .kind = RUMOR_BATCH_IMAGES, .n = O_BATCH, .width = 784, .x = x,
                            .y = y };

    long k = 0;
    float loss, *px;
    sync_all();
    for (int r = 0; r < 2; r++) {
        if (rumor_step_grads(s, &batch, k, &loss) < 0 ||
            rumor_mixer_round_begin(mx, k) < 0 || rumor_mixer_round_end(mx, k, &px, NULL) < 0)
            die("warm-up");
        rumor_step_bind_params(s, px);
        k++;
    }
    struct ovl_result res;
    memset(&res, 0, sizeof res);
    res.nparams = m->n;
    struct ovl_mlp ctx = { s, &batch };
    struct ovl_ops ops = { mlp_grads, mlp_bind, NULL, &ctx, NULL, 0 };
    long step = k;
    ovl_measure(mx, &ops, &k, &step, &res);
    sync_all();
    write_full(wfd, &res, sizeof res);
    close(wfd);
    rumor_step_destroy(&s); /* before the mixer frees the buffers it reads */
    rumor_mixer_destroy(&mx, 5.0);
    free(x);
    free(y);
    su_stage_free(&m);
    rumor_topo_destroy(&topo);
    rumor_device_close(&dev);
    return 0;
}

/* The same variants for a pipelined peer: a GPT cut into 2 stages
 * (1F1B, 4 micro-batches, a CPU device of one thread each) through the
 * trainer, as rumor-peer --stages 2 runs it, on the GPL's text: one whose
 * gossip is 2% of its compute (pipe2), and a wide one with a short context
 * whose gossip is a large share of it (pipe2_wide). */
static const char *p_spec = "gpt:layers=4,dim=128,heads=4,ctx=64";
static int p_batch = 16;

static int pipe_grads(void *ctx, long step)
{
    rumor_trainer_t *t = ctx;
    rumor_batch_t b;
    float loss;
    return rumor_trainer_batch(t, step, &b) < 0 ? -1 : rumor_trainer_grads(t, &b, step, &loss);
}
static void pipe_bind(void *ctx, float *params) { RUMOR_IGNORE(rumor_trainer_bind(ctx, params)); }
static int pipe_grads_step(void *ctx, long step, rumor_mixer_t *mx, long k)
{
    rumor_trainer_t *t = ctx;
    rumor_batch_t b;
    float loss;
    rumor_mixer_round_t pr = { mx, k };
    return rumor_trainer_batch(t, step, &b) < 0
               ? -1
               : rumor_trainer_grads_step(t, &b, step, &loss, rumor_mixer_round_range, &pr);
}
static int pipe_update(void *ctx) { return rumor_trainer_update(ctx, NULL); }

static int ovl_pipe_child(int self, int wfd)
{
    alarm(300);
    rumor_log_set_level(RUMOR_LOG_WARN);
    rumor_trainer_config_t tc;
    rumor_trainer_config_default(&tc);
    tc.data = "text:/usr/share/common-licenses/GPL-3";
    tc.model = p_spec;
    tc.batch = p_batch;
    tc.threads = 1;
    tc.rank = self;
    tc.world = O_PEERS;
    tc.host_params = 1;
    tc.stages = 2;
    tc.schedule = "1f1b";
    tc.microbatches = 4;
    tc.optim.kind = RUMOR_OPT_ADAMW;
    tc.optim.lr = 1e-3f;
    rumor_trainer_t *t = NULL;
    rumor_topo_t *topo;
    if (rumor_trainer_create(&tc, &t) < 0 || rumor_topo_parse("ring:2", &topo) < 0) {
        fprintf(stderr, "bench_gossip: pipelined peer: %s\n", rumor_err_msg());
        _exit(2);
    }
    const char *eps[O_PEERS];
    for (int p = 0; p < O_PEERS; p++)
        eps[p] = mx_ep[p];
    rumor_mixer_config_t c = { 0 };
    c.topo = topo;
    c.self = self;
    c.endpoints = eps;
    c.swarm = rumor_wire_swarm_id("bench_gossip_pipe");
    c.nparams = rumor_trainer_model(t)->nparams;
    c.round_timeout = c.min_round_timeout = 60;
    rumor_mixer_t *mx;
    if (rumor_mixer_create(&c, rumor_trainer_params(t), &mx) < 0)
        die("mixer");
    if (rumor_mixer_barrier(mx, 30) < 1)
        die("mixer barrier");
    RUMOR_IGNORE(rumor_trainer_bind(t, rumor_mixer_params(mx)));
    long k = 0, step = 0;
    float loss, *px;
    rumor_batch_t b;
    sync_all();
    for (int r = 0; r < 3; r++) { /* the trainer re-plans nothing for 1F1B; warm caches */
        if (rumor_trainer_batch(t, step, &b) < 0 || rumor_trainer_grads(t, &b, step, &loss) < 0 ||
            rumor_mixer_round_begin(mx, k) < 0 || rumor_mixer_round_end(mx, k, &px, NULL) < 0)
            die("warm-up");
        RUMOR_IGNORE(rumor_trainer_bind(t, px));
        if (rumor_trainer_update(t, NULL) < 0)
            die("update");
        k++, step++;
    }
    struct ovl_result res;
    memset(&res, 0, sizeof res);
    res.nparams = rumor_trainer_model(t)->nparams;
    struct ovl_ops ops = { pipe_grads, pipe_bind, pipe_update, t, pipe_grads_step,
                           rumor_trainer_fills_cores(t) };
    res.caller_mixes = ops.caller_mixes;
    ovl_measure(mx, &ops, &k, &step, &res);
    sync_all();
    write_full(wfd, &res, sizeof res);
    close(wfd);
    RUMOR_IGNORE(rumor_trainer_bind(t, NULL)); /* before the mixer frees the buffers it reads */
    rumor_mixer_destroy(&mx, 5.0);
    rumor_trainer_destroy(&t);
    rumor_topo_destroy(&topo);
    return 0;
}

/* ------------------------------------------------ the parent */

/* Forks n children running fn(self, pipe), reads each one's result
 * (size bytes) into out[self], and waits for them. Exits on a failure. */
static void run_peers(int n, int (*fn)(int, int), void *out, size_t size)
{
    pid_t pid[NPEERS];
    int rfd[NPEERS];
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(bar, &ba, (unsigned)n);
    pthread_barrierattr_destroy(&ba);
    fflush(stdout);
    fflush(stderr);
    for (int p = 0; p < n; p++) {
        int fds[2];
        if (pipe(fds) != 0) {
            perror("pipe");
            exit(1);
        }
        pid[p] = fork();
        if (pid[p] < 0) {
            perror("fork");
            exit(1);
        }
        if (pid[p] == 0) {
            close(fds[0]);
            for (int q = 0; q < p; q++)
                close(rfd[q]);
            _exit(fn(p, fds[1]));
        }
        close(fds[1]);
        rfd[p] = fds[0];
    }
    int failed = 0;
    for (int p = 0; p < n; p++) {
        if (read_full(rfd[p], (char *)out + (size_t)p * size, size) != 0)
            failed = 1;
        close(rfd[p]);
    }
    for (int p = 0; p < n; p++) {
        int st;
        waitpid(pid[p], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "bench_gossip: peer %d: %s %d\n", p,
                    WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            failed = 1;
        }
    }
    pthread_barrier_destroy(bar);
    if (failed)
        exit(1);
}

/* The mixer's per-chunk loop as mixer_comm.c writes it (on_params), and a
 * blocked form GCC vectorizes at -O2 (a fixed-length inner loop), for the
 * report's estimate of what the accumulate costs and could cost. */
static void __attribute__((noinline)) acc_mixer(float *acc, const float *data, uint64_t len,
                                                float wf)
{
    for (uint64_t i = 0; i < len; i++)
        acc[i] += wf * data[i];
}

static void __attribute__((noinline)) acc_blocked(float *restrict acc,
                                                  const float *restrict data, uint64_t len,
                                                  float wf)
{
    uint64_t body = len - len % 16;
    for (uint64_t i = 0; i < body; i += 16)
        for (int j = 0; j < 16; j++)
            acc[i + j] += wf * data[i + j];
    for (uint64_t i = body; i < len; i++)
        acc[i] += wf * data[i];
}

/* Single-process cost of the mixer's own passes over a 64 MiB round with
 * 2 neighbours: the NaN/Inf check and the accumulate of 2 x 16 chunks, the
 * accumulator's memset when a slot opens, and close_round's mixing pass
 * (with its double-precision disagreement sum), each as mixer_comm.c
 * compiles it (scalar at -O2) and blocked so that GCC vectorizes it.
 * Milliseconds a round. */
/* The outlier check's pass over a range as mixer_terms.c's dist_block
 * writes it: sum (x_j - x)^2 and sum x^2 in float over 1024 elements, in
 * double across. */
static double dist_pass(const float *p, const float *x, size_t n)
{
    double d2s = 0, n2s = 0;
    for (size_t b = 0; b < n; b += 1024) {
        size_t e = n - b < 1024 ? n : b + 1024, i = b;
        float pd[16] = { 0 }, pn[16] = { 0 };
        for (; i + 16 <= e; i += 16)
            for (int j = 0; j < 16; j++) {
                float d = p[i + j] - x[i + j];
                pd[j] += d * d;
                pn[j] += x[i + j] * x[i + j];
            }
        for (; i < e; i++) {
            float d = p[i] - x[i];
            pd[0] += d * d;
            pn[0] += x[i] * x[i];
        }
        for (int j = 0; j < 16; j++) {
            d2s += pd[j];
            n2s += pn[j];
        }
    }
    return d2s + n2s;
}

static void mixer_cpu_model(double ms[7])
{
    float *acc, *x, *chunk;
    if (posix_memalign((void **)&acc, 64, MODEL_BYTES) || posix_memalign((void **)&x, 64, MODEL_BYTES) ||
        posix_memalign((void **)&chunk, 64, CHUNK_BYTES))
        exit(1);
    memset(acc, 0, MODEL_BYTES);
    for (size_t i = 0; i < NP; i++)
        x[i] = 0.001f * (float)(i % 1000);
    memcpy(chunk, x, CHUNK_BYTES);
    double best[7] = { 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9 };
    volatile int fin = 0;
    volatile double sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = rumor_now();
        for (int c = 0; c < NNBR * NCHUNK; c++)
            fin += rumor_wire_payload_finite(chunk, CHUNK_ELEMS);
        double t1 = rumor_now();
        for (int c = 0; c < NNBR * NCHUNK; c++)
            acc_mixer(acc + (size_t)(c % NCHUNK) * CHUNK_ELEMS, chunk, CHUNK_ELEMS, 0.333f);
        double t2 = rumor_now();
        for (int c = 0; c < NNBR * NCHUNK; c++)
            acc_blocked(acc + (size_t)(c % NCHUNK) * CHUNK_ELEMS, chunk, CHUNK_ELEMS, 0.333f);
        double t3 = rumor_now();
        memset(acc, 0, MODEL_BYTES);
        double t4 = rumor_now();
        double dis = 0;
        for (size_t i = 0; i < NP; i++) { /* close_round's loop */
            float v = acc[i] + 0.333f * x[i];
            float d = v - x[i];
            dis += (double)d * d;
            acc[i] = v;
        }
        sink = dis;
        double t5 = rumor_now();
        dis = 0;
        for (size_t i = 0; i < NP; i += 1024) { /* the same, blocked: vectorized */
            float p[16] = { 0 };
            float *restrict ab = acc + i;
            const float *restrict xb = x + i;
            for (int b = 0; b < 1024; b += 16)
                for (int j = 0; j < 16; j++) {
                    float v = ab[b + j] + 0.333f * xb[b + j];
                    float d = v - xb[b + j];
                    p[j] += d * d;
                    ab[b + j] = v;
                }
            for (int j = 0; j < 16; j++)
                dis += p[j];
        }
        sink = dis;
        double t6 = rumor_now();
        dis = 0; /* the outlier check of each range (aligned: one block) */
        for (int c = 0; c < NNBR * NCHUNK; c++)
            dis += dist_pass(chunk, x + (size_t)(c % NCHUNK) * CHUNK_ELEMS, CHUNK_ELEMS);
        sink = dis;
        double t7 = rumor_now();
        double v[7] = { t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6 };
        for (int q = 0; q < 7; q++)
            best[q] = v[q] < best[q] ? v[q] : best[q];
    }
    (void)sink;
    for (int q = 0; q < 7; q++)
        ms[q] = 1e3 * best[q];
    free(acc);
    free(x);
    free(chunk);
}

static void throughput(void)
{
    for (int p = 0; p < NPEERS; p++) {
        snprintf(mx_ep[p], sizeof mx_ep[p], "tcp://127.0.0.1:%d", free_port());
        snprintf(zq_ep[p], sizeof zq_ep[p], "tcp://127.0.0.1:%d", free_port());
        tcp_lfd[p] = listen_any(&tcp_port[p]);
    }
    static struct thr_result r[NPEERS];
    double t0 = rumor_now();
    run_peers(NPEERS, thr_child, r, sizeof r[0]);
    for (int p = 0; p < NPEERS; p++)
        close(tcp_lfd[p]);
    double wall = rumor_now() - t0;

    const double bytes = (double)T_ROUNDS * NNBR * (double)MODEL_BYTES; /* a peer, a window */
    double rate[NVAR][T_REPS], vs_zmq[T_REPS], vs_tcp[T_REPS];
    double cpu[NVAR][NCLS] = { { 0 } }, faults[NVAR] = { 0 };
    for (int rep = 0; rep < T_REPS; rep++) {
        for (int v = 0; v < NVAR; v++) {
            double slow = 0;
            for (int p = 0; p < NPEERS; p++) {
                slow = r[p].t[rep][v] > slow ? r[p].t[rep][v] : slow;
                for (int q = 0; q < NCLS; q++)
                    cpu[v][q] += r[p].cpu[rep][v][q];
                faults[v] += r[p].faults[rep][v];
            }
            rate[v][rep] = bytes / slow / 1e6;
        }
        vs_zmq[rep] = rate[0][rep] / rate[1][rep];
        vs_tcp[rep] = rate[0][rep] / rate[2][rep];
    }
    printf("# throughput: ring:3, 3 processes, 64 MiB model, tcp://127.0.0.1; gossip in 1 MiB\n"
           "# chunks (the mixer's default), raw ZeroMQ and TCP in 4 MiB messages (their best);\n"
           "# %d windows a variant of %d rounds (%.2f GB received a peer a window), interleaved;\n"
           "# per window: bytes received a peer / slowest peer's time (%.1f s in all)\n",
           T_REPS, T_ROUNDS, bytes / 1e9, wall);
    for (int v = 0; v < NVAR; v++) {
        printf("# %-8s MB/s by window:", var_name[v]);
        for (int rep = 0; rep < T_REPS; rep++)
            printf(" %.0f", rate[v][rep]);
        double rounds = (double)NPEERS * T_REPS * T_ROUNDS; /* peer-rounds */
        printf("; CPU ms a peer a round:");
        for (int q = 0; q < NCLS; q++)
            printf(" %s %.0f", cls_name[q], 1e3 * cpu[v][q] / rounds);
        printf("; page faults a round %.0f\n", faults[v] / rounds);
    }
    double ms[7];
    mixer_cpu_model(ms);
    printf("# mixer passes, 1 process alone, ms a round (2 x 16 chunks): finite check %.1f;\n"
           "# accumulate %.1f as compiled (scalar), %.1f blocked (vectorized); accumulator\n"
           "# memset %.1f; close_round mix + disagreement %.1f scalar, %.1f blocked;\n"
           "# outlier check (rumor-peer's, mixer.h outlier_ratio) %.1f\n",
           ms[0], ms[1], ms[2], ms[3], ms[4], ms[5], ms[6]);
    printf("bench: outlier_check_vs_accumulate = %.3f x\n", ms[6] / ms[2]);
    printf("bench: outlier_check_vs_finite_check = %.3f x\n", ms[6] / ms[0]);
    printf("bench: gossip_64mib_2nbr = %.0f MB/s\n", bench_median(rate[0], T_REPS));
    printf("bench: zmq_raw_64mib_2nbr = %.0f MB/s\n", bench_median(rate[1], T_REPS));
    printf("bench: tcp_raw_64mib_2nbr = %.0f MB/s\n", bench_median(rate[2], T_REPS));
    printf("bench: gossip_vs_zmq = %.3f x\n", bench_median(vs_zmq, T_REPS));
    printf("bench: gossip_vs_tcp = %.3f x\n", bench_median(vs_tcp, T_REPS));
    fflush(stdout);
}

/* pipe: the pipelined peers (figures named pipe2_...) */
static void overlap(int pipe)
{
    for (int p = 0; p < O_PEERS; p++)
        snprintf(mx_ep[p], sizeof mx_ep[p], "tcp://127.0.0.1:%d", free_port());
    static struct ovl_result r[O_PEERS];
    run_peers(O_PEERS, pipe ? ovl_pipe_child : ovl_child, r, sizeof r[0]);
    const char *name = pipe == 2 ? "pipe2_wide" : pipe ? "pipe2" : "dpsgd";
    double t[5][O_REPS], ratio[O_REPS], cpu[5][O_REPS], whole[O_REPS], commmix[O_REPS];
    int nv = pipe ? 5 : 3;
    for (int rep = 0; rep < O_REPS; rep++) {
        for (int v = 0; v < nv; v++) {
            t[v][rep] = cpu[v][rep] = 0;
            for (int p = 0; p < O_PEERS; p++) { /* the slowest peer sets the pace */
                t[v][rep] = r[p].t[rep][v] > t[v][rep] ? r[p].t[rep][v] : t[v][rep];
                cpu[v][rep] += r[p].cpu[rep][v] / O_PEERS;
            }
        }
        double floor = t[0][rep] > t[1][rep] ? t[0][rep] : t[1][rep];
        ratio[rep] = t[2][rep] / floor;
        whole[rep] = pipe ? t[2][rep] / t[3][rep] : 0;
        commmix[rep] = pipe ? t[2][rep] / t[4][rep] : 0;
    }
    if (pipe)
        printf("# overlap, pipelined peers: %s (%zu params, %.0f MB), batch %d windows,\n"
               "# ring:2, 2 processes, each 2 stages (1F1B, 4 micro-batches) on cpu:1 devices;\n"
               "# %d windows of %d rounds a variant, interleaved\n",
               p_spec, r[0].nparams, 4e-6 * (double)r[0].nparams, p_batch, O_REPS, O_ROUNDS);
    else
        printf("# overlap: %s (%zu params, %.0f MB), batch %d, ring:2, 2 processes,\n"
               "# 1 worker and 1 BLAS thread each; %d windows of %d rounds a variant, "
               "interleaved\n",
               O_SPEC, r[0].nparams, 4e-6 * (double)r[0].nparams, O_BATCH, O_REPS, O_ROUNDS);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double cc = bench_median(cpu[0], O_REPS), cm = bench_median(cpu[1], O_REPS), cf = bench_median(cpu[2], O_REPS);
    printf("# CPU a peer a round (all threads): compute %.1f ms, comm %.1f ms, full %.1f ms;\n"
           "# %d peers on %ld cores: a full round needs at least %.1f ms of CPU time a core\n",
           1e3 * cc, 1e3 * cm, 1e3 * cf, O_PEERS, cores,
           1e3 * (cc + cm) * O_PEERS / (double)(cores < O_PEERS ? cores : O_PEERS));
    printf("bench: %s_round_ms = %.1f ms\n", name, 1e3 * bench_median(t[2], O_REPS));
    printf("bench: %s_compute_ms = %.1f ms\n", name, 1e3 * bench_median(t[0], O_REPS));
    printf("bench: %s_comm_ms = %.1f ms\n", name, 1e3 * bench_median(t[1], O_REPS));
    printf("bench: %s_overlap = %.3f x\n", name, bench_median(ratio, O_REPS));
    /* On a machine with no core to spare, communication costs CPU the
     * compute needs: the bound is then the CPU floor, not max(comp, comm). */
    double floor_s = (cc + cm) * O_PEERS / (double)(cores < O_PEERS ? cores : O_PEERS);
    printf("bench: %s_round_vs_cpu_floor = %.3f x\n", name, bench_median(t[2], O_REPS) / floor_s);
    if (pipe) { /* each stage stepping on its range as it comes, against the whole round first */
        printf("bench: %s_round_whole_mix_ms = %.1f ms\n", name, 1e3 * bench_median(t[3], O_REPS));
        printf("bench: %s_stagewise_vs_whole = %.3f x\n", name, bench_median(whole, O_REPS));
        printf("# the stages %s their ranges in their idle time (rumor_trainer_fills_cores); "
               "against the comm thread mixing:\n", r[0].caller_mixes ? "mix" : "do not mix");
        printf("bench: %s_round_comm_mix_ms = %.1f ms\n", name, 1e3 * bench_median(t[4], O_REPS));
        printf("bench: %s_bubble_mix_vs_comm_mix = %.3f x\n", name, bench_median(commmix, O_REPS));
    }
}

int main(int argc, char **argv)
{
    rumor_blas_autotune(argc, argv);
    bar = mmap(NULL, sizeof *bar, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bar == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    printf("# %ld CPUs; OpenBLAS core %s\n", sysconf(_SC_NPROCESSORS_ONLN), rumor_blas_corename());
    double t0 = rumor_now();
    throughput();
    overlap(0);
    overlap(1);
    p_spec = "gpt:layers=4,dim=512,heads=8,ctx=16";
    p_batch = 8;
    overlap(2);
    printf("# total %.1f s\n", rumor_now() - t0);
    return 0;
}
