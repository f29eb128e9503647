/* The peer's metrics events (progress.h's JSON lines), built as JSON
 * objects with cJSON: start, round, epoch, leave and done. The field names
 * are rumor-peer's documented ones (docs/metrics.md). */
#include "peer_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "log.h"

/* Writes obj's fields as one event, and frees it. */
static void emit(rumor_peer_t *p, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    if (!s) {
        rumor_warn("metrics: out of memory for an event");
    } else {
        size_t n = strlen(s); /* "{...}": the fields without the braces */
        if (n >= 2)
            rumor_metrics_write(&p->metrics, "%.*s", (int)(n - 2), s + 1);
        cJSON_free(s);
    }
    cJSON_Delete(obj);
}

static cJSON *event(rumor_peer_t *p, const char *name)
{
    if (!p->metrics.open)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddStringToObject(o, "event", name);
    return o;
}

/* A JSON text (the transport's and the wire's own) as a member. */
static void add_raw(cJSON *o, const char *key, const char *json)
{
    cJSON *v = cJSON_Parse(json);
    cJSON_AddItemToObject(o, key, v ? v : cJSON_CreateObject());
}

static void add_connections(rumor_peer_t *p, cJSON *o)
{
    char buf[512];
    rumor_transport_stats_t ts;
    rumor_mixer_transport_stats(p->mixer, &ts);
    add_raw(o, "connections", rumor_transport_stats_json(&ts, buf, sizeof buf) < 0 ? "{}" : buf);
}

void rumor_peer_event_start(rumor_peer_t *p, int ready)
{
    cJSON *o = event(p, "start");
    if (!o)
        return;
    cJSON_AddNumberToObject(o, "peers", p->N);
    cJSON_AddStringToObject(o, "mode", p->async ? "async" : p->dpsgd ? "dpsgd" : "allreduce");
    cJSON_AddStringToObject(o, "topology", p->spec);
    cJSON_AddStringToObject(o, "model", rumor_trainer_model(p->tr)->spec);
    cJSON_AddNumberToObject(o, "params", (double)p->nparams);
    cJSON_AddNumberToObject(o, "rounds", (double)p->total_rounds);
    cJSON_AddNumberToObject(o, "ready", ready);
    cJSON_AddNumberToObject(o, "local_steps", (double)p->H);
    cJSON_AddStringToObject(o, "strategy", p->strategy->name);
    emit(p, o);
}

void rumor_peer_event_round(rumor_peer_t *p, double loss, double el)
{
    cJSON *o = event(p, "round");
    if (!o)
        return;
    const rumor_round_stats_t *st = &p->st;
    rumor_wire_stats_t ws;
    rumor_mixer_wire_stats(p->mixer, &ws);
    cJSON_AddNumberToObject(o, "round", (double)p->k);
    cJSON_AddNumberToObject(o, "epoch", p->epoch);
    cJSON_AddNumberToObject(o, "loss", loss);
    cJSON_AddNumberToObject(o, "examples_per_s", el > 0 ? p->examples / el : 0);
    cJSON_AddNumberToObject(o, "consensus", p->last_dis);
    cJSON_AddNumberToObject(o, "bytes_sent", (double)p->res.bytes_sent);
    cJSON_AddNumberToObject(o, "bytes_received", (double)p->res.bytes_received);
    cJSON_AddNumberToObject(o, "wait_s", p->res.wait_s);
    cJSON_AddNumberToObject(o, "compute_s", p->res.compute_s);
    cJSON_AddNumberToObject(o, "compute_utilization", el > 0 ? p->res.compute_s / el : 0);
    double lu = rumor_peer_link_utilization(p, el);
    if (lu == lu)
        cJSON_AddNumberToObject(o, "link_utilization", lu);
    cJSON_AddNumberToObject(o, "deadline_s", p->deadline);
    cJSON_AddNumberToObject(o, "members", st->members);
    cJSON_AddNumberToObject(o, "in_neighbors", st->in_neighbors);
    cJSON_AddNumberToObject(o, "complete", st->complete);
    cJSON_AddNumberToObject(o, "rejected", (double)rumor_wire_stats_rejected(&ws));
    add_connections(p, o);
    cJSON_AddNumberToObject(o, "bubble", rumor_trainer_pipelined(p->tr) ? rumor_trainer_bubble(p->tr) : 0.0);
    cJSON_AddNumberToObject(o, "batches", p->cfg.balance ? rumor_balance_batches(&p->bal) : 1);
    cJSON_AddNumberToObject(o, "round_wait_s", p->dpsgd ? st->wait_s : 0.0);
    cJSON_AddNumberToObject(o, "timed_out", p->dpsgd ? st->timed_out : 0);
    if (p->cfg.mixer.membership) { /* SWIM's traffic and health (bench_scale) */
        rumor_mixer_counters_t mc;
        rumor_mixer_counters(p->mixer, &mc);
        cJSON_AddNumberToObject(o, "swim_messages", (double)mc.swim_messages);
        cJSON_AddNumberToObject(o, "swim_health", mc.swim_health);
    }
    emit(p, o);
}

void rumor_peer_event_epoch(rumor_peer_t *p, int epoch, double train_loss, int evaluated,
                            double acc, double tloss, double consensus, double epoch_s,
                            double epoch_cpu)
{
    cJSON *o = event(p, "epoch");
    if (!o)
        return;
    cJSON_AddNumberToObject(o, "epoch", epoch);
    cJSON_AddNumberToObject(o, "round", (double)p->k);
    cJSON_AddNumberToObject(o, "train_loss", train_loss);
    if (!rumor_trainer_is_lm(p->tr)) /* a classifier's; a language model has none */
        cJSON_AddNumberToObject(o, "test_accuracy", evaluated ? acc : -1.0);
    cJSON_AddNumberToObject(o, "eval_loss", evaluated ? tloss : -1.0);
    cJSON_AddNumberToObject(o, "consensus", consensus);
    cJSON_AddNumberToObject(o, "seconds", rumor_now() - p->start);
    cJSON_AddNumberToObject(o, "epoch_seconds", epoch_s);
    cJSON_AddNumberToObject(o, "epoch_cpu_seconds", epoch_cpu);
    emit(p, o);
}

void rumor_peer_event_leave(rumor_peer_t *p, long round, int checkpoint)
{
    cJSON *o = event(p, "leave");
    if (!o)
        return;
    cJSON_AddNumberToObject(o, "round", (double)round);
    cJSON_AddNumberToObject(o, "signal", (double)p->stop);
    cJSON_AddBoolToObject(o, "checkpoint", checkpoint);
    emit(p, o);
}

void rumor_peer_event_done(rumor_peer_t *p)
{
    cJSON *o = event(p, "done");
    if (!o)
        return;
    const rumor_peer_result_t *r = &p->res;
    const rumor_mixer_counters_t *m = &r->counters;
    if (!rumor_trainer_is_lm(p->tr)) {
        cJSON_AddNumberToObject(o, "local_accuracy", r->local_accuracy);
        cJSON_AddNumberToObject(o, "average_accuracy", r->average_accuracy);
    }
    cJSON_AddNumberToObject(o, "local_eval_loss", r->local_loss);
    cJSON_AddNumberToObject(o, "average_eval_loss", r->average_note[0] ? -1.0 : r->average_loss);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "rounds", (double)r->rounds);
    cJSON_AddNumberToObject(o, "rounds_run", (double)r->rounds_run);
    cJSON_AddNumberToObject(o, "examples_per_s", r->examples_per_second);
    cJSON_AddNumberToObject(o, "bytes_sent", (double)r->bytes_sent);
    cJSON_AddNumberToObject(o, "bytes_received", (double)r->bytes_received);
    cJSON_AddNumberToObject(o, "wait_s", r->wait_s);
    cJSON_AddNumberToObject(o, "compute_s", r->compute_s);
    cJSON_AddNumberToObject(o, "compute_utilization", r->seconds > 0 ? r->compute_s / r->seconds : 0);
    double lu = rumor_peer_link_utilization(p, r->seconds);
    if (lu == lu)
        cJSON_AddNumberToObject(o, "link_utilization", lu);
    cJSON_AddNumberToObject(o, "rejected", (double)rumor_wire_stats_rejected(&r->messages));
    cJSON_AddNumberToObject(o, "allreduce_failures", (double)r->allreduce_failures);
    cJSON_AddNumberToObject(o, "max_stall", r->max_stall);
    cJSON_AddNumberToObject(o, "jumps", (double)m->jumps);
    cJSON_AddNumberToObject(o, "rounds_skipped", (double)m->rounds_skipped);
    cJSON_AddNumberToObject(o, "catch_ups", (double)r->catch_ups);
    cJSON_AddNumberToObject(o, "state_served", (double)m->state_served);
    cJSON_AddNumberToObject(o, "digest_failures", (double)m->digest_failures);
    cJSON_AddNumberToObject(o, "stale_applied", (double)m->stale_applied);
    cJSON_AddNumberToObject(o, "endpoints_learned", (double)m->endpoints_learned);
    cJSON_AddNumberToObject(o, "rounds_mixed", (double)m->rounds_mixed);
    cJSON_AddBoolToObject(o, "alone", r->alone);
    cJSON_AddNumberToObject(o, "consensus_skipped", (double)m->consensus_skipped);
    cJSON_AddStringToObject(o, "compress", p->cfg.compress);
    cJSON_AddNumberToObject(o, "elems_sent", (double)m->elems_sent);
    cJSON_AddNumberToObject(o, "elems_ahead", (double)m->elems_ahead);
    cJSON_AddNumberToObject(o, "members", r->average_members);
    cJSON_AddNumberToObject(o, "members_joined", (double)m->members_joined);
    cJSON_AddNumberToObject(o, "not_allowed", (double)m->not_allowed);
    cJSON_AddNumberToObject(o, "checkpoints", (double)r->checkpoints);
    cJSON_AddNumberToObject(o, "checkpoints_failed", (double)r->checkpoints_failed);
    cJSON_AddNumberToObject(o, "outlier_rounds", (double)m->outlier_rounds);
    cJSON_AddNumberToObject(o, "robust_ranges", (double)m->robust_ranges);
    cJSON_AddNumberToObject(o, "robust_clipped", (double)m->robust_clipped);
    cJSON_AddNumberToObject(o, "quarantines", (double)m->quarantines);
    cJSON_AddNumberToObject(o, "quarantine_releases", (double)m->releases);
    cJSON_AddNumberToObject(o, "incompatible_neighbours", m->incompatible);
    cJSON_AddStringToObject(o, "strategy", p->strategy->name);
    char buf[2048];
    add_raw(o, "messages", rumor_wire_stats_json(&r->messages, buf, sizeof buf) < 0 ? "{}" : buf);
    add_raw(o, "connections",
            rumor_transport_stats_json(&r->connections, buf, sizeof buf) < 0 ? "{}" : buf);
    emit(p, o);
}

double rumor_peer_link_utilization(const rumor_peer_t *p, double el)
{
    if (p->cfg.link_mbit <= 0 || el <= 0)
        return NAN;
    return (double)p->res.bytes_sent * 8.0 / el / (p->cfg.link_mbit * 1e6);
}
