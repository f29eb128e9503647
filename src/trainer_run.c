/* Evaluation on the validation data, a step's trace, and rumor-train's
 * whole run: progress lines, evaluations, checkpoints and metrics events
 * (see trainer.h). */
#include "trainer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "trainer_int.h"

int rumor_evaluate(rumor_step_t *s, rumor_source_t *src, int batch, int max_batches,
                   rumor_eval_t *e)
{
    double sum = 0.0;
    long targets = 0, correct = 0;
    int images = rumor_source_kind(src) == RUMOR_BATCH_IMAGES;
    int nb = rumor_source_val_batches(src, batch);
    if (max_batches > 0 && max_batches < nb)
        nb = max_batches;
    for (int i = 0; i < nb; i++) {
        rumor_batch_t b;
        int got = rumor_source_val(src, i, batch, &b);
        RUMOR_CHECK(got);
        if (got == 0)
            break;
        RUMOR_CHECK(rumor_step_eval(s, &b, &sum, &targets, images ? &correct : NULL));
    }
    if (targets == 0)
        return rumor_err_set(RUMOR_EINVAL, "evaluation: no validation data in %s",
                             rumor_source_describe(src));
    e->loss = sum / (double)targets;
    e->accuracy = images ? (double)correct / (double)targets : -1.0;
    e->targets = targets;
    return 0;
}

int rumor_trainer_evaluate(rumor_trainer_t *t, const float *params, int batches,
                           rumor_eval_t *e)
{
    RUMOR_CHECK(rumor_trainer_sync_params(t));
    float *bound = t->stage->params;
    if (params) /* read only: an evaluation writes no parameter */
        rumor_step_bind_params(t->step, (float *)params);
    int rc = rumor_evaluate(t->step, t->src, t->cfg.batch,
                            batches < 0 ? t->cfg.eval_batches : batches, e);
    if (params)
        rumor_step_bind_params(t->step, bound);
    return rc;
}

/* ------------------------------------------------------------------ run */

/* Where a run stands, for its lines and events. */
struct run_state {
    rumor_progress_t prog;
    double start, epoch_start, loss_ema, epoch_loss;
    long units, epoch_rows, epoch_steps;
    rumor_eval_t ev;
    long evaluated_at;
};

static void epoch_end(rumor_trainer_t *t, const rumor_run_config_t *rc, struct run_state *s,
                      long step)
{
    int epoch = (int)((step - 1) / t->steps_per_epoch) + 1, epochs = (int)
        ((t->total_steps + t->steps_per_epoch - 1) / t->steps_per_epoch);
    double secs = rumor_now() - s->epoch_start;
    double train_loss = s->epoch_rows ? s->epoch_loss / (double)s->epoch_rows : 0.0;
    int fresh = s->evaluated_at == step;
    if (!rc->quiet) {
        char ev[96] = "";
        if (fresh && t->lm)
            snprintf(ev, sizeof ev, "  validation loss %.4f", s->ev.loss);
        else if (fresh)
            snprintf(ev, sizeof ev, "  test loss %.4f  test accuracy %.2f%%", s->ev.loss,
                     100.0 * s->ev.accuracy);
        rumor_progress_print(&s->prog, "epoch %d/%d  train loss %.4f%s  %.1f s  %.0f %s/s", epoch,
                             epochs, train_loss, ev, secs, (double)s->epoch_rows / secs,
                             t->lm ? "windows" : "ex");
    }
    if (t->lm)
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,"
                            "\"train_loss\":%.6g,\"val_loss\":%.6g,\"seconds\":%.3f,"
                            "\"examples_per_s\":%.1f",
                            epoch, step, train_loss, fresh ? s->ev.loss : -1.0, secs,
                            (double)s->epoch_rows / secs);
    else
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,"
                            "\"train_loss\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6f,"
                            "\"seconds\":%.3f,\"examples_per_s\":%.1f",
                            epoch, step, train_loss, fresh ? s->ev.loss : -1.0,
                            fresh ? s->ev.accuracy : -1.0, secs, (double)s->epoch_rows / secs);
    s->epoch_start = rumor_now();
    s->epoch_loss = 0;
    s->epoch_rows = 0;
}

static int evaluate_now(rumor_trainer_t *t, const rumor_run_config_t *rc, struct run_state *s,
                        long step)
{
    TRY("evaluation", rumor_trainer_evaluate(t, NULL, -1, &s->ev));
    s->evaluated_at = step;
    /* accuracy is a classifier's: a language model's event has none */
    if (t->lm)
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"eval\",\"step\":%ld,\"val_loss\":%.6g,"
                            "\"train_loss\":%.6g", step, s->ev.loss, s->loss_ema);
    else
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"eval\",\"step\":%ld,\"test_loss\":%.6g,"
                            "\"accuracy\":%.6f,\"train_loss\":%.6g",
                            step, s->ev.loss, s->ev.accuracy, s->loss_ema);
    if (rc->checkpoint_dir)
        TRY("checkpoint", rumor_trainer_save(t, rc->checkpoint_dir, "train",
                                                        t->cfg.rank, step, rc->keep_checkpoints));
    return 0;
}

int rumor_trainer_trace_rows(const rumor_trainer_t *t, rumor_trace_t *tr)
{
    if (t->pipe) {
        rumor_pipeline_trace_rows(t->pipe, tr);
        t->pipe->timed = 1; /* the trace shows when the GPU ran each action */
        return t->pipe->P;
    }
    char name[96];
    snprintf(name, sizeof name, "compute: %s", t->dev->name);
    rumor_trace_row(tr, 0, name);
    return 1;
}

void rumor_trainer_trace(const rumor_trainer_t *t, rumor_trace_t *tr, long step, double g0,
                         double g1, double u0, double u1)
{
    char args[48];
    snprintf(args, sizeof args, "\"step\":%ld", step);
    if (t->pipe)
        rumor_pipeline_trace(t->pipe, tr, step);
    else
        rumor_trace_span(tr, 0, "gradient", "compute", g0, g1, args);
    if (!t->pipe || !rumor_pipeline_stepped(t->pipe)) /* else each stage's step is traced */
        rumor_trace_span(tr, 0, "update", "optimizer", u0, u1, args);
}

/* rumor_trainer_run's steps from *stepp to the end. */
static int run_steps(rumor_trainer_t *t, const rumor_run_config_t *rc, struct run_state *s,
                     long *stepp, long first, rumor_trace_t *trace)
{
    long total = t->total_steps, step = *stepp;
    const char *unit = t->lm ? "tok/s" : "ex/s";
    while (step < total) {
        long k = step;
        rumor_batch_t b;
        float loss, lr;
        TRY("data", rumor_trainer_batch(t, step, &b));
        double t0 = rumor_now();
        TRY("training step", rumor_trainer_grads(t, &b, step, &loss));
        double t1 = rumor_now();
        TRY("optimizer step", rumor_trainer_update(t, &lr));
        if (trace) /* every action of the step, for Perfetto */
            rumor_trainer_trace(t, trace, k, t0, t1, t1, rumor_now());
        (*stepp)++;
        step = *stepp;
        s->units += rumor_batch_targets(&b);
        s->epoch_rows += b.n;
        s->epoch_steps++;
        s->epoch_loss += (double)loss * b.n;
        s->loss_ema = isnan(s->loss_ema) ? loss : 0.9 * s->loss_ema + 0.1 * loss;
        int at_epoch_end = step % t->steps_per_epoch == 0 || step == total;
        int evaluate = rc->eval_every > 0 ? step % rc->eval_every == 0 || step == total
                                          : at_epoch_end;
        if (evaluate)
            RUMOR_CHECK(evaluate_now(t, rc, s, step));
        double rate = (double)s->units / (rumor_now() - s->start);
        char ev[48] = "", bub[32] = "";
        if (s->evaluated_at >= 0)
            snprintf(ev, sizeof ev, t->lm ? "  val %.4f" : "  acc %.2f%%",
                     t->lm ? s->ev.loss : 100.0 * s->ev.accuracy);
        if (t->pipe) /* the measured idle share of the pipeline's devices */
            snprintf(bub, sizeof bub, "  bubble %.0f%%", 100.0 * t->bubble);
        if (rumor_progress_update(&s->prog, step - first, evaluate,
                                  "epoch %d/%d  step %ld/%ld  loss %.4f%s  lr %.3g  %.0f %s%s",
                                  rumor_trainer_epoch(t, step - 1),
                                  (int)((total + t->steps_per_epoch - 1) / t->steps_per_epoch),
                                  step, total, s->loss_ema, ev, (double)lr, rate, unit, bub))
            rumor_metrics_write(rc->metrics,
                                "\"event\":\"step\",\"epoch\":%d,\"step\":%ld,\"loss\":%.6g,"
                                "\"lr\":%.6g,\"%s\":%.1f,\"bubble\":%.4f",
                                rumor_trainer_epoch(t, step - 1), step, (double)loss, (double)lr,
                                t->lm ? "tokens_per_s" : "examples_per_s", rate,
                                t->pipe ? t->bubble : 0.0);
        if (at_epoch_end)
            epoch_end(t, rc, s, step);
    }
    return 0;
}

int rumor_trainer_run(rumor_trainer_t *t, const rumor_run_config_t *given, rumor_run_result_t *res)
{
    const rumor_trainer_config_t *c = &t->cfg;
    rumor_metrics_t closed; /* writes to it do nothing */
    memset(&closed, 0, sizeof closed);
    rumor_run_config_t r = *given;
    if (!r.metrics)
        r.metrics = &closed;
    const rumor_run_config_t *rc = &r;
    FILE *out = rc->out ? rc->out : stdout;
    long total = t->total_steps, step = rc->first;
    if (step < 0)
        return rumor_err_set(RUMOR_EINVAL, "run: first step %ld", step);
    if (step >= total) /* a run resumed at its end would report what it did not do */
        return rumor_err_set(RUMOR_ESTATE, "run: step %ld is already at or past the run's last "
                             "step (%ld): nothing to train", step, total);
    struct run_state s;
    memset(&s, 0, sizeof s);
    s.loss_ema = NAN;
    s.ev.loss = NAN;
    s.ev.accuracy = -1.0;
    s.evaluated_at = -1;
    rumor_metrics_write(rc->metrics,
                        "\"event\":\"start\",\"model\":\"%s\",\"params\":%zu,\"device\":\"%s\","
                        "\"data\":\"%s\",\"steps\":%ld,\"steps_per_epoch\":%ld,\"first\":%ld,"
                        "\"batch\":%d,\"ctx\":%d,\"optimizer\":\"%s\",\"lr\":%g,\"seed\":%llu",
                        t->model->spec, t->model->nparams, t->dev->name,
                        rumor_source_describe(t->src), total, t->steps_per_epoch, step, c->batch,
                        rumor_model_seq(t->model), rc->optimizer ? rc->optimizer : "",
                        (double)t->oc.lr, (unsigned long long)c->seed);
    rumor_progress_begin(&s.prog, out, total - step, rc->progress, rc->quiet);
    s.start = s.epoch_start = rumor_now();
    long first = step;
    rumor_trace_t *trace = NULL;
    if (rc->trace) {
        RUMOR_CHECK(rumor_trace_open(rc->trace, s.start, &trace));
        rumor_trainer_trace_rows(t, trace);
    }
    int rrc = run_steps(t, rc, &s, &step, first, trace);
    int trc = rumor_trace_close(&trace);
    if (rrc == 0)
        rrc = trc;
    if (rrc == 0) /* the caller may read the parameters now */
        rrc = rumor_trainer_sync_params(t);
    RUMOR_CHECK(rrc);
    double secs = rumor_now() - s.start, rate = secs > 0 ? (double)s.units / secs : 0.0;
    long ran = step - first;
    if (t->lm) {
        fprintf(out, "validation loss %.4f (%.4f bits per token) after %ld steps in %.1f s, "
                     "%.0f tokens/s\n", s.ev.loss, s.ev.loss / log(2.0), step, secs, rate);
    } else if (step % t->steps_per_epoch == 0) {
        long e = step / t->steps_per_epoch;
        fprintf(out, "test accuracy %.2f%% (test loss %.4f) after %ld epoch%s in %.1f s, "
                     "%.0f examples/s\n", 100.0 * s.ev.accuracy, s.ev.loss, e, e == 1 ? "" : "s",
                secs, rate);
    } else {
        fprintf(out, "test accuracy %.2f%% (test loss %.4f) after %ld steps in %.1f s, "
                     "%.0f examples/s\n", 100.0 * s.ev.accuracy, s.ev.loss, step, secs, rate);
    }
    fflush(out);
    if (t->lm)
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"done\",\"val_loss\":%.6g,\"steps\":%ld,\"ran\":%ld,"
                            "\"seconds\":%.3f,\"tokens_per_s\":%.1f",
                            s.ev.loss, step, ran, secs, rate);
    else
        rumor_metrics_write(rc->metrics,
                            "\"event\":\"done\",\"test_accuracy\":%.6f,\"test_loss\":%.6g,"
                            "\"steps\":%ld,\"ran\":%ld,\"seconds\":%.3f,\"examples_per_s\":%.1f",
                            s.ev.accuracy, s.ev.loss, step, ran, secs, rate);
    if (res) {
        res->eval = s.ev;
        res->steps = step;
        res->seconds = secs;
        res->rate = rate;
    }
    return 0;
}
