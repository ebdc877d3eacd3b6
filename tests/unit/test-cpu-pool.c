// test-cpu-pool.c: the kernel thread pool of hal/hal-cpu.c. Every phase reads what other threads
// wrote in the phase before, so a missing or leaky barrier shows up as a wrong value; launches
// come back to back (workers spinning), after a pause longer than the spin bound (workers asleep
// on the futex), with one slow thread (the others sleep at the barrier), with fewer items than
// threads, in steps that start at given first items (a tree's levels), and in a forked child on
// a pool made before the fork (no workers there).
#include "hal-cpu.h"
#include "test.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define N_MAX 4099

typedef struct state {
    int64_t n;
    int64_t x[N_MAX], y[N_MAX], z[N_MAX];
    int64_t slow_item;      // the item whose chunk sleeps in phase 1 (-1: none)
    atomic_int bad_scratch; // chunks that got scratch not aligned to 64 bytes
} state;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void phase_fill(void **args, int64_t lo, int64_t hi, float *scratch) {
    state *s = args[0];
    (void)scratch;
    for (int64_t i = lo; i < hi; i++)
        s->x[i] = i * 3 + 1;
}

// Reads x written by any thread in phase 0.
static void phase_mix(void **args, int64_t lo, int64_t hi, float *scratch) {
    state *s = args[0];
    (void)scratch;
    if (s->slow_item >= lo && s->slow_item < hi)
        sleep_us(2000);
    for (int64_t i = lo; i < hi; i++)
        s->y[i] = s->x[(i * 7 + 3) % s->n] + s->x[s->n - 1 - i];
}

// Reads y written by any thread in phase 1, through this thread's scratch.
static void phase_scratch(void **args, int64_t lo, int64_t hi, float *scratch) {
    state *s = args[0];
    if ((uintptr_t)scratch &
        63) // counted here, checked by the main thread (RT_EXPECT is not atomic)
        atomic_fetch_add(&s->bad_scratch, 1);
    for (int64_t i = lo; i < hi; i++) {
        scratch[i - lo] = (float)(i - lo);
        s->z[i] = s->y[s->n - 1 - i] * 2 + (int64_t)scratch[i - lo] - (i - lo);
    }
}

static bool run_and_check(rt_cpu_pool *pool, state *s, int64_t n) {
    static const rt_cpu_phase_fn fns[3] = {phase_fill, phase_mix, phase_scratch};
    int64_t items[3] = {n, n, n};
    void *args[1] = {s};
    s->n = n;
    memset(s->x, 0, sizeof s->x);
    memset(s->y, 0, sizeof s->y);
    memset(s->z, 0, sizeof s->z);
    rt_cpu_launch l = {3, fns, items, args, (int64_t)sizeof(float) * n, NULL};
    if (!rt_cpu_pool_run(pool, &l))
        return false;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = n - 1 - i;
        int64_t y = ((j * 7 + 3) % n) * 3 + 1 + (n - 1 - j) * 3 + 1;
        if (s->z[i] != 2 * y)
            return false;
    }
    return true;
}

// Steps over consecutive item ranges (first_item): x[i] is one more than x[i - m], written by
// the step before (every step has m items), so each step must start at its own first item and
// after the previous one is complete; y counts visits.
static void phase_step(void **args, int64_t lo, int64_t hi, float *scratch) {
    state *s = args[0];
    (void)scratch;
    for (int64_t i = lo; i < hi; i++) {
        s->x[i] = i < s->n ? 1 : s->x[i - s->n] + 1;
        s->y[i]++;
    }
}

static bool run_steps(rt_cpu_pool *pool, state *s, int64_t m, int32_t steps) {
    rt_cpu_phase_fn fns[64];
    int64_t items[64], first[64];
    void *args[1] = {s};
    s->n = m;
    memset(s->x, 0, sizeof s->x);
    memset(s->y, 0, sizeof s->y);
    for (int32_t k = 0; k < steps; k++) {
        fns[k] = phase_step;
        items[k] = m;
        first[k] = k * m;
    }
    rt_cpu_launch l = {steps, fns, items, args, 0, first};
    if (!rt_cpu_pool_run(pool, &l))
        return false;
    for (int64_t i = 0; i < N_MAX; i++)
        if (s->y[i] != (i < m * steps) || (i < m * steps && s->x[i] != i / m + 1))
            return false;
    return true;
}

static state *g_state;
static rt_cpu_pool *g_pool;

// In the child: the parent's pool has no workers here and must still run every chunk.
static int child_uses_parent_pool(void *ctx) {
    (void)ctx;
    bool ok = run_and_check(g_pool, g_state, 1000) && run_and_check(g_pool, g_state, 3);
    rt_cpu_pool_free(g_pool);
    return ok ? 0 : 1;
}

// In the child: a pool made there starts its own workers.
static int child_new_pool(void *ctx) {
    (void)ctx;
    rt_cpu_pool *p = rt_cpu_pool_new(2);
    if (!p)
        return 2;
    bool ok = run_and_check(p, g_state, 2048);
    rt_cpu_pool_free(p);
    return ok ? 0 : 1;
}

int main(void) {
    state *s = calloc(1, sizeof *s);
    RT_EXPECT(s != NULL);
    if (!s)
        return rt_test_finish("test-cpu-pool");
    s->slow_item = -1;
    static const int64_t sizes[] = {1, 2, 3, 5, 64, 1000, N_MAX};
    for (int32_t threads = 1; threads <= 4; threads++) {
        rt_cpu_pool *pool = rt_cpu_pool_new(threads);
        RT_EXPECT(pool != NULL);
        if (!pool)
            continue;
        RT_EXPECT_EQ(rt_cpu_pool_threads(pool), threads);
        int32_t bad = 0;
        // Back to back, with growing scratch.
        for (int rep = 0; rep < 300; rep++)
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
                bad += !run_and_check(pool, s, sizes[k]);
        // Workers asleep on the futex before each launch.
        for (int rep = 0; rep < 5; rep++) {
            sleep_us(3000);
            bad += !run_and_check(pool, s, 1000);
        }
        // One thread late by more than the spin bound: the others sleep at the barrier.
        s->slow_item = 0;
        bad += !run_and_check(pool, s, 1000);
        s->slow_item = 999;
        bad += !run_and_check(pool, s, 1000);
        s->slow_item = -1;
        // A launch with no phases returns at once and leaves the pool usable.
        rt_cpu_launch empty = {0, NULL, NULL, NULL, 0, NULL};
        RT_EXPECT(rt_cpu_pool_run(pool, &empty));
        bad += !run_and_check(pool, s, 77);
        // Steps that start at their own first items (a tree's levels).
        bad += !run_steps(pool, s, 1, 40) + !run_steps(pool, s, 5, 64) + !run_steps(pool, s, 63, 9);
        RT_EXPECT_EQ(bad, 0);
        RT_EXPECT_EQ(atomic_load(&s->bad_scratch), 0);

        g_state = s;
        g_pool = pool;
        rt_err err = {0};
        rt_cpu_child_status st;
        int code = -1;
        RT_EXPECT(rt_cpu_run_isolated(child_uses_parent_pool, NULL, 20000.0, &st, &code, &err) ==
                  RT_OK);
        RT_EXPECT_EQ(st, RT_CPU_CHILD_OK);
        RT_EXPECT_EQ(code, 0);
#ifndef __SANITIZE_THREAD__ // TSan cannot start threads in the child of a multi-threaded fork
        RT_EXPECT(rt_cpu_run_isolated(child_new_pool, NULL, 20000.0, &st, &code, &err) == RT_OK);
        RT_EXPECT_EQ(st, RT_CPU_CHILD_OK);
        RT_EXPECT_EQ(code, 0);
#endif
        // The parent's pool still works after the forks.
        RT_EXPECT(run_and_check(pool, s, 1000));
        rt_cpu_pool_free(pool);
    }
    // Pools made and freed in a row (the profiler makes one per candidate child).
    for (int rep = 0; rep < 50; rep++) {
        rt_cpu_pool *pool = rt_cpu_pool_new(2);
        RT_EXPECT(pool != NULL);
        if (pool) {
            RT_EXPECT(run_and_check(pool, s, 100));
            rt_cpu_pool_free(pool);
        }
    }
    free(s);
    return rt_test_finish("test-cpu-pool");
}
