// rtgen 0.1.0: conv2d, candidate 0
// spec: examples/conv2d.spec
// sizes: N=1 C=8 H=10 W=10 F=16 OH=5 OW=5
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: gemm M=16 N=25 K=72 batch=1 micro-kernel=8x32 lanes=16 kc=72 mc=8 nc=32 ng=1 items=2 implicit
// rTile L0 dram   [n=1, f=16, y=5, x=5, c=8, r=3, s=3] footprint 0 B
// rTile L1 l3     [n=1, f=16, y=6, x=5, c=8, r=3, s=3] footprint 9408 B
// rTile L2 l2     [n=1, f=16, y=6, x=5, c=4, r=3, s=3] footprint 5504 B
// rTile L3 l1     [n=1, f=8, y=3, x=5, c=2, r=3, s=3] footprint 1616 B
// rTile L4 reg    [n=1, f=8, y=3, x=5, c=1, r=3, s=3] footprint 1048 B
// predicted: 0.436 us (bottleneck compute), 6.912e-05 GFLOP
// phase p0: statement 0: implicit GEMM 1 x 16x25x72 (gathered packs), blocks mc=8 nc=32 kc=72, micro-kernel 8x32, 2 work items
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

// Buffers (args[i]): scratch is per thread (11520 bytes)
//   args[1] f32 t_I
//   args[2] f32 t_Wt
//   args[3] f32 t_O

// phase p0: statement 0: implicit GEMM 1 x 16x25x72 (gathered packs), blocks mc=8 nc=32 kc=72, micro-kernel 8x32 (2 work items)
static void rt_conv2d_c0_p0_body(float *restrict scratch, const float *restrict t_I, const float *restrict t_Wt, float *restrict t_O, int64_t lo, int64_t hi) {
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
    int64_t cb;
    int64_t panel;
    int64_t kk;
    int64_t r;
    int64_t row;
    int64_t n;
    int64_t kk_1;
    int64_t panel_1;
    int64_t jb_1;
    int64_t je;
    int64_t dbase;
    int64_t q;
    int64_t xa;
    int64_t xb;
    int64_t xlo;
    int64_t xhi;
    int64_t o0;
    int64_t sbase;
    int64_t x;
    int64_t tail;
    int64_t s;
    int64_t r_1;
    int64_t c;
    int64_t y;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        i0 = (rt_floormod(item, 2) * 8);
        mcur = rt_imin(8, (16 - i0));
        for (pk = 0; pk < 1; pk++) {
            p0 = (pk * 72);
            kcur = rt_imin(72, (72 - p0));
            // copy: A block -> scratch, mr-tall k-major panels (L3 level; one in L1 at a time)
            for (panel = 0; panel < rt_floordiv(mcur, 8); panel++) {
                #pragma GCC ivdep
                for (kk = 0; kk < kcur; kk++) {
                    scratch[(((panel * kcur) + kk) * 8)] = t_Wt[(((i0 * 72) + p0) + ((panel * 576) + kk))];
                    scratch[((((panel * kcur) + kk) * 8) + 1)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 72)];
                    scratch[((((panel * kcur) + kk) * 8) + 2)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 144)];
                    scratch[((((panel * kcur) + kk) * 8) + 3)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 216)];
                    scratch[((((panel * kcur) + kk) * 8) + 4)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 288)];
                    scratch[((((panel * kcur) + kk) * 8) + 5)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 360)];
                    scratch[((((panel * kcur) + kk) * 8) + 6)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 432)];
                    scratch[((((panel * kcur) + kk) * 8) + 7)] = t_Wt[((((i0 * 72) + p0) + ((panel * 576) + kk)) + 504)];
                }
            }
            for (panel = rt_floordiv(mcur, 8); panel < rt_floordiv((mcur + 7), 8); panel++) {
                for (kk = 0; kk < kcur; kk++) {
                    #pragma GCC ivdep
                    for (r = 0; r < 8; r++) {
                        row = ((panel * 8) + r);
                        if ((int64_t)(row < mcur)) {
                            scratch[((((panel * kcur) + kk) * 8) + r)] = t_Wt[(((i0 * 72) + p0) + ((row * 72) + kk))];
                        } else {
                            scratch[((((panel * kcur) + kk) * 8) + r)] = 0.0f;
                        }
                    }
                }
            }
            for (cb = rt_floordiv(item, 2); cb < rt_imin(1, (rt_floordiv(item, 2) + 1)); cb++) {
                jb = rt_floormod(cb, 1);
                n = cb;
                j0 = (jb * 32);
                ncur = rt_imin(32, (25 - j0));
                // copy: B block -> scratch, nr-wide k-major panels copied by row segments (L2 level)
                for (kk_1 = 0; kk_1 < kcur; kk_1++) {
                    s = rt_floormod((p0 + kk_1), 3);
                    r_1 = rt_floormod(rt_floordiv((p0 + kk_1), 3), 3);
                    c = rt_floordiv((p0 + kk_1), 9);
                    for (panel_1 = 0; panel_1 < rt_floordiv((ncur + 31), 32); panel_1++) {
                        jb_1 = (j0 + (panel_1 * 32));
                        je = rt_imin((jb_1 + 32), (j0 + ncur));
                        dbase = ((576 + (((panel_1 * kcur) + kk_1) * 32)) - jb_1);
                        for (q = rt_floordiv(jb_1, 5); q < (rt_floordiv((je - 1), 5) + 1); q++) {
                            y = q;
                            xa = rt_imax((jb_1 - (q * 5)), 0);
                            xb = rt_imin((je - (q * 5)), 5);
                            x = 0;
                            o0 = ((((((n * 8) + c) * 10) + (((2 * y) + r_1) - 1)) * 10) + (((2 * x) + s) - 1));
                            xlo = ((int64_t)((int64_t)((int64_t)((int64_t)(n >= 0) && (int64_t)(n < 1)) && (int64_t)((int64_t)(c >= 0) && (int64_t)(c < 8))) && (int64_t)((int64_t)((((2 * y) + r_1) - 1) >= 0) && (int64_t)((((2 * y) + r_1) - 1) < 10))) ? rt_imin(rt_imax(rt_floordiv((1 - (((2 * x) + s) - 1)), 2), xa), xb) : xb);
                            xhi = rt_imax(rt_imin(rt_floordiv((11 - (((2 * x) + s) - 1)), 2), xb), xlo);
                            sbase = (dbase + (q * 5));
                            #pragma GCC ivdep
                            for (x = xa; x < xlo; x++) {
                                scratch[(sbase + x)] = 0.0f;
                            }
                            #pragma GCC ivdep
                            for (x = xlo; x < xhi; x++) {
                                scratch[(sbase + x)] = t_I[(o0 + (x * 2))];
                            }
                            #pragma GCC ivdep
                            for (x = xhi; x < xb; x++) {
                                scratch[(sbase + x)] = 0.0f;
                            }
                        }
                        #pragma GCC ivdep
                        for (tail = je; tail < (jb_1 + 32); tail++) {
                            scratch[(dbase + tail)] = 0.0f;
                        }
                    }
                }
                for (ir = 0; ir < rt_floordiv((mcur + 7), 8); ir++) {
                    for (jr = 0; jr < rt_floordiv((ncur + 31), 32); jr++) {
                        { // micro-kernel 8x32: broadcast A, FMA with B rows, reduce over k
                            const float *ua = scratch + ((ir * 8) * kcur);
                            const float *ub = scratch + (576 + ((jr * 32) * kcur));
                            float uacc[8][32];
                            memset(uacc, 0, sizeof uacc);
                            const int64_t ukc = kcur;
                            for (int64_t uk = 0; uk < ukc; uk++) {
                                for (int ui = 0; ui < 8; ui++) {
                                    const float av = ua[uk * 8 + ui];
                                    for (int uj = 0; uj < 32; uj++)
                                        uacc[ui][uj] += av * ub[uk * 32 + uj];
                                }
                            }
                            float *uc = t_O + ((n * 400) + (((i0 + (ir * 8)) * 25) + (j0 + (jr * 32))));
                            const int64_t umv = rt_imin(8, (mcur - (ir * 8))), unv = rt_imin(32, (ncur - (jr * 32)));
                            if (0) {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++)
                                        uc[ui * 25 + uj] += uacc[ui][uj];
                            } else {
                                for (int64_t ui = 0; ui < umv; ui++)
                                    for (int64_t uj = 0; uj < unv; uj++)
                                        uc[ui * 25 + uj] = uacc[ui][uj];
                            }
                        }
                    }
                }
            }
        }
    }
}

void rt_conv2d_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_conv2d_c0_p0_body(scratch, (float *)args[1], (float *)args[2], (float *)args[3], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_conv2d_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = aligned_alloc(64, 11520);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 2; i++)
            rt_conv2d_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
