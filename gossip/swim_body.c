/* SWIM bodies: little-endian, versioned, every length checked before it is
 * used (docs/membership.md, "Body format"). */
#include "config.h"

#include <string.h>

#include "swim_int.h"
#include "le.h"
#include "wire.h"

/* Rejection reasons for a malformed body. wire.h has no reason of its own
 * for "body content"; BAD_PAYLOAD_SIZE is the nearest, and the message says
 * what exactly was wrong. */
#define BAD_BODY RUMOR_WIRE_BAD_PAYLOAD_SIZE


void swim_body_begin(struct body_w *w, uint8_t *buf, size_t cap, uint8_t flags)
{
    w->buf = buf;
    w->cap = cap;
    w->count = 0;
    buf[0] = RUMOR_SWIM_BODY_VERSION;
    buf[1] = flags;
    put16(buf + 2, 0);
    w->len = SWIM_BODY_FIXED;
}

void swim_body_target(struct body_w *w, uint64_t id, const char *ep)
{
    size_t l = strlen(ep);
    put64(w->buf + w->len, id);
    w->buf[w->len + 8] = (uint8_t)l;
    memcpy(w->buf + w->len + 9, ep, l);
    w->len += 9 + l;
}

int swim_body_entry(struct body_w *w, const rumor_swim_member_t *m)
{
    size_t l = strlen(m->endpoint);
    int relay = (m->reach & RUMOR_SWIM_RELAY) != 0;
    size_t rl = relay ? strlen(m->relay) : 0;
    int by = m->state == RUMOR_SWIM_SUSPECT && m->by;
    size_t need = SWIM_ENTRY_FIXED + l + (relay ? 1 + rl : 0) + (by ? 8 : 0);
    if (w->len + need > w->cap || w->count == UINT16_MAX)
        return -1;
    uint8_t *p = w->buf + w->len;
    put64(p, m->id);
    put64(p + 8, m->incarnation);
    put32(p + 16, m->refutation);
    p[20] = (uint8_t)(m->state | (m->reach & (RUMOR_SWIM_RELAYED | RUMOR_SWIM_RELAY)) |
                      (by ? SWIM_BY : 0));
    p[21] = (uint8_t)l;
    memcpy(p + 22, m->endpoint, l);
    if (relay) {
        p[22 + l] = (uint8_t)rl;
        memcpy(p + 23 + l, m->relay, rl);
    }
    if (by)
        put64(p + need - 8, m->by);
    w->len += need;
    w->count++;
    return 0;
}

size_t swim_body_end(struct body_w *w)
{
    put16(w->buf + 2, w->count);
    return w->len;
}

const uint8_t *swim_body_get(const uint8_t *p, rumor_swim_member_t *m)
{
    memset(m, 0, sizeof *m);
    m->id = get64(p);
    m->incarnation = get64(p + 8);
    m->refutation = get32(p + 16);
    m->state = p[20] & SWIM_STATE_MASK;
    m->reach = p[20] & (RUMOR_SWIM_RELAYED | RUMOR_SWIM_RELAY);
    memcpy(m->endpoint, p + 22, p[21]);
    m->endpoint[p[21]] = 0;
    const uint8_t *next = p + SWIM_ENTRY_FIXED + p[21];
    if (m->reach & RUMOR_SWIM_RELAY) {
        memcpy(m->relay, next + 1, next[0]);
        m->relay[next[0]] = 0;
        next += 1 + next[0];
    }
    if (p[20] & SWIM_BY) {
        m->by = get64(next);
        next += 8;
    }
    return next;
}

int swim_body_parse(const void *body, size_t len, int type, uint64_t sender, uint64_t sender_inc,
                    struct swim_body *out, const char **why)
{
    const uint8_t *b = body;
    if (len < SWIM_BODY_FIXED)
        return *why = "body shorter than 4 bytes", BAD_BODY;
    if (b[0] != RUMOR_SWIM_BODY_VERSION)
        return *why = "unknown body version", RUMOR_WIRE_BAD_VERSION;
    uint8_t flags = b[1];
    if (flags & ~SWIM_FLAGS_KNOWN)
        return *why = "unknown body flag", RUMOR_WIRE_BAD_FLAGS;
    if ((flags & RUMOR_SWIM_F_SYNC) && type != RUMOR_WIRE_PROBE)
        return *why = "SYNC flag on a type other than PROBE", RUMOR_WIRE_BAD_FLAGS;
    if ((flags & RUMOR_SWIM_F_STATE) && type == RUMOR_WIRE_PROBE_REQ)
        return *why = "STATE flag on a PROBE_REQ", RUMOR_WIRE_BAD_FLAGS;
    memset(out, 0, sizeof *out);
    out->flags = flags;
    out->count = get16(b + 2);
    if (!out->count)
        return *why = "no entries (the sender's own record is required)", BAD_BODY;
    size_t pos = SWIM_BODY_FIXED;
    if (type == RUMOR_WIRE_PROBE_REQ) {
        if (len - pos < 9)
            return *why = "PROBE_REQ target truncated", BAD_BODY;
        out->target_id = get64(b + pos);
        size_t l = b[pos + 8];
        pos += 9;
        if (!out->target_id)
            return *why = "PROBE_REQ target id 0", BAD_BODY;
        if (len - pos < l)
            return *why = "PROBE_REQ target endpoint truncated", BAD_BODY;
        if (!rumor_swim_endpoint_valid((const char *)b + pos, l))
            return *why = "PROBE_REQ target endpoint invalid", BAD_BODY;
        memcpy(out->target_ep, b + pos, l);
        out->target_ep[l] = 0;
        pos += l;
    }
    out->entries = b + pos;
    for (uint32_t i = 0; i < out->count; i++) {
        if (len - pos < SWIM_ENTRY_FIXED)
            return *why = "entry truncated (count beyond the body)", BAD_BODY;
        const uint8_t *e = b + pos;
        size_t l = e[21];
        if (!get64(e))
            return *why = "entry with id 0", BAD_BODY;
        int st = e[20] & SWIM_STATE_MASK;
        if (st > RUMOR_SWIM_LEFT || (e[20] & ~(SWIM_STATE_MASK | RUMOR_SWIM_RELAYED |
                                               RUMOR_SWIM_RELAY | SWIM_BY)))
            return *why = "entry with an unknown state", BAD_BODY;
        if ((e[20] & SWIM_BY) && st != RUMOR_SWIM_SUSPECT)
            return *why = "a suspecter on an entry that is not a suspicion", BAD_BODY;
        if (len - pos - SWIM_ENTRY_FIXED < l)
            return *why = "entry endpoint truncated", BAD_BODY;
        if (!rumor_swim_endpoint_valid((const char *)e + SWIM_ENTRY_FIXED, l))
            return *why = "entry endpoint invalid", BAD_BODY;
        if (i == 0 && (get64(e) != sender || get64(e + 8) != sender_inc ||
                       (st != RUMOR_SWIM_ALIVE && st != RUMOR_SWIM_LEFT)))
            return *why = "first entry is not the sender's own (id, incarnation, alive or left)",
                   BAD_BODY;
        pos += SWIM_ENTRY_FIXED + l;
        if (e[20] & RUMOR_SWIM_RELAY) { /* the relay's control endpoint */
            if (len - pos < 1 || len - pos - 1 < b[pos])
                return *why = "entry relay endpoint truncated", BAD_BODY;
            if (!rumor_swim_endpoint_valid((const char *)b + pos + 1, b[pos]))
                return *why = "entry relay endpoint invalid", BAD_BODY;
            pos += 1 + (size_t)b[pos];
        }
        if (e[20] & SWIM_BY) {
            if (len - pos < 8)
                return *why = "entry suspecter truncated", BAD_BODY;
            uint64_t by = get64(b + pos);
            if (!by || by == get64(e))
                return *why = "entry suspecter is 0 or the suspect itself", BAD_BODY;
            pos += 8;
        }
    }
    if (pos != len)
        return *why = "trailing bytes after the entries", BAD_BODY;
    return 0;
}
