// bench-gemm.c: fp32 GEMM of rtgen's JIT kernel (top-10 profiled, the winner's median) against
// oneDNN dnnl_sgemm and OpenBLAS cblas_sgemm (OPENBLAS_CORETYPE=SkylakeX, set by re-executing
// itself) in the same run, on 1 and 2 threads, with the ratio to oneDNN and the percentage of a
// measured AVX-512 FMA peak. Results are reported, never asserted (style.md §6).
// Usage: bench-gemm [N ...]   (default 1024 2048; irregular sizes such as 1031 work too)
#include "rtgen.h"

#include <cblas.h>
#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void openblas_set_num_threads(int n);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((target("avx512f"))) static void *fma_loop(void *arg) {
    __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    __m512 a0 = x, a1 = y, a2 = x, a3 = y, a4 = x, a5 = y, a6 = x, a7 = y, a8 = x, a9 = y;
    __m512 a10 = x, a11 = y;
    for (long it = 0; it < 20000000L; it++) {
        a0 = _mm512_fmadd_ps(a0, x, y), a1 = _mm512_fmadd_ps(a1, x, y);
        a2 = _mm512_fmadd_ps(a2, x, y), a3 = _mm512_fmadd_ps(a3, x, y);
        a4 = _mm512_fmadd_ps(a4, x, y), a5 = _mm512_fmadd_ps(a5, x, y);
        a6 = _mm512_fmadd_ps(a6, x, y), a7 = _mm512_fmadd_ps(a7, x, y);
        a8 = _mm512_fmadd_ps(a8, x, y), a9 = _mm512_fmadd_ps(a9, x, y);
        a10 = _mm512_fmadd_ps(a10, x, y), a11 = _mm512_fmadd_ps(a11, x, y);
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    *(float *)arg = _mm512_reduce_add_ps(s);
    return NULL;
}

// Measured AVX-512 FMA peak in GFLOP/s on `threads` threads (best of 3).
static double fma_peak(int threads) {
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[8];
        float sink[8];
        double t0 = now_s();
        for (int t = 0; t < threads; t++)
            pthread_create(&th[t], NULL, fma_loop, &sink[t]);
        for (int t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
        double gf = threads * 20000000.0 * 12 * 16 * 2 / (now_s() - t0) * 1e-9;
        best = gf > best ? gf : best;
    }
    return best;
}

typedef void (*gemm_fn)(int n, const float *A, const float *B, float *C);

static void run_dnnl(int n, const float *A, const float *B, float *C) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
}
static void run_openblas(int n, const float *A, const float *B, float *C) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
}

// Median GFLOP/s over repetitions within ~0.5 s (after one warm-up).
static double time_peer(gemm_fn f, int n, const float *A, const float *B, float *C) {
    f(n, A, B, C);
    double ts[64];
    int reps = 0;
    double start = now_s();
    while (reps < 64 && (reps < 3 || now_s() - start < 0.5)) {
        double t0 = now_s();
        f(n, A, B, C);
        ts[reps++] = now_s() - t0;
    }
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
            double t = ts[j];
            ts[j] = ts[j - 1];
            ts[j - 1] = t;
        }
    return 2.0 * n * n * (double)n / ts[reps / 2] * 1e-9;
}

static double time_rtgen(const rt_device *dev, int n, int threads, double *compile_ms,
                         const char **what) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_size_binding sets[3] = {{"M", n}, {"N", n}, {"K", n}};
    rt_op *op;
    rt_perf_result *perf;
    rt_bindings *b;
    rt_cpu_report *rep;
    rt_perf_options popt = {.top_k = 10};
    rt_cpu_options copt = {.profile = true, .threads = threads, .budget_ms = 300};
    double gf = 0;
    if (rt_spec_load(a, RTGEN_SOURCE_DIR "/examples/matmul.spec", sets, 3, &op, &err) ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) || rt_bindings_new(a, op, 1, &b, &err) ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err)) {
        fprintf(stderr, "rtgen: %s\n", err.msg);
    } else if (rep->winner >= 0) {
        gf = rep->cands[rep->winner].gflops;
        *compile_ms = rep->total_ms;
        static char buf[256];
        snprintf(buf, sizeof buf, "%s", rep->cands[rep->winner].summary);
        *what = buf;
    }
    rt_arena_free(a);
    return gf;
}

int main(int argc, char **argv) {
    // SkylakeX only where the CPU has AVX-512 (bench-ops.c's main says why).
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) {
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        execv("/proc/self/exe", argv);
    }
    rt_device dev;
    rt_err err = {0};
    if (rt_hal_detect_host(NULL, &dev, &err) != RT_OK) {
        fprintf(stderr, "host: %s\n", err.msg);
        return 1;
    }
    int sizes[16], n_sizes = 0;
    for (int i = 1; i < argc && n_sizes < 16; i++)
        sizes[n_sizes++] = atoi(argv[i]);
    if (n_sizes == 0) {
        sizes[0] = 1024;
        sizes[1] = 2048;
        n_sizes = 2;
    }
    printf("%-6s %-3s %10s %10s %10s %8s %8s %10s  %s\n", "n", "thr", "rtgen", "oneDNN", "OpenBLAS",
           "vs dnnl", "%peak", "rtgen ms", "winner");
    for (int threads = 1; threads <= 2; threads++) {
        double peak = fma_peak(threads);
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
        for (int s = 0; s < n_sizes; s++) {
            int n = sizes[s];
            float *A = aligned_alloc(64, (size_t)n * n * 4),
                  *B = aligned_alloc(64, (size_t)n * n * 4),
                  *C = aligned_alloc(64, (size_t)n * n * 4);
            for (long i = 0; i < (long)n * n; i++) {
                A[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
                B[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
            }
            double g_dnnl = time_peer(run_dnnl, n, A, B, C);
            double g_blas = time_peer(run_openblas, n, A, B, C);
            double ms = 0;
            const char *what = "";
            double g_rt = time_rtgen(&dev, n, threads, &ms, &what);
            printf("%-6d %-3d %10.1f %10.1f %10.1f %8.2f %8.1f %10.0f  %s\n", n, threads, g_rt,
                   g_dnnl, g_blas, g_rt / g_dnnl, 100.0 * g_rt / peak, ms, what);
            free(A);
            free(B);
            free(C);
        }
        printf("(measured AVX-512 FMA peak on %d thread%s: %.1f GFLOP/s)\n", threads,
               threads > 1 ? "s" : "", peak);
    }
    return 0;
}
