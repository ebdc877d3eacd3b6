// rtgen 0.1.0: softmax, candidate 0
// spec: examples/softmax.spec
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: nest
// rTile L0 dram   [n=4096, d=1024] footprint 0 B
// rTile L1 l3     [n=128, d=1024] footprint 524800 B
// rTile L2 l2     [n=128, d=1024] footprint 524800 B
// rTile L3 l1     [n=128, d=64] footprint 33280 B
// rTile L4 reg    [n=128, d=1] footprint 1024 B
// predicted: 1291.185 us (bottleneck dram), 0.02097 GFLOP
// phase p0: statements 0-3 fused row-wise, 4096 work items
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

// Buffers (args[i]): scratch is per thread (4096 bytes)
//   args[1] f32 t_X
//   args[2] f32 t_Y
//   args[3] f32 t_mx
//   args[4] f32 t_e
//   args[5] f32 t_s

// phase p0: statements 0-3 fused row-wise (4096 work items)
static void rt_softmax_c0_p0_body(float *restrict scratch, const float *restrict t_X, float *restrict t_Y, float *restrict t_mx, float *restrict t_e, float *restrict t_s, int64_t lo, int64_t hi) {
    int64_t item;
    int64_t n;
    float acc;
    int64_t d;
    int64_t n_1;
    int64_t d_1;
    int64_t n_2;
    float acc_1;
    int64_t d_2;
    int64_t n_3;
    int64_t d_3;
    float fwd;
    float rcp12;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        n = item;
        acc = (-INFINITY);
        #pragma GCC ivdep
        for (d = 0; d < 1024; d++) {
            acc = fmaxf(acc, t_X[((n * 1024) + d)]);
        }
        t_mx[n] = acc;
        n_1 = item;
        n_2 = item;
        acc_1 = 0.0f;
        #pragma GCC ivdep
        for (d_1 = 0; d_1 < 1024; d_1++) {
            fwd = expf((t_X[((n_1 * 1024) + d_1)] - t_mx[n_1]));
            scratch[d_1] = fwd;
            acc_1 = (acc_1 + fwd);
        }
        t_s[n_2] = acc_1;
        n_3 = item;
        rcp12 = (1.0f / t_s[n_3]);
        #pragma GCC ivdep
        for (d_3 = 0; d_3 < 1024; d_3++) {
            t_Y[((n_3 * 1024) + d_3)] = (scratch[d_3] * rcp12);
        }
    }
}

void rt_softmax_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_softmax_c0_p0_body(scratch, (float *)args[1], (float *)args[2], (float *)args[3], (float *)args[4], (float *)args[5], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_softmax_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = aligned_alloc(64, 4096);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 4096; i++)
            rt_softmax_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
