/* An open-membership mixer (mixer.h, max_peers) meets newcomers it has
 * never heard of, played by hand over raw ZeroMQ sockets (plaintext):
 *   - malformed membership messages from an unknown sender (a body of
 *     another version, no entries, a first entry that is not the sender's,
 *     an endpoint that is no tcp:// address, an id 0, no body at all, a
 *     broken header) are rejected and counted, and change nothing: no slot
 *     is given, the view stays this peer alone, nothing is answered;
 *   - a newcomer's join (PROBE with SYNC and its own record) gets it a slot
 *     and the mixer's full state, sent to the address it announced;
 *   - a member it spreads (an entry in its gossip), never in any list, gets
 *     a slot too, and the mixer probes it at its own address;
 *   - every peer of the view is a node of the graph: the view grows to 3.
 * The bodies are encoded here field by field from docs/membership.md. */
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "mixer.h"
#include "mixutil.h"
#include "swim.h"
#include "testutil.h"

#define NP 1000

typedef struct ent {
    uint64_t id, inc;
    uint32_t ref;
    int state;
    const char *ep;
} ent_t;

static size_t put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

/* version, flags, count, then the entries (docs/membership.md 1.6) */
static size_t mk_body(uint8_t *b, int version, int flags, int count, const ent_t *e, int ne)
{
    size_t p = 0;
    b[p++] = (uint8_t)version;
    b[p++] = (uint8_t)flags;
    p += put_le(b + p, (uint64_t)count, 2);
    for (int i = 0; i < ne; i++) {
        p += put_le(b + p, e[i].id, 8);
        p += put_le(b + p, e[i].inc, 8);
        p += put_le(b + p, e[i].ref, 4);
        b[p++] = (uint8_t)e[i].state;
        b[p++] = (uint8_t)strlen(e[i].ep);
        memcpy(b + p, e[i].ep, strlen(e[i].ep));
        p += strlen(e[i].ep);
    }
    return p;
}

static uint64_t swarm;

/* A SWIM message from `sender` (life inc): header and, when body, a body. */
static void send_swim(void *push, int type, uint64_t sender, uint64_t inc, uint32_t seq,
                      const uint8_t *body, size_t len)
{
    rumor_wire_hdr_t h = { 0 };
    h.type = (uint8_t)type;
    h.swarm = swarm;
    h.sender = sender;
    h.incarnation = inc;
    h.space = NP;
    h.aux = seq;
    mu_send_raw(push, &h, body, len, 0);
}

/* Waits up to `s` seconds for a message on pull; 1 and its header, or 0. */
static int recv_hdr(void *pull, double s, rumor_wire_hdr_t *h)
{
    zmq_pollitem_t it = { pull, 0, ZMQ_POLLIN, 0 };
    double end = rumor_now() + s;
    while (rumor_now() < end) {
        if (zmq_poll(&it, 1, 50) <= 0)
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        int ok = zmq_msg_recv(&m, pull, 0) >= 0 &&
                 rumor_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), h) == 0;
        int more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        while (more) { /* the body */
            zmq_msg_init(&m);
            zmq_msg_recv(&m, pull, 0);
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (ok)
            return 1;
    }
    return 0;
}

/* Waits up to `s` seconds for the mixer's view to hold n peers. */
static int wait_members(rumor_mixer_t *m, int n, double s)
{
    double end = rumor_now() + s;
    while (rumor_mixer_members(m) != n && rumor_now() < end)
        usleep(20000);
    return rumor_mixer_members(m);
}

static void *bound_pull(void *ctx, char *ep, size_t cap)
{
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int zero = 0;
    zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_bind(pull, "tcp://127.0.0.1:*");
    zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &cap);
    return pull;
}

int main(void)
{
    /* every wait here is bounded (about 2 s in all); one made unbounded by
     * a bug ends the test, not the suite's patience */
    tu_watchdog(60, "test_open_mixer");
    swarm = rumor_wire_swarm_id("open-test");
    float init[NP];
    for (int i = 0; i < NP; i++)
        init[i] = 0.001f * (float)i;
    rumor_mixer_config_t c = { 0 };
    c.listen = "tcp://127.0.0.1:*"; /* the address bound is the one announced */
    c.swarm = swarm;
    c.nparams = NP;
    c.chunk_elems = 250;
    c.membership = "ring";
    c.max_peers = 8;
    c.min_members = 1;
    rumor_mixer_t *m = NULL;
    CHECK_OK(rumor_mixer_create(&c, init, &m));
    if (!m)
        return tu_finish("test_open_mixer");
    CHECK(rumor_mixer_barrier(m, 5.0) == 0); /* alone: nobody to wait for */
    uint64_t me = rumor_mixer_self_id(m);
    CHECK(me != 0 && rumor_mixer_members(m) == 1);

    void *ctx = zmq_ctx_new();
    char ex[128], ey[128];
    void *px = bound_pull(ctx, ex, sizeof ex), *py = bound_pull(ctx, ey, sizeof ey);
    void *push = mu_push(ctx, rumor_mixer_endpoint(m));
    const uint64_t X = 0x5eed0000000000aaULL, Y = 0x5eed0000000000bbULL, INC = 42;
    uint8_t b[1024];
    rumor_wire_stats_t ws0, ws;
    mu_wire_stats(m, &ws0);

    /* ---- malformed: rejected, counted, nothing changes */
    ent_t own = { X, INC, 0, RUMOR_SWIM_ALIVE, ex };
    ent_t other = { Y, INC, 0, RUMOR_SWIM_ALIVE, ey };
    size_t n = mk_body(b, 2, 0x03, 1, &own, 1); /* version 2 */
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 1, b, n);
    n = mk_body(b, 1, 0x03, 0, NULL, 0); /* no entries */
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 2, b, n);
    n = mk_body(b, 1, 0x03, 1, &other, 1); /* first entry not the sender's */
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 3, b, n);
    ent_t bad_ep = { X, INC, 0, RUMOR_SWIM_ALIVE, "udp://10.0.0.1:7" };
    n = mk_body(b, 1, 0x03, 1, &bad_ep, 1);
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 4, b, n);
    ent_t zero_id[2] = { own, { 0, INC, 0, RUMOR_SWIM_ALIVE, ey } };
    n = mk_body(b, 1, 0x03, 2, zero_id, 2); /* an entry with id 0 */
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 5, b, n);
    n = mk_body(b, 1, 0x80, 1, &own, 1); /* an unknown flag */
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 6, b, n);
    n = mk_body(b, 1, 0x03, 1, &own, 1);
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 7, b, n - 3); /* cut short */
    send_swim(push, RUMOR_WIRE_PROBE, X, INC, 8, NULL, 0); /* no body */
    rumor_wire_hdr_t hb = { 0 };
    hb.type = RUMOR_WIRE_PROBE;
    hb.swarm = swarm;
    hb.sender = X;
    hb.incarnation = INC;
    hb.space = NP;
    mu_send_raw(push, &hb, b, n, 1); /* a broken header */
    mu_wire_stats(m, &ws);
    uint64_t rejected = rumor_wire_stats_rejected(&ws) - rumor_wire_stats_rejected(&ws0);
    CHECKF(rejected == 9, "%llu of 9 malformed messages rejected", (unsigned long long)rejected);
    CHECK(ws.rejected[RUMOR_WIRE_BAD_VERSION] >= 1 && ws.rejected[RUMOR_WIRE_BAD_FLAGS] >= 1 &&
          ws.rejected[RUMOR_WIRE_BAD_FRAMES] >= 1 && ws.rejected[RUMOR_WIRE_BAD_PAYLOAD_SIZE] >= 5);
    rumor_mixer_counters_t mc;
    usleep(600000); /* a SWIM period: nothing may come of them */
    rumor_mixer_counters(m, &mc);
    CHECK(mc.members_joined == 0 && rumor_mixer_members(m) == 1);
    rumor_wire_hdr_t h;
    CHECK(!recv_hdr(px, 0.2, &h)); /* and nothing answered */

    /* ---- a newcomer joins: a slot, and the full state at its address */
    /* (sent again each 0.3 s, as SWIM does each period: the mixer dials
     * the newcomer's address on its first word, and ZeroMQ queues nothing
     * before that connection is up) */
    n = mk_body(b, 1, 0x03, 1, &own, 1);
    int got = 0;
    for (uint32_t seq = 9; !got && seq < 19; seq++) {
        send_swim(push, RUMOR_WIRE_PROBE, X, INC, seq, b, n);
        double until = rumor_now() + 0.3; /* its answer, past the mixer's own probes */
        while (!got && recv_hdr(px, until - rumor_now(), &h))
            got = h.type == RUMOR_WIRE_ACK && h.sender == me && h.aux >= 9 && h.aux <= seq;
    }
    CHECK(got);
    CHECKF(wait_members(m, 2, 3.0) == 2, "view of %d, expected 2", rumor_mixer_members(m));
    rumor_mixer_counters(m, &mc);
    CHECK(mc.members_joined == 1);

    /* ---- a member it spreads, never in a list: a slot, and a probe there */
    ent_t gossip[2] = { own, other };
    n = mk_body(b, 1, 0, 2, gossip, 2);
    send_swim(push, RUMOR_WIRE_ACK, X, INC, 0, b, n); /* one-way gossip */
    CHECKF(wait_members(m, 3, 3.0) == 3, "view of %d, expected 3", rumor_mixer_members(m));
    int probed = 0;
    double end = rumor_now() + 5.0;
    while (!probed && rumor_now() < end)
        probed = recv_hdr(py, 0.5, &h) && h.sender == me &&
                 (h.type == RUMOR_WIRE_PROBE || h.type == RUMOR_WIRE_ACK);
    CHECK(probed);
    rumor_mixer_counters(m, &mc);
    CHECK(mc.members_joined == 2 && mc.not_allowed == 0 && mc.slots_full == 0);
    fprintf(stderr, "open mixer: 9 malformed rejected, 2 members joined, a view of %d\n",
            rumor_mixer_members(m));

    zmq_close(push);
    zmq_close(px);
    zmq_close(py);
    zmq_ctx_term(ctx);
    rumor_mixer_destroy(&m, 0.5);
    return tu_finish("test_open_mixer");
}
