// bench-util.c: the clock, the common timing loop and the machine ceilings (FMA peak, STREAM
// triad) shared by bench-ops, bench-ops-blis and bench-model. The ceilings are measured by the
// benchmark itself in the same run, so "% of peak" compares with this machine as it is now
// (a shared 2-core VM), not with a datasheet.
#include "bench-util.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RT_BENCH_MAX_REPS    1000
#define RT_BENCH_MAX_THREADS 64

double rt_bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int rt_bench_cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double rt_bench_median(double *v, int32_t n) {
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, rt_bench_cmp);
    return v[n / 2];
}

void rt_bench_time(void (*fn)(void *ctx), void *ctx, double budget_ms, rt_bench_stats *out) {
    static double ts[RT_BENCH_MAX_REPS];
    fn(ctx);
    int32_t reps = 0;
    double start = rt_bench_now_ns();
    while (reps < RT_BENCH_MAX_REPS && (reps < 3 || rt_bench_now_ns() - start < budget_ms * 1e6)) {
        double t0 = rt_bench_now_ns();
        fn(ctx);
        ts[reps++] = rt_bench_now_ns() - t0;
    }
    out->median_ns = rt_bench_median(ts, reps);
    out->min_ns = ts[0];
    out->reps = reps;
}

void rt_bench_time_turns(int32_t n, void (*const *fns)(void *ctx), void *const *ctxs,
                         double budget_ms, int32_t rounds, double settle_ms, rt_bench_stats *out) {
    if (n < 1)
        return;
    rounds = rounds < 1 ? 1 : rounds;
    int32_t cap = RT_BENCH_MAX_REPS / rounds > 1 ? RT_BENCH_MAX_REPS / rounds : 1;
    double *ts = malloc((size_t)n * (size_t)rounds * (size_t)cap * sizeof *ts);
    double *last = calloc((size_t)n, sizeof *last);
    int32_t *reps = calloc((size_t)n, sizeof *reps);
    if (!ts || !last || !reps) {
        for (int32_t i = 0; i < n; i++)
            rt_bench_time(fns[i], ctxs[i], budget_ms, &out[i]);
        free(ts);
        free(last);
        free(reps);
        return;
    }
    double share_ns = budget_ms * 1e6 / rounds;
    for (int32_t r = 0; r < rounds; r++) {
        for (int32_t i = 0; i < n; i++) {
            if (settle_ms > 0 && (r > 0 || i > 0))
                usleep((useconds_t)(settle_ms * 1e3));
            // The warm-up brings the contender's own data back after the others ran; a call
            // longer than its share streams its data through the caches anyway.
            if (r == 0 || last[i] < share_ns)
                fns[i](ctxs[i]);
            double *t = ts + (size_t)i * (size_t)rounds * (size_t)cap;
            double start = rt_bench_now_ns();
            for (int32_t k = 0; k < cap && (k < 1 || rt_bench_now_ns() - start < share_ns); k++) {
                double t0 = rt_bench_now_ns();
                fns[i](ctxs[i]);
                last[i] = rt_bench_now_ns() - t0;
                t[reps[i]++] = last[i];
            }
        }
    }
    for (int32_t i = 0; i < n; i++) {
        double *t = ts + (size_t)i * (size_t)rounds * (size_t)cap;
        out[i].median_ns = rt_bench_median(t, reps[i]);
        out[i].min_ns = t[0];
        out[i].reps = reps[i];
    }
    free(ts);
    free(last);
    free(reps);
}

#define RT_BENCH_FMA_ITERS 20000000L

// 12 independent FMA chains per thread: more than latency x pipes on Zen 3/4 (4 x 2) and Intel
// cores (4 x 2), so the loop runs at the FMA pipes' throughput.
__attribute__((target("avx512f"))) static void *rt_bench_fma512_thread(void *arg) {
    __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    __m512 a0 = x, a1 = y, a2 = x, a3 = y, a4 = x, a5 = y, a6 = x, a7 = y, a8 = x, a9 = y;
    __m512 a10 = x, a11 = y;
    for (long it = 0; it < RT_BENCH_FMA_ITERS; it++) {
        a0 = _mm512_fmadd_ps(a0, x, y), a1 = _mm512_fmadd_ps(a1, x, y);
        a2 = _mm512_fmadd_ps(a2, x, y), a3 = _mm512_fmadd_ps(a3, x, y);
        a4 = _mm512_fmadd_ps(a4, x, y), a5 = _mm512_fmadd_ps(a5, x, y);
        a6 = _mm512_fmadd_ps(a6, x, y), a7 = _mm512_fmadd_ps(a7, x, y);
        a8 = _mm512_fmadd_ps(a8, x, y), a9 = _mm512_fmadd_ps(a9, x, y);
        a10 = _mm512_fmadd_ps(a10, x, y), a11 = _mm512_fmadd_ps(a11, x, y);
        // Every chain is opaque to the compiler, or it merges the ones with equal start values.
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
        __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    *(float *)arg = _mm512_reduce_add_ps(s);
    return NULL;
}

// The same loop on 256-bit registers, for CPUs with AVX2 and FMA but no AVX-512 (Zen 3).
__attribute__((target("avx2,fma"))) static void *rt_bench_fma256_thread(void *arg) {
    __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    __m256 a0 = x, a1 = y, a2 = x, a3 = y, a4 = x, a5 = y, a6 = x, a7 = y, a8 = x, a9 = y;
    __m256 a10 = x, a11 = y;
    for (long it = 0; it < RT_BENCH_FMA_ITERS; it++) {
        a0 = _mm256_fmadd_ps(a0, x, y), a1 = _mm256_fmadd_ps(a1, x, y);
        a2 = _mm256_fmadd_ps(a2, x, y), a3 = _mm256_fmadd_ps(a3, x, y);
        a4 = _mm256_fmadd_ps(a4, x, y), a5 = _mm256_fmadd_ps(a5, x, y);
        a6 = _mm256_fmadd_ps(a6, x, y), a7 = _mm256_fmadd_ps(a7, x, y);
        a8 = _mm256_fmadd_ps(a8, x, y), a9 = _mm256_fmadd_ps(a9, x, y);
        a10 = _mm256_fmadd_ps(a10, x, y), a11 = _mm256_fmadd_ps(a11, x, y);
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
        __asm__ volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    *(float *)arg =
        lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
    return NULL;
}

const char *rt_bench_fma_isa(void) {
    if (__builtin_cpu_supports("avx512f"))
        return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "avx2";
    return NULL;
}

double rt_bench_fma_peak_gflops(int32_t threads) {
    const char *isa = rt_bench_fma_isa();
    if (!isa || threads < 1 || threads > RT_BENCH_MAX_THREADS)
        return 0;
    bool wide = strcmp(isa, "avx512") == 0;
    void *(*fn)(void *) = wide ? rt_bench_fma512_thread : rt_bench_fma256_thread;
    double lanes = wide ? 16 : 8, best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[RT_BENCH_MAX_THREADS];
        float sink[RT_BENCH_MAX_THREADS];
        double t0 = rt_bench_now_ns();
        for (int32_t t = 0; t < threads; t++)
            pthread_create(&th[t], NULL, fn, &sink[t]);
        for (int32_t t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
        double gf =
            threads * (double)RT_BENCH_FMA_ITERS * 12 * lanes * 2 / (rt_bench_now_ns() - t0);
        best = gf > best ? gf : best;
    }
    return best;
}

int64_t rt_bench_llc_bytes(void) {
    int64_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], text[64];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        bool ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!ok || !(f = fopen(path, "r")))
            continue;
        ok = fgets(text, sizeof text, f) &&
             (strncmp(text, "Unified", 7) == 0 || strncmp(text, "Data", 4) == 0);
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || level <= best_level || !(f = fopen(path, "r")))
            continue;
        long long size = 0;
        char unit = 0;
        int got = fscanf(f, "%lld%c", &size, &unit);
        fclose(f);
        if (got < 1 || size <= 0)
            continue;
        best = size * (unit == 'K' ? 1024LL : unit == 'M' ? 1048576LL : 1LL);
        best_level = level;
    }
    return best;
}

typedef struct rt_bench_triad {
    float *a, *b, *c;
    int64_t n;
    int32_t passes;
    pthread_barrier_t *start;
} rt_bench_triad;

// Compiled for the widest vectors the CPU has, like the FMA loop and like the kernels it is the
// ceiling of: built for the baseline ISA the loop runs SSE2 and reads about 20% less on one core
// of a Zen 4 VM (the default clone serves CPUs without AVX2).
__attribute__((target_clones("avx512f", "avx2", "default"))) static void *
rt_bench_triad_thread(void *arg) {
    rt_bench_triad *t = arg;
    for (int64_t i = 0; i < t->n; i++) // first touch on this thread
        t->a[i] = 0, t->b[i] = 1.0f, t->c[i] = 2.0f;
    pthread_barrier_wait(t->start);
    for (int32_t p = 0; p < t->passes; p++) {
        float *restrict a = t->a;
        const float *restrict b = t->b, *restrict c = t->c;
        for (int64_t i = 0; i < t->n; i++)
            a[i] = b[i] + 0.5f * c[i];
        __asm__ volatile("" ::"r"(a) : "memory");
    }
    return NULL;
}

double rt_bench_triad_gbps(int32_t threads, int64_t bytes_per_array) {
    if (threads < 1 || threads > RT_BENCH_MAX_THREADS || bytes_per_array < 4096)
        return 0;
    int64_t n = bytes_per_array / 4 / threads;
    // Enough passes for about 4 GB moved over all threads (at least 2): about 0.1 s a sample, as
    // rtcalib's. DRAM bandwidth on the 2-core VM comes in bursts shorter than that: the best of
    // 5 samples of 3 passes (27 ms, 1 thread, 3 x 128 MiB) read 43.9 GB/s on average over ten
    // calls against 40.9 for 11 passes, alternating; single samples of 3 passes ranged 26-44.
    int32_t passes = (int32_t)(4e9 / (12.0 * (double)n * threads)) + 2;
    // Three arrays per thread, each its own allocation as the tensors of a kernel are (and as
    // rtcalib's are). Carved from one block they sit a power of two apart, and on a Zen 4 VM the
    // triad over 3 x 128 MiB read 24 GB/s on one core that way against 33 GB/s apart.
    float *arr[3 * RT_BENCH_MAX_THREADS] = {NULL};
    bool ok = true;
    for (int32_t i = 0; i < 3 * threads; i++)
        ok = (arr[i] = aligned_alloc(64, (size_t)n * sizeof(float))) != NULL && ok;
    if (!ok) {
        for (int32_t i = 0; i < 3 * threads; i++)
            free(arr[i]);
        return 0;
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[RT_BENCH_MAX_THREADS];
        rt_bench_triad tr[RT_BENCH_MAX_THREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
        for (int32_t t = 0; t < threads; t++) {
            tr[t] = (rt_bench_triad){arr[3 * t], arr[3 * t + 1], arr[3 * t + 2], n, passes, &start};
            pthread_create(&th[t], NULL, rt_bench_triad_thread, &tr[t]);
        }
        pthread_barrier_wait(&start);
        double t0 = rt_bench_now_ns();
        for (int32_t t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
        double gbps = 12.0 * (double)n * threads * passes / (rt_bench_now_ns() - t0);
        pthread_barrier_destroy(&start);
        best = gbps > best ? gbps : best;
    }
    for (int32_t i = 0; i < 3 * threads; i++)
        free(arr[i]);
    return best;
}
