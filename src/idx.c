/* IDX files: reading (zlib reads gzip'd and plain files alike) and checking
 * them, and the decompressed cache of gzip'd image files, mapped (idx_int.h). */
#include "data.h"
#include "idx_int.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "dirs.h"
#include "log.h"

/* The first allocation for an IDX file's data; it then doubles as bytes
 * arrive, so a header that lies about its size costs at most twice what the
 * file really holds. Fashion-MNIST's train images (47 MB) take 3 steps. */
#define IDX_FIRST_ALLOC ((size_t)16 << 20)
/* How much we read past the declared data to tell trailing bytes from a
 * gzip trailer that fails its check. */
#define IDX_TRAILING_MAX ((size_t)1 << 20)

/* Asks for 2 MiB pages over the aligned interior of a large fresh buffer.
 * First-touch page faults, not inflating, dominate loading Fashion-MNIST
 * (188 MB of floats; several times the inflate time in a VM); huge pages
 * cut their number 512-fold. Only a hint: failure changes nothing. */
void rumor_hint_huge(void *p, size_t n)
{
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (!p || n < 2 * huge)
        return;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* What a caller expects of an IDX file, for precise messages. */
typedef struct idx_expect {
    uint32_t magic;   /* 0: any supported file */
    const char *kind; /* "an image file" */
    const char *unit; /* "pixel" in "N pixel bytes expected" */
} idx_expect;

static const idx_expect any_file = { 0, "an IDX file", "data" };
static const idx_expect image_file = { RUMOR_IDX_MAGIC_IMAGES, "an image file", "pixel" };
static const idx_expect label_file = { RUMOR_IDX_MAGIC_LABELS, "a label file", "label" };

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *dtype_name(int dtype)
{
    switch (dtype) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
    }
}

/* zlib's messages for a gzdopen'ed file start with "<fd:N>: "; the caller
 * prints the real path instead. */
static const char *zmsg(const char *msg)
{
    if (!msg)
        return "";
    if (strncmp(msg, "<fd:", 4) == 0) {
        const char *p = strstr(msg, ": ");
        if (p)
            return p + 2;
    }
    return msg;
}

/* Reads until want bytes or the stream stops (end or error); returns how many
 * arrived. zlib keeps any error for gz_status. */
static size_t gz_read_full(gzFile f, unsigned char *buf, size_t want)
{
    size_t got = 0;
    while (got < want) {
        size_t ask = want - got;
        if (ask > ((size_t)1 << 30))
            ask = (size_t)1 << 30;
        int r = gzread(f, buf + got, (unsigned)ask);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* After the stream stopped: 0 when it simply ended (a short plain file, or a
 * gzip file whose intact content is short), 1 when a gzip stream was cut
 * off, or a negative rc (message naming path) for a read or data error. */
static int gz_status(const char *path, gzFile f)
{
    int zerr = Z_OK;
    const char *msg = gzerror(f, &zerr);
    switch (zerr) {
    case Z_OK: return 0;
    case Z_BUF_ERROR: return 1; /* zlib: "unexpected end of file" */
    case Z_DATA_ERROR:
        return rumor_err_set(RUMOR_EFORMAT, "%s: gzip data corrupt: %s", path, zmsg(msg));
    case Z_MEM_ERROR:
        return rumor_err_set(RUMOR_ENOMEM, "%s: out of memory in zlib", path);
    case Z_ERRNO:
        return rumor_err_set(RUMOR_ESYS, "%s: read failed: %s", path, zmsg(msg));
    default:
        return rumor_err_set(RUMOR_EIO, "%s: zlib error %d: %s", path, zerr, zmsg(msg));
    }
}

/* Reads a header field of n bytes; a short read is a truncation error that
 * says how much of the header (hdr_total bytes) was there. */
static int read_header(const char *path, gzFile f, unsigned char *buf, size_t n,
                       size_t before, size_t hdr_total)
{
    size_t got = gz_read_full(f, buf, n);
    if (got == n)
        return 0;
    int st = gz_status(path, f);
    if (st < 0)
        return st;
    return rumor_err_set(RUMOR_EIO, "%s: truncated: %zu header bytes expected, %zu read%s", path,
                         hdr_total, before + got, st ? " (gzip stream ends early)" : "");
}

/* Checks the 4 magic bytes: against ex->magic when the caller expects one
 * kind of file, else against what this reader supports. */
static int check_magic(const char *path, const unsigned char m[4], const idx_expect *ex)
{
    uint32_t magic = be32(m);
    char why[96] = "";
    if (!m[0] && !m[1] && m[2] != 0x08)
        snprintf(why, sizeof why, "; dtype 0x%02x (%s) not supported: only 0x08 (unsigned byte)",
                 m[2], dtype_name(m[2]));
    if (ex->magic) {
        if (magic != ex->magic)
            return rumor_err_set(RUMOR_EFORMAT, "%s: bad magic 0x%08x (expected 0x%08x for %s)%s",
                                 path, (unsigned)magic, (unsigned)ex->magic, ex->kind, why);
        return 0;
    }
    if (m[0] || m[1])
        return rumor_err_set(RUMOR_EFORMAT,
                             "%s: bad magic 0x%08x (an IDX file starts with two zero bytes)",
                             path, (unsigned)magic);
    if (m[2] != 0x08)
        return rumor_err_set(RUMOR_EFORMAT, "%s: bad magic 0x%08x%s", path, (unsigned)magic, why);
    if (m[3] < 1 || m[3] > RUMOR_IDX_MAX_DIMS)
        return rumor_err_set(RUMOR_EFORMAT, "%s: bad magic 0x%08x: %d dims (1 to %d supported)",
                             path, (unsigned)magic, m[3], RUMOR_IDX_MAX_DIMS);
    return 0;
}

/* Checks that no dim is zero and that their product stays within
 * RUMOR_IDX_MAX_BYTES; sets out->size. */
static int check_dims(const char *path, rumor_idx_t *out)
{
    char shape[RUMOR_IDX_MAX_DIMS * 12];
    size_t len = 0;
    for (int i = 0; i < out->ndims; i++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%u", i ? "x" : "",
                                (unsigned)out->dims[i]);
    uint64_t size = 1;
    for (int i = 0; i < out->ndims; i++) {
        if (out->dims[i] == 0)
            return rumor_err_set(RUMOR_EFORMAT, "%s: dims %s: dimension %d is zero", path,
                                 shape, i);
    }
    for (int i = 0; i < out->ndims; i++) {
        size *= out->dims[i]; /* <= 2^31 * 2^32 before the check: no overflow */
        if (size > RUMOR_IDX_MAX_BYTES)
            return rumor_err_set(RUMOR_EFORMAT,
                                 "%s: dims %s: too large (more than %zu bytes of data)", path,
                                 shape, RUMOR_IDX_MAX_BYTES);
    }
    out->size = (size_t)size;
    return 0;
}

/* Reads the declared data into a buffer that grows with what arrives. */
static int read_data(const char *path, gzFile f, const idx_expect *ex, rumor_idx_t *out)
{
    size_t cap = out->size < IDX_FIRST_ALLOC ? out->size : IDX_FIRST_ALLOC;
    size_t got = 0;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return rumor_err_set(RUMOR_ENOMEM, "%s: cannot allocate %zu bytes", path, cap);
    rumor_hint_huge(buf, cap);
    for (;;) {
        size_t n = gz_read_full(f, buf + got, cap - got);
        got += n;
        if (got < cap || cap == out->size)
            break;
        size_t ncap = cap * 2 < out->size ? cap * 2 : out->size;
        unsigned char *nbuf = realloc(buf, ncap);
        if (!nbuf) {
            free(buf);
            return rumor_err_set(RUMOR_ENOMEM, "%s: cannot allocate %zu bytes", path, ncap);
        }
        buf = nbuf;
        rumor_hint_huge(buf + cap, ncap - cap);
        cap = ncap;
    }
    if (got < out->size) {
        free(buf);
        int st = gz_status(path, f);
        if (st < 0)
            return st;
        return rumor_err_set(RUMOR_EIO, "%s: truncated: %zu %s bytes expected, %zu read%s", path,
                             out->size, ex->unit, got, st ? " (gzip stream ends early)" : "");
    }
    out->data = buf;
    return 0;
}

/* After the data: the stream must end here, and a gzip stream must pass its
 * CRC and length check (which zlib makes when it reaches the trailer). */
static int check_end(const char *path, gzFile f)
{
    unsigned char extra[4096];
    size_t nextra = 0;
    int r;
    while (nextra < IDX_TRAILING_MAX && (r = gzread(f, extra, sizeof extra)) > 0)
        nextra += (size_t)r;
    int st = gz_status(path, f);
    if (st < 0)
        return st;
    if (nextra)
        return rumor_err_set(RUMOR_EFORMAT, "%s: %zu%s trailing bytes after the declared data",
                             path, nextra, nextra >= IDX_TRAILING_MAX ? " or more" : "");
    if (st)
        return rumor_err_set(RUMOR_EIO,
                             "%s: truncated: gzip stream ends before its trailer (CRC unchecked)",
                             path);
    return 0;
}

/* Reads and checks one IDX file (see rumor_idx_read); ex adds an expected
 * magic and the words for messages. *out is empty on failure. */
static int idx_read(const char *path, const idx_expect *ex, rumor_idx_t *out)
{
    memset(out, 0, sizeof *out);
    if (!path)
        return rumor_err_set(RUMOR_EINVAL, "IDX path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot open", path);
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return rumor_err_set(RUMOR_ENOMEM, "%s: cannot open a zlib stream", path);
    }
    gzbuffer(f, 1 << 18);

    unsigned char hdr[4 + 4 * RUMOR_IDX_MAX_DIMS];
    int rc = read_header(path, f, hdr, 4, 0, 4);
    if (rc == 0)
        rc = check_magic(path, hdr, ex);
    if (rc == 0) {
        out->dtype = hdr[2];
        out->ndims = hdr[3];
        size_t hlen = 4 + 4 * (size_t)out->ndims;
        rc = read_header(path, f, hdr + 4, hlen - 4, 4, hlen);
    }
    if (rc == 0) {
        for (int i = 0; i < out->ndims; i++)
            out->dims[i] = be32(hdr + 4 + 4 * i);
        rc = check_dims(path, out);
    }
    if (rc == 0)
        rc = read_data(path, f, ex, out);
    if (rc == 0)
        rc = check_end(path, f);
    gzclose_r(f); /* closes fd; nothing left to report on a read stream */
    if (rc < 0)
        rumor_idx_free(out);
    return rc;
}

/* Public reader: any supported IDX file. */
int rumor_idx_read(const char *path, rumor_idx_t *out)
{
    if (!out)
        return rumor_err_set(RUMOR_EINVAL, "rumor_idx_read: out is NULL");
    return idx_read(path, &any_file, out);
}

/* Frees the data and zeroes the struct; the struct itself is the caller's. */
void rumor_idx_free(rumor_idx_t *idx)
{
    if (!idx)
        return;
    if (idx->map)
        munmap(idx->map, idx->map_len);
    else
        free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* ------------------------------------------------- decompressed cache */

/* Where decompressed images are kept: $RUMOR_CACHE_DIR, else
 * $XDG_CACHE_HOME/rumor, else $HOME/.cache/rumor; 0, or -1 when none. */
static int cache_dir(char *out, size_t cap)
{
    const char *d = getenv("RUMOR_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"),
               *h = getenv("HOME");
    int n;
    if (d && *d)
        n = snprintf(out, cap, "%s", d);
    else if (x && *x)
        n = snprintf(out, cap, "%s/rumor", x);
    else if (h && *h)
        n = snprintf(out, cap, "%s/.cache/rumor", h);
    else
        return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* The cache file of a gzip'd IDX file, named by its base name and by what
 * its gzip trailer says of its contents (their CRC-32 and length) and its
 * own size: a source edited or replaced, even within the same second and
 * at the same size, gets another name and is never served stale. 0, or -1
 * when there is none (not .gz, no trailer, no cache directory). */
static int cache_path(const char *gz, char *out, size_t cap)
{
    size_t len = strlen(gz);
    char dir[4096];
    if (len < 4 || strcmp(gz + len - 3, ".gz") != 0 || cache_dir(dir, sizeof dir) < 0)
        return -1;
    int fd = open(gz, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    uint8_t t[8];
    int ok = fstat(fd, &st) == 0 && st.st_size > 18 &&
             pread(fd, t, sizeof t, st.st_size - 8) == (ssize_t)sizeof t;
    close(fd);
    if (!ok)
        return -1;
    uint32_t crc = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 |
                   (uint32_t)t[3] << 24;
    uint32_t isize = (uint32_t)t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 |
                     (uint32_t)t[7] << 24;
    const char *base = strrchr(gz, '/');
    base = base ? base + 1 : gz;
    int n = snprintf(out, cap, "%s/%.*s.%08x-%08x-%llx", dir, (int)(strlen(base) - 3), base,
                     (unsigned)crc, (unsigned)isize, (unsigned long long)st.st_size);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Writes the IDX file idx (as read) to path, whole or not at all (a
 * temporary file renamed into place, so peers starting together never read
 * half of one). Failures are not errors: the cache is an optimization. */
static void cache_write(const char *path, const rumor_idx_t *idx)
{
    char dir[4400], tmp[4400];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir ||
        (size_t)snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= sizeof tmp)
        return;
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0;
    if (rumor_dir_prepare(dir) < 0) {
        rumor_err_clear();
        return;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    uint8_t hdr[4 + 4 * RUMOR_IDX_MAX_DIMS];
    hdr[0] = hdr[1] = 0;
    hdr[2] = (uint8_t)idx->dtype;
    hdr[3] = (uint8_t)idx->ndims;
    for (int k = 0; k < idx->ndims; k++) {
        uint32_t v = idx->dims[k];
        hdr[4 + 4 * k] = (uint8_t)(v >> 24);
        hdr[5 + 4 * k] = (uint8_t)(v >> 16);
        hdr[6 + 4 * k] = (uint8_t)(v >> 8);
        hdr[7 + 4 * k] = (uint8_t)v;
    }
    int ok = fwrite(hdr, 1, 4 + 4 * (size_t)idx->ndims, f) == 4 + 4 * (size_t)idx->ndims &&
             fwrite(idx->data, 1, idx->size, f) == idx->size;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* Maps a plain IDX file read-only and checks it as idx_read does (magic,
 * dims, exactly the declared bytes after the header): out->data points
 * into the mapping. Only for the cache's own files, which are written
 * whole through a rename and never changed in place (a file truncated
 * under a mapping would fault on access). */
static int idx_map(const char *path, const idx_expect *ex, rumor_idx_t *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot open", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 4) {
        close(fd);
        return rumor_err_set(RUMOR_EIO, "%s: truncated: no IDX header", path);
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (m == MAP_FAILED)
        return rumor_err_sys(RUMOR_ESYS, "%s: cannot map", path);
    out->map = m;
    out->map_len = (size_t)st.st_size;
    const unsigned char *b = m;
    int rc = check_magic(path, b, ex);
    size_t hlen = 0;
    if (rc == 0) {
        out->dtype = b[2];
        out->ndims = b[3];
        hlen = 4 + 4 * (size_t)out->ndims;
        if (out->map_len < hlen)
            rc = rumor_err_set(RUMOR_EIO, "%s: truncated: %zu header bytes expected", path, hlen);
    }
    for (int i = 0; rc == 0 && i < out->ndims; i++)
        out->dims[i] = be32(b + 4 + 4 * i);
    if (rc == 0)
        rc = check_dims(path, out);
    if (rc == 0 && out->map_len != hlen + out->size)
        rc = rumor_err_set(out->map_len < hlen + out->size ? RUMOR_EIO : RUMOR_EFORMAT,
                           "%s: %zu bytes of data where the header declares %zu", path,
                           out->map_len - hlen, out->size);
    if (rc < 0) {
        rumor_idx_free(out);
        return rc;
    }
    out->data = (uint8_t *)b + hlen;
    return 0;
}

/* Reads the images of gz through the cache: the decompressed copy when one
 * is there and whole, mapped (every peer of a machine shares one copy in
 * the page cache instead of holding 47 MB of its own), else the .gz, whose
 * decompressed bytes are then kept for the next peer and mapped in place
 * of the buffer just read. A machine that starts many peers at once
 * inflates the set once and holds it once. */
static int idx_read_cached(const char *gz, const idx_expect *ex, rumor_idx_t *out)
{
    char path[4300];
    if (cache_path(gz, path, sizeof path) < 0)
        return idx_read(gz, ex, out);
    if (access(path, R_OK) == 0) {
        if (idx_map(path, ex, out) == 0)
            return 0;
        rumor_warn("%s; reading %s again", rumor_err_msg(), gz); /* it names the copy */
        rumor_err_clear();
        unlink(path);
    }
    RUMOR_CHECK(idx_read(gz, ex, out));
    cache_write(path, out);
    rumor_idx_t mapped;
    if (idx_map(path, ex, &mapped) == 0 && mapped.size == out->size &&
        memcmp(mapped.data, out->data, out->size) == 0) {
        rumor_idx_free(out);
        *out = mapped;
    } else {
        rumor_idx_free(&mapped); /* no cache after all: the buffer read serves */
        rumor_err_clear();
    }
    return 0;
}

int rumor_idx_read_images_cached(const char *gz, rumor_idx_t *out)
{
    return idx_read_cached(gz, &image_file, out);
}

int rumor_idx_read_labels(const char *path, rumor_idx_t *out)
{
    return idx_read(path, &label_file, out);
}
