// rtgen 0.1.0: conv2d, candidate 0
// spec: examples/conv2d.spec
// sizes: N=1 C=8 H=10 W=10 F=16 OH=5 OW=5
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// rTile L0 dram   [n=1, f=16, y=5, x=5, c=8, r=3, s=3] footprint 0 B
// rTile L1 l3     [n=1, f=16, y=6, x=5, c=8, r=3, s=3] footprint 9408 B
// rTile L2 l2     [n=1, f=8, y=6, x=5, c=8, r=3, s=3] footprint 6304 B
// rTile L3 l1     [n=1, f=8, y=6, x=5, c=4, r=3, s=3] footprint 3552 B
// rTile L4 reg    [n=1, f=8, y=3, x=5, c=1, r=3, s=3] footprint 1048 B
// predicted: 0.823 us (bottleneck compute), 6.912e-05 GFLOP
// phase p0: statement 0, 1 work items
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

// Buffers (args[i]): scratch is per thread (0 bytes)
//   args[1] f32 t_I
//   args[2] f32 t_Wt
//   args[3] f32 t_O

// phase p0: statement 0 (1 work items)
static void rt_conv2d_c0_p0_body(float *restrict scratch, const float *restrict t_I, const float *restrict t_Wt, float *restrict t_O, int64_t lo, int64_t hi) {
    int64_t item;
    int64_t n;
    int64_t f;
    int64_t y;
    int64_t x;
    float acc;
    int64_t c;
    int64_t r;
    int64_t s;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        n = item;
        for (f = 0; f < 16; f++) {
            for (y = 0; y < 5; y++) {
                for (x = 0; x < 5; x++) {
                    acc = 0.0f;
                    for (c = 0; c < 8; c++) {
                        for (r = 0; r < 3; r++) {
                            #pragma GCC ivdep
                            for (s = 0; s < 3; s++) {
                                acc = (acc + (((int64_t)((int64_t)((int64_t)((int64_t)((int64_t)(n >= 0) && (int64_t)(n < 1)) && (int64_t)((int64_t)(c >= 0) && (int64_t)(c < 8))) && (int64_t)((int64_t)((((2 * y) + r) - 1) >= 0) && (int64_t)((((2 * y) + r) - 1) < 10))) && (int64_t)((int64_t)((((2 * x) + s) - 1) >= 0) && (int64_t)((((2 * x) + s) - 1) < 10))) ? t_I[((int64_t)((int64_t)((int64_t)((int64_t)((int64_t)(n >= 0) && (int64_t)(n < 1)) && (int64_t)((int64_t)(c >= 0) && (int64_t)(c < 8))) && (int64_t)((int64_t)((((2 * y) + r) - 1) >= 0) && (int64_t)((((2 * y) + r) - 1) < 10))) && (int64_t)((int64_t)((((2 * x) + s) - 1) >= 0) && (int64_t)((((2 * x) + s) - 1) < 10))) ? ((((((n * 8) + c) * 10) + (((2 * y) + r) - 1)) * 10) + (((2 * x) + s) - 1)) : 0)] : 0.0f) * t_Wt[((((((f * 8) + c) * 3) + r) * 3) + s)]));
                            }
                        }
                    }
                    t_O[((((((n * 16) + f) * 5) + y) * 5) + x)] = acc;
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
        float *scratch = NULL;
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 1; i++)
            rt_conv2d_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
