/* Prometheus metrics over HTTP (see promserve.h). */
#include "config.h"

#include "promserve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#ifdef HAVE_MHD
#include <microhttpd.h>
#endif

struct rumor_prom {
    pthread_mutex_t mu;
    rumor_peer_stats_t snap; /* under mu */
    atomic_int phase;           /* a rumor_peer_phase: set from signal handlers too */
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

/* A sample's value as Prometheus writes it: NaN, +Inf and -Inf spelled
 * its way (printf's "nan" is not in the text format's grammar). */
static void value(struct page *p, double v)
{
    if (isnan(v))
        put(p, "NaN\n");
    else if (isinf(v))
        put(p, v > 0 ? "+Inf\n" : "-Inf\n");
    else
        put(p, "%.17g\n", v);
}

/* One metric with its HELP and TYPE lines and the peer's labels. */
static void metric(struct page *p, const char *who, const char *name, const char *type,
                   const char *help, double v)
{
    put(p, "# HELP %s %s\n# TYPE %s %s\n%s{%s} ", name, help, name, type, name, who);
    value(p, v);
}

/* A gauge with a series per neighbour robust mixing judges: the double at
 * offset `field` of each one's rumor_robust_score_t. */
static void neighbor_gauge(struct page *p, const char *who, const rumor_peer_stats_t *s,
                           const char *name, const char *help, size_t field)
{
    put(p, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    for (int i = 0; i < s->nrobust; i++) {
        double v;
        memcpy(&v, (const char *)&s->robust[i] + field, sizeof v);
        put(p, "%s{%s,neighbor=\"%s\"} ", name, who, s->robust[i].name);
        value(p, v);
    }
}

/* Every family is on every page, from the first scrape on: a series that
 * appears only later reads as "no data" (Prometheus's instrumentation
 * guidance: avoid missing metrics). */
int rumor_prom_format(const rumor_peer_stats_t *s, rumor_peer_phase phase, char *buf,
                      size_t cap)
{
    struct page p = { buf, cap, 0, 0 };
    if (cap)
        buf[0] = '\0';
    char who[48];
    if (s->peer[0]) /* open membership: no rank, the peer's id */
        snprintf(who, sizeof who, "peer=\"%s\"", s->peer);
    else
        snprintf(who, sizeof who, "rank=\"%d\"", s->rank);
    /* a state set, as kube-state-metrics' *_phase: one series per phase */
    put(&p, "# HELP rumor_peer_phase What the peer is doing: starting (loading data and "
            "model), waiting (for neighbours, or fetching the swarm's state), training, "
            "leaving (on a signal) or done; 1 for the current phase, 0 for the others.\n"
            "# TYPE rumor_peer_phase gauge\n");
    for (int i = 0; i < RUMOR_PEER_NPHASES; i++)
        put(&p, "rumor_peer_phase{%s,phase=\"%s\"} %d\n", who, rumor_peer_phase_name((rumor_peer_phase)i), i == (int)phase);
    metric(&p, who, "rumor_round", "gauge", "The round this peer is at.", (double)s->round);
    metric(&p, who, "rumor_rounds", "gauge",
           "Rounds this run trains for (0 until the data is loaded).", (double)s->rounds_total);
    metric(&p, who, "rumor_rounds_run_total", "counter", "Rounds this process ran.",
           (double)s->rounds_run);
    metric(&p, who, "rumor_rounds_mixed_total", "counter",
           "Rounds that mixed some neighbour's parameters.", (double)s->rounds_mixed);
    metric(&p, who, "rumor_loss", "gauge", "Training loss of the last round (NaN before the "
           "first).", s->loss);
    metric(&p, who, "rumor_examples_per_second", "gauge",
           "Training examples (or tokens) a second since the start.", s->examples_per_second);
    metric(&p, who, "rumor_training_seconds_total", "counter", "Seconds spent training.",
           s->seconds);
    metric(&p, who, "rumor_wait_seconds_total", "counter",
           "Seconds spent waiting for neighbours.", s->wait_seconds);
    metric(&p, who, "rumor_wait_ratio", "gauge", "Share of the training time spent waiting.",
           s->seconds > 0 ? s->wait_seconds / s->seconds : 0.0);
    metric(&p, who, "rumor_compute_seconds_total", "counter",
           "Seconds spent computing: rounds and their local steps, not waiting.",
           s->compute_seconds);
    metric(&p, who, "rumor_compute_utilization", "gauge",
           "Share of the training time spent computing.",
           s->seconds > 0 ? s->compute_seconds / s->seconds : 0.0);
    metric(&p, who, "rumor_link_utilization", "gauge",
           "Bytes sent a second over the upload rate given by --link-mbit (NaN without it).",
           s->link_utilization);
    metric(&p, who, "rumor_consensus_distance", "gauge",
           "Distance of this peer's parameters to its neighbourhood's mix, |mix - x| (NaN "
           "before the first round).",
           s->consensus_distance);
    metric(&p, who, "rumor_sent_bytes_total", "counter", "Bytes sent, headers included.",
           (double)s->bytes_sent);
    metric(&p, who, "rumor_received_bytes_total", "counter", "Bytes received, headers included.",
           (double)s->bytes_received);
    metric(&p, who, "rumor_neighbors", "gauge", "In-neighbours the last round waited for.",
           s->in_neighbors);
    metric(&p, who, "rumor_neighbors_alive", "gauge",
           "In-neighbours whose parameters all arrived in the last round.",
           s->neighbors_complete);
    metric(&p, who, "rumor_members", "gauge",
           "Peers alive in this peer's membership view (--membership swim; else the list).",
           s->members > 0 ? s->members : s->peers);
    metric(&p, who, "rumor_consensus_skipped_total", "counter",
           "Compressed rounds that skipped the consensus step (copies out of sync).",
           (double)s->consensus_skipped);
    metric(&p, who, "rumor_jumps_total", "counter", "Jumps ahead to the swarm's round.",
           (double)s->jumps);
    metric(&p, who, "rumor_robust_ranges_total", "counter",
           "Neighbours' ranges judged by robust mixing (--robust clip).",
           (double)s->robust_ranges);
    metric(&p, who, "rumor_robust_clipped_total", "counter",
           "Neighbours' ranges clipped by robust mixing.", (double)s->robust_clipped);
    metric(&p, who, "rumor_quarantines_total", "counter",
           "Neighbours quarantined by robust mixing (each time).", (double)s->quarantines);
    metric(&p, who, "rumor_quarantine_releases_total", "counter",
           "Quarantines ended early: the neighbour's validation probes came back near its "
           "fellows' (--robust-val).", (double)s->releases);
    metric(&p, who, "rumor_quarantined", "gauge",
           "Neighbours in quarantine now (robust mixing).", s->quarantined);
    neighbor_gauge(&p, who, s, "rumor_neighbor_robust_score",
                   "A neighbour's share of ranges far beyond robust mixing's bound lately (0 to "
                   "1; quarantined past 0.6).", offsetof(rumor_robust_score_t, score));
    neighbor_gauge(&p, who, s, "rumor_neighbor_robust_val_score",
                   "A neighbour's share of validation probes far above its fellows' lately "
                   "(--robust-val; 0 to 1; quarantined past 0.6).",
                   offsetof(rumor_robust_score_t, val_score));
    neighbor_gauge(&p, who, s, "rumor_neighbor_robust_val_excess_nats",
                   "A neighbour's validation loss over the median of its probe's (--robust-val; "
                   "the last probe).", offsetof(rumor_robust_score_t, val_excess));
    put(&p, "# HELP rumor_neighbor_quarantined 1 while robust mixing keeps the neighbour in "
            "quarantine.\n# TYPE rumor_neighbor_quarantined gauge\n");
    for (int i = 0; i < s->nrobust; i++)
        put(&p, "rumor_neighbor_quarantined{%s,neighbor=\"%s\"} %d\n", who, s->robust[i].name,
            s->robust[i].quarantined);
    metric(&p, who, "rumor_state_fetches_total", "counter",
           "State transfers from neighbours (catch-ups).", (double)s->state_fetches);
    metric(&p, who, "rumor_messages_accepted_total", "counter", "Messages accepted.",
           (double)s->messages.accepted);
    put(&p, "# HELP rumor_messages_rejected_total Messages dropped, by reason.\n"
            "# TYPE rumor_messages_rejected_total counter\n");
    for (int r = 1; r < RUMOR_WIRE_NREJECT; r++)
        put(&p, "rumor_messages_rejected_total{%s,reason=\"%s\"} %llu\n", who,
            rumor_wire_reject_name(r), (unsigned long long)s->messages.rejected[r]);
    double age = NAN;
    if (s->checkpoint_unix > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        age = (double)ts.tv_sec + ts.tv_nsec * 1e-9 - s->checkpoint_unix;
    }
    metric(&p, who, "rumor_checkpoint_age_seconds", "gauge",
           "Seconds since this peer's last checkpoint (NaN before the first).", age);
    metric(&p, who, "rumor_checkpoint_timestamp_seconds", "gauge",
           "Unix time of this peer's last checkpoint (0 before the first).", s->checkpoint_unix);
    metric(&p, who, "rumor_test_accuracy_ratio", "gauge",
           "Test accuracy of the local model at the last evaluation (NaN before the first, "
           "and for language models).",
           s->test_accuracy);
    metric(&p, who, "rumor_eval_loss", "gauge",
           "Loss on the validation (or test) set at the last evaluation (NaN before the "
           "first).",
           s->eval_loss);
    if (p.over)
        return rumor_err_set(RUMOR_EINVAL, "metrics page longer than %zu bytes", cap);
    return (int)p.len;
}

/* ------------------------------------------------------------ the server */

void rumor_prom_publish(rumor_prom_t *p, const rumor_peer_stats_t *s)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->snap = *s;
    pthread_mutex_unlock(&p->mu);
}

void rumor_prom_set_phase(rumor_prom_t *p, rumor_peer_phase phase)
{
    if (p)
        atomic_store(&p->phase, (int)phase);
}

/* "ADDR:PORT" -> the IPv4 address to bind. */
static int parse_listen(const char *spec, struct sockaddr_in *sa, char *host, size_t hcap)
{
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    if (!colon || colon == spec)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': expected ADDR:PORT, e.g. "
                                           "127.0.0.1:9400 (0.0.0.0:PORT for every interface)",
                             spec ? spec : "");
    size_t hl = (size_t)(colon - spec);
    if (hl >= hcap)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%.64s...': address too long",
                             spec);
    memcpy(host, spec, hl);
    host[hl] = '\0';
    const char *ps = colon + 1;
    long port = 0;
    int digits = ps[0] != '\0' && strspn(ps, "0123456789") == strlen(ps);
    if (digits && strlen(ps) <= 5)
        port = strtol(ps, NULL, 10);
    if (!digits || port < 1 || port > 65535)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': port '%s' is not in 1-65535",
                             spec, ps);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "*") || !strcmp(host, "0.0.0.0")) {
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
        return 0;
    }
    if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
        return 0;
    if (strspn(host, "0123456789.") == strlen(host)) /* not a name: no lookup */
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': '%s' is not an IPv4 "
                                           "address",
                             spec, host);
    struct addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, NULL, &hints, &ai);
    if (g != 0 || !ai)
        return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': '%s' is neither an IPv4 "
                                           "address nor a name that resolves (%s)",
                             spec, host, g ? gai_strerror(g) : "no address");
    sa->sin_addr = ((const struct sockaddr_in *)ai->ai_addr)->sin_addr;
    freeaddrinfo(ai);
    return 0;
}

int rumor_prom_check_listen(const char *spec)
{
    struct sockaddr_in sa;
    char host[256];
    return parse_listen(spec, &sa, host, sizeof host);
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
    rumor_peer_stats_t s = p->snap;
    pthread_mutex_unlock(&p->mu);
    int n = rumor_prom_format(&s, (rumor_peer_phase)atomic_load(&p->phase), buf, PAGE_MAX);
    enum MHD_Result ret =
        n < 0 ? reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "page too long\n", 14)
              : reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, (size_t)n);
    free(buf);
    return ret;
}

/* libmicrohttpd's own messages ("Server reached connection limit", ...):
 * for RUMOR_LOG=debug, never on stderr among rumor's. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    rumor_debug("metrics server: %s", msg);
}

/* The listening socket, bound here rather than by libmicrohttpd: the
 * error then says why (libmicrohttpd says "Failed to bind to port 0"). */
static int bind_listen(const char *spec, const struct sockaddr_in *sa, const char *host,
                       int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "--metrics-listen '%s': cannot open a socket", spec);
    int one = 1; /* a restarted peer binds again at once, as any server */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        if (e == EADDRNOTAVAIL)
            return rumor_err_set(RUMOR_EINVAL, "--metrics-listen '%s': %s is not an address of "
                                               "this machine (0.0.0.0:PORT listens on all of "
                                               "them)",
                                 spec, host);
        errno = e;
        return rumor_err_sys(RUMOR_ESYS, "--metrics-listen '%s': cannot listen there%s", spec,
                             e == EADDRINUSE ? " (another process listens there)" : "");
    }
    *fd_out = fd;
    return 0;
}
#endif

int rumor_prom_start(const char *spec, const rumor_peer_stats_t *first, rumor_prom_t **out)
{
    *out = NULL;
    struct sockaddr_in sa;
    char host[256];
    RUMOR_CHECK(parse_listen(spec, &sa, host, sizeof host));
#ifndef HAVE_MHD
    (void)first;
    return rumor_err_set(RUMOR_ENOTSUP, "--metrics-listen: rumor was built without "
                                        "libmicrohttpd (apt-get install libmicrohttpd-dev, "
                                        "then configure again)");
#else
    int fd = -1;
    RUMOR_CHECK(bind_listen(spec, &sa, host, &fd));
    rumor_prom_t *p = calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return rumor_err_set(RUMOR_ENOMEM, "metrics: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    p->snap = *first;
    atomic_init(&p->phase, RUMOR_PEER_STARTING);
    /* the logger first, so that no message reaches stderr; epoll (AUTO):
     * no FD_SETSIZE limit on the descriptors' numbers. An idle connection
     * is closed after the timeout, and the limit is well above what a few
     * scrapers and probes hold, so that they cannot lock one another out. */
    p->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                            handle, p, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)RUMOR_PROM_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)RUMOR_PROM_IDLE_TIMEOUT, MHD_OPTION_END);
    if (!p->d) {
        if (fcntl(fd, F_GETFD) != -1) /* libmicrohttpd may have closed it already */
            close(fd);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return rumor_err_set(RUMOR_ESYS, "--metrics-listen '%s': cannot start the HTTP server "
                                         "(RUMOR_LOG=debug shows libmicrohttpd's reason)",
                             spec);
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
        MHD_stop_daemon(p->d); /* closes the listening socket too */
#endif
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}
