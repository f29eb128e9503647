/* Temp files and quiet logging for the fuzz targets (see fuzz.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"

#define MAX_TMP 8

static char *tmp_path[MAX_TMP];
static const char *tmp_tag[MAX_TMP];
static int ntmp;

static void remove_tmp(void)
{
    for (int i = 0; i < ntmp; i++) {
        unlink(tmp_path[i]);
        free(tmp_path[i]);
    }
    ntmp = 0;
}

/* One file per tag, made with mkstemps (the process id and random letters
 * in its name: parallel fuzzers and replays never share a file). */
const char *fuzz_tmpfile(const char *tag, const char *suffix)
{
    for (int i = 0; i < ntmp; i++)
        if (!strcmp(tmp_tag[i], tag))
            return tmp_path[i];
    if (ntmp == MAX_TMP)
        return NULL;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    size_t len = strlen(dir) + strlen(tag) + strlen(suffix) + 32;
    char *p = malloc(len);
    if (!p)
        return NULL;
    snprintf(p, len, "%s/rumor-fuzz-%s-XXXXXX%s", dir, tag, suffix);
    int fd = mkstemps(p, (int)strlen(suffix));
    if (fd < 0) {
        fprintf(stderr, "fuzz: cannot create %s: %s\n", p, strerror(errno));
        free(p);
        return NULL;
    }
    close(fd);
    if (ntmp == 0)
        atexit(remove_tmp);
    tmp_path[ntmp] = p;
    tmp_tag[ntmp++] = tag;
    return p;
}

int fuzz_write(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (size > 0) {
        ssize_t w = write(fd, p, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        p += w;
        size -= (size_t)w;
    }
    return close(fd);
}

void fuzz_quiet(void)
{
    static int done;
    if (!done) {
        rumor_log_set_level(RUMOR_LOG_ERROR);
        done = 1;
    }
}
