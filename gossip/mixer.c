/* The D-PSGD mixer's API (see mixer.h), run by the caller's threads.
 *
 * The mixer is an actor: its comm thread (mixer_comm.c) owns the transport
 * and the round state; these functions post commands to it and wait for
 * its replies (mixer_cmd.c), or read what it published. The caller's own
 * side of the rounds (the round begun, the close asked, x(k) held for range
 * waiters) is kept under mu; a range waiter may mix a cell the comm thread
 * left to the caller's threads, claiming it through the cell's atomic
 * state. See mixer_int.h for who owns what. */
#include "mixer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "mixer_int.h"

/* ------------------------------------------------------------ buffers */

/* A free parameter-sized buffer: a recycled one whose sends are done, or a
 * new one (steady state recycles; a new one appears only while an old
 * buffer is still held by a slow neighbour's send queue). */
rumor_sendbuf_t *mx_buf_get(rumor_mixer_t *m)
{
    for (int i = 0; i < m->nbufs; i++) {
        rumor_sendbuf_t *b = m->bufs[i];
        if (m->buf_state[i] == BUF_RETIRED && b->pins == 0 &&
            atomic_load_explicit(&b->refs, memory_order_acquire) == 0)
            m->buf_state[i] = BUF_FREE;
        if (m->buf_state[i] == BUF_FREE) {
            m->buf_state[i] = BUF_USED;
            if (m->ch.code[i])
                m->ch.code[i]->coded = 0;
            return b;
        }
    }
    if (m->nbufs == MX_MAX_BUFS) {
        rumor_err_set(RUMOR_ENOMEM, "mixer: %d parameter buffers in flight", MX_MAX_BUFS);
        return NULL;
    }
    rumor_sendbuf_t *b = calloc(1, sizeof *b);
    float *data = NULL;
    rumor_device_t *hm = m->cfg.host_mem;
    if (b && hm)
        data = hm->ops->host_alloc(hm, m->n * sizeof(float) + 64);
    else if (b && posix_memalign((void **)&data, 64, m->n * sizeof(float) + 64) != 0)
        data = NULL;
    if (!data) {
        free(b);
        rumor_err_set(RUMOR_ENOMEM, "mixer: cannot allocate %zu parameters", m->n);
        return NULL;
    }
    b->data = data;
    b->n = m->n;
    b->pins = 0;
    atomic_init(&b->refs, 0);
    m->bufs[m->nbufs] = b;
    m->buf_state[m->nbufs++] = BUF_USED;
    if (m->nbufs > 4)
        rumor_debug("mixer: %d parameter buffers (a send queue holds old ones)", m->nbufs);
    return b;
}

void mx_buf_retire(rumor_mixer_t *m, rumor_sendbuf_t *b)
{
    for (int i = 0; i < m->nbufs; i++)
        if (m->bufs[i] == b)
            m->buf_state[i] = BUF_RETIRED;
}

/* ------------------------------------------------------- clocks */

/* Every deadline of the mixer is a rumor_now() value (CLOCK_MONOTONIC): a
 * step of the wall clock (NTP, a suspended VM's resume) moves none of them.
 * Condition variables are made to time their waits on that clock too. */
void mx_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

int mx_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline)
{
    if (deadline <= rumor_now())
        return ETIMEDOUT;
    struct timespec ts;
    ts.tv_sec = (time_t)deadline;
    ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(cv, mu, &ts);
}

/* ------------------------------------------------------- the public API */

static void *comm_thread(void *arg);

/* Open membership without an address given: the one bound, unless it is a
 * wildcard nobody can dial. */
static int own_endpoint(rumor_mixer_t *m)
{
    if (m->ep[m->self])
        return 0;
    const char *b = rumor_transport_endpoint(m->tr);
    if (!b || strstr(b, "://*") || strstr(b, "://0.0.0.0") || strstr(b, "://[::]"))
        return rumor_err_set(RUMOR_EINVAL, "mixer: this peer listens on %s, which others cannot "
                                           "dial: give the address they reach it at",
                             b ? b : "?");
    char *e = strdup(b);
    if (!e)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    m->ep[m->self] = e;
    return 0;
}

/* Open membership: this peer's id (its key's, the config's, or a random
 * one) and the one-node graph it starts on. */
static int open_self(rumor_mixer_t *m, const rumor_mixer_config_t *cfg, uint64_t *id)
{
    if (!cfg->membership)
        return rumor_err_set(RUMOR_EINVAL, "mixer: open membership needs membership (a "
                                           "topology family)");
    if (cfg->max_peers < 2 || cfg->nseeds < 0 || (cfg->nseeds && !cfg->seeds))
        return rumor_err_set(RUMOR_EINVAL, "mixer: open membership with %d peers, %d seeds",
                             cfg->max_peers, cfg->nseeds);
    if (cfg->keys)
        *id = rumor_curve_id(cfg->keys->public_key);
    else if (cfg->ids && cfg->ids[0])
        *id = cfg->ids[0];
    else
        while (!*id)
            randombytes_buf(id, sizeof *id);
    rumor_swim_member_t me = { .id = *id };
    int node;
    return rumor_swim_topology(cfg->membership, &me, 1, *id, &m->own_topo, &node);
}

int rumor_mixer_create(const rumor_mixer_config_t *cfg, const float *init, rumor_mixer_t **out)
{
    *out = NULL;
    const rumor_topo_t *t = cfg->topo;
    int open = cfg->max_peers > 0;
    if (!open && (!t || cfg->self < 0 || cfg->self >= t->n))
        return rumor_err_set(RUMOR_EINVAL, "mixer: peer %d is not a node of the topology",
                             cfg->self);
    if (cfg->nparams == 0)
        return rumor_err_set(RUMOR_EINVAL, "mixer: empty parameter space");
    rumor_mixer_t *m = calloc(1, sizeof *m);
    if (!m)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    m->cfg = *cfg;
    uint64_t open_id = 0;
    if (open && open_self(m, cfg, &open_id) < 0) {
        rumor_topo_destroy(&m->own_topo);
        free(m);
        return RUMOR_EINVAL;
    }
    if (open) {
        t = m->own_topo;
        m->cfg.topo = t;
        m->cfg.self = 0;
    }
    m->open = open;
    m->topo = t;
    m->self = m->cfg.self;
    m->npeers = open ? cfg->max_peers : t->n;
    m->n = cfg->nparams;
    m->chunk = cfg->chunk_elems ? cfg->chunk_elems : RUMOR_MIXER_CHUNK;
    if (m->chunk > m->n)
        m->chunk = m->n;
    m->nchunks = (size_t)rumor_wire_nchunks(m->n, m->chunk);
    m->max_recv = cfg->max_msg_elems ? cfg->max_msg_elems : MX_RECV_DEFAULT;
    if (m->max_recv < m->chunk)
        m->max_recv = m->chunk;
    m->timeout = cfg->round_timeout > 0 ? cfg->round_timeout : 10.0;
    if (m->cfg.min_round_timeout <= 0)
        m->cfg.min_round_timeout = 0.5;
    if (m->cfg.min_round_timeout > m->timeout)
        m->cfg.min_round_timeout = m->timeout;
    if (m->cfg.staleness <= 0)
        m->cfg.staleness = 8;
    m->swarm = cfg->swarm ? cfg->swarm : rumor_wire_swarm_id("rumor");
    if (cfg->incarnation) {
        m->incarnation = cfg->incarnation;
    } else {
        /* an identity, not a deadline: the wall clock, so that a restarted
         * process (even on another machine) has a larger incarnation */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m->incarnation = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->pub_mu, NULL);
    mx_cond_init(&m->cv);
    uint64_t *key_ids = NULL;
    int rc = 0;
    m->dev = cfg->dev;
    if (!m->dev && (rc = rumor_device_open("cpu:1", &m->own_dev)) == 0)
        m->dev = m->own_dev;
    if (rc == 0 && m->dev->kind != RUMOR_DEV_CPU)
        rc = rumor_err_set(RUMOR_ENOTSUP, "mixer: %s: the mixer's buffers are host memory; give "
                           "it a CPU device", m->dev->name);
    if (rc == 0 && open) {
        key_ids = calloc(1, sizeof *key_ids);
        if (!key_ids)
            rc = rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
        else if (cfg->keys && !cfg->allow)
            rc = rumor_err_set(RUMOR_EINVAL, "mixer: secure mode needs an allow-list");
        else
            key_ids[0] = open_id;
        m->cfg.ids = key_ids;
    } else if (rc == 0 && cfg->keys) {
        /* a peer's id is derived from its public key */
        key_ids = calloc((size_t)t->n, sizeof *key_ids);
        if (!key_ids)
            rc = rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
        else if (!cfg->peer_keys || !cfg->allow)
            rc = rumor_err_set(RUMOR_EINVAL, "mixer: secure mode needs every peer's public key "
                                             "and an allow-list");
        else if (memcmp(cfg->peer_keys[cfg->self], cfg->keys->public_key, 32) != 0)
            rc = rumor_err_set(RUMOR_EAUTH, "this peer's key (%s) is not the one listed for peer %d",
                               cfg->keys->public_z85, cfg->self);
        for (int j = 0; rc == 0 && j < t->n; j++)
            key_ids[j] = rumor_curve_id(cfg->peer_keys[j]);
        m->cfg.ids = key_ids;
    }
    if (rc == 0)
        rc = mx_alloc_state(m, &m->cfg);
    free(key_ids);
    m->cfg.ids = NULL;
    rumor_transport_opts_t to = { 0 };
    to.keys = cfg->keys;
    to.allow = cfg->allow;
    to.conns_per_peer = cfg->conns_per_peer;
    to.io_threads = cfg->io_threads;
    to.listen = cfg->listen ? cfg->listen : m->ep ? m->ep[m->self] : NULL;
    /* libzmq's bound is twice the receiver's: a range somewhat above the
     * limit is read and counted (chunk_too_large, named in the round's log
     * line); one above twice the limit never reaches rumor (libzmq closes
     * that connection before allocating it) */
    to.max_msg_size = rumor_wire_max_msg_size(2 * m->max_recv);
    to.heartbeat_ivl_ms = cfg->heartbeat_ivl_ms;
    to.heartbeat_timeout_ms = cfg->heartbeat_timeout_ms;
    /* an open swarm has a socket to every member: SWIM and the mixer's
     * heartbeats to its neighbours watch them, not ZeroMQ's to each (at
     * 128 peers on one machine those took most of its CPU, docs/scale.md) */
    to.no_heartbeats = open;
    to.dial = cfg->dial;
    to.dial_arg = cfg->reach_arg;
    if (rc == 0 && open && !to.listen)
        rc = rumor_err_set(RUMOR_EINVAL, "mixer: open membership needs an address to listen on");
    if (rc == 0)
        rc = rumor_transport_create(&to, m->npeers, &m->tr);
    if (rc == 0 && open)
        rc = own_endpoint(m);
    if (rc == 0 && open)
        rc = mx_open_seeds(m);
    for (int j = 0; rc == 0 && !open && j < m->npeers; j++)
        if (m->talks_to[j]) {
            if (cfg->keys)
                rc = rumor_transport_set_peer_key(m->tr, j, cfg->peer_keys[j]);
            if (rc == 0 && m->ep[j])
                rc = rumor_transport_connect(m->tr, j, m->ep[j]);
        }
    if (rc == 0)
        rc = mx_view_create(m);
    if (rc == 0) {
        m->params = mx_buf_get(m);
        if (!m->params)
            rc = RUMOR_ENOMEM;
        else
            rc = m->dev->ops->copy(m->dev, m->params->data, init, m->n * sizeof(float));
    }
    if (rc == 0 && (cfg->outlier_ratio > 0 || cfg->robust) && !cfg->async) {
        m->outlier_own0 = malloc(m->n * sizeof(float));
        rc = m->outlier_own0 ? m->dev->ops->copy(m->dev, m->outlier_own0, init,
                                                 m->n * sizeof(float))
                             : rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    }
    if (rc == 0)
        rc = mx_choco_alloc(m);
    if (rc == 0 && m->ch.on) /* a resumed peer's copy until its first keyframe */
        rc = m->dev->ops->copy(m->dev, m->ch.xhat, init, m->n * sizeof(float));
    for (long r = m->cur; rc == 0 && !cfg->async && r < m->cur + 2; r++)
        rc = mx_slot_open(m, &m->slot[r % m->nslots], r);
    if (rc == 0) {
        atomic_init(&m->caller_params, m->params);
        mx_publish(m); /* the queries' first answers */
        rc = mx_wake_open(m);
    }
    if (rc == 0 && pthread_create(&m->thread, NULL, comm_thread, m) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "mixer: cannot start the comm thread");
    else if (rc == 0)
        m->thread_started = 1;
    if (rc < 0) {
        rumor_mixer_destroy(&m, 0);
        return rc;
    }
    *out = m;
    return 0;
}

void rumor_mixer_destroy(rumor_mixer_t **mp, double grace)
{
    if (!mp || !*mp)
        return;
    rumor_mixer_t *m = *mp;
    if (m->thread_started) {
        pthread_mutex_lock(&m->mu);
        rumor_sendbuf_t *hold = m->caller.early_hold;
        m->caller.early_hold = NULL; /* a caller that failed between range_wait and round_end */
        struct mx_cmd c = { .op = MX_OP_STOP, .t = rumor_now(), .timeout = grace };
        (void)mx_post_locked(m, &c); /* (fails only when the comm thread has ended) */
        pthread_mutex_unlock(&m->mu);
        if (hold)
            atomic_fetch_sub_explicit(&hold->refs, 1, memory_order_release);
        pthread_join(m->thread, NULL);
    }
    mx_wake_close(m);
    rumor_transport_destroy(&m->tr);
    mx_free_state(m);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->pub_mu);
    pthread_cond_destroy(&m->cv);
    rumor_device_close(&m->own_dev);
    free(m);
    *mp = NULL;
}

const char *rumor_mixer_endpoint(const rumor_mixer_t *m) { return rumor_transport_endpoint(m->tr); }

uint64_t rumor_mixer_self_id(const rumor_mixer_t *m) { return m->ids[m->self]; }

int rumor_mixer_members(rumor_mixer_t *m)
{
    if (!m->cfg.membership)
        return m->npeers;
    pthread_mutex_lock(&m->pub_mu);
    int n = m->pub.members > 0 ? m->pub.members : 1;
    pthread_mutex_unlock(&m->pub_mu);
    return n;
}

float *rumor_mixer_params(rumor_mixer_t *m)
{
    return atomic_load_explicit(&m->caller_params, memory_order_acquire)->data;
}

void rumor_mixer_hurry(rumor_mixer_t *m)
{
    atomic_store(&m->hurry, 1);
    char c = 1;
    if (write(m->wake_fd[1], &c, 1) < 0) {
        /* the pipe is full: the comm thread is awake already */
    }
}

/* Posts a command nobody waits for: 0, or < 0 when the comm thread ended. */
static int post(rumor_mixer_t *m, struct mx_cmd *c)
{
    pthread_mutex_lock(&m->mu);
    int rc = mx_post_locked(m, c);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void rumor_mixer_set_timeout(rumor_mixer_t *m, double s)
{
    struct mx_cmd c = { .op = MX_OP_TIMEOUT, .timeout = s };
    (void)post(m, &c);
}

int rumor_mixer_barrier(rumor_mixer_t *m, double timeout)
{
    struct mx_cmd c = { .op = MX_OP_BARRIER, .t = rumor_now(), .timeout = timeout };
    struct mx_reply r;
    return mx_call(m, &c, &r);
}

void rumor_mixer_set_params_ready(rumor_mixer_t *m, int (*ready)(void *ctx), void *ctx)
{
    struct mx_cmd c = { .op = MX_OP_PARAMS_READY, .ready = ready, .ready_ctx = ctx };
    (void)post(m, &c);
}

int rumor_mixer_round_begin(rumor_mixer_t *m, long k)
{
    if (mx_terms_all_incompatible(m)) /* nothing can be mixed: say why, once more */
        return RUMOR_EINVAL;
    pthread_mutex_lock(&m->mu);
    long expected = m->caller.next_send;
    int rc = 0;
    if (k != expected) {
        rc = RUMOR_ESTATE;
    } else {
        struct mx_cmd c = { .op = MX_OP_BEGIN, .round = k, .t = rumor_now(),
                            .buf = atomic_load_explicit(&m->caller_params,
                                                        memory_order_relaxed) };
        rc = mx_post_locked(m, &c);
        if (rc == 0)
            m->caller.next_send = k + 1;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == RUMOR_ESTATE && k != expected)
        return rumor_err_set(RUMOR_ESTATE, "mixer: round %ld begun, expected %ld", k, expected);
    return rc;
}

/* Posts the close of round k (under mu), after checking it is the round
 * begun last and no close is pending. 0, or RUMOR_ESTATE (not said). */
static int post_close(rumor_mixer_t *m, long k)
{
    if (k != m->caller.next_send - 1 || m->caller.closing >= 0)
        return RUMOR_ESTATE;
    m->closed.done = 0;
    m->closed.round = -1;
    struct mx_cmd c = { .op = MX_OP_CLOSE, .round = k, .reply = &m->closed };
    int rc = mx_post_locked(m, &c);
    if (rc == 0)
        m->caller.closing = k;
    return rc;
}

/* Whether round k's close was answered (under mu). */
static int closed(const rumor_mixer_t *m, long k)
{
    return m->closed.done && m->closed.round == k;
}

/* Round k's cells of [lo, hi) (under mu): 1 when every one is mixed
 * (*data: the round's accumulator), 2 after this thread mixed one left to
 * it (mu was let go meanwhile: look again), 0 when some are not complete
 * or another thread mixes them. The slot is not opened for another round
 * while mu is held: the comm thread answers round k's close (under mu)
 * before it reuses k's slot. */
static int range_mixed(rumor_mixer_t *m, long k, size_t lo, size_t hi, float **data)
{
    if (m->cfg.async || m->ch.on)
        return 0; /* the mix is made whole at the close */
    struct mx_slot *s = &m->slot[k % m->nslots];
    if (atomic_load_explicit(&s->pub_round, memory_order_acquire) != k)
        return 0;
    int all = 1;
    for (size_t c = lo / m->chunk; c <= (hi - 1) / m->chunk; c++) {
        uint8_t st = atomic_load_explicit(&s->cstate[c], memory_order_acquire);
        if (st == MX_CELL_READY &&
            atomic_compare_exchange_strong(&s->cstate[c], &st, MX_CELL_MIXING)) {
            pthread_mutex_unlock(&m->mu);
            mx_caller_mix(m, s, c);
            pthread_mutex_lock(&m->mu);
            return 2;
        }
        all &= st == MX_CELL_MIXED;
    }
    if (all)
        *data = s->pub_data;
    return all;
}

void rumor_mixer_set_caller_mixes(rumor_mixer_t *m, int on)
{
    atomic_store(&m->caller_mixes, on != 0);
}

/* rumor_mixer_range_wait with wait < 0: mixes at most one cell, never waits
 * nor starts the round's close */
static int range_idle(rumor_mixer_t *m, long k, size_t lo, size_t hi, float **mixed)
{
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    if (k == m->caller.next_send - 1 && !closed(m, k))
        rc = range_mixed(m, k, lo, hi, mixed);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int rumor_mixer_range_wait(rumor_mixer_t *m, long k, size_t lo, size_t hi, double wait,
                           float **mixed)
{
    if (lo >= hi || hi > m->n)
        return rumor_err_set(RUMOR_EINVAL, "mixer: range [%zu, %zu) of a space of %zu", lo, hi,
                             m->n);
    if (wait < 0)
        return range_idle(m, k, lo, hi, mixed);
    double until = rumor_now() + (wait > 0 ? wait : 0);
    pthread_mutex_lock(&m->mu);
    if (m->caller.closing != k) {
        int prc = post_close(m, k);
        if (prc < 0) {
            pthread_mutex_unlock(&m->mu);
            return prc == RUMOR_ESTATE ? rumor_err_set(RUMOR_ESTATE, "mixer: range of round %ld "
                                                       "waited for out of order", k)
                                       : prc;
        }
        /* the caller may still read x(k) (other stages compute on it)
         * after the round closes: held until round_end */
        rumor_sendbuf_t *x = atomic_load_explicit(&m->caller_params, memory_order_relaxed);
        atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
        m->caller.early_hold = x;
    }
    int rc = 0;
    for (;;) {
        if (closed(m, k)) { /* closed: the whole mix is there */
            rc = m->closed.rc < 0 ? m->closed.rc : 1;
            if (rc > 0)
                *mixed = m->closed.buf->data;
            break;
        }
        int r = range_mixed(m, k, lo, hi, mixed);
        if (r == 2)
            continue; /* mixed a cell: look again */
        if (r == 1) {
            rc = 1;
            break;
        }
        if (wait <= 0 || mx_cond_wait_until(&m->cv, &m->mu, until) == ETIMEDOUT)
            break;
    }
    char msg[MX_ERR_LEN];
    snprintf(msg, sizeof msg, "%s", m->closed.err);
    pthread_mutex_unlock(&m->mu);
    if (rc < 0)
        return rumor_err_set(rc, "mixer: round %ld: %s", k, msg);
    return rc;
}

int rumor_mixer_send_ahead(rumor_mixer_t *m, long k, const float *x, size_t upto)
{
    pthread_mutex_lock(&m->mu);
    long ns = m->caller.next_send;
    int rc = 0;
    if (k != ns || m->caller.closing != k - 1 || !m->caller.early_hold) {
        rc = RUMOR_ESTATE;
    } else {
        struct mx_cmd c = { .op = MX_OP_AHEAD, .round = k, .x = x, .upto = upto };
        rc = mx_post_locked(m, &c);
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == RUMOR_ESTATE)
        return rumor_err_set(RUMOR_ESTATE, "mixer: round %ld sent ahead while round %ld is "
                             "next and no range of its predecessor was waited for", k, ns);
    return rc;
}

int rumor_mixer_round_range(void *round, int stage, size_t lo, size_t hi, double wait,
                            float **mixed)
{
    const rumor_mixer_round_t *r = round;
    (void)stage;
    return rumor_mixer_range_wait(r->m, r->k, lo, hi, wait, mixed);
}

int rumor_mixer_round_stepped(void *round, const float *x, size_t upto)
{
    const rumor_mixer_round_t *r = round;
    return rumor_mixer_send_ahead(r->m, r->k + 1, x, upto);
}

int rumor_mixer_round_end(rumor_mixer_t *m, long k, float **params, rumor_round_stats_t *st)
{
    double t0 = rumor_now();
    pthread_mutex_lock(&m->mu);
    if (m->caller.closing != k) {
        int prc = post_close(m, k);
        if (prc < 0) {
            pthread_mutex_unlock(&m->mu);
            return prc == RUMOR_ESTATE ? rumor_err_set(RUMOR_ESTATE, "mixer: round %ld ended "
                                                       "out of order", k)
                                       : prc;
        }
    }
    rumor_sendbuf_t *hold = m->caller.early_hold; /* range_wait asked for the close */
    m->caller.early_hold = NULL;
    float *unused;
    while (!closed(m, k))
        /* cells left to the caller that no range_wait mixed: mixed here */
        if (!mx_caller_mixes(m) || range_mixed(m, k, 0, m->n, &unused) != 2)
            pthread_cond_wait(&m->cv, &m->mu);
    m->caller.closing = -1;
    int rc = m->closed.rc;
    char msg[MX_ERR_LEN];
    snprintf(msg, sizeof msg, "%s", m->closed.err);
    rumor_sendbuf_t *out = m->closed.buf;
    if (rc == 0) {
        if (st) {
            *st = m->closed.st;
            st->wait_s = rumor_now() - t0;
        }
        atomic_store_explicit(&m->caller_params, m->closed.buf, memory_order_release);
        m->caller.next_send = m->closed.next;
    }
    pthread_mutex_unlock(&m->mu);
    if (hold) { /* the caller let go of x(k) */
        atomic_fetch_sub_explicit(&hold->refs, 1, memory_order_release);
        mx_wake(m);
    }
    if (rc < 0)
        return rumor_err_set(rc, "mixer: round %ld: %s", k, msg);
    *params = out->data;
    return 0;
}

int rumor_mixer_allreduce_mean(rumor_mixer_t *m, float *buf, size_t n, long tag, double timeout,
                               int coded)
{
    if (n != m->n)
        return rumor_err_set(RUMOR_EINVAL, "all-reduce of %zu floats in a space of %zu", n, m->n);
    if (coded && m->cfg.codec.kind != RUMOR_CODEC_INT8 && m->cfg.codec.kind != RUMOR_CODEC_INT4)
        return rumor_err_set(RUMOR_EINVAL, "a coded all-reduce takes int8 or int4, not this "
                                           "mixer's codec");
    struct mx_cmd c = { .op = MX_OP_ALLREDUCE, .data = buf, .tag = tag, .timeout = timeout,
                        .coded = coded };
    struct mx_reply r;
    int rc = mx_call(m, &c, &r);
    return rc < 0 ? rc : 0;
}

int rumor_mixer_jump(rumor_mixer_t *m, long round)
{
    pthread_mutex_lock(&m->mu);
    long ns = m->caller.next_send;
    int busy = m->caller.closing >= 0;
    if (!busy && round > ns)
        m->caller.next_send = round;
    pthread_mutex_unlock(&m->mu);
    if (busy || round < ns)
        return rumor_err_set(RUMOR_ESTATE, "mixer: jump to round %ld from %ld", round, ns);
    if (round == ns)
        return 0;
    struct mx_cmd c = { .op = MX_OP_JUMP, .round = round };
    struct mx_reply r;
    return mx_call(m, &c, &r);
}

int rumor_mixer_catch_up(rumor_mixer_t *m, long *round, float **params, double timeout)
{
    pthread_mutex_lock(&m->mu);
    int busy = m->caller.closing >= 0;
    pthread_mutex_unlock(&m->mu);
    if (busy)
        return rumor_err_set(RUMOR_ESTATE, "mixer: catch-up during a round");
    struct mx_cmd c = { .op = MX_OP_CATCHUP, .t = rumor_now(), .timeout = timeout };
    struct mx_reply r;
    int rc = mx_call(m, &c, &r);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&m->mu);
    m->caller.next_send = r.round;
    atomic_store_explicit(&m->caller_params, r.buf, memory_order_release);
    pthread_mutex_unlock(&m->mu);
    *round = r.round;
    *params = r.buf->data;
    return 0;
}

/* ------------------------------------------- what the comm thread published */

long rumor_mixer_swarm_round(rumor_mixer_t *m)
{
    pthread_mutex_lock(&m->pub_mu);
    long r = m->pub.swarm_round;
    pthread_mutex_unlock(&m->pub_mu);
    return r;
}

void rumor_mixer_counters(rumor_mixer_t *m, rumor_mixer_counters_t *out)
{
    pthread_mutex_lock(&m->pub_mu);
    *out = m->pub.counters;
    pthread_mutex_unlock(&m->pub_mu);
}

int rumor_mixer_robust_scores(rumor_mixer_t *m, rumor_robust_score_t *out, int cap)
{
    pthread_mutex_lock(&m->pub_mu);
    int n = m->pub.nrobust < cap ? m->pub.nrobust : cap;
    if (n > 0)
        memcpy(out, m->pub.robust, (size_t)n * sizeof *out);
    pthread_mutex_unlock(&m->pub_mu);
    return n > 0 ? n : 0;
}

int rumor_mixer_allreduce_size(rumor_mixer_t *m)
{
    pthread_mutex_lock(&m->pub_mu);
    int n = m->pub.ar_size;
    pthread_mutex_unlock(&m->pub_mu);
    return n;
}

void rumor_mixer_traffic(rumor_mixer_t *m, uint64_t *sent, uint64_t *received)
{
    pthread_mutex_lock(&m->pub_mu);
    *sent = m->pub.sent;
    *received = m->pub.received;
    pthread_mutex_unlock(&m->pub_mu);
}

void rumor_mixer_wire_stats(rumor_mixer_t *m, rumor_wire_stats_t *out)
{
    pthread_mutex_lock(&m->pub_mu);
    *out = m->pub.wire_stats;
    pthread_mutex_unlock(&m->pub_mu);
}

void rumor_mixer_transport_stats(rumor_mixer_t *m, rumor_transport_stats_t *out)
{
    pthread_mutex_lock(&m->pub_mu);
    *out = m->pub.ts;
    pthread_mutex_unlock(&m->pub_mu);
}

/* ------------------------------------------------------ the comm thread */

static void *comm_thread(void *arg)
{
    rumor_mixer_t *m = arg;
    mx_comm_main(m);
    mx_cmd_shutdown(m); /* whoever still waits is answered */
    return NULL;
}
