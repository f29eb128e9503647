/* The link file and the per-round cost model (see cost.h). */
#include "config.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "topo_text.h"

#define MAX_SITES 256
#define MAX_LINKS (1L << 24)

typedef struct {
    int a, b; /* a < b */
    double bw, lat;
} plink_t;

struct rumor_links {
    int n;
    double def_bw, def_lat, compute;
    double *nic;   /* (n) bytes/s, INFINITY = unlimited */
    int *site;     /* (n) site index or -1 */
    int nsites;
    char (*sname)[64];
    double *sbw, *slat; /* (nsites^2) NAN = not given */
    plink_t *pl;
    long npl, cappl;
};

void rumor_links_destroy(rumor_links_t **lp)
{
    if (!lp || !*lp)
        return;
    rumor_links_t *l = *lp;
    free(l->nic), free(l->site), free(l->sname), free(l->sbw), free(l->slat), free(l->pl);
    free(l);
    *lp = NULL;
}

static rumor_links_t *links_new(int n)
{
    rumor_links_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->n = n;
    l->def_bw = 10e9 / 8;
    l->def_lat = 50e-6;
    l->nic = malloc((size_t)n * sizeof *l->nic);
    l->site = malloc((size_t)n * sizeof *l->site);
    if (!l->nic || !l->site) {
        rumor_links_destroy(&l);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        l->nic[i] = INFINITY;
        l->site[i] = -1;
    }
    return l;
}

int rumor_links_default(int n, rumor_links_t **out)
{
    *out = links_new(n);
    if (!*out)
        return rumor_err_set(RUMOR_ENOMEM, "links: out of memory");
    for (int i = 0; i < n; i++)
        (*out)->nic[i] = (*out)->def_bw;
    return 0;
}

/* number + unit; `units` pairs a suffix with its factor, first match wins,
 * so longer suffixes come first. */
typedef struct {
    const char *suffix;
    double mul, div; /* value * mul / div: dividing keeps "5us" == 5e-6 exactly */
} unit_t;

static int parse_unit(const char *s, const unit_t *u, double *out)
{
    char num[64];
    size_t k = 0;
    while (s[k] && (isdigit((unsigned char)s[k]) || s[k] == '.' || s[k] == 'e' || s[k] == 'E' ||
                    ((s[k] == '-' || s[k] == '+') && k > 0 && (s[k - 1] == 'e' || s[k - 1] == 'E'))))
        k++;
    if (k == 0 || k >= sizeof num)
        return -1;
    memcpy(num, s, k);
    num[k] = 0;
    double v;
    if (rumor_topo_parse_double(num, &v) < 0 || v < 0)
        return -1;
    for (; u->suffix; u++)
        if (!strcmp(s + k, u->suffix)) {
            *out = v * u->mul / u->div;
            return isfinite(*out) ? 0 : -1;
        }
    return -1;
}

int rumor_topo_parse_bandwidth(const char *s, double *out)
{
    static const unit_t u[] = {
        { "Tbit/s", 1e12, 8 }, { "Gbit/s", 1e9, 8 }, { "Mbit/s", 1e6, 8 }, { "Kbit/s", 1e3, 8 },
        { "kbit/s", 1e3, 8 }, { "bit/s", 1.0, 8 },   { "Tbit", 1e12, 8 },  { "Gbit", 1e9, 8 },
        { "Mbit", 1e6, 8 },   { "Kbit", 1e3, 8 },    { "kbit", 1e3, 8 },   { "bit", 1.0, 8 },
        { "Tbps", 1e12, 8 },  { "Gbps", 1e9, 8 },    { "Mbps", 1e6, 8 },   { "Kbps", 1e3, 8 },
        { "TB/s", 1e12, 1 },      { "GB/s", 1e9, 1 },        { "MB/s", 1e6, 1 },       { "KB/s", 1e3, 1 },
        { "kB/s", 1e3, 1 },       { "B/s", 1, 1 },           { "TB", 1e12, 1 },        { "GB", 1e9, 1 },
        { "MB", 1e6, 1 },         { "KB", 1e3, 1 },          { "kB", 1e3, 1 },         { "B", 1, 1 },
        { NULL, 0, 1 }
    };
    if (parse_unit(s, u, out) < 0 || !(*out > 0))
        return rumor_err_set(RUMOR_EINVAL,
                             "bandwidth '%s': expected a positive number with a unit (10Gbit, "
                             "100Mbit, 1.25GB, optionally /s)",
                             s);
    return 0;
}

int rumor_topo_parse_latency(const char *s, double *out)
{
    static const unit_t u[] = { { "ns", 1, 1e9 }, { "us", 1, 1e6 }, { "ms", 1, 1e3 }, { "s", 1, 1 },
                                { NULL, 0, 1 } };
    if (parse_unit(s, u, out) < 0)
        return rumor_err_set(RUMOR_EINVAL,
                             "time '%s': expected a number with a unit (800ns, 50us, 2ms, 0.1s)", s);
    return 0;
}

int rumor_topo_parse_bytes(const char *s, double *out)
{
    static const unit_t u[] = { { "TiB", 1099511627776.0, 1 }, { "GiB", 1073741824.0, 1 },
                                { "MiB", 1048576.0, 1 }, { "KiB", 1024.0, 1 }, { "TB", 1e12, 1 },
                                { "GB", 1e9, 1 }, { "MB", 1e6, 1 }, { "KB", 1e3, 1 }, { "kB", 1e3, 1 },
                                { "T", 1e12, 1 }, { "G", 1e9, 1 }, { "M", 1e6, 1 }, { "K", 1e3, 1 },
                                { "k", 1e3, 1 }, { "B", 1, 1 }, { "", 1, 1 }, { NULL, 0, 1 } };
    if (parse_unit(s, u, out) < 0 || !(*out > 0) || *out > 1e15)
        return rumor_err_set(RUMOR_EINVAL,
                             "size '%s': expected a positive number of bytes up to 1e15, with an "
                             "optional unit (4096, 100MB, 1.5GiB)",
                             s);
    return 0;
}

/* Marks peers listed in `s` ("all", "0-15,32") in mask; -1 on bad syntax. */
static int parse_peers(const char *s, int n, unsigned char *mask)
{
    if (!strcmp(s, "all")) {
        memset(mask, 1, (size_t)n);
        return 0;
    }
    char buf[RUMOR_TOPO_LINE_MAX + 1];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long a, b;
        char *dash = strchr(t, '-');
        if (dash) {
            *dash = 0;
            if (rumor_topo_parse_long(t, 0, n - 1, &a) < 0 ||
                rumor_topo_parse_long(dash + 1, 0, n - 1, &b) < 0 || b < a)
                return -1;
        } else if (rumor_topo_parse_long(t, 0, n - 1, &a) < 0) {
            return -1;
        } else {
            b = a;
        }
        memset(mask + a, 1, (size_t)(b - a + 1));
    }
    return 0;
}

static int find_site(const rumor_links_t *l, const char *name)
{
    for (int s = 0; s < l->nsites; s++)
        if (!strcmp(l->sname[s], name))
            return s;
    return -1;
}

static int cmp_plink(const void *x, const void *y)
{
    const plink_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

#define FAIL(...)                                                                  \
    do {                                                                           \
        rc = rumor_err_set(RUMOR_EFORMAT, __VA_ARGS__);                            \
        goto out;                                                                  \
    } while (0)

int rumor_links_load(const char *path, int n, rumor_links_t **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return rumor_err_sys(RUMOR_ESYS, "%s", path);
    rumor_links_t *l = links_new(n);
    unsigned char *mask = calloc((size_t)n, 1);
    if (l)
        l->sname = calloc(MAX_SITES, sizeof *l->sname);
    if (l && l->sname) {
        l->sbw = malloc((size_t)MAX_SITES * MAX_SITES * sizeof *l->sbw);
        l->slat = malloc((size_t)MAX_SITES * MAX_SITES * sizeof *l->slat);
    }
    char buf[RUMOR_TOPO_LINE_MAX + 2], *fld[8];
    int line = 0, rc = 0;
    if (!l || !mask || !l->sname || !l->sbw || !l->slat) {
        rc = rumor_err_set(RUMOR_ENOMEM, "links: out of memory");
        goto out;
    }
    for (long k = 0; k < (long)MAX_SITES * MAX_SITES; k++)
        l->sbw[k] = l->slat[k] = NAN;
    while ((rc = rumor_topo_readline(f, buf, sizeof buf, &line, path)) > 0) {
        if (!buf[0])
            continue;
        int nf = rumor_topo_split(buf, fld, 6);
        const char *kw = fld[0];
        double bw, lat;
        rc = 0;
        if (!strcmp(kw, "default")) {
            if (nf != 3)
                FAIL("%s:%d: expected 'default BW LAT'", path, line);
            if (rumor_topo_parse_bandwidth(fld[1], &bw) < 0 || rumor_topo_parse_latency(fld[2], &lat) < 0)
                goto bad_value;
            l->def_bw = bw;
            l->def_lat = lat;
        } else if (!strcmp(kw, "nic")) {
            if (nf != 3)
                FAIL("%s:%d: expected 'nic PEERS BW'", path, line);
            memset(mask, 0, (size_t)n);
            if (parse_peers(fld[1], n, mask) < 0)
                FAIL("%s:%d: peers '%s': expected 'all' or ids/ranges in [0, %d) like 0-15,32",
                     path, line, fld[1], n);
            if (rumor_topo_parse_bandwidth(fld[2], &bw) < 0)
                goto bad_value;
            for (int i = 0; i < n; i++)
                if (mask[i])
                    l->nic[i] = bw;
        } else if (!strcmp(kw, "site")) {
            if (nf != 3)
                FAIL("%s:%d: expected 'site NAME PEERS'", path, line);
            if (find_site(l, fld[1]) >= 0)
                FAIL("%s:%d: site '%s' is defined twice", path, line, fld[1]);
            if (l->nsites == MAX_SITES || strlen(fld[1]) >= 64)
                FAIL("%s:%d: too many sites (%d) or name longer than 63", path, line, MAX_SITES);
            memset(mask, 0, (size_t)n);
            if (parse_peers(fld[2], n, mask) < 0)
                FAIL("%s:%d: peers '%s': expected 'all' or ids/ranges in [0, %d) like 0-15,32",
                     path, line, fld[2], n);
            for (int i = 0; i < n; i++)
                if (mask[i]) {
                    if (l->site[i] >= 0)
                        FAIL("%s:%d: peer %d is already in site '%s'", path, line, i,
                             l->sname[l->site[i]]);
                    l->site[i] = l->nsites;
                }
            snprintf(l->sname[l->nsites++], 64, "%s", fld[1]);
        } else if (!strcmp(kw, "intra") || !strcmp(kw, "inter")) {
            int two = kw[2] == 't' && kw[3] == 'e';
            if (nf != (two ? 5 : 4))
                FAIL("%s:%d: expected '%s'", path, line,
                     two ? "inter SITE SITE BW LAT" : "intra SITE BW LAT");
            int a = find_site(l, fld[1]), b = two ? find_site(l, fld[2]) : a;
            if (a < 0 || b < 0)
                FAIL("%s:%d: unknown site '%s' (define it with 'site' first)", path, line,
                     a < 0 ? fld[1] : fld[2]);
            if (rumor_topo_parse_bandwidth(fld[two ? 3 : 2], &bw) < 0 ||
                rumor_topo_parse_latency(fld[two ? 4 : 3], &lat) < 0)
                goto bad_value;
            l->sbw[(long)a * MAX_SITES + b] = l->sbw[(long)b * MAX_SITES + a] = bw;
            l->slat[(long)a * MAX_SITES + b] = l->slat[(long)b * MAX_SITES + a] = lat;
        } else if (!strcmp(kw, "link")) {
            long a, b;
            if (nf != 5)
                FAIL("%s:%d: expected 'link I J BW LAT'", path, line);
            if (rumor_topo_parse_long(fld[1], 0, n - 1, &a) < 0 ||
                rumor_topo_parse_long(fld[2], 0, n - 1, &b) < 0 || a == b)
                FAIL("%s:%d: link '%s %s': expected two different peer ids in [0, %d)", path,
                     line, fld[1], fld[2], n);
            if (rumor_topo_parse_bandwidth(fld[3], &bw) < 0 || rumor_topo_parse_latency(fld[4], &lat) < 0)
                goto bad_value;
            if (l->npl == l->cappl) {
                long cap = l->cappl ? 2 * l->cappl : 64;
                plink_t *np = cap <= MAX_LINKS ? realloc(l->pl, (size_t)cap * sizeof *np) : NULL;
                if (!np)
                    FAIL("%s:%d: too many link lines (at most %ld)", path, line, MAX_LINKS);
                l->pl = np;
                l->cappl = cap;
            }
            l->pl[l->npl++] = (plink_t){ (int)(a < b ? a : b), (int)(a < b ? b : a), bw, lat };
        } else if (!strcmp(kw, "compute")) {
            if (nf != 2)
                FAIL("%s:%d: expected 'compute TIME'", path, line);
            if (rumor_topo_parse_latency(fld[1], &l->compute) < 0)
                goto bad_value;
        } else {
            FAIL("%s:%d: unknown directive '%s' (expected default, nic, site, intra, inter, "
                 "link or compute)",
                 path, line, kw);
        }
        continue;
    bad_value:
        rc = rumor_err_prefix(RUMOR_EFORMAT, "%s:%d", path, line);
        goto out;
    }
    if (rc < 0)
        goto out;
    if (l->npl)
        qsort(l->pl, (size_t)l->npl, sizeof *l->pl, cmp_plink);
    for (long k = 1; k < l->npl; k++)
        if (l->pl[k].a == l->pl[k - 1].a && l->pl[k].b == l->pl[k - 1].b)
            FAIL("%s: link %d-%d is given twice", path, l->pl[k].a, l->pl[k].b);
    *out = l;
    l = NULL;
    rc = 0;
out:
    rumor_links_destroy(&l);
    free(mask);
    fclose(f);
    return rc;
}

void rumor_links_get(const rumor_links_t *l, int i, int j, double *bw, double *lat)
{
    int a = i < j ? i : j, b = i < j ? j : i;
    long lo = 0, hi = l->npl;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        const plink_t *p = &l->pl[mid];
        if (p->a == a && p->b == b) {
            *bw = p->bw;
            *lat = p->lat;
            return;
        }
        if (p->a < a || (p->a == a && p->b < b))
            lo = mid + 1;
        else
            hi = mid;
    }
    int si = l->site[i], sj = l->site[j];
    if (si >= 0 && sj >= 0 && !isnan(l->sbw[(long)si * MAX_SITES + sj])) {
        *bw = l->sbw[(long)si * MAX_SITES + sj];
        *lat = l->slat[(long)si * MAX_SITES + sj];
        return;
    }
    *bw = l->def_bw;
    *lat = l->def_lat;
}

double rumor_links_nic(const rumor_links_t *l, int i)
{
    return l->nic[i];
}

double rumor_links_compute(const rumor_links_t *l)
{
    return l->compute;
}

double rumor_gossip_plan_rho(const rumor_gossip_plan_t *plan, double rho, double lambda2,
                             double lambda_min)
{
    if (!plan || plan->codec.kind == RUMOR_CODEC_NONE)
        return rho;
    double g = rumor_gossip_plan_gamma(plan);
    if (isnan(lambda2) || isnan(lambda_min))
        return 1.0 - g * (1.0 - rho);
    double a = fabs(1.0 - g * (1.0 - lambda2)), b = fabs(1.0 - g * (1.0 - lambda_min));
    return a > b ? a : b;
}

double rumor_topo_step_seconds(const rumor_topo_cost_t *c, int h)
{
    if (h < 1)
        h = 1;
    double cp = c->compute_seconds, comm = c->comm_seconds;
    return ((h - 1) * cp + (comm > cp ? comm : cp)) / h;
}

int rumor_topo_cost(const rumor_topo_t *t, const rumor_links_t *l, double B0, long rounds,
                    const rumor_gossip_plan_t *plan, rumor_topo_cost_t *c)
{
    memset(c, 0, sizeof *c);
    c->bytes_factor = plan ? rumor_gossip_plan_bytes_factor(plan) : 1.0;
    c->local_steps = plan && plan->local_steps > 1 ? plan->local_steps : 1;
    c->fragments = plan && plan->fragments > 1 ? plan->fragments : 1;
    c->overlap = plan && plan->overlap > 0 ? plan->overlap : 0;
    int streaming = c->fragments > 1 || c->overlap > 0;
    int h = c->local_steps / c->fragments; /* a round's steps */
    if (h < 1 || c->local_steps % c->fragments || c->overlap > h)
        return rumor_err_set(RUMOR_EINVAL, "fragments %d and overlap %d do not fit %d local "
                                           "steps (F must divide H, S <= H / F)",
                             c->fragments, c->overlap, c->local_steps);
    double B = B0 * c->bytes_factor / c->fragments; /* what a message carries, on average */
    if (l->n != t->n)
        return rumor_err_set(RUMOR_EINVAL, "links describe %d peers, topology has %d", l->n, t->n);
    int n = t->n;
    int *outd = malloc((size_t)n * sizeof *outd), *ind = malloc((size_t)n * sizeof *ind);
    if (!outd || !ind) {
        free(outd), free(ind);
        return rumor_err_set(RUMOR_ENOMEM, "cost: out of memory");
    }
    c->model_bytes = B0;
    c->slow_from = c->slow_to = -1;
    double sum_round = 0, worst = -1;
    for (int k = 0; k < t->period; k++) {
        const rumor_mix_t *w = t->w[k];
        memset(outd, 0, (size_t)n * sizeof *outd);
        memset(ind, 0, (size_t)n * sizeof *ind);
        long msgs = 0;
        /* W_ij != 0: i receives from j */
        for (int i = 0; i < n; i++)
            for (long p = w->off[i]; p < w->off[i + 1]; p++)
                if (w->val[p] != 0) {
                    ind[i]++;
                    outd[w->col[p]]++;
                    msgs++;
                }
        double comm = 0;
        int sf = -1, st = -1;
        double sbw = 0, slat = 0;
        for (int i = 0; i < n; i++)
            for (long p = w->off[i]; p < w->off[i + 1]; p++) {
                if (w->val[p] == 0)
                    continue;
                int j = w->col[p];
                double bw, lat;
                rumor_links_get(l, j, i, &bw, &lat);
                double b = bw, nj = l->nic[j] / outd[j], ni = l->nic[i] / ind[i];
                b = nj < b ? nj : b;
                b = ni < b ? ni : b;
                double tm = lat + B / b;
                if (tm > comm) {
                    comm = tm, sf = j, st = i, sbw = b, slat = lat;
                }
            }
        double round;
        if (streaming) /* H/F - S steps, then the fragment away while S more run */
            round = (h - c->overlap) * l->compute +
                    (comm > c->overlap * l->compute ? comm : c->overlap * l->compute);
        else
            round = (c->local_steps - 1) * l->compute + (comm > l->compute ? comm : l->compute);
        sum_round += round;
        int mo = 0;
        double nic = 0;
        for (int i = 0; i < n; i++) {
            mo = outd[i] > mo ? outd[i] : mo;
            double x = (outd[i] > ind[i] ? outd[i] : ind[i]) * B;
            nic = x > nic ? x : nic;
        }
        c->msgs_peer_max = mo > c->msgs_peer_max ? mo : c->msgs_peer_max;
        c->bytes_peer_max = mo * B > c->bytes_peer_max ? mo * B : c->bytes_peer_max;
        c->bytes_nic_max = nic > c->bytes_nic_max ? nic : c->bytes_nic_max;
        c->bytes_peer_mean += (double)msgs * B / n / t->period;
        c->bytes_total += (double)msgs * B / t->period;
        if (msgs)
            c->bytes_link_max = B;
        if (round > worst) {
            worst = round;
            c->comm_seconds = comm;
            c->slow_from = sf, c->slow_to = st, c->slow_bw = sbw, c->slow_lat = slat;
        }
    }
    c->round_seconds = sum_round / t->period;
    c->step_seconds = c->round_seconds / (streaming ? h : c->local_steps);
    c->compute_seconds = l->compute;
    if (l->compute > 0) /* H such that H computes cover the communication */
        c->suggested_steps = c->comm_seconds <= l->compute ? 1 : (int)ceil(c->comm_seconds / l->compute);
    if (rounds < 0)
        c->seconds_to_eps = INFINITY;
    else {
        /* whole periods at the mean, then the rounds of a partial one */
        c->seconds_to_eps = (double)rounds * c->fragments * c->round_seconds;
    }
    free(outd), free(ind);
    return 0;
}
