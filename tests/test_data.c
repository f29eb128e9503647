/* Data module: IDX reading (good, truncated, corrupt, missing files, plain
 * and gzip'd), datasets, shards, loaders, permutations, and Fashion-MNIST
 * itself when it is installed. */
#include "data.h"
#include "source.h"
#include "log.h"
#include "testutil.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

/* ---------------------------------------------------------------- helpers */

/* A path under the scratch directory (a ring of buffers: several at once). */
static const char *tp(const char *name)
{
    static char ring[16][512];
    static int next;
    char *p = ring[next++ % 16];
    snprintf(p, sizeof ring[0], "%s/%s", tu_tmpdir(), name);
    return p;
}

/* A growable byte buffer for building IDX files. */
typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    if (!b->p) {
        perror("realloc");
        exit(99);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put32(bytes *b, uint32_t v)
{
    unsigned char q[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16),
                           (unsigned char)(v >> 8), (unsigned char)v };
    put(b, q, 4);
}

/* magic, dims, then data bytes. */
static bytes idx_bytes(uint32_t magic, int ndims, const uint32_t *dims, const void *data,
                       size_t len)
{
    bytes b = { NULL, 0 };
    put32(&b, magic);
    for (int i = 0; i < ndims; i++)
        put32(&b, dims[i]);
    if (len)
        put(&b, data, len);
    return b;
}

static void write_plain(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(99);
    }
}

/* gzip (level 6) of the n bytes at p. */
static void write_gz(const char *path, const void *p, size_t n)
{
    gzFile f = gzopen(path, "wb6");
    if (!f || (n && gzwrite(f, p, (unsigned)n) != (int)n) || gzclose(f) != Z_OK) {
        fprintf(stderr, "gzip write %s failed\n", path);
        exit(99);
    }
}

static bytes slurp(const char *path)
{
    bytes b = { NULL, 0 };
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(99);
    }
    unsigned char buf[4096];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0)
        put(&b, buf, r);
    fclose(f);
    return b;
}

/* Test images: n of rows x cols, pixels cover 0..255; labels i % 10. */
#define N_IMG 50
#define ROWS 28
#define COLS 28
static unsigned char pixels[N_IMG * ROWS * COLS];
static unsigned char labels[N_IMG];

static void make_data(void)
{
    unsigned long long s = 42;
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (i % 7 == 0) ? (unsigned char)(i & 255) : (unsigned char)(tu_randf(&s) * 127.5f + 127.5f);
    for (int i = 0; i < N_IMG; i++)
        labels[i] = (unsigned char)(i % 10);
}

static bytes images_file(void)
{
    uint32_t dims[3] = { N_IMG, ROWS, COLS };
    return idx_bytes(RUMOR_IDX_MAGIC_IMAGES, 3, dims, pixels, sizeof pixels);
}

static bytes labels_file(void)
{
    uint32_t dims[1] = { N_IMG };
    return idx_bytes(RUMOR_IDX_MAGIC_LABELS, 1, dims, labels, sizeof labels);
}

/* Writes a file as plain or gzip'd, by name. */
static const char *emit(const char *name, int gz, const bytes *b)
{
    const char *p = tp(name);
    if (gz)
        write_gz(p, b->p, b->n);
    else
        write_plain(p, b->p, b->n);
    return p;
}

/* The image file of a load must fail with rc and a message naming it and
 * holding why (labels are good). */
static void expect_images_fail(const char *img, int rc, const char *why)
{
    static int k;
    char lname[64];
    snprintf(lname, sizeof lname, "good-labels-%d", k++);
    bytes l = labels_file();
    const char *lab = emit(lname, 0, &l);
    free(l.p);
    rumor_dataset_t *d = (rumor_dataset_t *)1;
    CHECK_ERR(rumor_dataset_load_files(img, lab, &d), rc, why);
    CHECKF(strstr(rumor_err_msg(), img) != NULL, "message \"%s\" does not name %s",
           rumor_err_msg(), img);
    CHECK(d == NULL);
}

/* ------------------------------------------------------------- good files */

static void check_dataset_matches(const rumor_dataset_t *d)
{
    CHECK(d->n == N_IMG && d->rows == ROWS && d->cols == COLS && d->dim == ROWS * COLS);
    CHECK(d->classes == 10);
    int bad = 0;
    for (size_t i = 0; i < sizeof pixels; i++)
        bad += d->px[i] != pixels[i] || rumor_dataset_at(d, i) != (float)pixels[i] / 255.0f;
    for (int i = 0; i < N_IMG; i++)
        bad += d->y[i] != labels[i];
    CHECKF(bad == 0, "%d values differ", bad);
}

static void test_good(void)
{
    bytes im = images_file(), lb = labels_file();
    for (int gz = 0; gz < 2; gz++) {
        const char *ip = emit(gz ? "img.gz" : "img", gz, &im);
        const char *lp = emit(gz ? "lab.gz" : "lab", gz, &lb);
        rumor_dataset_t *d = NULL;
        CHECK_OK(rumor_dataset_load_files(ip, lp, &d));
        if (d)
            check_dataset_matches(d);
        rumor_dataset_destroy(&d);
        CHECK(d == NULL);
        rumor_dataset_destroy(&d); /* safe twice */

        rumor_idx_t idx;
        CHECK_OK(rumor_idx_read(ip, &idx));
        CHECK(idx.dtype == 8 && idx.ndims == 3 && idx.dims[0] == N_IMG && idx.dims[1] == ROWS &&
              idx.dims[2] == COLS && idx.dims[3] == 0 && idx.size == sizeof pixels);
        CHECK(idx.data && memcmp(idx.data, pixels, sizeof pixels) == 0);
        rumor_idx_free(&idx);
        CHECK(idx.data == NULL && idx.size == 0);
        rumor_idx_free(&idx);
    }

    /* generic IDX: 2 and 4 dims */
    uint32_t d2[2] = { 5, 3 }, d4[4] = { 2, 3, 1, 2 };
    bytes b2 = idx_bytes(0x00000802, 2, d2, pixels, 15), b4 = idx_bytes(0x00000804, 4, d4, pixels, 12);
    rumor_idx_t idx;
    CHECK_OK(rumor_idx_read(emit("two.gz", 1, &b2), &idx));
    CHECK(idx.ndims == 2 && idx.dims[0] == 5 && idx.dims[1] == 3 && idx.size == 15 &&
          memcmp(idx.data, pixels, 15) == 0);
    rumor_idx_free(&idx);
    CHECK_OK(rumor_idx_read(emit("four", 0, &b4), &idx));
    CHECK(idx.ndims == 4 && idx.size == 12 && memcmp(idx.data, pixels, 12) == 0);
    rumor_idx_free(&idx);
    free(b2.p);
    free(b4.p);

    /* rumor_dataset_load by directory: .gz, plain only, .gz preferred */
    const char *dgz = tp("dir-gz"), *dplain = tp("dir-plain");
    mkdir(dgz, 0700);
    mkdir(dplain, 0700);
    emit("dir-gz/train-images-idx3-ubyte.gz", 1, &im);
    emit("dir-gz/train-labels-idx1-ubyte.gz", 1, &lb);
    emit("dir-plain/t10k-images-idx3-ubyte", 0, &im);
    emit("dir-plain/t10k-labels-idx1-ubyte", 0, &lb);
    bytes junk = { NULL, 0 };
    put(&junk, "junk", 4);
    emit("dir-gz/train-images-idx3-ubyte", 0, &junk); /* ignored: .gz wins */
    rumor_dataset_t *d = NULL;
    CHECK_OK(rumor_dataset_load(dgz, "train", &d));
    if (d)
        check_dataset_matches(d);
    rumor_dataset_destroy(&d);
    CHECK_OK(rumor_dataset_load(dplain, "test", &d));
    if (d)
        check_dataset_matches(d);
    rumor_dataset_destroy(&d);
    CHECK_ERR(rumor_dataset_load(dplain, "train", &d), RUMOR_ESYS, "train-images-idx3-ubyte.gz");
    CHECK(strstr(rumor_err_msg(), "No such file") != NULL);
    CHECK_ERR(rumor_dataset_load(dplain, "validation", &d), RUMOR_EINVAL, "validation");
    CHECK(d == NULL);
    free(junk.p);
    free(im.p);
    free(lb.p);
}

/* -------------------------------------------------------- the cache */

/* The one file in dir whose name starts with prefix, into out; how many
 * there are. */
static int cached(const char *dir, const char *prefix, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && !strstr(e->d_name, ".tmp")) {
            snprintf(out, cap, "%s/%s", dir, e->d_name);
            k++;
        }
    if (d)
        closedir(d);
    return k;
}

/* A gzip'd image file is inflated once into RUMOR_CACHE_DIR (main sets it
 * to a directory of this test's): the copy is the IDX file itself; the
 * next load reads it (a valid copy with other pixels, put there by hand,
 * is what comes back); a truncated copy is said, dropped and made again;
 * the source rewritten at once with other pixels of the same size gets a
 * copy of its own. */
static void test_cache(void)
{
    const char *dir = tp("cache-src"), *cache = getenv("RUMOR_CACHE_DIR");
    mkdir(dir, 0700);
    bytes im = images_file(), lb = labels_file();
    const char *ip = emit("cache-src/train-images-idx3-ubyte.gz", 1, &im);
    emit("cache-src/train-labels-idx1-ubyte.gz", 1, &lb);
    rumor_dataset_t *d = NULL, *d2 = NULL;
    CHECK_OK(rumor_dataset_load(dir, "train", &d));
    if (d)
        check_dataset_matches(d);
    /* the copy just written serves, mapped, in place of the buffer read */
    CHECK(d && d->map && !d->row);
    /* a second load maps the same file; keeping fewer rows leaves it whole */
    CHECK_OK(rumor_dataset_load(dir, "train", &d2));
    if (d && d2) {
        CHECK(d2->map && d2->map != d->map);
        rumor_dataset_keep(d2, 1);
        CHECK(d2->n == 1 && d2->map && d2->y[0] == d->y[0]);
        CHECK(memcmp(d2->px, d->px, (size_t)d->dim) == 0);
    }
    rumor_dataset_destroy(&d2);
    /* a shard of a mapped set is a view of its rows, the same examples as
     * the copy a set in memory gives, and it outlives the set */
    rumor_dataset_t *copy = NULL, *view = NULL, *vv = NULL;
    if (d)
        CHECK_OK(rumor_dataset_create(d->n, d->rows, d->cols, d->classes, &copy));
    if (copy) {
        memcpy(copy->px, d->px, (size_t)d->n * (size_t)d->dim);
        memcpy(copy->y, d->y, (size_t)d->n * sizeof *d->y);
        copy->div = d->div;
        CHECK_OK(rumor_dataset_normalize(copy, 0.25f, 0.5f));
        CHECK_OK(rumor_dataset_normalize(d, 0.25f, 0.5f));
        CHECK_OK(rumor_dataset_shard(copy, 1, 3, 77, &d2));
        CHECK_OK(rumor_dataset_shard(d, 1, 3, 77, &view));
        rumor_dataset_destroy(&d);
        if (view) /* a view of a view: rows of the first mapping still */
            CHECK_OK(rumor_dataset_subset(view, (int[]){ 2, 0 }, 2, &vv));
    }
    if (d2 && view && vv) {
        CHECK(view->map && view->row && !d2->map && !d2->row && view->n == d2->n);
        float a[784], b[784];
        int same = 1;
        for (int i = 0; i < view->n; i++) {
            rumor_dataset_row(view, i, a);
            rumor_dataset_row(d2, i, b);
            same &= memcmp(a, b, (size_t)view->dim * sizeof *a) == 0 && view->y[i] == d2->y[i];
            for (int k = 0; k < view->dim; k++) /* the flat accessor agrees */
                same &= rumor_dataset_at(view, (size_t)i * (size_t)view->dim + (size_t)k) == a[k];
        }
        CHECKF(same, "a view's examples differ from the copy's");
        rumor_dataset_row(vv, 0, a);
        rumor_dataset_row(d2, 2, b);
        CHECK(vv->map == view->map && memcmp(a, b, (size_t)vv->dim * sizeof *a) == 0 &&
              vv->y[1] == d2->y[0]);
    }
    rumor_dataset_destroy(&vv);
    rumor_dataset_destroy(&view);
    rumor_dataset_destroy(&copy);
    rumor_dataset_destroy(&d2);
    rumor_dataset_destroy(&d);
    char path[4096];
    CHECKF(cached(cache, "train-images-idx3-ubyte.", path, sizeof path) == 1,
           "no single copy of the images in %s", cache);
    bytes got = slurp(path);
    CHECK(got.n == im.n && memcmp(got.p, im.p, im.n) == 0);
    free(got.p);
    CHECK(cached(cache, "train-labels", path, sizeof path) == 0); /* labels are small */
    cached(cache, "train-images-idx3-ubyte.", path, sizeof path);
    /* served from the copy: other (valid) pixels put there come back */
    bytes other = images_file();
    other.p[16] ^= 0x5a;
    write_plain(path, other.p, other.n);
    CHECK_OK(rumor_dataset_load(dir, "train", &d));
    CHECK(d && d->px[0] == (uint8_t)(pixels[0] ^ 0x5a) && d->px[1] == pixels[1]);
    rumor_dataset_destroy(&d);
    /* a truncated copy: read from the .gz again, and made whole again */
    write_plain(path, other.p, other.n / 2);
    CHECK_OK(rumor_dataset_load(dir, "train", &d));
    if (d)
        check_dataset_matches(d);
    rumor_dataset_destroy(&d);
    got = slurp(path);
    CHECK(got.n == im.n && memcmp(got.p, im.p, im.n) == 0);
    free(got.p);
    /* a copy with bytes after the declared data: not mapped, made again */
    bytes longer = { malloc(im.n + 3), im.n + 3 };
    if (longer.p) {
        memcpy(longer.p, im.p, im.n);
        memset(longer.p + im.n, 7, 3);
        write_plain(path, longer.p, longer.n);
        CHECK_OK(rumor_dataset_load(dir, "train", &d));
        if (d)
            check_dataset_matches(d);
        CHECK(d && d->map);
        rumor_dataset_destroy(&d);
        got = slurp(path);
        CHECK(got.n == im.n && memcmp(got.p, im.p, im.n) == 0);
        free(got.p);
        free(longer.p);
    }
    /* the source rewritten with other pixels (the same size, at once) */
    write_gz(ip, other.p, other.n);
    CHECK_OK(rumor_dataset_load(dir, "train", &d));
    CHECK(d && d->px[0] == (uint8_t)(pixels[0] ^ 0x5a));
    rumor_dataset_destroy(&d);
    CHECK(cached(cache, "train-images-idx3-ubyte.", path, sizeof path) == 2);
    free(other.p);
    free(im.p);
    free(lb.p);
}

/* ---------------------------------------------------------------- truncated */

static void test_truncated(void)
{
    bytes im = images_file();
    for (int gz = 0; gz < 2; gz++) {
        char name[64];
        struct { size_t len; const char *why; } cut[] = {
            { 0, "truncated: 4 header bytes expected, 0 read" },
            { 2, "truncated: 4 header bytes expected, 2 read" },
            { 10, "truncated: 16 header bytes expected, 10 read" },
            { 16, "truncated: 39200 pixel bytes expected, 0 read" },
            { 16 + 1234, "truncated: 39200 pixel bytes expected, 1234 read" },
            { im.n - 1, "truncated: 39200 pixel bytes expected, 39199 read" },
        };
        for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
            snprintf(name, sizeof name, "cut-%d-%zu", gz, i);
            bytes b = { im.p, cut[i].len };
            const char *p = emit(name, gz, &b);
            expect_images_fail(p, RUMOR_EIO, cut[i].why);
        }
    }
    /* labels cut */
    bytes lb = labels_file();
    bytes lcut = { lb.p, lb.n - 3 };
    bytes imgood = images_file();
    const char *ip = emit("trunc-good-img", 0, &imgood);
    const char *lp = emit("trunc-labels.gz", 1, &lcut);
    rumor_dataset_t *d = NULL;
    CHECK_ERR(rumor_dataset_load_files(ip, lp, &d), RUMOR_EIO,
              "trunc-labels.gz: truncated: 50 label bytes expected, 47 read");

    /* the gzip file itself cut: mid-stream, and just before its trailer */
    const char *full = emit("gzcut-full.gz", 1, &im);
    bytes z = slurp(full);
    bytes mid = { z.p, z.n / 2 };
    expect_images_fail(emit("gzcut-mid.gz", 0, &mid), RUMOR_EIO, "(gzip stream ends early)");
    expect_images_fail(tp("gzcut-mid.gz"), RUMOR_EIO, "pixel bytes expected");
    bytes tail = { z.p, z.n - 4 };
    expect_images_fail(emit("gzcut-tail.gz", 0, &tail), RUMOR_EIO,
                       "truncated: gzip stream ends before its trailer");

    /* a header promising far more than the file holds: an error, not a
     * 78 MB allocation filled from nothing */
    uint32_t big[3] = { 100000, 28, 28 };
    bytes lie = idx_bytes(RUMOR_IDX_MAGIC_IMAGES, 3, big, pixels, 784);
    expect_images_fail(emit("lie.gz", 1, &lie), RUMOR_EIO,
                       "truncated: 78400000 pixel bytes expected, 784 read");
    free(lie.p);
    free(z.p);
    free(im.p);
    free(imgood.p);
    free(lb.p);
}

/* ---------------------------------------------------------------- corrupt */

static void test_corrupt(void)
{
    uint32_t dims3[3] = { N_IMG, ROWS, COLS };
    rumor_idx_t idx;

    /* magic and dtype */
    bytes b = idx_bytes(0x00000901, 3, dims3, pixels, sizeof pixels);
    expect_images_fail(emit("magic901", 0, &b), RUMOR_EFORMAT,
                       "bad magic 0x00000901 (expected 0x00000803 for an image file)");
    CHECK_ERR(rumor_idx_read(tp("magic901"), &idx), RUMOR_EFORMAT,
              "dtype 0x09 (signed byte) not supported");
    free(b.p);
    b = idx_bytes(0x00000D03, 3, dims3, pixels, sizeof pixels);
    expect_images_fail(emit("float.gz", 1, &b), RUMOR_EFORMAT, "dtype 0x0d (float32) not supported");
    CHECK_ERR(rumor_idx_read(tp("float.gz"), &idx), RUMOR_EFORMAT, "float.gz: bad magic 0x00000d03");
    CHECK(idx.data == NULL);
    free(b.p);
    b = idx_bytes(0x12340803, 3, dims3, pixels, sizeof pixels);
    CHECK_ERR(rumor_idx_read(emit("nonzero", 0, &b), &idx), RUMOR_EFORMAT,
              "nonzero: bad magic 0x12340803 (an IDX file starts with two zero bytes)");
    free(b.p);

    /* ndims */
    b = idx_bytes(0x00000802, 2, dims3, pixels, 50 * 28);
    expect_images_fail(emit("ndims2", 0, &b), RUMOR_EFORMAT,
                       "bad magic 0x00000802 (expected 0x00000803 for an image file)");
    free(b.p);
    b = idx_bytes(0x00000800, 0, dims3, pixels, 16);
    CHECK_ERR(rumor_idx_read(emit("ndims0", 0, &b), &idx), RUMOR_EFORMAT, "ndims0: bad magic 0x00000800: 0 dims");
    free(b.p);
    uint32_t d5[5] = { 1, 1, 1, 1, 1 };
    b = idx_bytes(0x00000805, 5, d5, pixels, 1);
    CHECK_ERR(rumor_idx_read(emit("ndims5.gz", 1, &b), &idx), RUMOR_EFORMAT, "5 dims (1 to 4 supported)");
    free(b.p);

    /* dims */
    uint32_t zero[3] = { N_IMG, 0, COLS };
    b = idx_bytes(RUMOR_IDX_MAGIC_IMAGES, 3, zero, NULL, 0);
    expect_images_fail(emit("zerodim", 0, &b), RUMOR_EFORMAT, "dims 50x0x28: dimension 1 is zero");
    free(b.p);
    uint32_t huge[3] = { 0xFFFFFFFFu, 0xFFFFFFFFu, 28 };
    b = idx_bytes(RUMOR_IDX_MAGIC_IMAGES, 3, huge, pixels, 100);
    expect_images_fail(emit("huge.gz", 1, &b), RUMOR_EFORMAT,
                       "dims 4294967295x4294967295x28: too large");
    free(b.p);
    uint32_t over[3] = { 2740000, 28, 28 }; /* 2148160000 > 2^31 - 1 */
    b = idx_bytes(RUMOR_IDX_MAGIC_IMAGES, 3, over, pixels, 100);
    expect_images_fail(emit("over", 0, &b), RUMOR_EFORMAT, "too large");
    free(b.p);

    /* trailing bytes */
    b = images_file();
    put(&b, "\0\0\0\0\1", 5);
    expect_images_fail(emit("trail", 0, &b), RUMOR_EFORMAT, "5 trailing bytes after the declared data");
    expect_images_fail(emit("trail.gz", 1, &b), RUMOR_EFORMAT, "5 trailing bytes after the declared data");
    free(b.p);

    /* gzip damage: a flipped byte in the deflate stream, a CRC and a length
     * that do not match; gzip magic then garbage */
    b = images_file();
    bytes z = slurp(emit("flip-src.gz", 1, &b));
    free(b.p);
    for (int where = 0; where < 3; where++) {
        bytes f = { malloc(z.n), z.n };
        memcpy(f.p, z.p, z.n);
        size_t at = where == 0 ? z.n / 2 : where == 1 ? z.n - 6 : z.n - 2;
        f.p[at] ^= 0x10;
        char name[32];
        snprintf(name, sizeof name, "flip-%d.gz", where);
        expect_images_fail(emit(name, 0, &f), RUMOR_EFORMAT, "gzip data corrupt: ");
        if (where == 1)
            CHECK(strstr(rumor_err_msg(), "incorrect data check") != NULL);
        if (where == 2)
            CHECK(strstr(rumor_err_msg(), "incorrect length check") != NULL);
        free(f.p);
    }
    free(z.p);
    bytes g = { NULL, 0 };
    put(&g, "\x1f\x8b", 2);
    unsigned long long s = 7;
    for (int i = 0; i < 300; i++) {
        unsigned char c = (unsigned char)(tu_randf(&s) * 127.5f + 127.5f);
        put(&g, &c, 1);
    }
    expect_images_fail(emit("gzip-garbage.gz", 0, &g), RUMOR_EFORMAT, "gzip data corrupt: ");
    /* not gzip at all: random bytes read as a plain file */
    bytes rnd = { g.p + 2, g.n - 2 };
    rnd.p[0] = 0x5a;
    expect_images_fail(emit("random.gz", 0, &rnd), RUMOR_EFORMAT, "bad magic 0x5a");
    CHECK_ERR(rumor_idx_read(tp("random.gz"), &idx), RUMOR_EFORMAT, "two zero bytes");
    free(g.p);

    /* missing file, a directory */
    expect_images_fail(tp("no-such-file.gz"), RUMOR_ESYS, "no-such-file.gz: cannot open: No such file or directory");
    CHECK_ERR(rumor_idx_read(tu_tmpdir(), &idx), RUMOR_ESYS, "Is a directory");
    CHECK_ERR(rumor_idx_read(NULL, &idx), RUMOR_EINVAL, "NULL");

    /* labels out of range; counts that disagree */
    unsigned char bad[N_IMG];
    memcpy(bad, labels, sizeof bad);
    bad[7] = 12;
    uint32_t ln[1] = { N_IMG };
    b = idx_bytes(RUMOR_IDX_MAGIC_LABELS, 1, ln, bad, sizeof bad);
    bytes im = images_file();
    const char *ip = emit("c-img", 0, &im);
    rumor_dataset_t *d = (rumor_dataset_t *)1;
    CHECK_ERR(rumor_dataset_load_files(ip, emit("badlabel.gz", 1, &b), &d), RUMOR_EFORMAT,
              "badlabel.gz: label 12 at index 7 out of range [0,10)");
    CHECK(d == NULL);
    free(b.p);
    ln[0] = N_IMG - 1;
    b = idx_bytes(RUMOR_IDX_MAGIC_LABELS, 1, ln, labels, N_IMG - 1);
    const char *lp = emit("short-labels", 0, &b);
    CHECK_ERR(rumor_dataset_load_files(ip, lp, &d), RUMOR_EFORMAT,
              "images and labels disagree: 50 images in");
    CHECK(strstr(rumor_err_msg(), "49 labels in") && strstr(rumor_err_msg(), "short-labels") &&
          strstr(rumor_err_msg(), "c-img"));
    /* a labels file where images belong, and the reverse */
    CHECK_ERR(rumor_dataset_load_files(lp, ip, &d), RUMOR_EFORMAT,
              "bad magic 0x00000801 (expected 0x00000803 for an image file)");
    CHECK_ERR(rumor_dataset_load_files(ip, ip, &d), RUMOR_EFORMAT,
              "bad magic 0x00000803 (expected 0x00000801 for a label file)");
    free(b.p);
    free(im.p);
}

/* -------------------------------------------------------------- sharding */

/* n (<= 256) examples of 1x2; pixels (id, 255 - id), y = id % 10; a
 * created dataset's features are its bytes. */
static rumor_dataset_t *ids_dataset(int n)
{
    rumor_dataset_t *d = NULL;
    if (rumor_dataset_create(n, 1, 2, 10, &d) < 0) {
        fprintf(stderr, "create: %s\n", rumor_err_msg());
        exit(99);
    }
    for (int i = 0; i < n; i++) {
        d->px[2 * i] = (uint8_t)i;
        d->px[2 * i + 1] = (uint8_t)(255 - i);
        d->y[i] = i % 10;
    }
    return d;
}

/* Every row of s is a row of the id dataset, with the right label. */
static int rows_consistent(const rumor_dataset_t *s)
{
    for (int i = 0; i < s->n; i++) {
        int id = (int)rumor_dataset_at(s, 2 * (size_t)i);
        if (rumor_dataset_at(s, 2 * (size_t)i + 1) != (float)(255 - id) || s->y[i] != id % 10)
            return 0;
    }
    return 1;
}

static void test_shard(void)
{
    const int n = 103;
    rumor_dataset_t *full = ids_dataset(n);
    int seen[103];
    for (int world = 1; world <= 8; world++) {
        memset(seen, 0, sizeof seen);
        int lo = n, hi = 0;
        for (int r = 0; r < world; r++) {
            rumor_dataset_t *s = NULL, *s2 = NULL, *s3 = NULL;
            CHECK_OK(rumor_dataset_shard(full, r, world, 1234, &s));
            CHECK_OK(rumor_dataset_shard(full, r, world, 1234, &s2));
            CHECK_OK(rumor_dataset_shard(full, r, world, 999, &s3));
            if (!s || !s2 || !s3)
                continue;
            CHECK(s->dim == 2 && s->classes == 10 && rows_consistent(s));
            CHECK(s->n == n / world + (r < n % world));
            lo = s->n < lo ? s->n : lo;
            hi = s->n > hi ? s->n : hi;
            for (int i = 0; i < s->n; i++)
                seen[s->px[2 * i]]++;
            CHECK(s2->n == s->n && memcmp(s->px, s2->px, (size_t)s->n * 2) == 0 &&
                  memcmp(s->y, s2->y, (size_t)s->n * sizeof(int32_t)) == 0);
            if (world > 1)
                CHECK(memcmp(s->px, s3->px, (size_t)s->n * 2) != 0);
            rumor_dataset_destroy(&s);
            rumor_dataset_destroy(&s2);
            rumor_dataset_destroy(&s3);
        }
        int once = 1;
        for (int i = 0; i < n; i++)
            once &= seen[i] == 1;
        CHECKF(once, "world %d: shards are not disjoint and covering", world);
        CHECKF(hi - lo <= 1, "world %d: sizes %d..%d", world, lo, hi);
    }
    rumor_dataset_t *s = (rumor_dataset_t *)1;
    CHECK_ERR(rumor_dataset_shard(full, 4, 4, 1, &s), RUMOR_EINVAL, "rank 4 of world 4");
    CHECK(s == NULL);
    CHECK_ERR(rumor_dataset_shard(full, 0, 0, 1, &s), RUMOR_EINVAL, "world 0");
    CHECK_ERR(rumor_dataset_shard(full, -1, 2, 1, &s), RUMOR_EINVAL, "rank -1");
    CHECK_ERR(rumor_dataset_shard(full, 0, 104, 1, &s), RUMOR_EINVAL, "would be empty");
    CHECK_ERR(rumor_dataset_shard(NULL, 0, 1, 1, &s), RUMOR_EINVAL, "NULL");

    /* subset */
    int pick[3] = { 5, 0, 102 };
    CHECK_OK(rumor_dataset_subset(full, pick, 3, &s));
    if (s)
        CHECK(s->n == 3 && s->px[0] == 5 && s->px[2] == 0 && s->px[4] == 102 && s->y[2] == 2);
    rumor_dataset_destroy(&s);
    pick[1] = 103;
    CHECK_ERR(rumor_dataset_subset(full, pick, 3, &s), RUMOR_EINVAL, "subset index 103 at 1");

    /* stats and normalize */
    double mean, sd;
    CHECK_OK(rumor_dataset_stats(full, &mean, &sd));
    /* every pair sums to 255: the mean is 127.5, each value 127.5 - id away */
    double want_sd = 0;
    for (int i = 0; i < n; i++)
        want_sd += (127.5 - i) * (127.5 - i);
    CHECK_CLOSE(mean, 127.5, 1e-12, 0);
    CHECK_CLOSE(sd, sqrt(want_sd / n), 1e-9, 1e-9);
    CHECK_OK(rumor_dataset_normalize(full, 1.0f, 2.0f));
    CHECK(rumor_dataset_at(full, 2 * 5) == 2.0f && rumor_dataset_at(full, 2 * 5 + 1) == 124.5f);
    CHECK_ERR(rumor_dataset_normalize(full, 0.0f, 0.0f), RUMOR_EINVAL, "std");
    CHECK_ERR(rumor_dataset_normalize(full, NAN, 1.0f), RUMOR_EINVAL, "std");
    CHECK(rumor_dataset_at(full, 2 * 5) == 2.0f); /* unchanged by the refusals */
    /* a second normalization composes with the first: ((5 - 1) / 2 - 1) * 4 */
    CHECK_OK(rumor_dataset_normalize(full, 1.0f, 0.25f));
    CHECK_CLOSE(rumor_dataset_at(full, 2 * 5), 4.0, 1e-6, 0);
    CHECK_CLOSE(rumor_dataset_at(full, 2 * 5 + 1), (124.5 - 1) * 4, 1e-6, 1e-6);
    rumor_dataset_destroy(&full);
    CHECK_ERR(rumor_dataset_create(-1, 1, 1, 10, &s), RUMOR_EINVAL, "n=-1");
    CHECK_ERR(rumor_dataset_create(100000, 28000, 28, 10, &s), RUMOR_EINVAL, "too large");
}

/* ---------------------------------------------------------------- loader */

/* Runs one epoch, recording ids in order; returns the number of examples. */
static int run_epoch(rumor_loader_t *l, const rumor_dataset_t *d, int *ids, int *sizes,
                     int *nbatches, int *ok)
{
    const float *x = NULL;
    const int32_t *y = NULL;
    int got = 0, b, k = 0;
    *ok = 1;
    while ((b = rumor_loader_next(l, &x, &y)) > 0) {
        sizes[k++] = b;
        for (int i = 0; i < b; i++) {
            int id = (int)x[2 * i];
            if (id < 0 || id >= d->n || x[2 * i] != (float)d->px[2 * id] ||
                x[2 * i + 1] != (float)d->px[2 * id + 1] || y[i] != d->y[id])
                *ok = 0;
            ids[got++] = id;
        }
    }
    if (b < 0 || x != NULL || y != NULL)
        *ok = 0;
    *nbatches = k;
    return got;
}

static void test_loader(void)
{
    const int n = 103;
    rumor_dataset_t *d = ids_dataset(n);
    int ids[3][103], sizes[16], nb, ok;
    rumor_loader_t *l = NULL, *l2 = NULL;

    CHECK_OK(rumor_loader_create(d, 10, 77, 1, 0, &l));
    CHECK_OK(rumor_loader_create(d, 10, 77, 1, 0, &l2));
    if (!l || !l2)
        return;
    CHECK(rumor_loader_batches_per_epoch(l) == 11 && rumor_loader_batch(l) == 10);
    for (int e = 0; e < 3; e++) {
        CHECK(rumor_loader_epoch(l) == e);
        int got = run_epoch(l, d, ids[e], sizes, &nb, &ok);
        CHECK(ok && got == n && nb == 11 && sizes[0] == 10 && sizes[10] == 3);
        int seen[103] = { 0 }, once = 1;
        for (int i = 0; i < n; i++)
            seen[ids[e][i]]++;
        for (int i = 0; i < n; i++)
            once &= seen[i] == 1;
        CHECKF(once, "epoch %d does not see every example once", e);
        /* the same seed, the same orders */
        int again[103];
        run_epoch(l2, d, again, sizes, &nb, &ok);
        CHECK(memcmp(again, ids[e], sizeof again) == 0);
    }
    CHECK(rumor_loader_epoch(l) == 3);
    CHECK(memcmp(ids[0], ids[1], sizeof ids[0]) != 0 && memcmp(ids[1], ids[2], sizeof ids[0]) != 0);
    int shuffled = 0;
    for (int i = 0; i < n; i++)
        shuffled += ids[0][i] != i;
    CHECK(shuffled > n / 2);
    rumor_loader_destroy(&l2);
    /* another seed, another order */
    CHECK_OK(rumor_loader_create(d, 10, 78, 1, 0, &l2));
    int other[103];
    run_epoch(l2, d, other, sizes, &nb, &ok);
    CHECK(ok && memcmp(other, ids[0], sizeof other) != 0);
    rumor_loader_destroy(&l2);
    rumor_loader_destroy(&l);
    rumor_loader_destroy(&l);
    CHECK(l == NULL);

    /* drop_last: 10 full batches, each example at most once */
    CHECK_OK(rumor_loader_create(d, 10, 5, 1, 1, &l));
    if (l) {
        CHECK(rumor_loader_batches_per_epoch(l) == 10);
        for (int e = 0; e < 2; e++) {
            int got = run_epoch(l, d, ids[0], sizes, &nb, &ok);
            int seen[103] = { 0 }, most = 0;
            for (int i = 0; i < got; i++)
                most = ++seen[ids[0][i]] > most ? seen[ids[0][i]] : most;
            CHECK(ok && got == 100 && nb == 10 && sizes[9] == 10 && most == 1);
        }
    }
    rumor_loader_destroy(&l);

    /* no shuffle: dataset order, every epoch; caller-owned buffers */
    CHECK_OK(rumor_loader_create(d, 25, 5, 0, 0, &l));
    if (l) {
        float bx[25 * 2];
        int32_t by[25];
        for (int e = 0; e < 2; e++) {
            int pos = 0, b, inorder = 1;
            while ((b = rumor_loader_next_into(l, bx, by)) > 0) {
                for (int i = 0; i < b; i++, pos++)
                    inorder &= bx[2 * i] == (float)pos && by[i] == pos % 10;
            }
            CHECK(b == 0 && pos == n && inorder);
        }
        CHECK(rumor_loader_epoch(l) == 2);
    }
    rumor_loader_destroy(&l);

    /* a batch larger than the dataset */
    CHECK_OK(rumor_loader_create(d, 500, 5, 1, 0, &l));
    if (l) {
        CHECK(rumor_loader_batches_per_epoch(l) == 1);
        int got = run_epoch(l, d, ids[0], sizes, &nb, &ok);
        CHECK(ok && got == n && nb == 1);
    }
    rumor_loader_destroy(&l);
    CHECK_ERR(rumor_loader_create(d, 500, 5, 1, 1, &l), RUMOR_EINVAL, "no batch");
    CHECK_ERR(rumor_loader_create(d, 0, 5, 1, 0, &l), RUMOR_EINVAL, "batch 0");
    CHECK_ERR(rumor_loader_create(NULL, 1, 5, 1, 0, &l), RUMOR_EINVAL, "NULL");
    CHECK(l == NULL);
    rumor_dataset_destroy(&d);
}

/* ----------------------------------------------------------- permutation */

static void test_permutation(void)
{
    /* splitmix64's published first output for state 0 pins the generator */
    uint64_t st = 0;
    CHECK(rumor_splitmix64(&st) == 0xE220A8397B1DCDAFull);

    int p[1000], q[1000], seen[1000];
    for (int n = 0; n <= 1000; n = n ? n * 10 : 1) {
        CHECK_OK(rumor_permutation(n, 3, p));
        CHECK_OK(rumor_permutation(n, 3, q));
        memset(seen, 0, sizeof seen);
        int okp = 1;
        for (int i = 0; i < n; i++)
            if (p[i] < 0 || p[i] >= n || seen[p[i]]++)
                okp = 0;
        CHECKF(okp, "n=%d: not a permutation", n);
        CHECK(n == 0 || memcmp(p, q, (size_t)n * sizeof *p) == 0);
    }
    CHECK_OK(rumor_permutation(1000, 4, q));
    CHECK(memcmp(p, q, sizeof p) != 0);
    CHECK_ERR(rumor_permutation(-1, 0, p), RUMOR_EINVAL, "n=-1");
    CHECK_OK(rumor_permutation(0, 0, NULL));

    /* uniform: the 6 orders of 3 items over 6000 seeds, ~1000 each
     * (sd ~29, so 850..1150 fails by chance essentially never) */
    int count[6] = { 0 };
    for (uint64_t seed = 0; seed < 6000; seed++) {
        rumor_permutation(3, seed, p);
        count[p[0] * 2 + (p[1] > p[2])]++;
    }
    for (int i = 0; i < 6; i++)
        CHECKF(count[i] > 850 && count[i] < 1150, "order %d seen %d times of 6000", i, count[i]);
}

/* ----------------------------------------------------- per-peer streams */

/* The example a batch row is: the test image whose first pixels it holds
 * (normalize off: x = pixel / 255), or -1. */
static int which_image(const float *x)
{
    for (int i = 0; i < N_IMG; i++) {
        int same = 1;
        for (int k = 0; k < 16 && same; k++)
            same = fabsf(x[k] - pixels[(size_t)i * ROWS * COLS + k] / 255.0f) < 1e-6f;
        if (same)
            return i;
    }
    return -1;
}

/* One epoch of a source with world 1 and `stream`: the order its examples
 * came in (order[N_IMG]); returns how many rows came. */
static int stream_epoch(const char *dir, uint64_t stream, int *order)
{
    rumor_source_config_t c;
    rumor_source_config_default(&c);
    c.spec = dir;
    c.seed = 7;
    c.stream = stream;
    c.batch = 5;
    c.normalize = 0;
    c.lockstep = 1;
    rumor_source_t *s = NULL;
    if (rumor_source_open(&c, &s) < 0) {
        fprintf(stderr, "open: %s\n", rumor_err_msg());
        return -1;
    }
    int n = 0;
    long steps = rumor_source_steps_per_epoch(s);
    for (long t = 0; t < steps; t++) {
        rumor_batch_t b;
        if (rumor_source_next(s, t, &b) < 0)
            break;
        for (int r = 0; r < b.n && n < N_IMG; r++)
            order[n++] = which_image(b.x + (size_t)r * ROWS * COLS);
    }
    rumor_source_destroy(&s);
    return n;
}

/* Open membership: each peer draws its own seeded stream over the whole
 * set (source.h, config.stream): every example once an epoch, in an order
 * of its own, the same again for the same stream. */
static void test_streams(void)
{
    const char *dir = tp("streams");
    mkdir(dir, 0700);
    bytes im = images_file(), lb = labels_file();
    emit("streams/train-images-idx3-ubyte.gz", 1, &im);
    emit("streams/train-labels-idx1-ubyte.gz", 1, &lb);
    emit("streams/t10k-images-idx3-ubyte.gz", 1, &im);
    emit("streams/t10k-labels-idx1-ubyte.gz", 1, &lb);
    free(im.p);
    free(lb.p);
    int a[N_IMG], b[N_IMG], a2[N_IMG];
    CHECK(stream_epoch(dir, 0x1111, a) == N_IMG);
    CHECK(stream_epoch(dir, 0x1112, b) == N_IMG);
    CHECK(stream_epoch(dir, 0x1111, a2) == N_IMG);
    int seen_a[N_IMG] = { 0 }, seen_b[N_IMG] = { 0 }, differ = 0;
    for (int i = 0; i < N_IMG; i++) {
        if (a[i] >= 0)
            seen_a[a[i]]++;
        if (b[i] >= 0)
            seen_b[b[i]]++;
        differ += a[i] != b[i];
    }
    for (int i = 0; i < N_IMG; i++)
        CHECKF(seen_a[i] == 1 && seen_b[i] == 1, "image %d seen %d and %d times an epoch", i,
               seen_a[i], seen_b[i]);
    CHECKF(differ > N_IMG / 2, "streams 0x1111 and 0x1112 agree on %d of %d places",
           N_IMG - differ, N_IMG);
    CHECK(memcmp(a, a2, sizeof a) == 0);
    /* nearby streams and seeds give unrelated seeds */
    CHECK(rumor_source_stream_seed(7, 1) != rumor_source_stream_seed(7, 2));
    CHECK(rumor_source_stream_seed(7, 1) != rumor_source_stream_seed(8, 1));
    CHECK(rumor_source_stream_seed(7, 1) == rumor_source_stream_seed(7, 1));
}

/* ------------------------------------------------------------- real data */

static void test_fashion(void)
{
    const char *dir = tu_fashion_dir();
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "skip Fashion-MNIST part: %s not found\n", dir);
        return;
    }
    rumor_dataset_t *train = NULL, *test = NULL;
    double t0 = rumor_now();
    CHECK_OK(rumor_dataset_load(dir, "train", &train));
    double t1 = rumor_now();
    CHECK_OK(rumor_dataset_load(dir, "test", &test));
    double t2 = rumor_now();
    fprintf(stderr, "fashion-mnist: train loaded in %.3f s, test in %.3f s\n", t1 - t0, t2 - t1);
    /* The target is < 1 s; the check allows for a loaded machine and the
     * sanitizers, and still catches reading in small pieces. */
    if (t1 - t0 > 1.0)
        fprintf(stderr, "warning: loading train took %.3f s (target < 1 s)\n", t1 - t0);
    CHECKF(t1 - t0 < 5.0, "loading train took %.3f s", t1 - t0);
    if (!train || !test) {
        rumor_dataset_destroy(&train);
        rumor_dataset_destroy(&test);
        return;
    }
    CHECK(train->n == 60000 && test->n == 10000);
    CHECK(train->rows == 28 && train->cols == 28 && train->dim == 784 && test->dim == 784);
    int tr[10] = { 0 }, te[10] = { 0 }, inrange = 1;
    for (int i = 0; i < train->n; i++) {
        inrange &= train->y[i] >= 0 && train->y[i] < 10;
        if (train->y[i] >= 0 && train->y[i] < 10)
            tr[train->y[i]]++;
    }
    for (int i = 0; i < test->n; i++) {
        inrange &= test->y[i] >= 0 && test->y[i] < 10;
        if (test->y[i] >= 0 && test->y[i] < 10)
            te[test->y[i]]++;
    }
    CHECK(inrange);
    for (int c = 0; c < 10; c++) {
        CHECKF(te[c] == 1000, "test class %d has %d examples", c, te[c]);
        CHECKF(tr[c] == 6000, "train class %d has %d examples", c, tr[c]);
    }
    double mean, sd;
    CHECK_OK(rumor_dataset_stats(train, &mean, &sd));
    fprintf(stderr, "fashion-mnist: train pixel mean %.4f std %.4f\n", mean, sd);
    CHECK_CLOSE(mean, 0.2860, 0.001, 0);
    CHECK_CLOSE(sd, 0.3530, 0.001, 0);
    float lo = 1, hi = 0;
    for (size_t i = 0; i < (size_t)train->n * 784; i++) {
        float v = rumor_dataset_at(train, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECK(lo == 0.0f && hi == 1.0f);

    /* 8 shards of the real training set */
    double t3 = rumor_now();
    int total = 0;
    for (int r = 0; r < 8; r++) {
        rumor_dataset_t *s = NULL;
        CHECK_OK(rumor_dataset_shard(train, r, 8, 2024, &s));
        if (s) {
            CHECK(s->n == 7500);
            total += s->n;
        }
        rumor_dataset_destroy(&s);
    }
    CHECK(total == 60000);
    fprintf(stderr, "fashion-mnist: 8 shards in %.3f s\n", rumor_now() - t3);
    rumor_dataset_destroy(&train);
    rumor_dataset_destroy(&test);
}

/* Removes the scratch files (best effort). */
static void cleanup(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tu_tmpdir());
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tu_tmpdir());
}

int main(void)
{
    make_data();
    /* every gzip'd file this test loads is inflated into its own cache */
    setenv("RUMOR_CACHE_DIR", tp("cache"), 1);
    test_good();
    test_cache();
    test_truncated();
    test_corrupt();
    test_shard();
    test_loader();
    test_permutation();
    test_streams();
    test_fashion();
    if (!tu_failures)
        cleanup();
    return tu_finish("test_data");
}
