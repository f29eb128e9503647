/* Progress lines and JSON-lines metrics (see progress.h). */
#include "progress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "log.h"

void rumor_format_duration(double s, char *buf, size_t len)
{
    if (!(s >= 0) || s > 360000.0) {
        snprintf(buf, len, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

void rumor_progress_begin(rumor_progress_t *p, FILE *out, long total, double interval, int quiet)
{
    memset(p, 0, sizeof *p);
    p->out = out ? out : stderr;
    p->tty = isatty(fileno(p->out));
    p->interval = interval >= 0 ? interval : (p->tty ? 0.5 : 10.0);
    p->start = p->last = rumor_now();
    p->total = total;
    p->quiet = quiet;
}

int rumor_progress_update(rumor_progress_t *p, long done, int force, const char *fmt, ...)
{
    double now = rumor_now();
    if (p->quiet || (!force && now - p->last < p->interval))
        return 0;
    p->last = now;
    char fields[512], eta[32], el[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof fields, fmt, ap);
    va_end(ap);
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)done / elapsed : 0;
    rumor_format_duration(rate > 0 ? (double)(p->total - done) / rate : -1, eta, sizeof eta);
    rumor_format_duration(elapsed, el, sizeof el);
    int pct = p->total > 0 ? (int)(100.0 * (double)done / (double)p->total) : 0;
    if (p->tty) {
        fprintf(p->out, "\r\033[K%3d%% %s  %s elapsed  ETA %s", pct, fields, el, eta);
        p->line_open = 1;
    } else {
        fprintf(p->out, "%3d%% %s  %s elapsed  ETA %s\n", pct, fields, el, eta);
    }
    fflush(p->out);
    return 1;
}

void rumor_progress_print(rumor_progress_t *p, const char *fmt, ...)
{
    if (p->line_open) {
        fputs("\r\033[K", p->out);
        p->line_open = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    fflush(p->out);
}

int rumor_metrics_open(rumor_metrics_t *m, const char *path)
{
    memset(m, 0, sizeof *m);
    m->fd = -1;
    snprintf(m->path, sizeof m->path, "%s", path);
    if (strcmp(path, "-") == 0) {
        m->fd = STDOUT_FILENO;
        m->open = 1;
        return 0;
    }
    /* O_APPEND, no O_TRUNC: see progress.h (peers may share the file). */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return rumor_err_sys(RUMOR_ESYS, "metrics file '%s'", path);
    m->fd = fd;
    m->open = m->own_fd = 1;
    return 0;
}

/* Appends c to the tags, or returns -1 when they are full. */
static int tag_putc(rumor_metrics_t *m, char c)
{
    if (m->ntags + 1 >= sizeof m->tags)
        return -1;
    m->tags[m->ntags++] = c;
    m->tags[m->ntags] = '\0';
    return 0;
}

/* Appends s as a JSON string: quotes and backslashes escaped, control
 * characters as \u00XX, bytes outside printable ASCII as '?' (as checkpoint
 * metadata writes the swarm name), so the line is always valid UTF-8 JSON. */
static int tag_put_string(rumor_metrics_t *m, const char *s)
{
    if (tag_putc(m, '"') < 0)
        return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        int n = 0;
        if (*p == '"' || *p == '\\')
            n = snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p < 0x20)
            n = snprintf(esc, sizeof esc, "\\u%04x", *p);
        else
            n = snprintf(esc, sizeof esc, "%c", *p < 0x7f ? *p : '?');
        for (int i = 0; i < n; i++)
            if (tag_putc(m, esc[i]) < 0)
                return -1;
    }
    return tag_putc(m, '"');
}

/* Adds ,"key": and the value that put() writes; all or nothing. */
static int tag_add(rumor_metrics_t *m, const char *key, const char *str, long long num, int is_str)
{
    if (!m->open)
        return rumor_err_set(RUMOR_EINVAL, "metrics: tag '%s' set on a file that is not open", key);
    size_t before = m->ntags;
    char numbuf[32];
    snprintf(numbuf, sizeof numbuf, "%lld", num);
    int rc = tag_putc(m, ',') < 0 || tag_put_string(m, key) < 0 || tag_putc(m, ':') < 0 ? -1 : 0;
    if (rc == 0 && is_str)
        rc = tag_put_string(m, str ? str : "");
    for (const char *p = numbuf; rc == 0 && !is_str && *p; p++)
        rc = tag_putc(m, *p);
    if (rc < 0) {
        m->ntags = before;
        m->tags[before] = '\0';
        return rumor_err_set(RUMOR_EINVAL, "metrics file '%s': tag '%s' does not fit in the "
                             "%zu bytes of tags", m->path, key, sizeof m->tags - 1);
    }
    return 0;
}

int rumor_metrics_tag_int(rumor_metrics_t *m, const char *key, long long value)
{
    return tag_add(m, key, NULL, value, 0);
}

int rumor_metrics_tag_str(rumor_metrics_t *m, const char *key, const char *value)
{
    return tag_add(m, key, value, 0, 1);
}

/* Writes all of buf; EINTR retried. Returns 0 or -1 with errno set. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

void rumor_metrics_write(rumor_metrics_t *m, const char *fmt, ...)
{
    if (!m->open)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    /* {"time":...,"mono":...<tags>  ,<fields>  }\n: the fields are formatted
     * one byte after the head, where the comma goes if there are any */
    char stack[1024], *buf = stack, *heap = NULL;
    int head = snprintf(stack, sizeof stack, "{\"time\":%.3f,\"mono\":%.3f%s",
                        (double)tv.tv_sec + tv.tv_usec * 1e-6, rumor_now(), m->tags);
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int body = vsnprintf(stack + head + 1, sizeof stack - (size_t)head - 1, fmt, ap);
    va_end(ap);
    size_t at = (size_t)head + 1 + (size_t)(body > 0 ? body : 0); /* where "}\n" goes */
    if (body > 0 && at + 2 >= sizeof stack) {
        /* Longer than the stack buffer: format it again into one that fits,
         * so that the event still goes out in one write. */
        if ((heap = malloc(at + 3))) {
            memcpy(heap, stack, (size_t)head);
            vsnprintf(heap + head + 1, at + 3 - (size_t)head - 1, fmt, again);
        }
        buf = heap;
    }
    va_end(again);
    int err = body < 0 ? EINVAL : !buf ? ENOMEM : 0;
    if (!err) {
        if (body > 0)
            buf[head] = ',';
        else
            at = (size_t)head;
        memcpy(buf + at, "}\n", 2);
        if (m->fd == STDOUT_FILENO)
            fflush(stdout); /* progress lines printed with stdio go first */
        if (write_all(m->fd, buf, at + 2) < 0)
            err = errno;
    }
    free(heap);
    if (err) {
        rumor_warn("metrics file '%s': write failed (%s); metrics stop here", m->path,
                   strerror(err));
        rumor_metrics_close(m);
    }
}

void rumor_metrics_close(rumor_metrics_t *m)
{
    if (m->open && m->own_fd)
        close(m->fd);
    m->open = m->own_fd = 0;
    m->fd = -1;
}
