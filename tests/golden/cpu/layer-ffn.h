// rtgen 0.1.0: layer ffn (examples/layers/ffn.spec), 3 defs run in order by rt_layer_ffn():
//   1. ffn1 -> H: rt_ffn1_c0 in ffn1.c, the model's top-1, not profiled (plan: gemm M=42 N=256 K=64 batch=1 micro-kernel=6x16 lanes=8 kc=64 mc=42 nc=64 ng=4 items=4 prefetch-b tokens)
//   2. bias_gelu -> G: rt_bias_gelu_c0 in bias_gelu.c, the model's top-1, not profiled (plan: loops items=16 b=untiled i=untiled n=0+256:16/8)
//   3. ffn2 -> Y: rt_ffn2_c0 in ffn2.c, the model's top-1, not profiled (plan: gemm M=42 N=64 K=256 batch=1 micro-kernel=6x16 lanes=8 kc=256 mc=12 nc=16 ng=1 items=4 prefetch-b tokens)
// sizes: B=8 D=64 F=256
// The prelude (1 start array of the packed ragged rows) is computed once per call from the lengths
// and shared by every kernel; the 2 intermediates and the defs' temporaries are allocated and freed here.
// Build: cc -O2 -fopenmp -c ffn.c ffn1.c bias_gelu.c ffn2.c; link with -fopenmp -lm
#ifndef RT_LAYER_FFN_H
#define RT_LAYER_FFN_H

#include <stdint.h>

// Tensors, row-major; a ragged dim's rows are packed, without padding:
//   len      input  int32_t (B), lengths (each >= 0)
//   X        input  float (b:B, len(b), D), rt_layer_ffn_elems_X(len) elements
//   W1       input  float (D, F), rt_layer_ffn_elems_W1(len) elements
//   bias1    input  float (F), rt_layer_ffn_elems_bias1(len) elements
//   W2       input  float (F, D), rt_layer_ffn_elems_W2(len) elements
//   Y        output float (b:B, i:len(b), n:D), rt_layer_ffn_elems_Y(len) elements
// Returns 0; -1 when a length (or an extent) is negative, -2 when out of memory (outputs unwritten).
int rt_layer_ffn(const int32_t *len, const float *X, const float *W1, const float *bias1, const float *W2, float *Y);

// The element count of each input and output for these lengths.
int64_t rt_layer_ffn_elems_X(const int32_t *len);
int64_t rt_layer_ffn_elems_W1(const int32_t *len);
int64_t rt_layer_ffn_elems_bias1(const int32_t *len);
int64_t rt_layer_ffn_elems_W2(const int32_t *len);
int64_t rt_layer_ffn_elems_Y(const int32_t *len);

#endif
