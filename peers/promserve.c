/* Prometheus metrics over HTTP (see promserve.h). */
#include "config.h"

#include "promserve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifdef HAVE_MHD
#include <microhttpd.h>
#endif

struct rumor_prom {
    pthread_mutex_t mu;
    rumor_prom_snapshot_t snap;
    int have;
#ifdef HAVE_MHD
    struct MHD_Daemon *d;
#endif
};

/* ------------------------------------------------------------ the page */

struct page {
    char *buf;
    size_t cap, len;
    int over;
};

static void put(struct page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct page *p, const char *fmt, ...)
{
    if (p->over)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p->buf + p->len, p->cap - p->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= p->cap - p->len) {
        p->over = 1;
        return;
    }
    p->len += (size_t)n;
}

/* One metric with its HELP and TYPE lines and the peer's labels. */
static void metric(struct page *p, const rumor_prom_snapshot_t *s, const char *name,
                   const char *type, const char *help, double v)
{
    put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (s->peer[0]) /* open membership: no rank, the peer's id */
        put(p, "%s{peer=\"%s\"} %.17g\n", name, s->peer, v);
    else
        put(p, "%s{rank=\"%d\"} %.17g\n", name, s->rank, v);
}

int rumor_prom_format(const rumor_prom_snapshot_t *s, char *buf, size_t cap)
{
    struct page p = { buf, cap, 0, 0 };
    if (cap)
        buf[0] = '\0';
    metric(&p, s, "rumor_round", "gauge", "The round this peer is at.", (double)s->round);
    metric(&p, s, "rumor_rounds", "gauge", "Rounds this run trains for.", (double)s->rounds_total);
    metric(&p, s, "rumor_rounds_run_total", "counter", "Rounds this process ran.",
           (double)s->rounds_run);
    metric(&p, s, "rumor_rounds_mixed_total", "counter",
           "Rounds that mixed some neighbour's parameters.", (double)s->rounds_mixed);
    metric(&p, s, "rumor_loss", "gauge", "Training loss of the last round.", s->loss);
    metric(&p, s, "rumor_examples_per_second", "gauge",
           "Training examples (or tokens) a second since the start.", s->examples_per_second);
    metric(&p, s, "rumor_training_seconds_total", "counter", "Seconds spent training.",
           s->seconds);
    metric(&p, s, "rumor_wait_seconds_total", "counter",
           "Seconds spent waiting for neighbours.", s->wait_seconds);
    metric(&p, s, "rumor_wait_ratio", "gauge", "Share of the training time spent waiting.",
           s->seconds > 0 ? s->wait_seconds / s->seconds : 0.0);
    metric(&p, s, "rumor_consensus_distance", "gauge",
           "Distance of this peer's parameters to its neighbourhood's mix, |mix - x|.",
           s->consensus_distance);
    metric(&p, s, "rumor_sent_bytes_total", "counter", "Bytes sent, headers included.",
           (double)s->bytes_sent);
    metric(&p, s, "rumor_received_bytes_total", "counter", "Bytes received, headers included.",
           (double)s->bytes_received);
    metric(&p, s, "rumor_neighbors", "gauge", "In-neighbours the last round waited for.",
           s->in_neighbors);
    metric(&p, s, "rumor_neighbors_alive", "gauge",
           "In-neighbours whose parameters all arrived in the last round.",
           s->neighbors_complete);
    metric(&p, s, "rumor_members", "gauge",
           "Peers alive in this peer's membership view (--membership swim; else the list).",
           s->members > 0 ? s->members : s->peers);
    metric(&p, s, "rumor_consensus_skipped_total", "counter",
           "Compressed rounds that skipped the consensus step (copies out of sync).",
           (double)s->consensus_skipped);
    metric(&p, s, "rumor_jumps_total", "counter", "Jumps ahead to the swarm's round.",
           (double)s->jumps);
    metric(&p, s, "rumor_state_fetches_total", "counter",
           "State transfers from neighbours (catch-ups).", (double)s->state_fetches);
    metric(&p, s, "rumor_messages_accepted_total", "counter", "Messages accepted.",
           (double)s->messages.accepted);
    put(&p, "# HELP rumor_messages_rejected_total Messages dropped, by reason.\n"
            "# TYPE rumor_messages_rejected_total counter\n");
    char who[48];
    if (s->peer[0])
        snprintf(who, sizeof who, "peer=\"%s\"", s->peer);
    else
        snprintf(who, sizeof who, "rank=\"%d\"", s->rank);
    for (int r = 1; r < RUMOR_WIRE_NREJECT; r++)
        put(&p, "rumor_messages_rejected_total{%s,reason=\"%s\"} %llu\n", who,
            rumor_wire_reject_name(r), (unsigned long long)s->messages.rejected[r]);
    if (s->checkpoint_unix > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
        metric(&p, s, "rumor_checkpoint_age_seconds", "gauge",
               "Seconds since this peer's last checkpoint.", now - s->checkpoint_unix);
        metric(&p, s, "rumor_checkpoint_timestamp_seconds", "gauge",
               "Unix time of this peer's last checkpoint.", s->checkpoint_unix);
    }
    if (s->test_accuracy >= 0)
        metric(&p, s, "rumor_test_accuracy_ratio", "gauge",
               "Test accuracy of the local model at the last evaluation.", s->test_accuracy);
    if (s->eval_loss >= 0)
        metric(&p, s, "rumor_eval_loss", "gauge", "Validation loss at the last evaluation.",
               s->eval_loss);
    if (p.over)
        return rumor_err_set(RUMOR_EINVAL, "metrics page longer than %zu bytes", cap);
    return (int)p.len;
}

/* ------------------------------------------------------------ the server */

void rumor_prom_publish(rumor_prom_t *p, const rumor_prom_snapshot_t *s)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->snap = *s;
    p->have = 1;
    pthread_mutex_unlock(&p->mu);
}

#ifdef HAVE_MHD
#define PAGE_MAX 65536

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version, (void)upload, (void)state;
    rumor_prom_t *p = cls;
    static const char text[] = "text/plain; charset=utf-8";
    if (*upload_size) { /* a body on a GET: ignore it, answer at the end */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "method not allowed\n", 19);
    if (strcmp(url, "/metrics") != 0) {
        static const char nf[] = "not found: rumor-peer serves /metrics\n";
        return reply(c, MHD_HTTP_NOT_FOUND, text, nf, sizeof nf - 1);
    }
    char *buf = malloc(PAGE_MAX);
    if (!buf)
        return MHD_NO;
    pthread_mutex_lock(&p->mu);
    rumor_prom_snapshot_t s = p->snap;
    int have = p->have;
    pthread_mutex_unlock(&p->mu);
    int n;
    if (!have)
        n = snprintf(buf, PAGE_MAX, "# rumor-peer: starting, no round yet\n");
    else
        n = rumor_prom_format(&s, buf, PAGE_MAX);
    enum MHD_Result ret =
        n < 0 ? reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "page too long\n", 14)
              : reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, (size_t)n);
    free(buf);
    return ret;
}
#endif

int rumor_prom_start(const char *listen, rumor_prom_t **out)
{
    *out = NULL;
#ifndef HAVE_MHD
    (void)listen;
    return rumor_err_set(RUMOR_ENOTSUP, "--metrics-listen: rumor was built without "
                                        "libmicrohttpd (apt-get install libmicrohttpd-dev, "
                                        "then configure again)");
#else
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    if (!colon || colon == listen)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': expected ADDR:PORT, e.g. "
                                           "127.0.0.1:9400",
                             listen ? listen : "");
    char host[256];
    size_t hl = (size_t)(colon - listen);
    if (hl >= sizeof host)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen: address too long");
    memcpy(host, listen, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': port '%s' is not in 1-65535",
                             listen, colon + 1);
    struct addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(strcmp(host, "*") && strcmp(host, "0.0.0.0") ? host : "0.0.0.0", NULL,
                        &hints, &ai);
    if (g != 0 || !ai)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': cannot resolve '%s': %s",
                             listen, host, gai_strerror(g));
    struct sockaddr_in sa;
    memcpy(&sa, ai->ai_addr, sizeof sa);
    freeaddrinfo(ai);
    sa.sin_port = htons((uint16_t)port);
    rumor_prom_t *p = calloc(1, sizeof *p);
    if (!p)
        return rumor_err_set(RUMOR_ENOMEM, "metrics: out of memory");
    pthread_mutex_init(&p->mu, NULL);
    p->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                            handle, p, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)16, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                            MHD_OPTION_END);
    if (!p->d) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return rumor_err_set(RUMOR_ESYS, "--metrics-listen %s: cannot listen there (in use, or "
                                         "not this machine's address)",
                             listen);
    }
    *out = p;
    return 0;
#endif
}

void rumor_prom_stop(rumor_prom_t **pp)
{
    if (!pp || !*pp)
        return;
    rumor_prom_t *p = *pp;
#ifdef HAVE_MHD
    if (p->d)
        MHD_stop_daemon(p->d);
#endif
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}
