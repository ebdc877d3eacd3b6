// fma-loop.h: the tests' own measure of one core's f32 FMA rate, independent of rtgen's probes
// (hal/calib-cpu.c): 10 independent accumulator chains of vector FMA intrinsics (more than FMA
// latency 4 x 2 pipes, with the operands within 16 vector registers), at 8 lanes (AVX2 + FMA)
// or 16 (AVX-512F), timed with clock_gettime. Its value is the best of many 1 ms runs for a
// given wall time: a run that another process interrupts only reads low.
#ifndef RT_TEST_FMA_LOOP_H
#define RT_TEST_FMA_LOOP_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define RT_TEST_FMA_CHAINS 10

// The loops are optimized whatever the build (the ASan build is -O0, where every intrinsic goes
// through the stack and the loop reads a tenth of the rate). clang has no such attribute.
#if defined(__clang__)
#define RT_TEST_FMA_OPTIMIZE
#else
#define RT_TEST_FMA_OPTIMIZE optimize("O2"),
#endif

#define RT_TEST_FMA_STEP(fma)                                                                      \
    do {                                                                                           \
        a0 = fma(a0, x, y);                                                                        \
        a1 = fma(a1, x, y);                                                                        \
        a2 = fma(a2, x, y);                                                                        \
        a3 = fma(a3, x, y);                                                                        \
        a4 = fma(a4, x, y);                                                                        \
        a5 = fma(a5, x, y);                                                                        \
        a6 = fma(a6, x, y);                                                                        \
        a7 = fma(a7, x, y);                                                                        \
        a8 = fma(a8, x, y);                                                                        \
        a9 = fma(a9, x, y);                                                                        \
    } while (0)

__attribute__((RT_TEST_FMA_OPTIMIZE target("avx2,fma"), noinline)) static float
rt_test_fma8(int64_t iters) {
    __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f);
    // Distinct starting values: equal chains would be merged into one by the compiler.
    __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(1.0f), a2 = _mm256_set1_ps(2.0f);
    __m256 a3 = _mm256_set1_ps(3.0f), a4 = _mm256_set1_ps(4.0f), a5 = _mm256_set1_ps(5.0f);
    __m256 a6 = _mm256_set1_ps(6.0f), a7 = _mm256_set1_ps(7.0f), a8 = _mm256_set1_ps(8.0f);
    __m256 a9 = _mm256_set1_ps(9.0f);
    for (int64_t i = 0; i < iters; i++)
        RT_TEST_FMA_STEP(_mm256_fmadd_ps);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
    return _mm256_cvtss_f32(s);
}

__attribute__((RT_TEST_FMA_OPTIMIZE target("avx512f"), noinline)) static float
rt_test_fma16(int64_t iters) {
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
    __m512 a0 = _mm512_set1_ps(0.0f), a1 = _mm512_set1_ps(1.0f), a2 = _mm512_set1_ps(2.0f);
    __m512 a3 = _mm512_set1_ps(3.0f), a4 = _mm512_set1_ps(4.0f), a5 = _mm512_set1_ps(5.0f);
    __m512 a6 = _mm512_set1_ps(6.0f), a7 = _mm512_set1_ps(7.0f), a8 = _mm512_set1_ps(8.0f);
    __m512 a9 = _mm512_set1_ps(9.0f);
    for (int64_t i = 0; i < iters; i++)
        RT_TEST_FMA_STEP(_mm512_fmadd_ps);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(a8, a9));
    return _mm512_reduce_add_ps(s);
}
#endif

static double rt_test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One core's f32 FMA rate in GFLOP/s at `lanes` (8 or 16), the best of 1 ms runs over `seconds`
// of wall time; 0 when this host or build cannot run it.
static inline double rt_test_fma_gflops(int lanes, double seconds) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (lanes == 8 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
        return 0.0;
    if (lanes == 16 && !__builtin_cpu_supports("avx512f"))
        return 0.0;
    if (lanes != 8 && lanes != 16)
        return 0.0;
    volatile float sink = 0.0f;
    int64_t iters = 1000;
    double best = 0.0, end = rt_test_now_s() + seconds;
    while (rt_test_now_s() < end) {
        double t0 = rt_test_now_s();
        sink += lanes == 8 ? rt_test_fma8(iters) : rt_test_fma16(iters);
        double t = rt_test_now_s() - t0;
        if (t < 0.5e-3) { // too short to time: longer runs
            iters *= 2;
            continue;
        }
        double gflops = (double)iters * RT_TEST_FMA_CHAINS * lanes * 2.0 / t * 1e-9;
        best = gflops > best ? gflops : best;
    }
    (void)sink;
    return best;
#else
    (void)lanes;
    (void)seconds;
    return 0.0;
#endif
}

#endif
