// gemm16-host-main.hpp: the driver both host runs of emitted matrix-instruction GEMMs share
// (wmma-host-main.cpp: CUDA warps of 32; mfma-host-main.cpp: AMD wavefronts of 64). The includer
// provides the host stand-in and the kernel (RT_KERNEL, RT_THREADS threads x RT_BLOCKS blocks),
// the 16-bit element type rt_t16 with rt_conv (float -> rt_t16) and rt_wide (rt_t16 -> float),
// RT_HOST_SEED, RT_HOST_GROUP (lanes per warp or wavefront) and RT_HOST_GROUP_BARS (the stand-in's
// vector of one barrier per group). main() fills A (M x K) and B (K x N) with random values,
// poisons C with NaN (catching unwritten elements), runs every block's threads, and compares C
// with a double reference: exit 1 when an element is off by more than 1e-4 * (1 + sum |a b|).
#ifndef RT_GEMM16_HOST_MAIN_HPP
#define RT_GEMM16_HOST_MAIN_HPP

#include <memory>
#include <random>

int main() {
    const long M = RT_M, N = RT_N, K = RT_K;
    std::mt19937 rng(RT_HOST_SEED);
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
        RT_HOST_GROUP_BARS.clear();
        for (unsigned w = 0; w < (RT_THREADS + RT_HOST_GROUP - 1) / RT_HOST_GROUP; w++) {
            unsigned left = RT_THREADS - w * RT_HOST_GROUP;
            wb.emplace_back(new std::barrier<>(left < RT_HOST_GROUP ? left : RT_HOST_GROUP));
            RT_HOST_GROUP_BARS.push_back(wb.back().get());
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

#endif
