// rtgen 0.1.0: relu, candidate 0
// spec: examples/relu.spec
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: loops items=889056 w=0+227598336:256
// rTile L0 dram   [n.c.h.w=227598336] footprint 0 B
// rTile L1 l3     [n.c.h.w=256] footprint 2048 B
// rTile L2 l2     [n.c.h.w=256] footprint 2048 B
// rTile L3 l1     [n.c.h.w=256] footprint 2048 B
// rTile L4 reg    [n.c.h.w=256] footprint 2048 B
// predicted: 70030.257 us (bottleneck dram), 0.2276 GFLOP
// phase p0: statement 0 blocked by the rTiles [n_c_h_w=256; n_c_h_w=256; n_c_h_w=256], 889056 work items
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
//   args[2] f32 t_O

// phase p0: statement 0 blocked by the rTiles [n_c_h_w=256; n_c_h_w=256; n_c_h_w=256] (889056 work items)
static void rt_relu_c0_p0_body(float *restrict scratch, const float *restrict t_I, float *restrict t_O, int64_t lo, int64_t hi) {
    int64_t item;
    int64_t n;
    int64_t c;
    int64_t h;
    int64_t n_c_h_w_b2;
    int64_t n_c_h_w;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        // n.c.h.w as one flat index n_c_h_w (every access reads it as one run)
        n = 0;
        c = 0;
        h = 0;
        n_c_h_w_b2 = (item * 256);
        #pragma GCC ivdep
        for (n_c_h_w = n_c_h_w_b2; n_c_h_w < (n_c_h_w_b2 + 256); n_c_h_w++) {
            t_O[((((((n * 1008) + c) * 42) + h) * 42) + n_c_h_w)] = fmaxf(t_I[((((((n * 1008) + c) * 42) + h) * 42) + n_c_h_w)], 0.0f);
        }
    }
}

void rt_relu_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_relu_c0_p0_body(scratch, (float *)args[1], (float *)args[2], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_relu_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = NULL;
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 889056; i++)
            rt_relu_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
