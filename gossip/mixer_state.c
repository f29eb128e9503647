/* The mixer's round tracking and state transfer (see mixer.h): what round
 * each neighbour is at, telling a neighbour that fell behind, jumping this
 * peer's round forward, adaptive deadlines, and serving and fetching the
 * parameters for a late joiner or a restarted peer. Runs on the comm
 * thread.
 *
 * State transfer: the joiner cuts the space into contiguous parts, one per
 * neighbour that is at least at its round, and asks each for its part
 * (STATE_REQ: offset, length, request id in aux). Which neighbour serves
 * which part is rotated by the joiner's id, so joiners arriving together
 * spread over their neighbours. A source sends its part of x(s), the
 * parameters it sent in its newest round s, as STATE_CHUNK messages cut by
 * its own chunk size (any ranges inside the part do: the joiner tracks what
 * covers it); the last one carries the BLAKE2b-256 digest of the whole part.
 * The snapshot is pinned while it is served, so the part is one consistent
 * x(s). A part whose source stalls for 3 s or whose digest does not match is
 * asked of another neighbour. */
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "mixer_int.h"

#define STALL_S 3.0          /* a source silent this long is replaced */
#define TELL_BEHIND_S 0.25   /* at most one "you are behind" per peer per this */

int mx_state_alloc(rumor_mixer_t *m)
{
    int N = m->npeers;
    m->peer_round = malloc((size_t)N * sizeof *m->peer_round);
    m->said_round = malloc((size_t)N * sizeof *m->said_round);
    m->ctl_round = malloc((size_t)N * sizeof *m->ctl_round);
    m->stale_reply = calloc((size_t)N, sizeof *m->stale_reply);
    m->cu.tried = calloc((size_t)N, 1);
    m->cu.cand = calloc((size_t)N, sizeof *m->cu.cand);
    m->last_heard = calloc((size_t)N, sizeof *m->last_heard);
    m->last_redial = calloc((size_t)N, sizeof *m->last_redial);
    if (!m->peer_round || !m->said_round || !m->ctl_round || !m->stale_reply || !m->cu.tried || !m->cu.cand || !m->last_heard ||
        !m->last_redial)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    double now = rumor_now(); /* a peer not heard from yet is alive at first */
    for (int j = 0; j < N; j++) {
        m->peer_round[j] = -1;
        m->said_round[j] = -1;
        m->ctl_round[j] = -1;
        m->last_heard[j] = now;
    }
    for (int p = 0; p < MX_MAX_PARTS; p++)
        if (mx_cover_check(&m->cu.part[p].have, 0, 1) < 0) /* its first interval's room */
            return RUMOR_ENOMEM;
    for (int i = 0; i < MX_MAX_SERVES; i++)
        m->serve[i].node = -1;
    m->told_behind = -1;
    m->cur_deadline = m->timeout;
    m->next_req_id = (uint32_t)(m->incarnation ^ (m->incarnation >> 32)) | 1u;
    return 0;
}

void mx_state_free(rumor_mixer_t *m)
{
    free(m->peer_round);
    free(m->said_round);
    free(m->ctl_round);
    free(m->stale_reply);
    free(m->cu.tried);
    free(m->cu.cand);
    free(m->last_heard);
    free(m->last_redial);
    for (int p = 0; p < MX_MAX_PARTS; p++)
        mx_cover_free(&m->cu.part[p].have);
}

/* ------------------------------------------------------ rounds */

void mx_heard_round(rumor_mixer_t *m, int node, long round)
{
    if (node < 0 || round < 0 || round > m->cur + MX_ROUND_SANITY)
        return;
    if (round > m->peer_round[node])
        m->peer_round[node] = round;
}

/* The newest round neighbours are known to be at: with two or more known,
 * the second highest claim, so that one broken or hostile neighbour naming
 * a far-future round cannot make this peer skip ahead (or fetch state) on
 * its own say; with one, its claim. */
long mx_swarm_round(const rumor_mixer_t *m)
{
    long best = -1, second = -1;
    int known = 0;
    for (int j = 0; j < m->npeers; j++) {
        if (!m->talks_to[j] || m->peer_round[j] < 0)
            continue;
        known++;
        long r = m->peer_round[j];
        if (r > best) {
            second = best;
            best = r;
        } else if (r > second) {
            second = r;
        }
    }
    return known >= 2 ? second : best;
}

/* A neighbour sent a round this peer has mixed already: tell it where the
 * swarm is (HELLO with aux 3 and this peer's round), so that a peer that
 * missed a deadline, thawed or reconnected after a partition learns it is
 * behind and skips ahead (rumor-peer) instead of sending rounds nobody
 * uses. */
void mx_tell_behind(rumor_mixer_t *m, int node)
{
    double now = rumor_now();
    if (!m->talks_to[node] || now - m->stale_reply[node] < TELL_BEHIND_S)
        return;
    m->stale_reply[node] = now;
    (void)mx_send_control(m, node, RUMOR_WIRE_HELLO, 3);
}

void mx_do_jump(rumor_mixer_t *m, long round)
{
    if (round <= m->cur)
        return;
    m->ch.valid = 0; /* compressed: the neighbours' copies moved on without us */
    for (int i = 0; i < m->nslots; i++) {
        struct mx_slot *s = &m->slot[i];
        if (s->round >= 0 && s->round < round) {
            if (s->buf)
                mx_buf_retire(m, s->buf);
            s->buf = NULL;
            s->round = -1;
        }
    }
    rumor_info("jumping from round %ld to %ld", m->cur, round);
    m->counters.jumps++;
    m->counters.rounds_skipped += (uint64_t)(round - m->cur);
    m->cur = round;
}

/* Drops the state transfers being served to `node`: what ZeroMQ queued for
 * it goes with its socket when that is replaced. */
void mx_drop_serves(rumor_mixer_t *m, int node)
{
    for (int v = 0; v < MX_MAX_SERVES; v++)
        if (m->serve[v].node == node) {
            m->serve[v].buf->pins--;
            m->serve[v].node = -1;
        }
}

/* A neighbour silent for 3 s gets a fresh connection every 0.25 s: after
 * a partition heals (or a peer's machine comes back) the kernel's SYN
 * backoff would otherwise keep the link down for several more seconds.
 * Past 10 s of silence, less often (a sixteenth of the silence, at most
 * every second): a neighbour that is up but does not know this peer yet (a
 * newcomer's, in a large swarm) can be silent for a long while, and
 * remaking 14 connections 4 times a second each left a starved newcomer's
 * ZeroMQ context without sockets for anyone (docs/scale.md). */
void mx_redial(rumor_mixer_t *m)
{
    /* Only an in-neighbour of the current round is expected to be heard
     * from: an out-only neighbour (a directed topology) or one that the
     * all-reduce does not receive from is silent by design, and a fresh
     * socket would throw away what ZeroMQ still queues for it. */
    if (m->ar.active)
        return;
    double now = rumor_now();
    int nin = -1; /* the round's in-neighbours, looked up once a peer is due */
    for (int j = 0; j < m->npeers; j++) {
        double silent = now - m->last_heard[j], gap = silent < 10 ? 0.25 : silent / 16;
        gap = gap > 1.0 ? 1.0 : gap;
        if (!m->talks_to[j] || silent < 3.0 || now - m->last_redial[j] < gap)
            continue;
        if (nin < 0)
            nin = mx_in_neighbors(m, m->cur, m->tmp_nbrs, m->tmp_w);
        int in = 0;
        for (int i = 0; i < nin && !in; i++)
            in = m->tmp_nbrs[i] == j;
        if (!in) {
            m->last_redial[j] = now; /* not due: looked at again in 0.25 s */
            continue;
        }
        if (m->last_redial[j] == 0) { /* the first pass only starts the clock */
            m->last_redial[j] = now;
            continue;
        }
        m->last_redial[j] = now;
        rumor_debug("mixer: peer %d silent for %.1f s: reconnecting, %d round(s) queued for it dropped",
                    j, now - m->last_heard[j], m->sendq[j].n);
        mx_drop_serves(m, j);
        struct mx_sendq *q = &m->sendq[j];
        for (int v = 0; v < q->n; v++) /* rounds queued for it are old by now */
            q->buf[v]->pins--;
        q->n = 0;
        q->stuck = 1;
        if (m->ep[j] && rumor_transport_connect(m->tr, j, m->ep[j]) < 0)
            rumor_debug("mixer: reconnecting peer %d: %s", j, rumor_err_msg());
    }
}

/* ------------------------------------------------------ deadlines */

void mx_record_round_time(rumor_mixer_t *m, double seconds)
{
    m->samples[m->nsamples % MX_DEADLINE_SAMPLES] = seconds;
    m->nsamples++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double rumor_round_deadline(const double *ring, long n, int cap, double min_timeout,
                            double timeout, double *pace)
{
    if (min_timeout >= timeout)
        return timeout;
    if (n < 8) {
        double d = 4.0 * min_timeout;
        return d < timeout ? d : timeout;
    }
    int k = n < cap ? (int)n : cap;
    double v[256];
    if (k > 256)
        k = 256;
    memcpy(v, ring, (size_t)k * sizeof *v);
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    if (pace)
        *pace = v[k / 2];
    double d = 4.0 * v[k / 2];
    if (d < min_timeout)
        d = min_timeout;
    if (d > timeout)
        d = timeout;
    return d;
}

double mx_deadline(rumor_mixer_t *m)
{
    return rumor_round_deadline(m->samples, (long)m->nsamples, MX_DEADLINE_SAMPLES,
                                m->cfg.min_round_timeout, m->timeout, &m->pace);
}

/* ------------------------------------------------------ serving */

int mx_on_state_req(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node)
{
    if (m->sent_round < 0 || !m->sent_buf) {
        rumor_err_set(RUMOR_EPROTO, "state asked before this peer's first round");
        return -RUMOR_WIRE_UNEXPECTED;
    }
    if (!rumor_transport_push(m->tr, node)) {
        rumor_err_set(RUMOR_EPROTO, "state asked by a peer this one does not send to");
        return -RUMOR_WIRE_UNKNOWN_SENDER;
    }
    /* any range inside the space (wire_check) */
    struct mx_serve *sv = NULL, *old = NULL;
    for (int i = 0; i < MX_MAX_SERVES; i++)
        if (m->serve[i].node == node) {
            if (m->serve[i].req_id == h->aux) {
                rumor_err_set(RUMOR_EPROTO, "state request %u again", h->aux);
                return -RUMOR_WIRE_DUPLICATE;
            }
            old = &m->serve[i]; /* a new request replaces the old one */
        }
    mx_accept(m, h, node);
    if (old) {
        old->buf->pins--;
        old->node = -1;
        sv = old;
    }
    for (int i = 0; !sv && i < MX_MAX_SERVES; i++)
        if (m->serve[i].node < 0)
            sv = &m->serve[i];
    if (!sv) {
        rumor_info("peer %d asked for state while %d transfers run: it will ask another", node,
                   MX_MAX_SERVES);
        return 0;
    }
    sv->node = node;
    sv->req_id = h->aux;
    sv->next = (size_t)h->offset;
    sv->end = (size_t)(h->offset + h->length);
    sv->round = m->sent_round;
    sv->buf = m->sent_buf;
    sv->buf->pins++;
    sv->last = rumor_now();
    crypto_generichash(sv->digest, sizeof sv->digest, (const unsigned char *)(sv->buf->data + h->offset),
                       h->length * sizeof(float), NULL, 0);
    m->counters.state_served++;
    rumor_info("serving peer %d elements [%zu, %zu) of round %ld", node, sv->next, sv->end,
               sv->round);
    return 0;
}

int mx_state_wants_pollout(const rumor_mixer_t *m, int node)
{
    for (int i = 0; i < MX_MAX_SERVES; i++)
        if (m->serve[i].node == node)
            return 1;
    return 0;
}

static void serve_progress(rumor_mixer_t *m)
{
    for (int i = 0; i < MX_MAX_SERVES; i++) {
        struct mx_serve *sv = &m->serve[i];
        if (sv->node < 0)
            continue;
        void *sock = rumor_transport_push(m->tr, sv->node);
        while (sock && sv->next < sv->end) {
            /* ranges of this peer's chunk size, cut at its grid */
            uint64_t off = sv->next, c = off / m->chunk;
            uint64_t end = (c + 1) * m->chunk < sv->end ? (c + 1) * m->chunk : sv->end;
            uint64_t len = end - off;
            rumor_wire_hdr_t h;
            uint8_t bytes[RUMOR_WIRE_HDR_LEN];
            mx_fill_hdr(m, &h, RUMOR_WIRE_STATE_CHUNK);
            h.dtype = RUMOR_WIRE_DT_F32;
            h.round = (uint64_t)sv->round;
            h.chunk = (uint32_t)c;
            h.nchunks = (uint32_t)m->nchunks;
            h.offset = off;
            h.length = len;
            h.aux = sv->req_id;
            rumor_wire_encode(&h, bytes);
            int last = end == sv->end;
            /* the first frame decides: ZeroMQ queues a multipart message whole */
            if (mx_send_frame(sock, bytes, sizeof bytes, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0)
                break;
            if (mx_send_frame(sock, sv->buf->data + off, len * sizeof(float),
                           ZMQ_DONTWAIT | (last ? ZMQ_SNDMORE : 0)) < 0 ||
                (last && mx_send_frame(sock, sv->digest, sizeof sv->digest, ZMQ_DONTWAIT) < 0)) {
                rumor_warn("mixer: state chunk to peer %d: %s", sv->node,
                           zmq_strerror(zmq_errno()));
                break;
            }
            m->counters.state_bytes_served += len * sizeof(float);
            sv->next = (size_t)end;
            sv->last = rumor_now();
        }
        if (sock && sv->next < sv->end && rumor_now() - sv->last > 10.0)
            rumor_info("state transfer to peer %d stalled for 10 s: dropped", sv->node);
        if (!sock || sv->next >= sv->end || rumor_now() - sv->last > 10.0) {
            sv->buf->pins--;
            sv->node = -1;
        }
    }
}

/* ------------------------------------------------------ fetching */

/* Answers the catch-up: rc, why it failed, or the round to begin and the
 * parameters installed. */
static void cu_finish(rumor_mixer_t *m, int rc, const char *why)
{
    m->cu.active = 0;
    m->cu.nparts = 0;
    mx_publish(m); /* the counters with this fetch, before the reply */
    struct mx_reply *r = m->cu_reply;
    m->cu_reply = NULL;
    if (!r)
        return;
    pthread_mutex_lock(&m->mu);
    if (rc == 0) {
        r->round = m->cu.round;
        r->buf = m->params;
    }
    mx_reply_locked(r, rc, why);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Neighbours that can serve: heard from, at this peer's round or later;
 * sorted newest round first. Returns how many. */
static int candidates(rumor_mixer_t *m, int *out)
{
    int n = 0;
    for (int j = 0; j < m->npeers; j++)
        if (m->talks_to[j] && m->peer_round[j] >= 0 && m->peer_round[j] >= m->cur &&
            rumor_transport_push(m->tr, j))
            out[n++] = j;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && m->peer_round[out[b]] > m->peer_round[out[b - 1]]; b--) {
            int t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return n;
}

static int ask(rumor_mixer_t *m, struct mx_part *p)
{
    rumor_wire_hdr_t h;
    uint8_t bytes[RUMOR_WIRE_HDR_LEN];
    mx_fill_hdr(m, &h, RUMOR_WIRE_STATE_REQ);
    h.offset = p->lo;
    h.length = p->hi - p->lo;
    h.aux = p->req_id;
    h.round = m->cur > 0 ? (uint64_t)m->cur : 0;
    rumor_wire_encode(&h, bytes);
    int rc = rumor_transport_send(m->tr, p->src, bytes, sizeof bytes, NULL, NULL, 0);
    if (rc == 0) {
        p->asked = 1;
        p->last_progress = rumor_now();
    }
    return rc;
}

/* Gives part p a (new) source: one not tried yet, else any. */
static void assign(rumor_mixer_t *m, struct mx_part *p, const int *cand, int ncand, int pref)
{
    int src = -1;
    for (int i = 0; i < ncand && src < 0; i++) {
        int j = cand[(pref + i) % ncand];
        if (!m->cu.tried[j])
            src = j;
    }
    if (src < 0) {
        memset(m->cu.tried, 0, (size_t)m->npeers);
        src = cand[pref % ncand];
    }
    p->src = src;
    m->cu.tried[src] = 1;
    p->req_id = m->next_req_id++;
    mx_cover_clear(&p->have);
    p->round = -1;
    p->have_digest = 0;
    p->done = 0;
    p->asked = 0;
}

static void cu_install(rumor_mixer_t *m)
{
    long newest = -1;
    for (int i = 0; i < m->cu.nparts; i++)
        if (m->cu.part[i].round > newest)
            newest = m->cu.part[i].round;
    mx_buf_retire(m, m->params);
    m->params = m->cu.buf;
    m->cu.buf = NULL;
    /* the round after the newest any neighbour is known to have sent
     * (rounds went on during the transfer): its messages are still to come */
    long sr = mx_swarm_round(m);
    if (sr > newest)
        newest = sr;
    long k = newest + 1 > m->cur ? newest + 1 : m->cur;
    mx_do_jump(m, k);
    m->cu.round = m->cur;
    m->counters.state_fetches++;
    m->counters.state_bytes_fetched += m->n * sizeof(float);
    rumor_info("state of %zu parameters from %d neighbour%s (round %ld): joining at round %ld",
               m->n, m->cu.nparts, m->cu.nparts == 1 ? "" : "s", newest, m->cur);
    cu_finish(m, 0, NULL);
}

static void catchup_progress(rumor_mixer_t *m)
{
    struct mx_catchup *cu = &m->cu;
    double now = rumor_now();
    int hurry = atomic_load(&m->hurry); /* leaving: stop waiting for the state */
    if (now >= cu->deadline || hurry) {
        if (cu->buf)
            mx_buf_retire(m, cu->buf);
        cu->buf = NULL;
        char why[200];
        if (hurry)
            snprintf(why, sizeof why, "stopped: this peer is leaving");
        else
            snprintf(why, sizeof why, "no neighbour served the swarm's state (%d part%s asked)",
                     cu->nparts, cu->nparts == 1 ? "" : "s");
        cu_finish(m, RUMOR_ETIMEOUT, why);
        return;
    }
    int *cand = cu->cand;
    int ncand = candidates(m, cand);
    if (ncand == 0) {
        /* nobody known to be ahead yet: ask every neighbour its round */
        if (now >= cu->next_hello) {
            cu->next_hello = now + 0.25;
            for (int j = 0; j < m->npeers; j++)
                if (m->talks_to[j])
                    (void)mx_send_control(m, j, RUMOR_WIRE_HELLO, 1);
        }
        return;
    }
    if (cu->nparts == 0) {
        cu->buf = mx_buf_get(m);
        if (!cu->buf) {
            cu_finish(m, RUMOR_ENOMEM, "no buffer for the state");
            return;
        }
        int d = ncand < MX_MAX_PARTS ? ncand : MX_MAX_PARTS;
        if ((size_t)d > m->n)
            d = (int)m->n;
        memset(cu->tried, 0, (size_t)m->npeers);
        int rot = (int)(m->ids[m->self] % (uint64_t)d);
        for (int p = 0; p < d; p++) {
            struct mx_part *pt = &cu->part[p];
            /* parts of whole cells of this peer's grid where there are enough */
            size_t unit = m->nchunks >= (size_t)d ? m->chunk : 1;
            size_t units = (m->n + unit - 1) / unit;
            pt->lo = units * (size_t)p / (size_t)d * unit;
            pt->hi = units * (size_t)(p + 1) / (size_t)d * unit;
            if (pt->hi > m->n)
                pt->hi = m->n;
            assign(m, pt, cand, ncand, p + rot);
        }
        cu->nparts = d;
    }
    int all = 1;
    for (int p = 0; p < cu->nparts; p++) {
        struct mx_part *pt = &cu->part[p];
        if (pt->done)
            continue;
        all = 0;
        if (pt->asked && now - pt->last_progress > STALL_S) {
            rumor_info("state part %d: peer %d stalled; asking another", p, pt->src);
            assign(m, pt, cand, ncand, p + 1);
        }
        if (!pt->asked)
            (void)ask(m, pt);
    }
    if (all)
        cu_install(m);
}

int mx_on_state_chunk(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, zmq_msg_t *payload,
                      zmq_msg_t *body, int nbody)
{
    struct mx_part *pt = NULL;
    for (int p = 0; m->cu.active && p < m->cu.nparts; p++)
        if (m->cu.part[p].src == node && m->cu.part[p].req_id == h->aux && !m->cu.part[p].done)
            pt = &m->cu.part[p];
    if (!pt) {
        rumor_err_set(RUMOR_EPROTO, "state chunk of request %u, which is not pending", h->aux);
        return -RUMOR_WIRE_UNEXPECTED;
    }
    uint64_t lo = h->offset, hi = h->offset + h->length;
    if (lo < pt->lo || hi > pt->hi) {
        rumor_err_set(RUMOR_EPROTO, "state range [%llu, %llu) outside the part [%zu, %zu) asked for",
                      (unsigned long long)lo, (unsigned long long)hi, pt->lo, pt->hi);
        return -RUMOR_WIRE_BAD_RANGE;
    }
    int cv = mx_cover_check(&pt->have, lo, hi);
    if (cv != 0) {
        rumor_err_set(RUMOR_EPROTO, "state range [%llu, %llu) %s", (unsigned long long)lo,
                      (unsigned long long)hi, cv == 1 ? "again" : "in too many pieces");
        return cv == 1 ? -RUMOR_WIRE_DUPLICATE : -RUMOR_WIRE_BAD_RANGE;
    }
    if (pt->round >= 0 && (long)h->round != pt->round) {
        rumor_err_set(RUMOR_EPROTO, "state chunk of round %llu in a transfer of round %ld",
                      (unsigned long long)h->round, pt->round);
        return -RUMOR_WIRE_UNEXPECTED;
    }
    if (h->round >= (uint64_t)m->cur + MX_ROUND_SANITY) {
        rumor_err_set(RUMOR_EPROTO, "state of round %llu while at %ld",
                      (unsigned long long)h->round, m->cur);
        return -RUMOR_WIRE_FUTURE_ROUND;
    }
    if (nbody && zmq_msg_size(body) != sizeof pt->digest) {
        rumor_err_set(RUMOR_EPROTO, "state digest of %zu bytes", zmq_msg_size(body));
        return -RUMOR_WIRE_BAD_PAYLOAD_SIZE;
    }
    const void *data = zmq_msg_data(payload);
    if (!rumor_wire_payload_finite(data, h->length)) {
        rumor_err_set(RUMOR_EPROTO, "NaN or Inf in state range [%llu, %llu)",
                      (unsigned long long)lo, (unsigned long long)hi);
        return -RUMOR_WIRE_NONFINITE;
    }
    mx_accept(m, h, node);
    /* the payload may sit at any byte offset: copied as bytes */
    RUMOR_IGNORE(m->dev->ops->copy(m->dev, m->cu.buf->data + lo, data,
                                   h->length * sizeof(float)));
    if (nbody) {
        memcpy(pt->digest, zmq_msg_data(body), sizeof pt->digest);
        pt->have_digest = 1;
    }
    mx_cover_add(&pt->have, lo, hi);
    pt->round = (long)h->round;
    pt->last_progress = rumor_now();
    mx_heard_round(m, node, (long)h->round);
    if (pt->have.covered < pt->hi - pt->lo)
        return 0;
    uint8_t d[32];
    crypto_generichash(d, sizeof d, (const unsigned char *)(m->cu.buf->data + pt->lo),
                       (pt->hi - pt->lo) * sizeof(float), NULL, 0);
    if (!pt->have_digest || sodium_memcmp(d, pt->digest, sizeof d) != 0) {
        /* the ranges were well-formed; the part as a whole is refused */
        m->counters.digest_failures++;
        rumor_wire_stats_count(&m->wire_stats, -RUMOR_WIRE_BAD_DIGEST);
        rumor_warn("mixer: state part from peer %d %s; asking another neighbour", node,
                   pt->have_digest ? "does not match its digest" : "came without a digest");
        pt->asked = 1;
        pt->last_progress = -1e9; /* reassigned by the next catchup_progress */
        return 0;
    }
    pt->done = 1;
    return 0;
}

void mx_state_progress(rumor_mixer_t *m)
{
    serve_progress(m);
    if (m->cu.active)
        catchup_progress(m);
}
