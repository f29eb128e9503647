/* Helpers of the mixer tests that play a neighbour by hand: a raw ZeroMQ
 * PUSH socket connected to a mixer, messages encoded field by field, and
 * the mixer's rejection counters. Header-only, for tests. */
#ifndef RUMOR_TESTS_MIXUTIL_H
#define RUMOR_TESTS_MIXUTIL_H

#include <stdio.h>
#include <unistd.h>
#include <zmq.h>

#include "mixer.h"
#include "wire.h"

/* A PUSH socket connected to endpoint (no linger), given 0.2 s to connect. */
static inline void *mu_push(void *ctx, const char *endpoint)
{
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(push, endpoint);
    usleep(200000);
    return push;
}

/* Sends header h (its magic spoiled when corrupt_magic) and, when payload
 * is not NULL, a payload frame of `bytes` bytes. */
static inline void mu_send_raw(void *push, const rumor_wire_hdr_t *h, const void *payload,
                               size_t bytes, int corrupt_magic)
{
    uint8_t b[RUMOR_WIRE_HDR_LEN];
    rumor_wire_encode(h, b);
    if (corrupt_magic)
        b[0] ^= 0xff;
    zmq_send(push, b, sizeof b, payload ? ZMQ_SNDMORE : 0);
    if (payload)
        zmq_send(push, payload, bytes, 0);
}

/* The mixer's message counters, after 0.1 s for the last messages to be
 * judged, printed on one line. */
static inline void mu_wire_stats(rumor_mixer_t *m, rumor_wire_stats_t *ws)
{
    char line[512];
    usleep(100000);
    rumor_mixer_wire_stats(m, ws);
    rumor_wire_stats_format(ws, line, sizeof line);
    fprintf(stderr, "hostile: %s\n", line);
}

#endif
