/* `rumor-topo recommend`: build the usual candidate topologies for n peers,
 * predict each one's time to eps-consensus on the described network, and
 * rank them (see report.h).
 *
 * The ring, torus, hypercube, exponential and complete graphs get their
 * closed-form spectra from rumor_topo_analyze (closedform.h): a 65,536-peer
 * ring has a gap of 1e-8, which no Lanczos run resolves in reasonable time,
 * and the formulas are exact. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define MAX_CANDIDATES 32

/* Messages a peer sends in its busiest round. */
static int round_degree(const rumor_topo_t *t)
{
    int d = 0;
    for (int k = 0; k < t->period; k++)
        for (int i = 0; i < t->n; i++) {
            int c = rumor_topo_out_neighbors(t, i, k, NULL, NULL, 0);
            d = c > d ? c : d;
        }
    return d;
}

/* Analyzes one candidate into r (rumor_topo_analyze takes the closed form
 * where the candidate has one). */
static int evaluate(rumor_topo_t *t, const rumor_recommend_opts_t *o, const rumor_links_t *links,
                    const char *network, rumor_topo_result_t *r)
{
    rumor_analyze_opts_t ao = { .method = o->method, .eps = o->eps, .sim_rounds = -1,
                                .time_limit = o->time_limit, .progress = o->progress,
                                .progress_arg = o->progress_arg };
    return rumor_topo_result_make(t, &ao, o->model_bytes, links, network, r);
}

static int cmp_result(const void *x, const void *y)
{
    const rumor_topo_result_t *a = x, *b = y;
    if (!!a->note[0] != !!b->note[0])
        return a->note[0] ? 1 : -1;
    if (a->note[0])
        return strcmp(a->spec, b->spec);
    double ta = a->cost.seconds_to_eps, tb = b->cost.seconds_to_eps;
    if (ta != tb)
        return ta < tb ? -1 : 1;
    if (a->cost.bytes_peer_max != b->cost.bytes_peer_max)
        return a->cost.bytes_peer_max < b->cost.bytes_peer_max ? -1 : 1;
    return strcmp(a->spec, b->spec);
}

int rumor_topo_recommend(const rumor_recommend_opts_t *oin, rumor_topo_result_t **out, int *count)
{
    *out = NULL;
    *count = 0;
    rumor_recommend_opts_t o = *oin;
    if (o.eps <= 0 || o.eps >= 1)
        o.eps = 1e-6;
    int n = o.peers;
    if (n < 2 || n > RUMOR_TOPO_MAX_NODES)
        return rumor_err_set(RUMOR_EINVAL, "recommend: --peers %d is outside [2, %d]", n,
                             RUMOR_TOPO_MAX_NODES);
    if (!(o.model_bytes > 0))
        return rumor_err_set(RUMOR_EINVAL, "recommend: --model-bytes must be positive");
    rumor_links_t *links = NULL;
    char network[160];
    if (o.links_path) {
        RUMOR_CHECK(rumor_links_load(o.links_path, n, &links));
        snprintf(network, sizeof network, "links from %.140s", o.links_path);
    } else {
        RUMOR_CHECK(rumor_links_default(n, &links));
        snprintf(network, sizeof network, "default network: 10 Gbit/s links and NICs, 50 us");
    }
    char specs[MAX_CANDIDATES][96];
    int ns = 0;
#define ADD(...) snprintf(specs[ns++], sizeof specs[0], __VA_ARGS__)
    ADD("ring:%d", n);
    for (int r = (int)sqrt((double)n); r >= 3; r--)
        if (n % r == 0 && n / r >= 3) {
            ADD("torus:%dx%d", r, n / r);
            break;
        }
    if ((n & (n - 1)) == 0 && n >= 4)
        ADD("hypercube:%d", __builtin_ctz((unsigned)n));
    ADD("exp:%d", n);
    ADD("exp:%d:directed", n);
    ADD("onepeer-exp:%d", n);
    for (int k = 1; k <= 4 && k < n; k++)
        ADD("base:%d:%d", n, k);
    static const int rdeg[] = { 3, 4, 6, 8 };
    for (int i = 0; i < 4; i++)
        if (rdeg[i] < n && (long)n * rdeg[i] % 2 == 0)
            ADD("rreg:%d:%d:seed=1", n, rdeg[i]);
    if (n <= 4096)
        ADD("complete:%d", n);
    ADD("star:%d", n);
#undef ADD
    rumor_topo_result_t *res = calloc((size_t)ns, sizeof *res);
    if (!res) {
        rumor_links_destroy(&links);
        return rumor_err_set(RUMOR_ENOMEM, "recommend: out of memory");
    }
    for (int i = 0; i < ns; i++) {
        rumor_topo_result_t *r = &res[i];
        snprintf(r->spec, sizeof r->spec, "%.95s", specs[i]);
        rumor_topo_t *t = NULL;
        if (rumor_topo_parse(specs[i], &t) < 0) {
            snprintf(r->note, sizeof r->note, "not available: %.140s", rumor_err_msg());
            continue;
        }
        int d = round_degree(t);
        if (o.max_degree > 0 && d > o.max_degree) {
            snprintf(r->note, sizeof r->note, "sends %d messages a round > --max-degree %d", d,
                     o.max_degree);
            rumor_topo_destroy(&t);
            continue;
        }
        if (evaluate(t, &o, links, network, r) < 0) {
            char msg[140];
            snprintf(msg, sizeof msg, "%s", rumor_err_msg());
            rumor_topo_result_free(r);
            snprintf(r->spec, sizeof r->spec, "%.95s", specs[i]);
            snprintf(r->note, sizeof r->note, "analysis failed: %s", msg);
        }
    }
    rumor_links_destroy(&links);
    qsort(res, (size_t)ns, sizeof *res, cmp_result);
    *out = res;
    *count = ns;
    return 0;
}

/* A few words on why a candidate lands where it does. */
static void why(char *buf, size_t len, const rumor_topo_result_t *r)
{
    const rumor_topo_analysis_t *a = &r->an;
    char s1[32];
    const char *bound = r->cost.comm_seconds < r->cost.round_seconds * (1 - 1e-9)
                            ? "compute-bound rounds"
                            : "communication-bound rounds";
    if (a->exact_after > 0)
        snprintf(buf, len, "exact averaging after %d round%s; %s", a->exact_after,
                 a->exact_after > 1 ? "s" : "", bound);
    else if (a->rounds_to_eps < 0)
        snprintf(buf, len, "does not mix (rho = 1)");
    else
        snprintf(buf, len, "rho %.4g needs %ld rounds; %s of %s", a->rho, a->rounds_to_eps,
                 bound, rumor_topo_fmt_seconds(s1, sizeof s1, r->cost.round_seconds));
}

void rumor_topo_print_recommend(FILE *f, const rumor_recommend_opts_t *o,
                                const rumor_topo_result_t *r, int count)
{
    char b1[32], b2[32], b3[160];
    double eps = o->eps > 0 && o->eps < 1 ? o->eps : 1e-6;
    int ranked = 0;
    while (ranked < count && !r[ranked].note[0])
        ranked++;
    fprintf(f, "recommend: %d peers, model %s, eps %g%s\n", o->peers,
            rumor_topo_fmt_bytes(b1, sizeof b1, o->model_bytes), eps,
            o->max_degree > 0 ? ", at most --max-degree messages a round" : "");
    if (ranked)
        fprintf(f, "network:   %s\n\n", r[0].network);
    fprintf(f, "%4s  %-22s %6s %12s %8s %10s %10s  %s\n", "rank", "spec", "msgs", "rho", "rounds",
            "per round", "to eps", "why");
    for (int i = 0; i < ranked; i++) {
        const rumor_topo_result_t *x = &r[i];
        char rho[32];
        if (x->an.exact_after > 0)
            snprintf(rho, sizeof rho, "exact");
        else
            snprintf(rho, sizeof rho, "%.8f", x->an.rho);
        why(b3, sizeof b3, x);
        fprintf(f, "%4d  %-22s %6d %12s %8ld %10s %10s  %s\n", i + 1, x->spec, x->cost.msgs_peer_max,
                rho, x->an.rounds_to_eps,
                rumor_topo_fmt_seconds(b1, sizeof b1, x->cost.round_seconds),
                rumor_topo_fmt_seconds(b2, sizeof b2, x->cost.seconds_to_eps), b3);
    }
    if (ranked) {
        const rumor_topo_result_t *x = &r[0];
        fprintf(f, "\nbest: %s reaches eps = %g in %s: %ld rounds of %s, each peer sending %d "
                   "message%s (%s) a round.\n",
                x->spec, eps, rumor_topo_fmt_seconds(b1, sizeof b1, x->cost.seconds_to_eps),
                x->an.rounds_to_eps, rumor_topo_fmt_seconds(b2, sizeof b2, x->cost.round_seconds),
                x->cost.msgs_peer_max, x->cost.msgs_peer_max == 1 ? "" : "s",
                rumor_topo_fmt_bytes(b3, sizeof b3, x->cost.bytes_peer_max));
        if (ranked > 1) {
            const rumor_topo_result_t *y = &r[1];
            fprintf(f, "next: %s takes %s (%ld rounds of %s).\n", y->spec,
                    rumor_topo_fmt_seconds(b1, sizeof b1, y->cost.seconds_to_eps),
                    y->an.rounds_to_eps,
                    rumor_topo_fmt_seconds(b2, sizeof b2, y->cost.round_seconds));
        }
        fprintf(f, "The same spec string runs unchanged in rumor-peer.\n");
    }
    if (ranked < count) {
        fprintf(f, "\nnot ranked:\n");
        for (int i = ranked; i < count; i++)
            fprintf(f, "      %-22s %s\n", r[i].spec, r[i].note);
    }
}
