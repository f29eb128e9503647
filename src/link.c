/* Links between stages' devices (see link.h). Every copy goes through the
 * devices' ops tables: NCCL is the CUDA table's clique, present when rumor
 * is built with NCCL. */
#include "link.h"

#include <stdlib.h>
#include <string.h>

struct rumor_link {
    rumor_link_kind kind;
    rumor_device_t *a, *b;
    rumor_stream_t *sa, *sb; /* the link's streams on a and b (GPUs only) */
    rumor_clique_t *clique;  /* RUMOR_LINK_NCCL: a's and b's (their clique_open) */
    rumor_event_t *ea, *eb;  /* NCCL: the send on sa (sb) done, for the other end */
};

static const char *const kind_names[] = { "host copy", "device copy", "host<->device copy",
                                          "peer copy", "NCCL" };

const char *rumor_link_kind_name(rumor_link_kind k)
{
    return (unsigned)k <= RUMOR_LINK_NCCL ? kind_names[k] : "?";
}

rumor_link_kind rumor_link_get_kind(const rumor_link_t *l) { return l->kind; }

void rumor_link_destroy(rumor_link_t **lp)
{
    if (!lp || !*lp)
        return;
    rumor_link_t *l = *lp;
    if (l->sa)
        l->a->ops->stream_destroy(l->a, l->sa);
    if (l->sb)
        l->b->ops->stream_destroy(l->b, l->sb);
    if (l->clique)
        l->a->ops->clique_close(l->clique);
    if (l->ea)
        l->a->ops->event_destroy(l->a, l->ea);
    if (l->eb)
        l->b->ops->event_destroy(l->b, l->eb);
    free(l);
    *lp = NULL;
}

int rumor_link_create(rumor_device_t *a, rumor_device_t *b, int use_nccl, rumor_link_t **out)
{
    *out = NULL;
    rumor_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return rumor_err_set(RUMOR_ENOMEM, "link: out of memory");
    l->a = a;
    l->b = b;
    int rc = 0;
    if (a->kind == RUMOR_DEV_CPU && b->kind == RUMOR_DEV_CPU)
        l->kind = RUMOR_LINK_HOST;
    else if (a->kind == RUMOR_DEV_CPU || b->kind == RUMOR_DEV_CPU)
        l->kind = RUMOR_LINK_UPLOAD;
    else if (a->index == b->index)
        l->kind = RUMOR_LINK_DEVICE;
    else
        l->kind = RUMOR_LINK_PEER;
    if (a->kind != RUMOR_DEV_CPU)
        rc = a->ops->stream_create(a, &l->sa);
    if (rc == 0 && b->kind != RUMOR_DEV_CPU)
        rc = b->ops->stream_create(b, &l->sb);
    if (rc == 0 && l->kind == RUMOR_LINK_PEER && use_nccl && a->ops->clique_open) {
        rumor_device_t *devs[2] = { a, b };
        rc = a->ops->clique_open(devs, 2, &l->clique);
        if (rc == 0)
            l->kind = RUMOR_LINK_NCCL;
        if (rc == 0)
            rc = a->ops->event_create(a, &l->ea);
        if (rc == 0)
            rc = b->ops->event_create(b, &l->eb);
    }
    if (rc < 0) {
        rumor_link_destroy(&l);
        return rumor_err_prefix(rc, "link %s -> %s", a->name, b->name);
    }
    *out = l;
    return 0;
}

int rumor_link_copy(rumor_link_t *l, int forward, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return 0;
    rumor_device_t *sd = forward ? l->a : l->b, *dd = forward ? l->b : l->a;
    rumor_stream_t *ss = forward ? l->sa : l->sb, *ds = forward ? l->sb : l->sa;
    switch (l->kind) {
    case RUMOR_LINK_HOST:
        memcpy(dst, src, bytes);
        return 0;
    case RUMOR_LINK_UPLOAD:
        if (dd->kind == RUMOR_DEV_CPU) {
            RUMOR_CHECK(sd->ops->download_async(sd, dst, src, bytes, ss));
            return sd->ops->stream_sync(sd, ss);
        }
        RUMOR_CHECK(dd->ops->upload_async(dd, dst, src, bytes, ds));
        return dd->ops->stream_sync(dd, ds);
    case RUMOR_LINK_DEVICE:
    case RUMOR_LINK_PEER:
        RUMOR_CHECK(dd->ops->copy_peer(dd, dst, sd, src, bytes, ds));
        return dd->ops->stream_sync(dd, ds);
    case RUMOR_LINK_NCCL:
        RUMOR_CHECK(sd->ops->clique_copy(l->clique, dd, dst, ds, sd, src, ss, bytes));
        RUMOR_CHECK(sd->ops->stream_sync(sd, ss));
        return dd->ops->stream_sync(dd, ds);
    default:
        return rumor_err_set(RUMOR_ESTATE, "link: kind %d", (int)l->kind);
    }
}

int rumor_link_copy_ordered(rumor_link_t *l, int forward, void *dst, const void *src,
                            size_t bytes, rumor_event_t *after_src, rumor_event_t *after_dst,
                            rumor_event_t *done)
{
    if (!bytes)
        return 0;
    rumor_device_t *sd = forward ? l->a : l->b, *dd = forward ? l->b : l->a;
    rumor_stream_t *ss = forward ? l->sa : l->sb, *ds = forward ? l->sb : l->sa;
    if (after_src && sd->kind != RUMOR_DEV_CPU && l->kind != RUMOR_LINK_DEVICE &&
        l->kind != RUMOR_LINK_PEER)
        RUMOR_CHECK(sd->ops->stream_wait(sd, ss, after_src));
    if (after_dst && dd->kind != RUMOR_DEV_CPU)
        RUMOR_CHECK(dd->ops->stream_wait(dd, ds, after_dst));
    switch (l->kind) {
    case RUMOR_LINK_HOST:
        memcpy(dst, src, bytes);
        return 0;
    case RUMOR_LINK_UPLOAD: /* the CPU end waits for the bytes */
        if (dd->kind == RUMOR_DEV_CPU) {
            RUMOR_CHECK(sd->ops->download_async(sd, dst, src, bytes, ss));
            return sd->ops->stream_sync(sd, ss);
        }
        RUMOR_CHECK(dd->ops->upload_async(dd, dst, src, bytes, ds));
        RUMOR_CHECK(dd->ops->stream_sync(dd, ds)); /* src: the CPU stage's, reused */
        return done ? dd->ops->event_record(dd, done, ds) : 0;
    case RUMOR_LINK_DEVICE:
    case RUMOR_LINK_PEER: /* one copy on ds reads src and writes dst */
        if (after_src)
            RUMOR_CHECK(dd->ops->stream_wait(dd, ds, after_src));
        RUMOR_CHECK(dd->ops->copy_peer(dd, dst, sd, src, bytes, ds));
        return done ? dd->ops->event_record(dd, done, ds) : 0;
    case RUMOR_LINK_NCCL: { /* the send on ss, the receive on ds: done after both */
        RUMOR_CHECK(sd->ops->clique_copy(l->clique, dd, dst, ds, sd, src, ss, bytes));
        rumor_event_t *sent = forward ? l->ea : l->eb;
        RUMOR_CHECK(sd->ops->event_record(sd, sent, ss));
        RUMOR_CHECK(dd->ops->stream_wait(dd, ds, sent));
        return done ? dd->ops->event_record(dd, done, ds) : 0;
    }
    default:
        return rumor_err_set(RUMOR_ESTATE, "link: kind %d", (int)l->kind);
    }
}
