// emit.h: the CPU emitters of the kernel IR and the lowering that feeds them.
//
// Pipeline position: rt_rprog (perfmodel.h) --rt_lower_cpu--> rt_kir_kernel (kir.h)
//   --rt_emit_c-->    portable C (cc -O3 -march=native -fopenmp), and
//   --rt_emit_llvm--> an LLVM module built with the C API, optimized for the target machine,
//                     ready for the ORC JIT of hal-cpu.c.
// Both targets print the same ABI: for every phase i a function
//     void <kernel>_p<i>(void **args, int64_t lo, int64_t hi, float *scratch)
// that runs work items [lo, hi) of the phase (args[b] is buffer b's base pointer, args[0] is
// unused: the scratch buffer is per thread), and the C target adds the entry
//     void <kernel>(void **args)   running every phase with OpenMP.
#ifndef RT_EMIT_H
#define RT_EMIT_H

#include "rt.h"
#include "spec.h"
#include "hal.h"
#include "perfmodel.h"
#include "kir.h"

// ---------------------------------------------------------------------------------------------
// Lowering (lower-cpu.c)
// ---------------------------------------------------------------------------------------------

typedef struct rt_lower_options {
    bool naive;            // straightforward loop nests, no tiling or packing (the check oracle)
    int32_t rank;          // candidate rank, part of the kernel name
    const char *spec_path; // for the header comment
} rt_lower_options;

// Lowers rProgram p (NULL with opt->naive) of op, built by model m (NULL with naive), for dev.
// Sizes come from op (bound); ragged extents are read at run time. Errors: RT_ERR_BACKEND with the
// location of the construct the CPU backend does not support (recursion over trees, half /
// bfloat16 / int8 tensors), RT_ERR_NOMEM.
rt_status rt_lower_cpu(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_model *m,
                       const rt_rprog *p, const rt_lower_options *opt, rt_kir_kernel **out,
                       rt_err *err);

// ---------------------------------------------------------------------------------------------
// Emitters
// ---------------------------------------------------------------------------------------------

// Portable C source of k (deterministic). Errors: RT_ERR_BACKEND for an invalid kernel.
rt_status rt_emit_c(rt_arena *a, const rt_kir_kernel *k, const char **out_text, rt_err *err);

// Where an LLVM module is built: a context and target machine owned by the caller (hal-cpu.c's
// JIT), passed untyped so that only emit-llvm.c and hal-cpu.c include llvm-c headers.
typedef struct rt_llvm_target {
    void *context;        // LLVMContextRef
    void *target_machine; // LLVMTargetMachineRef
    bool avx512;          // add "prefer-vector-width"="512" to every function
} rt_llvm_target;

// Builds k as an LLVM module. out_text (may be NULL) receives the module as printed before
// optimization (its golden form); then, when optimize, the module runs a short pipeline
// (inline, SROA, LICM, loop vectorizer, unroll; a quarter of O3's compile time).
// *out_module is an LLVMModuleRef owned by the caller (hand it to rt_cpu_jit_add_module).
rt_status rt_emit_llvm(rt_arena *a, const rt_kir_kernel *k, const rt_llvm_target *t, bool optimize,
                       void **out_module, const char **out_text, rt_err *err);
// Disposes a module of rt_emit_llvm that was not handed to the JIT.
void rt_emit_llvm_dispose(void *module);

#endif
