/* Fork-join worker pool (see pool.h). */
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>

struct rumor_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long generation; /* bumped for each run */
    int pending;              /* workers still running the current job */
    int stop;
    rumor_pool_fn fn;
    void *arg;
};

struct start {
    rumor_pool_t *pool;
    int worker;
};

/* Worker loop: wait for a new generation, run the job, report done. */
static void *worker_main(void *p)
{
    struct start *s = p;
    rumor_pool_t *pool = s->pool;
    int w = s->worker;
    free(s);
    unsigned long seen = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->generation == seen)
            pthread_cond_wait(&pool->go, &pool->mu);
        if (pool->stop)
            break;
        seen = pool->generation;
        rumor_pool_fn fn = pool->fn;
        void *arg = pool->arg;
        pthread_mutex_unlock(&pool->mu);
        fn(arg, w, pool->n);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

int rumor_pool_create(int n, rumor_pool_t **out)
{
    *out = NULL;
    if (n < 1 || n > 1024)
        return rumor_err_set(RUMOR_EINVAL, "pool: %d workers out of range [1, 1024]", n);
    rumor_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return rumor_err_set(RUMOR_ENOMEM, "pool: out of memory");
    p->n = n;
    p->threads = calloc((size_t)n, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return rumor_err_set(RUMOR_ENOMEM, "pool: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int w = 1; w < n; w++) {
        struct start *s = malloc(sizeof *s);
        int rc = s ? 0 : -1;
        if (s) {
            s->pool = p;
            s->worker = w;
            rc = pthread_create(&p->threads[w], NULL, worker_main, s);
            if (rc)
                free(s);
        }
        if (rc) {
            p->n = w; /* join the ones started */
            rumor_pool_destroy(&p);
            return rumor_err_set(RUMOR_ESYS, "pool: cannot start worker thread %d", w);
        }
    }
    *out = p;
    return 0;
}

void rumor_pool_destroy(rumor_pool_t **pp)
{
    if (!pp || !*pp)
        return;
    rumor_pool_t *p = *pp;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int w = 1; w < p->n; w++)
        pthread_join(p->threads[w], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
    *pp = NULL;
}

int rumor_pool_size(const rumor_pool_t *p) { return p->n; }

void rumor_pool_run(rumor_pool_t *p, rumor_pool_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void rumor_pool_split(size_t n, int w, int k, size_t *lo, size_t *hi)
{
    size_t per = (n + (size_t)k - 1) / (size_t)k;
    per = (per + 15) & ~(size_t)15;
    *lo = per * (size_t)w < n ? per * (size_t)w : n;
    *hi = per * (size_t)(w + 1) < n ? per * (size_t)(w + 1) : n;
}
