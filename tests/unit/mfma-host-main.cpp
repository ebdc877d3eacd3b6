// mfma-host-main.cpp: runs an emitted MFMA GEMM kernel (included as RT_KERNEL_FILE, kernel
// RT_KERNEL, RT_THREADS threads x RT_BLOCKS blocks) on the host stand-in mfma-host.hpp over
// random 16-bit A (M x K) and B (K x N) (RT_BF16: bfloat16 as unsigned short, rounded to nearest
// even; else _Float16), and compares C with a double reference: exits 1 when an element is off
// by more than 1e-4 * (1 + sum |a b|). Poisoned C (NaN) catches unwritten elements. Part of
// tests/unit/test-gpu-mfma-host.sh.
#include "mfma-host.hpp"
#include RT_KERNEL_FILE

#include <memory>
#include <random>

#ifdef RT_BF16
typedef unsigned short rt_t16;
static rt_t16 rt_conv(float f) {
    unsigned x = __float_as_uint(f);
    return (rt_t16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static float rt_wide(rt_t16 h) {
    return __uint_as_float((unsigned)h << 16);
}
#else
typedef _Float16 rt_t16;
static rt_t16 rt_conv(float f) {
    return (rt_t16)f;
}
static float rt_wide(rt_t16 h) {
    return (float)h;
}
#endif

int main() {
    const long M = RT_M, N = RT_N, K = RT_K;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    rt_t16 *A = (rt_t16 *)aligned_alloc(256, (M * K * 2 + 255) / 256 * 256);
    rt_t16 *B = (rt_t16 *)aligned_alloc(256, (K * N * 2 + 255) / 256 * 256);
    float *C = (float *)aligned_alloc(256, (M * N * 4 + 255) / 256 * 256);
    for (long i = 0; i < M * K; i++)
        A[i] = rt_conv(u(rng));
    for (long i = 0; i < K * N; i++)
        B[i] = rt_conv(u(rng));
    for (long i = 0; i < M * N; i++)
        C[i] = NAN;
    for (unsigned b = 0; b < RT_BLOCKS; b++) {
        std::barrier<> bar(RT_THREADS);
        rt_host_bar = &bar;
        std::vector<std::unique_ptr<std::barrier<>>> wb;
        rt_host_wave_bar.clear();
        for (unsigned w = 0; w < (RT_THREADS + 63) / 64; w++) {
            wb.emplace_back(new std::barrier<>(RT_THREADS - w * 64 < 64 ? RT_THREADS - w * 64 : 64));
            rt_host_wave_bar.push_back(wb.back().get());
        }
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < RT_THREADS; t++)
            ts.emplace_back([=] {
                threadIdx = {t, 0, 0};
                blockIdx = {b, 0, 0};
                RT_KERNEL(A, B, C);
            });
        for (auto &th : ts)
            th.join();
    }
    long bad = 0;
    for (long m = 0; m < M; m++)
        for (long n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (long k = 0; k < K; k++) {
                double p = (double)rt_wide(A[m * K + k]) * rt_wide(B[k * N + n]);
                s += p;
                mag += std::fabs(p);
            }
            double c = C[m * N + n];
            if (!(std::fabs(c - s) <= 1e-4 * (1 + mag))) {
                if (bad++ < 3)
                    fprintf(stderr, "C[%ld][%ld] = %.9g, expected %.9g\n", m, n, c, s);
            }
        }
    printf("%ld x %ld x %ld on %u blocks of %u threads: %ld of %ld elements wrong\n", M, N, K,
           (unsigned)RT_BLOCKS, (unsigned)RT_THREADS, bad, M * N);
    return bad ? 1 : 0;
}
