// emit-llvm.c: builds a kernel IR (kir.h) as an LLVM 16 module with the C API, then optimizes
// it with a short new-pass-manager pipeline (rt_l_pipeline) for hal-cpu.c's JIT target.
// Every function carries "prefer-vector-width"="512" on AVX-512 targets (without it LLVM 16
// keeps to ymm registers). Phase bodies take their buffers as noalias parameters and are
// inlined into the args-array wrappers of the common ABI (emit.h). The micro-kernel, built
// directly in vector form, and the transposing pack are in emit-llvm-uk.c.
#include "emit-llvm-impl.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <stdio.h>
#include <string.h>

LLVMTypeRef rt_l_type(rt_lemit *l, rt_kir_type t) {
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

LLVMValueRef rt_l_i64(rt_lemit *l, int64_t v) {
    return LLVMConstInt(l->i64, (unsigned long long)v, 1);
}

LLVMValueRef rt_l_intrinsic(rt_lemit *l, const char *name, LLVMTypeRef t) {
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

LLVMValueRef rt_l_truth(rt_lemit *l, const rt_kir_expr *e) {
    return LLVMBuildICmp(l->b, LLVMIntNE, rt_l_expr(l, e), rt_l_i64(l, 0), "");
}

LLVMValueRef rt_l_addr(rt_lemit *l, int32_t buf, LLVMValueRef index) {
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

LLVMValueRef rt_l_expr(rt_lemit *l, const rt_kir_expr *e) {
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

LLVMBasicBlockRef rt_l_block(rt_lemit *l, const char *name) {
    return LLVMAppendBasicBlockInContext(l->ctx, l->fn, name);
}

// Marks the loop ending in br for vectorization and, with interleave > 0, asks for that many
// vectors per iteration (the pipeline interleaves only where a loop asks: rt_emit_llvm).
void rt_l_loop_hint(rt_lemit *l, LLVMValueRef br, int32_t interleave) {
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

// x in all lanes of a vector of n floats.
LLVMValueRef rt_l_splat_n(rt_lemit *l, LLVMValueRef x, unsigned n) {
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
void rt_l_store_nt(rt_lemit *l, LLVMValueRef v, LLVMValueRef p, unsigned align) {
    LLVMValueRef st = LLVMBuildStore(l->b, v, p);
    LLVMSetAlignment(st, align);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(l->i32, 1, 0));
    LLVMSetMetadata(st, LLVMGetMDKindIDInContext(l->ctx, "nontemporal", 11),
                    LLVMMetadataAsValue(l->ctx, LLVMMDNodeInContext2(l->ctx, &one, 1)));
}

// llvm.prefetch of element idx of an array of type t at base (a data prefetch; write 0 or 1,
// locality 0-3). A plain GEP, not inbounds: a hint may point past the array and never faults.
void rt_l_prefetch(rt_lemit *l, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef idx, int write,
                   int locality) {
    LLVMValueRef pf = rt_l_intrinsic(l, "llvm.prefetch", l->ptr);
    LLVMValueRef args[4] = {LLVMBuildGEP2(l->b, t, base, &idx, 1, ""),
                            LLVMConstInt(l->i32, (unsigned long long)write, 0),
                            LLVMConstInt(l->i32, (unsigned long long)locality, 0),
                            LLVMConstInt(l->i32, 1, 0)};
    LLVMBuildCall2(l->b, LLVMGlobalGetValueType(pf), pf, args, 4, "");
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

void rt_l_nodes(rt_lemit *l, const rt_kir_block *blk) {
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
