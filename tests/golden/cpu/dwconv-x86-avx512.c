// rtgen 0.1.0: dwconv, candidate 0
// spec: examples/dwconv.spec
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: loops items=336 n=0+128:32/8/4 c=0+84:1 y=0+42:42 x=0+42:42 window pack=rows yu=2
// rTile L0 dram   [n=128, c=84, y=42, x=42, r=5, s=5] footprint 0 B
// rTile L1 l3     [n=64, c=1, y=42, x=42, r=5, s=5] footprint 2215268 B
// rTile L2 l2     [n=32, c=1, y=42, x=42, r=5, s=5] footprint 1107684 B
// rTile L3 l1     [n=8, c=1, y=6, x=42, r=5, s=5] footprint 48004 B
// rTile L4 reg    [n=4, c=1, y=1, x=42, r=1, s=5] footprint 2020 B
// predicted: 14314.220 us (bottleneck dram), 0.9483 GFLOP
// phase p0: statement 0 blocked by the rTiles [n=32,c=1,y=42,x=42; n=8,c=1,y=42,x=42; n=4,c=1,y=42,x=42], strided read packed by rows, 2 output rows per y, 336 work items
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

// Buffers (args[i]): scratch is per thread (8192 bytes)
//   args[1] f32 t_I
//   args[2] f32 t_Wt
//   args[3] f32 t_O

// phase p0: statement 0 blocked by the rTiles [n=32,c=1,y=42,x=42; n=8,c=1,y=42,x=42; n=4,c=1,y=42,x=42], strided read packed by rows, 2 output rows per y (336 work items)
static void rt_dwconv_c0_p0_body(float *restrict scratch, const float *restrict t_I, const float *restrict t_Wt, float *restrict t_O, int64_t lo, int64_t hi) {
    int64_t item;
    int64_t c_b2;
    int64_t n_b2;
    int64_t n_t3;
    int64_t n_b3;
    int64_t n_t4;
    int64_t n_b4;
    int64_t n;
    int64_t c;
    int64_t y;
    int64_t x;
    int64_t r;
    int64_t s;
    int64_t pk_h;
    int64_t pk_q;
    int64_t pk_pf;
    int64_t pk_row;
    int64_t pk_q_v;
    int64_t pk_q_v0;
    int64_t pk_q_v_1;
    int64_t pk_q_v0_1;
    int64_t y_i;
    int64_t y_t;
    int64_t y_1;
    int64_t pk_h0;
    int64_t pk_row_1;
    int64_t pk_q_v_2;
    int64_t pk_q_v0_2;
    int64_t pk_q_v_3;
    int64_t pk_q_v0_3;
    int64_t pk_rb;
    int64_t pk_rb_1;
    int64_t pk_rb_2;
    int64_t pk_rb_3;
    int64_t pk_rb_4;
    int64_t pk_rb_5;
    int64_t pk_rb_6;
    int64_t x_v;
    int64_t x_v0;
    float acc;
    float acc_1;
    float acc_2;
    float acc_3;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        c_b2 = rt_floormod(item, 84);
        n_b2 = (rt_floordiv(item, 84) * 32);
        for (n_t3 = 0; n_t3 < 4; n_t3++) {
            n_b3 = (n_b2 + (n_t3 * 8));
            for (n_t4 = 0; n_t4 < 2; n_t4++) {
                n_b4 = (n_b3 + (n_t4 * 4));
                for (n = n_b4; n < (n_b4 + 4); n++) {
                    for (c = c_b2; c < (c_b2 + 1); c++) {
                        for (pk_h = 0; pk_h < 7; pk_h++) {
                            pk_row = ((-2) + pk_h);
                            for (pk_pf = 0; pk_pf < 7; pk_pf++) {
                                __builtin_prefetch(&t_I[((((((n * 84) + c) * 83) + (pk_row + 16)) * 83) + ((-2) + rt_imin((pk_pf * 16), 86)))], 0, 2);
                            }
                            if ((int64_t)((int64_t)(pk_row >= 0) && (int64_t)(pk_row < 83))) {
                                for (pk_q = 0; pk_q < 1; pk_q++) {
                                    scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = ((int64_t)((int64_t)((pk_q * 2) < 87) && (int64_t)((int64_t)(((-2) + (pk_q * 2)) >= 0) && (int64_t)(((-2) + (pk_q * 2)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row) * 83) + rt_imin(rt_imax(((-2) + (pk_q * 2)), 0), 82))] : 0.0f);
                                    scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = ((int64_t)((int64_t)(((pk_q * 2) + 1) < 87) && (int64_t)((int64_t)(((-2) + ((pk_q * 2) + 1)) >= 0) && (int64_t)(((-2) + ((pk_q * 2) + 1)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row) * 83) + rt_imin(rt_imax(((-2) + ((pk_q * 2) + 1)), 0), 82))] : 0.0f);
                                }
                                for (pk_q_v = 0; pk_q_v < 3; pk_q_v++) {
                                    pk_q_v0 = rt_imin((1 + (pk_q_v * 16)), 26);
                                    #pragma GCC ivdep
                                    for (pk_q = pk_q_v0; pk_q < (pk_q_v0 + 16); pk_q++) {
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = t_I[((((((n * 84) + c) * 83) + pk_row) * 83) + ((-2) + (pk_q * 2)))];
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = t_I[((((((n * 84) + c) * 83) + pk_row) * 83) + ((-2) + ((pk_q * 2) + 1)))];
                                    }
                                }
                                for (pk_q = 42; pk_q < 44; pk_q++) {
                                    scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = ((int64_t)((int64_t)((pk_q * 2) < 87) && (int64_t)((int64_t)(((-2) + (pk_q * 2)) >= 0) && (int64_t)(((-2) + (pk_q * 2)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row) * 83) + rt_imin(rt_imax(((-2) + (pk_q * 2)), 0), 82))] : 0.0f);
                                    scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = ((int64_t)((int64_t)(((pk_q * 2) + 1) < 87) && (int64_t)((int64_t)(((-2) + ((pk_q * 2) + 1)) >= 0) && (int64_t)(((-2) + ((pk_q * 2) + 1)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row) * 83) + rt_imin(rt_imax(((-2) + ((pk_q * 2) + 1)), 0), 82))] : 0.0f);
                                }
                            } else {
                                for (pk_q_v_1 = 0; pk_q_v_1 < 3; pk_q_v_1++) {
                                    pk_q_v0_1 = rt_imin((pk_q_v_1 * 16), 28);
                                    #pragma GCC ivdep
                                    for (pk_q = pk_q_v0_1; pk_q < (pk_q_v0_1 + 16); pk_q++) {
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = 0.0f;
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = 0.0f;
                                    }
                                }
                            }
                        }
                        for (y_i = 0; y_i < 21; y_i++) {
                            y_t = rt_imin((y_i * 2), 40);
                            y = y_t;
                            y_1 = (y_t + 1);
                            pk_h0 = rt_imax((rt_imin((y_t + 2), 40) * 2), ((y_t * 2) + 7));
                            for (pk_h = pk_h0; pk_h < ((rt_imin((y_t + 2), 40) * 2) + 7); pk_h++) {
                                pk_row_1 = ((-2) + pk_h);
                                for (pk_pf = 0; pk_pf < 7; pk_pf++) {
                                    __builtin_prefetch(&t_I[((((((n * 84) + c) * 83) + (pk_row_1 + 16)) * 83) + ((-2) + rt_imin((pk_pf * 16), 86)))], 0, 2);
                                }
                                if ((int64_t)((int64_t)(pk_row_1 >= 0) && (int64_t)(pk_row_1 < 83))) {
                                    for (pk_q = 0; pk_q < 1; pk_q++) {
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = ((int64_t)((int64_t)((pk_q * 2) < 87) && (int64_t)((int64_t)(((-2) + (pk_q * 2)) >= 0) && (int64_t)(((-2) + (pk_q * 2)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row_1) * 83) + rt_imin(rt_imax(((-2) + (pk_q * 2)), 0), 82))] : 0.0f);
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = ((int64_t)((int64_t)(((pk_q * 2) + 1) < 87) && (int64_t)((int64_t)(((-2) + ((pk_q * 2) + 1)) >= 0) && (int64_t)(((-2) + ((pk_q * 2) + 1)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row_1) * 83) + rt_imin(rt_imax(((-2) + ((pk_q * 2) + 1)), 0), 82))] : 0.0f);
                                    }
                                    for (pk_q_v_2 = 0; pk_q_v_2 < 3; pk_q_v_2++) {
                                        pk_q_v0_2 = rt_imin((1 + (pk_q_v_2 * 16)), 26);
                                        #pragma GCC ivdep
                                        for (pk_q = pk_q_v0_2; pk_q < (pk_q_v0_2 + 16); pk_q++) {
                                            scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = t_I[((((((n * 84) + c) * 83) + pk_row_1) * 83) + ((-2) + (pk_q * 2)))];
                                            scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = t_I[((((((n * 84) + c) * 83) + pk_row_1) * 83) + ((-2) + ((pk_q * 2) + 1)))];
                                        }
                                    }
                                    for (pk_q = 42; pk_q < 44; pk_q++) {
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = ((int64_t)((int64_t)((pk_q * 2) < 87) && (int64_t)((int64_t)(((-2) + (pk_q * 2)) >= 0) && (int64_t)(((-2) + (pk_q * 2)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row_1) * 83) + rt_imin(rt_imax(((-2) + (pk_q * 2)), 0), 82))] : 0.0f);
                                        scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = ((int64_t)((int64_t)(((pk_q * 2) + 1) < 87) && (int64_t)((int64_t)(((-2) + ((pk_q * 2) + 1)) >= 0) && (int64_t)(((-2) + ((pk_q * 2) + 1)) < 83))) ? t_I[((((((n * 84) + c) * 83) + pk_row_1) * 83) + rt_imin(rt_imax(((-2) + ((pk_q * 2) + 1)), 0), 82))] : 0.0f);
                                    }
                                } else {
                                    for (pk_q_v_3 = 0; pk_q_v_3 < 3; pk_q_v_3++) {
                                        pk_q_v0_3 = rt_imin((pk_q_v_3 * 16), 28);
                                        #pragma GCC ivdep
                                        for (pk_q = pk_q_v0_3; pk_q < (pk_q_v0_3 + 16); pk_q++) {
                                            scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 15)] = 0.0f;
                                            scratch[(((rt_floormod(pk_h, 16) * 128) + pk_q) + 79)] = 0.0f;
                                        }
                                    }
                                }
                            }
                            pk_rb = (rt_floormod((y_t * 2), 16) * 128);
                            pk_rb_1 = (rt_floormod(((y_t * 2) + 1), 16) * 128);
                            pk_rb_2 = (rt_floormod(((y_t * 2) + 2), 16) * 128);
                            pk_rb_3 = (rt_floormod(((y_t * 2) + 3), 16) * 128);
                            pk_rb_4 = (rt_floormod(((y_t * 2) + 4), 16) * 128);
                            pk_rb_5 = (rt_floormod(((y_t * 2) + 5), 16) * 128);
                            pk_rb_6 = (rt_floormod(((y_t * 2) + 6), 16) * 128);
                            for (x_v = 0; x_v < 3; x_v++) {
                                x_v0 = rt_imin((x_v * 16), 26);
                                #pragma GCC ivdep
                                for (x = x_v0; x < (x_v0 + 16); x++) {
                                    acc = 0.0f;
                                    acc_1 = 0.0f;
                                    acc_2 = 0.0f;
                                    acc_3 = 0.0f;
                                    s = 0;
                                    r = 0;
                                    acc = (acc + (scratch[((x + pk_rb) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    acc = (acc + (scratch[((x + pk_rb) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    acc = (acc + (scratch[((x + pk_rb) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 0;
                                    r = 1;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_1) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    acc = (acc + (scratch[((x + pk_rb_1) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_1) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    acc = (acc + (scratch[((x + pk_rb_1) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_1) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 0;
                                    r = 0;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_2) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 2;
                                    acc = (acc + (scratch[((x + pk_rb_2) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    r = 0;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_2) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 2;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_2) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    r = 0;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_2) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 2;
                                    acc = (acc + (scratch[((x + pk_rb_2) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    r = 0;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_2) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 2;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_2) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    r = 0;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_2) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 2;
                                    acc = (acc + (scratch[((x + pk_rb_2) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 0;
                                    r = 1;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_3) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 3;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_3) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    r = 1;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_3) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 3;
                                    acc = (acc + (scratch[((x + pk_rb_3) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    r = 1;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_3) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 3;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_3) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    r = 1;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_3) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 3;
                                    acc = (acc + (scratch[((x + pk_rb_3) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    r = 1;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_3) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 3;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_3) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 0;
                                    r = 2;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_4) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 4;
                                    acc = (acc + (scratch[((x + pk_rb_4) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    r = 2;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_4) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 4;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_4) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    r = 2;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_4) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 4;
                                    acc = (acc + (scratch[((x + pk_rb_4) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    r = 2;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_4) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 4;
                                    acc_1 = (acc_1 + (scratch[((x + pk_rb_4) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    r = 2;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_4) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    r = 4;
                                    acc = (acc + (scratch[((x + pk_rb_4) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 0;
                                    r = 3;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_5) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_5) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_5) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_5) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_5) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 0;
                                    r = 4;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_6) + 15)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 1;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_6) + 79)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 2;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_6) + 16)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 3;
                                    acc_3 = (acc_3 + (scratch[((x + pk_rb_6) + 80)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    s = 4;
                                    acc_2 = (acc_2 + (scratch[((x + pk_rb_6) + 17)] * t_Wt[((((c * 5) + r) * 5) + s)]));
                                    t_O[((((((n * 84) + c) * 42) + y) * 42) + x)] = (acc + acc_1);
                                    t_O[((((((n * 84) + c) * 42) + y_1) * 42) + x)] = (acc_2 + acc_3);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

void rt_dwconv_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_dwconv_c0_p0_body(scratch, (float *)args[1], (float *)args[2], (float *)args[3], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_dwconv_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = aligned_alloc(64, 8192);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 336; i++)
            rt_dwconv_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
