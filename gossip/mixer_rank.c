/* The rank check: is another process already running as this peer?
 *
 * Two processes started with the same --rank (the same key, the same place
 * in the peer list) would both talk to the neighbours, which would take
 * each for a restart of the other and drop the older one's messages: the
 * peer's link cut for the rest of the run, and nothing said. So before it
 * says anything (HELLO, SWIM, LEAVE: the comm thread starts with this
 * check) a peer sends one message to its own listed address (HELLO
 * aux MX_HELLO_RANK_CHECK, a random nonce in the round field, its bound
 * address in the body) from a probe socket that, on a secure swarm,
 * authenticates the server with this peer's own public key:
 *   - the message comes back to this peer: the address is its own; passed;
 *   - the connection is refused, or no handshake completes within 1.5 s
 *     (nobody there, or a frozen process): passed;
 *   - a handshake completes (the other end holds this peer's secret key, or
 *     on a plaintext swarm, any peer is there) but the message does not
 *     come back within a second: another process is this peer. The barrier
 *     then fails with a message naming the rank and both addresses, and the
 *     other process logs that it refused a second copy of itself.
 * Runs on the comm thread. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "mixer_int.h"

#define RANK_NO_ANSWER_S 1.5  /* no handshake by then: nobody else is there */
#define RANK_ECHO_S 1.0       /* handshake done, our message not back by then: conflict */

static void passed(rumor_mixer_t *m)
{
    rumor_transport_probe_close(m->tr);
    m->rank_state = 2;
}

void mx_rank_start(rumor_mixer_t *m)
{
    if (m->rank_state != 0)
        return;
    const char *ep = m->ep[m->self];
    if (!ep) {
        passed(m);
        return;
    }
    randombytes_buf(&m->rank_nonce, sizeof m->rank_nonce);
    m->rank_nonce &= (1ULL << 62) - 1;
    rumor_wire_hdr_t h;
    uint8_t bytes[RUMOR_WIRE_HDR_LEN];
    mx_fill_hdr(m, &h, RUMOR_WIRE_HELLO);
    h.aux = MX_HELLO_RANK_CHECK;
    h.round = m->rank_nonce;
    rumor_wire_encode(&h, bytes);
    const char *me = rumor_transport_endpoint(m->tr);
    if (rumor_transport_probe_open(m->tr, ep, bytes, sizeof bytes, me, strlen(me)) < 0) {
        rumor_warn("rank check: %s; going on without it", rumor_err_msg());
        passed(m);
        return;
    }
    m->rank_state = 1;
    m->rank_started = rumor_now();
    m->rank_handshake = 0;
}

void mx_rank_progress(rumor_mixer_t *m)
{
    if (m->rank_state != 1)
        return;
    double now = rumor_now();
    int st = rumor_transport_probe_state(m->tr);
    if ((st & RUMOR_PROBE_HANDSHAKE) && m->rank_handshake == 0)
        m->rank_handshake = now;
    if (m->rank_handshake > 0 && now - m->rank_handshake > RANK_ECHO_S) {
        if (m->open) /* an open swarm: the address announced is another's */
            snprintf(m->rank_err, sizeof m->rank_err,
                     "another process %sanswers at this peer's address %s, and this one "
                     "listens on %s; stop the other process or announce another address",
                     rumor_transport_secure(m->tr) ? "holding this peer's key " : "",
                     m->ep[m->self], rumor_transport_endpoint(m->tr));
        else
            snprintf(m->rank_err, sizeof m->rank_err,
                     "rank %d is taken: another process %sanswers at this rank's address %s, "
                     "and this one listens on %s; stop the other process or give this one "
                     "another rank",
                     m->self, rumor_transport_secure(m->tr) ? "holding this rank's key " : "",
                     m->ep[m->self], rumor_transport_endpoint(m->tr));
        rumor_transport_probe_close(m->tr);
        m->rank_state = -1;
        return;
    }
    if (m->rank_handshake == 0 && ((st & RUMOR_PROBE_FAILED) || now - m->rank_started > RANK_NO_ANSWER_S))
        passed(m);
}

int mx_rank_on_self(rumor_mixer_t *m, const rumor_wire_hdr_t *h, zmq_msg_t *body, int nbody)
{
    if (h->incarnation == m->incarnation) {
        if (m->rank_state == 1 && h->round == m->rank_nonce)
            passed(m);
        return 1;
    }
    double now = rumor_now();
    if (now - m->other_self_warned > 10.0) {
        m->other_self_warned = now;
        char where[200] = "an address it did not give";
        if (nbody && zmq_msg_size(body) > 0 && zmq_msg_size(body) < 160) {
            size_t n = zmq_msg_size(body);
            const char *p = zmq_msg_data(body);
            int printable = 1;
            for (size_t i = 0; i < n; i++)
                printable &= p[i] >= 0x20 && p[i] < 0x7f;
            if (printable)
                snprintf(where, sizeof where, "%.*s", (int)n, p);
        }
        rumor_warn("another process claims to be this peer (rank %d, listening on %s): it is "
                   "refused; this peer goes on at %s",
                   m->self, where, rumor_transport_endpoint(m->tr));
    }
    return 0;
}
