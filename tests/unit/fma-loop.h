// fma-loop.h: the tests' own measure of one core's f32 FMA rate, independent of rtgen's probes
// (hal/calib-cpu.c): independent accumulator chains of vector FMA intrinsics, timed with
// clock_gettime, at 8 lanes (AVX2 + FMA: 14 chains, with the two operands within 16 vector
// registers) or 16 (AVX-512F: 20 chains, within 32). Ten chains were enough where the FMA latency
// is 4 cycles on 2 pipes, but read 64-78% of the probe's rate on CI's Zen 5 machine, four times in
// a row: more chains than latency x pipes on every core this project has met. Its value is the
// best of many 1 ms runs for a given wall time: a run that another process interrupts only reads
// low.
#ifndef RT_TEST_FMA_LOOP_H
#define RT_TEST_FMA_LOOP_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define RT_TEST_FMA_CHAINS_8  14
#define RT_TEST_FMA_CHAINS_16 20

// The loops are optimized whatever the build (the ASan build is -O0, where every intrinsic goes
// through the stack and the loop reads a tenth of the rate). clang has no such attribute.
#if defined(__clang__)
#define RT_TEST_FMA_OPTIMIZE
#else
#define RT_TEST_FMA_OPTIMIZE optimize("O2"),
#endif

// X(i) for each of the first 14 chains, and for the 6 more of the 20.
#define RT_TEST_FMA_EACH14(X)                                                                      \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define RT_TEST_FMA_EACH20(X) RT_TEST_FMA_EACH14(X) X(14) X(15) X(16) X(17) X(18) X(19)

// Distinct starting values: equal chains would be merged into one by the compiler.
#define RT_TEST_FMA_INIT8(i)  __m256 a##i = _mm256_set1_ps((float)(i));
#define RT_TEST_FMA_STEP8(i)  a##i = _mm256_fmadd_ps(a##i, x, y);
#define RT_TEST_FMA_SUM8(i)   s = _mm256_add_ps(s, a##i);
#define RT_TEST_FMA_INIT16(i) __m512 a##i = _mm512_set1_ps((float)(i));
#define RT_TEST_FMA_STEP16(i) a##i = _mm512_fmadd_ps(a##i, x, y);
#define RT_TEST_FMA_SUM16(i)  s = _mm512_add_ps(s, a##i);

__attribute__((RT_TEST_FMA_OPTIMIZE target("avx2,fma"), noinline)) static float
rt_test_fma8(int64_t iters) {
    __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f), s = _mm256_setzero_ps();
    RT_TEST_FMA_EACH14(RT_TEST_FMA_INIT8)
    for (int64_t i = 0; i < iters; i++) {
        RT_TEST_FMA_EACH14(RT_TEST_FMA_STEP8)
    }
    RT_TEST_FMA_EACH14(RT_TEST_FMA_SUM8)
    return _mm256_cvtss_f32(s);
}

__attribute__((RT_TEST_FMA_OPTIMIZE target("avx512f"), noinline)) static float
rt_test_fma16(int64_t iters) {
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f), s = _mm512_setzero_ps();
    RT_TEST_FMA_EACH20(RT_TEST_FMA_INIT16)
    for (int64_t i = 0; i < iters; i++) {
        RT_TEST_FMA_EACH20(RT_TEST_FMA_STEP16)
    }
    RT_TEST_FMA_EACH20(RT_TEST_FMA_SUM16)
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
        int chains = lanes == 8 ? RT_TEST_FMA_CHAINS_8 : RT_TEST_FMA_CHAINS_16;
        double gflops = (double)iters * chains * lanes * 2.0 / t * 1e-9;
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
