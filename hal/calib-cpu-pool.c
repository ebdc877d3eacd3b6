// calib-cpu-pool.c: the pool of pinned threads rtcalib's CPU probes run on, the caller being
// thread 0. Workers spin for about a millisecond after a job, then sleep on a condition variable.
#define _GNU_SOURCE // sched_setaffinity, cpu_set_t
#include "calib-cpu-impl.h"

#include <signal.h>
#include <string.h>

static void rt_pin(int32_t cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set); // best effort: an unpinned thread still measures
}

static void *rt_pool_main(void *arg) {
    rt_pool_worker *w = arg;
    rt_pool *p = w->pool;
    rt_pin(p->cpu[w->tid]);
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        for (int spins = 0; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen;
             spins++) {
            if (spins < RT_CALIB_SPINS) {
                rt_cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = g;
        if (p->quit)
            return NULL;
        if (w->tid < p->active)
            p->fn(p->arg, w->tid);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

// Runs fn(arg, tid) on threads 0..active-1 together and returns when all are done.
void rt_pool_run(rt_pool *p, int32_t active, rt_job_fn fn, void *arg) {
    p->fn = fn;
    p->arg = arg;
    p->active = active;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (active > 0)
        fn(arg, 0);
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1)
        rt_cpu_relax();
}

void rt_pool_stop(rt_pool *p) {
    p->quit = true;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int32_t t = 1; t < p->n; t++)
        pthread_join(p->th[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

// Starts n - 1 workers pinned to the CPUs this process may use (round robin); signals are
// blocked in them so that SIGINT and SIGTERM reach the caller's handlers.
rt_status rt_pool_start(rt_pool *p, int32_t n, const cpu_set_t *allowed, rt_err *err) {
    memset(p, 0, sizeof *p);
    int32_t cpus[CPU_SETSIZE], n_cpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, allowed))
            cpus[n_cpus++] = c;
    }
    for (int32_t t = 0; t < n; t++)
        p->cpu[t] = n_cpus ? cpus[t % n_cpus] : -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    p->n = 1;
    int rc = 0;
    for (int32_t t = 1; t < n && rc == 0; t++) {
        p->w[t].pool = p;
        p->w[t].tid = t;
        rc = pthread_create(&p->th[t], NULL, rt_pool_main, &p->w[t]);
        if (rc == 0)
            p->n = t + 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        rt_pool_stop(p);
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start probe thread %d of %d: %s",
                       (int)p->n + 1, (int)n, strerror(rc));
    }
    rt_pin(p->cpu[0]);
    return RT_OK;
}
