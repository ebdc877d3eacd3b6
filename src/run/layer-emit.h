// layer-emit.h: a layer's entry point as C a user compiles (`<layer>.c` + `<layer>.h`): one
// function that takes the layer's inputs and outputs (length tensors included), computes the
// prelude — every distinct start array of the packed ragged rows, once — owns the intermediate
// buffers (allocates and frees them) and calls the defs' kernels (their emitted C, emit-c.c:
// `void KERNEL(void **args)`, each in `<def>.c`) in order on the layer's buffers, as rt_layer_run
// (layer.h) runs them in the library. The text is deterministic.
//
//   rt_layer_emit_c(a, layer, cpu, pick, &src, err);   // src.c_text, src.h_text
//   cc -O2 -fopenmp -c LAYER.c DEF1.c DEF2.c ...; link with -fopenmp -lm
#ifndef RT_LAYER_EMIT_H
#define RT_LAYER_EMIT_H

#include "rtgen.h"

typedef struct rt_layer_c {
    const char *fn;     // the entry point's name: rt_layer_<layer name as a C identifier>
    const char *c_name; // "<layer>.c"
    const char *c_text;
    const char *h_name; // "<layer>.h"
    const char *h_text;
} rt_layer_c;

// The entry point of layer l calling, for def k, candidate pick[k] of cpu[k] (pick NULL: each
// report's winner, or its top-1 where nothing was profiled; the comment says which). Errors:
// RT_ERR_BACKEND (a def without that candidate, a kernel buffer this emitter does not know, an
// extent it cannot print as C, kernels that disagree on a layer tensor's element type, a def
// named like the layer, whose <def>.c would be <layer>.c), RT_ERR_NOMEM.
rt_status rt_layer_emit_c(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                          const int32_t *pick, rt_layer_c *out, rt_err *err);

// Whether def k of l, written as <def>.c next to <layer>.c, would overwrite it; such a layer's
// entry point cannot be written (the error of rt_layer_emit_c, without constructing anything).
rt_status rt_layer_emit_check_names(const rt_layer *l, rt_err *err);

#endif
