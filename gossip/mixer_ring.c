/* The ring all-reduce (C-PSGD baseline and the swarm's average), run by
 * the mixer's comm thread over the same sockets as gossip.
 *
 * N peers in ring order: every peer of the list by node, or with
 * membership the living, by increasing id (mx_view_ring, fixed when the
 * call starts). With membership the tag on the wire is the caller's tag
 * times 2^20 plus a hash of the ring's ids, so that peers whose views
 * differ never mix each other's ranges (their calls time out, and the
 * caller tries again once the views agree). The buffer is cut into N
 * segments. In
 * reduce-scatter step t (0 <= t < N-1) a peer sends segment (r - t) to its
 * successor and adds the segment (r - t - 1) it receives from its
 * predecessor; after N-1 steps it holds the full sum of segment r + 1. In
 * all-gather step t' it sends segment (r + 1 - t') and copies the segment
 * (r - t') it receives. Segments go in ranges of at most `chunk` elements
 * (each peer its own: a receiver takes any ranges that cover the segment),
 * zero-copy out of the caller's buffer; the call returns only when ZeroMQ
 * has let go of every chunk. A predecessor may run ahead of a peer that has
 * not called yet: its messages are kept (zero-copy, at most a model's worth)
 * until the call starts. Each step has a deadline: a missing peer fails the
 * call with RUMOR_ETIMEOUT instead of hanging it.
 *
 * A coded call (int8 or int4) encodes each chunk once, when it is first
 * sent, and writes the decoded values back where they came from (a
 * reduce-scatter hop never reads its sent segment again; the owner of a
 * summed segment thus holds exactly what the others decode). All-gather
 * ranges are kept as received and forwarded byte for byte: every peer
 * decodes the same bytes, so every peer ends with the same values. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"

static size_t seg_lo(const rumor_mixer_t *m, int s)
{
    return (size_t)((unsigned __int128)m->n * (unsigned)s / (unsigned)m->ar.rn);
}

static size_t seg_len(const rumor_mixer_t *m, int s) { return seg_lo(m, s + 1) - seg_lo(m, s); }

static int modn(const rumor_mixer_t *m, long v)
{
    long n = m->ar.rn;
    return (int)(((v % n) + n) % n);
}

static int steps(const rumor_mixer_t *m) { return 2 * (m->ar.rn - 1); }

/* The slots before and after this peer in the ring. */
static int ring_prev(const rumor_mixer_t *m) { return m->ar.ring[modn(m, m->ar.rpos - 1)]; }
static int ring_next(const rumor_mixer_t *m) { return m->ar.ring[modn(m, m->ar.rpos + 1)]; }

/* The ring of this moment (a call in progress keeps its own). */
static void ring_refresh(rumor_mixer_t *m)
{
    if (!m->ar.active)
        m->ar.rn = mx_view_ring(m, m->ar.ring, &m->ar.rpos);
}

/* The call's tag on the wire (see the top of this file). */
static long wire_tag(const rumor_mixer_t *m, long tag)
{
    if (!m->swim)
        return tag;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < m->ar.rn; i++) {
        h ^= m->ids[m->ar.ring[i]];
        h *= 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return (long)(((uint64_t)tag << 20) | (h & 0xfffffu));
}

/* Segments sent and received at step t. */
static int send_seg(const rumor_mixer_t *m, int t)
{
    int N = m->ar.rn, r = m->ar.rpos;
    return t < N - 1 ? modn(m, r - t) : modn(m, r + 1 - (t - (N - 1)));
}

static int recv_seg(const rumor_mixer_t *m, int t)
{
    int N = m->ar.rn, r = m->ar.rpos;
    return t < N - 1 ? modn(m, r - t - 1) : modn(m, r - (t - (N - 1)));
}

static void finish(rumor_mixer_t *m, int rc);

static void begin_step(rumor_mixer_t *m)
{
    struct mx_allreduce *a = &m->ar;
    a->send_off = 0;
    a->encoded_upto = 0;
    a->send_idx = 0;
    a->sent_all = a->step >= steps(m) || seg_len(m, send_seg(m, a->step)) == 0;
    a->step_deadline = rumor_now() + a->timeout;
}

/* Starts the call the caller posted (comm thread). */
static void drop_fwd(struct mx_allreduce *a)
{
    for (int i = 0; i < a->nfwd; i++)
        free(a->fwd[i].bytes);
    a->nfwd = 0;
}

/* The coded call's encodings: one area per step, a stride per chunk. */
static int coded_alloc(rumor_mixer_t *m)
{
    struct mx_allreduce *a = &m->ar;
    if (a->cbytes && a->coded_rn == a->rn)
        return 0;
    free(a->cbytes); /* another ring: other segments */
    a->cbytes = NULL;
    size_t seg = seg_len(m, 0);
    for (int s = 1; s < m->ar.rn; s++)
        seg = seg_len(m, s) > seg ? seg_len(m, s) : seg;
    a->seg_chunks = seg / m->chunk + 1;
    a->cstride = rumor_codec_bytes(&m->cfg.codec, m->chunk);
    size_t slots = (size_t)(steps(m) > 0 ? steps(m) : 1) * a->seg_chunks;
    a->cbytes = malloc(slots * a->cstride);
    a->coded_rn = a->rn;
    if (!a->cbytes) {
        return rumor_err_set(RUMOR_ENOMEM, "all-reduce: no memory for coded ranges");
    }
    return 0;
}

void ar_start(rumor_mixer_t *m)
{
    struct mx_allreduce *a = &m->ar;
    drop_fwd(a);
    ring_refresh(m);
    a->wire = wire_tag(m, a->tag);
    if (a->coded && coded_alloc(m) < 0) {
        snprintf(a->err, sizeof a->err, "%s", rumor_err_msg());
        a->active = 1;
        a->step = 0;
        finish(m, RUMOR_ENOMEM);
        return;
    }
    a->active = 1;
    a->finishing = 0;
    a->replayed = 0;
    a->step = 0;
    for (int t = 0; t < 2 * m->npeers; t++)
        mx_cover_clear(&a->recv[t]);
    a->err[0] = '\0';
    begin_step(m);
}

static void finish(rumor_mixer_t *m, int rc)
{
    struct mx_allreduce *a = &m->ar;
    a->finishing = 1;
    a->result = rc;
    if (rc == 0 && a->rn > 1)
        m->counters.rounds_mixed++;
    if (rc < 0 && atomic_load(&a->ref.refs) > 0) {
        /* Chunks stuck in the successor's queue: dropping the socket lets
         * ZeroMQ release them, so the caller gets its buffer back. */
        int next = ring_next(m);
        if (m->ep[next])
            (void)rumor_transport_connect(m->tr, next, m->ep[next]);
    }
}

void ar_free(rumor_mixer_t *m)
{
    drop_fwd(&m->ar);
    free(m->ar.fwd);
    free(m->ar.cbytes);
    for (int t = 0; m->ar.recv && t < 2 * m->npeers; t++)
        mx_cover_free(&m->ar.recv[t]);
    free(m->ar.recv);
    m->ar.recv = NULL;
    free(m->ar.ring);
    m->ar.ring = NULL;
}

/* Judges what can be judged of a GRADS range of step t before its call
 * runs: the step and phase, the range inside the segment that step
 * receives, the payload finite. */
static int judge(rumor_mixer_t *m, const rumor_wire_hdr_t *h, const void *data, size_t nbytes)
{
    if (h->aux >= (uint32_t)steps(m)) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce step %u of %d", h->aux, steps(m));
        return -RUMOR_WIRE_BAD_FLAGS;
    }
    int t = (int)h->aux;
    int ag = t >= m->ar.rn - 1;
    if (ag != !!(h->flags & RUMOR_WIRE_F_ALLGATHER)) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce step %d with the wrong phase flag", t);
        return -RUMOR_WIRE_BAD_FLAGS;
    }
    int s = recv_seg(m, t);
    if (h->offset < seg_lo(m, s) || h->offset + h->length > seg_lo(m, s) + seg_len(m, s)) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce range [%llu, +%llu) is not inside segment %d",
                      (unsigned long long)h->offset, (unsigned long long)h->length, s);
        return -RUMOR_WIRE_BAD_RANGE;
    }
    if (h->dtype != RUMOR_WIRE_DT_F32) {
        if (h->dtype != rumor_codec_dtype(&m->cfg.codec)) {
            rumor_err_set(RUMOR_EPROTO, "all-reduce step %d in dtype %u, not this peer's codec",
                          t, (unsigned)h->dtype);
            return -RUMOR_WIRE_UNSUPPORTED_DTYPE;
        }
        return rumor_codec_check(h->dtype, data, nbytes, h->length, 0); /* aux: the step */
    }
    if (!rumor_wire_payload_finite(data, h->length)) {
        rumor_err_set(RUMOR_EPROTO, "NaN or Inf in all-reduce step %d", t);
        return -RUMOR_WIRE_NONFINITE;
    }
    return 0;
}

struct ar_ctx {
    float *dst;
    int copy;
};

static void ar_block(rumor_mixer_t *m, void *ctx, const float *p, size_t at, size_t n)
{
    struct ar_ctx *c = ctx;
    float *d = c->dst + at;
    if (c->copy)
        RUMOR_IGNORE(m->dev->ops->copy(m->dev, d, p, n * sizeof(float)));
    else
        m->dev->ops->axpy(m->dev, d, 1.0f, p, n);
}

/* Applies one GRADS range of step t >= the current step, judged by judge().
 * Data for a later step arrives when this peer's own sends lag (its
 * successor's queue is full) while its predecessor goes on. Applying it at
 * once is safe: the segment a later step adds into (or copies over) is not
 * one this peer is sending now. In reduce-scatter, step t writes segment
 * r-t-1, which is sent only at step t+1; in all-gather, step t' writes
 * segment r-t', last sent in reduce-scatter step t', which the successor
 * must have received for the ring to have got this far. */
static int apply(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const void *data,
                 size_t nbytes)
{
    struct mx_allreduce *a = &m->ar;
    int t = (int)h->aux;
    if ((h->dtype != RUMOR_WIRE_DT_F32) != !!a->coded) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce %ld is %s, this range is %s", a->tag,
                      a->coded ? "coded" : "f32", a->coded ? "f32" : "coded");
        return -RUMOR_WIRE_UNSUPPORTED_DTYPE;
    }
    if (t < a->step) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce step %d while at step %d", t, a->step);
        return -RUMOR_WIRE_STALE_ROUND;
    }
    int cv = mx_cover_check(&a->recv[t], h->offset, h->offset + h->length);
    if (cv != 0) {
        if (cv < 0)
            rumor_warn("all-reduce: %s", rumor_err_msg());
        rumor_err_set(RUMOR_EPROTO, "all-reduce step %d: range [%llu, +%llu) %s", t,
                      (unsigned long long)h->offset, (unsigned long long)h->length,
                      cv == 1 ? "again" : "in too many pieces");
        return cv == 1 ? -RUMOR_WIRE_DUPLICATE : -RUMOR_WIRE_BAD_RANGE;
    }
    int ag = t >= a->rn - 1, forward = a->coded && ag && t + 1 < steps(m);
    struct mx_fwd f = { 0 };
    if (forward) { /* kept to go on as it came */
        if (a->nfwd == a->capfwd) {
            int cap = a->capfwd ? 2 * a->capfwd : 64;
            struct mx_fwd *nf = realloc(a->fwd, (size_t)cap * sizeof *nf);
            if (!nf) {
                rumor_err_set(RUMOR_EPROTO, "all-reduce: no memory to keep a range");
                return -RUMOR_WIRE_UNEXPECTED;
            }
            a->fwd = nf, a->capfwd = cap;
        }
        f.bytes = malloc(nbytes);
        if (!f.bytes) {
            rumor_err_set(RUMOR_EPROTO, "all-reduce: no memory to keep a range");
            return -RUMOR_WIRE_UNEXPECTED;
        }
        memcpy(f.bytes, data, nbytes);
        f.step = t, f.off = h->offset, f.len = h->length, f.dtype = h->dtype;
        f.nbytes = nbytes;
    }
    mx_accept(m, h, node);
    struct ar_ctx c = { a->buf + h->offset, ag };
    /* GRADS's aux is its step: its codecs carry none */
    mx_payload_blocks(m, h->dtype, 0, data, h->length, ar_block, &c);
    if (forward)
        a->fwd[a->nfwd++] = f;
    mx_cover_add(&a->recv[t], h->offset, h->offset + h->length);
    return 0;
}

int mx_on_grads(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, zmq_msg_t *hdr,
                zmq_msg_t *payload, int *held)
{
    struct mx_allreduce *a = &m->ar;
    *held = 0;
    long tag = (long)(h->round > (uint64_t)LONG_MAX ? LONG_MAX : h->round);
    int current = a->active && !a->finishing && tag == a->wire;
    /* without membership the ring never changes: a range for a later call
     * is judged now; with it, when its call runs, by that call's ring */
    ring_refresh(m);
    if ((current || !m->swim) && node != (a->rn > 1 ? ring_prev(m) : -1)) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce data from peer %d, not the predecessor %d", node,
                      a->rn > 1 ? ring_prev(m) : -1);
        return -RUMOR_WIRE_UNKNOWN_SENDER;
    }
    if (!current && (tag <= a->last_tag || (a->active && tag < a->wire))) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce %ld already done", tag);
        return -RUMOR_WIRE_STALE_ROUND;
    }
    if (current || !m->swim) {
        int v = judge(m, h, zmq_msg_data(payload), zmq_msg_size(payload));
        if (v != 0)
            return v;
    }
    if (current)
        return apply(m, h, node, zmq_msg_data(payload), zmq_msg_size(payload));
    /* held messages are bounded in number and in bytes (two models' worth:
     * one all-reduce call sends each element twice), so a broken or hostile
     * predecessor cannot make this peer hold gigabytes */
    size_t total = 0;
    for (int i = 0; i < m->nhold; i++)
        total += zmq_msg_size(&m->hold[i].payload);
    if (m->nhold == MX_HOLD_MAX || total + zmq_msg_size(payload) > 2 * m->n * sizeof(float)) {
        rumor_err_set(RUMOR_EPROTO, "all-reduce %ld: %d messages (%zu bytes) already held", tag,
                      m->nhold, total);
        return -RUMOR_WIRE_FUTURE_ROUND;
    }
    /* kept whole for its call, which judges the rest (overlaps) and counts
     * it; the sender is alive meanwhile */
    mx_accept(m, h, node);
    struct mx_held *k = &m->hold[m->nhold++];
    zmq_msg_init(&k->hdr);
    zmq_msg_init(&k->payload);
    zmq_msg_move(&k->hdr, hdr);
    zmq_msg_move(&k->payload, payload);
    k->h = *h;
    k->node = node;
    *held = 1;
    return 0;
}

/* Replays held messages that belong to the call now running, in order. */
static void replay_held(rumor_mixer_t *m)
{
    int kept = 0, prev = ring_prev(m);
    for (int i = 0; i < m->nhold; i++) {
        struct mx_held *k = &m->hold[i];
        if ((long)k->h.round == m->ar.wire) {
            int v = 0;
            if (k->node != prev) {
                rumor_err_set(RUMOR_EPROTO, "all-reduce data from peer %d, not the predecessor "
                              "%d", k->node, prev);
                v = -RUMOR_WIRE_UNKNOWN_SENDER;
            }
            if (v == 0) /* held unjudged (membership), or judged by this same ring */
                v = judge(m, &k->h, zmq_msg_data(&k->payload), zmq_msg_size(&k->payload));
            if (v == 0)
                v = apply(m, &k->h, prev, zmq_msg_data(&k->payload), zmq_msg_size(&k->payload));
            mx_count(m, v, k->node, "grads");
        } else if ((long)k->h.round > m->ar.wire) {
            m->hold[kept++] = *k; /* a later call's: keep (struct copy moves it) */
            continue;
        } else {
            rumor_err_set(RUMOR_EPROTO, "all-reduce %llu already done",
                          (unsigned long long)k->h.round);
            mx_count(m, -RUMOR_WIRE_STALE_ROUND, prev, "grads");
        }
        zmq_msg_close(&k->hdr);
        zmq_msg_close(&k->payload);
    }
    m->nhold = kept;
}

/* Hands one range of this step to ZeroMQ (aux: the step): 0 sent, else
 * stop for now. */
static int send_range(rumor_mixer_t *m, uint64_t off, uint64_t len, uint32_t chunk,
                      uint32_t nchunks, int dtype, const void *p, size_t nbytes)
{
    struct mx_allreduce *a = &m->ar;
    rumor_wire_hdr_t h;
    uint8_t bytes[RUMOR_WIRE_HDR_LEN];
    mx_fill_hdr(m, &h, RUMOR_WIRE_GRADS);
    h.dtype = (uint8_t)dtype;
    h.round = (uint64_t)a->wire;
    h.aux = (uint32_t)a->step;
    h.flags = a->step >= a->rn - 1 ? RUMOR_WIRE_F_ALLGATHER : 0;
    h.chunk = chunk;
    h.nchunks = nchunks;
    h.offset = off;
    h.length = len;
    rumor_wire_encode(&h, bytes);
    int rc = rumor_transport_send(m->tr, ring_next(m), bytes, sizeof bytes,
                                  &a->ref, p, nbytes);
    if (rc < 0)
        rumor_warn("all-reduce: %s", rumor_err_msg());
    return rc;
}

static void pump(rumor_mixer_t *m)
{
    struct mx_allreduce *a = &m->ar;
    int s = send_seg(m, a->step);
    size_t slen = seg_len(m, s);
    if (a->coded && a->step >= a->rn) {
        /* all-gather: the previous step's ranges, as they came */
        for (; a->send_idx < a->nfwd; a->send_idx++) {
            const struct mx_fwd *f = &a->fwd[a->send_idx];
            if (f->step != a->step - 1)
                continue;
            if (send_range(m, f->off, f->len, 0, 1, f->dtype, f->bytes, f->nbytes) != 0)
                return;
        }
        a->sent_all = 1;
        return;
    }
    int dtype = a->coded ? rumor_codec_dtype(&m->cfg.codec) : RUMOR_WIRE_DT_F32;
    while (a->send_off < slen) {
        uint64_t off = seg_lo(m, s) + a->send_off;
        uint64_t len = slen - a->send_off < m->chunk ? slen - a->send_off : m->chunk;
        size_t c = a->send_off / m->chunk;
        const void *p = a->buf + off;
        size_t nbytes = len * sizeof(float);
        if (a->coded) {
            size_t slot = (size_t)a->step * a->seg_chunks + c;
            uint8_t *dst = a->cbytes + slot * a->cstride;
            if (a->send_off >= a->encoded_upto) { /* once: its decoding replaces the values */
                uint32_t aux;
                if (rumor_codec_encode(&m->cfg.codec, a->buf + off, (size_t)len, 0, dst, &aux,
                                       a->buf + off, NULL) < 0) {
                    snprintf(a->err, sizeof a->err, "all-reduce %ld: %s", a->tag,
                             rumor_err_msg());
                    finish(m, RUMOR_EINVAL);
                    return;
                }
                a->encoded_upto = a->send_off + len;
            }
            p = dst;
            nbytes = rumor_codec_payload_bytes(dtype, len, 0);
        }
        if (send_range(m, off, len, (uint32_t)c, (uint32_t)rumor_wire_nchunks(slen, m->chunk),
                       dtype, p, nbytes) != 0)
            return;
        a->send_off += len;
    }
    a->sent_all = 1;
}

void ar_progress(rumor_mixer_t *m)
{
    struct mx_allreduce *a = &m->ar;
    if (!a->active)
        return;
    if (a->finishing) {
        /* The result is known; hand the buffer back once ZeroMQ let go. */
        if (atomic_load(&a->ref.refs) > 0 && rumor_now() < a->step_deadline + 5.0)
            return;
        if (a->result == 0)
            m->dev->ops->scale(m->dev, a->buf, 1.0f / (float)a->rn, m->n);
        a->active = 0;
        a->last_tag = a->wire;
        a->last_rn = a->rn;
        mx_publish(m); /* its ring's size, before the reply */
        struct mx_reply *r = m->ar_reply;
        m->ar_reply = NULL;
        mx_reply(m, r, a->result, "%s", a->err);
        return;
    }
    if (!a->replayed) {
        replay_held(m);
        a->replayed = 1;
    }
    for (;;) {
        if (a->step >= steps(m)) {
            finish(m, 0);
            return;
        }
        if (!a->sent_all)
            pump(m);
        size_t need = seg_len(m, recv_seg(m, a->step));
        if (a->sent_all && a->recv[a->step].covered >= need) {
            a->step++;
            begin_step(m);
            continue;
        }
        break;
    }
    if (rumor_now() > a->step_deadline) {
        char name[48];
        snprintf(a->err, sizeof a->err,
                 "all-reduce %ld: step %d of %d got %llu of %zu elements from %s within %.1f s",
                 a->tag, a->step + 1, steps(m), (unsigned long long)a->recv[a->step].covered,
                 seg_len(m, recv_seg(m, a->step)), mx_peer_name(m, ring_prev(m), name, sizeof name),
                 a->timeout);
        finish(m, RUMOR_ETIMEOUT);
    }
}

void ar_poll_items(rumor_mixer_t *m, zmq_pollitem_t *items, int *ni)
{
    struct mx_allreduce *a = &m->ar;
    void *s = a->active && a->rn > 1 ? rumor_transport_push(m->tr, ring_next(m)) : NULL;
    if (a->active && !a->finishing && !a->sent_all && s) {
        items[*ni].socket = s;
        items[*ni].fd = 0;
        items[*ni].events = ZMQ_POLLOUT;
        (*ni)++;
    }
}
