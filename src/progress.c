/* Progress lines and JSON-lines metrics (see progress.h). */
#include "progress.h"

#include <errno.h>
#include <stdarg.h>
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
    snprintf(m->path, sizeof m->path, "%s", path);
    if (strcmp(path, "-") == 0) {
        m->f = stdout;
        return 0;
    }
    m->f = fopen(path, "w");
    if (!m->f)
        return rumor_err_sys(RUMOR_ESYS, "metrics file '%s'", path);
    return 0;
}

void rumor_metrics_write(rumor_metrics_t *m, const char *fmt, ...)
{
    if (!m->f)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    fprintf(m->f, "{\"time\":%.3f,", (double)tv.tv_sec + tv.tv_usec * 1e-6);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(m->f, fmt, ap);
    va_end(ap);
    fputs("}\n", m->f);
    if (fflush(m->f) != 0 || ferror(m->f)) {
        rumor_warn("metrics file '%s': write failed (%s); metrics stop here", m->path,
                   strerror(errno));
        rumor_metrics_close(m);
    }
}

void rumor_metrics_close(rumor_metrics_t *m)
{
    if (m->f && m->f != stdout)
        fclose(m->f);
    m->f = NULL;
}
