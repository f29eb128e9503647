/* rumor-sim's training rounds (--rounds): every simulated peer runs
 * synchronous D-PSGD rounds over the graph its own SWIM view implies, as
 * rumor-peer's mixer does (gossip/mixer_round.c, docs/sim.md "Rounds"):
 *
 *   - the graph is librumor's: rumor_swim_topology() lays the --topology
 *     family over the peer's view (sorted by id), and rumor_topo_neighbors()
 *     / rumor_topo_out_neighbors() give round k's in-neighbours with their
 *     weights and out-neighbours, rebuilt when the view changes;
 *   - a round sends the peer's parameters (PARAMS, 4 bytes a parameter on
 *     the links) to its out-neighbours, computes for round_cpu_ms (on
 *     `cores` shared by all live peers), then waits until every
 *     in-neighbour's PARAMS of the round came, or it is not waited for (its
 *     process has been silent longer than max(2 s, the deadline): the
 *     mixer's heartbeat timeout), or it moved on (sent a later round), or
 *     the deadline passes; the deadline is the mixer's own rule
 *     (rumor_round_deadline);
 *   - the close mixes x + sum over what came of W_ij (x_j - x), the weight
 *     of what did not come staying with x, records the disagreement
 *     ||mix - x|| (rumor-peer's "consensus" of a round event) and takes the
 *     peer's own step: an isotropic Gaussian of norm `drift`;
 *   - a newcomer ends its barrier once its view holds another member (a
 *     HELLO round trip later), fetches the state of the most advanced
 *     training member of its view and starts at its round; a peer that
 *     receives a round more than WINDOW ahead of its own jumps to it.
 *
 * What the mixer does and this leaves out: chunks and cells (a round's
 * parameters are one message), the wait for a neighbour that is behind
 * (here it is waited for until the deadline), compression, and the CPU of
 * SWIM's and the mixer's own messages (counted in round_cpu_ms only as
 * far as a measured figure holds them). */
#include "sim_int.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "mixer.h"
#include "rng.h"
#include "topology.h"

#define RING 32       /* round times the deadline is taken from (the mixer's) */
#define WINDOW 4      /* rounds ahead a PARAMS may be; further: this peer is behind */

typedef struct inmsg {
    uint64_t from;
    long round;
    double *x;
} inmsg_t;

struct sim_train {
    int training, barrier_done;
    double t_train;          /* when it started training (-1: not yet) */
    double t_first;          /* its first round closed (-1: not yet) */
    long cur;
    double start, computed_at, deadline_len;
    int computed, late, got_any;
    double ring[RING];
    long nsamples;
    double *x, *mix;
    /* the graph of its view */
    uint64_t vversion;
    rumor_topo_t *topo;
    int self;
    rumor_swim_member_t *view;
    size_t nview, capview;
    /* this round's in-neighbours, and scratch for the topology's answers */
    int nin, cap;
    uint64_t *in_id;
    double *in_w;
    double *in_since; /* when each in-neighbour became one (a static graph's edge age) */
    uint64_t *old_id;
    double *old_since;
    int *nbr;
    double *w;
    inmsg_t *box; /* PARAMS of rounds >= cur */
    size_t nbox, capbox;
    double last_dis;
    int has_dis;
    long rounds_phase; /* rounds closed in the churn phase */
};

/* The windows of the figures (bench_scale's): rounds a second, mixed
 * rounds and the consensus distance's RMS in the steady window; late
 * rounds from 10 s after a --burst (past SWIM's detection) to the end, or
 * over the churn phase without one. */
static int steady(const sim_t *s)
{
    return s->now >= sim_steady_from(s) && s->now < sim_steady_end(s);
}

static double late_from(const sim_t *s)
{
    return s->cfg.burst_at >= 0 && s->cfg.burst_n > 0 ? s->cfg.burst_at + 10 : s->t_churn;
}

static double gauss(sim_t *s)
{
    double u = sim_unit(s), v = sim_unit(s);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* The compute of a round: round_cpu_ms on a core of its own, stretched by
 * the share of the machine's cores when more peers run than there are. */
static double cpu_time(const sim_t *s)
{
    double t = s->cfg.round_cpu_ms * 1e-3;
    if (s->cfg.cores > 0 && (double)s->nalive > s->cfg.cores)
        t *= (double)s->nalive / s->cfg.cores;
    return t;
}

/* Rebuilds the graph when SWIM's view changed. 0, or an error. A view the
 * family cannot be laid over keeps the previous graph (as the mixer). */
static int refresh_graph(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    uint64_t v = rumor_swim_view_version(p->sw);
    if (t->topo && v == t->vversion)
        return 0;
    t->vversion = v;
    size_t n = rumor_swim_view(p->sw, NULL, 0);
    if (n > t->capview) {
        rumor_swim_member_t *a = realloc(t->view, n * sizeof *a);
        if (!a)
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory for a view");
        t->view = a;
        t->capview = n;
    }
    n = rumor_swim_view(p->sw, t->view, t->capview);
    rumor_topo_t *g = NULL;
    int self = -1;
    if (rumor_swim_topology(s->cfg.topology, t->view, n, p->id, &g, &self) < 0) {
        rumor_err_clear();
        return 0;
    }
    rumor_topo_destroy(&t->topo);
    t->topo = g;
    t->self = self;
    t->nview = n;
    if ((int)n > t->cap) { /* the neighbour arrays, each n long */
        void **a[] = { (void **)&t->nbr,      (void **)&t->w,      (void **)&t->in_id,
                       (void **)&t->in_w,     (void **)&t->in_since, (void **)&t->old_id,
                       (void **)&t->old_since };
        size_t size[] = { sizeof *t->nbr,  sizeof *t->w,      sizeof *t->in_id, sizeof *t->in_w,
                          sizeof *t->in_since, sizeof *t->old_id, sizeof *t->old_since };
        for (size_t i = 0; i < sizeof a / sizeof *a; i++) {
            size_t cap = (size_t)t->cap;
            RUMOR_CHECK(sim_grow(a[i], &cap, n, size[i]));
        }
        t->cap = (int)n;
    }
    return 0;
}

/* Round cur's in-neighbours (ids and weights) from the current graph. */
static int take_in(const sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    int k = rumor_topo_neighbors(t->topo, t->self, t->cur, t->nbr, t->w, t->cap);
    if (k < 0)
        return k;
    int old = t->nin;
    memcpy(t->old_id, t->in_id, (size_t)old * sizeof *t->old_id);
    memcpy(t->old_since, t->in_since, (size_t)old * sizeof *t->old_since);
    t->nin = k;
    for (int i = 0; i < k; i++) {
        t->in_id[i] = t->view[t->nbr[i]].id;
        t->in_w[i] = t->w[i];
        t->in_since[i] = s->now;
        for (int j = 0; j < old; j++)
            if (t->old_id[j] == t->in_id[i])
                t->in_since[i] = t->old_since[j];
    }
    return 0;
}

static inmsg_t *find(sim_train_t *t, uint64_t from, long round)
{
    for (size_t i = 0; i < t->nbox; i++)
        if (t->box[i].from == from && t->box[i].round == round)
            return &t->box[i];
    return NULL;
}

static int moved_on(const sim_train_t *t, uint64_t from)
{
    for (size_t i = 0; i < t->nbox; i++)
        if (t->box[i].from == from && t->box[i].round > t->cur)
            return 1;
    return 0;
}

/* Not waited for: its process has been silent longer than the mixer's
 * heartbeat timeout (a live process sends heartbeats every 0.5 s, so it
 * was last heard when it died), or it is unknown. When it will be, *until
 * gets that time. */
static int absent(const sim_t *s, const sim_train_t *t, uint64_t id, double *until)
{
    int i = sim_peer_by_id(s, id);
    if (i < 0)
        return 1;
    const sim_peer_t *q = s->peers[i];
    if (q->alive)
        return 0;
    double hb = s->cfg.heartbeat_timeout;
    double alive = t->deadline_len > hb ? t->deadline_len : hb;
    if (s->now >= q->died + alive)
        return 1;
    *until = q->died + alive;
    return 0;
}

static int open_round(sim_t *s, sim_peer_t *p);

static void drop_before(sim_train_t *t, long round)
{
    size_t k = 0;
    for (size_t i = 0; i < t->nbox; i++) {
        if (t->box[i].round < round)
            free(t->box[i].x);
        else
            t->box[k++] = t->box[i];
    }
    t->nbox = k;
}

static int close_round(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    int dim = s->cfg.dim, got = 0, silent = 0;
    memcpy(t->mix, t->x, (size_t)dim * sizeof *t->mix);
    for (int i = 0; i < t->nin; i++) {
        inmsg_t *m = find(t, t->in_id[i], t->cur);
        if (!m) {
            silent++;
            continue;
        }
        got++;
        for (int d = 0; d < dim; d++)
            t->mix[d] += t->in_w[i] * (m->x[d] - t->x[d]);
    }
    double dis = 0;
    for (int d = 0; d < dim; d++)
        dis += (t->mix[d] - t->x[d]) * (t->mix[d] - t->x[d]);
    t->last_dis = sqrt(dis);
    t->has_dis = 1;
    double sd = s->cfg.drift / sqrt((double)dim);
    for (int d = 0; d < dim; d++)
        t->x[d] = t->mix[d] + sd * gauss(s);
    double elapsed = s->now - t->start;
    if (!(t->late && silent)) { /* a round that waited out a silent one is no sample */
        t->ring[t->nsamples % RING] = elapsed;
        t->nsamples++;
    }
    s->res.peer_rounds++;
    if (steady(s)) {
        t->rounds_phase++;
        s->win_rounds++;
        s->win_mixed += got > 0;
        s->win_dis2 += dis;
    }
    if (s->now >= late_from(s)) {
        s->win_late_n++;
        s->win_late += t->late;
    }
    if (s->now >= sim_steady_from(s) && s->now - t->computed_at > s->win_wait)
        s->win_wait = s->now - t->computed_at;
    if (t->t_first < 0) {
        t->t_first = s->now;
        if (p->born > s->t_churn) {
            RUMOR_CHECK(
                sim_grow((void **)&s->admit, &s->capadmit, s->nadmit + 1, sizeof *s->admit));
            s->admit[s->nadmit++] = s->now - p->born;
        }
    }
    t->cur++;
    drop_before(t, t->cur);
    return open_round(s, p);
}

/* Closes round cur when its compute is done and it is complete or late. */
static int try_close(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    if (!t->computed)
        return 0;
    if (!t->late) {
        for (int i = 0; i < t->nin; i++) {
            uint64_t id = t->in_id[i];
            if (find(t, id, t->cur) || moved_on(t, id))
                continue;
            /* --new-edge-grace: an edge of a static graph younger than the
             * grace is mixed when its PARAMS come, not waited for */
            if (s->cfg.new_edge_grace > 0 && t->topo->period == 1 &&
                s->now < t->in_since[i] + s->cfg.new_edge_grace)
                continue;
            double until = -1;
            if (absent(s, t, id, &until))
                continue;
            if (until > 0) /* wake when it stops being waited for */
                RUMOR_CHECK(sim_push_arg(s, until, SIM_DEADLINE, p->idx, 2 * t->cur + 1));
            return 0;
        }
    }
    return close_round(s, p);
}

static int open_round(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    RUMOR_CHECK(refresh_graph(s, p));
    if (!t->topo)
        return rumor_err_set(RUMOR_ESTATE, "sim: peer %d has no graph", p->idx);
    RUMOR_CHECK(take_in(s, p));
    t->got_any = 0;
    for (int i = 0; i < t->nin && !t->got_any; i++)
        t->got_any = find(t, t->in_id[i], t->cur) != NULL;
    /* PARAMS to the out-neighbours: the round and x, 4 bytes a parameter
     * on the links */
    int k = rumor_topo_out_neighbors(t->topo, t->self, t->cur, t->nbr, NULL, t->cap);
    if (k < 0)
        return k;
    size_t len = sizeof(long) + (size_t)s->cfg.dim * sizeof(double);
    uint8_t body[sizeof(long) + 64 * sizeof(double)];
    memcpy(body, &t->cur, sizeof(long));
    memcpy(body + sizeof(long), t->x, (size_t)s->cfg.dim * sizeof(double));
    double wire = RUMOR_WIRE_HDR_LEN + 4.0 * s->cfg.model_params;
    for (int i = 0; i < k; i++) {
        int to = sim_peer_by_id(s, t->view[t->nbr[i]].id);
        if (to < 0)
            continue;
        p->pbytes += (uint64_t)wire;
        RUMOR_CHECK(sim_transmit(s, p, to, RUMOR_WIRE_PARAMS, 0, body, len, wire));
    }
    t->start = s->now;
    t->computed = t->late = 0;
    t->deadline_len = rumor_round_deadline(t->ring, t->nsamples, RING, s->cfg.min_round_timeout,
                                           s->cfg.round_timeout, NULL);
    RUMOR_CHECK(sim_push_arg(s, s->now + cpu_time(s), SIM_COMPUTED, p->idx, t->cur));
    return sim_push_arg(s, s->now + t->deadline_len, SIM_DEADLINE, p->idx, 2 * t->cur);
}

int sim_round_start(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = calloc(1, sizeof *t);
    if (!t || !(t->x = calloc((size_t)s->cfg.dim, sizeof *t->x)) ||
        !(t->mix = calloc((size_t)s->cfg.dim, sizeof *t->mix))) {
        if (t)
            free(t->x);
        free(t);
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory for a peer's rounds");
    }
    t->t_train = t->t_first = -1;
    if (s->cfg.init_spread > 0 && p->born <= s->t_churn) { /* the initial peers' own starts */
        double sd = s->cfg.init_spread / sqrt((double)s->cfg.dim);
        for (int d = 0; d < s->cfg.dim; d++)
            t->x[d] = sd * gauss(s);
    }
    p->tr = t;
    return 0;
}

/* The barrier: once the view holds another member, a HELLO round trip and
 * the state's transfer later the peer trains. */
static int barrier(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    if (t->barrier_done || rumor_swim_view(p->sw, NULL, 0) < 2)
        return 0;
    t->barrier_done = 1;
    double at = s->now + 2 * p->lat;
    if (p->down_bps > 0 || p->up_bps > 0) {
        double bps = p->down_bps > 0 ? p->down_bps : p->up_bps;
        at += 4.0 * s->cfg.model_params * 8 / bps;
    }
    return sim_push_arg(s, at, SIM_TRAIN, p->idx, 0);
}

/* Starts training: the state and round of the most advanced training
 * member of its view, when that is past round 0 (a joiner of a running
 * swarm fetches its state); a founder keeps its own start. */
static int train(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    RUMOR_CHECK(refresh_graph(s, p));
    const sim_train_t *src = NULL;
    for (size_t i = 0; i < t->nview; i++) {
        int j = sim_peer_by_id(s, t->view[i].id);
        if (j < 0 || j == p->idx || !s->peers[j]->alive || !s->peers[j]->tr)
            continue;
        const sim_train_t *u = s->peers[j]->tr;
        if (u->training && (!src || u->cur > src->cur))
            src = u;
    }
    if (src && src->cur > 0) {
        t->cur = src->cur;
        memcpy(t->x, src->x, (size_t)s->cfg.dim * sizeof *t->x);
    }
    t->training = 1;
    t->t_train = s->now;
    drop_before(t, t->cur);
    return open_round(s, p);
}

int sim_round_seen(sim_t *s, sim_peer_t *p)
{
    sim_train_t *t = p->tr;
    if (!t->training)
        return barrier(s, p);
    if (rumor_swim_view_version(p->sw) == t->vversion)
        return 0;
    RUMOR_CHECK(refresh_graph(s, p));
    /* a round nothing has arrived for yet takes the new graph (the mixer
     * reweighs such a round); sends already made stand */
    if (!t->got_any) {
        RUMOR_CHECK(take_in(s, p));
        return try_close(s, p);
    }
    return 0;
}

int sim_round_event(sim_t *s, sim_peer_t *p, int kind, long arg)
{
    sim_train_t *t = p->tr;
    switch (kind) {
    case SIM_TRAIN:
        return t->training ? 0 : train(s, p);
    case SIM_COMPUTED:
        if (!t->training || arg != t->cur || t->computed)
            return 0;
        t->computed = 1;
        t->computed_at = s->now;
        return try_close(s, p);
    case SIM_DEADLINE:
        if (!t->training || arg / 2 != t->cur)
            return 0;
        if (arg % 2 == 0)
            t->late = 1;
        return try_close(s, p);
    }
    return 0;
}

int sim_round_params(sim_t *s, sim_peer_t *p, const sim_msg_t *m)
{
    sim_train_t *t = p->tr;
    long round;
    if (!t || !t->training || m->len != sizeof round + (size_t)s->cfg.dim * sizeof(double))
        return 0;
    memcpy(&round, m->body, sizeof round);
    if (round < t->cur)
        return 0; /* too late: the round closed without it */
    if (round > t->cur + WINDOW) { /* far behind: told where the swarm is, it jumps */
        s->res.jumps++;
        t->cur = round;
        drop_before(t, t->cur);
        RUMOR_CHECK(open_round(s, p));
    }
    RUMOR_CHECK(sim_grow((void **)&t->box, &t->capbox, t->nbox + 1, sizeof *t->box));
    double *x = malloc((size_t)s->cfg.dim * sizeof *x);
    if (!x)
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory for PARAMS");
    memcpy(x, m->body + sizeof round, (size_t)s->cfg.dim * sizeof *x);
    t->box[t->nbox++] = (inmsg_t){ .from = m->sender, .round = round, .x = x };
    if (round == t->cur) {
        for (int i = 0; i < t->nin; i++)
            t->got_any |= t->in_id[i] == m->sender;
    }
    return try_close(s, p);
}

/* A stopped peer keeps only its figures. */
void sim_round_stop(sim_t *s, sim_peer_t *p)
{
    (void)s;
    sim_train_t *t = p->tr;
    if (!t)
        return;
    drop_before(t, LONG_MAX);
    free(t->box);
    free(t->x);
    free(t->mix);
    free(t->view);
    free(t->nbr);
    free(t->w);
    free(t->in_id);
    free(t->in_w);
    free(t->in_since);
    free(t->old_id);
    free(t->old_since);
    rumor_topo_destroy(&t->topo);
    t->box = NULL;
    t->x = t->mix = t->w = t->in_w = NULL;
    t->view = NULL;
    t->nbr = NULL;
    t->in_id = NULL;
    t->in_since = t->old_since = NULL;
    t->old_id = NULL;
    t->nin = 0;
    t->nbox = t->capbox = t->capview = 0;
    t->cap = 0;
    t->training = 0;
}

void sim_round_free(sim_peer_t *p)
{
    sim_round_stop(NULL, p);
    free(p->tr);
    p->tr = NULL;
}

double sim_round_consensus(const sim_t *s)
{
    double sum = 0;
    int n = 0;
    for (size_t a = 0; a < s->nalive; a++) {
        const sim_train_t *t = s->peers[s->alive[a]]->tr;
        if (t && t->training && t->has_dis) {
            sum += t->last_dis;
            n++;
        }
    }
    return n ? sum / n : -1;
}

double sim_round_spread(sim_t *s, int *all)
{
    int dim = s->cfg.dim, n = 0;
    if (!s->xbar && !(s->xbar = malloc((size_t)dim * sizeof *s->xbar)))
        return -1;
    memset(s->xbar, 0, (size_t)dim * sizeof *s->xbar);
    for (size_t a = 0; a < s->nalive; a++) {
        const sim_train_t *t = s->peers[s->alive[a]]->tr;
        if (!t || !t->training)
            continue;
        for (int d = 0; d < dim; d++)
            s->xbar[d] += t->x[d];
        n++;
    }
    *all = (size_t)n == s->nalive;
    if (!n)
        return -1;
    double sum = 0;
    for (size_t a = 0; a < s->nalive; a++) {
        const sim_train_t *t = s->peers[s->alive[a]]->tr;
        if (!t || !t->training)
            continue;
        for (int d = 0; d < dim; d++) {
            double v = t->x[d] - s->xbar[d] / n;
            sum += v * v;
        }
    }
    return sqrt(sum / n);
}

int sim_round_finish(sim_t *s)
{
    sim_result_t *r = &s->res;
    double rate = 0, bytes = 0;
    int nrate = 0, nbytes = 0;
    for (size_t i = 0; i < s->npeers; i++) {
        const sim_peer_t *p = s->peers[i];
        const sim_train_t *t = p->tr;
        double end = p->alive ? s->t_end : p->died;
        if (end - p->born >= 5) {
            bytes += (double)p->pbytes / (end - p->born);
            nbytes++;
        }
        if (!t || t->t_train < 0)
            continue;
        double from = t->t_train > sim_steady_from(s) ? t->t_train : sim_steady_from(s);
        if (end > sim_steady_end(s))
            end = sim_steady_end(s);
        if (end - from >= 5) {
            rate += (double)t->rounds_phase / (end - from);
            nrate++;
        }
    }
    r->rounds_per_s = nrate ? rate / nrate : NAN;
    r->params_bytes_per_s = nbytes ? bytes / nbytes : NAN;
    r->mixed_share = s->win_rounds > 0 ? s->win_mixed / s->win_rounds : NAN;
    r->consensus_rms = s->win_rounds > 0 ? sqrt(s->win_dis2 / s->win_rounds) : NAN;
    r->spread_rms = s->win_spread_n > 0 ? sqrt(s->win_spread2 / s->win_spread_n) : NAN;
    r->late_share = s->win_late_n > 0 ? s->win_late / s->win_late_n : NAN;
    r->max_wait = s->win_wait;
    r->consensus_mean = sim_round_consensus(s);
    r->consensus_max = 0;
    r->training_end = 0;
    for (size_t a = 0; a < s->nalive; a++) {
        const sim_train_t *t = s->peers[s->alive[a]]->tr;
        if (!t || !t->training)
            continue;
        r->training_end++;
        if (t->has_dis && t->last_dis > r->consensus_max)
            r->consensus_max = t->last_dis;
    }
    r->admit = sim_dist(s->admit, (int)s->nadmit, 0);
    return 0;
}
