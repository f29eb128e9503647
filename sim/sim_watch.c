/* rumor-sim's measurements. Nothing here models SWIM: every figure is read
 * from the simulated peers' own tables (rumor_swim_find, rumor_swim_view,
 * rumor_swim_stats) right after an event changed them, so a time is exact
 * to the event that caused it.
 *
 * A table can only change when its peer handles an event, so each peer is
 * looked at after each of its events, and only when its view version moved
 * (a join or a departure it took in moves it). Departures and joins are
 * "items"; each keeps a bit per watched peer that has seen it. Watching
 * every peer costs O(pending items) per view change; --observers bounds the
 * watched set for large swarms (a uniform sample; the 50% and 100% figures
 * are then over that sample). First detections and false positives are
 * taken at every peer, watched or not, from the moment its own declared_dead
 * counter moves: a DEAD record starts with a declaration somewhere. */
#include "sim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

enum { ITEM_DEPART = 0, ITEM_JOIN = 1, ITEM_CHURN_JOIN = 2, ITEM_LEAVE = 3 };
#define GOING(kind) ((kind) == ITEM_DEPART || (kind) == ITEM_LEAVE)

int sim_grow(void **a, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *n = realloc(*a, c * size);
    if (!n)
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
    *a = n;
    *cap = c;
    return 0;
}

static int bit_get(const sim_item_t *it, int slot)
{
    return (size_t)slot / 8 < it->nbytes && (it->bits[slot / 8] >> (slot % 8)) & 1;
}

static int bit_set(sim_item_t *it, int slot)
{
    size_t need = (size_t)slot / 8 + 1;
    if (need > it->nbytes) {
        size_t nb = need * 2 > 64 ? need * 2 : 64;
        uint8_t *b = realloc(it->bits, nb);
        if (!b)
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
        memset(b + it->nbytes, 0, nb - it->nbytes);
        it->bits = b;
        it->nbytes = nb;
    }
    it->bits[slot / 8] |= (uint8_t)(1u << (slot % 8));
    return 0;
}

static int item_add(sim_t *s, int kind, const sim_peer_t *p)
{
    RUMOR_CHECK(sim_grow((void **)&s->items, &s->capitems, s->nitems + 1, sizeof *s->items));
    RUMOR_CHECK(sim_grow((void **)&s->pending, &s->cappending, s->npending + 1, sizeof *s->pending));
    sim_item_t *it = &s->items[s->nitems];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->peer = p->idx;
    it->id = p->id;
    it->t0 = s->now;
    it->first = it->half = it->all = it->own = -1;
    it->pending = 1;
    it->limit = (int)s->npeers;
    it->den = s->nwatch_live;
    s->pending[s->npending++] = (int)s->nitems;
    return (int)s->nitems++;
}

/* Records the 50% and 100% marks when reached; 1 when the item is done. */
static int item_check(sim_t *s, sim_item_t *it)
{
    int n = it->den;
    if (n > 0 && it->half < 0 && 2 * it->count >= n)
        it->half = s->now - it->t0;
    if (n > 0 && it->all < 0 && it->count >= n)
        it->all = s->now - it->t0;
    return it->all >= 0 && (GOING(it->kind) || it->own >= 0);
}

static void pending_drop(sim_t *s, size_t k)
{
    s->items[s->pending[k]].pending = 0;
    s->pending[k] = s->pending[--s->npending];
}

static int add_time(double **a, int *n, size_t *cap, double t)
{
    RUMOR_CHECK(sim_grow((void **)a, cap, (size_t)*n + 1, sizeof **a));
    (*a)[(*n)++] = t;
    return 0;
}

int sim_watch_join(sim_t *s, sim_peer_t *p)
{
    int all = s->cfg.observers <= 0 || s->cfg.observers >= s->cfg.peers;
    if (all || sim_unit(s) * s->cfg.peers < s->cfg.observers) {
        p->watch_slot = s->nslots++;
        s->nwatch_live++;
    }
    int kind = s->res.started <= s->cfg.peers ? ITEM_JOIN : ITEM_CHURN_JOIN;
    int k = item_add(s, kind, p);
    RUMOR_CHECK(k);
    p->join_item = k;
    return 0;
}

int sim_watch_depart(sim_t *s, sim_peer_t *p, int left)
{
    for (size_t k = s->npending; k-- > 0;) {
        sim_item_t *it = &s->items[s->pending[k]];
        if (p->watch_slot >= 0 && p->idx < it->limit) {
            it->den--;
            it->count -= bit_get(it, p->watch_slot);
        }
        if (it->peer == p->idx) { /* a joiner that died first: not a join to measure */
            it->pending = -1;
            s->pending[k] = s->pending[--s->npending];
        }
    }
    if (p->watch_slot >= 0)
        s->nwatch_live--;
    p->join_item = -1;
    RUMOR_CHECK(add_time(&s->res.deaths, &s->res.ndeaths, &s->cap_deaths, s->now));
    RUMOR_CHECK(item_add(s, left ? ITEM_LEAVE : ITEM_DEPART, p));
    /* fewer peers to convince: some items may be complete now */
    for (size_t k = s->npending; k-- > 0;)
        if (item_check(s, &s->items[s->pending[k]]))
            pending_drop(s, k);
    return 0;
}

/* p's suspicion of someone just expired: the first DEAD of a departed peer
 * anywhere, or a live peer declared DEAD (a false positive). */
static int declarations(sim_t *s, sim_peer_t *p)
{
    for (size_t k = 0; k < s->npending; k++) {
        sim_item_t *it = &s->items[s->pending[k]];
        if (!GOING(it->kind) || it->first >= 0)
            continue;
        const rumor_swim_member_t *r = rumor_swim_find(p->sw, it->id);
        if (r && r->state >= RUMOR_SWIM_DEAD) {
            it->first = s->now - it->t0;
            RUMOR_CHECK(add_time(&s->res.detections, &s->res.ndetections, &s->cap_detect, s->now));
        }
    }
    for (size_t a = 0; a < s->nalive; a++) {
        sim_peer_t *q = s->peers[s->alive[a]];
        if (q == p)
            continue;
        const rumor_swim_member_t *r = rumor_swim_find(p->sw, q->id);
        if (r && r->state == RUMOR_SWIM_DEAD && r->since == s->now)
            s->res.false_positives++;
    }
    return 0;
}

int sim_watch_peer(sim_t *s, sim_peer_t *p)
{
    rumor_swim_stats_t st;
    rumor_swim_stats(p->sw, &st);
    s->res.suspicions += st.suspected - p->suspected_seen;
    p->suspected_seen = st.suspected;
    if (st.declared_dead != p->dead_seen) {
        p->dead_seen = st.declared_dead;
        RUMOR_CHECK(declarations(s, p));
    }
    uint64_t v = rumor_swim_view_version(p->sw);
    if (v == p->vseen)
        return 0;
    p->vseen = v;
    if (p->join_item >= 0) {
        sim_item_t *me = &s->items[p->join_item];
        if (me->own < 0 && (double)rumor_swim_view(p->sw, NULL, 0) >= 0.9 * (double)s->nalive)
            me->own = s->now - me->t0;
        if (me->own >= 0)
            p->join_item = -1;
    }
    if (p->watch_slot < 0)
        return 0;
    for (size_t k = s->npending; k-- > 0;) {
        sim_item_t *it = &s->items[s->pending[k]];
        if (p->idx < it->limit && !bit_get(it, p->watch_slot)) {
            const rumor_swim_member_t *r = rumor_swim_find(p->sw, it->id);
            int seen = GOING(it->kind) ? !r || r->state >= RUMOR_SWIM_DEAD
                                               : r && r->state <= RUMOR_SWIM_SUSPECT;
            if (seen) {
                RUMOR_CHECK(bit_set(it, p->watch_slot));
                it->count++;
                if (GOING(it->kind) && it->first < 0 && r) { /* LEFT, told directly */
                    it->first = s->now - it->t0;
                    RUMOR_CHECK(
                        add_time(&s->res.detections, &s->res.ndetections, &s->cap_detect, s->now));
                }
            }
        }
        if (item_check(s, it))
            pending_drop(s, k);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Coverage of p's view: live members / live peers; *stale gets the view's
 * members that are no longer running. */
static double coverage(sim_t *s, const sim_peer_t *p, size_t *n_out, int *stale)
{
    if (!s->vbuf) {
        s->vcap = (size_t)(s->cfg.max_members > 0 ? s->cfg.max_members : 4096);
        s->vbuf = malloc(s->vcap * sizeof *s->vbuf);
        if (!s->vbuf)
            return -1;
    }
    size_t n = rumor_swim_view(p->sw, s->vbuf, s->vcap), live = 0;
    if (n > s->vcap)
        n = s->vcap;
    for (size_t i = 0; i < n; i++) {
        int j = sim_peer_by_id(s, s->vbuf[i].id);
        live += j >= 0 && s->peers[j]->alive;
    }
    *n_out = n;
    *stale = (int)(n - live);
    return (double)live / (double)s->nalive;
}

int sim_watch_sample(sim_t *s)
{
    RUMOR_CHECK(sim_grow((void **)&s->res.curve, &s->cap_curve, (size_t)s->res.ncurve + 1,
                     sizeof *s->res.curve));
    sim_point_t *pt = &s->res.curve[s->res.ncurve++];
    pt->t = s->now;
    pt->live = (int)s->nalive;
    pt->cov_median = pt->cov_min = 0;
    pt->cons_mean = s->cfg.rounds ? sim_round_consensus(s) : -1;
    int all = 0;
    pt->spread = s->cfg.rounds ? sim_round_spread(s, &all) : -1;
    if (s->cfg.target > 0 && all && pt->spread >= 0 && pt->spread < s->cfg.target &&
        s->now >= s->t_churn && !(s->res.target_s >= 0))
        s->res.target_s = s->now - s->t_churn;
    if (pt->spread >= 0 && s->now >= sim_steady_from(s) && s->now < sim_steady_end(s)) {
        s->win_spread2 += pt->spread * pt->spread;
        s->win_spread_n++;
    }
    double c[64];
    int m = 0;
    size_t stride = s->nalive > 64 ? s->nalive / 64 : 1; /* at most 64 peers a point */
    for (size_t a = 0; a < s->nalive && m < 64; a += stride) {
        size_t n;
        int stale;
        c[m] = coverage(s, s->peers[s->alive[a]], &n, &stale);
        if (c[m] < 0)
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
        m++;
    }
    if (m) {
        qsort(c, (size_t)m, sizeof *c, cmp_double);
        pt->cov_median = c[m / 2];
        pt->cov_min = c[0];
    }
    return 0;
}

sim_dist_t sim_dist(double *v, int n, int missing)
{
    sim_dist_t d = { .n = n, .missing = missing };
    if (n == 0) {
        d.mean = d.p50 = d.p90 = d.max = NAN;
        return d;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    d.mean = sum / n;
    d.p50 = v[(n - 1) / 2];
    d.p90 = v[(int)ceil(0.9 * n) - 1];
    d.max = v[n - 1];
    return d;
}

/* The figures of one measure over the items of a kind. */
static sim_dist_t measure(sim_t *s, double *tmp, int kind, size_t field)
{
    int n = 0, missing = 0;
    for (size_t i = 0; i < s->nitems; i++) {
        const sim_item_t *it = &s->items[i];
        if (it->kind != kind || it->pending < 0)
            continue;
        double t = *(const double *)((const char *)it + field);
        if (t >= 0)
            tmp[n++] = t;
        else
            missing++;
    }
    return sim_dist(tmp, n, missing);
}

static void read_rss(long *rss, long *hwm)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *rss = *hwm = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmRSS:", 6))
            *rss = strtol(line + 6, NULL, 10);
        if (!strncmp(line, "VmHWM:", 6))
            *hwm = strtol(line + 6, NULL, 10);
    }
    if (f)
        fclose(f);
}

int sim_watch_finish(sim_t *s)
{
    sim_result_t *r = &s->res;
    size_t cnt = s->nitems > s->npeers ? s->nitems : s->npeers;
    double *tmp = malloc((cnt + 1) * sizeof *tmp);
    if (!tmp)
        return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
    r->detect_first = measure(s, tmp, ITEM_DEPART, offsetof(sim_item_t, first));
    r->gone_half = measure(s, tmp, ITEM_DEPART, offsetof(sim_item_t, half));
    r->gone_all = measure(s, tmp, ITEM_DEPART, offsetof(sim_item_t, all));
    r->leave_first = measure(s, tmp, ITEM_LEAVE, offsetof(sim_item_t, first));
    r->leave_all = measure(s, tmp, ITEM_LEAVE, offsetof(sim_item_t, all));
    r->join_half = measure(s, tmp, ITEM_JOIN, offsetof(sim_item_t, half));
    r->join_all = measure(s, tmp, ITEM_JOIN, offsetof(sim_item_t, all));
    r->join_own90 = measure(s, tmp, ITEM_JOIN, offsetof(sim_item_t, own));
    r->churn_half = measure(s, tmp, ITEM_CHURN_JOIN, offsetof(sim_item_t, half));
    r->churn_all = measure(s, tmp, ITEM_CHURN_JOIN, offsetof(sim_item_t, all));
    r->churn_own90 = measure(s, tmp, ITEM_CHURN_JOIN, offsetof(sim_item_t, own));

    /* traffic per peer, over peers that ran long enough for a rate */
    int n = 0;
    double msum = 0, bsum = 0;
    for (size_t i = 0; i < s->npeers; i++) {
        const sim_peer_t *p = s->peers[i];
        double life = (p->alive ? s->now : p->died) - p->born;
        if (life < 5)
            continue;
        double mr = (double)p->sent / life, br = (double)p->bytes / life;
        msum += mr;
        bsum += br;
        r->msg_rate_max = mr > r->msg_rate_max ? mr : r->msg_rate_max;
        r->byte_rate_max = br > r->byte_rate_max ? br : r->byte_rate_max;
        n++;
    }
    r->msg_rate_mean = n ? msum / n : 0;
    r->byte_rate_mean = n ? bsum / n : 0;

    /* the watched live peers' views at the end */
    int m = 0;
    double stale = 0;
    for (size_t a = 0; a < s->nalive; a++) {
        const sim_peer_t *p = s->peers[s->alive[a]];
        if (p->watch_slot < 0)
            continue;
        size_t vn;
        int st;
        double c = coverage(s, p, &vn, &st);
        if (c < 0) {
            free(tmp);
            return rumor_err_set(RUMOR_ENOMEM, "sim: out of memory");
        }
        tmp[m++] = c;
        stale += st;
        r->view_max = vn > r->view_max ? vn : r->view_max;
    }
    sim_dist_t cov = sim_dist(tmp, m, 0);
    r->cov_min = m ? tmp[0] : NAN;
    r->cov_median = cov.p50;
    r->cov_max = cov.max;
    r->stale_mean = m ? stale / m : 0;
    free(tmp);

    r->live_end = (int)s->nalive;
    r->observers_end = s->nwatch_live;
    read_rss(&r->rss_kb, &r->hwm_kb);
    r->rss_per_peer_kb = s->nalive ? (double)r->rss_kb / (double)s->nalive : 0;
    r->max_members = s->cfg.max_members > 0 ? s->cfg.max_members : 4096;
    r->table_bytes = (size_t)r->max_members * sizeof(rumor_swim_member_t);
    return 0;
}

void sim_watch_free(sim_t *s)
{
    for (size_t i = 0; i < s->nitems; i++)
        free(s->items[i].bits);
    free(s->items);
    free(s->pending);
    free(s->vbuf);
}

void sim_result_free(sim_result_t *r)
{
    free(r->curve);
    free(r->deaths);
    free(r->detections);
    memset(r, 0, sizeof *r);
}
