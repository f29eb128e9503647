/* The ZAP handler (ZeroMQ RFC 27): a thread that admits CURVE clients whose
 * key is on the allow-list and refuses everything else (see curve.h). */
#include "curve.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_MAX_FRAMES 8

struct rumor_zap {
    void *rep;      /* the handler thread's after start */
    void *ctl_in;   /* the handler thread's: a byte here means stop */
    void *ctl_out;  /* the stopper's */
    pthread_t thread;
    int running;
    rumor_allowlist_t *allow;
    _Atomic uint64_t admitted, not_listed, mechanism, malformed;
};

static int frame_is(zmq_msg_t *m, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size(m) == n && memcmp(zmq_msg_data(m), s, n) == 0;
}

/* Sends the 6-frame reply of RFC 27 (empty metadata). */
static void zap_reply(rumor_zap_t *z, zmq_msg_t *reqid, const char *status, const char *text,
                      const char *user)
{
    zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
    if (reqid)
        zmq_send(z->rep, zmq_msg_data(reqid), zmq_msg_size(reqid), ZMQ_SNDMORE);
    else
        zmq_send(z->rep, "", 0, ZMQ_SNDMORE);
    zmq_send(z->rep, status, strlen(status), ZMQ_SNDMORE);
    zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(z->rep, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(z->rep, "", 0, 0);
}

/* Reads one request and answers it. Frames: version, request id, domain,
 * address, routing id, mechanism, credentials... */
static void zap_handle(rumor_zap_t *z)
{
    zmq_msg_t f[ZAP_MAX_FRAMES];
    int n = 0, more = 1, extra = 0;
    while (more) {
        zmq_msg_t scratch, *m = n < ZAP_MAX_FRAMES ? &f[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, z->rep, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        if (m == &scratch) {
            extra = 1;
            zmq_msg_close(m);
        } else {
            n++;
        }
    }
    zmq_msg_t *reqid = n >= 2 ? &f[1] : NULL;
    if (n < 6 || extra || !frame_is(&f[0], "1.0")) {
        atomic_fetch_add(&z->malformed, 1);
        rumor_debug("zap: malformed request (%d frames) denied", n);
        zap_reply(z, reqid, "400", "malformed ZAP request", "");
    } else if (!frame_is(&f[5], "CURVE")) {
        atomic_fetch_add(&z->mechanism, 1);
        rumor_debug("zap: mechanism %.*s denied", (int)(zmq_msg_size(&f[5]) > 16 ? 16 : zmq_msg_size(&f[5])),
                    (const char *)zmq_msg_data(&f[5]));
        zap_reply(z, reqid, "400", "only CURVE is allowed", "");
    } else if (n != 7 || zmq_msg_size(&f[6]) != RUMOR_CURVE_KEY_BYTES) {
        atomic_fetch_add(&z->malformed, 1);
        zap_reply(z, reqid, "400", "malformed CURVE credentials", "");
    } else {
        const uint8_t *pk = zmq_msg_data(&f[6]);
        char z85[RUMOR_CURVE_Z85_LEN + 1];
        rumor_curve_z85_encode(pk, z85);
        if (rumor_allowlist_contains(z->allow, pk)) {
            atomic_fetch_add(&z->admitted, 1);
            zap_reply(z, reqid, "200", "OK", z85);
        } else {
            atomic_fetch_add(&z->not_listed, 1);
            rumor_debug("zap: key %s is not on the allow-list: denied", z85);
            zap_reply(z, reqid, "400", "key not on the allow-list", "");
        }
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *zap_main(void *arg)
{
    rumor_zap_t *z = arg;
    for (;;) {
        zmq_pollitem_t it[2] = { { z->rep, 0, ZMQ_POLLIN, 0 }, { z->ctl_in, 0, ZMQ_POLLIN, 0 } };
        if (zmq_poll(it, 2, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break; /* ETERM: the context is going away */
        }
        if (it[1].revents & ZMQ_POLLIN)
            break;
        if (it[0].revents & ZMQ_POLLIN)
            zap_handle(z);
    }
    zmq_close(z->rep);
    zmq_close(z->ctl_in);
    return NULL;
}

static void *linger0_socket(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0;
    if (s)
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    return s;
}

int rumor_zap_start(void *ctx, const rumor_allowlist_t *allow, rumor_zap_t **out)
{
    *out = NULL;
    if (!ctx || !allow)
        return rumor_err_set(RUMOR_EINVAL, "zap: %s", ctx ? "no allow-list" : "no context");
    rumor_zap_t *z = calloc(1, sizeof *z);
    if (!z || !(z->allow = rumor_allowlist_dup(allow))) {
        free(z);
        return rumor_err_set(RUMOR_ENOMEM, "zap: out of memory");
    }
    int rc = 0;
    char ctl[64];
    snprintf(ctl, sizeof ctl, "inproc://rumor-zap-ctl-%p", (void *)z);
    z->rep = linger0_socket(ctx, ZMQ_REP);
    z->ctl_in = linger0_socket(ctx, ZMQ_PAIR);
    z->ctl_out = linger0_socket(ctx, ZMQ_PAIR);
    if (!z->rep || !z->ctl_in || !z->ctl_out)
        rc = rumor_err_set(RUMOR_ESYS, "zap: zmq_socket: %s", zmq_strerror(zmq_errno()));
    if (rc == 0 && zmq_bind(z->rep, ZAP_ENDPOINT) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "zap: cannot bind %s: %s%s", ZAP_ENDPOINT,
                           zmq_strerror(zmq_errno()),
                           zmq_errno() == EADDRINUSE ? " (this context has a ZAP handler)" : "");
    if (rc == 0 && (zmq_bind(z->ctl_in, ctl) != 0 || zmq_connect(z->ctl_out, ctl) != 0))
        rc = rumor_err_set(RUMOR_ESYS, "zap: control pipe: %s", zmq_strerror(zmq_errno()));
    if (rc == 0 && pthread_create(&z->thread, NULL, zap_main, z) != 0)
        rc = rumor_err_set(RUMOR_ESYS, "zap: cannot start the handler thread");
    if (rc < 0) {
        if (z->rep)
            zmq_close(z->rep);
        if (z->ctl_in)
            zmq_close(z->ctl_in);
        if (z->ctl_out)
            zmq_close(z->ctl_out);
        rumor_allowlist_destroy(&z->allow);
        free(z);
        return rc;
    }
    z->running = 1;
    *out = z;
    return 0;
}

void rumor_zap_stop(rumor_zap_t **zp)
{
    if (!zp || !*zp)
        return;
    rumor_zap_t *z = *zp;
    if (z->running) {
        /* The PAIR is connected to a bound inproc peer: the byte is queued
         * at once, and the thread leaves its poll on it. */
        zmq_send(z->ctl_out, "", 0, 0);
        pthread_join(z->thread, NULL);
    }
    zmq_close(z->ctl_out);
    rumor_allowlist_destroy(&z->allow);
    free(z);
    *zp = NULL;
}

void rumor_zap_stats(const rumor_zap_t *z, rumor_zap_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!z)
        return;
    rumor_zap_t *m = (rumor_zap_t *)z; /* atomics are read, never written */
    out->admitted = atomic_load(&m->admitted);
    out->denied_not_listed = atomic_load(&m->not_listed);
    out->denied_mechanism = atomic_load(&m->mechanism);
    out->malformed = atomic_load(&m->malformed);
}
