/* Output directories (see dirs.h). */
#include "dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p: each missing component, left to right. */
static int make_parents(const char *dir)
{
    char path[PATH_MAX];
    if (strlen(dir) >= sizeof path)
        return rumor_err_set(RUMOR_EINVAL, "'%s': path too long", dir);
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat st;
        if (stat(path, &st) != 0) {
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return rumor_err_sys(RUMOR_EINVAL, "'%s': cannot create '%s'", dir, path);
        } else if (!S_ISDIR(st.st_mode)) {
            return rumor_err_set(RUMOR_EINVAL, "'%s': '%s' is a file, not a directory", dir,
                                 path);
        }
        *p = c;
        if (c == '\0')
            break;
    }
    return 0;
}

int rumor_dir_prepare(const char *dir)
{
    if (!dir || !*dir)
        return rumor_err_set(RUMOR_EINVAL, "empty directory name");
    RUMOR_CHECK(make_parents(dir));
    char probe[PATH_MAX];
    if ((size_t)snprintf(probe, sizeof probe, "%s/.rumor-write-test-XXXXXX", dir) >= sizeof probe)
        return rumor_err_set(RUMOR_EINVAL, "'%s': path too long", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return rumor_err_sys(RUMOR_EINVAL, "'%s': cannot write files there", dir);
    close(fd);
    unlink(probe);
    return 0;
}
