/* rumor-sim's output: a table for people, one JSON object for scripts, and
 * a small SVG plot of the run over simulated time. */
#include "sim.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static void row(FILE *f, const char *what, const sim_dist_t *d)
{
    if (d->n == 0) {
        fprintf(f, "  %-34s %6d %8s %8s %8s %8s %7d\n", what, 0, "-", "-", "-", "-", d->missing);
        return;
    }
    fprintf(f, "  %-34s %6d %8.2f %8.2f %8.2f %8.2f %7d\n", what, d->n, d->mean, d->p50, d->p90,
            d->max, d->missing);
}

void sim_report_table(FILE *f, const sim_config_t *c, const sim_result_t *r)
{
    fprintf(f, "rumor-sim: %d peers joining over %g s, then %g s; seed %llu\n", c->peers,
            c->join_over, c->duration, (unsigned long long)c->seed);
    if (c->nlinks)
        fprintf(f, "  network: %d link kinds from --net, jitter %g ms, loss %g\n", c->nlinks,
                c->jitter_ms, c->loss);
    else
        fprintf(f, "  network: latency %g ms +- %g, loss %g, upload %g Mbit/s%s\n", c->latency_ms,
                c->jitter_ms, c->loss, c->rate_mbit, c->rate_mbit > 0 ? "" : " (unlimited)");
    if (c->lifetime_mean > 0)
        fprintf(f, "  churn: exponential lifetimes, mean %g s", c->lifetime_mean);
    else
        fprintf(f, "  churn: %g of the peers killed a minute", c->kill_rate);
    fprintf(f, ", %g of departures leave in order\n", c->leave_share);
    if (r->truncated)
        fprintf(f, "  STOPPED early (--wall-limit or a signal) at %.2f s of simulated time\n", r->t_end);
    fprintf(f, "  started %d, killed %d, left %d, live at the end %d (watched %d)\n\n", r->started,
            r->killed, r->left, r->live_end, r->observers_end);
    fprintf(f, "  %-34s %6s %8s %8s %8s %8s %7s\n", "seconds after the event", "n", "mean", "p50",
            "p90", "max", "missing");
    row(f, "death: first DEAD anywhere", &r->detect_first);
    row(f, "death: gone from 50% of views", &r->gone_half);
    row(f, "death: gone from all views", &r->gone_all);
    if (c->leave_share > 0) {
        row(f, "leave: first LEFT anywhere", &r->leave_first);
        row(f, "leave: gone from all views", &r->leave_all);
    }
    row(f, "initial join: in 50% of views", &r->join_half);
    row(f, "initial join: in all views", &r->join_all);
    row(f, "initial join: own view >= 90%", &r->join_own90);
    row(f, "newcomer: in 50% of views", &r->churn_half);
    row(f, "newcomer: in all views", &r->churn_all);
    row(f, "newcomer: own view >= 90%", &r->churn_own90);
    fprintf(f, "\n  false positives (live peers declared DEAD)  %llu   suspicions raised %llu\n",
            (unsigned long long)r->false_positives, (unsigned long long)r->suspicions);
    fprintf(f, "  messages/s per peer      mean %9.2f   max %9.2f\n", r->msg_rate_mean,
            r->msg_rate_max);
    fprintf(f, "  messages/s, steady window %8.2f   (5 s after the joins to the %s)\n",
            r->msg_rate_steady, c->burst_n > 0 ? "burst" : "end");
    fprintf(f, "  bytes/s per peer         mean %9.0f   max %9.0f\n", r->byte_rate_mean,
            r->byte_rate_max);
    fprintf(f, "  messages %llu (%llu bytes), lost %llu, to stopped peers %llu\n",
            (unsigned long long)r->messages, (unsigned long long)r->bytes,
            (unsigned long long)r->lost, (unsigned long long)r->to_dead);
    fprintf(f, "  view coverage at the end  min %.3f  median %.3f  max %.3f  (largest view %zu, "
               "stale members %.1f a view)\n",
            r->cov_min, r->cov_median, r->cov_max, r->view_max, r->stale_mean);
    fprintf(f, "  memory                    RSS %.1f MiB (peak %.1f), %.1f KiB a live peer; "
               "table bound %d members (%zu KiB full)\n",
            r->rss_kb / 1024.0, r->hwm_kb / 1024.0, r->rss_per_peer_kb, r->max_members,
            r->table_bytes / 1024);
    if (c->rounds) {
        fprintf(f, "\n  rounds (%s over each view; %g ms of compute a round%s):\n",
                c->topology, c->round_cpu_ms, c->cores > 0 ? " on shared cores" : "");
        fprintf(f, "    rounds a second a peer   %9.2f   (steady window; all peers: %llu rounds)\n",
                r->rounds_per_s, (unsigned long long)r->peer_rounds);
        fprintf(f, "    mixed rounds             %9.3f   late (ran into the deadline) %.4f%s\n",
                r->mixed_share, r->late_share,
                c->burst_n > 0 ? " (from 10 s after the burst)" : "");
        fprintf(f, "    longest wait after compute %7.2f s   jumps %llu\n", r->max_wait,
                (unsigned long long)r->jumps);
        fprintf(f, "    consensus distance       mean %.4f  max %.4f  (%d live peers training, "
                   "last rounds); RMS %.4f (steady window)\n",
                r->consensus_mean, r->consensus_max, r->training_end, r->consensus_rms);
        fprintf(f, "    distance to the average  RMS %.4f (steady window)\n", r->spread_rms);
        if (c->target > 0)
            fprintf(f, "    below %g after the joins %.2f s\n", c->target, r->target_s);
        fprintf(f, "    PARAMS bytes/s per peer  %9.0f\n", r->params_bytes_per_s);
        row(f, "newcomer: start to first round", &r->admit);
    }
    fprintf(f, "  simulator                 %.2f s wall for %g s simulated, %llu events, %.0f "
               "events/s",
            r->wall_s, r->t_end, (unsigned long long)r->events, r->events_per_s);
    if (c->rounds)
        fprintf(f, ", %.0f peer-rounds/s", r->peer_rounds_per_wall_s);
    fprintf(f, "\n");
}

/* NaN (nothing measured) is null in JSON. */
static void num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* Keys are unique over the whole object, so that a line-oriented tool can
 * pick one without a JSON parser. */
static void jdist(cJSON *o, const char *prefix, const sim_dist_t *d)
{
    char k[64];
    snprintf(k, sizeof k, "%s_n", prefix);
    cJSON_AddNumberToObject(o, k, d->n);
    snprintf(k, sizeof k, "%s_missing", prefix);
    cJSON_AddNumberToObject(o, k, d->missing);
    const char *stat[] = { "mean", "p50", "p90", "max" };
    const double v[] = { d->mean, d->p50, d->p90, d->max };
    for (int i = 0; i < 4; i++) {
        snprintf(k, sizeof k, "%s_%s_s", prefix, stat[i]);
        num(o, k, v[i]);
    }
}

int sim_report_json(FILE *f, const sim_config_t *c, const sim_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    cJSON_AddNumberToObject(o, "peers", c->peers);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddNumberToObject(o, "join_over_s", c->join_over);
    cJSON_AddNumberToObject(o, "duration_s", c->duration);
    cJSON_AddNumberToObject(o, "latency_ms", c->latency_ms);
    cJSON_AddNumberToObject(o, "jitter_ms", c->jitter_ms);
    cJSON_AddNumberToObject(o, "loss", c->loss);
    cJSON_AddNumberToObject(o, "rate_mbit", c->rate_mbit);
    cJSON_AddNumberToObject(o, "net_links", c->nlinks);
    cJSON_AddNumberToObject(o, "kill_rate", c->kill_rate);
    cJSON_AddNumberToObject(o, "lifetime_mean_s", c->lifetime_mean);
    cJSON_AddNumberToObject(o, "leave_share", c->leave_share);
    cJSON_AddNumberToObject(o, "simulated_s", r->t_end);
    cJSON_AddBoolToObject(o, "stopped_early", r->truncated);
    cJSON_AddNumberToObject(o, "started", r->started);
    cJSON_AddNumberToObject(o, "killed", r->killed);
    cJSON_AddNumberToObject(o, "left", r->left);
    cJSON_AddNumberToObject(o, "live_end", r->live_end);
    cJSON_AddNumberToObject(o, "watched_end", r->observers_end);
    jdist(o, "detect_first", &r->detect_first);
    jdist(o, "gone_half", &r->gone_half);
    jdist(o, "gone_all", &r->gone_all);
    jdist(o, "leave_first", &r->leave_first);
    jdist(o, "leave_all", &r->leave_all);
    jdist(o, "join_half", &r->join_half);
    jdist(o, "join_all", &r->join_all);
    jdist(o, "join_own90", &r->join_own90);
    jdist(o, "newcomer_half", &r->churn_half);
    jdist(o, "newcomer_all", &r->churn_all);
    jdist(o, "newcomer_own90", &r->churn_own90);
    cJSON_AddNumberToObject(o, "false_positives", (double)r->false_positives);
    cJSON_AddNumberToObject(o, "suspicions", (double)r->suspicions);
    cJSON_AddNumberToObject(o, "msgs_per_s_mean", r->msg_rate_mean);
    cJSON_AddNumberToObject(o, "msgs_per_s_max", r->msg_rate_max);
    num(o, "msgs_per_s_steady", r->msg_rate_steady);
    cJSON_AddNumberToObject(o, "bytes_per_s_mean", r->byte_rate_mean);
    cJSON_AddNumberToObject(o, "bytes_per_s_max", r->byte_rate_max);
    cJSON_AddNumberToObject(o, "messages", (double)r->messages);
    cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
    cJSON_AddNumberToObject(o, "lost", (double)r->lost);
    cJSON_AddNumberToObject(o, "to_stopped", (double)r->to_dead);
    num(o, "coverage_min", r->cov_min);
    num(o, "coverage_median", r->cov_median);
    num(o, "coverage_max", r->cov_max);
    cJSON_AddNumberToObject(o, "view_max", (double)r->view_max);
    cJSON_AddNumberToObject(o, "stale_per_view", r->stale_mean);
    cJSON_AddNumberToObject(o, "max_members", r->max_members);
    cJSON_AddNumberToObject(o, "table_bytes_full", (double)r->table_bytes);
    if (c->rounds) {
        cJSON_AddStringToObject(o, "topology", c->topology);
        cJSON_AddNumberToObject(o, "round_cpu_ms", c->round_cpu_ms);
        cJSON_AddNumberToObject(o, "cores", c->cores);
        cJSON_AddNumberToObject(o, "peer_rounds", (double)r->peer_rounds);
        num(o, "rounds_per_s", r->rounds_per_s);
        num(o, "mixed_share", r->mixed_share);
        num(o, "late_share", r->late_share);
        num(o, "max_wait_s", r->max_wait);
        num(o, "consensus_mean", r->consensus_mean);
        num(o, "consensus_max", r->consensus_max);
        num(o, "consensus_rms", r->consensus_rms);
        num(o, "spread_rms", r->spread_rms);
        num(o, "target_s", r->target_s);
        cJSON_AddNumberToObject(o, "training_end", r->training_end);
        num(o, "params_bytes_per_s", r->params_bytes_per_s);
        cJSON_AddNumberToObject(o, "jumps", (double)r->jumps);
        jdist(o, "admit", &r->admit);
    }
    /* the run's own cost varies from machine to machine and run to run:
     * kept apart so that equal seeds give equal objects without it */
    cJSON *cost = cJSON_AddObjectToObject(o, "simulator");
    if (cost) {
        cJSON_AddNumberToObject(cost, "rss_kib", (double)r->rss_kb);
        cJSON_AddNumberToObject(cost, "peak_rss_kib", (double)r->hwm_kb);
        cJSON_AddNumberToObject(cost, "rss_per_peer_kib", r->rss_per_peer_kb);
        cJSON_AddNumberToObject(cost, "wall_s", r->wall_s);
        cJSON_AddNumberToObject(cost, "events", (double)r->events);
        cJSON_AddNumberToObject(cost, "events_per_s", r->events_per_s);
        if (c->rounds)
            cJSON_AddNumberToObject(cost, "peer_rounds_per_s", r->peer_rounds_per_wall_s);
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        return rumor_err_set(RUMOR_ENOMEM, "out of memory");
    fprintf(f, "%s\n", text);
    cJSON_free(text);
    return 0;
}

/* ------------------------------------------------------------ SVG */

#define W 720
#define H 390
#define X0 60
#define Y0 30
#define PW (W - 2 * X0)
#define PH (H - 120)

int sim_report_svg(const char *path, const sim_config_t *c, const sim_result_t *r)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return rumor_err_sys(RUMOR_EIO, "--svg %s", path);
    double tmax = r->t_end > 0 ? r->t_end : 1;
    int lmax = 1;
    for (int i = 0; i < r->ncurve; i++)
        lmax = r->curve[i].live > lmax ? r->curve[i].live : lmax;
#define SX(t) (X0 + PW * (t) / tmax)
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"18\">rumor-sim: %d peers, seed %llu (SWIM of librumor)</text>\n",
            X0, c->peers, (unsigned long long)c->seed);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#888\"/>\n", X0, Y0, PW, PH);
    /* axes: simulated time below, live peers left, coverage right */
    for (int k = 0; k <= 4; k++) {
        double y = Y0 + PH - PH * k / 4.0;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", X0 - 4, y + 4,
                lmax * k / 4);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%.2f</text>\n", X0 + PW + 4, y + 4, k / 4.0);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n",
                SX(tmax * k / 4), Y0 + PH + 16, tmax * k / 4);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">simulated time (s)</text>\n",
            X0 + PW / 2, Y0 + PH + 32);
    static const char *series[] = { "#1f77b4", "#2ca02c", "#ff7f0e" };
    for (int s = 0; s < 3; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                series[s]);
        for (int i = 0; i < r->ncurve; i++) {
            const sim_point_t *p = &r->curve[i];
            double v = s == 0 ? (double)p->live / lmax : s == 1 ? p->cov_median : p->cov_min;
            fprintf(f, "%.1f,%.1f ", SX(p->t), Y0 + PH - PH * v);
        }
        fprintf(f, "\"/>\n");
    }
    /* with rounds: the consensus distance, scaled to its largest value */
    double cmax = 0;
    for (int i = 0; i < r->ncurve; i++)
        cmax = r->curve[i].cons_mean > cmax ? r->curve[i].cons_mean : cmax;
    if (c->rounds && cmax > 0) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"#9467bd\" stroke-width=\"1.5\" points=\"");
        for (int i = 0; i < r->ncurve; i++)
            if (r->curve[i].cons_mean >= 0)
                fprintf(f, "%.1f,%.1f ", SX(r->curve[i].t),
                        Y0 + PH - PH * r->curve[i].cons_mean / cmax);
        fprintf(f, "\"/>\n");
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#9467bd\">consensus distance, mean "
                   "(right axis x %.3g)</text>\n", X0 + 330, H - 28, cmax);
    }
    /* departures (red) and their first detections (black) as ticks under the plot */
    for (int i = 0; i < r->ndeaths; i++)
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#d62728\"/>\n",
                SX(r->deaths[i]), SX(r->deaths[i]), Y0 + PH - 12, Y0 + PH - 2);
    for (int i = 0; i < r->ndetections; i++)
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
                SX(r->detections[i]), SX(r->detections[i]), Y0 + PH - 24, Y0 + PH - 14);
    static const char *label[] = { "live peers (left axis)", "median view coverage (right)",
                                   "lowest view coverage (right)" };
    for (int s = 0; s < 3; s++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", X0 + 200 * s, H - 12,
                series[s], label[s]);
    fprintf(f, "<text x=\"%d\" y=\"%d\">ticks: red = departure, black = first detection</text>\n",
            X0, H - 28);
    fprintf(f, "</svg>\n");
#undef SX
    if (fclose(f) != 0)
        return rumor_err_sys(RUMOR_EIO, "--svg %s", path);
    return 0;
}
