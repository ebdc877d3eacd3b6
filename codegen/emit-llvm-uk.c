// emit-llvm-uk.c: the LLVM emitter's micro-kernel (kir.h rt_kir_ukernel) in vector form -- mr x
// nr/vl <vl x float> accumulators carried by phis around the k loop, one B load per vl columns,
// a broadcast of A and llvm.fma per accumulator; its stores, edge tiles and fused epilogue --
// and the 16 x 16 transposing pack (rt_kir_tpack).
#include "emit-llvm-impl.h"

#include <stdio.h>
#include <string.h>

// Prefetch distance of the micro-kernel's B stream in elements (1 KiB).
#define RT_UK_PREFETCH_ELEMS 256

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

// Opens a loop over columns [lo, hi) of row ii of the stack buffer (var uk_j, blocks named
// "pfx.j..."): leaves the builder in its body and returns the column, with the buffer's element
// in *tv and C's address in *cp; *head is the loop's head (for the back edge), *done its exit.
static LLVMValueRef rt_l_uk_cols(rt_lemit *l, const rt_kir_ukernel *u, const char *pfx,
                                 LLVMValueRef ii, LLVMValueRef lo, LLVMValueRef hi,
                                 LLVMValueRef c_off, LLVMBasicBlockRef *head,
                                 LLVMBasicBlockRef *done, LLVMValueRef *tv, LLVMValueRef *cp) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef jv = l->uk_j; // promoted by mem2reg
    char name[3][16];
    for (int i = 0; i < 3; i++)
        snprintf(name[i], sizeof name[i], "%s.%s", pfx, i == 0 ? "j" : i == 1 ? "jb" : "jdone");
    LLVMBuildStore(b, lo, jv);
    LLVMBasicBlockRef jb = rt_l_block(l, name[1]);
    *head = rt_l_block(l, name[0]), *done = rt_l_block(l, name[2]);
    LLVMBuildBr(b, *head);
    LLVMPositionBuilderAtEnd(b, *head);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, l->i64, jv, ""), hi, ""), jb,
                    *done);
    LLVMPositionBuilderAtEnd(b, jb);
    LLVMValueRef jj = LLVMBuildLoad2(b, l->i64, jv, "");
    LLVMValueRef tidx = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_i64(l, u->nr), ""), jj, "");
    *tv = LLVMBuildLoad2(b, l->f32, LLVMBuildInBoundsGEP2(b, l->f32, l->uk_tmp, &tidx, 1, ""), "");
    LLVMValueRef cidx = LLVMBuildNSWAdd(
        b, c_off, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ii, rt_l_uk_ldc(l, u), ""), jj, ""), "");
    *cp = rt_l_addr(l, u->c_buf, cidx);
    return jj;
}

// One row ii of a micro-kernel epilogue (kir.h): for j < hi, marked for vectorization, the
// element's final value ((accumulate ? C : 0) + the spilled accumulator) and coordinates are
// bound and the epilogue block runs.
static void rt_l_epi_row(rt_lemit *l, const rt_kir_ukernel *u, LLVMValueRef ii, LLVMValueRef hi,
                         LLVMValueRef c_off, LLVMValueRef accum, LLVMValueRef row0,
                         LLVMValueRef col0, int32_t interleave) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef jv = l->uk_j, tv, cp;
    LLVMBasicBlockRef jh, done;
    LLVMValueRef jj =
        rt_l_uk_cols(l, u, "epi", ii, rt_l_i64(l, 0), hi, c_off, &jh, &done, &tv, &cp);
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
    LLVMValueRef tv, cp;
    LLVMBasicBlockRef jh, jd;
    LLVMValueRef jj = rt_l_uk_cols(l, u, "uk", ii, lo, hi, c_off, &jh, &jd, &tv, &cp);
    LLVMValueRef old = LLVMBuildLoad2(b, l->f32, cp, "");
    LLVMValueRef base = LLVMBuildSelect(b, accum, old, LLVMConstReal(l->f32, 0.0), "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, base, tv, ""), cp);
    LLVMBuildStore(b, LLVMBuildNSWAdd(b, jj, rt_l_i64(l, 1), ""), l->uk_j);
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

// One block of rt_l_tpack: 16 rows of 16 k steps from src at element at0 + r * s_row (+ k0),
// transposed by four rounds of interleaving rows r and r + 8 (lanes 0-7 of each into the even
// result, 8-15 into the odd one: four perfect shuffles are the transpose) and scaled; v gets
// column c (k step k0 + c) as a 16-row vector. Masked (kmask non-NULL): each row r < rows loads
// the lanes of kmask and the others load nothing (zeros), 16 masks. Clamped (kmask NULL): a whole
// block of k steps and 1 <= rows: rows past `rows` load row rows - 1 with plain loads, and one
// lane mask (rows below `rows`, where rows < 16) zeroes their lanes after the transpose.
static void rt_l_tpack_block(rt_lemit *l, const rt_kir_tpack *t, LLVMValueRef at0,
                             LLVMValueRef s_row, LLVMValueRef rows, LLVMValueRef kmask,
                             LLVMValueRef v[16]) {
    LLVMBuilderRef b = l->b;
    LLVMTypeRef vt = LLVMVectorType(l->f32, 16);
    LLVMValueRef z = rt_l_i64(l, 0), zero = LLVMConstNull(vt);
    LLVMValueRef ld_fn = rt_l_masked_fn(l, false, vt), align = LLVMConstInt(l->i32, 4, 0);
    for (int32_t r = 0; r < 16; r++) {
        LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, rt_l_i64(l, r), rows, "");
        // Masked, rows past `rows` load nothing at row 0's address; clamped, they read the last
        // valid row.
        LLVMValueRef row = LLVMBuildSelect(
            b, in, rt_l_i64(l, r), kmask ? z : LLVMBuildSub(b, rows, rt_l_i64(l, 1), ""), "");
        LLVMValueRef p =
            rt_l_addr(l, t->src, LLVMBuildAdd(b, at0, LLVMBuildMul(b, row, s_row, ""), ""));
        if (kmask) {
            LLVMValueRef m = LLVMBuildSelect(b, in, kmask, LLVMConstNull(LLVMTypeOf(kmask)), "");
            LLVMValueRef args[4] = {p, align, m, zero};
            v[r] = LLVMBuildCall2(b, LLVMGlobalGetValueType(ld_fn), ld_fn, args, 4, "");
        } else {
            v[r] = LLVMBuildLoad2(b, vt, p, "");
            LLVMSetAlignment(v[r], 4);
        }
    }
    LLVMValueRef lo[16], hi[16], w[16];
    for (int32_t e = 0; e < 16; e++) {
        lo[e] = LLVMConstInt(l->i32, (unsigned long long)(e / 2 + (e % 2) * 16), 0);
        hi[e] = LLVMConstInt(l->i32, (unsigned long long)(8 + e / 2 + (e % 2) * 16), 0);
    }
    LLVMValueRef mlo = LLVMConstVector(lo, 16), mhi = LLVMConstVector(hi, 16);
    for (int32_t round = 0; round < 4; round++) {
        for (int32_t i = 0; i < 8; i++) {
            w[2 * i] = LLVMBuildShuffleVector(b, v[i], v[i + 8], mlo, "");
            w[2 * i + 1] = LLVMBuildShuffleVector(b, v[i], v[i + 8], mhi, "");
        }
        memcpy(v, w, sizeof w);
    }
    // No lanes to zero where the caller knows all 16 rows are valid (rows a constant 16).
    bool all_rows = LLVMIsAConstantInt(rows) && LLVMConstIntGetSExtValue(rows) >= 16;
    LLVMValueRef rmask = kmask || all_rows ? NULL : rt_l_lanes_below(l, rows, 16);
    LLVMValueRef al = rt_l_splat_n(l, LLVMConstReal(l->f32, t->alpha), 16);
    for (int32_t c = 0; c < 16; c++) {
        if (t->alpha != 1.0)
            v[c] = LLVMBuildFMul(b, v[c], al, "");
        if (rmask)
            v[c] = LLVMBuildSelect(b, rmask, v[c], zero, "");
    }
}

// A transposing pack (kir.h rt_kir_tpack) by blocks of 16 k steps (rt_l_tpack_block), stored as
// 16 k-major rows (the block's valid ones where it is the last, short one). A whole block of k
// steps from all 16 rows takes plain loads (the clamped form at rows = 16, its selects folded
// away); from fewer, at least one, the clamped form (plain loads, one lane mask); a short
// block, or none of the rows, the masked one.
void rt_l_tpack(rt_lemit *l, const rt_kir_tpack *t) {
    LLVMBuilderRef b = l->b;
    LLVMValueRef base = rt_l_expr(l, t->base), s_row = rt_l_expr(l, t->s_row);
    LLVMValueRef rows = rt_l_expr(l, t->rows), kcur = rt_l_expr(l, t->kcur);
    LLVMValueRef dst0 = rt_l_expr(l, t->dst0);
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
    LLVMValueRef at0 = LLVMBuildAdd(b, base, k0, "");
    // The next call's 16 rows' line of this block (kir.h): rows 2 KiB apart defeat the hardware
    // prefetchers (qkt 2-5% faster in same-process A/B turns). Hints never fault.
    LLVMValueRef src = rt_l_addr(l, t->src, at0);
    for (int32_t r = 16; r < 32; r++)
        rt_l_prefetch(l, l->f32, src, LLVMBuildMul(b, rt_l_i64(l, r), s_row, ""), 0, 3);
    LLVMValueRef sixteen = rt_l_i64(l, 16);
    LLVMBasicBlockRef bk = rt_l_block(l, "tp.kwhole"), bfull = rt_l_block(l, "tp.full"),
                      bcl = rt_l_block(l, "tp.clamped"), bmk = rt_l_block(l, "tp.masked"),
                      latch = rt_l_block(l, "tp.latch");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, kn, sixteen, ""), bk, bmk);
    LLVMPositionBuilderAtEnd(b, bk);
    LLVMBasicBlockRef bpart = rt_l_block(l, "tp.part");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, rows, sixteen, ""), bfull, bpart);
    LLVMPositionBuilderAtEnd(b, bpart);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGE, rows, rt_l_i64(l, 1), ""), bcl, bmk);
    LLVMValueRef ld = rt_l_i64(l, t->dst_ld), v[16];
    // Column c of the block (k step k0 + c) goes to row k0 + c of the panel.
    for (int32_t form = 0; form < 3; form++) {
        LLVMPositionBuilderAtEnd(b, form == 0 ? bfull : form == 1 ? bcl : bmk);
        rt_l_tpack_block(l, t, at0, s_row, form == 0 ? sixteen : rows,
                         form == 2 ? rt_l_lanes_below(l, kn, 16) : NULL, v);
        for (int32_t c = 0; c < 16; c++) {
            if (form == 2) {
                LLVMBasicBlockRef bs = rt_l_block(l, "tp.st");
                LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, rt_l_i64(l, c), kn, ""), bs, latch);
                LLVMPositionBuilderAtEnd(b, bs);
            }
            LLVMValueRef at = LLVMBuildAdd(
                b, dst0, LLVMBuildMul(b, LLVMBuildAdd(b, k0, rt_l_i64(l, c), ""), ld, ""), "");
            LLVMSetAlignment(LLVMBuildStore(b, v[c], rt_l_addr(l, t->dst, at)), 4);
        }
        LLVMBuildBr(b, latch);
    }
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
        r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntNE, l->uk_apf, rt_l_i64(l, 0), ""), r,
                            rt_l_i64(l, 0), "");
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

void rt_l_ukernel(rt_lemit *l, const rt_kir_ukernel *u) {
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
