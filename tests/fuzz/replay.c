/* Corpus replay: runs one fuzz target's LLVMFuzzerTestOneInput over every
 * file of its seed corpus, without libFuzzer, so `make check` (gcc, and gcc
 * ASan/UBSan in `./bootstrap check` on CI) catches a regression on any input
 * that ever mattered.
 *
 *   replay_TARGET [DIR|FILE]...
 *
 * Without arguments it reads $RUMOR_SRCDIR/tests/fuzz/corpus/TARGET (TARGET
 * is compiled in as FUZZ_TARGET). A directory is read in name order (the same
 * order on every machine). Exits 0 after running every input, 1 when a
 * corpus directory is missing, empty or unreadable; a crashing input crashes
 * this program (the test harness reports it), and its name is on stderr
 * before it runs. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#ifndef FUZZ_TARGET
#error "compile with -DFUZZ_TARGET='\"name\"'"
#endif

#define MAX_FILE_BYTES (64L << 20)

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay_%s: %s: %s\n", FUZZ_TARGET, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || st.st_size > MAX_FILE_BYTES) {
        fprintf(stderr, "replay_%s: %s: unreadable or larger than %ld bytes\n", FUZZ_TARGET,
                path, MAX_FILE_BYTES);
        fclose(f);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    /* a buffer of exactly the input's size, as libFuzzer gives: ASan then
     * catches a read one byte past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf || fread(buf, 1, size, f) != size) {
        fprintf(stderr, "replay_%s: %s: read failed\n", FUZZ_TARGET, path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    fprintf(stderr, "replay_%s: %s\n", FUZZ_TARGET, path);
    LLVMFuzzerTestOneInput(buf, size);
    free(buf);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_dots(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* Runs every file of dir; returns how many, or -1. */
static long run_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, skip_dots, by_name);
    if (n < 0) {
        fprintf(stderr, "replay_%s: corpus %s: %s\n", FUZZ_TARGET, dir, strerror(errno));
        return -1;
    }
    long ran = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
        char *path = malloc(len);
        struct stat st;
        if (!path) {
            bad = 1;
        } else {
            snprintf(path, len, "%s/%s", dir, names[i]->d_name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                if (run_file(path) < 0)
                    bad = 1;
                else
                    ran++;
            }
        }
        free(path);
        free(names[i]);
    }
    free(names);
    if (bad)
        return -1;
    if (ran == 0) {
        fprintf(stderr, "replay_%s: corpus %s holds no input\n", FUZZ_TARGET, dir);
        return -1;
    }
    return ran;
}

int main(int argc, char **argv)
{
    char def[4096];
    char *one[] = { def };
    char **args = argv + 1;
    int nargs = argc - 1;
    if (nargs == 0) {
        const char *src = getenv("RUMOR_SRCDIR");
        snprintf(def, sizeof def, "%s/tests/fuzz/corpus/%s", src && *src ? src : ".",
                 FUZZ_TARGET);
        args = one;
        nargs = 1;
    }
    long total = 0;
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        long r;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode))
            r = run_dir(args[i]);
        else
            r = run_file(args[i]) < 0 ? -1 : 1;
        if (r < 0)
            return 1;
        total += r;
    }
    printf("replay_%s: %ld inputs ran\n", FUZZ_TARGET, total);
    return 0;
}
