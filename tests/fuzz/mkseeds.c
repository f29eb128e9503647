/* Writes the binary seeds of the fuzz corpora: wire messages made with
 * rumor_wire_encode and checkpoints made with rumor_ckpt_save, each valid
 * one with a few broken variants. The text seeds (specs, graph, weights and
 * config files) are written by hand in tests/fuzz/corpus/.
 *
 *   make fuzz-seeds        (runs: tests/fuzz/mkseeds $(srcdir)/tests/fuzz/corpus)
 *
 * The output is the same on every run (fixed seeds and fields), so the
 * committed files change only when the formats do. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "checkpoint.h"
#include "../stageutil.h"
#include "fuzz.h"
#include "ops.h"
#include "swim.h"
#include "wire.h"

static const char *root;
static int failed;

static void put(const char *target, const char *name, const void *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, target);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "mkseeds: %s: %s\n", path, strerror(errno));
        failed = 1;
        return;
    }
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "mkseeds: %s: write failed\n", path);
        failed = 1;
    }
}

/* ----------------------------------------------------------------- wire */

#define SWARM_NAME "fuzz"

static rumor_wire_hdr_t base_hdr(int type)
{
    rumor_wire_hdr_t h = { 0 };
    h.type = (uint8_t)type;
    h.swarm = rumor_wire_swarm_id(SWARM_NAME);
    h.sender = 0x1122334455667788ULL;
    h.incarnation = 3;
    h.round = 42;
    h.space = 10;
    return h;
}

/* Header (as encoded, then patched at byte `at` with `val` when at >= 0),
 * then `rest`. */
static void wire(const char *name, const rumor_wire_hdr_t *h, const void *rest, size_t nrest,
                 int at, uint8_t val)
{
    uint8_t buf[RUMOR_WIRE_HDR_LEN + 256];
    rumor_wire_encode(h, buf);
    if (at >= 0)
        buf[at] = val;
    memcpy(buf + RUMOR_WIRE_HDR_LEN, rest, nrest);
    put("wire", name, buf, RUMOR_WIRE_HDR_LEN + nrest);
}

static void wire_seeds(void)
{
    float f4[4] = { 1.0f, -2.5f, 0.0f, 3.25f }, nan4[4] = { 1.0f, NAN, 2.0f, INFINITY };
    uint16_t bf[4] = { 0x3f80, 0xc020, 0x0000, 0x4050 };
    rumor_wire_hdr_t h;

    h = base_hdr(RUMOR_WIRE_PARAMS);
    h.dtype = RUMOR_WIRE_DT_F32;
    h.offset = 4;
    h.length = 4;
    h.chunk = 1;
    h.nchunks = 3;
    wire("01-params", &h, f4, sizeof f4, -1, 0);
    wire("02-params-nonfinite", &h, nan4, sizeof nan4, -1, 0);
    h.dtype = RUMOR_WIRE_DT_BF16;
    h.aux = 2; /* the harness's expectation accepts bf16 */
    wire("03-params-bf16", &h, bf, sizeof bf, -1, 0);

    h = base_hdr(RUMOR_WIRE_GRADS);
    h.dtype = RUMOR_WIRE_DT_F32;
    h.flags = RUMOR_WIRE_F_ALLGATHER | RUMOR_WIRE_F_LEAVING;
    h.length = 4;
    h.nchunks = 1;
    h.aux = 7;
    wire("04-grads-allgather", &h, f4, sizeof f4, -1, 0);

    for (uint32_t aux = 0; aux <= 2; aux += 2) {
        char name[32];
        h = base_hdr(RUMOR_WIRE_HELLO);
        h.aux = aux;
        snprintf(name, sizeof name, "%02u-hello-aux%u", 5 + aux, aux);
        wire(name, &h, NULL, 0, -1, 0);
    }
    h = base_hdr(RUMOR_WIRE_HEARTBEAT);
    wire("08-heartbeat", &h, NULL, 0, -1, 0);
    h = base_hdr(RUMOR_WIRE_LEAVE);
    h.flags = RUMOR_WIRE_F_LEAVING;
    wire("09-leave", &h, NULL, 0, -1, 0);
    h = base_hdr(RUMOR_WIRE_PROBE);
    h.aux = 100;
    wire("10-probe", &h, NULL, 0, -1, 0);
    h = base_hdr(RUMOR_WIRE_ACK);
    h.aux = 100;
    wire("12-ack", &h, NULL, 0, -1, 0);
    h = base_hdr(RUMOR_WIRE_STATE_REQ);
    h.offset = 0;
    h.length = 10;
    wire("13-state-req", &h, NULL, 0, -1, 0);
    h = base_hdr(RUMOR_WIRE_STATE_CHUNK);
    h.dtype = RUMOR_WIRE_DT_F32;
    h.offset = 6;
    h.length = 4;
    h.chunk = 2;
    h.nchunks = 3;
    wire("14-state-chunk", &h, f4, sizeof f4, -1, 0);

    /* broken: one field each */
    h = base_hdr(RUMOR_WIRE_HEARTBEAT);
    wire("20-bad-magic", &h, NULL, 0, 0, 'X');
    wire("21-bad-version", &h, NULL, 0, 4, 2);
    wire("22-bad-type", &h, NULL, 0, 5, 11);
    wire("23-bad-reserved", &h, NULL, 0, 11, 1);
    wire("24-bad-critical-flag", &h, NULL, 0, 6, 0x80);
    wire("25-bad-dtype", &h, NULL, 0, 10, RUMOR_WIRE_DT_F32);
    h.sender = 0;
    wire("26-sender-zero", &h, NULL, 0, -1, 0);
    h = base_hdr(RUMOR_WIRE_PARAMS);
    h.dtype = RUMOR_WIRE_DT_F32;
    h.length = 4;
    h.chunk = 3;
    h.nchunks = 3;
    wire("27-chunk-past-end", &h, f4, sizeof f4, -1, 0);
    h.chunk = 0;
    h.offset = 8; /* 8 + 4 > space 10 */
    wire("28-range-past-space", &h, f4, sizeof f4, -1, 0);
    h.offset = 0;
    wire("29-payload-short", &h, f4, sizeof f4 - 4, -1, 0);
    /* hdr_len 96: 16 extension bytes a version 1 receiver ignores */
    uint8_t ext[RUMOR_WIRE_HDR_LEN + 16] = { 0 };
    h = base_hdr(RUMOR_WIRE_HEARTBEAT);
    rumor_wire_encode(&h, ext);
    ext[8] = sizeof ext;
    memset(ext + RUMOR_WIRE_HDR_LEN, 0xee, 16);
    put("wire", "30-header-extension", ext, sizeof ext);
    put("wire", "31-short", ext, 40);
}

/* ------------------------------------------------------------ SWIM bodies */

/* Three SWIM instances on a simulated network: they find each other from
 * their seeds, then C falls silent and A and B probe it directly and through
 * each other. The first message of each (type, body flags) becomes a seed
 * (header + body, as fuzz_wire reads them). */
#define SWIM_NODES 3
#define SWIM_QUEUE 256

struct sim_msg {
    int from, type;
    uint32_t seq;
    char endpoint[RUMOR_SWIM_ENDPOINT_MAX];
    size_t len;
    uint8_t body[RUMOR_WIRE_MAX_BODY];
};

static struct sim_msg *queue;
static int nqueue, sending;
static const uint64_t sim_id[SWIM_NODES] = { 0xA1, 0xB2, 0xC3 };
static const char *const sim_ep[SWIM_NODES] = { "tcp://10.0.0.1:7001", "tcp://10.0.0.2:7002",
                                                "tcp://10.0.0.3:7003" };

static int sim_send(void *ctx, uint64_t to_id, const char *endpoint, int type, uint32_t seq,
                    const void *body, size_t len)
{
    (void)ctx;
    (void)to_id;
    if (nqueue == SWIM_QUEUE || len > RUMOR_WIRE_MAX_BODY)
        return -1;
    struct sim_msg *m = &queue[nqueue++];
    m->from = sending;
    m->type = type;
    m->seq = seq;
    snprintf(m->endpoint, sizeof m->endpoint, "%s", endpoint);
    m->len = len;
    memcpy(m->body, body, len);
    return 0;
}

static void swim_seeds(void)
{
    rumor_swim_t *sw[SWIM_NODES] = { NULL };
    int seen[RUMOR_WIRE_NTYPES][4] = { { 0 } }, nseeds = 0;
    queue = malloc(SWIM_QUEUE * sizeof *queue);
    uint8_t *frame = malloc(RUMOR_WIRE_HDR_LEN + RUMOR_WIRE_MAX_BODY);
    if (!queue || !frame)
        goto out;
    for (int i = 0; i < SWIM_NODES; i++) {
        rumor_swim_config_t c = { .self_id = sim_id[i], .incarnation = 1 + (uint64_t)i,
                                  .self_endpoint = sim_ep[i], .seed = 5 };
        if (rumor_swim_create(&c, sim_send, NULL, &sw[i]) < 0 ||
            rumor_swim_add_seed(sw[i], sim_ep[(i + 1) % SWIM_NODES]) < 0) {
            fprintf(stderr, "mkseeds: swim: %s\n", rumor_err_msg());
            failed = 1;
            goto out;
        }
    }
    for (double now = 0; now < 12; now += 0.05) {
        int c_alive = now < 4;
        for (int i = 0; i < SWIM_NODES; i++)
            if (i != 2 || c_alive) {
                sending = i;
                rumor_swim_tick(sw[i], now);
            }
        /* deliver, including what the deliveries send */
        for (int k = 0; k < nqueue; k++) {
            struct sim_msg *m = &queue[k];
            int to = -1;
            for (int i = 0; i < SWIM_NODES; i++)
                if (!strcmp(m->endpoint, sim_ep[i]))
                    to = i;
            int flags = m->len > 1 ? m->body[1] & 3 : 0;
            if (m->type > 0 && m->type < RUMOR_WIRE_NTYPES && !seen[m->type][flags] &&
                nseeds < 24) {
                rumor_wire_hdr_t h = base_hdr(m->type);
                h.sender = sim_id[m->from];
                h.incarnation = 1 + (uint64_t)m->from;
                h.aux = m->seq;
                h.space = 0;
                rumor_wire_encode(&h, frame);
                memcpy(frame + RUMOR_WIRE_HDR_LEN, m->body, m->len);
                char name[48];
                snprintf(name, sizeof name, "%02d-swim-%s-flags%d", 40 + nseeds,
                         rumor_wire_type_name(m->type), flags);
                put("wire", name, frame, RUMOR_WIRE_HDR_LEN + m->len);
                seen[m->type][flags]++;
                nseeds++;
            }
            if (to < 0 || (!c_alive && (to == 2 || m->from == 2)))
                continue;
            sending = to;
            (void)rumor_swim_on_message(sw[to], now, sim_id[m->from], 1 + (uint64_t)m->from,
                                        m->type, m->seq, m->body, m->len);
        }
        nqueue = 0;
    }
out:
    for (int i = 0; i < SWIM_NODES; i++)
        rumor_swim_destroy(&sw[i]);
    free(queue);
    free(frame);
}

/* ----------------------------------------------------------- checkpoints */

#define CKPT_MODEL "mlp:4-3-2" /* fuzz_checkpoint.c loads into this model */

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long n;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
    } else {
        free(b);
        b = NULL;
    }
    if (f)
        fclose(f);
    return b;
}

/* Saves m (and o) as round 1 into a scratch directory and returns the
 * file's bytes. */
static unsigned char *save(const char *dir, rumor_stage_t *m, rumor_optim_t *o, size_t *len)
{
    rumor_ckpt_info_t info = { .round = 1, .epoch = 2, .rank = 3, .incarnation = 4 };
    snprintf(info.swarm, sizeof info.swarm, "fuzz");
    if (rumor_ckpt_save(dir, m, o, &info, 1) < 0) {
        fprintf(stderr, "mkseeds: checkpoint save: %s\n", rumor_err_msg());
        failed = 1;
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz-r3-000000000001.safetensors", dir); /* checkpoint.h */
    unsigned char *b = slurp(path, len);
    unlink(path);
    return b;
}

static void ckpt_variants(const unsigned char *b, size_t len)
{
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h |= (uint64_t)b[i] << (8 * i);
    unsigned char *c = malloc(len + 8);
    if (!c)
        return;
    put("checkpoint", "10-truncated-data", b, len - 5);
    put("checkpoint", "11-truncated-header", b, 8 + (size_t)h / 2);
    put("checkpoint", "12-length-only", b, 8);
    memcpy(c, b, len);
    c[len - 1] ^= 0x40;
    put("checkpoint", "13-data-corrupt", c, len);
    memcpy(c, b, len);
    memcpy(c + len, "trailing", 8);
    put("checkpoint", "14-trailing-bytes", c, len + 8);
    memcpy(c, b, len);
    c[7] = 0x7f;
    put("checkpoint", "15-header-length-huge", c, len);
    memcpy(c, b, len);
    c[8] = '[';
    put("checkpoint", "16-header-not-object", c, len);
    memcpy(c, b, len);
    char *at = memmem(c + 8, (size_t)h, "\"F32\"", 5);
    if (at) {
        memcpy(at, "\"F16\"", 5);
        put("checkpoint", "17-dtype-f16", c, len);
    }
    memcpy(c, b, len);
    at = memmem(c + 8, (size_t)h, "\"shape\":[3,4]", 13);
    if (at) {
        memcpy(at, "\"shape\":[4,3]", 13);
        put("checkpoint", "18-shape-swapped", c, len);
    }
    free(c);
}

static void checkpoint_seeds(void)
{
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rumor-mkseeds-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    rumor_device_t *dev = NULL;
    rumor_stage_t *m = NULL;
    rumor_optim_t *sgd = NULL, *adamw = NULL;
    rumor_optim_config_t c;
    rumor_optim_config_default(&c);
    if (!mkdtemp(dir) || rumor_device_open("cpu:1", &dev) < 0 ||
        !(m = su_stage_new(dev, CKPT_MODEL, 1, 7, NULL)) ||
        rumor_optim_create(dev, &c, m->n, &sgd) < 0) {
        fprintf(stderr, "mkseeds: checkpoint set-up failed: %s\n", rumor_err_msg());
        failed = 1;
        goto out;
    }
    c.kind = RUMOR_OPT_ADAMW;
    if (rumor_optim_create(dev, &c, m->n, &adamw) < 0) {
        failed = 1;
        goto out;
    }
    for (size_t i = 0; i < m->n; i++) {
        sgd->m[i] = 0.01f * (float)i;
        adamw->m[i] = -0.02f * (float)i;
        adamw->v[i] = 0.001f * (float)(i + 1);
    }
    sgd->t = 5;
    adamw->t = 9;
    size_t len;
    unsigned char *b = save(dir, m, NULL, &len);
    if (b) {
        put("checkpoint", "01-params-only", b, len);
        ckpt_variants(b, len);
        free(b);
    }
    if ((b = save(dir, m, sgd, &len))) {
        put("checkpoint", "02-sgd", b, len);
        free(b);
    }
    if ((b = save(dir, m, adamw, &len))) {
        put("checkpoint", "03-adamw", b, len);
        free(b);
    }
out:
    rumor_optim_destroy(&sgd);
    rumor_optim_destroy(&adamw);
    su_stage_free(&m);
    rumor_device_close(&dev);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkseeds CORPUS_DIR (e.g. tests/fuzz/corpus)\n");
        return 2;
    }
    root = argv[1];
    if (sodium_init() < 0)
        return 1;
    fuzz_quiet();
    wire_seeds();
    swim_seeds();
    checkpoint_seeds();
    return failed;
}
