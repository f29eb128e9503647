/* The mixer's command path (see mixer_int.h): the caller's threads post
 * commands to the comm thread and wait for its replies; the comm thread
 * takes them between polls and serves them in the order they came. Also the
 * barrier, which the comm thread answers once it holds, and what it
 * publishes for the caller's queries. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"

/* ------------------------------------------------- the caller's side */

int mx_post_locked(rumor_mixer_t *m, struct mx_cmd *c)
{
    /* send_ahead comes once per stage step: a queued AHEAD of the same round
     * is moved on instead of queueing another */
    if (c->op == MX_OP_AHEAD && m->cmd_n > 0) {
        struct mx_cmd *last = &m->cmdq[(m->cmd_head + m->cmd_n - 1) % MX_CMDQ];
        if (last->op == MX_OP_AHEAD && last->round == c->round && last->x == c->x) {
            if (c->upto > last->upto)
                last->upto = c->upto;
            return 0;
        }
    }
    while (!m->comm_gone && m->cmd_n == MX_CMDQ)
        pthread_cond_wait(&m->cv, &m->mu);
    if (m->comm_gone)
        return rumor_err_set(RUMOR_ESTATE, "mixer: its comm thread has ended");
    m->cmdq[(m->cmd_head + m->cmd_n) % MX_CMDQ] = *c;
    m->cmd_n++;
    mx_wake(m);
    return 0;
}

int mx_call(rumor_mixer_t *m, struct mx_cmd *c, struct mx_reply *r)
{
    r->done = 0;
    r->rc = 0;
    r->err[0] = '\0';
    c->reply = r;
    pthread_mutex_lock(&m->mu);
    int rc = mx_post_locked(m, c);
    while (rc == 0 && !r->done)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
    if (rc < 0)
        return rc;
    if (r->rc < 0)
        return rumor_err_set(r->rc, "%s", r->err);
    return r->rc;
}

/* --------------------------------------------------- replies */

void mx_reply_locked(struct mx_reply *r, int rc, const char *msg)
{
    r->rc = rc;
    if (rc < 0)
        snprintf(r->err, sizeof r->err, "%s", msg && *msg ? msg : "failed");
    r->done = 1;
}

void mx_reply(rumor_mixer_t *m, struct mx_reply *r, int rc, const char *fmt, ...)
{
    if (!r)
        return;
    char msg[MX_ERR_LEN] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&m->mu);
    mx_reply_locked(r, rc, msg);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

void mx_cmd_broadcast(rumor_mixer_t *m)
{
    pthread_mutex_lock(&m->mu);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

void mx_cmd_shutdown(rumor_mixer_t *m)
{
    const char *why = "mixer: stopped";
    pthread_mutex_lock(&m->mu);
    m->comm_gone = 1;
    struct mx_reply *pending[] = { m->close_reply, m->cu_reply, m->ar_reply, m->barrier_reply };
    for (size_t i = 0; i < sizeof pending / sizeof *pending; i++)
        if (pending[i])
            mx_reply_locked(pending[i], RUMOR_ESTATE, why);
    m->close_reply = m->cu_reply = m->ar_reply = m->barrier_reply = NULL;
    for (int i = 0; i < m->cmd_n; i++) {
        struct mx_cmd *c = &m->cmdq[(m->cmd_head + i) % MX_CMDQ];
        if (c->reply)
            mx_reply_locked(c->reply, RUMOR_ESTATE, why);
    }
    m->cmd_n = 0;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------- serving commands */

/* The round begun goes out once its parameters are written: the
 * params_ready hook is asked every loop (every millisecond while it says 0,
 * see the poll) and the round neither sends nor closes meanwhile. */
static void start_pending_send(rumor_mixer_t *m)
{
    m->send_waiting = 0;
    long k = m->pend_send;
    if (k < 0)
        return;
    if (m->params_ready) { /* a device query: it must not block */
        int r = m->params_ready(m->params_ready_ctx);
        if (r == 0) {
            m->send_waiting = 1;
            return;
        }
        if (r < 0)
            rumor_warn("mixer: round %ld: the parameters' copy failed (%s); sending them as "
                       "they are", k, rumor_err_msg());
    }
    m->pend_send = -1;
    mx_start_send(m, k, m->pend_send_buf);
    if (k >= 1)
        m->hello_active = 0; /* everyone who was coming has come */
}

static void serve(rumor_mixer_t *m, const struct mx_cmd *c)
{
    switch (c->op) {
    case MX_OP_BEGIN:
        m->round_start = c->t;
        m->pend_send = c->round;
        m->pend_send_buf = c->buf;
        start_pending_send(m); /* before a send-ahead of the next round, served next */
        break;
    case MX_OP_AHEAD:
        if (!m->stop)
            mx_send_ahead(m, c->round, c->x, c->upto);
        break;
    case MX_OP_CLOSE: /* by its deadline, or as soon as it is complete */
        m->close_round = c->round;
        m->close_reply = c->reply;
        m->cur_deadline = m->cfg.async ? 0 : mx_deadline(m);
        m->close_deadline = m->round_start + m->cur_deadline;
        break;
    case MX_OP_JUMP:
        mx_do_jump(m, c->round);
        mx_reply(m, c->reply, 0, NULL);
        break;
    case MX_OP_CATCHUP:
        if (m->cu.active) {
            mx_reply(m, c->reply, RUMOR_ESTATE, "mixer: a catch-up is in progress");
            break;
        }
        m->cu.active = 1;
        m->cu.deadline = c->t + c->timeout;
        m->cu_reply = c->reply;
        break;
    case MX_OP_ALLREDUCE:
        if (m->ar.active) {
            mx_reply(m, c->reply, RUMOR_ESTATE, "mixer: an all-reduce is in progress");
            break;
        }
        m->ar.buf = c->data;
        m->ar.tag = c->tag;
        m->ar.timeout = c->timeout;
        m->ar.coded = c->coded;
        m->ar_reply = c->reply;
        ar_start(m);
        break;
    case MX_OP_BARRIER:
        m->hello_active = 1;
        m->barrier_run = 1;
        m->barrier_deadline = c->t + c->timeout;
        m->barrier_timeout = c->timeout;
        if (m->barrier_reply) /* a second barrier at once: the first one answers now */
            mx_reply(m, m->barrier_reply, RUMOR_ESTATE, "mixer: another barrier began");
        m->barrier_reply = c->reply;
        break;
    case MX_OP_TIMEOUT:
        if (c->timeout > 0)
            m->timeout = c->timeout;
        break;
    case MX_OP_PARAMS_READY:
        m->params_ready = c->ready;
        m->params_ready_ctx = c->ready_ctx;
        break;
    case MX_OP_PROBE: {
        int q = mx_probe_verdict(m, c->probe);
        mx_reply(m, c->reply, q, q < 0 ? "%s" : NULL, rumor_err_msg());
        break;
    }
    case MX_OP_STOP:
        m->stop = 1;
        m->stop_deadline = c->t + (c->timeout > 0 ? c->timeout : 0);
        break;
    }
}

void mx_take_commands(rumor_mixer_t *m)
{
    struct mx_cmd batch[MX_CMDQ];
    pthread_mutex_lock(&m->mu);
    int n = m->cmd_n;
    for (int i = 0; i < n; i++)
        batch[i] = m->cmdq[(m->cmd_head + i) % MX_CMDQ];
    m->cmd_head = (m->cmd_head + n) % MX_CMDQ;
    m->cmd_n = 0;
    if (n > 0) /* room in the queue; a range waiter looks at the cells again */
        pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    int began = 0;
    for (int i = 0; i < n; i++) {
        serve(m, &batch[i]);
        began |= batch[i].op == MX_OP_BEGIN;
    }
    if (!began) /* a send still waiting for the hook: asked again */
        start_pending_send(m);
}

/* ------------------------------------------------------ the barrier */

/* Open membership: until min_members peers are alive and every one of
 * them answered. A newcomer to a swarm already running (its neighbours'
 * answers name a round past 0) waits only for its in-neighbours of the
 * swarm's round, and after MX_JOIN_GRACE seconds for any one member: the
 * round logic does not wait for a member that never answered, and a view
 * of a hundred members holds some that are dead and not yet declared, so
 * waiting for all of them held a newcomer for the whole start timeout. */
#define MX_JOIN_GRACE 2.0
static int open_waiting(rumor_mixer_t *m, int *ready)
{
    int want = m->cfg.min_members > 1 ? m->cfg.min_members : 1;
    int r = 0;
    for (int i = 0; m->swim && i < m->vn; i++)
        r += m->vslot[i] >= 0 && m->vslot[i] != m->self && m->ready[m->vslot[i]];
    *ready = r;
    if (m->rank_state < 0)
        return 0;
    if (m->rank_state != 2 || m->vn < want)
        return 1;
    if (r >= m->vn - 1)
        return 0;
    long sr = mx_swarm_round(m);
    if (sr <= 0 || r == 0)
        return 1;
    if (rumor_now() - (m->barrier_deadline - m->barrier_timeout) >= MX_JOIN_GRACE)
        return 0;
    int k = mx_in_neighbors(m, sr, m->tmp_nbrs, NULL);
    for (int i = 0; i < k; i++)
        if (m->tmp_nbrs[i] != m->self && !m->ready[m->tmp_nbrs[i]])
            return 1;
    return k < 0;
}

/* A list: until the rank check passed and everyone answered; with
 * membership, also until SWIM's view holds everyone who answered. A
 * neighbour whose terms differ has answered, in its way; with none
 * compatible, until each was told this peer's terms (then it fails). */
static int list_waiting(const rumor_mixer_t *m)
{
    return m->rank_state >= 0 &&
           (m->rank_state != 2 || m->nready + m->nincompat < m->ntalk ||
            (m->nready == 0 && m->nincompat > 0) || (m->swim && m->vn < m->nready + 1));
}

/* This peer's own connections to others came up, yet no other peer's
 * message ever arrived at its listener: it can dial out, nobody can dial
 * in (a NAT, a firewall, or an address announced that leads elsewhere). */
static int unreachable(const rumor_mixer_t *m)
{
    return rumor_transport_stats(m->tr)->out_hs_ok > 0 && m->heard_others == 0;
}

static void open_answer(rumor_mixer_t *m, struct mx_reply *r, int vready)
{
    double timeout = m->barrier_timeout;
    int alive = m->vn, want = m->cfg.min_members > 1 ? m->cfg.min_members : 1;
    char msg[MX_ERR_LEN];
    if (atomic_load(&m->hurry)) { /* leaving before the first round: nobody to blame */
        mx_reply(m, r, vready, NULL);
        return;
    }
    if (m->incompat_all) {
        mx_terms_all_msg(m, msg, sizeof msg);
        mx_reply(m, r, RUMOR_EINVAL, "%s", msg);
        return;
    }
    if (m->rank_state < 0) {
        mx_reply(m, r, RUMOR_EINVAL, "%s", m->rank_err);
        return;
    }
    if (alive < want) {
        char seeds[512] = "";
        for (int i = 0; i < m->cfg.nseeds && strlen(seeds) < 400; i++)
            snprintf(seeds + strlen(seeds), sizeof seeds - strlen(seeds), "%s%s", i ? ", " : "",
                     m->cfg.seeds[i]);
        if (alive <= 1 && m->cfg.nseeds && unreachable(m))
            mx_reply(m, r, RUMOR_ETIMEOUT,
                     "this peer reached %s (%s handshake completed) but nothing came back "
                     "to its address %s within %.1f s: the others cannot dial it (a NAT or a "
                     "firewall in between?); announce an address they can reach with "
                     "--advertise (a port forwarded to this one), or run it where it can be "
                     "reached", seeds, rumor_transport_secure(m->tr) ? "the CurveZMQ" : "the",
                     mx_endpoint_name(m, m->self), timeout);
        else if (alive <= 1 && m->cfg.nseeds)
            mx_reply(m, r, RUMOR_ETIMEOUT,
                     "no peer answered at %s within %.1f s: check the address, that a peer "
                     "runs there%s", seeds, timeout,
                     rumor_transport_secure(m->tr) ? ", and that this peer's key is on its "
                                                     "allow-list"
                                                   : "");
        else
            mx_reply(m, r, RUMOR_ETIMEOUT, "%d peer%s alive after %.1f s, %d wanted", alive,
                     alive == 1 ? "" : "s", timeout, want);
        return;
    }
    if (vready < alive - 1 && mx_swarm_round(m) <= 0)
        rumor_warn("%d of the %d peers alive did not answer within %.1f s: treated as absent "
                   "until they do", alive - 1 - vready, alive - 1, timeout);
    else if (vready < alive - 1)
        rumor_info("joined a swarm at round %ld with %d of the %d members in view answering; "
                   "the others are treated as absent until they do", mx_swarm_round(m), vready,
                   alive - 1);
    mx_reply(m, r, vready, NULL);
}

static void list_answer(rumor_mixer_t *m, struct mx_reply *r)
{
    char msg[MX_ERR_LEN];
    int conflict = m->rank_state < 0;
    if (!conflict && m->incompat_all) {
        mx_terms_all_msg(m, msg, sizeof msg);
        mx_reply(m, r, RUMOR_EINVAL, "%s", msg);
        return;
    }
    if (conflict) {
        mx_reply(m, r, RUMOR_EINVAL, "%s", m->rank_err);
        return;
    }
    if (!atomic_load(&m->hurry) && m->nready == 0 && m->ntalk > 0 && unreachable(m))
        rumor_warn("this peer's connections to its neighbours came up but none of them "
                   "reached it at %s within %.1f s: they cannot dial it (a NAT or a firewall "
                   "in between?); list an address they can reach", mx_endpoint_name(m, m->self),
                   m->barrier_timeout);
    if (!atomic_load(&m->hurry)) /* leaving before the first round: nobody to blame */
        for (int j = 0; j < m->npeers; j++)
            if (m->talks_to[j] && !m->ready[j] && !m->incompatible[j])
                rumor_warn("peer %d (%s) did not answer within %.1f s: treated as absent until "
                           "it does", j, mx_endpoint_name(m, j), m->barrier_timeout);
    mx_reply(m, r, m->nready, NULL);
}

void mx_barrier_progress(rumor_mixer_t *m)
{
    struct mx_reply *r = m->barrier_reply;
    if (!r)
        return;
    int vready = 0;
    int waiting = m->open ? open_waiting(m, &vready) : list_waiting(m);
    if (waiting && rumor_now() < m->barrier_deadline && !atomic_load(&m->hurry) &&
        !m->incompat_all)
        return;
    m->barrier_reply = NULL;
    if (m->open)
        open_answer(m, r, vready);
    else
        list_answer(m, r);
}

/* ------------------------------------------------------ publishing */

void mx_publish(rumor_mixer_t *m)
{
    const rumor_transport_stats_t *ts = rumor_transport_stats(m->tr);
    long sr = mx_swarm_round(m);
    if (m->swim) {
        rumor_swim_stats_t ss;
        rumor_swim_stats(m->swim, &ss);
        m->counters.swim_messages = ss.messages_sent;
        m->counters.swim_health = ss.health;
    }
    pthread_mutex_lock(&m->pub_mu);
    m->pub.wire_stats = m->wire_stats;
    m->pub.sent = ts->bytes_sent;
    m->pub.received = ts->bytes_received;
    m->pub.ts = *ts;
    m->pub.counters = m->counters;
    m->pub.swarm_round = sr;
    m->pub.members = m->vn;
    m->pub.ar_size = m->ar.last_rn;
    m->pub.nrobust = mx_robust_publish(m, m->pub.robust);
    pthread_mutex_unlock(&m->pub_mu);
}
