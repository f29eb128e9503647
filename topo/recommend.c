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
#define MAX_CODECS 8

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
                    const char *network, const rumor_gossip_plan_t *plan, rumor_topo_result_t *r)
{
    rumor_analyze_opts_t ao = { .method = o->method, .eps = o->eps, .sim_rounds = -1,
                                .time_limit = o->time_limit, .progress = o->progress,
                                .progress_arg = o->progress_arg };
    return rumor_topo_result_make(t, &ao, o->model_bytes, links, network, plan, r);
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
    /* the codecs to price each candidate with */
    rumor_codec_t codecs[MAX_CODECS];
    int nc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", o.codecs && *o.codecs ? o.codecs : "none,int8,int4,topk:0.1");
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (nc == MAX_CODECS) {
            rumor_links_destroy(&links);
            return rumor_err_set(RUMOR_EINVAL, "recommend: at most %d codecs in --compress",
                                 MAX_CODECS);
        }
        if (rumor_codec_parse(tok, &codecs[nc]) < 0) {
            rumor_links_destroy(&links);
            return rumor_err_prefix(RUMOR_EINVAL, "recommend: --compress");
        }
        nc++;
    }
    int nr = ns * nc;
    rumor_topo_result_t *res = calloc((size_t)nr, sizeof *res);
    if (!res) {
        rumor_links_destroy(&links);
        return rumor_err_set(RUMOR_ENOMEM, "recommend: out of memory");
    }
    for (int i = 0; i < nr; i++) {
        rumor_topo_result_t *r = &res[i];
        const char *spec = specs[i / nc];
        rumor_gossip_plan_t plan = o.plan;
        plan.codec = codecs[i % nc];
        r->plan = plan;
        snprintf(r->spec, sizeof r->spec, "%.95s", spec);
        rumor_topo_t *t = NULL;
        if (rumor_topo_parse(spec, &t) < 0) {
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
        if (evaluate(t, &o, links, network, &plan, r) < 0) {
            char msg[140];
            snprintf(msg, sizeof msg, "%s", rumor_err_msg());
            rumor_topo_result_free(r);
            snprintf(r->spec, sizeof r->spec, "%.95s", spec);
            r->plan = plan;
            snprintf(r->note, sizeof r->note, "analysis failed: %s", msg);
        }
    }
    rumor_links_destroy(&links);
    qsort(res, (size_t)nr, sizeof *res, cmp_result);
    *out = res;
    *count = nr;
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
    double rho = rumor_gossip_plan_rho(&r->plan, a->rho, a->lambda2, a->lambda_min);
    if (a->exact_after > 0 && r->rounds == a->exact_after)
        snprintf(buf, len, "exact averaging after %d round%s; %s", a->exact_after,
                 a->exact_after > 1 ? "s" : "", bound);
    else if (r->rounds < 0)
        snprintf(buf, len, "does not mix (rho = 1)");
    else
        snprintf(buf, len, "rho %.4g needs %ld rounds; %s of %s", rho, r->rounds,
                 bound, rumor_topo_fmt_seconds(s1, sizeof s1, r->cost.round_seconds));
}

/* The best row streamed: H = F = the suggested steps, S = 1, so a step
 * sends 1/H of the model while it computes (rumor-peer --fragments). Its
 * message is H times smaller: comm = latency + (comm - latency) / H. */
static void streamed(FILE *f, const rumor_topo_result_t *x)
{
    const rumor_topo_cost_t *c = &x->cost;
    int H = c->suggested_steps;
    double lat = c->slow_lat > 0 ? c->slow_lat : 0;
    double comm = lat + (c->comm_seconds - lat) / H;
    double step = comm > c->compute_seconds ? comm : c->compute_seconds;
    char b1[32], b2[32], b3[32];
    fprintf(f, "Streamed, --local-steps %d --outer nesterov --fragments %d --overlap 1 sends "
               "1/%d of the model a step while it computes: %s a step, its largest message %s "
               "instead of %s.\n",
            H, H, H, rumor_topo_fmt_seconds(b1, sizeof b1, step),
            rumor_topo_fmt_bytes(b2, sizeof b2, c->bytes_peer_max / c->msgs_peer_max / H),
            rumor_topo_fmt_bytes(b3, sizeof b3, c->bytes_peer_max / c->msgs_peer_max));
}

void rumor_topo_print_recommend(FILE *f, const rumor_recommend_opts_t *o,
                                const rumor_topo_result_t *r, int count)
{
    char b1[32], b2[32], b3[160], b4[32], b5[32];
    double eps = o->eps > 0 && o->eps < 1 ? o->eps : 1e-6;
    int ranked = 0;
    while (ranked < count && !r[ranked].note[0])
        ranked++;
    fprintf(f, "recommend: %d peers, model %s, eps %g%s\n", o->peers,
            rumor_topo_fmt_bytes(b1, sizeof b1, o->model_bytes), eps,
            o->max_degree > 0 ? ", at most --max-degree messages a round" : "");
    if (ranked)
        fprintf(f, "network:   %s\n\n", r[0].network);
    int steps = 0; /* a compute time is known: suggest local steps */
    for (int i = 0; i < ranked; i++)
        steps |= r[i].cost.suggested_steps > 0;
    int cw = 10; /* the codec column: as wide as its widest name */
    for (int i = 0; i < ranked; i++) {
        char codec[48];
        rumor_codec_format(&r[i].plan.codec, codec, sizeof codec);
        cw = (int)strlen(codec) > cw ? (int)strlen(codec) : cw;
    }
    fprintf(f, "%4s  %-20s %-*s %5s %11s %7s %10s %10s %10s", "rank", "spec", cw, "codec", "msgs",
            "rho", "rounds", "sent/peer", "per round", "to eps");
    if (steps)
        fprintf(f, " %5s %10s", "H", "per step");
    fprintf(f, "  %s\n", "why");
    for (int i = 0; i < ranked; i++) {
        const rumor_topo_result_t *x = &r[i];
        char rho[32], codec[48];
        rumor_codec_format(&x->plan.codec, codec, sizeof codec);
        if (x->an.exact_after > 0 && x->rounds == x->an.exact_after)
            snprintf(rho, sizeof rho, "exact");
        else
            snprintf(rho, sizeof rho, "%.8f",
                     rumor_gossip_plan_rho(&x->plan, x->an.rho, x->an.lambda2, x->an.lambda_min));
        why(b3, sizeof b3, x);
        fprintf(f, "%4d  %-20s %-*s %5d %11s %7ld %10s %10s %10s", i + 1, x->spec, cw, codec,
                x->cost.msgs_peer_max, rho, x->rounds,
                rumor_topo_fmt_bytes(b4, sizeof b4, x->cost.bytes_peer_max),
                rumor_topo_fmt_seconds(b1, sizeof b1, x->cost.round_seconds),
                rumor_topo_fmt_seconds(b2, sizeof b2, x->cost.seconds_to_eps));
        if (steps) {
            int h = x->plan.local_steps > 1 ? x->plan.local_steps : x->cost.suggested_steps;
            double st = x->cost.fragments > 1 || x->cost.overlap > 0
                            ? x->cost.step_seconds /* streamed: priced as given */
                            : rumor_topo_step_seconds(&x->cost, h);
            fprintf(f, " %5d %10s", h, rumor_topo_fmt_seconds(b5, sizeof b5, st));
        }
        fprintf(f, "  %s\n", b3);
    }
    if (ranked) {
        const rumor_topo_result_t *x = &r[0];
        char codec[48];
        rumor_codec_format(&x->plan.codec, codec, sizeof codec);
        fprintf(f, "\nbest: %s with --compress %s reaches eps = %g in %s: %ld rounds of %s, each "
                   "peer sending %d message%s (%s) a round.\n",
                x->spec, codec, eps, rumor_topo_fmt_seconds(b1, sizeof b1, x->cost.seconds_to_eps),
                x->rounds, rumor_topo_fmt_seconds(b2, sizeof b2, x->cost.round_seconds),
                x->cost.msgs_peer_max, x->cost.msgs_peer_max == 1 ? "" : "s",
                rumor_topo_fmt_bytes(b3, sizeof b3, x->cost.bytes_peer_max));
        if (x->cost.suggested_steps > 1 && x->plan.local_steps <= 1)
            fprintf(f, "Its communication hides behind compute with --local-steps %d (%s a "
                       "step instead of %s).\n",
                    x->cost.suggested_steps,
                    rumor_topo_fmt_seconds(b1, sizeof b1,
                                           rumor_topo_step_seconds(&x->cost,
                                                                   x->cost.suggested_steps)),
                    rumor_topo_fmt_seconds(b2, sizeof b2, x->cost.round_seconds));
        if (x->cost.suggested_steps > 1 && x->plan.local_steps <= 1 && x->plan.fragments <= 1)
            streamed(f, x);
        if (ranked > 1) {
            const rumor_topo_result_t *y = &r[1];
            rumor_codec_format(&y->plan.codec, codec, sizeof codec);
            fprintf(f, "next: %s with %s takes %s (%ld rounds of %s).\n", y->spec, codec,
                    rumor_topo_fmt_seconds(b1, sizeof b1, y->cost.seconds_to_eps), y->rounds,
                    rumor_topo_fmt_seconds(b2, sizeof b2, y->cost.round_seconds));
        }
        fprintf(f, "The same spec and codec run unchanged in rumor-peer (--topology, --compress).\n");
    }
    if (ranked < count) {
        fprintf(f, "\nnot ranked:\n");
        for (int i = ranked; i < count; i++)
            if (i == ranked || strcmp(r[i].spec, r[i - 1].spec) != 0) /* once, not per codec */
                fprintf(f, "      %-22s %s\n", r[i].spec, r[i].note);
    }
}
