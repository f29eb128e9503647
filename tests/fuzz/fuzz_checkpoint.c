/* Fuzz target: the checkpoint reader (src/checkpoint.h).
 *
 * The input is written to a file under $TMPDIR and loaded with
 * rumor_ckpt_load into a small model (MODEL, on the CPU): with no optimizer,
 * with SGD and with AdamW. checkpoint.h promises that a load either
 * succeeds, and the model then holds the data section's first nparams floats,
 * or fails and leaves the model and optimizer as they were: both are checked.
 *
 * A mutated data section fails the BLAKE2b check, which no fuzzer gets
 * past; so when the header has a "blake2b" value, the input is loaded a
 * second time with that value replaced by the digest of its data section, to
 * reach the code after the check (non-finite values, the copy into the
 * model and optimizer). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "../stageutil.h"
#include "fuzz.h"
#include "ops.h"

#define MODEL "mlp:4-3-2" /* 23 parameters, as tests/fuzz/mkseeds.c saves */

static rumor_device_t *dev;
static rumor_stage_t *model;
static rumor_optim_t *sgd, *adamw;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_checkpoint: %s\n", what);
    abort();
}

/* The device, model and optimizers live for the whole process (reachable
 * from these statics: not leaks). */
static void setup(void)
{
    if (model)
        return;
    fuzz_quiet();
    rumor_optim_config_t c;
    if (sodium_init() < 0 || rumor_device_open("cpu:1", &dev) < 0 ||
        !(model = su_stage_new(dev, MODEL, 1, 1, NULL)))
        fail("cannot set up the model");
    rumor_optim_config_default(&c);
    c.kind = RUMOR_OPT_SGD;
    if (rumor_optim_create(dev, &c, model->n, &sgd) < 0)
        fail("cannot set up SGD");
    c.kind = RUMOR_OPT_ADAMW;
    if (rumor_optim_create(dev, &c, model->n, &adamw) < 0)
        fail("cannot set up AdamW");
}

/* Fills the model and optimizer state with a recognizable pattern. */
static void fill(rumor_optim_t *o)
{
    for (size_t i = 0; i < model->n; i++) {
        model->params[i] = 0.5f + (float)i;
        if (o) {
            o->m[i] = -1.0f - (float)i;
            if (o->v)
                o->v[i] = 2.0f + (float)i;
        }
    }
    if (o)
        o->t = 12345;
}

static int unchanged(const rumor_optim_t *o)
{
    for (size_t i = 0; i < model->n; i++) {
        if (model->params[i] != 0.5f + (float)i)
            return 0;
        if (o && (o->m[i] != -1.0f - (float)i || (o->v && o->v[i] != 2.0f + (float)i)))
            return 0;
    }
    return !o || o->t == 12345;
}

/* Header length of the input (8 bytes LE), or UINT64_MAX when short. */
static uint64_t header_len(const uint8_t *data, size_t size)
{
    if (size < 8)
        return UINT64_MAX;
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h |= (uint64_t)data[i] << (8 * i);
    return h;
}

static void load(const char *path, const uint8_t *data, size_t size, rumor_optim_t *o)
{
    rumor_ckpt_info_t info;
    memset(&info, 0x5a, sizeof info);
    fill(o);
    int rc = rumor_ckpt_load(path, model, o, &info);
    if (rc < 0) {
        if (!unchanged(o))
            fail("a failed load changed the model or the optimizer");
        return;
    }
    if (rc != 0)
        fail("load returned a positive value");
    /* success: the data section starts with the parameters, verbatim */
    uint64_t h = header_len(data, size);
    if (h > size - 8 || size - 8 - h < model->n * sizeof(float))
        fail("a load succeeded on a file too short for the parameters");
    if (memcmp(model->params, data + 8 + h, model->n * sizeof(float)))
        fail("the loaded parameters are not the file's");
    if (strcmp(info.model, model->model->spec) || memchr(info.optimizer, '\0', sizeof info.optimizer) ==
        NULL || memchr(info.swarm, '\0', sizeof info.swarm) == NULL || info.round < 0)
        fail("info not filled as documented");
    if (o && strcmp(info.optimizer, "none") && o->t != info.optim_t)
        fail("optimizer step count not restored");
}

/* Replaces the "blake2b" value in a copy of the header with the digest of
 * the data section; NULL when the input has no such value. */
static uint8_t *fix_digest(const uint8_t *data, size_t size)
{
    uint64_t h = header_len(data, size);
    if (size < 8 || h > size - 8)
        return NULL;
    const char key[] = "\"blake2b\"";
    const uint8_t *hdr = data + 8, *end = hdr + h;
    const uint8_t *at = memmem(hdr, h, key, sizeof key - 1);
    if (!at)
        return NULL;
    at += sizeof key - 1;
    while (at < end && (*at == ' ' || *at == ':'))
        at++;
    if (at >= end || *at != '"' || end - at < 66)
        return NULL;
    at++;
    uint8_t *copy = malloc(size), digest[32];
    if (!copy)
        return NULL;
    memcpy(copy, data, size);
    crypto_generichash(digest, sizeof digest, end, (size_t)(data + size - end), NULL, 0);
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    memcpy(copy + (at - data), hex, 64);
    return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    const char *path = fuzz_tmpfile("ckpt", ".safetensors");
    if (!path || fuzz_write(path, data, size) < 0)
        abort();
    load(path, data, size, NULL);
    load(path, data, size, sgd);
    load(path, data, size, adamw);
    uint8_t *fixed = fix_digest(data, size);
    if (fixed) {
        if (fuzz_write(path, fixed, size) < 0)
            abort();
        load(path, fixed, size, NULL);
        load(path, fixed, size, adamw);
        free(fixed);
    }
    return 0;
}
