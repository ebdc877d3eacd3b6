// rtgen 0.1.0: matmul, candidate 0
// spec: examples/matmul.spec
// sizes: M=64 N=48 K=32
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: gemm M=64 N=48 K=32 batch=1 micro-kernel=8x48 lanes=16 kc=32 mc=32 nc=48 ng=1 items=2 prefetch-b
// rTile L0 dram   [m=64, n=48, k=32] footprint 0 B
// rTile L1 l3     [m=64, n=48, k=32] footprint 26624 B
// rTile L2 l2     [m=32, n=48, k=32] footprint 16384 B
// rTile L3 l1     [m=8, n=48, k=16] footprint 5120 B
// rTile L4 reg    [m=8, n=48, k=1] footprint 1760 B
// predicted: 1.045 us (bottleneck compute), 0.0001966 GFLOP
// phase p0: statement 0: packed GEMM 64x48x32, blocks mc=32 nc=48 kc=32, micro-kernel 8x48, 2 work items
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

// Buffers (args[i]): scratch is per thread (10240 bytes)
//   args[1] f32 t_A
//   args[2] f32 t_B
//   args[3] f32 t_C

// phase p0: statement 0: packed GEMM 64x48x32, blocks mc=32 nc=48 kc=32, micro-kernel 8x48 (2 work items)
static void rt_matmul_c0_p0_body(float *restrict scratch, const float *restrict t_A, const float *restrict t_B, float *restrict t_C, int64_t lo, int64_t hi) {
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
    (void)scratch;
    for (item = lo; item < hi; item++) {
        i0 = (rt_floormod(item, 2) * 32);
        mcur = rt_imin(32, (64 - i0));
        for (pk = 0; pk < 1; pk++) {
            p0 = (pk * 32);
            kcur = rt_imin(32, (32 - p0));
            // copy: A block -> scratch, mr-tall k-major panels (L3 level; one in L1 at a time)
            for (panel = 0; panel < rt_floordiv(mcur, 8); panel++) {
                #pragma GCC ivdep
                for (kk = 0; kk < kcur; kk++) {
                    scratch[(((panel * kcur) + kk) * 8)] = t_A[(((i0 * 32) + p0) + ((panel * 256) + kk))];
                    scratch[((((panel * kcur) + kk) * 8) + 1)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 32)];
                    scratch[((((panel * kcur) + kk) * 8) + 2)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 64)];
                    scratch[((((panel * kcur) + kk) * 8) + 3)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 96)];
                    scratch[((((panel * kcur) + kk) * 8) + 4)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 128)];
                    scratch[((((panel * kcur) + kk) * 8) + 5)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 160)];
                    scratch[((((panel * kcur) + kk) * 8) + 6)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 192)];
                    scratch[((((panel * kcur) + kk) * 8) + 7)] = t_A[((((i0 * 32) + p0) + ((panel * 256) + kk)) + 224)];
                }
            }
            for (panel = rt_floordiv(mcur, 8); panel < rt_floordiv((mcur + 7), 8); panel++) {
                for (kk = 0; kk < kcur; kk++) {
                    #pragma GCC ivdep
                    for (r = 0; r < 8; r++) {
                        row = ((panel * 8) + r);
                        if ((int64_t)(row < mcur)) {
                            scratch[((((panel * kcur) + kk) * 8) + r)] = t_A[(((i0 * 32) + p0) + ((row * 32) + kk))];
                        } else {
                            scratch[((((panel * kcur) + kk) * 8) + r)] = 0.0f;
                        }
                    }
                }
            }
            for (jb = rt_floordiv(item, 2); jb < rt_imin(1, (rt_floordiv(item, 2) + 1)); jb++) {
                j0 = (jb * 48);
                ncur = rt_imin(48, (48 - j0));
                // copy: B block -> scratch, nr-wide k-major panels (L2 level)
                for (panel_1 = 0; panel_1 < rt_floordiv(ncur, 48); panel_1++) {
                    for (kk_1 = 0; kk_1 < kcur; kk_1++) {
                        #pragma GCC ivdep
                        for (r_1 = 0; r_1 < 48; r_1++) {
                            row_1 = ((panel_1 * 48) + r_1);
                            scratch[(1024 + ((((panel_1 * kcur) + kk_1) * 48) + r_1))] = t_B[((j0 + (p0 * 48)) + (row_1 + (kk_1 * 48)))];
                        }
                    }
                }
                for (panel_1 = rt_floordiv(ncur, 48); panel_1 < rt_floordiv((ncur + 47), 48); panel_1++) {
                    for (kk_1 = 0; kk_1 < kcur; kk_1++) {
                        #pragma GCC ivdep
                        for (r_1 = 0; r_1 < 48; r_1++) {
                            row_1 = ((panel_1 * 48) + r_1);
                            if ((int64_t)(row_1 < ncur)) {
                                scratch[(1024 + ((((panel_1 * kcur) + kk_1) * 48) + r_1))] = t_B[((j0 + (p0 * 48)) + (row_1 + (kk_1 * 48)))];
                            } else {
                                scratch[(1024 + ((((panel_1 * kcur) + kk_1) * 48) + r_1))] = 0.0f;
                            }
                        }
                    }
                }
                for (ir = 0; ir < rt_floordiv((mcur + 7), 8); ir++) {
                    for (jr = 0; jr < rt_floordiv((ncur + 47), 48); jr++) {
                        { // micro-kernel 8x48: broadcast A, FMA with B rows, reduce over k
                            const float *ua = scratch + ((ir * 8) * kcur);
                            const float *ub = scratch + (1024 + ((jr * 48) * kcur));
                            float uacc[8][48];
                            memset(uacc, 0, sizeof uacc);
                            const int64_t ukc = kcur;
                            for (int64_t uk = 0; uk < ukc; uk++) {
                                for (int ui = 0; ui < 8; ui++) {
                                    const float av = ua[uk * 8 + ui];
                                    for (int uj = 0; uj < 48; uj++)
                                        uacc[ui][uj] += av * ub[uk * 48 + uj];
                                }
                            }
                            float *uc = t_C + (((i0 + (ir * 8)) * 48) + (j0 + (jr * 48)));
                            const int64_t umv = rt_imin(8, (mcur - (ir * 8))), unv = rt_imin(48, (ncur - (jr * 48)));
                            if (0) {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++)
                                        uc[ui * 48 + uj] += uacc[ui][uj];
                            } else {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++)
                                        uc[ui * 48 + uj] = uacc[ui][uj];
                            }
                        }
                    }
                }
            }
        }
    }
}

void rt_matmul_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_matmul_c0_p0_body(scratch, (float *)args[1], (float *)args[2], (float *)args[3], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_matmul_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = aligned_alloc(64, 10240);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 2; i++)
            rt_matmul_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
