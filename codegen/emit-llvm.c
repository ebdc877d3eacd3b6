// emit-llvm.c: builds a kernel IR (kir.h) as an LLVM 16 module with the C API, then optimizes
// it with a short new-pass-manager pipeline (rt_l_pipeline) for hal-cpu.c's JIT target.
// Every function carries "prefer-vector-width"="512" on AVX-512 targets (without it LLVM 16
// keeps to ymm registers). Phase bodies take their buffers as noalias parameters and are
// inlined into the args-array wrappers of the common ABI (emit.h). The micro-kernel is built
// directly in vector form: mr x nr/vl <vl x float> accumulators (vl the target's register width,
// from the device's lanes) carried by phis around the k loop, one B load per vl columns, a
// broadcast of A and llvm.fma per accumulator.
#include "emit.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <stdio.h>
#include <string.h>

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

static LLVMTypeRef rt_l_type(rt_lemit *l, rt_kir_type t) {
    switch (t) {
    case RT_KIR_I32:
        return l->i32;
    case RT_KIR_F32:
        return l->f32;
    case RT_KIR_F64:
        return l->f64;
    default:
        return l->i64;
    }
}

static LLVMValueRef rt_l_i64(rt_lemit *l, int64_t v) {
    return LLVMConstInt(l->i64, (unsigned long long)v, 1);
}

static LLVMValueRef rt_l_intrinsic(rt_lemit *l, const char *name, LLVMTypeRef t) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    return LLVMGetIntrinsicDeclaration(l->m, id, &t, 1);
}

static LLVMValueRef rt_l_call1(rt_lemit *l, const char *intr, LLVMTypeRef t, LLVMValueRef x) {
    LLVMValueRef f = rt_l_intrinsic(l, intr, t);
    return LLVMBuildCall2(l->b, LLVMGlobalGetValueType(f), f, &x, 1, "");
}

static LLVMValueRef rt_l_libm(rt_lemit *l, const char *name, LLVMTypeRef t, LLVMValueRef x) {
    LLVMValueRef f = LLVMGetNamedFunction(l->m, name);
    LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
    if (!f)
        f = LLVMAddFunction(l->m, name, ft);
    return LLVMBuildCall2(l->b, ft, f, &x, 1, "");
}

static LLVMValueRef rt_l_expr(rt_lemit *l, const rt_kir_expr *e);

static LLVMValueRef rt_l_fma(rt_lemit *l, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
    LLVMValueRef f = rt_l_intrinsic(l, "llvm.fma", l->f32);
    LLVMValueRef args[3] = {x, y, z};
    return LLVMBuildCall2(l->b, LLVMGlobalGetValueType(f), f, args, 3, "");
}

// expf without a libm call, so that the loop vectorizer keeps it in vector lanes (llvm.exp is
// scalarized to expf calls on the JIT target), in 14 vector operations:
//   x is clamped to [-87.6, 88.73] (NaN passes: the compares are false);
//   t = x log2e + M rounds n = rint(x log2e) into the low mantissa bits of t (M = 1.5 2^23 +
//   126), n = t - M, and r = x - n ln2 (two-part ln2 through FMA), |r| <= ln2/2;
//   2 e^r by a degree-6 minimax polynomial (relative error 2e-9 on [-ln2/2, ln2/2]);
//   2^(n-1) is the bits of t shifted left by 23: the low 9 bits of t's mantissa, n + 126, land
//   in the exponent field, for n in [-126, 128] (the factor 2 in the polynomial keeps 2^128
//   finite, and n = -126 gives the bits of 0).
// Within 1.05 ulp of the correctly rounded expf (measured over a third of all floats) from
// 2^-125.5 (x >= -86.98) up to the overflow to inf; smaller results are 0. That flushes the
// subnormals and the normals under 1.41 FLT_MIN, as the vector exps of oneDNN and XNNPACK and
// CUDA's __expf flush the subnormals: keeping them cost softmax 14% (three more operations).
// exp(0) = 1 exactly.
static LLVMValueRef rt_l_expf(rt_lemit *l, LLVMValueRef x) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef lo = LLVMConstReal(l->f32, -87.6), hi = LLVMConstReal(l->f32, 88.73);
    LLVMValueRef xc = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, hi, ""), hi, x, "");
    xc = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, xc, lo, ""), lo, xc, "");
    LLVMValueRef magic = LLVMConstReal(l->f32, 12582912.0 + 126.0);
    LLVMValueRef t = rt_l_fma(l, xc, LLVMConstReal(l->f32, 1.44269504088896341), magic);
    LLVMValueRef n = LLVMBuildFSub(b, t, magic, "");
    LLVMValueRef r = rt_l_fma(l, n, LLVMConstReal(l->f32, -0.693145751953125), xc);
    r = rt_l_fma(l, n, LLVMConstReal(l->f32, -1.428606765330187e-06), r);
    // 2 e^r = sum 2 c[i] r^i, c[0] = 1; the doubled coefficients are exact.
    static const double c[] = {0x1.0000008a2cc79p+0, 0x1.fffffc1d0323ep-2, 0x1.55541956736b7p-3,
                               0x1.5558224335334p-5, 0x1.12678773047e7p-7, 0x1.6ae73e3596140p-10};
    LLVMValueRef p = LLVMConstReal(l->f32, 2.0 * (double)(float)c[5]);
    for (int i = 4; i >= 0; i--)
        p = rt_l_fma(l, p, r, LLVMConstReal(l->f32, 2.0 * (double)(float)c[i]));
    p = rt_l_fma(l, p, r, LLVMConstReal(l->f32, 2.0));
    LLVMValueRef bits = LLVMBuildBitCast(b, t, l->i32, "");
    LLVMValueRef s =
        LLVMBuildBitCast(b, LLVMBuildShl(b, bits, LLVMConstInt(l->i32, 23, 0), ""), l->f32, "");
    return LLVMBuildFMul(b, p, s, "");
}

// erff without a libm call (erff is scalarized like expf), both branches computed and selected
// so the loop vectorizer keeps it in lanes. Minimax fits after N. Juffa: for |x| <= 475/512,
// erf(x) = x + x P(x^2); beyond, erf(x) = sign(x) (1 - exp(t Q(t))) with t = min(|x|, 4). erf
// rounds to 1 in f32 from 3.92 on, and the clamp keeps inf from reaching the polynomial and
// exp(t Q(t)) (about -t^2) out of the subnormal range: a clamp at 10 left every |x| > 9.3
// computing on subnormals, several times slower on x86 (a GELU over a GEMM's outputs has
// many such lanes). About 1 ulp (max abs error 6e-8) against erf in double; NaN propagates
// through the small branch.
static LLVMValueRef rt_l_erff(rt_lemit *l, LLVMValueRef x) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef ax = rt_l_call1(l, "llvm.fabs", l->f32, x), cap = LLVMConstReal(l->f32, 4.0);
    LLVMValueRef t = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, ax, cap, ""), cap, ax, "");
    LLVMValueRef r =
        rt_l_fma(l, LLVMConstReal(l->f32, -1.72853470e-5), t, LLVMConstReal(l->f32, 3.83197126e-4));
    LLVMValueRef u =
        rt_l_fma(l, LLVMConstReal(l->f32, -3.88396438e-3), t, LLVMConstReal(l->f32, 2.42546219e-2));
    r = rt_l_fma(l, r, LLVMBuildFMul(b, t, t, ""), u);
    static const double cl[] = {-1.06777877e-1, -6.34846687e-1, -1.28717512e-1};
    for (int i = 0; i < 3; i++)
        r = rt_l_fma(l, r, t, LLVMConstReal(l->f32, cl[i]));
    r = rt_l_fma(l, r, t, LLVMBuildFNeg(b, t, ""));
    r = LLVMBuildFSub(b, LLVMConstReal(l->f32, 1.0), rt_l_expf(l, r), "");
    LLVMValueRef sgn[2] = {r, x};
    LLVMValueRef cs = rt_l_intrinsic(l, "llvm.copysign", l->f32);
    r = LLVMBuildCall2(b, LLVMGlobalGetValueType(cs), cs, sgn, 2, "");
    static const double cs_[] = {4.99119423e-3, -2.67681349e-2, 1.12819925e-1, -3.76125336e-1,
                                 1.28379166e-1};
    LLVMValueRef s = LLVMBuildFMul(b, x, x, "");
    LLVMValueRef q = LLVMConstReal(l->f32, -5.96761703e-4);
    for (int i = 0; i < 5; i++)
        q = rt_l_fma(l, q, s, LLVMConstReal(l->f32, cs_[i]));
    q = rt_l_fma(l, q, x, x);
    LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, ax, LLVMConstReal(l->f32, 0.927734375), "");
    return LLVMBuildSelect(b, big, r, q, "");
}

static LLVMValueRef rt_l_exp(rt_lemit *l, LLVMTypeRef t, LLVMValueRef x) {
    return t == l->f32 ? rt_l_expf(l, x) : rt_l_call1(l, "llvm.exp", t, x);
}

static LLVMValueRef rt_l_truth(rt_lemit *l, const rt_kir_expr *e) {
    return LLVMBuildICmp(l->b, LLVMIntNE, rt_l_expr(l, e), rt_l_i64(l, 0), "");
}

static LLVMValueRef rt_l_addr(rt_lemit *l, int32_t buf, LLVMValueRef index) {
    LLVMTypeRef t = rt_l_type(l, l->k->bufs[buf].type);
    return LLVMBuildInBoundsGEP2(l->b, t, l->bufs[buf], &index, 1, "");
}

// Floor division / modulo of signed integers (op-spec semantics), divisor 0 gives 0.
static LLVMValueRef rt_l_floor(rt_lemit *l, bool mod, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef zero = rt_l_i64(l, 0);
    LLVMValueRef y0 = LLVMBuildICmp(b, LLVMIntEQ, y, zero, "");
    LLVMValueRef ys = LLVMBuildSelect(b, y0, rt_l_i64(l, 1), y, "");
    LLVMValueRef q = LLVMBuildSDiv(b, x, ys, "");
    LLVMValueRef r = LLVMBuildSRem(b, x, ys, "");
    LLVMValueRef rnz = LLVMBuildICmp(b, LLVMIntNE, r, zero, "");
    LLVMValueRef sx = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildXor(b, r, ys, ""), zero, "");
    LLVMValueRef adj = LLVMBuildAnd(b, rnz, sx, "");
    LLVMValueRef out;
    if (mod)
        out = LLVMBuildSelect(b, adj, LLVMBuildAdd(b, r, ys, ""), r, "");
    else
        out = LLVMBuildSub(b, q, LLVMBuildZExt(b, adj, l->i64, ""), "");
    return LLVMBuildSelect(b, y0, zero, out, "");
}

// z + x*y is built as llvm.fmuladd, which LLVM fuses where the target has FMA: what C compilers
// do with FP_CONTRACT ON (so the C emitter's kernels get it too), and one instruction instead
// of two per point of a window reduction's multiply-accumulate. The index (0 or 1) of the
// product among the operands of a float addition e, or -1.
static int rt_l_fused_mul(const rt_kir_expr *e) {
    for (int i = 0; i < 2 && e->bop == RT_KIR_ADD && rt_kir_type_is_float(e->type); i++)
        if (e->args[i]->kind == RT_KIR_E_BIN && e->args[i]->bop == RT_KIR_MUL)
            return i;
    return -1;
}

static LLVMValueRef rt_l_fmuladd(rt_lemit *l, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
    LLVMValueRef f = rt_l_intrinsic(l, "llvm.fmuladd", LLVMTypeOf(x));
    LLVMValueRef args[3] = {x, y, z};
    return LLVMBuildCall2(l->b, LLVMGlobalGetValueType(f), f, args, 3, "");
}

static bool rt_l_is_farith(rt_kir_bop op) {
    return op <= RT_KIR_DIV || op == RT_KIR_MIN || op == RT_KIR_MAX;
}

// x op y for a float arithmetic op (rt_l_is_farith) on scalars or vectors alike,
// so that rt_l_bin and the streaming loops' rt_l_wide build the same operations.
static LLVMValueRef rt_l_farith(rt_lemit *l, rt_kir_bop op, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = l->b;
    switch (op) {
    case RT_KIR_ADD:
        return LLVMBuildFAdd(b, x, y, "");
    case RT_KIR_SUB:
        return LLVMBuildFSub(b, x, y, "");
    case RT_KIR_MUL:
        return LLVMBuildFMul(b, x, y, "");
    case RT_KIR_DIV:
        return LLVMBuildFDiv(b, x, y, "");
    default: {
        LLVMValueRef f =
            rt_l_intrinsic(l, op == RT_KIR_MAX ? "llvm.maxnum" : "llvm.minnum", LLVMTypeOf(x));
        LLVMValueRef args[2] = {x, y};
        return LLVMBuildCall2(b, LLVMGlobalGetValueType(f), f, args, 2, "");
    }
    }
}

static LLVMValueRef rt_l_bin(rt_lemit *l, const rt_kir_expr *e) {
    LLVMBuilderRef b = l->b;
    const rt_kir_expr *ex = e->args[0];
    int fm = rt_l_fused_mul(e);
    if (fm >= 0) {
        const rt_kir_expr *m = e->args[fm];
        LLVMValueRef x = rt_l_expr(l, m->args[0]); // in order: the module text is deterministic
        LLVMValueRef y = rt_l_expr(l, m->args[1]);
        return rt_l_fmuladd(l, x, y, rt_l_expr(l, e->args[1 - fm]));
    }
    LLVMValueRef x = rt_l_expr(l, ex), y = rt_l_expr(l, e->args[1]);
    bool fl = rt_kir_type_is_float(ex->type);
    if (fl && rt_l_is_farith(e->bop))
        return rt_l_farith(l, e->bop, x, y);
    static const LLVMIntPredicate ip[] = {LLVMIntSLT, LLVMIntSLE, LLVMIntSGT,
                                          LLVMIntSGE, LLVMIntEQ,  LLVMIntNE};
    static const LLVMRealPredicate fp[] = {LLVMRealOLT, LLVMRealOLE, LLVMRealOGT,
                                           LLVMRealOGE, LLVMRealOEQ, LLVMRealUNE};
    switch (e->bop) {
    case RT_KIR_ADD:
        return LLVMBuildNSWAdd(b, x, y, "");
    case RT_KIR_SUB:
        return LLVMBuildNSWSub(b, x, y, "");
    case RT_KIR_MUL:
        return LLVMBuildNSWMul(b, x, y, "");
    case RT_KIR_DIV:
        return rt_l_floor(l, false, x, y);
    case RT_KIR_MOD:
        return fl ? LLVMBuildFRem(b, x, y, "") : rt_l_floor(l, true, x, y);
    case RT_KIR_MIN:
    case RT_KIR_MAX: {
        LLVMValueRef c = LLVMBuildICmp(b, e->bop == RT_KIR_MAX ? LLVMIntSGT : LLVMIntSLT, x, y, "");
        return LLVMBuildSelect(b, c, x, y, "");
    }
    case RT_KIR_AND:
    case RT_KIR_OR: {
        LLVMValueRef zx = LLVMBuildICmp(b, LLVMIntNE, x, rt_l_i64(l, 0), "");
        LLVMValueRef zy = LLVMBuildICmp(b, LLVMIntNE, y, rt_l_i64(l, 0), "");
        LLVMValueRef r =
            e->bop == RT_KIR_AND ? LLVMBuildAnd(b, zx, zy, "") : LLVMBuildOr(b, zx, zy, "");
        return LLVMBuildZExt(b, r, l->i64, "");
    }
    default: {
        int i = (int)e->bop - (int)RT_KIR_LT;
        LLVMValueRef c = fl ? LLVMBuildFCmp(b, fp[i], x, y, "") : LLVMBuildICmp(b, ip[i], x, y, "");
        return LLVMBuildZExt(b, c, l->i64, "");
    }
    }
}

static LLVMValueRef rt_l_cast(rt_lemit *l, rt_kir_type to, rt_kir_type from, LLVMValueRef x) {
    LLVMTypeRef t = rt_l_type(l, to);
    bool ff = rt_kir_type_is_float(from), tf = rt_kir_type_is_float(to);
    if (ff && tf)
        return to == RT_KIR_F64 ? LLVMBuildFPExt(l->b, x, t, "") : LLVMBuildFPTrunc(l->b, x, t, "");
    if (!ff && tf)
        return LLVMBuildSIToFP(l->b, x, t, "");
    if (ff && !tf)
        return LLVMBuildFPToSI(l->b, x, t, "");
    return to == RT_KIR_I64 ? LLVMBuildSExt(l->b, x, t, "") : LLVMBuildTrunc(l->b, x, t, "");
}

static LLVMValueRef rt_l_expr(rt_lemit *l, const rt_kir_expr *e) {
    LLVMBuilderRef b = l->b;
    LLVMTypeRef t = rt_l_type(l, e->type);
    bool f32 = e->type == RT_KIR_F32;
    switch (e->kind) {
    case RT_KIR_E_INT:
        return rt_l_i64(l, e->ival);
    case RT_KIR_E_FLT:
        return LLVMConstReal(t, e->fval);
    case RT_KIR_E_VAR:
    case RT_KIR_E_FVAR:
        return LLVMBuildLoad2(b, t, l->vars[e->var], "");
    case RT_KIR_E_LOAD:
        return LLVMBuildLoad2(b, t, rt_l_addr(l, e->buf, rt_l_expr(l, e->args[0])), "");
    case RT_KIR_E_NEG: {
        LLVMValueRef x = rt_l_expr(l, e->args[0]);
        return rt_kir_type_is_float(e->type) ? LLVMBuildFNeg(b, x, "") : LLVMBuildNeg(b, x, "");
    }
    case RT_KIR_E_BIN:
        return rt_l_bin(l, e);
    case RT_KIR_E_SELECT: {
        LLVMValueRef c = rt_l_truth(l, e->args[0]);
        LLVMValueRef x = rt_l_expr(l, e->args[1]), y = rt_l_expr(l, e->args[2]);
        return LLVMBuildSelect(b, c, x, y, "");
    }
    case RT_KIR_E_CAST:
        return rt_l_cast(l, e->type, e->args[0]->type, rt_l_expr(l, e->args[0]));
    case RT_KIR_E_CALL: {
        LLVMValueRef x = rt_l_expr(l, e->args[0]);
        LLVMValueRef one = LLVMConstReal(t, 1.0);
        switch (e->fn) {
        case RT_FN_EXP:
            return rt_l_exp(l, t, x);
        case RT_FN_LOG:
            return rt_l_call1(l, "llvm.log", t, x);
        case RT_FN_SQRT:
            return rt_l_call1(l, "llvm.sqrt", t, x);
        case RT_FN_ABS:
            return rt_l_call1(l, "llvm.fabs", t, x);
        case RT_FN_RSQRT:
            return LLVMBuildFDiv(b, one, rt_l_call1(l, "llvm.sqrt", t, x), "");
        case RT_FN_TANH:
            return rt_l_libm(l, f32 ? "tanhf" : "tanh", t, x);
        case RT_FN_ERF:
            return f32 ? rt_l_erff(l, x) : rt_l_libm(l, "erf", t, x);
        case RT_FN_SIGMOID: {
            LLVMValueRef ex = rt_l_exp(l, t, LLVMBuildFNeg(b, x, ""));
            return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, ex, ""), "");
        }
        default:
            return x;
        }
    }
    default:
        return rt_l_i64(l, 0);
    }
}

static LLVMBasicBlockRef rt_l_block(rt_lemit *l, const char *name) {
    return LLVMAppendBasicBlockInContext(l->ctx, l->fn, name);
}

// Marks the loop ending in br for vectorization and, with interleave > 0, asks for that many
// vectors per iteration (the pipeline interleaves only where a loop asks: rt_emit_llvm).
static void rt_l_loop_hint(rt_lemit *l, LLVMValueRef br, int32_t interleave) {
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(l->ctx, NULL, 0);
    LLVMMetadataRef vec[2] = {LLVMMDStringInContext2(l->ctx, "llvm.loop.vectorize.enable", 26),
                              LLVMValueAsMetadata(LLVMConstInt(l->i1, 1, 0))};
    LLVMMetadataRef il[2] = {LLVMMDStringInContext2(l->ctx, "llvm.loop.interleave.count", 26),
                             LLVMValueAsMetadata(LLVMConstInt(l->i32, (unsigned)interleave, 0))};
    LLVMMetadataRef ops[3] = {tmp, LLVMMDNodeInContext2(l->ctx, vec, 2),
                              LLVMMDNodeInContext2(l->ctx, il, 2)};
    LLVMMetadataRef loop = LLVMMDNodeInContext2(l->ctx, ops, interleave > 0 ? 3 : 2);
    LLVMMetadataReplaceAllUsesWith(tmp, loop);
    LLVMSetMetadata(br, l->loop_kind, LLVMMetadataAsValue(l->ctx, loop));
}

// Vectors per iteration of a vector loop that reduces into a float var (acc = acc op x: a max,
// a sum): one accumulator is a chain of dependent vector ops at the op's latency (softmax's row
// max and sum, 64 vectors each, took 128 and 192 cycles of a 880-cycle row on a Zen 5 core);
// this many independent accumulators cover a 2-4 cycle latency on two vector pipes.
#define RT_L_REDUCE_INTERLEAVE 4

// Does the loop body blk carry a float var from one iteration to the next (acc = acc op x, acc
// not set afresh before it in blk)? Not a nested loop's; not a window's accumulators, which
// each iteration starts from 0 (rt_lower_window).
static bool rt_l_reduces(const rt_kir_block *blk) {
    int32_t fresh[64], n_fresh = 0;
    for (int32_t i = 0; i < blk->n; i++) {
        const rt_kir_node *n = blk->nodes[i];
        const rt_kir_expr *v = n->value;
        if (n->kind != RT_KIR_N_FSET || !v)
            continue;
        bool carried = v->kind == RT_KIR_E_BIN && v->args[0]->kind == RT_KIR_E_FVAR &&
                       v->args[0]->var == n->var;
        bool set = false;
        for (int32_t j = 0; j < n_fresh; j++)
            set = set || fresh[j] == n->var;
        if (carried && !set)
            return true;
        if (!carried && !set && n_fresh < 64)
            fresh[n_fresh++] = n->var;
        else if (!carried && !set)
            return false; // too many to track: no interleave, the safe choice
    }
    return false;
}

// for (var = lo; var < hi; var++) body(): hi is evaluated once.
static void rt_l_counted(rt_lemit *l, LLVMValueRef var, LLVMValueRef lo, LLVMValueRef hi,
                         bool vector_hint, const rt_kir_block *body,
                         void (*emit_body)(rt_lemit *l, const rt_kir_block *body)) {
    LLVMBuilderRef b = l->b;
    LLVMBuildStore(b, lo, var);
    LLVMBasicBlockRef head = rt_l_block(l, "loop"), blk = rt_l_block(l, "body"),
                      done = rt_l_block(l, "done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef i = LLVMBuildLoad2(b, l->i64, var, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, hi, ""), blk, done);
    LLVMPositionBuilderAtEnd(b, blk);
    emit_body(l, body);
    LLVMValueRef i2 = LLVMBuildLoad2(b, l->i64, var, "");
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, i2, rt_l_i64(l, 1), ""), var);
    LLVMValueRef br = LLVMBuildBr(b, head);
    if (vector_hint)
        rt_l_loop_hint(l, br, rt_l_reduces(body) ? RT_L_REDUCE_INTERLEAVE : 0);
    LLVMPositionBuilderAtEnd(b, done);
}

static void rt_l_nodes(rt_lemit *l, const rt_kir_block *blk);

// x in all lanes of a vector of n floats.
static LLVMValueRef rt_l_splat_n(rt_lemit *l, LLVMValueRef x, unsigned n) {
    LLVMBuilderRef b = l->b;
    LLVMTypeRef vt = LLVMVectorType(l->f32, n);
    LLVMValueRef ins =
        LLVMBuildInsertElement(b, LLVMGetUndef(vt), x, LLVMConstInt(l->i32, 0, 0), "");
    return LLVMBuildShuffleVector(b, ins, LLVMGetUndef(vt),
                                  LLVMConstNull(LLVMVectorType(l->i32, n)), "");
}

// x in all 16 lanes.
static LLVMValueRef rt_l_splat(rt_lemit *l, LLVMValueRef x) {
    return rt_l_splat_n(l, x, 16);
}

// A non-temporal store of v at p, aligned to align bytes (the phase ends with a fence,
// rt_l_has_stream).
static void rt_l_store_nt(rt_lemit *l, LLVMValueRef v, LLVMValueRef p, unsigned align) {
    LLVMValueRef st = LLVMBuildStore(l->b, v, p);
    LLVMSetAlignment(st, align);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(l->i32, 1, 0));
    LLVMSetMetadata(st, LLVMGetMDKindIDInContext(l->ctx, "nontemporal", 11),
                    LLVMMetadataAsValue(l->ctx, LLVMMDNodeInContext2(l->ctx, &one, 1)));
}

// Prefetch distance of the micro-kernel's B stream in elements (1 KiB).
#define RT_UK_PREFETCH_ELEMS 256

// llvm.prefetch of element idx of an array of type t at base (a data prefetch; write 0 or 1,
// locality 0-3). A plain GEP, not inbounds: a hint may point past the array and never faults.
static void rt_l_prefetch(rt_lemit *l, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef idx,
                          int write, int locality) {
    LLVMValueRef pf = rt_l_intrinsic(l, "llvm.prefetch", l->ptr);
    LLVMValueRef args[4] = {LLVMBuildGEP2(l->b, t, base, &idx, 1, ""),
                            LLVMConstInt(l->i32, (unsigned long long)write, 0),
                            LLVMConstInt(l->i32, (unsigned long long)locality, 0),
                            LLVMConstInt(l->i32, 1, 0)};
    LLVMBuildCall2(l->b, LLVMGlobalGetValueType(pf), pf, args, 4, "");
}

// Prefetch for writing of an mr x nr tile at buf[off + i*ld + j] (every 64-byte line of its
// rows: one hint per 16 floats and one at the row's end), so that its misses overlap the
// micro-kernel's FMAs instead of stalling its stores.
static void rt_l_pf_tile(rt_lemit *l, int32_t buf, LLVMValueRef off, LLVMValueRef ld, int32_t mr,
                         int32_t nr) {
    LLVMTypeRef t = rt_l_type(l, l->k->bufs[buf].type);
    int32_t lines = nr / 16;
    for (int32_t i = 0; i < mr; i++)
        for (int32_t j = 0; j <= lines; j++) {
            int64_t col = j < lines ? 16 * (int64_t)j : nr - 1;
            LLVMValueRef at = LLVMBuildAdd(l->b, LLVMBuildMul(l->b, rt_l_i64(l, i), ld, ""),
                                           rt_l_i64(l, col), "");
            LLVMValueRef idx = LLVMBuildAdd(l->b, off, at, "");
            rt_l_prefetch(l, t, l->bufs[buf], idx, 1, 3);
        }
}

// C's row stride of micro-kernel u: its constant ldc, or the run-time one (ldc_rt).
static LLVMValueRef rt_l_uk_ldc(rt_lemit *l, const rt_kir_ukernel *u) {
    return u->ldc_rt ? rt_l_expr(l, u->ldc_rt) : rt_l_i64(l, u->ldc);
}

// One row ii of a micro-kernel epilogue (kir.h): for j < hi, marked for vectorization, the
// element's final value ((accumulate ? C : 0) + the spilled accumulator) and coordinates are
// bound and the epilogue block runs.
static void rt_l_epi_row(rt_lemit *l, const rt_kir_ukernel *u, LLVMValueRef ii, LLVMValueRef hi,
                         LLVMValueRef c_off, LLVMValueRef accum, LLVMValueRef row0,
                         LLVMValueRef col0, int32_t interleave) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef jv = l->uk_j;
    LLVMBuildStore(b, rt_l_i64(l, 0), jv);
    LLVMBasicBlockRef jh = rt_l_block(l, "epi.j"), jb = rt_l_block(l, "epi.jb"),
                      done = rt_l_block(l, "epi.jdone");
    LLVMBuildBr(b, jh);
    LLVMPositionBuilderAtEnd(b, jh);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, l->i64, jv, ""), hi, ""), jb,
                    done);
    LLVMPositionBuilderAtEnd(b, jb);
    LLVMValueRef jj = LLVMBuildLoad2(b, l->i64, jv, "");
    LLVMValueRef tidx = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_i64(l, u->nr), ""), jj, "");
    LLVMValueRef tv =
        LLVMBuildLoad2(b, l->f32, LLVMBuildInBoundsGEP2(b, l->f32, l->uk_tmp, &tidx, 1, ""), "");
    LLVMValueRef cp = rt_l_addr(
        l, u->c_buf,
        LLVMBuildNSWAdd(b, c_off,
                        LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_uk_ldc(l, u), ""), jj, ""),
                        ""));
    LLVMValueRef f = tv;
    if (!LLVMIsAConstantInt(accum) || LLVMConstIntGetZExtValue(accum) != 0) {
        LLVMValueRef old = LLVMBuildLoad2(b, l->f32, cp, "");
        f = LLVMBuildFAdd(b, LLVMBuildSelect(b, accum, old, LLVMConstReal(l->f32, 0.0), ""), tv,
                          "");
    }
    LLVMBuildStore(b, f, l->vars[u->epi_acc]);
    if (u->epi_keep_c)
        LLVMBuildStore(b, f, cp);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, row0, ii, ""), l->vars[u->epi_row]);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, col0, jj, ""), l->vars[u->epi_col]);
    rt_l_nodes(l, u->epi);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, LLVMBuildLoad2(b, l->i64, jv, ""), rt_l_i64(l, 1), ""),
                   jv);
    rt_l_loop_hint(l, LLVMBuildBr(b, jh), interleave);
    LLVMPositionBuilderAtEnd(b, done);
}

// The fused epilogue of a micro-kernel tile: the accumulators go to the stack tile, then the
// rows. A full tile unrolls its rows and gives each row loop its constant trip count with one
// vector per vl columns interleaved, so that the loop vectorizer and the unroller leave
// straight-line code in which the rows' math (a branch-free erf or exp is a long dependent
// chain) overlaps; an edge tile loops over its valid rows and columns.
static void rt_l_uk_epilogue(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows,
                             const LLVMValueRef *acc, LLVMValueRef c_off, LLVMValueRef mv,
                             LLVMValueRef nvv, LLVMValueRef accum) {
    LLVMBuilderRef b = l->b;
    int32_t na = rows * (u->nr / u->vl);
    for (int32_t i = 0; i < na; i++) {
        LLVMValueRef idx = rt_l_i64(l, (int64_t)u->vl * i);
        LLVMValueRef st =
            LLVMBuildStore(b, acc[i], LLVMBuildInBoundsGEP2(b, l->f32, l->uk_tmp, &idx, 1, ""));
        LLVMSetAlignment(st, (unsigned)u->vl * 4);
    }
    LLVMValueRef row0 = rt_l_expr(l, u->epi_row0), col0 = rt_l_expr(l, u->epi_col0);
    LLVMValueRef full = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, mv, rt_l_i64(l, rows), ""),
                                     LLVMBuildICmp(b, LLVMIntEQ, nvv, rt_l_i64(l, u->nr), ""), "");
    LLVMBasicBlockRef bfull = rt_l_block(l, "epi.full"), bedge = rt_l_block(l, "epi.edge"),
                      done = rt_l_block(l, "epi.done");
    LLVMBuildCondBr(b, full, bfull, bedge);
    LLVMPositionBuilderAtEnd(b, bfull);
    for (int32_t i = 0; i < rows; i++)
        rt_l_epi_row(l, u, rt_l_i64(l, i), rt_l_i64(l, u->nr), c_off, accum, row0, col0,
                     u->nr / u->vl);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, bedge);
    LLVMValueRef iv = l->uk_i;
    LLVMBuildStore(b, rt_l_i64(l, 0), iv);
    LLVMBasicBlockRef ih = rt_l_block(l, "epi.i"), ib = rt_l_block(l, "epi.ib");
    LLVMBuildBr(b, ih);
    LLVMPositionBuilderAtEnd(b, ih);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, l->i64, iv, ""), mv, ""), ib,
                    done);
    LLVMPositionBuilderAtEnd(b, ib);
    rt_l_epi_row(l, u, LLVMBuildLoad2(b, l->i64, iv, ""), nvv, c_off, accum, row0, col0, 1);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, LLVMBuildLoad2(b, l->i64, iv, ""), rt_l_i64(l, 1), ""),
                   iv);
    LLVMBuildBr(b, ih);
    LLVMPositionBuilderAtEnd(b, done);
}

// Columns [lo, hi) of row ii of an edge tile, element by element from the stack buffer: added to
// C (accum) or stored in it.
static void rt_l_uk_edge_cols(rt_lemit *l, const rt_kir_ukernel *u, LLVMValueRef ii,
                              LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef c_off,
                              LLVMValueRef accum) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef jv = l->uk_j; // promoted by mem2reg
    LLVMBuildStore(b, lo, jv);
    LLVMBasicBlockRef jh = rt_l_block(l, "uk.j"), jb = rt_l_block(l, "uk.jb"),
                      jd = rt_l_block(l, "uk.jd");
    LLVMBuildBr(b, jh);
    LLVMPositionBuilderAtEnd(b, jh);
    LLVMValueRef j_ = LLVMBuildLoad2(b, l->i64, jv, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j_, hi, ""), jb, jd);
    LLVMPositionBuilderAtEnd(b, jb);
    LLVMValueRef jj = LLVMBuildLoad2(b, l->i64, jv, "");
    LLVMValueRef tidx = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_i64(l, u->nr), ""), jj, "");
    LLVMValueRef tv =
        LLVMBuildLoad2(b, l->f32, LLVMBuildInBoundsGEP2(b, l->f32, l->uk_tmp, &tidx, 1, ""), "");
    LLVMValueRef cidx = LLVMBuildNSWAdd(
        b, c_off, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_uk_ldc(l, u), ""), jj, ""), "");
    LLVMValueRef cp = rt_l_addr(l, u->c_buf, cidx);
    LLVMValueRef old = LLVMBuildLoad2(b, l->f32, cp, "");
    LLVMValueRef base = LLVMBuildSelect(b, accum, old, LLVMConstReal(l->f32, 0.0), "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, base, tv, ""), cp);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, jj, rt_l_i64(l, 1), ""), jv);
    LLVMBuildBr(b, jh);
    LLVMPositionBuilderAtEnd(b, jd);
}

// The lanes e < n (I64) of a vl-lane vector, as a <vl x i1> mask.
static LLVMValueRef rt_l_lanes_below(rt_lemit *l, LLVMValueRef n, int32_t vl) {
    LLVMBuilderRef b = l->b;
    LLVMTypeRef vi = LLVMVectorType(l->i64, (unsigned)vl);
    LLVMValueRef iota[64]; // a vector register's floats: 16 at most on the CPU targets
    for (int32_t e = 0; e < vl; e++)
        iota[e] = rt_l_i64(l, e);
    LLVMValueRef ins =
        LLVMBuildInsertElement(b, LLVMGetUndef(vi), n, LLVMConstInt(l->i32, 0, 0), "");
    LLVMValueRef splat = LLVMBuildShuffleVector(
        b, ins, LLVMGetUndef(vi), LLVMConstNull(LLVMVectorType(l->i32, (unsigned)vl)), "");
    return LLVMBuildICmp(b, LLVMIntSLT, LLVMConstVector(iota, (unsigned)vl), splat, "");
}

// llvm.masked.load (store false) or llvm.masked.store of vectors of type vt.
static LLVMValueRef rt_l_masked_fn(rt_lemit *l, bool store, LLVMTypeRef vt) {
    const char *name = store ? "llvm.masked.store" : "llvm.masked.load";
    LLVMTypeRef types[2] = {vt, l->ptr};
    return LLVMGetIntrinsicDeclaration(l->m, LLVMLookupIntrinsicID(name, strlen(name)), types, 2);
}

// A transposing pack (kir.h rt_kir_tpack) by blocks of 16 k steps: the 16 rows loaded with
// masks (k steps past kcur and rows past `rows` read nothing and give zeros), transposed by four
// rounds of interleaving rows r and r + 8 (lanes 0-7 of each into the even result, 8-15 into the
// odd one: four perfect shuffles are the transpose), scaled, and stored as 16 k-major rows (the
// block's valid ones where it is the last, short one).
static void rt_l_tpack(rt_lemit *l, const rt_kir_tpack *t) {
    LLVMBuilderRef b = l->b;
    LLVMTypeRef vt = LLVMVectorType(l->f32, 16);
    LLVMValueRef ld_fn = rt_l_masked_fn(l, false, vt);
    LLVMValueRef base = rt_l_expr(l, t->base), s_row = rt_l_expr(l, t->s_row);
    LLVMValueRef rows = rt_l_expr(l, t->rows), kcur = rt_l_expr(l, t->kcur);
    LLVMValueRef dst0 = rt_l_expr(l, t->dst0);
    LLVMValueRef lo[16], hi[16];
    for (int32_t e = 0; e < 16; e++) {
        lo[e] = LLVMConstInt(l->i32, (unsigned long long)(e / 2 + (e % 2) * 16), 0);
        hi[e] = LLVMConstInt(l->i32, (unsigned long long)(8 + e / 2 + (e % 2) * 16), 0);
    }
    LLVMValueRef mlo = LLVMConstVector(lo, 16), mhi = LLVMConstVector(hi, 16);
    LLVMValueRef align = LLVMConstInt(l->i32, 4, 0), zero = LLVMConstNull(vt);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef head = rt_l_block(l, "tp.loop"), body = rt_l_block(l, "tp.body"),
                      done = rt_l_block(l, "tp.done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef k0 = LLVMBuildPhi(b, l->i64, "k0");
    LLVMValueRef z = rt_l_i64(l, 0);
    LLVMAddIncoming(k0, &z, &pre, 1);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, k0, kcur, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef kn = LLVMBuildSub(b, kcur, k0, "");
    LLVMValueRef kmask = rt_l_lanes_below(l, kn, 16);
    LLVMValueRef v[16], w[16];
    // The next call's 16 rows' line of this block (kir.h): rows 2 KiB apart defeat the hardware
    // prefetchers (qkt 2-5% faster in same-process A/B turns). Hints never fault.
    LLVMValueRef src = rt_l_addr(l, t->src, LLVMBuildAdd(b, base, k0, ""));
    for (int32_t r = 16; r < 32; r++)
        rt_l_prefetch(l, l->f32, src, LLVMBuildMul(b, rt_l_i64(l, r), s_row, ""), 0, 3);
    for (int32_t r = 0; r < 16; r++) {
        LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, rt_l_i64(l, r), rows, "");
        LLVMValueRef m = LLVMBuildSelect(b, in, kmask, LLVMConstNull(LLVMTypeOf(kmask)), "");
        // Rows past `rows` load nothing: their address is row 0's.
        LLVMValueRef at = LLVMBuildAdd(
            b, base,
            LLVMBuildAdd(b,
                         LLVMBuildMul(b, LLVMBuildSelect(b, in, rt_l_i64(l, r), z, ""), s_row, ""),
                         k0, ""),
            "");
        LLVMValueRef args[4] = {rt_l_addr(l, t->src, at), align, m, zero};
        v[r] = LLVMBuildCall2(b, LLVMGlobalGetValueType(ld_fn), ld_fn, args, 4, "");
    }
    for (int32_t round = 0; round < 4; round++) {
        for (int32_t i = 0; i < 8; i++) {
            w[2 * i] = LLVMBuildShuffleVector(b, v[i], v[i + 8], mlo, "");
            w[2 * i + 1] = LLVMBuildShuffleVector(b, v[i], v[i + 8], mhi, "");
        }
        memcpy(v, w, sizeof v);
    }
    if (t->alpha != 1.0) {
        LLVMValueRef al = rt_l_splat_n(l, LLVMConstReal(l->f32, t->alpha), 16);
        for (int32_t c = 0; c < 16; c++)
            v[c] = LLVMBuildFMul(b, v[c], al, "");
    }
    // Column c of the block (k step k0 + c) goes to row k0 + c of the panel.
    LLVMValueRef ld = rt_l_i64(l, t->dst_ld);
    LLVMBasicBlockRef latch = rt_l_block(l, "tp.latch");
    for (int32_t c = 0; c < 16; c++) {
        LLVMBasicBlockRef bs = rt_l_block(l, "tp.st");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, rt_l_i64(l, c), kn, ""), bs, latch);
        LLVMPositionBuilderAtEnd(b, bs);
        LLVMValueRef at = LLVMBuildAdd(
            b, dst0, LLVMBuildMul(b, LLVMBuildAdd(b, k0, rt_l_i64(l, c), ""), ld, ""), "");
        LLVMSetAlignment(LLVMBuildStore(b, v[c], rt_l_addr(l, t->dst, at)), 4);
    }
    LLVMBuildBr(b, latch);
    LLVMPositionBuilderAtEnd(b, latch);
    LLVMValueRef k1 = LLVMBuildAdd(b, k0, rt_l_i64(l, 16), "");
    LLVMBuildBr(b, head);
    LLVMAddIncoming(k0, &k1, &latch, 1);
    LLVMPositionBuilderAtEnd(b, done);
}

// The edge tile with mask registers (kernel masked_edge): per row i < mv (unrolled), each vector
// with columns below nvv straight from its accumulator, its lanes past nvv masked off (C's old
// value loaded under the same mask where the call accumulates); branches to bend.
static void rt_l_uk_edge_masked(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows,
                                const LLVMValueRef *acc, LLVMValueRef c_off, LLVMValueRef mv,
                                LLVMValueRef nvv, LLVMValueRef accum, LLVMBasicBlockRef bend) {
    LLVMBuilderRef b = l->b;
    int32_t nv = u->nr / u->vl;
    LLVMTypeRef vt = LLVMVectorType(l->f32, (unsigned)u->vl);
    LLVMValueRef st_fn = rt_l_masked_fn(l, true, vt), ld_fn = rt_l_masked_fn(l, false, vt);
    LLVMValueRef mask[RT_KIR_UK_MAX_NV];
    for (int32_t j = 0; j < nv; j++) { // lane e of vector j: column vl j + e < nvv
        mask[j] =
            rt_l_lanes_below(l, LLVMBuildSub(b, nvv, rt_l_i64(l, (int64_t)u->vl * j), ""), u->vl);
    }
    LLVMValueRef align = LLVMConstInt(l->i32, 4, 0);
    LLVMValueRef ldc = rt_l_uk_ldc(l, u);
    for (int32_t i = 0; i < rows; i++) {
        LLVMBasicBlockRef brow = rt_l_block(l, "uk.mrow"), bnext = rt_l_block(l, "uk.mnext");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, rt_l_i64(l, i), mv, ""), brow, bend);
        LLVMPositionBuilderAtEnd(b, brow);
        for (int32_t j = 0; j < nv; j++) {
            LLVMValueRef at = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, rt_l_i64(l, i), ldc, ""),
                                              rt_l_i64(l, (int64_t)u->vl * j), "");
            LLVMValueRef p = rt_l_addr(l, u->c_buf, LLVMBuildNSWAdd(b, c_off, at, ""));
            LLVMValueRef la[4] = {p, align, mask[j], LLVMConstNull(vt)};
            LLVMValueRef old = LLVMBuildCall2(b, LLVMGlobalGetValueType(ld_fn), ld_fn, la, 4, "");
            LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildSelect(b, accum, old, LLVMConstNull(vt), ""),
                                           acc[i * nv + j], "");
            LLVMValueRef sa[4] = {v, p, align, mask[j]};
            LLVMBuildCall2(b, LLVMGlobalGetValueType(st_fn), st_fn, sa, 4, "");
        }
        LLVMBuildBr(b, bnext);
        LLVMPositionBuilderAtEnd(b, bnext);
    }
    LLVMBuildBr(b, bend);
}

// The micro-kernel's edge tile (rt_l_ukernel): from bpart, the accumulators spilled to the stack
// buffer, then per valid row (i < mv) each of its vectors whose vl columns are all below nvv
// with one vector load and store, and the columns of the vector that nvv cuts element by
// element; branches to bend. (Masked vector stores, vmaskmovps, were slower on Zen 3: 52.9 ns
// per 6 x 13 tile against 34.1 ns element by element, one core, this host.)
static void rt_l_uk_edge(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows,
                         const LLVMValueRef *acc, LLVMValueRef c_off, LLVMValueRef mv,
                         LLVMValueRef nvv, LLVMValueRef accum, LLVMBasicBlockRef bpart,
                         LLVMBasicBlockRef bend) {
    LLVMBuilderRef b = l->b;
    int32_t nv = u->nr / u->vl, na = rows * nv;
    LLVMTypeRef vt = LLVMVectorType(l->f32, (unsigned)u->vl);
    LLVMPositionBuilderAtEnd(b, bpart);
    if (l->k->masked_edge) {
        rt_l_uk_edge_masked(l, u, rows, acc, c_off, mv, nvv, accum, bend);
        return;
    }
    for (int32_t i = 0; i < na; i++) {
        LLVMValueRef idx = rt_l_i64(l, (int64_t)u->vl * i);
        LLVMValueRef st =
            LLVMBuildStore(b, acc[i], LLVMBuildInBoundsGEP2(b, l->f32, l->uk_tmp, &idx, 1, ""));
        LLVMSetAlignment(st, 4);
    }
    LLVMValueRef iv = l->uk_i; // promoted by mem2reg
    LLVMBuildStore(b, rt_l_i64(l, 0), iv);
    LLVMBasicBlockRef ih = rt_l_block(l, "uk.i"), ib = rt_l_block(l, "uk.ib");
    LLVMBuildBr(b, ih);
    LLVMPositionBuilderAtEnd(b, ih);
    LLVMValueRef i_ = LLVMBuildLoad2(b, l->i64, iv, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i_, mv, ""), ib, bend);
    LLVMPositionBuilderAtEnd(b, ib);
    LLVMValueRef ii = LLVMBuildLoad2(b, l->i64, iv, "");
    for (int32_t j = 0; j < nv; j++) {
        LLVMValueRef col = rt_l_i64(l, (int64_t)u->vl * j);
        LLVMValueRef end = rt_l_i64(l, (int64_t)u->vl * (j + 1));
        LLVMBasicBlockRef bv = rt_l_block(l, "uk.ev"), bs = rt_l_block(l, "uk.es"),
                          bj = rt_l_block(l, "uk.ej");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, end, nvv, ""), bv, bs);
        LLVMPositionBuilderAtEnd(b, bv);
        LLVMValueRef tidx =
            LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_i64(l, u->nr), ""), col, "");
        LLVMValueRef tv =
            LLVMBuildLoad2(b, vt, LLVMBuildInBoundsGEP2(b, l->f32, l->uk_tmp, &tidx, 1, ""), "");
        LLVMSetAlignment(tv, 4);
        LLVMValueRef cp = rt_l_addr(
            l, u->c_buf,
            LLVMBuildNSWAdd(
                b, c_off,
                LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_uk_ldc(l, u), ""), col, ""), ""));
        LLVMValueRef old = LLVMBuildLoad2(b, vt, cp, "");
        LLVMSetAlignment(old, 4);
        LLVMValueRef f =
            LLVMBuildFAdd(b, LLVMBuildSelect(b, accum, old, LLVMConstNull(vt), ""), tv, "");
        LLVMSetAlignment(LLVMBuildStore(b, f, cp), 4);
        LLVMBuildBr(b, bj);
        LLVMPositionBuilderAtEnd(b, bs);
        LLVMValueRef hi =
            LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, nvv, end, ""), nvv, end, "");
        rt_l_uk_edge_cols(l, u, ii, col, hi, c_off, accum);
        LLVMBuildBr(b, bj);
        LLVMPositionBuilderAtEnd(b, bj);
    }
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, ii, rt_l_i64(l, 1), ""), iv);
    LLVMBuildBr(b, ih);
}

// The micro-kernel's B vectors of k step kphi into bv[] (and the prefetch of its stream ahead
// where the call starts from a zero C).
static void rt_l_uk_bload(rt_lemit *l, const rt_kir_ukernel *u, LLVMTypeRef vt, LLVMValueRef ub,
                          LLVMValueRef kc, LLVMValueRef kphi, bool zero_c, LLVMValueRef *bv) {
    LLVMBuilderRef b = l->b;
    int32_t vl = u->vl, nv = u->nr / vl;
    // B's k step: nr floats, or b_sub floats in each of nr / b_sub sub-panels of kc steps; in
    // place (kir.h), row k of B's tensor, uk_bld apart.
    int32_t bw = u->b_sub > 0 && u->b_sub < u->nr ? u->b_sub : u->nr;
    LLVMValueRef kb = LLVMBuildNSWMul(b, kphi, l->uk_bld ? l->uk_bld : rt_l_i64(l, bw), "");
    for (int32_t j = 0; j < nv; j++) {
        int64_t sub = (int64_t)vl * j / bw, at = (int64_t)vl * j % bw;
        LLVMValueRef idx = LLVMBuildNSWAdd(b, kb, rt_l_i64(l, at), "");
        if (sub > 0)
            idx = LLVMBuildNSWAdd(b, idx, LLVMBuildNSWMul(b, kc, rt_l_i64(l, sub * bw), ""), "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(b, l->f32, ub, &idx, 1, "");
        bv[j] = LLVMBuildLoad2(b, vt, p, "b");
        LLVMSetAlignment(bv[j], 4);
    }
    // Software prefetch of the packed B stream 1 KiB ahead, every line of a k step: the kernel
    // streams the packed B block's panel from L2 while its A micro-panel stays in L1 (the row
    // panel loop is outside the column panel loop). Past the panel's end it touches the next
    // panel, which the next call reads, or stays a hint. Only where the call starts from a
    // zero C (one k block): where it adds to C, C's tile comes in from L3 or DRAM at every call
    // and the prefetches slowed the k loop. Measured on a Zen 5 core, alternating runs: without
    // them 4096^3 (4 k blocks) ran 2-3% faster at 1 and 2 threads and 2048^3 (3) 3% at 1,
    // 512x1024x4096 and 128x1000x4032 (4) alike; with them 1024^3 (1 k block) 1-2% faster.
    if (zero_c && !l->uk_bld) // (B in place: its rows are L1-resident, rentry_b_rows_fit)
        // One per 64-byte line of the step; with sub-panels, one per sub-panel's stream.
        for (int32_t j = 0; j < (bw == u->nr ? (u->nr + 15) / 16 : u->nr / bw); j++) {
            LLVMValueRef at = LLVMBuildAdd(b, kb, rt_l_i64(l, RT_UK_PREFETCH_ELEMS), "");
            at = bw == u->nr
                     ? LLVMBuildAdd(b, at, rt_l_i64(l, 16 * j), "")
                     : LLVMBuildAdd(b, at, LLVMBuildNSWMul(b, kc, rt_l_i64(l, bw * j), ""), "");
            rt_l_prefetch(l, l->f32, ub, at, 0, 3);
        }
}

// One k step (k) of a micro-kernel tile of `rows` rows into accumulators acc (rows x nv):
// B's vectors, then per row A's element broadcast and FMAs; the results in next.
static void rt_l_uk_step(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows, LLVMTypeRef vt,
                         LLVMValueRef ua, const LLVMValueRef *arow, LLVMValueRef ub,
                         LLVMValueRef kc, LLVMValueRef k, bool zero_c, const LLVMValueRef *acc,
                         LLVMValueRef *next) {
    LLVMBuilderRef b = l->b;
    int32_t nv = u->nr / u->vl;
    LLVMValueRef fma = rt_l_intrinsic(l, "llvm.fma", vt);
    LLVMTypeRef fma_t = LLVMGlobalGetValueType(fma);
    LLVMValueRef bv[RT_KIR_UK_MAX_NV];
    rt_l_uk_bload(l, u, vt, ub, kc, k, zero_c, bv);
    LLVMValueRef ka = LLVMBuildNSWMul(b, k, rt_l_i64(l, u->mr), "");
    if (l->uk_apf) { // the next rows' lines: row k mod rows at column k, into L2 (kir.h)
        LLVMValueRef r = LLVMBuildMul(b, LLVMBuildURem(b, k, rt_l_i64(l, rows), ""), l->uk_ald, "");
        rt_l_prefetch(l, l->f32, ua, LLVMBuildAdd(b, LLVMBuildAdd(b, l->uk_apf, r, ""), k, ""), 0,
                      2);
    }
    for (int32_t i = 0; i < rows; i++) {
        LLVMValueRef idx = rt_kir_uk_a_in_place(u) ? LLVMBuildNSWAdd(b, arow[i], k, "")
                                                   : LLVMBuildNSWAdd(b, ka, rt_l_i64(l, i), "");
        LLVMValueRef av =
            LLVMBuildLoad2(b, l->f32, LLVMBuildInBoundsGEP2(b, l->f32, ua, &idx, 1, ""), "a");
        LLVMValueRef splat = rt_l_splat_n(l, av, (unsigned)u->vl);
        for (int32_t j = 0; j < nv; j++) {
            LLVMValueRef args[3] = {splat, bv[j], acc[i * nv + j]};
            next[i * nv + j] = LLVMBuildCall2(b, fma_t, fma, args, 3, "");
        }
    }
}

// A k loop over [k0, kc) in steps of `sets` (whole steps only: kphi + sets <= kc), each step
// s of an iteration into accumulator set s (acc: sets x na, updated in place); leaves the
// builder after the loop and returns the k it stopped at.
static LLVMValueRef rt_l_uk_kloop(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows, int32_t sets,
                                  LLVMTypeRef vt, LLVMValueRef ua, const LLVMValueRef *arow,
                                  LLVMValueRef ub, LLVMValueRef kc, LLVMValueRef k0, bool zero_c,
                                  LLVMValueRef *acc) {
    LLVMBuilderRef b = l->b;
    int32_t na = rows * (u->nr / u->vl), nt = na * sets;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef head = rt_l_block(l, "uk.loop"), body = rt_l_block(l, "uk.body"),
                      done = rt_l_block(l, "uk.done");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef kphi = LLVMBuildPhi(b, l->i64, "k");
    LLVMValueRef phi[RT_KIR_UK_MAX_ACC] = {0}, next[RT_KIR_UK_MAX_ACC];
    for (int32_t i = 0; i < nt; i++) {
        phi[i] = LLVMBuildPhi(b, vt, "acc");
        LLVMAddIncoming(phi[i], &acc[i], &pre, 1);
    }
    LLVMAddIncoming(kphi, &k0, &pre, 1);
    LLVMValueRef more =
        sets == 1
            ? LLVMBuildICmp(b, LLVMIntSLT, kphi, kc, "")
            : LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildNSWAdd(b, kphi, rt_l_i64(l, sets), ""), kc, "");
    LLVMBuildCondBr(b, more, body, done);
    LLVMPositionBuilderAtEnd(b, body);
    for (int32_t s = 0; s < sets; s++) {
        LLVMValueRef k = s ? LLVMBuildNSWAdd(b, kphi, rt_l_i64(l, s), "") : kphi;
        rt_l_uk_step(l, u, rows, vt, ua, arow, ub, kc, k, zero_c, phi + s * na, next + s * na);
    }
    LLVMValueRef k1 = LLVMBuildNSWAdd(b, kphi, rt_l_i64(l, sets), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
    LLVMBuildBr(b, head);
    LLVMAddIncoming(kphi, &k1, &latch, 1);
    for (int32_t i = 0; i < nt; i++)
        LLVMAddIncoming(phi[i], &next[i], &latch, 1);
    LLVMPositionBuilderAtEnd(b, done);
    memcpy(acc, phi, (size_t)nt * sizeof *acc);
    return kphi;
}

// The k loop of a tile of `rows` rows of an A read in place at a constant stride, one set: a
// full tile's rows are constant offsets from one pointer, not a register each (14 rows did not
// fit: three reloaded per k step; qkt's 14x32 kernel 2-4% faster in same-process A/B turns);
// a cut tile keeps arow (its last valid row repeated).
static LLVMValueRef rt_l_uk_kloop_a(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows,
                                    LLVMValueRef mv, LLVMTypeRef vt, LLVMValueRef ua,
                                    const LLVMValueRef *arow, LLVMValueRef ub, LLVMValueRef kc,
                                    bool zero_c, LLVMValueRef *acc) {
    LLVMBuilderRef b = l->b;
    int32_t na = rows * (u->nr / u->vl);
    LLVMBasicBlockRef bb[2] = {rt_l_block(l, "uk.afull"), rt_l_block(l, "uk.acut")};
    LLVMBasicBlockRef bj = rt_l_block(l, "uk.ajoin");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, mv, rt_l_i64(l, rows), ""), bb[0], bb[1]);
    LLVMValueRef a2[2][RT_KIR_UK_MAX_ACC], crow[RT_KIR_UK_MAX_ACC], k2[2];
    for (int32_t i = 0; i < rows; i++)
        crow[i] = rt_l_i64(l, (int64_t)i * u->a_ld);
    for (int32_t p = 0; p < 2; p++) {
        memcpy(a2[p], acc, (size_t)na * sizeof *acc);
        LLVMPositionBuilderAtEnd(b, bb[p]);
        k2[p] = rt_l_uk_kloop(l, u, rows, 1, vt, ua, p ? arow : crow, ub, kc, rt_l_i64(l, 0),
                              zero_c, a2[p]);
        bb[p] = LLVMGetInsertBlock(b);
        LLVMBuildBr(b, bj);
    }
    LLVMPositionBuilderAtEnd(b, bj);
    for (int32_t i = 0; i < na; i++) {
        LLVMValueRef in[2] = {a2[0][i], a2[1][i]};
        acc[i] = LLVMBuildPhi(b, vt, "acc");
        LLVMAddIncoming(acc[i], in, bb, 2);
    }
    LLVMValueRef k = LLVMBuildPhi(b, l->i64, "k");
    LLVMAddIncoming(k, k2, bb, 2);
    return k;
}

// A micro-kernel tile of `rows` rows (kir.h rt_kir_ukernel): rows = mr with mv valid (A's
// rows past them repeat the last valid one), or a row tail's exact rows (mv = rows) with its k
// steps split over `sets` accumulator sets (a remainder loop of single steps into the first,
// then their sum); then the store, the edge tile or the epilogue; branches to bend.
static void rt_l_uk_tile(rt_lemit *l, const rt_kir_ukernel *u, int32_t rows, LLVMValueRef mv,
                         int32_t sets, LLVMValueRef ua, LLVMValueRef ub, LLVMValueRef kc,
                         LLVMValueRef c_off, bool zero_c, LLVMBasicBlockRef bend) {
    LLVMBuilderRef b = l->b;
    // rows x nv accumulators of vl floats, vl the target's vector register (kir.h).
    int32_t vl = u->vl, nv = u->nr / vl, na = rows * nv;
    LLVMTypeRef vt = LLVMVectorType(l->f32, (unsigned)vl);
    LLVMValueRef arow[RT_KIR_UK_MAX_ACC];
    if (rt_kir_uk_a_in_place(u)) { // A read in place (kir.h), at a constant or run-time stride
        LLVMValueRef ld = l->uk_ald, last = LLVMBuildSub(b, mv, rt_l_i64(l, 1), "");
        for (int32_t i = 0; i < rows; i++) {
            LLVMValueRef r = rt_l_i64(l, i);
            LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, r, last, "");
            arow[i] = LLVMBuildMul(b, LLVMBuildSelect(b, in, r, last, ""), ld, "");
        }
    }
    LLVMValueRef acc[RT_KIR_UK_MAX_ACC];
    for (int32_t i = 0; i < na * sets; i++)
        acc[i] = LLVMConstNull(vt);
    LLVMValueRef k =
        u->a_ld > 0 && sets == 1 && rows > 8 // more row pointers than free registers
            ? rt_l_uk_kloop_a(l, u, rows, mv, vt, ua, arow, ub, kc, zero_c, acc)
            : rt_l_uk_kloop(l, u, rows, sets, vt, ua, arow, ub, kc, rt_l_i64(l, 0), zero_c, acc);
    if (sets > 1) {
        (void)rt_l_uk_kloop(l, u, rows, 1, vt, ua, arow, ub, kc, k, zero_c, acc);
        for (int32_t s = 1; s < sets; s++)
            for (int32_t i = 0; i < na; i++)
                acc[i] = LLVMBuildFAdd(b, acc[i], acc[s * na + i], "");
    }

    // Store: full tiles with vector stores, edge tiles through the stack buffer; on the last k
    // block of a GEMM with a fused epilogue, the epilogue instead.
    LLVMValueRef nvv = rt_l_expr(l, u->n_valid);
    LLVMValueRef accum = rt_l_truth(l, u->accumulate);
    if (u->epi && u->epi->n > 0) {
        LLVMBasicBlockRef bepi = rt_l_block(l, "uk.epi"), bplain = rt_l_block(l, "uk.store");
        LLVMBuildCondBr(b, rt_l_truth(l, u->epi_last), bepi, bplain);
        LLVMPositionBuilderAtEnd(b, bepi);
        rt_l_uk_epilogue(l, u, rows, acc, c_off, mv, nvv, accum);
        LLVMBuildBr(b, bend);
        LLVMPositionBuilderAtEnd(b, bplain);
    }
    LLVMValueRef ldc = rt_l_uk_ldc(l, u); // dominates the full tile's stores below
    LLVMValueRef full = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, mv, rt_l_i64(l, rows), ""),
                                     LLVMBuildICmp(b, LLVMIntEQ, nvv, rt_l_i64(l, u->nr), ""), "");
    LLVMBasicBlockRef bfull = rt_l_block(l, "uk.full"), bpart = rt_l_block(l, "uk.edge");
    LLVMBuildCondBr(b, full, bfull, bpart);
    // Full tile: C += acc or C = acc on two paths, so that overwriting never reads C (a K=2
    // GEMM is bound by the C traffic alone).
    LLVMPositionBuilderAtEnd(b, bfull);
    LLVMBasicBlockRef badd = rt_l_block(l, "uk.add"), bset = rt_l_block(l, "uk.set");
    LLVMBuildCondBr(b, accum, badd, bset);
    // Streaming: overwrites of a 64-byte aligned tile (ldc keeps every row aligned) take
    // non-temporal stores; the phase ends with a fence (rt_l_phase).
    LLVMBasicBlockRef bnt = NULL, bst = bset;
    if (u->stream && !u->ldc_rt && u->ldc % 16 == 0) {
        LLVMPositionBuilderAtEnd(b, bset);
        bnt = rt_l_block(l, "uk.nt");
        bst = rt_l_block(l, "uk.st");
        LLVMValueRef low =
            LLVMBuildAnd(b, LLVMBuildPtrToInt(b, rt_l_addr(l, u->c_buf, c_off), l->i64, ""),
                         rt_l_i64(l, 63), "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, low, rt_l_i64(l, 0), ""), bnt, bst);
    }
    for (int32_t pass = 0; pass < 3; pass++) {
        if (pass == 2 && !bnt)
            break;
        LLVMPositionBuilderAtEnd(b, pass == 0 ? badd : pass == 1 ? bst : bnt);
        for (int32_t i = 0; i < rows; i++)
            for (int32_t j = 0; j < nv; j++) {
                LLVMValueRef at = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, rt_l_i64(l, i), ldc, ""),
                                                  rt_l_i64(l, (int64_t)vl * j), "");
                LLVMValueRef idx = LLVMBuildNSWAdd(b, c_off, at, "");
                LLVMValueRef p = rt_l_addr(l, u->c_buf, idx);
                LLVMValueRef v = acc[i * nv + j];
                if (pass == 0) {
                    LLVMValueRef old = LLVMBuildLoad2(b, vt, p, "");
                    LLVMSetAlignment(old, 4);
                    v = LLVMBuildFAdd(b, old, v, "");
                }
                if (pass == 2)
                    rt_l_store_nt(l, v, p, (unsigned)vl * 4);
                else
                    LLVMSetAlignment(LLVMBuildStore(b, v, p), 4);
            }
        LLVMBuildBr(b, bend);
    }
    rt_l_uk_edge(l, u, rows, acc, c_off, mv, nvv, accum, bpart, bend);
}

static void rt_l_ukernel(rt_lemit *l, const rt_kir_ukernel *u) {
    LLVMBuilderRef b = l->b;
    bool a_in_place = rt_kir_uk_a_in_place(u); // A's rows read from its tensor (kir.h)
    LLVMValueRef ua = rt_l_addr(l, a_in_place ? u->a_buf : 0, rt_l_expr(l, u->a_off));
    bool b_in_place = rt_kir_uk_b_in_place(u); // B's rows read from its tensor (kir.h)
    LLVMValueRef ub = rt_l_addr(l, b_in_place ? u->b_buf : 0, rt_l_expr(l, u->b_off));
    l->uk_bld = b_in_place ? rt_l_i64(l, u->b_ld) : NULL;
    l->uk_apf = u->a_pf_next ? rt_l_expr(l, u->a_pf_next) : NULL;
    l->uk_ald = u->a_ld_rt ? rt_l_expr(l, u->a_ld_rt) : rt_l_i64(l, u->a_ld);
    LLVMValueRef kc = rt_l_expr(l, u->kc);
    // Prefetch the C tile for writing (every 64-byte line of its rows) before the k loop, so
    // that its misses (C rows are ldc apart, usually in L3 or DRAM for large GEMMs) overlap
    // the FMAs instead of stalling the stores. A hint: lines outside C never fault. Not where
    // the plan finds C's lines in the last-level cache (no_pf_c).
    LLVMValueRef c_off = rt_l_expr(l, u->c_off);
    // With a fused epilogue that does not keep C and nothing to accumulate, C is never touched;
    // the epilogue's own output tile is prefetched instead on the last k block.
    bool epi = u->epi && u->epi->n > 0;
    int64_t acc0 = 1;
    bool zero_c = rt_kir_is_int(u->accumulate, &acc0) && acc0 == 0; // the call starts from 0
    bool c_untouched = epi && !u->epi_keep_c && zero_c;
    if (!u->stream && !c_untouched && !u->no_pf_c)
        rt_l_pf_tile(l, u->c_buf, c_off, rt_l_uk_ldc(l, u), u->mr, u->nr);
    if (epi && u->epi_pf_buf >= 0) {
        LLVMBasicBlockRef bpf = rt_l_block(l, "uk.pf"), bgo = rt_l_block(l, "uk.go");
        LLVMBuildCondBr(b, rt_l_truth(l, u->epi_last), bpf, bgo);
        LLVMPositionBuilderAtEnd(b, bpf);
        rt_l_pf_tile(l, u->epi_pf_buf, rt_l_expr(l, u->epi_pf_off), rt_l_i64(l, u->epi_pf_ld),
                     u->mr, u->nr);
        LLVMBuildBr(b, bgo);
        LLVMPositionBuilderAtEnd(b, bgo);
    }
    LLVMValueRef mv = rt_l_expr(l, u->m_valid);
    LLVMBasicBlockRef bend = rt_l_block(l, "uk.end");
    if (u->tail_acc > 0 && u->mr > 1) {
        // Row tails: a switch on the valid rows; each count below mr goes to the kernel of its
        // tail rows (rt_perf_cpu_tail_rows), one per distinct count.
        LLVMBasicBlockRef bmr = rt_l_block(l, "uk.mr"), br = NULL;
        LLVMValueRef sw = LLVMBuildSwitch(b, mv, bmr, (unsigned)(u->mr - 1));
        int64_t t_prev = 0;
        for (int32_t r = 1; r < u->mr; r++) {
            int64_t t = rt_perf_cpu_tail_rows(u->mr, r);
            if (t >= u->mr)
                break;
            if (t != t_prev) {
                br = rt_l_block(l, "uk.tail");
                LLVMPositionBuilderAtEnd(b, br);
                int64_t sets = rt_perf_cpu_tail_sets(u->mr, u->nr / u->vl, t, u->tail_acc);
                rt_l_uk_tile(l, u, (int32_t)t, mv, (int32_t)sets, ua, ub, kc, c_off, zero_c, bend);
                t_prev = t;
            }
            LLVMAddCase(sw, rt_l_i64(l, r), br);
        }
        LLVMPositionBuilderAtEnd(b, bmr);
    }
    rt_l_uk_tile(l, u, u->mr, mv, 1, ua, ub, kc, c_off, zero_c, bend);
    LLVMPositionBuilderAtEnd(b, bend);
}

// ---------------------------------------------------------------------------------------------
// Streaming stores: a vector loop whose body is one f32 STORE marked stream, at a unit stride,
// of a value this emitter can build in 16 lanes, runs as an explicit vector loop of
// non-temporal stores when its first element's address is 64-byte aligned and its trip count a
// multiple of 16 (whole cache lines); otherwise as the plain loop. LLVM's loop vectorizer
// would not keep the non-temporal hint: on most x86 targets it refuses to vectorize such a
// store at the element alignment, and where it does (SSE4A) it splits it into scalar stores.
// ---------------------------------------------------------------------------------------------

// How index reads var: 0 not at all, 1 once as "+ var" (unit stride), -1 otherwise.
static int rt_l_unit_uses(const rt_kir_expr *e, int32_t var, bool additive) {
    if (!e)
        return 0;
    if (e->kind == RT_KIR_E_VAR)
        return e->var != var ? 0 : additive ? 1 : -1;
    bool add = e->kind == RT_KIR_E_BIN && (e->bop == RT_KIR_ADD || e->bop == RT_KIR_SUB);
    int total = 0;
    for (int32_t i = 0; i < 3; i++) {
        int u = rt_l_unit_uses(e->args[i], var, add && additive && !(e->bop == RT_KIR_SUB && i));
        if (u < 0)
            return -1;
        total += u;
    }
    return total > 1 ? -1 : total;
}

static bool rt_l_widenable(const rt_lemit *l, const rt_kir_expr *e, int32_t var) {
    if (!e || e->type != RT_KIR_F32)
        return false;
    switch (e->kind) {
    case RT_KIR_E_FLT:
    case RT_KIR_E_FVAR:
        return true;
    case RT_KIR_E_LOAD:
        return l->k->bufs[e->buf].type == RT_KIR_F32 && rt_l_unit_uses(e->args[0], var, true) >= 0;
    case RT_KIR_E_NEG:
        return rt_l_widenable(l, e->args[0], var);
    case RT_KIR_E_BIN:
        return rt_l_is_farith(e->bop) && rt_l_widenable(l, e->args[0], var) &&
               rt_l_widenable(l, e->args[1], var);
    default:
        return false;
    }
}

// Lanes var .. var+15 of a widenable expression (the var's alloca holds lane 0). The operations
// are rt_l_bin's (rt_l_fused_mul, rt_l_farith), so the chunks and the plain loop's elements
// agree bit for bit.
static LLVMValueRef rt_l_wide(rt_lemit *l, const rt_kir_expr *e, int32_t var) {
    LLVMBuilderRef b = l->b;
    switch (e->kind) {
    case RT_KIR_E_LOAD: {
        LLVMValueRef p = rt_l_addr(l, e->buf, rt_l_expr(l, e->args[0]));
        if (rt_l_unit_uses(e->args[0], var, true) == 0)
            return rt_l_splat(l, LLVMBuildLoad2(b, l->f32, p, ""));
        LLVMValueRef v = LLVMBuildLoad2(b, l->v16, p, "");
        LLVMSetAlignment(v, 4);
        return v;
    }
    case RT_KIR_E_NEG:
        return LLVMBuildFNeg(b, rt_l_wide(l, e->args[0], var), "");
    case RT_KIR_E_BIN:
        break;
    default: // FLT, FVAR
        return rt_l_splat(l, rt_l_expr(l, e));
    }
    int fm = rt_l_fused_mul(e);
    if (fm >= 0) {
        const rt_kir_expr *m = e->args[fm];
        LLVMValueRef x = rt_l_wide(l, m->args[0], var), y = rt_l_wide(l, m->args[1], var);
        return rt_l_fmuladd(l, x, y, rt_l_wide(l, e->args[1 - fm], var));
    }
    LLVMValueRef x = rt_l_wide(l, e->args[0], var);
    return rt_l_farith(l, e->bop, x, rt_l_wide(l, e->args[1], var));
}

static bool rt_l_streams(const rt_lemit *l, const rt_kir_node *n) {
    const rt_kir_node *st = n->body.n == 1 ? n->body.nodes[0] : NULL;
    // rt_kir_validate has checked that a streaming store's buffer is f32.
    return n->loop_kind == RT_KIR_LOOP_VECTOR && st && st->kind == RT_KIR_N_STORE && st->stream &&
           rt_l_unit_uses(st->index, n->var, true) == 1 && rt_l_widenable(l, st->value, n->var);
}

static void rt_l_stream_loop(rt_lemit *l, const rt_kir_node *n, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = l->b;
    const rt_kir_node *st = n->body.nodes[0];
    LLVMValueRef var = l->vars[n->var];
    LLVMBuildStore(b, lo, var);
    LLVMValueRef p0 = rt_l_addr(l, st->buf, rt_l_expr(l, st->index));
    LLVMValueRef low = LLVMBuildAnd(b, LLVMBuildPtrToInt(b, p0, l->i64, ""), rt_l_i64(l, 63), "");
    LLVMValueRef count = LLVMBuildSub(b, hi, lo, "");
    // Whole lines only: a line written partly by non-temporal and partly by plain stores is
    // flushed partially from the write-combining buffer and costs a read at the memory (rows of
    // 42 floats ran ReLU 10% slower). So the rows must be aligned and a multiple of 16 long.
    LLVMValueRef whole = LLVMBuildAnd(b, count, rt_l_i64(l, 15), "");
    LLVMValueRef go = LLVMBuildAnd(
        b, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildOr(b, low, whole, ""), rt_l_i64(l, 0), ""),
        LLVMBuildICmp(b, LLVMIntSGT, count, rt_l_i64(l, 0), ""), "");
    LLVMBasicBlockRef head = rt_l_block(l, "nt.loop"), body = rt_l_block(l, "nt.body"),
                      rest = rt_l_block(l, "nt.rest");
    LLVMBuildCondBr(b, go, head, rest);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef i = LLVMBuildLoad2(b, l->i64, var, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, hi, ""), body, rest);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef v = rt_l_wide(l, st->value, n->var);
    rt_l_store_nt(l, v, rt_l_addr(l, st->buf, rt_l_expr(l, st->index)), 64);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, LLVMBuildLoad2(b, l->i64, var, ""), rt_l_i64(l, 16), ""),
                   var);
    LLVMBuildBr(b, head);
    // The plain loop where the chunks did not run (after them var is hi: no iteration left).
    LLVMPositionBuilderAtEnd(b, rest);
    rt_l_counted(l, var, LLVMBuildLoad2(b, l->i64, var, ""), hi, true, &n->body, rt_l_nodes);
}

static void rt_l_node(rt_lemit *l, const rt_kir_node *n) {
    LLVMBuilderRef b = l->b;
    switch (n->kind) {
    case RT_KIR_N_LOOP: {
        LLVMValueRef lo = rt_l_expr(l, n->lo), hi = rt_l_expr(l, n->hi);
        if (rt_l_streams(l, n)) {
            rt_l_stream_loop(l, n, lo, hi);
            return;
        }
        rt_l_counted(l, l->vars[n->var], lo, hi, n->loop_kind == RT_KIR_LOOP_VECTOR, &n->body,
                     rt_l_nodes);
        return;
    }
    case RT_KIR_N_LET:
    case RT_KIR_N_FSET:
        LLVMBuildStore(b, rt_l_expr(l, n->value), l->vars[n->var]);
        return;
    case RT_KIR_N_STORE: {
        LLVMValueRef v = rt_l_expr(l, n->value);
        LLVMBuildStore(b, v, rt_l_addr(l, n->buf, rt_l_expr(l, n->index)));
        return;
    }
    case RT_KIR_N_PREFETCH:
        rt_l_prefetch(l, rt_l_type(l, l->k->bufs[n->buf].type), l->bufs[n->buf],
                      rt_l_expr(l, n->index), 0, 2);
        return;
    case RT_KIR_N_IF: {
        LLVMBasicBlockRef bt = rt_l_block(l, "then"), be = rt_l_block(l, "else"),
                          bj = rt_l_block(l, "join");
        LLVMBuildCondBr(b, rt_l_truth(l, n->cond), bt, be);
        LLVMPositionBuilderAtEnd(b, bt);
        rt_l_nodes(l, &n->body);
        LLVMBuildBr(b, bj);
        LLVMPositionBuilderAtEnd(b, be);
        rt_l_nodes(l, &n->else_body);
        LLVMBuildBr(b, bj);
        LLVMPositionBuilderAtEnd(b, bj);
        return;
    }
    case RT_KIR_N_COPY:
        if (n->tpack)
            rt_l_tpack(l, n->tpack);
        else
            rt_l_nodes(l, &n->body);
        return;
    case RT_KIR_N_UKERNEL:
        rt_l_ukernel(l, &n->uk);
        return;
    default:
        return;
    }
}

static void rt_l_nodes(rt_lemit *l, const rt_kir_block *blk) {
    for (int32_t i = 0; i < blk->n; i++)
        rt_l_node(l, blk->nodes[i]);
}

static bool rt_l_has_stream(const rt_kir_block *blk) {
    for (int32_t i = 0; i < blk->n; i++) {
        const rt_kir_node *n = blk->nodes[i];
        if ((n->kind == RT_KIR_N_UKERNEL && n->uk.stream) ||
            (n->kind == RT_KIR_N_STORE && n->stream) || rt_l_has_stream(&n->body) ||
            rt_l_has_stream(&n->else_body))
            return true;
    }
    return false;
}

static int32_t rt_l_max_tile(const rt_kir_block *blk) {
    int32_t best = 0;
    for (int32_t i = 0; i < blk->n; i++) {
        const rt_kir_node *n = blk->nodes[i];
        int32_t t = n->kind == RT_KIR_N_UKERNEL ? n->uk.mr * n->uk.nr : 0;
        int32_t x = rt_l_max_tile(&n->body), y = rt_l_max_tile(&n->else_body);
        t = t > x ? t : x;
        t = t > y ? t : y;
        best = best > t ? best : t;
    }
    return best;
}

// Does blk hold a float max/min reduction (acc = max(acc, x))? LLVM 16 vectorizes those only
// under the function attributes no-nans-fp-math and no-signed-zeros-fp-math (its C API has no
// per-instruction fast-math flags), which rt_l_attrs then sets on the phase: such phases
// give no guarantee on NaN inputs or on the sign of a zero maximum.
static bool rt_l_has_minmax_red(const rt_kir_block *blk) {
    for (int32_t i = 0; i < blk->n; i++) {
        const rt_kir_node *n = blk->nodes[i];
        const rt_kir_expr *v = n->value;
        if (n->kind == RT_KIR_N_FSET && v && v->kind == RT_KIR_E_BIN &&
            (v->bop == RT_KIR_MAX || v->bop == RT_KIR_MIN) && v->args[0]->kind == RT_KIR_E_FVAR &&
            v->args[0]->var == n->var)
            return true;
        if (rt_l_has_minmax_red(&n->body) || rt_l_has_minmax_red(&n->else_body))
            return true;
    }
    return false;
}

static void rt_l_str_attr(rt_lemit *l, LLVMValueRef fn, const char *k, const char *v) {
    LLVMAddAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(l->ctx, k, (unsigned)strlen(k), v, (unsigned)strlen(v)));
}

static void rt_l_attrs(rt_lemit *l, LLVMValueRef fn, bool avx512) {
    if (l->p && rt_l_has_minmax_red(&l->p->body)) {
        rt_l_str_attr(l, fn, "no-nans-fp-math", "true");
        rt_l_str_attr(l, fn, "no-signed-zeros-fp-math", "true");
    }
    if (avx512)
        LLVMAddAttributeAtIndex(
            fn, LLVMAttributeFunctionIndex,
            LLVMCreateStringAttribute(l->ctx, "prefer-vector-width", 19, "512", 3));
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(l->ctx, nounwind, 0));
}

static void rt_l_phase(rt_lemit *l, const rt_kir_phase *p, bool avx512) {
    const rt_kir_kernel *k = l->k;
    LLVMBuilderRef b = l->b;
    l->p = p;
    // Body: (scratch, buffers..., lo, hi) with noalias buffers, inlined into the wrapper.
    int32_t np = k->n_bufs + 2;
    LLVMTypeRef params[np];
    for (int32_t i = 0; i < k->n_bufs; i++)
        params[i] = l->ptr;
    params[k->n_bufs] = l->i64;
    params[k->n_bufs + 1] = l->i64;
    LLVMTypeRef body_t = LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), params, (unsigned)np, 0);
    char bname[512], wname[512]; // names on the stack: nothing here can fail for want of memory
    snprintf(bname, sizeof bname, "%s_%s_body", k->name, p->name);
    snprintf(wname, sizeof wname, "%s_%s", k->name, p->name);
    LLVMValueRef body = LLVMAddFunction(l->m, bname, body_t);
    LLVMSetLinkage(body, LLVMInternalLinkage);
    rt_l_attrs(l, body, avx512);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    unsigned inl = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    LLVMAddAttributeAtIndex(body, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(l->ctx, inl, 0));
    for (int32_t i = 0; i < k->n_bufs; i++) {
        LLVMAddAttributeAtIndex(body, (unsigned)i + 1, LLVMCreateEnumAttribute(l->ctx, noalias, 0));
        l->bufs[i] = LLVMGetParam(body, (unsigned)i);
        LLVMSetValueName2(l->bufs[i], k->bufs[i].name, strlen(k->bufs[i].name));
    }
    l->fn = body;
    LLVMBasicBlockRef entry = rt_l_block(l, "entry");
    LLVMPositionBuilderAtEnd(b, entry);
    for (int32_t v = 0; v < p->n_vars; v++)
        l->vars[v] = LLVMBuildAlloca(b, rt_l_type(l, p->vars[v].type), p->vars[v].name);
    int32_t tile = rt_l_max_tile(&p->body);
    l->uk_tmp = NULL;
    if (tile > 0) {
        l->uk_tmp = LLVMBuildArrayAlloca(b, l->f32, rt_l_i64(l, tile), "uk_tmp");
        LLVMSetAlignment(l->uk_tmp, 64);
        l->uk_i = LLVMBuildAlloca(b, l->i64, "ui");
        l->uk_j = LLVMBuildAlloca(b, l->i64, "uj");
    }
    LLVMValueRef lo = LLVMGetParam(body, (unsigned)k->n_bufs);
    LLVMValueRef hi = LLVMGetParam(body, (unsigned)k->n_bufs + 1);
    rt_l_counted(l, l->vars[p->item_var], lo, hi, false, &p->body, rt_l_nodes);
    if (rt_l_has_stream(&p->body)) // orders the non-temporal stores before the barrier
        LLVMBuildFence(b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    LLVMBuildRetVoid(b);

    // Wrapper with the common ABI: (void **args, i64 lo, i64 hi, float *scratch).
    LLVMTypeRef wparams[4] = {l->ptr, l->i64, l->i64, l->ptr};
    LLVMTypeRef wrap_t = LLVMFunctionType(LLVMVoidTypeInContext(l->ctx), wparams, 4, 0);
    LLVMValueRef wrap = LLVMAddFunction(l->m, wname, wrap_t);
    rt_l_attrs(l, wrap, avx512);
    l->fn = wrap;
    LLVMPositionBuilderAtEnd(b, rt_l_block(l, "entry"));
    LLVMValueRef args[np];
    args[0] = LLVMGetParam(wrap, 3);
    for (int32_t i = 1; i < k->n_bufs; i++) {
        LLVMValueRef idx = rt_l_i64(l, i);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, l->ptr, LLVMGetParam(wrap, 0), &idx, 1, "");
        args[i] = LLVMBuildLoad2(b, l->ptr, slot, k->bufs[i].name);
    }
    args[k->n_bufs] = LLVMGetParam(wrap, 1);
    args[k->n_bufs + 1] = LLVMGetParam(wrap, 2);
    LLVMBuildCall2(b, body_t, body, args, (unsigned)np, "");
    LLVMBuildRetVoid(b);
}

// The function pipeline run on every module, in place of "default<O3>" (which costs 4-5x the
// compile time for no measured gain): the micro-kernel is vectorized by construction, so what
// is left is inlining the phase body, promoting the loop variables to registers, hoisting the
// invariant address arithmetic, vectorizing the loops marked vector (packing copies and the
// general path's innermost loops) without interleaving, and unrolling what is left small
// (depthwise and pooling windows run 2x slower without it). No indvars: it took half of the
// pipeline's time (SCEV no-wrap proofs over the blocked loop nests, 18 of 40 ms on the top-1
// 4096x4096x1024 GEMM) and changed no kernel's time measurably: the loop counters are i64
// already (nothing to widen), and loop-vectorize and codegen's LSR analyse inductions anyway.
static const char rt_l_pipeline[] =
    "always-inline,function(sroa,early-cse,instcombine,simplifycfg,loop-simplify,lcssa,"
    "loop-rotate,loop-mssa(licm),loop-vectorize,instcombine,simplifycfg,loop-unroll<O3>,"
    "instcombine)";

rt_status rt_emit_llvm(rt_arena *a, const rt_kir_kernel *k, const rt_llvm_target *t, bool optimize,
                       void **out_module, const char **out_text, rt_err *err) {
    RT_TRY(rt_kir_validate(k, err));
    rt_lemit l;
    memset(&l, 0, sizeof l);
    l.k = k;
    l.ctx = t->context;
    l.i1 = LLVMInt1TypeInContext(l.ctx);
    l.i32 = LLVMInt32TypeInContext(l.ctx);
    l.i64 = LLVMInt64TypeInContext(l.ctx);
    l.f32 = LLVMFloatTypeInContext(l.ctx);
    l.f64 = LLVMDoubleTypeInContext(l.ctx);
    l.ptr = LLVMPointerTypeInContext(l.ctx, 0);
    l.v16 = LLVMVectorType(l.f32, 16);
    l.loop_kind = LLVMGetMDKindIDInContext(l.ctx, "llvm.loop", 9);
    int32_t max_vars = 1;
    for (int32_t i = 0; i < k->n_phases; i++)
        max_vars = k->phases[i].n_vars > max_vars ? k->phases[i].n_vars : max_vars;
    RT_ALLOC(a, l.bufs, k->n_bufs, err);
    RT_ALLOC(a, l.vars, max_vars, err);
    l.m = LLVMModuleCreateWithNameInContext(k->name, l.ctx);
    l.b = LLVMCreateBuilderInContext(l.ctx);
    LLVMTargetMachineRef tm = t->target_machine;
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(l.m, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(l.m, td);
    LLVMDisposeTargetData(td);
    for (int32_t i = 0; i < k->n_phases; i++)
        rt_l_phase(&l, &k->phases[i], t->avx512);
    LLVMDisposeBuilder(l.b);
    char *msg = NULL;
    if (LLVMVerifyModule(l.m, LLVMReturnStatusAction, &msg)) {
        rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: kernel %s does not verify: %.300s", k->name,
                msg ? msg : "?");
        err->log = msg ? rt_arena_strdup(a, msg) : NULL;
        LLVMDisposeMessage(msg);
        LLVMDisposeModule(l.m);
        return err->status;
    }
    LLVMDisposeMessage(msg);
    if (out_text) {
        // The kernel's header (its plan among it) as comments, then the module.
        char *s = LLVMPrintModuleToString(l.m);
        rt_buf text;
        rt_buf_init(&text, a);
        rt_kir_header_comment(k, "; ", &text);
        rt_buf_puts(&text, s ? s : "");
        *out_text = text.oom ? NULL : text.data;
        LLVMDisposeMessage(s);
        if (!*out_text) {
            LLVMDisposeModule(l.m);
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        }
    }
    if (optimize) {
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
        LLVMPassBuilderOptionsSetLoopInterleaving(po, 0);
        LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
        LLVMErrorRef e = LLVMRunPasses(l.m, rt_l_pipeline, tm, po);
        LLVMDisposePassBuilderOptions(po);
        if (e) {
            char *em = LLVMGetErrorMessage(e);
            rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: the pass pipeline failed on %s: %s",
                    k->name, em ? em : "?");
            LLVMDisposeErrorMessage(em);
            LLVMDisposeModule(l.m);
            return err->status;
        }
    }
    *out_module = l.m;
    return RT_OK;
}

void rt_emit_llvm_dispose(void *module) {
    if (module)
        LLVMDisposeModule(module);
}
