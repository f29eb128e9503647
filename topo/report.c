/* Text, JSON and graphviz output of analyses (see report.h). */
#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

int rumor_topo_result_make(rumor_topo_t *t, const rumor_analyze_opts_t *o, double model_bytes,
                           const rumor_links_t *links, const char *network,
                           const rumor_gossip_plan_t *plan, rumor_topo_result_t *r)
{
    memset(r, 0, sizeof *r);
    if (plan)
        r->plan = *plan;
    r->topo = t;
    snprintf(r->spec, sizeof r->spec, "%s", t->spec);
    RUMOR_CHECK(rumor_topo_analyze(t, o, &r->an));
    if (model_bytes > 0) {
        rumor_links_t *def = NULL;
        if (!links) {
            RUMOR_CHECK(rumor_links_default(t->n, &def));
            links = def;
            network = "default network: 10 Gbit/s links and NICs, 50 us";
        }
        long rounds = r->an.rounds_to_eps;
        if (plan && plan->codec.kind != RUMOR_CODEC_NONE &&
            !(r->an.exact_after > 0 && rumor_gossip_plan_gamma(plan) >= 1))
            rounds = rumor_topo_rounds_to_eps(rumor_gossip_plan_rho(plan, r->an.rho,
                                                                    r->an.lambda2,
                                                                    r->an.lambda_min),
                                              r->an.eps);
        r->rounds = rounds;
        int rc = rumor_topo_cost(t, links, model_bytes, rounds, plan, &r->cost);
        rumor_links_destroy(&def);
        RUMOR_CHECK(rc);
        r->has_cost = 1;
        snprintf(r->network, sizeof r->network, "%s", network ? network : "");
    }
    return 0;
}

void rumor_topo_result_free(rumor_topo_result_t *r)
{
    if (!r)
        return;
    rumor_topo_analysis_free(&r->an);
    rumor_topo_destroy(&r->topo);
}

const char *rumor_topo_fmt_bytes(char *buf, size_t len, double b)
{
    static const char *const u[] = { "B", "KB", "MB", "GB", "TB", "PB" };
    int k = 0;
    while (b >= 1000 && k < 5) {
        b /= 1000;
        k++;
    }
    snprintf(buf, len, k ? "%.3g %s" : "%.0f %s", b, u[k]);
    return buf;
}

const char *rumor_topo_fmt_seconds(char *buf, size_t len, double s)
{
    if (!isfinite(s))
        snprintf(buf, len, "never");
    else if (s < 1e-3)
        snprintf(buf, len, "%.3g us", s * 1e6);
    else if (s < 1)
        snprintf(buf, len, "%.3g ms", s * 1e3);
    else if (s < 120)
        snprintf(buf, len, "%.3g s", s);
    else if (s < 7200)
        snprintf(buf, len, "%.3g min", s / 60);
    else if (s < 3 * 86400)
        snprintf(buf, len, "%.3g h", s / 3600);
    else
        snprintf(buf, len, "%.3g days", s / 86400);
    return buf;
}

static const char *scheme_long(rumor_mix_scheme s)
{
    switch (s) {
    case RUMOR_MIX_MH: return "Metropolis-Hastings (mh)";
    case RUMOR_MIX_MAXDEG: return "max-degree, 1/(1+d_max) (maxdeg)";
    case RUMOR_MIX_UNIFORM: return "uniform, 1/(1+d) (uniform)";
    case RUMOR_MIX_BESTCONST: return "best constant edge weight (bestconst)";
    case RUMOR_MIX_FMMC: return "fastest mixing Markov chain (fmmc)";
    case RUMOR_MIX_FILE: return "the user's weights (file)";
    case RUMOR_MIX_NATIVE: return "fixed by the construction";
    }
    return "?";
}

/* rounds to 1e-6, whatever eps the analysis used */
static long rounds_1e6(const rumor_topo_analysis_t *a)
{
    return rumor_topo_analysis_rounds(a, 1e-6);
}

void rumor_topo_print_report(FILE *f, const rumor_topo_result_t *r)
{
    const rumor_topo_t *t = r->topo;
    const rumor_topo_analysis_t *a = &r->an;
    char b1[32], b2[32], b3[32];
    fprintf(f, "topology  %s\n", t->spec);
    fprintf(f, "  what          %s\n", t->desc);
    fprintf(f, "  peers         %d\n", a->n);
    fprintf(f, "  links         %ld%s, degree %d..%d (mean %.2f)\n", a->edges,
            a->period > 1 ? " (union over a period)" : "", a->degree_min, a->degree_max,
            a->degree_mean);
    fprintf(f, "  weights       %s, %s, doubly stochastic\n", scheme_long(t->scheme),
            a->symmetric ? "symmetric" : "not symmetric");
    if (a->period > 1)
        fprintf(f, "  period        %d rounds (round k uses matrix k mod %d)\n", a->period,
                a->period);
    if (a->neg_diag)
        fprintf(f, "  note          %d peers have negative self-weights (allowed for averaging)\n",
                a->neg_diag);
    fprintf(f, "spectrum  %s, %.3f s", a->method, a->seconds);
    if (a->matvecs)
        fprintf(f, ", %ld operator products", a->matvecs);
    fprintf(f, "\n");
    if (!isnan(a->lambda2)) {
        fprintf(f, "  lambda_2      %.12f\n", a->lambda2);
        fprintf(f, "  lambda_n      %.12f\n", a->lambda_min);
        fprintf(f, "  rho           %.12f   max(|lambda_2|, |lambda_n|)\n", a->rho);
    } else {
        fprintf(f, "  contraction   %.12g   ||W_%d...W_1 - 11^T/n||_2 over one %s\n",
                a->contraction, a->period, a->period > 1 ? "period" : "round");
        fprintf(f, "  rho           %.12f   per round%s\n", a->rho,
                a->period > 1 ? " (contraction^(1/period))" : "");
    }
    fprintf(f, "  spectral gap  %.6g   1 - rho\n", a->spectral_gap);
    fprintf(f, "consensus (eps = %g)\n", a->eps);
    if (a->exact_after > 0)
        fprintf(f, "  rounds        %ld   exact averaging after %d round%s\n", a->rounds_to_eps,
                a->exact_after, a->exact_after > 1 ? "s" : "");
    else if (a->rounds_to_eps < 0)
        fprintf(f, "  rounds        never (rho = 1: the weights do not mix)\n");
    else
        fprintf(f, "  rounds        %ld   ~ log(1/eps) / log(1/rho)\n", a->rounds_to_eps);
    if (a->sim_rounds > 0)
        fprintf(f,
                "  simulated     error %.3g after %d rounds from a random vector; measured "
                "%.6f/round vs predicted %.6f\n",
                a->sim_err[a->sim_rounds], a->sim_rounds, a->sim_rate, a->rho);
    if (!r->has_cost)
        return;
    const rumor_topo_cost_t *c = &r->cost;
    const rumor_gossip_plan_t *p = &r->plan;
    if (p->codec.kind != RUMOR_CODEC_NONE || c->local_steps > 1 || c->overlap > 0) {
        char codec[48];
        rumor_codec_format(&p->codec, codec, sizeof codec);
        fprintf(f, "gossip plan\n");
        if (p->codec.kind != RUMOR_CODEC_NONE) {
            fprintf(f, "  codec         %s: %.2fx fewer bytes than f32, keyframes every %d rounds: "
                       "%.3f of f32's bytes a round\n",
                    codec, rumor_codec_ratio(&p->codec), rumor_gossip_plan_keyframe(p),
                    c->bytes_factor);
            double rho = rumor_gossip_plan_rho(p, a->rho, a->lambda2, a->lambda_min);
            fprintf(f, "  consensus     step gamma %.3g: rate %.8f a round, ", rumor_gossip_plan_gamma(p),
                    rho);
            if (r->rounds < 0)
                fprintf(f, "never reaches eps\n");
            else
                fprintf(f, "%ld rounds to eps\n", r->rounds);
        }
        if (c->local_steps > 1 && c->fragments == 1 && c->overlap == 0)
            fprintf(f, "  local steps   %d optimizer steps a round\n", c->local_steps);
        else if (c->local_steps > 1 || c->overlap > 0)
            fprintf(f, "  streaming     %d fragment%s, one a round of %d steps (%d of them while "
                       "it is in flight); each every %d steps, %d rounds a consensus round\n",
                    c->fragments, c->fragments == 1 ? "" : "s", c->local_steps / c->fragments,
                    c->overlap, c->local_steps, c->fragments);
    }
    fprintf(f, "traffic (model %s, per round)\n",
            rumor_topo_fmt_bytes(b1, sizeof b1, c->model_bytes));
    fprintf(f, "  per peer      %s sent by the busiest peer (%d message%s), %s on average\n",
            rumor_topo_fmt_bytes(b1, sizeof b1, c->bytes_peer_max), c->msgs_peer_max,
            c->msgs_peer_max == 1 ? "" : "s",
            rumor_topo_fmt_bytes(b2, sizeof b2, c->bytes_peer_mean));
    fprintf(f, "  busiest link  %s one way; busiest NIC %s\n",
            rumor_topo_fmt_bytes(b1, sizeof b1, c->bytes_link_max),
            rumor_topo_fmt_bytes(b2, sizeof b2, c->bytes_nic_max));
    fprintf(f, "  all links     %s\n", rumor_topo_fmt_bytes(b1, sizeof b1, c->bytes_total));
    fprintf(f, "time (%s)\n", r->network);
    fprintf(f, "  per round     %s", rumor_topo_fmt_seconds(b1, sizeof b1, c->round_seconds));
    if (c->slow_from >= 0)
        fprintf(f, ", set by %d -> %d at %s/s effective, %s latency", c->slow_from, c->slow_to,
                rumor_topo_fmt_bytes(b2, sizeof b2, c->slow_bw),
                rumor_topo_fmt_seconds(b3, sizeof b3, c->slow_lat));
    if (c->comm_seconds < c->round_seconds * (1 - 1e-12) && a->period == 1)
        fprintf(f, " (compute-bound)");
    fprintf(f, "\n");
    if (c->local_steps > 1 || c->compute_seconds > 0)
        fprintf(f, "  per step      %s (%d step%s a round)\n",
                rumor_topo_fmt_seconds(b1, sizeof b1, c->step_seconds),
                c->local_steps / c->fragments, c->local_steps / c->fragments == 1 ? "" : "s");
    if (c->suggested_steps > 1 && c->local_steps < c->suggested_steps)
        fprintf(f, "  local steps   --local-steps %d hides the communication behind compute: %s "
                   "a step\n",
                c->suggested_steps,
                rumor_topo_fmt_seconds(b1, sizeof b1,
                                       rumor_topo_step_seconds(c, c->suggested_steps)));
    fprintf(f, "  to eps        %s\n", rumor_topo_fmt_seconds(b1, sizeof b1, c->seconds_to_eps));
}

void rumor_topo_print_compare(FILE *f, const rumor_topo_result_t *r, int count)
{
    int w = 10;
    for (int i = 0; i < count; i++)
        w = (int)strlen(r[i].spec) > w ? (int)strlen(r[i].spec) : w;
    int cost = 0;
    for (int i = 0; i < count; i++)
        cost |= r[i].has_cost;
    fprintf(f, "%-*s %8s %9s %7s %14s %12s %11s", w, "spec", "peers", "links", "degree", "rho",
            "gap", "rounds");
    if (cost)
        fprintf(f, " %11s %10s %11s", "sent/peer", "per round", "to eps");
    fprintf(f, "\n");
    for (int i = 0; i < count; i++) {
        const rumor_topo_analysis_t *a = &r[i].an;
        char deg[32], rounds[32], b1[32], b2[32], b3[32];
        snprintf(deg, sizeof deg, "%d-%d", a->degree_min, a->degree_max);
        long nr = r[i].has_cost ? r[i].rounds : a->rounds_to_eps;
        if (a->exact_after > 0 && nr == a->exact_after)
            snprintf(rounds, sizeof rounds, "%ld exact", nr);
        else if (nr < 0)
            snprintf(rounds, sizeof rounds, "never");
        else
            snprintf(rounds, sizeof rounds, "%ld", nr);
        fprintf(f, "%-*s %8d %9ld %7s %14.10f %12.6g %11s", w, r[i].spec, a->n, a->edges, deg,
                a->rho, a->spectral_gap, rounds);
        if (r[i].has_cost)
            fprintf(f, " %11s %10s %11s",
                    rumor_topo_fmt_bytes(b1, sizeof b1, r[i].cost.bytes_peer_max),
                    rumor_topo_fmt_seconds(b2, sizeof b2, r[i].cost.round_seconds),
                    rumor_topo_fmt_seconds(b3, sizeof b3, r[i].cost.seconds_to_eps));
        fprintf(f, "\n");
    }
    if (count)
        fprintf(f, "(rounds to eps = %g; 'exact' = exact averaging after that many rounds)\n",
                r[0].an.eps);
}

/* A number, or null when it is not finite (JSON has no NaN). */
static void jnum(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *to_json(const rumor_topo_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    const rumor_topo_analysis_t *a = &r->an;
    const rumor_topo_t *t = r->topo;
    cJSON_AddStringToObject(o, "spec", r->spec);
    if (r->note[0])
        cJSON_AddStringToObject(o, "excluded", r->note);
    if (!t)
        return o;
    cJSON_AddStringToObject(o, "description", t->desc);
    cJSON_AddNumberToObject(o, "n", a->n);
    cJSON_AddNumberToObject(o, "edges", (double)a->edges);
    cJSON_AddNumberToObject(o, "degree_min", a->degree_min);
    cJSON_AddNumberToObject(o, "degree_max", a->degree_max);
    jnum(o, "degree_mean", a->degree_mean);
    cJSON_AddStringToObject(o, "weights", rumor_mix_scheme_name(t->scheme));
    cJSON_AddBoolToObject(o, "symmetric", a->symmetric);
    cJSON_AddNumberToObject(o, "period", a->period);
    cJSON_AddStringToObject(o, "method", a->method);
    jnum(o, "lambda2", a->lambda2);
    jnum(o, "lambda_min", a->lambda_min);
    jnum(o, "rho", a->rho);
    jnum(o, "spectral_gap", a->spectral_gap);
    jnum(o, "contraction_per_period", a->contraction);
    if (a->exact_after > 0)
        cJSON_AddNumberToObject(o, "exact_after", a->exact_after);
    else
        cJSON_AddNullToObject(o, "exact_after");
    jnum(o, "eps", a->eps);
    long r6 = rounds_1e6(a);
    jnum(o, "rounds_to_eps", a->rounds_to_eps < 0 ? NAN : (double)a->rounds_to_eps);
    jnum(o, "rounds_to_1e-6", r6 < 0 ? NAN : (double)r6);
    jnum(o, "seconds_spectrum", a->seconds);
    if (a->sim_rounds > 0) {
        cJSON *s = cJSON_AddObjectToObject(o, "simulation");
        cJSON_AddNumberToObject(s, "rounds", a->sim_rounds);
        jnum(s, "final_error", a->sim_err[a->sim_rounds]);
        jnum(s, "measured_rate", a->sim_rate);
        jnum(s, "predicted_rate", a->rho);
    }
    if (r->has_cost) {
        const rumor_topo_cost_t *c = &r->cost;
        cJSON *s = cJSON_AddObjectToObject(o, "cost");
        cJSON_AddStringToObject(s, "network", r->network);
        jnum(s, "model_bytes", c->model_bytes);
        jnum(s, "bytes_per_peer_max", c->bytes_peer_max);
        jnum(s, "bytes_per_peer_mean", c->bytes_peer_mean);
        jnum(s, "bytes_busiest_link", c->bytes_link_max);
        jnum(s, "bytes_busiest_nic", c->bytes_nic_max);
        jnum(s, "bytes_total", c->bytes_total);
        cJSON_AddNumberToObject(s, "messages_per_peer_max", c->msgs_peer_max);
        jnum(s, "round_seconds", c->round_seconds);
        jnum(s, "seconds_to_eps", c->seconds_to_eps);
        jnum(s, "step_seconds", c->step_seconds);
        jnum(s, "compute_seconds", c->compute_seconds);
        cJSON_AddNumberToObject(s, "suggested_local_steps", c->suggested_steps);
        cJSON *pl = cJSON_AddObjectToObject(s, "plan");
        char codec[48];
        rumor_codec_format(&r->plan.codec, codec, sizeof codec);
        cJSON_AddStringToObject(pl, "codec", codec);
        jnum(pl, "consensus_step", rumor_gossip_plan_gamma(&r->plan));
        cJSON_AddNumberToObject(pl, "keyframe_every", rumor_gossip_plan_keyframe(&r->plan));
        cJSON_AddNumberToObject(pl, "local_steps", c->local_steps);
        cJSON_AddNumberToObject(pl, "fragments", c->fragments);
        cJSON_AddNumberToObject(pl, "overlap", c->overlap);
        jnum(pl, "bytes_factor", c->bytes_factor);
        jnum(pl, "rho", rumor_gossip_plan_rho(&r->plan, a->rho, a->lambda2, a->lambda_min));
        jnum(pl, "rounds_to_eps", r->rounds < 0 ? NAN : (double)r->rounds);
        if (c->slow_from >= 0) {
            cJSON *l = cJSON_AddObjectToObject(s, "slowest_message");
            cJSON_AddNumberToObject(l, "from", c->slow_from);
            cJSON_AddNumberToObject(l, "to", c->slow_to);
            jnum(l, "bandwidth_bytes_per_s", c->slow_bw);
            jnum(l, "latency_s", c->slow_lat);
        }
    }
    return o;
}

int rumor_topo_print_json(FILE *f, const rumor_topo_result_t *r, int count, int as_array)
{
    cJSON *root = as_array ? cJSON_CreateArray() : to_json(&r[0]);
    if (as_array)
        for (int i = 0; i < count; i++)
            cJSON_AddItemToArray(root, to_json(&r[i]));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s)
        return rumor_err_set(RUMOR_ENOMEM, "json: out of memory");
    fprintf(f, "%s\n", s);
    cJSON_free(s);
    return 0;
}

void rumor_topo_print_dot(FILE *f, const rumor_topo_t *t)
{
    static const char *const colour[] = { "black", "red", "blue", "darkgreen", "orange",
                                          "purple", "brown", "magenta" };
    int directed = t->period > 1;
    for (int k = 0; k < t->period; k++)
        directed |= !t->w[k]->symmetric;
    fprintf(f, "%s \"", directed ? "digraph" : "graph");
    for (const char *p = t->spec; *p; p++)
        fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    fprintf(f, "\" {\n  layout=%s;\n  node [shape=circle, fontsize=10];\n",
            t->n > 64 ? "sfdp" : "neato");
    for (int i = 0; i < t->n; i++)
        fprintf(f, "  %d [tooltip=\"W_ii = %.4g\"];\n", i, t->w[0]->diag[i]);
    for (int k = 0; k < t->period; k++) {
        const rumor_mix_t *w = t->w[k];
        for (int i = 0; i < t->n; i++)
            for (long p = w->off[i]; p < w->off[i + 1]; p++) {
                int j = w->col[p];
                if (w->val[p] == 0 || (!directed && j < i))
                    continue;
                /* an arrow j -> i: i receives from j */
                fprintf(f, "  %d %s %d [label=\"%.3g\"", directed ? j : i, directed ? "->" : "--",
                        directed ? i : j, w->val[p]);
                if (t->period > 1)
                    fprintf(f, ", color=%s, xlabel=\"r%d\"", colour[k % 8], k);
                fprintf(f, "];\n");
            }
    }
    fprintf(f, "}\n");
}
