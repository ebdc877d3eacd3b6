// calib-cpu-ir.c: rtcalib's CPU microbenchmarks as LLVM IR — independent FMA chains per data
// type, AVX512-BF16 dot products, AMX tile products, the STREAM triad, load and store loops —
// built, verified, optimized and JIT-compiled through hal-cpu.c's LLJIT (rt_calib_build).
#include "calib-cpu-impl.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <stdio.h>
#include <string.h>

typedef struct rt_ir {
    LLVMContextRef ctx;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMTypeRef i8, i32, i64, f16, f32, f64, ptr, vd;
    char width[8]; // "prefer-vector-width" value
} rt_ir;

// "+avx512f,+fma,-amx-int8": is +name present?
static bool rt_has_feature(const char *features, const char *name) {
    size_t n = strlen(name);
    for (const char *p = features; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n + 1 && p[0] == '+' && strncmp(p + 1, name, n) == 0)
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

static LLVMValueRef rt_ir_fn(rt_ir *ir, const char *name, LLVMTypeRef ret, LLVMTypeRef *params,
                             unsigned n) {
    LLVMTypeRef ty = LLVMFunctionType(ret, params, n, 0);
    LLVMValueRef fn = LLVMAddFunction(ir->m, name, ty);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(ir->ctx, "prefer-vector-width", 19, ir->width,
                                                      (unsigned)strlen(ir->width)));
    LLVMAddAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMCreateEnumAttribute(ir->ctx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    for (unsigned i = 0; i < n; i++) {
        if (params[i] == ir->ptr)
            LLVMAddAttributeAtIndex(
                fn, i + 1,
                LLVMCreateEnumAttribute(ir->ctx, LLVMGetEnumAttributeKindForName("noalias", 7), 0));
    }
    return fn;
}

// A declared intrinsic (or any external function) of the given type.
static LLVMValueRef rt_ir_decl(rt_ir *ir, const char *name, LLVMTypeRef ty) {
    LLVMValueRef f = LLVMGetNamedFunction(ir->m, name);
    return f ? f : LLVMAddFunction(ir->m, name, ty);
}

static LLVMValueRef rt_ir_call(rt_ir *ir, const char *name, LLVMTypeRef ret, LLVMValueRef *args,
                               unsigned n) {
    LLVMTypeRef types[8];
    for (unsigned i = 0; i < n; i++)
        types[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef ty = LLVMFunctionType(ret, types, n, 0);
    return LLVMBuildCall2(ir->b, ty, rt_ir_decl(ir, name, ty), args, n, "");
}

static LLVMValueRef rt_ir_splat(rt_ir *ir, LLVMValueRef x, unsigned lanes) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), lanes);
    LLVMValueRef v =
        LLVMBuildInsertElement(ir->b, LLVMGetUndef(vt), x, LLVMConstInt(ir->i32, 0, 0), "");
    return LLVMBuildShuffleVector(ir->b, v, LLVMGetUndef(vt),
                                  LLVMConstNull(LLVMVectorType(ir->i32, lanes)), "");
}

static LLVMValueRef rt_ir_i64(rt_ir *ir, int64_t v) {
    return LLVMConstInt(ir->i64, (unsigned long long)v, 1);
}

// float|double|half rt_calib_fma_<t>(i64 n, s x, s y): `chains` (at most RT_CALIB_ACCS) chains
// acc = fma(acc, x, y) on vectors of et, n iterations, returning the sum of all lanes (as the
// scalar type s). RT_CALIB_ACCS chains give the throughput, one chain the latency.
static void rt_ir_fma(rt_ir *ir, const char *name, LLVMTypeRef et, LLVMTypeRef st, unsigned lanes,
                      int chains, const char *fma_name, const char *reduce_name) {
    LLVMTypeRef params[] = {ir->i64, st, st};
    LLVMValueRef fn = rt_ir_fn(ir, name, st, params, 3);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(ir->ctx, fn, "exit");
    LLVMTypeRef vt = LLVMVectorType(et, lanes);
    LLVMPositionBuilderAtEnd(ir->b, entry);
    LLVMValueRef x = LLVMGetParam(fn, 1), y = LLVMGetParam(fn, 2);
    if (et != st) {
        x = LLVMBuildFPTrunc(ir->b, x, et, "");
        y = LLVMBuildFPTrunc(ir->b, y, et, "");
    }
    LLVMValueRef xv = rt_ir_splat(ir, x, lanes), yv = rt_ir_splat(ir, y, lanes);
    LLVMBuildBr(ir->b, loop);

    LLVMPositionBuilderAtEnd(ir->b, loop);
    LLVMValueRef i = LLVMBuildPhi(ir->b, ir->i64, "i");
    LLVMValueRef acc[RT_CALIB_ACCS], next[RT_CALIB_ACCS];
    for (int k = 0; k < chains; k++)
        acc[k] = LLVMBuildPhi(ir->b, vt, "");
    for (int k = 0; k < chains; k++) {
        LLVMValueRef args[] = {acc[k], xv, yv};
        next[k] = rt_ir_call(ir, fma_name, vt, args, 3);
    }
    LLVMValueRef i1 = LLVMBuildAdd(ir->b, i, rt_ir_i64(ir, 1), "");
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMIntSLT, i1, LLVMGetParam(fn, 0), ""), loop,
                    exit);
    LLVMValueRef zero = rt_ir_i64(ir, 0);
    LLVMAddIncoming(i, &zero, &entry, 1);
    LLVMAddIncoming(i, &i1, &loop, 1);
    for (int k = 0; k < chains; k++) {
        LLVMAddIncoming(acc[k], &yv, &entry, 1);
        LLVMAddIncoming(acc[k], &next[k], &loop, 1);
    }

    LLVMPositionBuilderAtEnd(ir->b, exit);
    LLVMValueRef sum = next[0];
    for (int k = 1; k < chains; k++)
        sum = LLVMBuildFAdd(ir->b, sum, next[k], "");
    LLVMValueRef rargs[] = {LLVMConstReal(et, 0.0), sum};
    LLVMValueRef r = rt_ir_call(ir, reduce_name, et, rargs, 2);
    if (et != st)
        r = LLVMBuildFPExt(ir->b, r, st, "");
    LLVMBuildRet(ir->b, r);
}

// float rt_calib_dot_bf16(i64 n, ptr ops): RT_CALIB_ACCS chains of vdpbf16ps on two vectors of
// bf16 pairs loaded from ops (2 x 64 bytes).
static void rt_ir_dot_bf16(rt_ir *ir) {
    LLVMTypeRef params[] = {ir->i64, ir->ptr};
    LLVMValueRef fn = rt_ir_fn(ir, "rt_calib_dot_bf16", ir->f32, params, 2);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(ir->ctx, fn, "exit");
    LLVMTypeRef vf = LLVMVectorType(ir->f32, 16);
    LLVMTypeRef vi = LLVMVectorType(LLVMBFloatTypeInContext(ir->ctx), 32); // LLVM 16's signature
    LLVMPositionBuilderAtEnd(ir->b, entry);
    LLVMValueRef ops = LLVMGetParam(fn, 1);
    LLVMValueRef a = LLVMBuildLoad2(ir->b, vi, ops, "");
    LLVMValueRef off = rt_ir_i64(ir, 64);
    LLVMValueRef bp = LLVMBuildGEP2(ir->b, ir->i8, ops, &off, 1, "");
    LLVMValueRef bv = LLVMBuildLoad2(ir->b, vi, bp, "");
    LLVMSetAlignment(a, 64);
    LLVMSetAlignment(bv, 64);
    LLVMBuildBr(ir->b, loop);

    LLVMPositionBuilderAtEnd(ir->b, loop);
    LLVMValueRef i = LLVMBuildPhi(ir->b, ir->i64, "i");
    LLVMValueRef acc[RT_CALIB_ACCS], next[RT_CALIB_ACCS];
    for (int k = 0; k < RT_CALIB_ACCS; k++)
        acc[k] = LLVMBuildPhi(ir->b, vf, "");
    for (int k = 0; k < RT_CALIB_ACCS; k++) {
        LLVMValueRef args[] = {acc[k], a, bv};
        next[k] = rt_ir_call(ir, "llvm.x86.avx512bf16.dpbf16ps.512", vf, args, 3);
    }
    LLVMValueRef i1 = LLVMBuildAdd(ir->b, i, rt_ir_i64(ir, 1), "");
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMIntSLT, i1, LLVMGetParam(fn, 0), ""), loop,
                    exit);
    LLVMValueRef zero = rt_ir_i64(ir, 0), vzero = LLVMConstNull(vf);
    LLVMAddIncoming(i, &zero, &entry, 1);
    LLVMAddIncoming(i, &i1, &loop, 1);
    for (int k = 0; k < RT_CALIB_ACCS; k++) {
        LLVMAddIncoming(acc[k], &vzero, &entry, 1);
        LLVMAddIncoming(acc[k], &next[k], &loop, 1);
    }
    LLVMPositionBuilderAtEnd(ir->b, exit);
    LLVMValueRef sum = next[0];
    for (int k = 1; k < RT_CALIB_ACCS; k++)
        sum = LLVMBuildFAdd(ir->b, sum, next[k], "");
    LLVMValueRef rargs[] = {LLVMConstReal(ir->f32, 0.0), sum};
    LLVMBuildRet(ir->b, rt_ir_call(ir, "llvm.vector.reduce.fadd.v16f32", ir->f32, rargs, 2));
}

static LLVMValueRef rt_ir_i8(rt_ir *ir, int v) {
    return LLVMConstInt(ir->i8, (unsigned long long)v, 0);
}

// void rt_calib_amx_bf16(i64 n, ptr cfg, ptr a, ptr b, ptr c): tiles 0-3 accumulate
// tdpbf16ps of A tiles 4-5 and B tiles 6-7 (16 rows x 64 bytes each), n iterations of 4.
static void rt_ir_amx(rt_ir *ir) {
    LLVMTypeRef params[] = {ir->i64, ir->ptr, ir->ptr, ir->ptr, ir->ptr};
    LLVMValueRef fn = rt_ir_fn(ir, "rt_calib_amx_bf16", LLVMVoidTypeInContext(ir->ctx), params, 5);
    LLVMTypeRef vt = LLVMVoidTypeInContext(ir->ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(ir->ctx, fn, "exit");
    LLVMPositionBuilderAtEnd(ir->b, entry);
    LLVMValueRef cfg = LLVMGetParam(fn, 1);
    rt_ir_call(ir, "llvm.x86.ldtilecfg", vt, &cfg, 1);
    for (int t = 0; t < 4; t++) {
        LLVMValueRef tile = rt_ir_i8(ir, t);
        rt_ir_call(ir, "llvm.x86.tilezero", vt, &tile, 1);
    }
    for (int t = 0; t < 4; t++) {
        LLVMValueRef off = rt_ir_i64(ir, (t % 2) * 1024);
        LLVMValueRef base = LLVMGetParam(fn, t < 2 ? 2 : 3);
        LLVMValueRef p = LLVMBuildGEP2(ir->b, ir->i8, base, &off, 1, "");
        LLVMValueRef args[] = {rt_ir_i8(ir, 4 + t), p, rt_ir_i64(ir, 64)};
        rt_ir_call(ir, "llvm.x86.tileloadd64", vt, args, 3);
    }
    LLVMBuildBr(ir->b, loop);
    LLVMPositionBuilderAtEnd(ir->b, loop);
    LLVMValueRef i = LLVMBuildPhi(ir->b, ir->i64, "i");
    for (int t = 0; t < 4; t++) {
        LLVMValueRef args[] = {rt_ir_i8(ir, t), rt_ir_i8(ir, 4 + t / 2), rt_ir_i8(ir, 6 + t % 2)};
        rt_ir_call(ir, "llvm.x86.tdpbf16ps", vt, args, 3);
    }
    LLVMValueRef i1 = LLVMBuildAdd(ir->b, i, rt_ir_i64(ir, 1), "");
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMIntSLT, i1, LLVMGetParam(fn, 0), ""), loop,
                    exit);
    LLVMValueRef zero = rt_ir_i64(ir, 0);
    LLVMAddIncoming(i, &zero, &entry, 1);
    LLVMAddIncoming(i, &i1, &loop, 1);
    LLVMPositionBuilderAtEnd(ir->b, exit);
    for (int t = 0; t < 4; t++) {
        LLVMValueRef off = rt_ir_i64(ir, t * 1024);
        LLVMValueRef p = LLVMBuildGEP2(ir->b, ir->i8, LLVMGetParam(fn, 4), &off, 1, "");
        LLVMValueRef args[] = {rt_ir_i8(ir, t), p, rt_ir_i64(ir, 64)};
        rt_ir_call(ir, "llvm.x86.tilestored64", vt, args, 3);
    }
    rt_ir_call(ir, "llvm.x86.tilerelease", vt, NULL, 0);
    LLVMBuildRetVoid(ir->b);
}

// A counted loop: for (i = lo; i < hi; i += step) in the block the builder is in, continuing
// at *after. Returns the induction phi; the body goes where the builder is left.
typedef struct rt_ir_loop {
    LLVMValueRef i;
    LLVMBasicBlockRef head, body_end_block;
    LLVMValueRef hi, step;
    LLVMBasicBlockRef exit;
} rt_ir_loop;

static void rt_ir_loop_begin(rt_ir *ir, LLVMValueRef fn, rt_ir_loop *l, LLVMValueRef lo,
                             LLVMValueRef hi, LLVMValueRef step) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(ir->b);
    l->head = LLVMAppendBasicBlockInContext(ir->ctx, fn, "loop");
    l->exit = LLVMAppendBasicBlockInContext(ir->ctx, fn, "after");
    l->hi = hi;
    l->step = step;
    LLVMBuildBr(ir->b, l->head);
    LLVMPositionBuilderAtEnd(ir->b, l->head);
    l->i = LLVMBuildPhi(ir->b, ir->i64, "");
    LLVMAddIncoming(l->i, &lo, &pre, 1);
}

// Closes the loop (callers guarantee lo < hi, so the body runs at least once).
static void rt_ir_loop_end(rt_ir *ir, rt_ir_loop *l) {
    LLVMValueRef i1 = LLVMBuildAdd(ir->b, l->i, l->step, "");
    LLVMBasicBlockRef end = LLVMGetInsertBlock(ir->b);
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMIntSLT, i1, l->hi, ""), l->head, l->exit);
    LLVMAddIncoming(l->i, &i1, &end, 1);
    l->body_end_block = end;
    LLVMPositionBuilderAtEnd(ir->b, l->exit);
}

static LLVMValueRef rt_ir_vload(rt_ir *ir, LLVMValueRef base, LLVMValueRef idx, unsigned align) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(ir->b, ir->f32, base, &idx, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(ir->b, ir->vd, p, "");
    LLVMSetAlignment(v, align);
    return v;
}

static LLVMValueRef rt_ir_vstore(rt_ir *ir, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx,
                                 unsigned align) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(ir->b, ir->f32, base, &idx, 1, "");
    LLVMValueRef st = LLVMBuildStore(ir->b, v, p);
    LLVMSetAlignment(st, align);
    return st;
}

static LLVMValueRef rt_ir_volatile_splat(rt_ir *ir, LLVMValueRef p, unsigned lanes) {
    LLVMValueRef s = LLVMBuildLoad2(ir->b, ir->f32, p, "");
    LLVMSetVolatile(s, 1);
    return rt_ir_splat(ir, s, lanes);
}

// void rt_calib_triad(a, b, c, i64 elems, i64 mask, i64 k0, i64 k1, ptr s): for each chunk k in
// [k0, k1), at slot (k * odd) & mask: a[o+i] = b[o+i] + s * c[o+i] for i < elems, o = slot *
// elems. mask 0 repeats one working set; a larger mask walks a buffer in scattered chunks.
// Method (the STREAM triad's, and bench-util.c's): ordinary stores, 12 bytes counted per
// element (rt_calib_metric). Ordinary stores make the core read each line of a before writing
// it (write-allocate: 16 bytes move per element), and that is right for the model: rtgen's
// kernels store the same way and the model divides their compulsory bytes (inputs + outputs
// once) by this bandwidth, so the write-allocate cost is folded in exactly as the kernels pay
// it. Non-temporal stores would skip it and read 1.3-1.5x higher on this kind of machine,
// above what any kernel but a single-k GEMM's C store (codegen) reaches.
// rt_calib_triad_nt: the same with non-temporal stores, fenced at the end. They skip the read
// for ownership, so 12 bytes counted are 12 moved: the ceiling of kernels that stream their
// outputs (codegen's non-temporal stores of large elementwise outputs), which read 1.2x the
// ordinary triad on one Zen 3 core (relu 21-24 against 17.5-20 GB/s).
static void rt_ir_triad(rt_ir *ir, unsigned lanes, bool nt) {
    LLVMTypeRef params[] = {ir->ptr, ir->ptr, ir->ptr, ir->i64, ir->i64, ir->i64, ir->i64, ir->ptr};
    LLVMValueRef fn = rt_ir_fn(ir, nt ? "rt_calib_triad_nt" : "rt_calib_triad",
                               LLVMVoidTypeInContext(ir->ctx), params, 8);
    LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
    unsigned align = lanes * 4;
    rt_ir_loop outer, inner;
    rt_ir_loop_begin(ir, fn, &outer, LLVMGetParam(fn, 5), LLVMGetParam(fn, 6), rt_ir_i64(ir, 1));
    LLVMValueRef sv = rt_ir_volatile_splat(ir, LLVMGetParam(fn, 7), lanes);
    LLVMValueRef slot =
        LLVMBuildAnd(ir->b, LLVMBuildMul(ir->b, outer.i, rt_ir_i64(ir, 0x9E3779B1), ""),
                     LLVMGetParam(fn, 4), "");
    LLVMValueRef off = LLVMBuildMul(ir->b, slot, LLVMGetParam(fn, 3), "");
    LLVMValueRef pa = LLVMBuildInBoundsGEP2(ir->b, ir->f32, LLVMGetParam(fn, 0), &off, 1, "");
    LLVMValueRef pb = LLVMBuildInBoundsGEP2(ir->b, ir->f32, LLVMGetParam(fn, 1), &off, 1, "");
    LLVMValueRef pc = LLVMBuildInBoundsGEP2(ir->b, ir->f32, LLVMGetParam(fn, 2), &off, 1, "");
    rt_ir_loop_begin(ir, fn, &inner, rt_ir_i64(ir, 0), LLVMGetParam(fn, 3), rt_ir_i64(ir, lanes));
    LLVMValueRef bv = rt_ir_vload(ir, pb, inner.i, align);
    LLVMValueRef cv = rt_ir_vload(ir, pc, inner.i, align);
    LLVMValueRef av = LLVMBuildFAdd(ir->b, bv, LLVMBuildFMul(ir->b, sv, cv, ""), "");
    LLVMValueRef st = rt_ir_vstore(ir, av, pa, inner.i, align);
    if (nt) {
        LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(ir->i32, 1, 0));
        LLVMSetMetadata(st, LLVMGetMDKindIDInContext(ir->ctx, "nontemporal", 11),
                        LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, &one, 1)));
    }
    rt_ir_loop_end(ir, &inner);
    rt_ir_loop_end(ir, &outer);
    if (nt)
        LLVMBuildFence(ir->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    LLVMBuildRetVoid(ir->b);
}

// float rt_calib_load(ptr p, i64 elems, i64 reps): sums p[0..elems) reps times into
// RT_CALIB_LOAD_ACCS vector accumulators (elems a multiple of lanes * RT_CALIB_LOAD_ACCS).
static void rt_ir_load(rt_ir *ir, unsigned lanes) {
    LLVMTypeRef params[] = {ir->ptr, ir->i64, ir->i64};
    LLVMValueRef fn = rt_ir_fn(ir, "rt_calib_load", ir->f32, params, 3);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(ir->b, entry);
    unsigned align = lanes * 4;
    LLVMValueRef vzero = LLVMConstNull(ir->vd);
    rt_ir_loop outer, inner;
    rt_ir_loop_begin(ir, fn, &outer, rt_ir_i64(ir, 0), LLVMGetParam(fn, 2), rt_ir_i64(ir, 1));
    LLVMValueRef oacc[RT_CALIB_LOAD_ACCS], iacc[RT_CALIB_LOAD_ACCS], nacc[RT_CALIB_LOAD_ACCS];
    for (int k = 0; k < RT_CALIB_LOAD_ACCS; k++) {
        oacc[k] = LLVMBuildPhi(ir->b, ir->vd, "");
        LLVMAddIncoming(oacc[k], &vzero, &entry, 1);
    }
    LLVMBasicBlockRef outer_body = LLVMGetInsertBlock(ir->b);
    rt_ir_loop_begin(ir, fn, &inner, rt_ir_i64(ir, 0), LLVMGetParam(fn, 1),
                     rt_ir_i64(ir, (int64_t)lanes * RT_CALIB_LOAD_ACCS));
    for (int k = 0; k < RT_CALIB_LOAD_ACCS; k++) {
        iacc[k] = LLVMBuildPhi(ir->b, ir->vd, "");
        LLVMAddIncoming(iacc[k], &oacc[k], &outer_body, 1);
    }
    for (int k = 0; k < RT_CALIB_LOAD_ACCS; k++) {
        LLVMValueRef idx = LLVMBuildAdd(ir->b, inner.i, rt_ir_i64(ir, (int64_t)lanes * k), "");
        nacc[k] =
            LLVMBuildFAdd(ir->b, iacc[k], rt_ir_vload(ir, LLVMGetParam(fn, 0), idx, align), "");
    }
    rt_ir_loop_end(ir, &inner);
    for (int k = 0; k < RT_CALIB_LOAD_ACCS; k++)
        LLVMAddIncoming(iacc[k], &nacc[k], &inner.body_end_block, 1);
    // After the inner loop: the accumulators leave with their last values.
    for (int k = 0; k < RT_CALIB_LOAD_ACCS; k++)
        LLVMAddIncoming(oacc[k], &nacc[k], &inner.exit, 1);
    rt_ir_loop_end(ir, &outer);
    LLVMValueRef sum = nacc[0];
    for (int k = 1; k < RT_CALIB_LOAD_ACCS; k++)
        sum = LLVMBuildFAdd(ir->b, sum, nacc[k], "");
    char reduce[48];
    snprintf(reduce, sizeof reduce, "llvm.vector.reduce.fadd.v%uf32", lanes);
    LLVMValueRef rargs[] = {LLVMConstReal(ir->f32, 0.0), sum};
    LLVMBuildRet(ir->b, rt_ir_call(ir, reduce, ir->f32, rargs, 2));
}

// void rt_calib_store(ptr p, i64 elems, i64 reps, ptr v): p[0..elems) = *v, reps times.
static void rt_ir_store(rt_ir *ir, unsigned lanes) {
    LLVMTypeRef params[] = {ir->ptr, ir->i64, ir->i64, ir->ptr};
    LLVMValueRef fn = rt_ir_fn(ir, "rt_calib_store", LLVMVoidTypeInContext(ir->ctx), params, 4);
    LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
    rt_ir_loop outer, inner;
    rt_ir_loop_begin(ir, fn, &outer, rt_ir_i64(ir, 0), LLVMGetParam(fn, 2), rt_ir_i64(ir, 1));
    LLVMValueRef v = rt_ir_volatile_splat(ir, LLVMGetParam(fn, 3), lanes);
    rt_ir_loop_begin(ir, fn, &inner, rt_ir_i64(ir, 0), LLVMGetParam(fn, 1), rt_ir_i64(ir, lanes));
    rt_ir_vstore(ir, v, LLVMGetParam(fn, 0), inner.i, lanes * 4);
    rt_ir_loop_end(ir, &inner);
    rt_ir_loop_end(ir, &outer);
    LLVMBuildRetVoid(ir->b);
}

// void rt_calib_empty(ptr args, i64 lo, i64 hi, ptr scratch): the signature of a kernel phase
// run by hal-cpu.c's pool, doing nothing.
static void rt_ir_empty(rt_ir *ir) {
    LLVMTypeRef params[] = {ir->ptr, ir->i64, ir->i64, ir->ptr};
    LLVMValueRef fn = rt_ir_fn(ir, "rt_calib_empty", LLVMVoidTypeInContext(ir->ctx), params, 4);
    LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
    LLVMBuildRetVoid(ir->b);
}

static rt_status rt_calib_lookup(rt_cpu_jit *jit, const char *name, void **out, rt_err *err) {
    RT_TRY(rt_cpu_jit_lookup(jit, name, out, err));
    if (!*out)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: no address for %s", name);
    return RT_OK;
}

rt_status rt_calib_build(rt_arena *a, bool host_probe, rt_kernels *k, char *cpu_name,
                         size_t cpu_size, rt_err *err) {
    rt_cpu_jit *jit;
    RT_TRY(rt_cpu_jit_new(a, NULL, &jit, err)); // NULL: the host CPU and its features
    snprintf(cpu_name, cpu_size, "%s", rt_cpu_jit_cpu_name(jit));
    char *features = LLVMGetHostCPUFeatures();
    k->vec_bits = rt_has_feature(features, "avx512f") ? 512
                  : rt_has_feature(features, "avx")   ? 256
                                                      : 128;
    k->f32_lanes = k->vec_bits / 32;
    k->fma_chains = k->vec_bits == 512 ? RT_CALIB_ACCS : RT_CALIB_ACCS_16REGS;
    k->f16 = !host_probe && k->vec_bits == 512 && rt_has_feature(features, "avx512fp16");
    k->bf16 = !host_probe && k->vec_bits == 512 && rt_has_feature(features, "avx512bf16");
    k->amx =
        !host_probe && rt_has_feature(features, "amx-tile") && rt_has_feature(features, "amx-bf16");
    LLVMDisposeMessage(features);

    rt_ir ir = {.ctx = rt_cpu_jit_context(jit)};
    LLVMTargetMachineRef tm = rt_cpu_jit_target_machine(jit);
    ir.m = LLVMModuleCreateWithNameInContext("rtcalib", ir.ctx);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(ir.m, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(ir.m, dl);
    LLVMDisposeTargetData(dl);
    ir.b = LLVMCreateBuilderInContext(ir.ctx);
    ir.i8 = LLVMInt8TypeInContext(ir.ctx);
    ir.i32 = LLVMInt32TypeInContext(ir.ctx);
    ir.i64 = LLVMInt64TypeInContext(ir.ctx);
    ir.f16 = LLVMHalfTypeInContext(ir.ctx);
    ir.f32 = LLVMFloatTypeInContext(ir.ctx);
    ir.f64 = LLVMDoubleTypeInContext(ir.ctx);
    ir.ptr = LLVMPointerTypeInContext(ir.ctx, 0);
    unsigned lanes = (unsigned)k->f32_lanes;
    ir.vd = LLVMVectorType(ir.f32, lanes);
    snprintf(ir.width, sizeof ir.width, "%d", (int)k->vec_bits);

    char fma[32], reduce[48];
    snprintf(fma, sizeof fma, "llvm.fma.v%uf32", lanes);
    snprintf(reduce, sizeof reduce, "llvm.vector.reduce.fadd.v%uf32", lanes);
    rt_ir_fma(&ir, "rt_calib_fma_f32", ir.f32, ir.f32, lanes, k->fma_chains, fma, reduce);
    if (!host_probe) {
        rt_ir_fma(&ir, "rt_calib_fma_chain_f32", ir.f32, ir.f32, lanes, 1, fma, reduce);
        snprintf(fma, sizeof fma, "llvm.fma.v%uf64", lanes / 2);
        snprintf(reduce, sizeof reduce, "llvm.vector.reduce.fadd.v%uf64", lanes / 2);
        rt_ir_fma(&ir, "rt_calib_fma_f64", ir.f64, ir.f64, lanes / 2, k->fma_chains, fma, reduce);
    }
    if (k->f16)
        rt_ir_fma(&ir, "rt_calib_fma_f16", ir.f16, ir.f32, 32, RT_CALIB_ACCS, "llvm.fma.v32f16",
                  "llvm.vector.reduce.fadd.v32f16");
    if (k->bf16)
        rt_ir_dot_bf16(&ir);
    if (k->amx)
        rt_ir_amx(&ir);
    rt_ir_triad(&ir, lanes, false);
    rt_ir_triad(&ir, lanes, true);
    if (!host_probe) {
        rt_ir_load(&ir, lanes);
        rt_ir_store(&ir, lanes);
        rt_ir_empty(&ir);
    }
    LLVMDisposeBuilder(ir.b);

    char *msg = NULL;
    if (LLVMVerifyModule(ir.m, LLVMReturnStatusAction, &msg)) {
        rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: the probe module does not verify: %.300s",
                msg ? msg : "?");
        LLVMDisposeMessage(msg);
        LLVMDisposeModule(ir.m);
        return err->status;
    }
    LLVMDisposeMessage(msg);
    LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(ir.m, "default<O3>", tm, pbo);
    LLVMDisposePassBuilderOptions(pbo);
    if (e) {
        char *em = LLVMGetErrorMessage(e);
        rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: optimizing the probes: %s", em);
        LLVMDisposeErrorMessage(em);
        LLVMDisposeModule(ir.m);
        return err->status;
    }
    RT_TRY(rt_cpu_jit_add_module(jit, ir.m, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_fma_f32", (void **)&k->fma_f32, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_triad", (void **)&k->triad, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_triad_nt", (void **)&k->triad_nt, err));
    if (host_probe)
        return RT_OK;
    RT_TRY(rt_calib_lookup(jit, "rt_calib_fma_chain_f32", (void **)&k->fma_chain_f32, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_fma_f64", (void **)&k->fma_f64, err));
    if (k->f16)
        RT_TRY(rt_calib_lookup(jit, "rt_calib_fma_f16", (void **)&k->fma_f16, err));
    if (k->bf16)
        RT_TRY(rt_calib_lookup(jit, "rt_calib_dot_bf16", (void **)&k->dot_bf16, err));
    if (k->amx)
        RT_TRY(rt_calib_lookup(jit, "rt_calib_amx_bf16", (void **)&k->amx_bf16, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_load", (void **)&k->load, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_store", (void **)&k->store, err));
    RT_TRY(rt_calib_lookup(jit, "rt_calib_empty", (void **)&k->empty, err));
    return RT_OK;
}
