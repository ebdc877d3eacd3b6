// emit-llvm-impl.h: internal to the LLVM emitter (emit-llvm.c, kernel IR to an LLVM module, and
// emit-llvm-uk.c, its micro-kernel and transposing pack): the emitter's state and the builders
// both use. Nothing outside codegen/emit-llvm*.c includes it.
#ifndef RT_EMIT_LLVM_IMPL_H
#define RT_EMIT_LLVM_IMPL_H

#include "emit.h"

#include <llvm-c/Core.h>

typedef struct rt_lemit {
    const rt_kir_kernel *k;
    const rt_kir_phase *p;
    LLVMContextRef ctx;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMTypeRef i1, i32, i64, f32, f64, ptr, v16, vd;
    LLVMValueRef *bufs;
    LLVMValueRef *vars;
    LLVMValueRef uk_tmp, uk_i, uk_j; // entry-block allocas of the micro-kernel edge path
    LLVMValueRef uk_bld; // the micro-kernel's B row stride where it reads B in place, else NULL
    LLVMValueRef uk_apf, uk_ald; // its prefetch of A's next rows (kir.h a_pf_next), A's stride
    unsigned loop_kind;
} rt_lemit;

// emit-llvm.c
LLVMTypeRef rt_l_type(rt_lemit *l, rt_kir_type t);
LLVMValueRef rt_l_i64(rt_lemit *l, int64_t v);
LLVMValueRef rt_l_intrinsic(rt_lemit *l, const char *name, LLVMTypeRef t);
LLVMValueRef rt_l_expr(rt_lemit *l, const rt_kir_expr *e);
// An I64 kir expression as an i1 (non-zero).
LLVMValueRef rt_l_truth(rt_lemit *l, const rt_kir_expr *e);
// The address of element index of buffer buf.
LLVMValueRef rt_l_addr(rt_lemit *l, int32_t buf, LLVMValueRef index);
LLVMBasicBlockRef rt_l_block(rt_lemit *l, const char *name);
void rt_l_loop_hint(rt_lemit *l, LLVMValueRef br, int32_t interleave);
void rt_l_nodes(rt_lemit *l, const rt_kir_block *blk);
LLVMValueRef rt_l_splat_n(rt_lemit *l, LLVMValueRef x, unsigned n);
void rt_l_store_nt(rt_lemit *l, LLVMValueRef v, LLVMValueRef p, unsigned align);
void rt_l_prefetch(rt_lemit *l, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef idx, int write,
                   int locality);

// emit-llvm-uk.c
// A transposing pack (kir.h rt_kir_tpack).
void rt_l_tpack(rt_lemit *l, const rt_kir_tpack *t);
// The micro-kernel (kir.h rt_kir_ukernel) in vector form.
void rt_l_ukernel(rt_lemit *l, const rt_kir_ukernel *u);

#endif
