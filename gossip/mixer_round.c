/* Synchronous D-PSGD rounds, the receiving side (see mixer.h): judging a
 * neighbour's PARAMS range, accumulating it, mixing the cells that are
 * complete, deciding when a round is done, and closing it. Runs on the comm
 * thread, but mx_caller_mix (a caller's thread, on a cell it claimed).
 *
 * Neighbours cut the flat space as they like (their own chunk size, their
 * own pipeline stages): a range is any [offset, offset + length) inside the
 * space, at most max_recv elements. This peer accumulates W_ij * range into
 * the round's buffer and mixes in cells, its own chunk grid: a cell is
 * mixed as soon as every neighbour waited for covered it, while it is still
 * in cache and the caller still computes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer_int.h"

/* ------------------------------------------------------- slots */

int mx_slot_alloc(rumor_mixer_t *m, struct mx_slot *s)
{
    size_t N = (size_t)m->npeers;
    s->round = -1;
    s->wfull = calloc(m->nchunks, sizeof *s->wfull);
    s->touched = calloc(m->nchunks, 1);
    s->done = calloc(m->nchunks, 1);
    s->cstate = calloc(m->nchunks, sizeof *s->cstate);
    s->tmix = calloc(m->nchunks, sizeof *s->tmix);
    s->cd2 = calloc(m->nchunks, sizeof *s->cd2);
    s->csw = calloc(m->nchunks, sizeof *s->csw);
    s->cby = calloc(m->nchunks, 1);
    s->rdy = calloc(m->nchunks, 1);
    atomic_init(&s->pub_round, -1);
    atomic_init(&s->nmixed, 0);
    s->full = calloc(N * m->nchunks, 1);
    s->cov = calloc(N, sizeof *s->cov);
    s->w_of = calloc(N, sizeof *s->w_of);
    s->in = calloc(N, sizeof *s->in);
    s->outlier = calloc(N, 1);
    s->od2 = calloc(N, sizeof *s->od2);
    s->on2 = calloc(N, sizeof *s->on2);
    s->olen = calloc(N, sizeof *s->olen);
    s->qgot = calloc(N, sizeof *s->qgot);
    if (!s->wfull || !s->touched || !s->done || !s->cstate || !s->tmix || !s->cd2 || !s->csw ||
        !s->cby || !s->rdy || !s->full || !s->cov || !s->w_of || !s->in || !s->outlier ||
        !s->od2 || !s->on2 || !s->olen || !s->qgot)
        return rumor_err_set(RUMOR_ENOMEM, "mixer: out of memory");
    for (size_t c = 0; c < m->nchunks; c++)
        atomic_init(&s->cstate[c], MX_CELL_OPEN);
    return 0;
}

void mx_slot_free(rumor_mixer_t *m, struct mx_slot *s)
{
    for (int j = 0; s->cov && j < m->npeers; j++)
        mx_cover_free(&s->cov[j]);
    free(s->cov);
    free(s->wfull);
    free(s->touched);
    free(s->done);
    free(s->cstate);
    free(s->tmix);
    free(s->cd2);
    free(s->csw);
    free(s->cby);
    free(s->rdy);
    free(s->full);
    free(s->w_of);
    free(s->in);
    free(s->outlier);
    free(s->od2);
    free(s->on2);
    free(s->olen);
    free(s->qgot);
    mx_robust_slot_free(s);
}

/* Makes `s` the receive state of round r: its weights and an accumulator
 * whose cells are all untouched. Returns 0 or an error (no buffer). */
int mx_slot_open(rumor_mixer_t *m, struct mx_slot *s, long r)
{
    s->round = r;
    s->x = r == m->sent_round && m->sent_buf ? m->sent_buf->data : NULL;
    s->buf = mx_buf_get(m);
    if (!s->buf)
        return RUMOR_ENOMEM;
    /* no memset of the buffer: a cell's first range (or its mix) writes it */
    memset(s->wfull, 0, m->nchunks * sizeof(double));
    memset(s->touched, 0, m->nchunks);
    memset(s->done, 0, m->nchunks);
    s->ndone = 0;
    s->dis = s->selfw = 0;
    memset(s->full, 0, (size_t)m->npeers * m->nchunks);
    memset(s->outlier, 0, (size_t)m->npeers);
    memset(s->od2, 0, (size_t)m->npeers * sizeof *s->od2);
    memset(s->on2, 0, (size_t)m->npeers * sizeof *s->on2);
    memset(s->olen, 0, (size_t)m->npeers * sizeof *s->olen);
    memset(s->qgot, 0, (size_t)m->npeers * sizeof *s->qgot);
    for (int j = 0; j < m->npeers; j++) {
        s->w_of[j] = 0.0;
        mx_cover_clear(&s->cov[j]);
    }
    mx_robust_slot_open(m, s);
    s->nin = 0;
    s->complete = 0;
    s->mixed_any = 0;
    s->elems_in = 0;
    s->max_range = 0;
    s->first_arrival = s->last_arrival = 0;
    memset(s->rdy, 0, m->nchunks);
    /* what the caller's threads see: nobody holds a cell of this slot (its
     * last round's close mixed every one), and a thread that still reads
     * the old round's pub_round finds no READY cell until it is stored */
    atomic_store_explicit(&s->pub_round, -1, memory_order_relaxed);
    memset(s->tmix, 0, m->nchunks * sizeof *s->tmix);
    memset(s->cby, 0, m->nchunks);
    for (size_t c = 0; c < m->nchunks; c++)
        atomic_store_explicit(&s->cstate[c], MX_CELL_OPEN, memory_order_relaxed);
    atomic_store_explicit(&s->nmixed, 0, memory_order_relaxed);
    s->pub_data = s->buf->data;
    s->pub_x = s->x;
    atomic_store_explicit(&s->pub_round, r, memory_order_release);
    return mx_slot_reweigh(m, s);
}

/* (Re)sets slot s's in-neighbours and weights from the current graph: at
 * open, and when the membership view changes before anything arrived. */
int mx_slot_reweigh(rumor_mixer_t *m, struct mx_slot *s)
{
    for (int i = 0; i < s->nin; i++)
        s->w_of[s->in[i]] = 0.0;
    int k = mx_in_neighbors(m, s->round, m->tmp_nbrs, m->tmp_w);
    if (k < 0)
        return k;
    s->nin = k;
    for (int i = 0; i < k; i++) {
        s->w_of[m->tmp_nbrs[i]] = m->tmp_w[i];
        s->in[i] = m->tmp_nbrs[i];
    }
    return mx_robust_slot_reweigh(m, s);
}

int mx_ensure_slot(rumor_mixer_t *m, long r)
{
    struct mx_slot *s = &m->slot[r % m->nslots];
    if (s->round == r && s->buf)
        return 0;
    return mx_slot_open(m, s, r);
}

/* ------------------------------------------------------- mixing */

static void cell_range(const rumor_mixer_t *m, size_t c, uint64_t *off, uint64_t *len)
{
    RUMOR_IGNORE(rumor_wire_chunk_range(m->n, m->chunk, c, off, len));
}

/* acc = acc + a x over n elements (the device's axpy_dist); returns
 * sum (acc - x)^2 of the result. */
static double mix_run(rumor_mixer_t *m, float *acc, const float *x, size_t n, float a)
{
    double d2 = 0.0;
    RUMOR_IGNORE(m->dev->ops->axpy_dist(m->dev, acc, a, x, n, &d2)); /* host: cannot fail */
    return d2;
}

/* A cell every sender covered whole (or nobody touched: acc = x): acc =
 * acc + (1 - w) x over len elements; adds sum (mix - x)^2 to *dis and the
 * self-weight to *selfw. Returns whether neighbours' data was mixed. */
static int mix_whole(rumor_mixer_t *m, float *acc, const float *x, size_t len, int touched,
                     double w, double *dis, double *selfw)
{
    if (!touched) {
        RUMOR_IGNORE(m->dev->ops->copy(m->dev, acc, x, len * sizeof(float)));
        *selfw += (double)len;
        return 0;
    }
    *dis += mix_run(m, acc, x, len, (float)(1.0 - w));
    *selfw += (1.0 - w) * (double)len;
    return 1;
}

/* Cell c of slot s is mixed (its results written): the caller's threads
 * see it; those waiting on cv are woken when `wake` (a thread may wait for
 * it). Returns how many cells are mixed now. */
static size_t publish_mixed(rumor_mixer_t *m, struct mx_slot *s, size_t c, int wake)
{
    s->tmix[c] = rumor_now();
    size_t n = atomic_fetch_add_explicit(&s->nmixed, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&s->cstate[c], MX_CELL_MIXED, memory_order_release);
    if (wake)
        mx_cmd_broadcast(m);
    return n;
}

/* Claims cell c for the comm thread (OPEN or READY -> MIXING), waiting for a
 * caller's thread that mixes it: 0 claimed, 1 mixed already (by a caller). */
static int claim_cell(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    for (;;) {
        uint8_t st = atomic_load_explicit(&s->cstate[c], memory_order_acquire);
        if (st == MX_CELL_MIXED)
            return 1;
        if (st == MX_CELL_MIXING) { /* its mix ends with a broadcast under mu */
            pthread_mutex_lock(&m->mu);
            while (atomic_load_explicit(&s->cstate[c], memory_order_acquire) == MX_CELL_MIXING)
                pthread_cond_wait(&m->cv, &m->mu);
            pthread_mutex_unlock(&m->mu);
            continue;
        }
        if (atomic_compare_exchange_strong(&s->cstate[c], &st, MX_CELL_MIXING))
            return 0;
    }
}

/* Cell c at [off, off + len) by the weights: x = acc + (1 - w) x where w
 * is the weight that arrived for each element. Neighbours whose ranges
 * cover the cell whole add wfull[c]; one that covered only part of it (it
 * missed the deadline) adds its weight where its ranges are, so the row
 * stays stochastic element by element. */
static void mix_weighted(rumor_mixer_t *m, struct mx_slot *s, size_t c, uint64_t off,
                         uint64_t len)
{
    int *part = m->part_scratch, np = 0;
    for (int i = 0; s->touched[c] && i < s->nin; i++) {
        int j = s->in[i];
        if (!s->full[(size_t)j * m->nchunks + c] &&
            mx_cover_within(&s->cov[j], off, off + len) > 0)
            part[np++] = j;
    }
    if (np == 0) {
        s->mixed_any |= mix_whole(m, s->buf->data + off, s->x + off, len, s->touched[c],
                                  s->wfull[c], &s->dis, &s->selfw);
        return;
    }
    /* walk the cell in runs where the same partial senders cover it */
    uint64_t p = off, end = off + len;
    while (p < end) {
        double w = s->wfull[c];
        uint64_t next = end;
        for (int i = 0; i < np; i++) {
            uint64_t run_end;
            if (mx_cover_run(&s->cov[part[i]], p, &run_end))
                w += s->w_of[part[i]];
            if (run_end < next)
                next = run_end;
        }
        s->dis += mix_run(m, s->buf->data + p, s->x + p, next - p, (float)(1.0 - w));
        s->selfw += (1.0 - w) * (double)(next - p);
        p = next;
    }
    s->mixed_any = 1;
}

/* Mixes cell c: by the weights, or (--robust trimmed) by the trimmed mean. */
static void mix_cell(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    /* the caller's threads may mix a cell left to them: the comm thread
     * claims it first, or waits for the caller's mix to end */
    if (claim_cell(m, s, c)) {
        s->done[c] = 1;
        s->ndone++;
        return;
    }
    uint64_t off, len;
    cell_range(m, c, &off, &len);
    if (m->cfg.robust == RUMOR_ROBUST_TRIMMED)
        mx_robust_trim(m, s, off, len);
    else
        mix_weighted(m, s, c, off, len);
    s->done[c] = 1;
    s->ndone++;
    /* a caller's stage may step on its range once every cell of it is mixed
     * (rumor_mixer_range_wait waits only once it posted the close, and
     * looks again when the close is taken) */
    publish_mixed(m, s, c, m->close_round == s->round);
}

/* Cell c is complete but left to the caller's threads to mix, in their idle
 * time (rumor_mixer_set_caller_mixes); the comm thread mixes it only at a
 * deadline. */
static void leave_cell(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    s->rdy[c] = 1;
    /* written once a round, before the first READY: a caller's thread
     * mixing another cell reads it */
    if (s->pub_x != s->x)
        s->pub_x = s->x;
    uint8_t open = MX_CELL_OPEN;
    atomic_compare_exchange_strong(&s->cstate[c], &open, MX_CELL_READY);
    mx_cmd_broadcast(m);
}

int mx_caller_mixes(const rumor_mixer_t *m)
{
    /* the trimmed mean is the comm thread's (it reads the covers) */
    return atomic_load(&m->caller_mixes) && !m->cfg.async && !m->ch.on &&
           m->cfg.robust != RUMOR_ROBUST_TRIMMED;
}

void mx_caller_mix(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    uint64_t off, len;
    cell_range(m, c, &off, &len);
    float *acc = s->pub_data + off;
    const float *x = s->pub_x + off;
    double d2 = 0, selfw = 0;
    /* touched and wfull are final: nothing comes for a complete cell */
    int mixed = mix_whole(m, acc, x, len, s->touched[c], s->wfull[c], &d2, &selfw);
    s->cd2[c] = d2;
    s->csw[c] = selfw;
    s->cby[c] = (uint8_t)(1 + mixed);
    /* the comm thread may wait for it */
    if (publish_mixed(m, s, c, 1) == m->nchunks)
        mx_wake(m); /* the round may close now */
}

/* Whether round s does not wait for in-neighbour j: j is absent
 * (mx_refresh_absent) and sent nothing of it, or j left. A peer that leaves
 * drops the round it had sent ahead in part (rumor_mixer_send_ahead), and
 * its LEAVE comes after what it did send, on the same connection: the rest
 * is not coming. */
static int mx_not_waited(const rumor_mixer_t *m, const struct mx_slot *s, int j)
{
    return s->outlier[j] || (m->absent[j] && (s->cov[j].covered == 0 || m->left[j]));
}

/* Whether cell c has everything it will get: every in-neighbour that is
 * waited for covered it. */
static int cell_ready(const rumor_mixer_t *m, const struct mx_slot *s, size_t c)
{
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (!s->full[(size_t)j * m->nchunks + c] && !mx_not_waited(m, s, j))
            return 0;
    }
    return 1;
}

static void mix_if_ready(rumor_mixer_t *m, struct mx_slot *s, size_t c)
{
    if (s->x && !s->done[c] && !s->rdy[c] && cell_ready(m, s, c)) {
        if (mx_caller_mixes(m))
            leave_cell(m, s, c);
        else
            mix_cell(m, s, c);
    }
}

void mx_slot_x_known(rumor_mixer_t *m, struct mx_slot *s)
{
    for (size_t c = 0; c < m->nchunks; c++)
        mix_if_ready(m, s, c);
}

/* ------------------------------------------------------- receiving */

struct acc_ctx {
    struct mx_slot *s;
    float w;
    uint64_t lo;       /* the range's first element */
};

/* Adds w * p (n floats, elements lo + at ...) into the accumulator, cell by
 * cell: a cell the range covers whole and nobody wrote yet is assigned
 * (touched == 2 while this range writes it), one it covers in part is
 * zeroed first. */
static void acc_block(rumor_mixer_t *m, void *ctx, const float *p, size_t at, size_t n)
{
    struct acc_ctx *a = ctx;
    uint64_t e = a->lo + at, end = e + n;
    while (e < end) {
        size_t c = (size_t)(e / m->chunk);
        uint64_t cend = ((uint64_t)c + 1) * m->chunk;
        uint64_t stop = cend < end ? cend : end;
        float *y = a->s->buf->data + e;
        const float *x = p + (e - a->lo - at);
        size_t k = (size_t)(stop - e);
        if (a->s->touched[c] == 2) /* the first writer of the cell: y = w x */
            m->dev->ops->axpby(m->dev, y, a->w, x, 0.0f, k);
        else
            m->dev->ops->axpy(m->dev, y, a->w, x, k);
        e = stop;
    }
}

/* A PARAMS range of round h->round from `node`: judged whole, then
 * accumulated (W_ij * range) into its round's slot. */
int mx_on_params(rumor_mixer_t *m, const rumor_wire_hdr_t *h, int node, const void *data,
                 size_t nbytes)
{
    if (h->round >= (uint64_t)m->cur + (uint64_t)m->nslots) {
        /* the sender is ahead (or this peer fell behind): ask its round,
         * the answer tells the caller to jump or catch up */
        mx_ask_round(m, node);
        rumor_err_set(RUMOR_EPROTO, "round %llu while at %ld", (unsigned long long)h->round, m->cur);
        return -RUMOR_WIRE_FUTURE_ROUND;
    }
    long r = (long)h->round;
    /* a probe's round holds what comes late (mixer_probe.c) */
    if (r < m->cur)
        mx_probe_hold(m, r, node, h, data, nbytes, 0);
    if (r < m->cur) {
        mx_tell_behind(m, node);
        rumor_err_set(RUMOR_EPROTO, "round %ld already mixed (at %ld)", r, m->cur);
        return -RUMOR_WIRE_STALE_ROUND;
    }
    if (mx_ensure_slot(m, r) < 0) {
        rumor_warn("mixer: %s", rumor_err_msg());
        return -RUMOR_WIRE_UNEXPECTED;
    }
    struct mx_slot *s = &m->slot[r % m->nslots];
    double w = s->w_of[node];
    if (w == 0.0) {
        rumor_err_set(RUMOR_EPROTO, "peer %d is not an in-neighbour in round %ld", node, r);
        return -RUMOR_WIRE_UNKNOWN_SENDER;
    }
    uint64_t lo = h->offset, hi = h->offset + h->length; /* inside the space: wire_check */
    int cv = mx_cover_check(&s->cov[node], lo, hi);
    if (cv != 0) {
        if (cv < 0)
            rumor_warn("mixer: %s", rumor_err_msg());
        rumor_err_set(RUMOR_EPROTO, cv == 1 ? "range [%llu, %llu) of round %ld overlaps one "
                                              "received already"
                                            : "range [%llu, %llu) of round %ld: more than %d "
                                              "pieces",
                      (unsigned long long)lo, (unsigned long long)hi, r, MX_COVER_MAX_IVS);
        return cv == 1 ? -RUMOR_WIRE_DUPLICATE : -RUMOR_WIRE_BAD_RANGE;
    }
    if (m->probe && mx_robust_quarantined(m, node)) {
        /* --robust-val: a neighbour in quarantine is waited for and probed,
         * not mixed (mx_round_done; mixer_probe.c): its way out */
        mx_probe_hold(m, r, node, h, data, nbytes, 0);
        s->qgot[node] += h->length; /* not s->cov: the mix counts that as its weight */
        s->outlier[node] = 1;
        rumor_err_set(RUMOR_EPROTO, "round %ld: quarantined (robust mixing)", r);
        return -RUMOR_WIRE_OUTLIER;
    }
    size_t c0 = (size_t)(lo / m->chunk), c1 = (size_t)((hi - 1) / m->chunk);
    for (size_t c = c0; c <= c1; c++)
        if (s->done[c] || s->rdy[c]) {
            /* an absent peer came back after this part was mixed without it */
            rumor_err_set(RUMOR_EPROTO, "range [%llu, %llu) of round %ld was mixed already",
                          (unsigned long long)lo, (unsigned long long)hi, r);
            return -RUMOR_WIRE_STALE_ROUND;
        }
    int want = mx_choco_dtype(m, r);
    if (h->dtype != want) {
        /* compressed gossip: keyframes in f32, the rounds between coded */
        rumor_err_set(RUMOR_EPROTO, "range of round %ld in dtype %u, the round's is %d "
                                    "(another --compress or keyframe interval?)",
                      r, (unsigned)h->dtype, want);
        return -RUMOR_WIRE_UNSUPPORTED_DTYPE;
    }
    if (want != RUMOR_WIRE_DT_F32) {
        int v = rumor_codec_check(h->dtype, data, nbytes, h->length, h->aux);
        if (v < 0)
            return v;
    } else if (!rumor_wire_payload_finite(data, h->length)) {
        rumor_err_set(RUMOR_EPROTO, "NaN or Inf in range [%llu, %llu) of round %ld",
                      (unsigned long long)lo, (unsigned long long)hi, r);
        return -RUMOR_WIRE_NONFINITE;
    } else {
        int v = mx_outlier_check(m, s, h, node, data);
        if (v < 0)
            return v;
    }

    /* accepted: from here on the message is used */
    mx_accept(m, h, node);
    mx_heard_round(m, node, r);
    double now = rumor_now();
    if (s->elems_in == 0)
        s->first_arrival = now;
    s->last_arrival = now;
    s->elems_in += h->length;
    m->counters.elems_received += h->length;
    if (h->length > s->max_range)
        s->max_range = h->length;
    for (size_t c = c0; c <= c1; c++) {
        if (s->touched[c])
            continue;
        uint64_t off, len;
        cell_range(m, c, &off, &len);
        if (lo <= off && hi >= off + len) {
            s->touched[c] = 2;
        } else {
            m->dev->ops->fill(m->dev, s->buf->data + off, 0.0f, len);
            s->touched[c] = 1;
        }
    }
    if (m->cfg.robust == RUMOR_ROBUST_TRIMMED) /* held whole: mixed by the trimmed mean */
        mx_robust_hold(m, s, node, h, data);
    mx_probe_hold(m, r, node, h, data, nbytes, 1); /* a probe's round: held whole */
    double sc = m->rb.scale; /* robust mixing: W (s x_j + (1 - s) x_i) */
    struct acc_ctx a = { s, (float)(w * sc), lo };
    if (m->cfg.robust != RUMOR_ROBUST_TRIMMED)
        mx_payload_blocks(m, h->dtype, h->aux, data, h->length, acc_block, &a);
    if (sc < 1.0) {
        const float *own = mx_robust_own(m, s);
        for (size_t c = c0; c <= c1; c++)
            if (s->touched[c] == 2) /* written: what follows adds */
                s->touched[c] = 1;
        struct acc_ctx b = { s, (float)(w * (1.0 - sc)), lo };
        if (own)
            acc_block(m, &b, own + lo, 0, (size_t)h->length);
    }
    mx_cover_add(&s->cov[node], lo, hi);
    for (size_t c = c0; c <= c1; c++) {
        s->touched[c] = 1;
        uint8_t *full = &s->full[(size_t)node * m->nchunks + c];
        uint64_t off, len;
        cell_range(m, c, &off, &len);
        if (!*full && mx_cover_within(&s->cov[node], off, off + len) == len) {
            *full = 1;
            s->wfull[c] += w;
            mix_if_ready(m, s, c);
        }
    }
    if (s->cov[node].covered == m->n)
        s->complete++;
    return 0;
}

/* ------------------------------------------------------- closing */

/* Whom round cur waits for. A neighbour is waited for while it is alive
 * (heard from within the liveness window: the heartbeat timeout, or the
 * round's deadline if that is longer), has not said it is leaving, and has
 * not stayed more than MX_WAIT_LAG rounds behind this peer for that long.
 * One that did not answer the HELLO barrier is not waited for until it
 * speaks.
 *   - A live neighbour that misses a deadline is waited for again in the
 *     next round: peers never run ahead of a slow but live neighbour, they
 *     stay within a round or two of each other, and nobody has to skip
 *     rounds or fetch state after one late message.
 *   - A dead, frozen or cut-off neighbour stops being waited for once it
 *     has been silent for the window (it is never waited for longer than
 *     a deadline in any one round).
 *   - One far behind (restarted from a checkpoint, thawed, joining) is told
 *     where the swarm is and jumps or fetches state (mixer_state.c), which
 *     takes well under the window; a peer that stays behind is not waited
 *     for after it.
 * A neighbour that has sent part of round cur is waited for regardless. */
void mx_refresh_absent(rumor_mixer_t *m, double deadline)
{
    double now = rumor_now();
    double alive = m->cfg.heartbeat_timeout_ms > 0 ? m->cfg.heartbeat_timeout_ms / 1000.0 : 2.0;
    if (deadline > alive)
        alive = deadline;
    for (int j = 0; j < m->npeers; j++) {
        if (!m->talks_to[j])
            continue;
        if (m->peer_round[j] >= m->cur - MX_WAIT_LAG)
            m->behind_since[j] = 0;
        else if (m->behind_since[j] == 0)
            m->behind_since[j] = now;
        m->gone[j] = m->left[j] || m->incompatible[j] || now - m->last_heard[j] > alive ||
                     (m->barrier_run && !m->heard[j] && !m->ready[j]);
        m->absent[j] = m->gone[j] ||
                       (m->behind_since[j] > 0 && now - m->behind_since[j] > alive);
    }
}

/* j sent ranges of a later round, or said (HELLO) it is in one: its
 * connection is in order, so what it has not sent of this round is not
 * coming (it skipped ahead). Ranges of rounds beyond the window were
 * dropped unread and do not count. */
static int moved_on(const rumor_mixer_t *m, int j)
{
    if (m->said_round[j] > m->cur)
        return 1;
    for (int d = 1; d < m->nslots; d++) {
        const struct mx_slot *n = &m->slot[(m->cur + d) % m->nslots];
        if (n->round == m->cur + d && n->buf && (n->cov[j].covered > 0 || n->qgot[j] > 0))
            return 1;
    }
    return 0;
}

/* Whether round cur can close: every in-neighbour covered the space, or is
 * not waited for (mx_refresh_absent) and has sent nothing this round, or
 * has moved on to a later round. */
int mx_round_done(const rumor_mixer_t *m, const struct mx_slot *s)
{
    if (s->round != m->cur)
        return 0;
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (s->cov[j].covered == m->n)
            continue;
        /* with --robust-val a neighbour in quarantine is waited for as any
         * other (its ranges are probed, not mixed): the swarm stays in step
         * with the honest peer a liar dragged, whom its probes let out */
        int held = m->probe && s->outlier[j] && mx_robust_quarantined(m, j) &&
                   s->qgot[j] < m->n &&
                   !(m->absent[j] && (s->qgot[j] == 0 || m->left[j]));
        if (mx_not_waited(m, s, j) && !held)
            continue;
        if (m->cfg.conns_per_peer <= 1 && moved_on(m, j))
            continue;
        return 0;
    }
    return 1;
}

/* Whether the round's data is still flowing fast enough to arrive before
 * round_timeout: the deadline is never shorter than the time the round's
 * bytes need at the rate they arrive (a large model on a slow link). Data
 * flows while the next range is not overdue: on a slow link a range of a
 * megabyte takes most of a second, so the gap allowed is 2.5 ranges' time
 * at the rate seen (this round's, or the last round's before a second
 * range came), and at least 0.25 s. */
int mx_round_flowing(const rumor_mixer_t *m, const struct mx_slot *s, double now)
{
    if (s->round != m->cur || s->elems_in == 0)
        return 0;
    double span = s->last_arrival - s->first_arrival;
    double rate = span > 0 ? (double)s->elems_in / span : m->recv_rate;
    double gap = 0.25;
    if (rate > 0 && 2.5 * (double)s->max_range / rate > gap)
        gap = 2.5 * (double)s->max_range / rate;
    if (now - s->last_arrival > gap)
        return 0;
    if (span <= 0)
        return 1; /* the first ranges just came */
    uint64_t missing = 0;
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        if (!mx_not_waited(m, s, j))
            missing += m->n - s->cov[j].covered;
    }
    return now + 1.25 * (double)missing / rate <= m->round_start + m->timeout;
}

/* Finishes round cur: mixes the cells not mixed yet (x = acc + (1 - w) x
 * where w is the weight that arrived), hands the buffer to the caller and
 * moves on to round cur + 1. */
void mx_close_round(rumor_mixer_t *m, int timed_out)
{
    long k = m->cur;
    if (mx_ensure_slot(m, k) < 0) {
        mx_close_failed(m, rumor_err_code() ? rumor_err_code() : RUMOR_ENOMEM);
        return;
    }
    struct mx_slot *s = &m->slot[k % m->nslots];
    /* the self-term: what this peer sent (compressed: its coded change) */
    s->x = m->ch.on && m->sent_round == k && m->sent_buf ? m->sent_buf->data : m->params->data;
    for (size_t c = 0; c < m->nchunks; c++)
        if (!s->done[c])
            mix_cell(m, s, c);
    /* with what the caller's threads mixed: every cell is MIXED, and its
     * results were written before (mix_cell read its state, acquire) */
    double dis = s->dis, selfw = s->selfw;
    double t0 = 0, t1 = 0;
    size_t ncaller = 0;
    for (size_t c = 0; c < m->nchunks; c++) {
        if (s->cby[c]) {
            dis += s->cd2[c];
            selfw += s->csw[c];
            s->mixed_any |= s->cby[c] == 2;
            ncaller++;
        }
        if (t0 == 0 || s->tmix[c] < t0)
            t0 = s->tmix[c];
        if (s->tmix[c] > t1)
            t1 = s->tmix[c];
    }
    m->closing_mix[0] = t0;
    m->closing_mix[1] = t1;
    m->closing_recv[0] = s->first_arrival;
    m->closing_recv[1] = s->last_arrival;
    m->closing_caller = ncaller;
    /* the caller's threads use the closed buffer now (the close's reply) */
    atomic_store_explicit(&s->pub_round, -1, memory_order_release);
    if (m->ch.on) /* the mix becomes x + gamma (s - x_hat) */
        mx_choco_finish(m, s, k, s->buf, &dis);
    for (int i = 0; i < s->nin; i++) {
        int j = s->in[i];
        uint64_t got = s->cov[j].covered;
        if (got == m->n || m->absent[j])
            continue;
        char why[160] = "";
        if (m->rej_round[j] == k && m->rej_count[j] > 0)
            snprintf(why, sizeof why, "; %d of its messages were rejected (last: %s)",
                     m->rej_count[j], rumor_wire_reject_name(m->rej_reason[j]));
        rumor_info("round %ld: peer %d sent %llu of %zu parameters (%.1f%%) before the deadline%s; "
                   "the weight %.3g of what is missing went to the self-weight",
                   k, j, (unsigned long long)got, m->n, 100.0 * (double)got / (double)m->n, why,
                   s->w_of[j]);
    }
    if (s->last_arrival > s->first_arrival) /* the rate ranges came at, for the next round */
        m->recv_rate = (double)s->elems_in / (s->last_arrival - s->first_arrival);
    mx_probe_close(m, s);
    rumor_sendbuf_t *out = s->buf;
    /* The caller now owns s->buf as its parameters; the slot waits, empty,
     * for round k + nslots. */
    s->buf = NULL;
    s->round = -1;
    m->round_staleness = 0;
    /* a round that timed out waiting for a peer that sent nothing says
     * nothing about how long rounds take: not a deadline sample */
    int silent = 0;
    for (int i = 0; i < s->nin; i++)
        silent += s->cov[s->in[i]].covered == 0;
    m->round_sample = !(timed_out && silent);
    mx_publish_close(m, k, out, s->nin, s->complete, timed_out, dis, selfw / (double)m->n,
                     s->mixed_any);
}

void mx_close_failed(rumor_mixer_t *m, int rc)
{
    char msg[MX_ERR_LEN];
    snprintf(msg, sizeof msg, "%s", rumor_err_msg());
    struct mx_reply *r = m->close_reply;
    long k = m->close_round;
    m->close_reply = NULL;
    m->close_round = -1;
    if (!r)
        return;
    pthread_mutex_lock(&m->mu);
    r->round = k;
    mx_reply_locked(r, rc, msg);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Hands the mixed parameters of round k to the caller (the close's reply)
 * and moves on to round k + 1 (or later: an asynchronous peer follows its
 * neighbours' clock, see mixer_async.c, which sets m->cur itself
 * beforehand). */
void mx_publish_close(rumor_mixer_t *m, long k, rumor_sendbuf_t *out, int nin, int complete,
                      int timed_out, double dis, double selfw, int mixed_any)
{
    const rumor_transport_stats_t *ts = rumor_transport_stats(m->tr);
    if (m->cur <= k)
        m->cur = k + 1;
    if (mixed_any)
        m->counters.rounds_mixed++;
    double elapsed = rumor_now() - m->round_start;
    if (!m->cfg.async && !atomic_load(&m->hurry) && m->round_sample)
        mx_record_round_time(m, elapsed);
    rumor_round_stats_t stats, *st = &stats;
    memset(st, 0, sizeof *st);
    st->round = k;
    st->in_neighbors = nin;
    st->complete = complete;
    st->timed_out = timed_out;
    st->disagreement = sqrt(dis);
    st->self_weight = selfw;
    st->deadline_s = m->cur_deadline;
    st->round_s = elapsed;
    st->swarm_round = mx_swarm_round(m);
    st->next_round = m->cur;
    st->window = m->nslots;
    st->behind_round = m->told_behind;
    st->members = m->swim ? m->vn : 0;
    st->keyframe = m->ch.on && m->ch.keyframe_closed;
    st->consensus_skipped = m->ch.on && m->ch.skipped_closed;
    st->mix_start = m->closing_mix[0];
    st->mix_end = m->closing_mix[1];
    st->recv_start = m->closing_recv[0];
    st->recv_end = m->closing_recv[1];
    st->cells = m->nchunks;
    st->cells_by_caller = m->closing_caller;
    m->closing_mix[0] = m->closing_mix[1] = 0;
    m->closing_recv[0] = m->closing_recv[1] = 0;
    m->closing_caller = 0;
    m->told_behind = -1;
    st->max_staleness = m->round_staleness;
    st->bytes_sent = ts->bytes_sent;
    st->bytes_received = ts->bytes_received;
    mx_buf_retire(m, m->params); /* may still be sending: recycled when done */
    m->params = out;
    mx_publish(m); /* the counters as of this round, before its reply */
    struct mx_reply *r = m->close_reply;
    m->close_reply = NULL;
    m->close_round = -1;
    if (!r)
        return;
    pthread_mutex_lock(&m->mu);
    r->st = stats;
    r->round = k;
    r->next = m->cur;
    r->buf = out;
    mx_reply_locked(r, 0, NULL);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}
