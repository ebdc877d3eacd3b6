// rtgen 0.1.0: linear_gelu, candidate 0
// spec: examples/linear_gelu.spec
// sizes: M=16
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: gemm M=16 N=4096 K=1024 batch=1 micro-kernel=4x64 lanes=16 kc=1024 mc=16 nc=128 ng=2 items=2 prefetch-b
// rTile L0 dram   [m=16, n=4096, k=1024] footprint 0 B
// rTile L1 l3     [m=16, n=512, k=1024] footprint 2195456 B
// rTile L2 l2     [m=16, n=64, k=128] footprint 45056 B
// rTile L3 l1     [m=8, n=64, k=16] footprint 6656 B
// rTile L4 reg    [m=4, n=64, k=1] footprint 1296 B
// predicted: 775.579 us (bottleneck compute), 0.1347 GFLOP
// phase p0: statement 0: packed GEMM 16x4096x1024, blocks mc=16 nc=128 kc=1024, micro-kernel 4x64, 2 work items
// Build: cc -O3 -march=native -fopenmp -shared -fPIC -o kernel.so kernel.c -lm
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int64_t rt_floordiv(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t rt_floormod(int64_t a, int64_t b) {
    return a - rt_floordiv(a, b) * b;
}
static inline int64_t rt_imin(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t rt_imax(int64_t a, int64_t b) {
    return a > b ? a : b;
}

// Buffers (args[i]): scratch is per thread (589824 bytes)
//   args[1] f32 t_X
//   args[2] f32 t_Wt
//   args[3] f32 t_bias
//   args[4] f32 t_Y
//   args[5] f32 t_t

// phase p0: statement 0: packed GEMM 16x4096x1024, blocks mc=16 nc=128 kc=1024, micro-kernel 4x64 (2 work items)
static void rt_linear_gelu_c0_p0_body(float *restrict scratch, const float *restrict t_X, const float *restrict t_Wt, const float *restrict t_bias, float *restrict t_Y, float *restrict t_t, int64_t lo, int64_t hi) {
    int64_t item;
    int64_t i0;
    int64_t j0;
    int64_t mcur;
    int64_t ncur;
    int64_t pk;
    int64_t p0;
    int64_t kcur;
    int64_t jb;
    int64_t jr;
    int64_t ir;
    int64_t panel;
    int64_t kk;
    int64_t r;
    int64_t row;
    int64_t panel_1;
    int64_t kk_1;
    int64_t r_1;
    int64_t row_1;
    int64_t pf_jb;
    int64_t pf_p0;
    int64_t pf_k;
    int64_t pf_line;
    float cval;
    int64_t m;
    int64_t n;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        i0 = (rt_floormod(item, 1) * 16);
        mcur = rt_imin(16, (16 - i0));
        for (pk = 0; pk < 1; pk++) {
            p0 = (pk * 1024);
            kcur = rt_imin(1024, (1024 - p0));
            // copy: A block -> scratch, mr-tall k-major panels (L3 level; one in L1 at a time)
            for (panel = 0; panel < rt_floordiv(mcur, 4); panel++) {
                #pragma GCC ivdep
                for (kk = 0; kk < kcur; kk++) {
                    scratch[(((panel * kcur) + kk) * 4)] = t_X[(((i0 * 1024) + p0) + ((panel * 4096) + kk))];
                    scratch[((((panel * kcur) + kk) * 4) + 1)] = t_X[((((i0 * 1024) + p0) + ((panel * 4096) + kk)) + 1024)];
                    scratch[((((panel * kcur) + kk) * 4) + 2)] = t_X[((((i0 * 1024) + p0) + ((panel * 4096) + kk)) + 2048)];
                    scratch[((((panel * kcur) + kk) * 4) + 3)] = t_X[((((i0 * 1024) + p0) + ((panel * 4096) + kk)) + 3072)];
                }
            }
            for (panel = rt_floordiv(mcur, 4); panel < rt_floordiv((mcur + 3), 4); panel++) {
                for (kk = 0; kk < kcur; kk++) {
                    #pragma GCC ivdep
                    for (r = 0; r < 4; r++) {
                        row = ((panel * 4) + r);
                        if ((int64_t)(row < mcur)) {
                            scratch[((((panel * kcur) + kk) * 4) + r)] = t_X[(((i0 * 1024) + p0) + ((row * 1024) + kk))];
                        } else {
                            scratch[((((panel * kcur) + kk) * 4) + r)] = 0.0f;
                        }
                    }
                }
            }
            for (jb = (item * 16); jb < rt_imin(32, ((item * 16) + 16)); jb++) {
                j0 = (jb * 128);
                ncur = rt_imin(128, (4096 - j0));
                // copy: B block -> scratch, nr-wide k-major panels (L2 level)
                for (panel_1 = 0; panel_1 < rt_floordiv(ncur, 64); panel_1++) {
                    for (kk_1 = 0; kk_1 < kcur; kk_1++) {
                        #pragma GCC ivdep
                        for (r_1 = 0; r_1 < 64; r_1++) {
                            row_1 = ((panel_1 * 64) + r_1);
                            scratch[(16384 + ((((panel_1 * kcur) + kk_1) * 64) + r_1))] = t_Wt[((j0 + (p0 * 4096)) + (row_1 + (kk_1 * 4096)))];
                        }
                    }
                }
                for (panel_1 = rt_floordiv(ncur, 64); panel_1 < rt_floordiv((ncur + 63), 64); panel_1++) {
                    for (kk_1 = 0; kk_1 < kcur; kk_1++) {
                        #pragma GCC ivdep
                        for (r_1 = 0; r_1 < 64; r_1++) {
                            row_1 = ((panel_1 * 64) + r_1);
                            if ((int64_t)(row_1 < ncur)) {
                                scratch[(16384 + ((((panel_1 * kcur) + kk_1) * 64) + r_1))] = t_Wt[((j0 + (p0 * 4096)) + (row_1 + (kk_1 * 4096)))];
                            } else {
                                scratch[(16384 + ((((panel_1 * kcur) + kk_1) * 64) + r_1))] = 0.0f;
                            }
                        }
                    }
                }
                // the B block packed next, prefetched a share per row panel below
                pf_jb = ((int64_t)((jb + 1) >= rt_imin(32, ((item * 16) + 16))) ? (item * 16) : (jb + 1));
                pf_p0 = (p0 + ((int64_t)((jb + 1) >= rt_imin(32, ((item * 16) + 16))) ? 1024 : 0));
                for (ir = 0; ir < rt_floordiv((mcur + 3), 4); ir++) {
                    for (pf_k = (ir * 256); pf_k < rt_imin(rt_imin(1024, (1024 - pf_p0)), ((ir * 256) + 256)); pf_k++) {
                        for (pf_line = 0; pf_line < (rt_floordiv((rt_imin(128, (4096 - (rt_floormod(pf_jb, 32) * 128))) + 15), 16) + rt_imin(rt_imin(128, (4096 - (rt_floormod(pf_jb, 32) * 128))), 1)); pf_line++) {
                            __builtin_prefetch(&t_Wt[(((pf_p0 + pf_k) * 4096) + ((rt_floormod(pf_jb, 32) * 128) + rt_imin((pf_line * 16), (rt_imin(128, (4096 - (rt_floormod(pf_jb, 32) * 128))) - 1))))], 0, 2);
                        }
                    }
                    for (jr = 0; jr < rt_floordiv((ncur + 63), 64); jr++) {
                        { // micro-kernel 4x64: broadcast A, FMA with B rows, reduce over k
                            const float *ua = scratch + ((ir * 4) * kcur);
                            const float *ub = scratch + (16384 + ((jr * 64) * kcur));
                            float uacc[4][64];
                            memset(uacc, 0, sizeof uacc);
                            const int64_t ukc = kcur;
                            for (int64_t uk = 0; uk < ukc; uk++) {
                                for (int ui = 0; ui < 4; ui++) {
                                    const float av = ua[uk * 4 + ui];
                                    for (int uj = 0; uj < 64; uj++)
                                        uacc[ui][uj] += av * ub[uk * 64 + uj];
                                }
                            }
                            float *uc = t_t + (((i0 + (ir * 4)) * 4096) + (j0 + (jr * 64)));
                            const int64_t umv = rt_imin(4, (mcur - (ir * 4))), unv = rt_imin(64, (ncur - (jr * 64)));
                            if ((int64_t)(pk == 0)) {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++) {
                                        cval = (0 ? uc[ui * 4096 + uj] : 0.0f) + uacc[ui][uj];
                                        m = (i0 + (ir * 4)) + ui;
                                        n = (j0 + (jr * 64)) + uj;
                                        t_Y[((m * 4096) + n)] = ((0.5f * (cval + t_bias[n])) * (1.0f + erff(((cval + t_bias[n]) * 0.70710678f))));
                                    }
                            } else if (0) {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++)
                                        uc[ui * 4096 + uj] += uacc[ui][uj];
                            } else {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++)
                                        uc[ui * 4096 + uj] = uacc[ui][uj];
                            }
                        }
                    }
                }
            }
        }
    }
}

void rt_linear_gelu_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_linear_gelu_c0_p0_body(scratch, (float *)args[1], (float *)args[2], (float *)args[3], (float *)args[4], (float *)args[5], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_linear_gelu_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = aligned_alloc(64, 589824);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 2; i++)
            rt_linear_gelu_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
