// calib-cpu.c: rtcalib's measurements of the host CPU. The microbenchmarks are LLVM IR built
// here (independent FMA chains per data type, AVX512-BF16 dot products, AMX tile products,
// STREAM triad over working sets and over chunks of DRAM, load and store loops), optimized and
// JIT-compiled through hal-cpu.c's LLJIT, and run on a pool of pinned threads started together.
// Each probe is repeated; its statistics (min, median, spread) decide whether rt_calib_apply
// writes the value into the device, which rtcalib then serializes with hal-ini-write.c.
#define _GNU_SOURCE // sched_setaffinity, cpu_set_t
#include "calib.h"
#include "hal-cpu.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

static int rt_calib_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

rt_status rt_calib_stats_of(const double *samples, int32_t n, rt_calib_stats *out, rt_err *err) {
    if (n < 1)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "no samples to summarize (expected at least 1, got %d)", (int)n);
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(samples[i]) || samples[i] < 0.0) {
            free(s);
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                           "bad sample %d (expected a finite value >= 0, got %g)", (int)i + 1,
                           samples[i]);
        }
        s[i] = samples[i];
    }
    qsort(s, (size_t)n, sizeof *s, rt_calib_cmp);
    out->n = n;
    out->min = s[0];
    out->max = s[n - 1];
    out->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    if (out->max == out->min)
        out->spread = 0.0;
    else if (out->median > 0.0)
        out->spread = (out->max - out->min) / out->median;
    else
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "samples with a median of 0 have no spread (min %g, max %g)", out->min,
                       out->max);
    return RT_OK;
}

rt_status rt_calib_check_spread(const char *what, const rt_calib_stats *s, double max_spread,
                                rt_err *err) {
    if (s->spread <= max_spread)
        return RT_OK;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   "%s not written: spread %.1f%% over %d repeats exceeds --max-spread %.1f%% "
                   "(min %.4g, median %.4g, max %.4g)",
                   what, 100.0 * s->spread, (int)s->n, 100.0 * max_spread, s->min, s->median,
                   s->max);
}

// ---------------------------------------------------------------------------------------------
// The probes as LLVM IR
// ---------------------------------------------------------------------------------------------

// Independent FMA accumulators: more than FMA latency (4) x ports (2), and with the two
// operands within the vector registers: 16 of AVX-512's 32, 12 of AVX2's 16 (16 there spill,
// which halved the f32 rate measured on a Zen 3 core: 47 against 96 GFLOP/s with 12).
#define RT_CALIB_ACCS        16
#define RT_CALIB_ACCS_16REGS 12
#define RT_CALIB_LOAD_ACCS   8 // read loop: fadd latency (4) x 2 loads per cycle

typedef float (*rt_fma_f32_fn)(int64_t iters, float x, float y);
typedef double (*rt_fma_f64_fn)(int64_t iters, double x, double y);
typedef float (*rt_dot_fn)(int64_t iters, const void *ops);
typedef void (*rt_amx_fn)(int64_t iters, const void *cfg, const void *a, const void *b, float *c);
typedef void (*rt_triad_fn)(float *a, const float *b, const float *c, int64_t elems,
                            int64_t slot_mask, int64_t k0, int64_t k1, const volatile float *s);
typedef float (*rt_load_fn)(const float *p, int64_t elems, int64_t reps);
typedef void (*rt_store_fn)(float *p, int64_t elems, int64_t reps, const volatile float *v);
typedef void (*rt_phase_fn)(void **args, int64_t lo, int64_t hi, float *scratch);

typedef struct rt_kernels {
    int32_t vec_bits;   // 512, 256 or 128
    int32_t f32_lanes;  // vec_bits / 32
    int32_t fma_chains; // accumulators of the f32 and f64 FMA probes
    bool f16, bf16, amx;
    rt_fma_f32_fn fma_f32, fma_f16, fma_chain_f32;
    rt_fma_f64_fn fma_f64;
    rt_dot_fn dot_bf16;
    rt_amx_fn amx_bf16;
    rt_triad_fn triad, triad_nt;
    rt_load_fn load;
    rt_store_fn store;
    rt_phase_fn empty;
} rt_kernels;

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

// Builds, verifies, optimizes (O3) and JIT-compiles every probe the host supports; for the
// host probe (host_probe) only the f32 FMA and the triad, which are all it runs.
static rt_status rt_calib_build(rt_arena *a, bool host_probe, rt_kernels *k, char *cpu_name,
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

// ---------------------------------------------------------------------------------------------
// The probe pool: one pinned thread per core, the caller being thread 0. Workers spin for about
// a millisecond after a job, then sleep on a condition variable.
// ---------------------------------------------------------------------------------------------

#define RT_CALIB_MAX_THREADS 256
#define RT_CALIB_SPINS       20000

typedef void (*rt_job_fn)(void *arg, int32_t tid);

typedef struct rt_pool rt_pool;
typedef struct rt_pool_worker {
    rt_pool *pool;
    int32_t tid;
} rt_pool_worker;

struct rt_pool {
    int32_t n;
    int32_t cpu[RT_CALIB_MAX_THREADS]; // -1: not pinned
    pthread_t th[RT_CALIB_MAX_THREADS];
    rt_pool_worker w[RT_CALIB_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint64_t gen;
    _Atomic int32_t done;
    rt_job_fn fn; // published by the release increment of gen
    void *arg;
    int32_t active; // threads with tid < active run fn
    bool quit;
};

static inline void rt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause" ::: "memory");
#else
    __asm__ volatile("" ::: "memory");
#endif
}

static void rt_pin(int32_t cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set); // best effort: an unpinned thread still measures
}

static void *rt_pool_main(void *arg) {
    rt_pool_worker *w = arg;
    rt_pool *p = w->pool;
    rt_pin(p->cpu[w->tid]);
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        for (int spins = 0; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen;
             spins++) {
            if (spins < RT_CALIB_SPINS) {
                rt_cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = g;
        if (p->quit)
            return NULL;
        if (w->tid < p->active)
            p->fn(p->arg, w->tid);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

// Runs fn(arg, tid) on threads 0..active-1 together and returns when all are done.
static void rt_pool_run(rt_pool *p, int32_t active, rt_job_fn fn, void *arg) {
    p->fn = fn;
    p->arg = arg;
    p->active = active;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (active > 0)
        fn(arg, 0);
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1)
        rt_cpu_relax();
}

static void rt_pool_stop(rt_pool *p) {
    p->quit = true;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int32_t t = 1; t < p->n; t++)
        pthread_join(p->th[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

// Starts n - 1 workers pinned to the CPUs this process may use (round robin); signals are
// blocked in them so that SIGINT and SIGTERM reach the caller's handlers.
static rt_status rt_pool_start(rt_pool *p, int32_t n, const cpu_set_t *allowed, rt_err *err) {
    memset(p, 0, sizeof *p);
    int32_t cpus[CPU_SETSIZE], n_cpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, allowed))
            cpus[n_cpus++] = c;
    }
    for (int32_t t = 0; t < n; t++)
        p->cpu[t] = n_cpus ? cpus[t % n_cpus] : -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    p->n = 1;
    int rc = 0;
    for (int32_t t = 1; t < n && rc == 0; t++) {
        p->w[t].pool = p;
        p->w[t].tid = t;
        rc = pthread_create(&p->th[t], NULL, rt_pool_main, &p->w[t]);
        if (rc == 0)
            p->n = t + 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        rt_pool_stop(p);
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start probe thread %d of %d: %s",
                       (int)p->n + 1, (int)n, strerror(rc));
    }
    rt_pin(p->cpu[0]);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Probes: what each one runs, and how its samples become values
// ---------------------------------------------------------------------------------------------

typedef enum rt_probe_kind {
    RT_PROBE_FMA_F32,
    RT_PROBE_FMA_F64,
    RT_PROBE_FMA_F16,
    RT_PROBE_DOT_BF16,
    RT_PROBE_AMX_BF16,
    RT_PROBE_TRIAD,    // working set repeated (chunk_bytes 0) or scattered chunks of a buffer
    RT_PROBE_TRIAD_NT, // the same with non-temporal stores
    RT_PROBE_LOAD,
    RT_PROBE_STORE,
    RT_PROBE_FORK,        // fork/join of the probe pool
    RT_PROBE_LAUNCH,      // a JIT'd empty kernel launched through hal-cpu.c's pool
    RT_PROBE_SYNC,        // one phase barrier of hal-cpu.c's pool
    RT_PROBE_CLOCK,       // a dependent chain of integer adds: the clock under load
    RT_PROBE_FMA_LATENCY, // one dependent chain of f32 vector FMAs, in cycles of the clock probe
} rt_probe_kind;

typedef struct rt_probe {
    rt_probe_kind kind;
    int32_t threads;
    int64_t elems;       // TRIAD, LOAD, STORE: floats per array per thread
    int64_t chunk_elems; // TRIAD with chunks: floats per array per chunk; 0 = whole arrays
    rt_calib_value v;    // name, target and unit filled when planned
} rt_probe;

#define RT_CALIB_MAX_PROBES  64
#define RT_CALIB_SYNC_PHASES 16

typedef struct rt_calib {
    const rt_calib_opts *opts;
    rt_kernels k;
    rt_pool pool;
    rt_cpu_pool *rpool;
    int32_t threads;
    double target_s; // wall time of one sample
    // Per-thread arrays of the bandwidth probes.
    int64_t buf_elems;
    size_t buf_bytes;
    float *a[RT_CALIB_MAX_THREADS], *b[RT_CALIB_MAX_THREADS], *c[RT_CALIB_MAX_THREADS];
    // The job being run.
    const rt_probe *probe;
    int64_t count;
    volatile float scalar;
    volatile float sink[RT_CALIB_MAX_THREADS];
    double clock_mhz; // the clock probe's value once measured (0: none)
    // Each thread's last job: wall-clock start and end, and thread CPU time. A sample whose
    // threads ran for less than RT_CALIB_RUN_SHARE of its span was disturbed
    // (rt_calib_measure_host).
    double start_s[RT_CALIB_MAX_THREADS], end_s[RT_CALIB_MAX_THREADS];
    double cpu_s[RT_CALIB_MAX_THREADS];
    int64_t k0; // the next chunk of a chunked triad: samples walk the whole buffer
    // The barrier after the untimed pass of a host-probe triad (rt_calib_job).
    _Atomic int32_t arrived;
    _Atomic uint64_t passed;
    // AMX and bf16 operands.
    unsigned char *amx_cfg, *amx_a, *amx_b, *amx_c;
    int32_t *bf16_ops;
} rt_calib;

static double rt_now_s(void) {
    return rt_cpu_now_ns() * 1e-9;
}

// RT_CALIB_CHAIN dependent integer adds per iteration, iters iterations: one add per cycle on
// every core we know of, so the rate is the clock under load (turbo included), which neither
// /proc/cpuinfo nor a VM's CPUID reports. Host assembly: the probes JIT'd through LLVM would
// fold a chain of constant adds into one.
#define RT_CALIB_CHAIN   16
#define RT_CALIB_STR(x)  #x
#define RT_CALIB_REPT(n) ".rept " RT_CALIB_STR(n) "\n\t"
static bool rt_calib_has_add_chain(void) {
#if defined(__x86_64__) || defined(__aarch64__)
    return true;
#else
    return false;
#endif
}

static void rt_calib_add_chain(int64_t iters) {
    uint64_t x = 0;
#if defined(__x86_64__)
    for (int64_t i = 0; i < iters; i++)
        __asm__ volatile(RT_CALIB_REPT(RT_CALIB_CHAIN) "add $1, %0\n\t.endr" : "+r"(x));
#elif defined(__aarch64__)
    for (int64_t i = 0; i < iters; i++)
        __asm__ volatile(RT_CALIB_REPT(RT_CALIB_CHAIN) "add %0, %0, #1\n\t.endr" : "+r"(x));
#else
    (void)iters;
#endif
    __asm__ volatile("" ::"r"(x));
}

static double rt_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rt_calib_job_run(rt_calib *c, int32_t tid, int64_t count);

// Waits until all n threads of the job have arrived.
static void rt_calib_barrier(rt_calib *c, int32_t n) {
    uint64_t gen = atomic_load_explicit(&c->passed, memory_order_acquire);
    if (atomic_fetch_add_explicit(&c->arrived, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&c->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->passed, 1, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&c->passed, memory_order_acquire) == gen)
        rt_cpu_relax();
}

// One thread's part of a sample. The host probe's triad over a cache-sized working set first
// makes one untimed pass, then waits for the other threads: other processes that shared the
// cores since the last sample may have evicted it (on a loaded machine the first pass read
// 50 GB/s where an L3 gives 90), and a thread that other work delayed there would start late.
static void rt_calib_job(void *arg, int32_t tid) {
    rt_calib *c = arg;
    if (c->opts->host_probe && c->probe->kind == RT_PROBE_TRIAD && c->probe->chunk_elems == 0) {
        rt_calib_job_run(c, tid, 1);
        rt_calib_barrier(c, c->probe->threads);
    }
    c->start_s[tid] = rt_now_s();
    double t0 = rt_thread_cpu_s();
    rt_calib_job_run(c, tid, c->count);
    c->cpu_s[tid] = rt_thread_cpu_s() - t0;
    c->end_s[tid] = rt_now_s();
}

static void rt_calib_job_run(rt_calib *c, int32_t tid, int64_t count) {
    const rt_probe *p = c->probe;
    const rt_kernels *k = &c->k;
    switch (p->kind) {
    case RT_PROBE_FMA_F32:
        c->sink[tid] = k->fma_f32(count, 0.999f, 0.001f);
        break;
    case RT_PROBE_FMA_F64:
        c->sink[tid] = (float)k->fma_f64(count, 0.999, 0.001);
        break;
    case RT_PROBE_FMA_F16:
        c->sink[tid] = k->fma_f16(count, 0.99f, 0.01f);
        break;
    case RT_PROBE_DOT_BF16:
        c->sink[tid] = k->dot_bf16(count, c->bf16_ops);
        break;
    case RT_PROBE_AMX_BF16:
        k->amx_bf16(count, c->amx_cfg, c->amx_a, c->amx_b, (float *)(c->amx_c + tid * 4096));
        break;
    case RT_PROBE_TRIAD:
    case RT_PROBE_TRIAD_NT: {
        rt_triad_fn triad = p->kind == RT_PROBE_TRIAD_NT ? k->triad_nt : k->triad;
        if (p->chunk_elems > 0) {
            int64_t slots = 1;
            while (slots * 2 * p->chunk_elems <= c->buf_elems)
                slots *= 2;
            triad(c->a[tid], c->b[tid], c->c[tid], p->chunk_elems, slots - 1, c->k0, c->k0 + count,
                  &c->scalar);
        } else {
            triad(c->a[tid], c->b[tid], c->c[tid], p->elems, 0, 0, count, &c->scalar);
        }
        break;
    }
    case RT_PROBE_LOAD:
        c->sink[tid] = k->load(c->a[tid], p->elems, count);
        break;
    case RT_PROBE_CLOCK:
        rt_calib_add_chain(count);
        break;
    case RT_PROBE_FMA_LATENCY:
        c->sink[tid] = k->fma_chain_f32(count, 0.999f, 0.001f);
        break;
    case RT_PROBE_STORE:
        k->store(c->a[tid], p->elems, count, &c->scalar);
        break;
    case RT_PROBE_FORK:
    case RT_PROBE_LAUNCH:
    case RT_PROBE_SYNC:
        break;
    }
}

static void rt_calib_noop(void *arg, int32_t tid) {
    (void)arg;
    (void)tid;
}

static void rt_calib_noop_phase(void **args, int64_t lo, int64_t hi, float *scratch) {
    (void)args;
    (void)lo;
    (void)hi;
    (void)scratch;
}

// Runs the probe once with c->count; returns the wall time in seconds.
static double rt_calib_once(rt_calib *c, const rt_probe *p, int64_t count) {
    c->probe = p;
    c->count = count;
    double t0 = rt_now_s();
    switch (p->kind) {
    case RT_PROBE_FORK:
        for (int64_t i = 0; i < count; i++)
            rt_pool_run(&c->pool, p->threads, rt_calib_noop, c);
        break;
    case RT_PROBE_LAUNCH:
    case RT_PROBE_SYNC: {
        bool sync = p->kind == RT_PROBE_SYNC;
        rt_cpu_phase_fn fns[RT_CALIB_SYNC_PHASES];
        int64_t items[RT_CALIB_SYNC_PHASES];
        for (int i = 0; i < RT_CALIB_SYNC_PHASES; i++) {
            fns[i] = sync ? rt_calib_noop_phase : c->k.empty;
            items[i] = c->threads;
        }
        rt_cpu_launch l = {.n_phases = sync ? RT_CALIB_SYNC_PHASES : 1,
                           .fns = fns,
                           .n_items = items,
                           .args = NULL,
                           .scratch_bytes = 0};
        for (int64_t i = 0; i < count; i++)
            rt_cpu_pool_run(c->rpool, &l);
        break;
    }
    default:
        rt_pool_run(&c->pool, p->threads, rt_calib_job, c);
        if ((p->kind == RT_PROBE_TRIAD || p->kind == RT_PROBE_TRIAD_NT) && p->chunk_elems > 0)
            c->k0 += count;
        break;
    }
    return rt_now_s() - t0;
}

// The value of one sample, in the probe's unit.
static double rt_calib_metric(const rt_calib *c, const rt_probe *p, int64_t count, double t) {
    double n = (double)count * p->threads, lanes = c->k.f32_lanes;
    if (!(t > 0.0))
        t = 1e-9;
    switch (p->kind) {
    case RT_PROBE_FMA_F32:
        return n * c->k.fma_chains * lanes * 2.0 / t * 1e-9;
    case RT_PROBE_FMA_F64:
        return n * c->k.fma_chains * lanes / 2.0 * 2.0 / t * 1e-9;
    case RT_PROBE_FMA_F16:
        return n * RT_CALIB_ACCS * 32.0 * 2.0 / t * 1e-9;
    case RT_PROBE_DOT_BF16:
        return n * RT_CALIB_ACCS * 16.0 * 4.0 / t * 1e-9; // 16 lanes x 2 products x 2 flop
    case RT_PROBE_AMX_BF16:
        return n * 4.0 * 16.0 * 16.0 * 32.0 * 2.0 / t * 1e-9;
    case RT_PROBE_TRIAD:
    case RT_PROBE_TRIAD_NT: {
        double elems = (double)(p->chunk_elems > 0 ? p->chunk_elems : p->elems);
        return n * elems * 12.0 / t * 1e-9; // STREAM counts 12 bytes per element
    }
    case RT_PROBE_LOAD:
    case RT_PROBE_STORE:
        return n * (double)p->elems * 4.0 / t * 1e-9;
    case RT_PROBE_SYNC:
        return t / ((double)count * RT_CALIB_SYNC_PHASES) * 1e6;
    case RT_PROBE_CLOCK:
        return (double)count * RT_CALIB_CHAIN / t * 1e-6;
    case RT_PROBE_FMA_LATENCY:
        return t / (double)count * c->clock_mhz * 1e6;
    case RT_PROBE_FORK:
    case RT_PROBE_LAUNCH:
        return t / (double)count * 1e6;
    }
    return 0.0;
}

// Overheads and latencies keep their lowest repeat, throughputs (the clock too) their highest.
static bool rt_probe_is_overhead(const rt_probe *p) {
    return p->kind == RT_PROBE_FORK || p->kind == RT_PROBE_LAUNCH || p->kind == RT_PROBE_SYNC ||
           p->kind == RT_PROBE_FMA_LATENCY;
}

// Finds the count for which one run takes about c->target_s (it also warms caches and clocks).
static int64_t rt_calib_count(rt_calib *c, const rt_probe *p) {
    int64_t count = 1;
    for (int tries = 0; tries < 40; tries++) {
        double t = rt_calib_once(c, p, count);
        if (t >= c->target_s / 4.0 || count >= ((int64_t)1 << 40)) {
            double want = (double)count * c->target_s / (t > 0.0 ? t : 1e-9);
            return want < 1.0 ? 1 : want > 1e12 ? (int64_t)1e12 : (int64_t)want;
        }
        double grow = t > 0.0 ? 0.5 * c->target_s / t : 64.0;
        count = (int64_t)((double)count * (grow < 2.0 ? 2.0 : grow > 64.0 ? 64.0 : grow));
    }
    return count;
}

// Samples a probe opts->repeats times (once more when too noisy) into p->v.
static rt_status rt_calib_measure(rt_calib *c, rt_probe *p, rt_err *err) {
    int32_t r = c->opts->repeats;
    double samples[256];
    if (r > 256)
        r = 256;
    int64_t count = rt_calib_count(c, p);
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int32_t i = 0; i < r; i++)
            samples[i] = rt_calib_metric(c, p, count, rt_calib_once(c, p, count));
        RT_TRY(rt_calib_stats_of(samples, r, &p->v.stats, err));
        if (p->v.stats.spread <= c->opts->max_spread)
            break;
    }
    p->v.value = rt_probe_is_overhead(p) ? p->v.stats.min : p->v.stats.max;
    return RT_OK;
}

// The host probe's sampling (opts->host_probe), for a machine that other work may be loading: a
// sample is timed from the first of its threads' start to the last one's end, and counts only
// when each thread ran (thread CPU time) for RT_CALIB_RUN_SHARE of that span or more, so that a
// thread descheduled mid-sample -- or started late -- cannot lower the value or raise it. The
// value is the best of them: RT_CALIB_HOST_GOOD undisturbed samples, or fewer where other work
// makes them slow to come by (RT_CALIB_HOST_ENOUGH after RT_CALIB_HOST_SOON_S, any after
// RT_CALIB_HOST_LATE_S); fewer than RT_CALIB_HOST_MIN skip the probe (the note says so). 50: the
// best of 20 read the L3 of the Zen 3 VM anywhere from 62 to 133 GB/s, of 50 from 104 to 129.
#define RT_CALIB_RUN_SHARE   0.9
#define RT_CALIB_HOST_TRIES  400
#define RT_CALIB_HOST_GOOD   50
#define RT_CALIB_HOST_ENOUGH 20
#define RT_CALIB_HOST_MIN    3
#define RT_CALIB_HOST_SOON_S 0.05
#define RT_CALIB_HOST_LATE_S 0.25

static rt_status rt_calib_measure_host(rt_calib *c, rt_probe *p, rt_err *err) {
    double samples[RT_CALIB_HOST_TRIES];
    int32_t good = 0, tries = 0;
    int64_t count = rt_calib_count(c, p);
    double t0 = rt_now_s();
    for (; tries < RT_CALIB_HOST_TRIES && good < RT_CALIB_HOST_GOOD; tries++) {
        double spent = rt_now_s() - t0;
        if ((good >= RT_CALIB_HOST_ENOUGH && spent > RT_CALIB_HOST_SOON_S) ||
            (good >= RT_CALIB_HOST_MIN && spent > RT_CALIB_HOST_LATE_S))
            break;
        rt_calib_once(c, p, count);
        double first = c->start_s[0], last = c->end_s[0];
        for (int32_t i = 1; i < p->threads; i++) {
            first = fmin(first, c->start_s[i]);
            last = fmax(last, c->end_s[i]);
        }
        double t = last - first;
        bool ran = t > 0;
        for (int32_t i = 0; i < p->threads; i++)
            ran = ran && c->cpu_s[i] >= RT_CALIB_RUN_SHARE * t;
        if (t < 0.5 * c->target_s && count < ((int64_t)1 << 40)) {
            // Too short to time (the count was calibrated on a slow first run): longer ones.
            count = (int64_t)fmin(1e12, (double)count * c->target_s / t);
            continue;
        }
        if (ran)
            samples[good++] = rt_calib_metric(c, p, count, t);
    }
    if (good < RT_CALIB_HOST_MIN) {
        p->v.skipped = true;
        snprintf(p->v.note, sizeof p->v.note,
                 "skipped: %d of %d samples had a thread descheduled for over %.0f%% of the time "
                 "(a loaded machine)",
                 (int)(tries - good), (int)tries, 100.0 * (1.0 - RT_CALIB_RUN_SHARE));
        return RT_OK;
    }
    RT_TRY(rt_calib_stats_of(samples, good, &p->v.stats, err));
    p->v.value = p->v.stats.max;
    return RT_OK;
}

// Runs the probe in a forked child first, single-threaded and short: a CPU that advertises an
// ISA it cannot run (SIGILL) costs a skipped probe, not the run.
static rt_calib *rt_trial_calib;
static const rt_probe *rt_trial_probe;
static int rt_calib_trial_child(void *ctx) {
    (void)ctx;
    rt_probe p = *rt_trial_probe;
    p.threads = 1;
    rt_trial_calib->probe = &p;
    rt_trial_calib->count = 16;
    rt_calib_job(rt_trial_calib, 0);
    return 0;
}

static rt_status rt_calib_trial(rt_calib *c, rt_probe *p, rt_err *err) {
    rt_trial_calib = c;
    rt_trial_probe = p;
    rt_cpu_child_status st;
    int code = 0;
    RT_TRY(rt_cpu_run_isolated(rt_calib_trial_child, NULL, 10000.0, &st, &code, err));
    if (st != RT_CPU_CHILD_OK) {
        p->v.skipped = true;
        snprintf(p->v.note, sizeof p->v.note, "skipped: the probe %s in a trial run%s",
                 st == RT_CPU_CHILD_CRASHED   ? "crashed"
                 : st == RT_CPU_CHILD_TIMEOUT ? "hung"
                                              : "failed",
                 st == RT_CPU_CHILD_CRASHED && code == SIGILL ? " (illegal instruction)" : "");
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------

static void rt_calib_free_buffers(rt_calib *c) {
    for (int32_t t = 0; t < RT_CALIB_MAX_THREADS; t++) {
        free(c->a[t]);
        free(c->b[t]);
        free(c->c[t]);
        c->a[t] = c->b[t] = c->c[t] = NULL;
    }
    c->buf_elems = 0;
    c->buf_bytes = 0;
}

static void rt_calib_init_job(void *arg, int32_t tid) {
    rt_calib *c = arg;
    for (int64_t i = 0; i < c->buf_elems; i++) {
        c->a[tid][i] = 0.0f;
        c->b[tid][i] = 1.0f;
        c->c[tid][i] = 2.0f;
    }
}

// Per-thread arrays of elems floats, first touched by their (pinned) thread. They get the
// system's default paging, like a STREAM build and like the tensors rtgen's kernels run on
// (arena chunks from malloc): with transparent huge pages on "madvise", as on most
// distributions, asking for huge pages here made the DRAM triad 10-20% faster than any kernel
// can read its operands (fewer TLB misses; more under nested paging in a VM), so the model
// overestimated memory-bound kernels and rtcalib disagreed with bench-ops' triad.
static rt_status rt_calib_buffers(rt_calib *c, int64_t elems, rt_err *err) {
    if (c->buf_elems == elems)
        return RT_OK;
    rt_calib_free_buffers(c);
    size_t bytes = (size_t)elems * sizeof(float);
    size_t align = 64;
    bytes = (bytes + align - 1) / align * align;
    for (int32_t t = 0; t < c->threads; t++) {
        float **arrs[] = {&c->a[t], &c->b[t], &c->c[t]};
        for (int i = 0; i < 3; i++) {
            *arrs[i] = aligned_alloc(align, bytes);
            if (!*arrs[i]) {
                rt_calib_free_buffers(c);
                return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC,
                               "out of memory for the probe buffers (%d x 3 x %zu bytes)",
                               (int)c->threads, bytes);
            }
        }
    }
    c->buf_elems = elems;
    c->buf_bytes = bytes;
    rt_pool_run(&c->pool, c->threads, rt_calib_init_job, c);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The plan: which probes, in which order
// ---------------------------------------------------------------------------------------------

typedef struct rt_plan {
    int32_t n;
    rt_probe p[RT_CALIB_MAX_PROBES];
} rt_plan;

static rt_probe *rt_plan_add(rt_plan *plan, rt_probe_kind kind, int32_t threads,
                             rt_calib_target target, const char *unit, const char *fmt, ...)
    RT_PRINTF(6, 7);
static rt_probe *rt_plan_add(rt_plan *plan, rt_probe_kind kind, int32_t threads,
                             rt_calib_target target, const char *unit, const char *fmt, ...) {
    if (plan->n >= RT_CALIB_MAX_PROBES)
        return NULL;
    rt_probe *p = &plan->p[plan->n++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->threads = threads;
    p->v.target = target;
    p->v.unit = unit;
    p->v.threads = threads;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->v.name, sizeof p->v.name, fmt, ap);
    va_end(ap);
    return p;
}

static const char *rt_plural(int32_t n) {
    return n == 1 ? "" : "s";
}

// Bytes as "48 KiB" / "1 MiB" / "1000 B".
static void rt_fmt_bytes(int64_t b, char *buf, size_t size) {
    if (b >= (1 << 20) && b % (1 << 20) == 0)
        snprintf(buf, size, "%lld MiB", (long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, size, "%lld KiB", (long long)(b >> 10));
    else if (b >= (1 << 20))
        snprintf(buf, size, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, size, "%lld B", (long long)b);
}

static void rt_calib_plan(const rt_calib *c, const rt_device *base, rt_plan *plan) {
    int32_t T = c->threads, L = c->k.f32_lanes;
    bool quick = c->opts->quick;
    plan->n = 0;

    // The clock, then the latency of one FMA in its cycles.
    if (rt_calib_has_add_chain()) {
        rt_plan_add(plan, RT_PROBE_CLOCK, 1, RT_CALIB_CLOCK, "MHz", "clock (add chain), 1 thread");
        rt_plan_add(plan, RT_PROBE_FMA_LATENCY, 1, RT_CALIB_FMA_LATENCY, "cycles",
                    "f32 fma latency (one chain), 1 thread");
    }

    // Compute: one thread (per-TEU entries) and all threads (device peaks).
    static const struct {
        rt_probe_kind kind;
        const char *name, *insn;
        rt_dtype dtype;
        bool mma;
    } compute[] = {
        {RT_PROBE_FMA_F32, "f32 fma", "f32_fma", RT_DTYPE_F32, false},
        {RT_PROBE_FMA_F64, "f64 fma", "f64_fma", RT_DTYPE_F64, false},
        {RT_PROBE_FMA_F16, "f16 fma (avx512-fp16)", "f16_fma", RT_DTYPE_F16, false},
        {RT_PROBE_DOT_BF16, "bf16 dot (avx512-bf16)", "bf16_dot", RT_DTYPE_BF16, false},
        {RT_PROBE_AMX_BF16, "bf16 tile product (amx)", "amx_bf16", RT_DTYPE_BF16, true},
    };
    for (size_t i = 0; i < sizeof compute / sizeof compute[0]; i++) {
        rt_probe_kind kind = compute[i].kind;
        if ((kind == RT_PROBE_FMA_F16 && !c->k.f16) || (kind == RT_PROBE_DOT_BF16 && !c->k.bf16) ||
            (kind == RT_PROBE_AMX_BF16 && !c->k.amx))
            continue;
        rt_probe *p1 = rt_plan_add(plan, kind, 1, compute[i].mma ? RT_CALIB_REPORT : RT_CALIB_INSN,
                                   "GFLOP/s", "%s, 1 thread", compute[i].name);
        snprintf(p1->v.insn, sizeof p1->v.insn, "%s", compute[i].insn);
        rt_probe *pt =
            rt_plan_add(plan, kind, T, compute[i].mma ? RT_CALIB_MMA : RT_CALIB_PEAK, "GFLOP/s",
                        "%s, %d thread%s", compute[i].name, (int)T, rt_plural(T));
        pt->v.dtype = compute[i].dtype;
    }

    // Load and store throughput of one core, L1-resident.
    int64_t l1_elems = 4096; // 16 KiB
    rt_probe *ld =
        rt_plan_add(plan, RT_PROBE_LOAD, 1, RT_CALIB_REPORT, "GB/s", "load, 1 thread (16 KiB)");
    ld->elems = l1_elems;
    rt_probe *st =
        rt_plan_add(plan, RT_PROBE_STORE, 1, RT_CALIB_REPORT, "GB/s", "store, 1 thread (16 KiB)");
    st->elems = l1_elems;

    // Triad at about half of each cache level (from the top), then DRAM.
    int32_t top = base->n_levels - 1;
    int64_t last_cache_bytes = 0;
    for (int32_t i = 1; i < top; i++) {
        const rt_mem_level *l = &base->level[i];
        if (l->managed != RT_MEM_CACHE)
            continue;
        int64_t total = l->capacity_bytes * (l->scope == RT_MEM_SCOPE_DEVICE ? 1 : base->units);
        if (total > last_cache_bytes)
            last_cache_bytes = total;
    }
    // DRAM: STREAM's sizing rule, the working set at least 4x the caches (total over threads,
    // 3 arrays), within [768 MiB, 2 GiB] and a quarter of memory. A VM may report the host's
    // whole last-level cache (480 MiB on the 2-core development VM): past the cache the VM
    // really has, the triad does not depend on size (3 x 128 MiB and 3 x 640 MiB agree within
    // 1% there), so the cap costs nothing. Threads: one per core, pinned, as bench-util.c's
    // triad and the kernel pool run one per core (the scheduler keeps those apart; pinning only
    // keeps migrations out of the samples).
    int64_t dram_bytes = 4 * last_cache_bytes;
    int64_t dram_min = quick ? (24 << 20) : ((int64_t)768 << 20);
    int64_t dram_max = quick ? (24 << 20) : ((int64_t)2 << 30);
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0 && (int64_t)pages * page_bytes / 4 < dram_max)
        dram_max = (int64_t)pages * page_bytes / 4;
    dram_bytes = dram_bytes < dram_min ? dram_min : dram_bytes > dram_max ? dram_max : dram_bytes;
    int64_t step = (int64_t)L * RT_CALIB_LOAD_ACCS;
    for (int32_t i = top - 1; i >= 0; i--) {
        const rt_mem_level *l = &base->level[i];
        if (i > 0 && l->managed != RT_MEM_CACHE)
            continue;
        int64_t ws; // bytes per thread, 3 arrays
        if (i == 0)
            ws = dram_bytes / T;
        else if (l->scope == RT_MEM_SCOPE_DEVICE)
            ws = l->capacity_bytes / 2 / T;
        else
            ws = l->capacity_bytes / 2;
        if (quick && ws > (8 << 20))
            ws = 8 << 20;
        int64_t elems = ws / 12 / step * step;
        if (elems < step)
            elems = step;
        char ws_text[32];
        rt_fmt_bytes(elems * 12, ws_text, sizeof ws_text);
        rt_probe *p1 = rt_plan_add(plan, RT_PROBE_TRIAD, 1, RT_CALIB_REPORT, "GB/s",
                                   "triad mem.%s (%s), 1 thread", l->name, ws_text);
        p1->elems = elems;
        p1->v.ws_bytes = elems * 12;
        rt_probe *pt = rt_plan_add(plan, RT_PROBE_TRIAD, T, RT_CALIB_LEVEL_BW, "GB/s",
                                   "triad mem.%s (%s per thread), %d thread%s", l->name, ws_text,
                                   (int)T, rt_plural(T));
        pt->elems = elems;
        pt->v.level = i;
        pt->v.ws_bytes = elems * 12 * T;
        if (i == 0) { // the ceiling of kernels that stream their outputs
            rt_probe *pn = rt_plan_add(plan, RT_PROBE_TRIAD_NT, T, RT_CALIB_LEVEL_STREAM, "GB/s",
                                       "triad mem.%s, non-temporal stores (%s per thread), %d "
                                       "thread%s",
                                       l->name, ws_text, (int)T, rt_plural(T));
            pn->elems = elems;
            pn->v.level = 0;
            pn->v.ws_bytes = elems * 12 * T;
        }
        // A cache shared by the cores: the triad over working sets doubling from twice the
        // caches below it (over all threads) up to the half-capacity point above, so that
        // rt_calib_apply can tell the capacity that really behaves as a cache.
        if (i > 0 && l->scope == RT_MEM_SCOPE_DEVICE && !quick) {
            int64_t below = 0;
            for (int32_t j = i + 1; j < top; j++) {
                const rt_mem_level *in = &base->level[j];
                int64_t b = in->capacity_bytes * (in->scope == RT_MEM_SCOPE_DEVICE ? 1 : T);
                if (in->managed == RT_MEM_CACHE && b > below)
                    below = b;
            }
            for (int64_t w = 2 * below; below > 0 && 2 * w <= ws * T; w *= 2) {
                int64_t e = w / T / 12 / step * step;
                if (e < step)
                    continue;
                char s[32];
                rt_fmt_bytes(e * 12 * T, s, sizeof s);
                rt_probe *ps = rt_plan_add(plan, RT_PROBE_TRIAD, T, RT_CALIB_SWEEP, "GB/s",
                                           "triad mem.%s sweep (%s in all), %d thread%s", l->name,
                                           s, (int)T, rt_plural(T));
                ps->elems = e;
                ps->v.level = i;
                ps->v.curve_bytes = e * 12 * T;
            }
        }
        if (i == 0) {
            // The DRAM curve: triad on chunks of S bytes at scattered places of the buffer.
            static const int64_t full[] = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                           1 << 20, 4 << 20, 16 << 20, 64 << 20};
            static const int64_t tiny[] = {4 << 10, 64 << 10, 1 << 20};
            const int64_t *pts = quick ? tiny : full;
            size_t n = quick ? sizeof tiny / sizeof tiny[0] : sizeof full / sizeof full[0];
            for (size_t j = 0; j < n; j++) {
                int64_t chunk = pts[j] / 12 / L * L;
                if (chunk < L || 2 * chunk > elems)
                    continue;
                char s[32];
                rt_fmt_bytes(pts[j], s, sizeof s);
                rt_probe *pc = rt_plan_add(plan, RT_PROBE_TRIAD, T, RT_CALIB_CURVE, "GB/s",
                                           "triad mem.%s chunks of %s, %d thread%s", l->name, s,
                                           (int)T, rt_plural(T));
                pc->elems = elems;
                pc->chunk_elems = chunk;
                pc->v.level = 0;
                pc->v.curve_bytes = pts[j];
            }
        }
    }

    rt_plan_add(plan, RT_PROBE_FORK, T, RT_CALIB_REPORT, "us",
                "fork/join of the probe pool, %d "
                "thread%s",
                (int)T, rt_plural(T));
    rt_plan_add(plan, RT_PROBE_SYNC, T, RT_CALIB_SYNC, "us",
                "phase barrier of the kernel pool, %d thread%s", (int)T, rt_plural(T));
    rt_plan_add(plan, RT_PROBE_LAUNCH, T, RT_CALIB_LAUNCH, "us",
                "empty JIT kernel launch, %d thread%s", (int)T, rt_plural(T));
}

// The first-use probe of the default device (opts->host_probe; hal-host-probe.c): the clock
// and one core's f32 FMA rate (the device peak is units x that rate), then the triad on all
// threads at a quarter of level 1 -- the cache the model's warm rule (rt_perf_cpu_warm) keeps
// an operator in, if it fits in half of it -- and, with ordinary and with non-temporal stores,
// on a DRAM buffer of twice the caches, 64 to 256 MiB and at most a quarter of memory.
// A quarter of level 1, not half: on the 2-core Zen 3 VM (32 MiB L3 shared with other tenants)
// the 2-thread triad ran at 100-116 GB/s from 4 to 12 MiB, 54 at 16 and 27 at 24, so half sat on
// the edge and read anywhere from 55 to 95. DRAM at 2x, not the full plan's 4x: first touch of
// its pages is most of the probe's cost, and with the samples walking the buffer in scattered
// chunks (each last touched a whole buffer ago) the triad read the same at 1, 2, 4 and 6x the
// L3 there (within the noise, 27-32 GB/s). One buffer, allocated for DRAM, serves all triads.
static void rt_calib_plan_host(const rt_calib *c, const rt_device *base, rt_plan *plan) {
    int32_t T = c->threads;
    int64_t step = (int64_t)c->k.f32_lanes * RT_CALIB_LOAD_ACCS;
    plan->n = 0;
    if (rt_calib_has_add_chain())
        rt_plan_add(plan, RT_PROBE_CLOCK, 1, RT_CALIB_CLOCK, "MHz", "clock (add chain), 1 thread");
    rt_probe *f =
        rt_plan_add(plan, RT_PROBE_FMA_F32, 1, RT_CALIB_INSN, "GFLOP/s", "f32 fma, 1 thread");
    snprintf(f->v.insn, sizeof f->v.insn, "f32_fma");
    int64_t caches = 0;
    for (int32_t i = 1; i < base->n_levels; i++) {
        const rt_mem_level *l = &base->level[i];
        if (l->managed == RT_MEM_CACHE)
            caches += l->capacity_bytes * (l->scope == RT_MEM_SCOPE_DEVICE ? 1 : base->units);
    }
    int64_t llc = 0; // working set of all threads at a quarter of level 1
    if (base->n_levels > 2 && base->level[1].managed == RT_MEM_CACHE)
        llc = base->level[1].capacity_bytes / 4 *
              (base->level[1].scope == RT_MEM_SCOPE_DEVICE ? 1 : T);
    int64_t dram = 2 * caches, lo = (int64_t)64 << 20, hi = (int64_t)256 << 20;
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0 && (int64_t)pages * page_bytes / 4 < hi)
        hi = (int64_t)pages * page_bytes / 4;
    dram = dram < lo ? lo : dram > hi ? hi : dram;
    // Level 1, DRAM, and DRAM with non-temporal stores (the ceiling of kernels that stream).
    const struct {
        int32_t level;
        int64_t ws;
        bool nt;
    } triads[] = {{1, llc, false}, {0, dram, false}, {0, dram, true}};
    for (size_t i = 0; i < sizeof triads / sizeof triads[0]; i++) {
        if (triads[i].ws <= 0)
            continue;
        int64_t elems = triads[i].ws / T / 12 / step * step;
        if (elems < step)
            elems = step;
        char ws_text[32];
        rt_fmt_bytes(elems * 12 * T, ws_text, sizeof ws_text);
        const rt_mem_level *l = &base->level[triads[i].level];
        bool nt = triads[i].nt;
        rt_probe *p = rt_plan_add(plan, nt ? RT_PROBE_TRIAD_NT : RT_PROBE_TRIAD, T,
                                  nt ? RT_CALIB_LEVEL_STREAM : RT_CALIB_LEVEL_BW, "GB/s",
                                  "triad mem.%s%s (%s in all), %d thread%s", l->name,
                                  nt ? ", non-temporal stores" : "", ws_text, (int)T, rt_plural(T));
        p->elems = elems;
        p->v.level = triads[i].level;
        p->v.ws_bytes = elems * 12 * T;
        // DRAM: a sample is a few chunks of 2 MiB (3 arrays) at scattered places, and the
        // samples walk the buffer, so that each is short (rt_calib_measure_host) and each chunk
        // was last touched a whole buffer ago.
        if (triads[i].level == 0 && elems >= 4 * ((2 << 20) / 12))
            p->chunk_elems = (2 << 20) / 12 / step * step;
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

// Requests the AMX tile state from Linux (needed before the first tile instruction).
static bool rt_calib_amx_permit(char *why, size_t size) {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0)
        return true;
    snprintf(why, size, "skipped: the kernel refused the AMX tile state (arch_prctl: %s)",
             strerror(errno));
    return false;
#else
    snprintf(why, size, "skipped: AMX needs x86-64 Linux");
    return false;
#endif
}

static rt_status rt_calib_operands(rt_calib *c, rt_err *err) {
    c->amx_cfg = aligned_alloc(64, 64);
    c->amx_a = aligned_alloc(64, 2048);
    c->amx_b = aligned_alloc(64, 2048);
    c->amx_c = aligned_alloc(64, (size_t)4096 * (size_t)c->threads);
    c->bf16_ops = aligned_alloc(64, 128);
    if (!c->amx_cfg || !c->amx_a || !c->amx_b || !c->amx_c || !c->bf16_ops)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    // Tile configuration: palette 1, tiles 0-7 of 16 rows x 64 bytes.
    memset(c->amx_cfg, 0, 64);
    c->amx_cfg[0] = 1;
    for (int t = 0; t < 8; t++) {
        c->amx_cfg[16 + 2 * t] = 64;
        c->amx_cfg[48 + t] = 16;
    }
    // bf16 operands: 2^-7 in every element (0x3c00), small enough never to overflow.
    for (int i = 0; i < 1024; i++) {
        ((uint16_t *)(void *)c->amx_a)[i] = 0x3c00;
        ((uint16_t *)(void *)c->amx_b)[i] = 0x3c00;
    }
    for (int i = 0; i < 32; i++)
        c->bf16_ops[i] = 0x3c003c00;
    memset(c->amx_c, 0, (size_t)4096 * (size_t)c->threads);
    return RT_OK;
}

static void rt_calib_release(rt_calib *c) {
    rt_calib_free_buffers(c);
    free(c->amx_cfg);
    free(c->amx_a);
    free(c->amx_b);
    free(c->amx_c);
    free(c->bf16_ops);
}

static rt_status rt_calib_probes(rt_calib *c, const rt_device *base, rt_calib_result *out,
                                 double t_start, rt_err *err) {
    const rt_calib_opts *o = c->opts;
    char amx_note[512] = "";
    bool amx_ok = !c->k.amx || rt_calib_amx_permit(amx_note, sizeof amx_note);
    rt_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (o->host_probe)
        rt_calib_plan_host(c, base, plan);
    else
        rt_calib_plan(c, base, plan);
    int64_t host_elems = 0; // the host probe's one buffer: the largest of its triads
    for (int32_t i = 0; o->host_probe && i < plan->n; i++)
        if ((plan->p[i].kind == RT_PROBE_TRIAD || plan->p[i].kind == RT_PROBE_TRIAD_NT) &&
            plan->p[i].elems > host_elems)
            host_elems = plan->p[i].elems;
    rt_status st = RT_OK;
    for (int32_t i = 0; i < plan->n && st == RT_OK; i++) {
        rt_probe *p = &plan->p[i];
        rt_calib_event ev = {.index = i + 1,
                             .count = plan->n,
                             .probe = p->v.name,
                             .elapsed_s = rt_now_s() - t_start};
        if (o->progress)
            o->progress(o->progress_ctx, &ev);
        if (p->kind == RT_PROBE_AMX_BF16 && !amx_ok) {
            p->v.skipped = true;
            snprintf(p->v.note, sizeof p->v.note, "%s", amx_note);
        } else if (p->kind == RT_PROBE_FMA_F16 || p->kind == RT_PROBE_DOT_BF16 ||
                   p->kind == RT_PROBE_AMX_BF16) {
            st = rt_calib_trial(c, p, err);
        }
        bool buffers = p->kind == RT_PROBE_TRIAD || p->kind == RT_PROBE_TRIAD_NT ||
                       p->kind == RT_PROBE_LOAD || p->kind == RT_PROBE_STORE;
        if (st == RT_OK && !p->v.skipped && buffers && !(o->host_probe && c->buf_elems >= p->elems))
            st = rt_calib_buffers(c, host_elems > p->elems ? host_elems : p->elems, err);
        if (p->kind == RT_PROBE_FMA_LATENCY && !(c->clock_mhz > 0)) {
            p->v.skipped = true;
            snprintf(p->v.note, sizeof p->v.note, "skipped: no clock measured to count cycles");
        }
        if (st == RT_OK && !p->v.skipped)
            st = o->host_probe ? rt_calib_measure_host(c, p, err) : rt_calib_measure(c, p, err);
        if (st != RT_OK)
            break;
        if (p->kind == RT_PROBE_CLOCK && !p->v.skipped)
            c->clock_mhz = p->v.value;
        out->values[out->n_values++] = p->v;
        ev.value = &out->values[out->n_values - 1];
        ev.elapsed_s = rt_now_s() - t_start;
        if (o->progress)
            o->progress(o->progress_ctx, &ev);
    }
    free(plan);
    return st;
}

rt_status rt_calib_cpu_run(const rt_device *base, const rt_calib_opts *opts, rt_calib_result *out,
                           rt_err *err) {
    memset(out, 0, sizeof *out);
    if (base->devclass != RT_DEVCLASS_CPU)
        return rt_fail(err, RT_ERR_DEVICE, base->origin,
                       "rtcalib measures class cpu devices on this host (got class %s)",
                       rt_devclass_name(base->devclass));
    if (opts->repeats < 2 || opts->repeats > 256)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "repeats out of range (expected 2 to 256, got %d)", (int)opts->repeats);
    if (opts->threads < 0 || opts->threads > RT_CALIB_MAX_THREADS)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "threads out of range (expected 1 to %d, got %d)", RT_CALIB_MAX_THREADS,
                       (int)opts->threads);
    if (!(opts->max_spread >= 0.0))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "max spread must be >= 0 (got %g)",
                       opts->max_spread);
    double t_start = rt_now_s();
    cpu_set_t saved;
    bool have_mask = sched_getaffinity(0, sizeof saved, &saved) == 0;
    if (!have_mask) {
        CPU_ZERO(&saved);
        CPU_SET(0, &saved);
    }
    int32_t n_cpus = CPU_COUNT(&saved);
    rt_calib *c = calloc(1, sizeof *c);
    if (!c)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    c->opts = opts;
    c->threads = opts->threads;
    if (c->threads == 0)
        c->threads = base->units < n_cpus ? base->units : n_cpus;
    if (c->threads < 1)
        c->threads = 1;
    c->target_s = opts->quick ? 0.002 : opts->host_probe ? 0.0003 : 0.1;
    c->scalar = 0.5f;
    out->threads = c->threads;

    rt_arena *a = rt_arena_new(64 * 1024);
    rt_status st = a ? RT_OK : rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (st == RT_OK)
        st = rt_calib_build(a, opts->host_probe, &c->k, out->cpu_name, sizeof out->cpu_name, err);
    if (st == RT_OK)
        st = rt_calib_operands(c, err);
    bool pool = false;
    if (st == RT_OK && !opts->host_probe) { // the kernel pool: the launch and sync probes
        c->rpool = rt_cpu_pool_new(c->threads);
        if (!c->rpool)
            st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start the kernel thread pool");
    }
    if (st == RT_OK) {
        st = rt_pool_start(&c->pool, c->threads, &saved, err);
        pool = st == RT_OK;
    }
    if (st == RT_OK)
        st = rt_calib_probes(c, base, out, t_start, err);
    if (pool)
        rt_pool_stop(&c->pool);
    if (c->rpool)
        rt_cpu_pool_free(c->rpool);
    if (have_mask)
        sched_setaffinity(0, sizeof saved, &saved);
    rt_calib_release(c);
    free(c);
    rt_arena_free(a);
    out->seconds = rt_now_s() - t_start;
    return st;
}

// ---------------------------------------------------------------------------------------------
// Merging the measurements into a device
// ---------------------------------------------------------------------------------------------

// ORDER RT_DTYPE
static const char *const rt_calib_dtype_names[] = {"f32", "f16", "bf16", "f64", "i32", "i8"};
_Static_assert(sizeof rt_calib_dtype_names / sizeof rt_calib_dtype_names[0] == RT_DTYPE_COUNT,
               "ORDER RT_DTYPE");

// x rounded to `digits` significant decimal digits (measurements carry no more).
static double rt_round_sig(double x, int digits) {
    if (!(x > 0.0) || !isfinite(x))
        return x;
    double p = pow(10.0, digits - 1 - (int)floor(log10(x)));
    double r = round(x * p) / p;
    return r > 0.0 ? r : x;
}

// Appends key to the comma-separated list keys unless it is there (as a whole entry).
static void rt_add_key(char *keys, size_t size, const char *key) {
    size_t n = strlen(keys), k = strlen(key);
    for (const char *at = keys; (at = strstr(at, key)) != NULL; at += k)
        if ((at == keys || at[-1] == ' ') && (at[k] == ',' || at[k] == 0))
            return;
    snprintf(keys + n, size - n, "%s%s", n ? ", " : "", key);
}

#define RT_CALIB_OTHER " -- other values: "

// "measured: rtcalib DATE (keys) -- other values: OLD", where OLD drops an earlier rtcalib part.
static rt_status rt_calib_source(rt_device *dev, const char *date, const char *keys,
                                 const char **src, rt_err *err) {
    const char *old = *src ? *src : "";
    const char *other = strstr(old, RT_CALIB_OTHER);
    if (other)
        old = other + strlen(RT_CALIB_OTHER);
    else if (strncmp(old, "measured: rtcalib", 17) == 0)
        old = "";
    char text[1024];
    int n = snprintf(text, sizeof text, "measured: rtcalib %s (%s)%s%s", date, keys,
                     old[0] ? RT_CALIB_OTHER : "", old);
    if (n < 0 || (size_t)n >= 900) // the INI line limit, with room for the key
        snprintf(text, sizeof text, "measured: rtcalib %s (%s)", date, keys);
    const char *s = rt_hal_device_text(dev, text);
    if (!s)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device texts are too long (expected at most %d bytes in all)",
                       RT_DEVICE_TEXT_BYTES);
    *src = s;
    return RT_OK;
}

// A shared cache whose bandwidth at half its reported capacity is within RT_CALIB_CACHE_GAIN
// of DRAM's is not that large: a VM may report the host's whole last-level cache (480 MiB on
// the 2-core development VM, where the triad at 240 MiB runs at DRAM speed). The largest
// working set of its sweep still RT_CALIB_CACHE_GAIN x faster than DRAM is taken as half of
// its capacity, and the bandwidth there as its bandwidth. Levels whose sweep never beats DRAM
// by that much, or that have no DRAM bandwidth to compare with, keep what they had.
#define RT_CALIB_CACHE_GAIN 1.25

static void rt_calib_effective_capacity(rt_device *out, rt_calib_result *res,
                                        char (*keys_lvl)[256]) {
    double dram = out->level[0].bandwidth_gbps;
    for (int32_t i = 1; i < out->n_levels && dram > 0; i++) {
        rt_mem_level *l = &out->level[i];
        if (l->bandwidth_gbps >= RT_CALIB_CACHE_GAIN * dram)
            continue;
        rt_calib_value *best = NULL;
        for (int32_t j = 0; j < res->n_values; j++) {
            rt_calib_value *v = &res->values[j];
            if (v->target == RT_CALIB_SWEEP && !v->skipped && !v->refused && v->level == i &&
                v->value >= RT_CALIB_CACHE_GAIN * dram && 2 * v->curve_bytes < l->capacity_bytes &&
                (!best || v->curve_bytes > best->curve_bytes))
                best = v;
        }
        if (!best)
            continue;
        int64_t old_bytes = l->capacity_bytes;
        l->capacity_bytes = 2 * best->curve_bytes;
        l->bandwidth_gbps = rt_round_sig(best->value, 4);
        rt_add_key(keys_lvl[i], sizeof *keys_lvl, "bandwidth_gbps");
        rt_add_key(keys_lvl[i], sizeof *keys_lvl, "capacity_bytes");
        if (l->tile_capacity_bytes > 0) { // the same share of the smaller capacity
            l->tile_capacity_bytes = (int64_t)((double)l->tile_capacity_bytes *
                                               (double)l->capacity_bytes / (double)old_bytes) /
                                     64 * 64;
            if (l->tile_capacity_bytes < 64)
                l->tile_capacity_bytes = 64;
            rt_add_key(keys_lvl[i], sizeof *keys_lvl, "tile_capacity_bytes");
        }
        snprintf(best->note, sizeof best->note,
                 "[mem.%s] is %.4g GB/s up to here and DRAM's %.4g beyond: capacity_bytes = %lld "
                 "(twice this working set), bandwidth_gbps from this point",
                 l->name, best->value, dram, (long long)l->capacity_bytes);
    }
}

// The measured clock ([device] clock_mhz) and, with the 1-thread f32 FMA rate, the FMA pipes
// per core at the device's vector width ([device] teus_per_unit): the rate over clock x lanes x 2,
// rounded. The detected values are a policy (two pipes per core, the clock /proc/cpuinfo
// reports), wrong both ways on a Zen 4 VM: 2.6 GHz reported against 3.66 measured, and one
// 512-bit FMA per cycle, not two. The per-TEU entries that rt_calib_apply writes next divide by
// the pipes found here. Values too noisy to write are left to the main pass to refuse. A clock
// whose issue rate (units x pipes x lanes x 2 x clock) falls short of the measured f32 peak by
// more than a third was taken on a loaded core (38 MHz was seen beside a parallel test run): it
// is refused, with the FMA latency counted in its cycles, and the device keeps its own.
static void rt_calib_pipes(rt_calib_result *res, double max_spread, rt_device *out, char *keys_dev,
                           size_t keys_size) {
    rt_calib_value *clock = NULL, *f32 = NULL;
    double peak = 0;
    for (int32_t i = 0; i < res->n_values; i++) {
        rt_calib_value *v = &res->values[i];
        rt_err e;
        rt_err_clear(&e);
        if (v->skipped || !(v->value > 0) ||
            rt_calib_check_spread(v->name, &v->stats, max_spread, &e) != RT_OK)
            continue;
        if (v->target == RT_CALIB_CLOCK)
            clock = v;
        else if (v->target == RT_CALIB_INSN && strcmp(v->insn, "f32_fma") == 0)
            f32 = v;
        else if (v->target == RT_CALIB_PEAK && v->dtype == RT_DTYPE_F32 && v->value > peak)
            peak = v->value;
    }
    if (!clock)
        return;
    // Without a measured f32 peak (every repeat too spread on a loaded machine), the clock is
    // checked against the base device's: the INI must pass its own issue-rate check.
    if (peak <= 0.0)
        peak = out->peak_gflops[RT_DTYPE_F32];
    double ghz = rt_round_sig(clock->value, 4) / 1000.0;
    int32_t pipes = out->teus_per_unit;
    if (f32 && out->lanes >= 1) {
        double p = f32->value / (ghz * out->lanes * 2.0);
        pipes = p < 1.5 ? 1 : (int32_t)lround(p);
        if (f32->value * out->units > peak)
            peak = f32->value * out->units;
    }
    double issue = out->units * pipes * out->lanes * 2.0 * ghz;
    if (peak > 1.5 * issue) {
        for (int32_t i = 0; i < res->n_values; i++) {
            rt_calib_value *v = &res->values[i];
            if (v->target != RT_CALIB_CLOCK && v->target != RT_CALIB_FMA_LATENCY)
                continue;
            char note[sizeof v->note];
            snprintf(note, sizeof note,
                     "%s not written: %d cores x %d FMA pipes x %d lanes x 2 at %.4g MHz issue "
                     "%.4g GFLOP/s, below the f32 peak %.4g (a loaded core?)",
                     v->name, (int)out->units, (int)pipes, (int)out->lanes, ghz * 1000.0, issue,
                     peak);
            memcpy(v->note, note, sizeof note);
            v->refused = true;
        }
        return;
    }
    out->clock_mhz = ghz * 1000.0;
    rt_add_key(keys_dev, keys_size, "clock_mhz");
    if (!f32 || out->lanes < 1)
        return;
    out->teus_per_unit = pipes;
    rt_add_key(keys_dev, keys_size, "teus_per_unit");
}

rt_status rt_calib_apply(const rt_device *base, rt_calib_result *res, double max_spread,
                         const char *date, rt_device *out, rt_err *err) {
    rt_hal_device_copy(out, base);
    char keys_dev[256] = "", keys_comp[512] = "", keys_lvl[RT_MAX_MEM_LEVELS][256];
    int32_t n_curve[RT_MAX_MEM_LEVELS] = {0}, n_curve_refused[RT_MAX_MEM_LEVELS] = {0};
    rt_curve_point curve[RT_MAX_MEM_LEVELS][RT_MAX_CURVE_POINTS];
    memset(keys_lvl, 0, sizeof keys_lvl);
    rt_calib_pipes(res, max_spread, out, keys_dev, sizeof keys_dev);
    for (int32_t i = 0; i < res->n_values; i++) {
        rt_calib_value *v = &res->values[i];
        if (v->skipped || v->target == RT_CALIB_REPORT || v->refused)
            continue;
        rt_err e;
        rt_err_clear(&e);
        if (rt_calib_check_spread(v->name, &v->stats, max_spread, &e) != RT_OK) {
            v->refused = true;
            snprintf(v->note, sizeof v->note, "%s", e.msg);
            if (v->target == RT_CALIB_CURVE && v->level >= 0 && v->level < RT_MAX_MEM_LEVELS)
                n_curve_refused[v->level]++;
            continue;
        }
        bool level_ok = v->level >= 0 && v->level < out->n_levels;
        double x = rt_round_sig(v->value, 4);
        char key[80];
        switch (v->target) {
        case RT_CALIB_REPORT:
            break;
        case RT_CALIB_PEAK:
            out->peak_gflops[v->dtype] = x;
            snprintf(key, sizeof key, "%s_gflops", rt_calib_dtype_names[v->dtype]);
            rt_add_key(keys_comp, sizeof keys_comp, key);
            break;
        case RT_CALIB_MMA:
            out->mma_gflops[v->dtype] = x;
            if (out->mma_m == 0) { // AMX: 16x16 fp32 += 16x32 bf16 x 32x16 bf16
                out->mma_m = 16;
                out->mma_n = 16;
                out->mma_k = 32;
            }
            snprintf(key, sizeof key, "mma_%s_gflops", rt_calib_dtype_names[v->dtype]);
            rt_add_key(keys_comp, sizeof keys_comp, key);
            break;
        case RT_CALIB_INSN: {
            double per_teu = rt_round_sig(v->value / out->teus_per_unit, 4);
            int32_t j = 0;
            while (j < out->n_insn && strcmp(out->insn[j].name, v->insn) != 0)
                j++;
            if (j == out->n_insn && j >= RT_MAX_INSN_PEAKS) {
                v->refused = true;
                snprintf(v->note, sizeof v->note,
                         "not written: the device has %d instruction-class entries already",
                         RT_MAX_INSN_PEAKS);
                break;
            }
            if (j == out->n_insn) {
                snprintf(out->insn[j].name, sizeof out->insn[j].name, "%s", v->insn);
                out->n_insn++;
            }
            out->insn[j].gflops_per_teu = per_teu;
            snprintf(key, sizeof key, "%s_gflops_per_teu", v->insn);
            rt_add_key(keys_comp, sizeof keys_comp, key);
            break;
        }
        case RT_CALIB_LEVEL_BW:
            if (!level_ok)
                break;
            out->level[v->level].bandwidth_gbps = x;
            rt_add_key(keys_lvl[v->level], sizeof keys_lvl[0], "bandwidth_gbps");
            break;
        case RT_CALIB_LEVEL_STREAM:
            if (!level_ok)
                break;
            out->level[v->level].stream_gbps = x;
            rt_add_key(keys_lvl[v->level], sizeof keys_lvl[0], "stream_gbps");
            break;
        case RT_CALIB_CURVE: {
            if (!level_ok || n_curve[v->level] >= RT_MAX_CURVE_POINTS)
                break;
            // Keep the points in ascending bytes whatever the order they were measured in.
            rt_curve_point *c = curve[v->level];
            int32_t n = n_curve[v->level]++, at = n;
            while (at > 0 && c[at - 1].bytes > v->curve_bytes) {
                c[at] = c[at - 1];
                at--;
            }
            c[at].bytes = v->curve_bytes;
            c[at].gbps = x;
            break;
        }
        case RT_CALIB_SWEEP: // rt_calib_effective_capacity, once the levels are in
            break;
        case RT_CALIB_LAUNCH:
            out->launch_overhead_us = rt_round_sig(v->value, 3);
            rt_add_key(keys_dev, sizeof keys_dev, "launch_overhead_us");
            break;
        case RT_CALIB_SYNC:
            out->sync_overhead_us = rt_round_sig(v->value, 3);
            rt_add_key(keys_dev, sizeof keys_dev, "sync_overhead_us");
            break;
        case RT_CALIB_CLOCK: // rt_calib_pipes, before the per-TEU entries
            break;
        case RT_CALIB_FMA_LATENCY:
            out->fma_latency_cycles = v->value < 1.5 ? 1 : (int32_t)lround(v->value);
            rt_add_key(keys_comp, sizeof keys_comp, "fma_latency_cycles");
            break;
        }
    }
    // A curve replaces bandwidth_gbps at every size (rt_hal_level_gbps), so it is written whole
    // or not at all: at least 2 points, none of them refused.
    for (int32_t i = 0; i < out->n_levels; i++) {
        if (n_curve[i] == 0 || (n_curve_refused[i] == 0 && n_curve[i] >= 2))
            continue;
        for (int32_t j = 0; j < res->n_values; j++) {
            rt_calib_value *v = &res->values[j];
            if (v->target != RT_CALIB_CURVE || v->level != i || v->skipped || v->refused)
                continue;
            v->refused = true;
            char note[sizeof v->note];
            snprintf(note, sizeof note,
                     "%s not written: the curve of [mem.%s] needs all its points (%d of %d too "
                     "noisy)",
                     v->name, out->level[i].name, (int)n_curve_refused[i],
                     (int)(n_curve[i] + n_curve_refused[i]));
            memcpy(v->note, note, sizeof note);
        }
        n_curve[i] = 0;
    }
    for (int32_t i = 0; i < out->n_levels; i++) {
        int32_t n = 0;
        for (int32_t j = 0; j < n_curve[i]; j++) { // drop equal sizes: bytes must ascend
            if (n > 0 && curve[i][j].bytes == out->level[i].curve[n - 1].bytes)
                continue;
            out->level[i].curve[n++] = curve[i][j];
        }
        if (n > 0) {
            out->level[i].n_curve = n;
            rt_add_key(keys_lvl[i], sizeof keys_lvl[0], "bandwidth_curve_gbps");
        }
    }
    rt_calib_effective_capacity(out, res, keys_lvl);
    if (keys_dev[0])
        RT_TRY(rt_calib_source(out, date, keys_dev, &out->device_source, err));
    if (keys_comp[0])
        RT_TRY(rt_calib_source(out, date, keys_comp, &out->compute_source, err));
    for (int32_t i = 0; i < out->n_levels; i++) {
        if (keys_lvl[i][0])
            RT_TRY(rt_calib_source(out, date, keys_lvl[i], &out->level[i].source, err));
    }
    return rt_hal_check_device(out, err);
}
