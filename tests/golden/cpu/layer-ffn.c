// rtgen 0.1.0: layer ffn (examples/layers/ffn.spec), 3 defs run in order by rt_layer_ffn():
//   1. ffn1 -> H: rt_ffn1_c0 in ffn1.c, the model's top-1, not profiled (plan: gemm M=42 N=256 K=64 batch=1 micro-kernel=6x16 lanes=8 kc=64 mc=42 nc=64 ng=4 items=4 prefetch-b tokens)
//   2. bias_gelu -> G: rt_bias_gelu_c0 in bias_gelu.c, the model's top-1, not profiled (plan: loops items=16 b=untiled i=untiled n=0+256:16/8)
//   3. ffn2 -> Y: rt_ffn2_c0 in ffn2.c, the model's top-1, not profiled (plan: gemm M=42 N=64 K=256 batch=1 micro-kernel=6x16 lanes=8 kc=256 mc=12 nc=16 ng=1 items=4 prefetch-b tokens)
// sizes: B=8 D=64 F=256
// The prelude (1 start array of the packed ragged rows) is computed once per call from the lengths
// and shared by every kernel; the 2 intermediates and the defs' temporaries are allocated and freed here.
// Build: cc -O2 -fopenmp -c ffn.c ffn1.c bias_gelu.c ffn2.c; link with -fopenmp -lm
#include "ffn.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// The kernels (emit-c): one OpenMP parallel region each, buffers in args[1..], args[0] unused.
void rt_ffn1_c0(void **args);
void rt_bias_gelu_c0(void **args);
void rt_ffn2_c0(void **args);

static inline int64_t rt_lay_floordiv(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t rt_lay_floormod(int64_t a, int64_t b) {
    return a - rt_lay_floordiv(a, b) * b;
}
static inline int64_t rt_lay_imin(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t rt_lay_imax(int64_t a, int64_t b) {
    return a > b ? a : b;
}

// n elements (at least one) of elem_bytes each, 64-byte aligned.
static void *rt_lay_alloc(int64_t n, size_t elem_bytes) {
    size_t bytes = (size_t)(n > 0 ? n : 1) * elem_bytes;
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

// dims 0..1 of X (b:B, len(b), D) in def ffn1: returns the rows of dim 1 (-1: a negative extent),
// *n_prefix the rows of dim 0; s[p] (when s is not NULL) is the first row of prefix p.
static int64_t rt_lay_rows0(const int32_t *len, int64_t *s, int64_t *n_prefix) {
    int64_t c = 0, r = 0;
    for (int64_t i0 = 0; i0 < 8; i0++) {
        int64_t e = (int64_t)len[i0];
        if (e < 0)
            return -1;
        if (s)
            s[c] = r;
        c++;
        r += e;
    }
    if (s)
        s[c] = r;
    if (n_prefix)
        *n_prefix = c;
    return r;
}

int64_t rt_layer_ffn_elems_X(const int32_t *len) {
    return rt_lay_rows0(len, NULL, NULL) * 64;
}

int64_t rt_layer_ffn_elems_W1(const int32_t *len) {
    (void)len;
    return 16384;
}

int64_t rt_layer_ffn_elems_bias1(const int32_t *len) {
    (void)len;
    return 256;
}

int64_t rt_layer_ffn_elems_W2(const int32_t *len) {
    (void)len;
    return 16384;
}

int64_t rt_layer_ffn_elems_Y(const int32_t *len) {
    return rt_lay_rows0(len, NULL, NULL) * 64;
}

int rt_layer_ffn(const int32_t *len, const float *X, const float *W1, const float *bias1, const float *W2, float *Y) {
    // Every length is >= 0.
    for (int64_t i = 0; i < 8; i++)
        if (len[i] < 0)
            return -1;
    // The element counts of the buffers owned here (negative: an extent is).
    int64_t n_s0 = 0;
    int64_t n_H = rt_lay_rows0(len, NULL, NULL) * 256;
    int64_t n_G = rt_lay_rows0(len, NULL, NULL) * 256;
    if (rt_lay_rows0(len, NULL, &n_s0) < 0 ||
        n_H < 0 ||
        n_G < 0)
        return -1;
    int rc = 0;
    int64_t *s0 = rt_lay_alloc(n_s0 + 1, sizeof(int64_t));
    float *H = rt_lay_alloc(n_H, sizeof(float));
    float *G = rt_lay_alloc(n_G, sizeof(float));
    if (!s0 || !H || !G) {
        rc = -2;
        goto done;
    }
    // The prelude: each start array once, read by every kernel below.
    rt_lay_rows0(len, s0, NULL);
    // 1. ffn1 -> H
    {
        void *args[] = {NULL, (void *)len, (void *)X, s0, (void *)W1, H, s0};
        rt_ffn1_c0(args);
    }
    // 2. bias_gelu -> G
    {
        void *args[] = {NULL, (void *)len, H, s0, (void *)bias1, G, s0};
        rt_bias_gelu_c0(args);
    }
    // 3. ffn2 -> Y
    {
        void *args[] = {NULL, (void *)len, G, s0, (void *)W2, Y, s0};
        rt_ffn2_c0(args);
    }
done:
    free(s0);
    free(H);
    free(G);
    return rc;
}
