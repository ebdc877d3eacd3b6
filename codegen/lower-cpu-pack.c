// lower-cpu-pack.c: the packing of the packed GEMM's A and B panels into per-thread scratch
// (plain strided copies, affine gathers, segments of windowed reads, masked reads).
#include "lower-cpu-impl.h"

#include <math.h>
#include <string.h>

// Where element (row r, k step kk) of panel `panel` goes in a packed copy at dst0: panels of
// kcur k steps, each step w rows wide (the micro-kernel's layout).
static rt_kir_expr *rt_gemm_pack_dst(rt_lower *l, rt_kir_expr *dst0, int32_t vp, int32_t vk,
                                     int32_t vr, rt_kir_expr *kcur, int32_t w) {
    rt_kir_expr *step = rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), kcur), rt_v(l, vk));
    return rt_b(l, RT_KIR_ADD, dst0,
                rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, step, rt_i(l, w)), rt_v(l, vr)));
}

// Panels [plo, phi) of rt_gemm_pack. Guarded panels test every row against valid (and store 0
// beyond it); the full panels before them copy without a test, so that the w-wide row loop
// vectorizes into plain vector loads and stores instead of per-element predicated stores.
static void rt_gemm_pack_panels(rt_lower *l, rt_kir_block *blk, int32_t w, rt_kir_expr *plo,
                                rt_kir_expr *phi, bool guarded, rt_kir_expr *valid,
                                rt_kir_expr *kcur, int32_t src, rt_kir_expr *base, int64_t s_row,
                                int64_t s_k, rt_kir_expr *e_row, rt_kir_expr *e_k, double alpha,
                                rt_kir_expr *dst0, const int32_t *vars, bool vec_edge) {
    rt_arena *a = l->a;
    int32_t vp = vars[0], vk = vars[1], vr = vars[2], vrow = vars[3];
    rt_kir_node *lp = rt_kir_loop(a, blk, vp, plo, phi, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lp);
    if (!lp)
        return;
    if ((!guarded || vec_edge) && s_k == 1 && s_row != 1 && w <= RT_PERF_CPU_MAX_INTERLEAVE) {
        // Source rows contiguous along k (A of a row-major GEMM, conv weights): the k loop
        // runs in vector lanes with the w rows unrolled in its body, so each row is read with
        // plain vector loads and the w-way interleave is done with shuffles, instead of a
        // w-element gather at stride s_row per k. LLVM interleaves at most 8 ways: taller
        // panels (mr = 12) became scatters, slower than the gathers below (12x32 on
        // 256x256x256, one Zen 4 core: 357 us scattered, 344 gathered, 301 for 4x64).
        // A guarded panel (vec_edge) reads row min(row, valid - 1) (valid >= 1 where there is one) and
        // selects 0 beyond valid: the test is uniform over the k lanes, so the edge panel stays
        // on vector loads and shuffles instead of a per-element branch.
        rt_kir_node *lv = rt_kir_loop(a, &lp->body, vk, rt_i(l, 0), kcur, RT_KIR_LOOP_VECTOR);
        RT_LOWER_CHECK(l, lv);
        if (!lv)
            return;
        rt_kir_expr *drow =
            rt_b(l, RT_KIR_ADD, dst0,
                 rt_b(l, RT_KIR_MUL,
                      rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), kcur), rt_v(l, vk)),
                      rt_i(l, w)));
        rt_kir_expr *srow =
            rt_b(l, RT_KIR_ADD, base,
                 rt_b(l, RT_KIR_ADD,
                      rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_b(l, RT_KIR_MUL, rt_i(l, w), e_row)),
                      rt_v(l, vk)));
        for (int32_t r = 0; r < w; r++) {
            rt_kir_expr *idx = rt_b(l, RT_KIR_ADD, srow, rt_b(l, RT_KIR_MUL, rt_i(l, r), e_row));
            rt_kir_expr *row = NULL;
            if (guarded) {
                row = rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w)), rt_i(l, r));
                rt_kir_expr *clamp =
                    rt_b(l, RT_KIR_MIN, row, rt_b(l, RT_KIR_SUB, valid, rt_i(l, 1)));
                idx = rt_b(l, RT_KIR_ADD, base,
                           rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, clamp, e_row), rt_v(l, vk)));
            }
            rt_kir_expr *v = rt_kir_load(a, l->k, src, idx);
            if (alpha != 1.0)
                v = rt_b(l, RT_KIR_MUL, v, rt_kir_flt(a, RT_KIR_F32, alpha));
            if (guarded)
                v = rt_kir_select(a, rt_b(l, RT_KIR_LT, row, valid), v,
                                  rt_kir_flt(a, RT_KIR_F32, 0.0));
            rt_kir_node *st = rt_kir_append(a, &lv->body, RT_KIR_N_STORE);
            RT_LOWER_CHECK(l, st && v && drow);
            if (!st)
                return;
            st->buf = 0;
            st->index = rt_b(l, RT_KIR_ADD, drow, rt_i(l, r));
            st->value = v;
        }
        return;
    }
    rt_kir_node *lk = rt_kir_loop(a, &lp->body, vk, rt_i(l, 0), kcur, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lk);
    if (!lk)
        return;
    rt_kir_node *lr = rt_kir_loop(a, &lk->body, vr, rt_i(l, 0), rt_i(l, w), RT_KIR_LOOP_VECTOR);
    RT_LOWER_CHECK(l, lr);
    if (!lr)
        return;
    rt_let(l, &lr->body, vrow,
           rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w)), rt_v(l, vr)));
    rt_kir_expr *dst = rt_gemm_pack_dst(l, dst0, vp, vk, vr, kcur, w);
    rt_kir_expr *sidx = rt_b(l, RT_KIR_ADD, base,
                             rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vrow), e_row),
                                  rt_b(l, RT_KIR_MUL, rt_v(l, vk), e_k)));
    rt_kir_expr *v = rt_kir_load(a, l->k, src, sidx);
    if (alpha != 1.0)
        v = rt_b(l, RT_KIR_MUL, v, rt_kir_flt(a, RT_KIR_F32, alpha));
    rt_kir_block *sb = &lr->body;
    rt_kir_node *iff = NULL;
    if (guarded) {
        iff = rt_kir_append(a, &lr->body, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, iff);
        if (!iff)
            return;
        iff->cond = rt_b(l, RT_KIR_LT, rt_v(l, vrow), valid);
        sb = &iff->body;
    }
    rt_kir_node *s1 = rt_kir_append(a, sb, RT_KIR_N_STORE);
    RT_LOWER_CHECK(l, s1 && v && dst);
    if (!s1)
        return;
    s1->buf = 0;
    s1->index = dst;
    s1->value = v;
    if (guarded) {
        rt_kir_node *s0 = rt_kir_append(a, &iff->else_body, RT_KIR_N_STORE);
        RT_LOWER_CHECK(l, s0);
        if (!s0)
            return;
        s0->buf = 0;
        s0->index = dst;
        s0->value = rt_kir_flt(a, RT_KIR_F32, 0.0);
    }
}

// A packing copy node named `what` in blk; its body receives the copy loops.
static rt_kir_node *rt_gemm_copy_node(rt_lower *l, rt_kir_block *blk, const char *what) {
    rt_kir_node *copy = rt_kir_append(l->a, blk, RT_KIR_N_COPY);
    RT_LOWER_CHECK(l, copy);
    if (copy)
        copy->text = what;
    return copy;
}

// One packing copy: panels of w rows (rows < valid, else 0) x kcur of src into scratch at dst0:
// scratch[dst0 + (panel*kcur + kk)*w + r] = alpha * src[base + (panel*w + r)*s_row + kk*s_k].
// The valid / w full panels copy unguarded, the partial last panel (if any) guarded.
void rt_gemm_pack(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w, rt_kir_expr *valid,
                  rt_kir_expr *kcur, int32_t src, rt_kir_expr *base, int64_t s_row, int64_t s_k,
                  double alpha, rt_kir_expr *dst0) {
    rt_gemm_pack_strided(l, blk, what, w, valid, kcur, src, base, s_row, s_k, rt_i(l, s_row),
                         rt_i(l, s_k), alpha, dst0);
}

static void rt_gemm_pack_sub_ex(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                                int32_t ws, rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src,
                                rt_kir_expr *base, int64_t s_row, int64_t s_k, rt_kir_expr *e_row,
                                rt_kir_expr *e_k, double alpha, rt_kir_expr *dst0, bool vec_edge);

void rt_gemm_pack_strided(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                          rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                          int64_t s_row, int64_t s_k, rt_kir_expr *e_row, rt_kir_expr *e_k,
                          double alpha, rt_kir_expr *dst0) {
    rt_gemm_pack_sub_ex(l, blk, what, w, w, valid, kcur, src, base, s_row, s_k, e_row, e_k, alpha,
                        dst0, false);
}

void rt_gemm_pack_sub(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w, int32_t ws,
                      rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                      int64_t s_row, int64_t s_k, rt_kir_expr *e_row, rt_kir_expr *e_k,
                      double alpha, rt_kir_expr *dst0) {
    rt_gemm_pack_sub_ex(l, blk, what, w, ws, valid, kcur, src, base, s_row, s_k, e_row, e_k, alpha,
                        dst0, true);
}

static void rt_gemm_pack_sub_ex(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                                int32_t ws, rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src,
                                rt_kir_expr *base, int64_t s_row, int64_t s_k, rt_kir_expr *e_row,
                                rt_kir_expr *e_k, double alpha, rt_kir_expr *dst0, bool vec_edge) {
    rt_arena *a = l->a;
    rt_kir_node *copy = rt_gemm_copy_node(l, blk, what);
    if (!copy)
        return;
    int32_t vars[4] = {
        rt_kir_add_var(a, l->p, "panel", RT_KIR_I64), rt_kir_add_var(a, l->p, "kk", RT_KIR_I64),
        rt_kir_add_var(a, l->p, "r", RT_KIR_I64), rt_kir_add_var(a, l->p, "row", RT_KIR_I64)};
    // Full ws-panels unguarded; then guarded ones up to the end of the last w-wide panel.
    rt_kir_expr *full = rt_b(l, RT_KIR_DIV, valid, rt_i(l, ws));
    rt_kir_expr *all = rt_b(
        l, RT_KIR_MUL, rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, valid, rt_i(l, w - 1)), rt_i(l, w)),
        rt_i(l, w / ws));
    rt_gemm_pack_panels(l, &copy->body, ws, rt_i(l, 0), full, false, valid, kcur, src, base, s_row,
                        s_k, e_row, e_k, alpha, dst0, vars, vec_edge);
    rt_gemm_pack_panels(l, &copy->body, ws, full, all, true, valid, kcur, src, base, s_row, s_k,
                        e_row, e_k, alpha, dst0, vars, vec_edge);
}

void rt_gemm_pack_t16(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                      rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                      rt_kir_expr *s_row, double alpha, rt_kir_expr *dst0) {
    rt_arena *a = l->a;
    int32_t vp = rt_kir_add_var(a, l->p, "bpanel", RT_KIR_I64);
    int32_t vh = rt_kir_add_var(a, l->p, "bsub", RT_KIR_I64);
    int32_t vk = rt_kir_add_var(a, l->p, "bk", RT_KIR_I64);
    int32_t vr = rt_kir_add_var(a, l->p, "br", RT_KIR_I64);
    rt_kir_node *lp =
        vr >= 0 ? rt_kir_loop(
                      a, blk, vp, rt_i(l, 0),
                      rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, valid, rt_i(l, w - 1)), rt_i(l, w)),
                      RT_KIR_LOOP_SERIAL)
                : NULL;
    rt_kir_node *lh =
        lp ? rt_kir_loop(a, &lp->body, vh, rt_i(l, 0), rt_i(l, w / 16), RT_KIR_LOOP_SERIAL) : NULL;
    rt_kir_node *cp = lh ? rt_kir_append(a, &lh->body, RT_KIR_N_COPY) : NULL;
    rt_kir_tpack *t = cp ? rt_arena_alloc(a, sizeof *t) : NULL;
    RT_LOWER_CHECK(l, t);
    if (!t)
        return;
    rt_kir_expr *r0 = rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w)),
                           rt_b(l, RT_KIR_MUL, rt_v(l, vh), rt_i(l, 16)));
    rt_kir_expr *d0 = rt_b(
        l, RT_KIR_ADD, dst0,
        rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_MUL, rt_v(l, vp), kcur), rt_i(l, w)),
             rt_b(l, RT_KIR_MUL, rt_v(l, vh), rt_i(l, 16))));
    *t = (rt_kir_tpack){.src = src,
                        .dst = 0,
                        .base = rt_b(l, RT_KIR_ADD, base, rt_b(l, RT_KIR_MUL, r0, s_row)),
                        .s_row = s_row,
                        .rows =
                            rt_b(l, RT_KIR_MIN, rt_i(l, 16),
                                 rt_b(l, RT_KIR_MAX, rt_i(l, 0), rt_b(l, RT_KIR_SUB, valid, r0))),
                        .kcur = kcur,
                        .dst0 = d0,
                        .dst_ld = w,
                        .alpha = alpha};
    cp->tpack = t;
    cp->text = rt_arena_printf(a, "%s, 16 x 16 transposes", what);
    // The body, element by element: k steps outside, the 16 rows in vector lanes. The whole
    // panel is written: columns left from an earlier pack could hold denormals, on which the
    // micro-kernel's FMAs (whose results are never stored) would run many times slower.
    rt_kir_node *lk = rt_kir_loop(a, &cp->body, vk, rt_i(l, 0), kcur, RT_KIR_LOOP_SERIAL);
    rt_kir_node *lr =
        lk ? rt_kir_loop(a, &lk->body, vr, rt_i(l, 0), rt_i(l, 16), RT_KIR_LOOP_VECTOR) : NULL;
    rt_kir_node *iff = lr ? rt_kir_append(a, &lr->body, RT_KIR_N_IF) : NULL;
    rt_kir_node *s1 = iff ? rt_kir_append(a, &iff->body, RT_KIR_N_STORE) : NULL;
    rt_kir_node *s0 = iff ? rt_kir_append(a, &iff->else_body, RT_KIR_N_STORE) : NULL;
    RT_LOWER_CHECK(l, s1 && s0 && cp->text);
    if (!s0)
        return;
    rt_kir_expr *k = rt_v(l, vk), *r = rt_v(l, vr);
    iff->cond = rt_b(l, RT_KIR_LT, r, t->rows);
    rt_kir_expr *v = rt_kir_load(
        a, l->k, src,
        rt_b(l, RT_KIR_ADD, t->base, rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, r, s_row), k)));
    if (alpha != 1.0)
        v = rt_b(l, RT_KIR_MUL, v, rt_kir_flt(a, RT_KIR_F32, alpha));
    rt_kir_expr *at =
        rt_b(l, RT_KIR_ADD, d0, rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, k, rt_i(l, w)), r));
    s1->buf = s0->buf = 0;
    s1->index = s0->index = at;
    s1->value = v;
    s0->value = rt_kir_flt(a, RT_KIR_F32, 0.0);
    RT_LOWER_CHECK(l, at && v && s0->value);
}

// Binds the statement vars vars[0..n) (outer first, each over [0, hi)) to the digits of the
// flat index x in blk: v_i = x / (product of the later extents) mod hi_i.
void rt_gemm_unflatten(rt_lower *l, rt_kir_block *blk, rt_kir_expr *x, const int32_t *vars,
                       int32_t n) {
    int64_t inner = 1;
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t v = vars[i];
        int64_t hi = 1;
        rt_expr_const_int(l->op, l->s->vars[v].hi, &hi);
        rt_kir_expr *d = inner == 1 ? x : rt_b(l, RT_KIR_DIV, x, rt_i(l, inner));
        if (i > 0)
            d = rt_b(l, RT_KIR_MOD, d, rt_i(l, hi));
        l->var_of[v] = rt_kir_add_var(l->a, l->p, l->s->vars[v].name, RT_KIR_I64);
        RT_LOWER_CHECK(l, l->var_of[v] >= 0);
        if (l->var_of[v] < 0)
            return;
        rt_let(l, blk, l->var_of[v], d);
        inner *= hi;
    }
}

// The implicit GEMM's packing copy: the layout of rt_gemm_pack, each element gathered through
// the read rd itself (its pad value outside the tensor's extent): row row0 + panel*w + r is
// the flat index of the rows vars, k0 + kk that of the ks vars (both outer first).
rt_status rt_gemm_pack_affine(rt_lower *l, rt_kir_block *blk, const rt_gemm_pack_desc *pd) {
    const char *what = pd->what;
    int32_t w = pd->w, n_rows = pd->n_rows, n_ks = pd->n_ks;
    rt_kir_expr *valid = pd->valid, *kcur = pd->kcur, *row0 = pd->row0, *k0 = pd->k0;
    rt_kir_expr *dst0 = pd->dst0;
    const rt_expr *rd = pd->rd;
    const int32_t *rows = pd->rows, *ks = pd->ks;
    double alpha = pd->alpha;
    rt_arena *a = l->a;
    rt_kir_node *copy = rt_gemm_copy_node(l, blk, what);
    if (!copy)
        return RT_OK;
    int32_t vp = rt_kir_add_var(a, l->p, "panel", RT_KIR_I64);
    int32_t vk = rt_kir_add_var(a, l->p, "kk", RT_KIR_I64);
    int32_t vr = rt_kir_add_var(a, l->p, "r", RT_KIR_I64);
    int32_t vrow = rt_kir_add_var(a, l->p, "row", RT_KIR_I64);
    rt_kir_node *lp =
        rt_kir_loop(a, &copy->body, vp, rt_i(l, 0),
                    rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, valid, rt_i(l, w - 1)), rt_i(l, w)),
                    RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lp);
    if (!lp)
        return RT_OK;
    rt_kir_node *lk = rt_kir_loop(a, &lp->body, vk, rt_i(l, 0), kcur, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lk);
    if (!lk)
        return RT_OK;
    rt_gemm_unflatten(l, &lk->body, rt_b(l, RT_KIR_ADD, k0, rt_v(l, vk)), ks, n_ks);
    rt_kir_node *lr = rt_kir_loop(a, &lk->body, vr, rt_i(l, 0), rt_i(l, w), RT_KIR_LOOP_VECTOR);
    RT_LOWER_CHECK(l, lr);
    if (!lr)
        return RT_OK;
    rt_let(l, &lr->body, vrow,
           rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w)), rt_v(l, vr)));
    rt_kir_expr *dst = rt_gemm_pack_dst(l, dst0, vp, vk, vr, kcur, w);
    rt_kir_node *iff = rt_kir_append(a, &lr->body, RT_KIR_N_IF);
    RT_LOWER_CHECK(l, iff);
    if (!iff)
        return RT_OK;
    iff->cond = rt_b(l, RT_KIR_LT, rt_v(l, vrow), valid);
    rt_gemm_unflatten(l, &iff->body, rt_b(l, RT_KIR_ADD, row0, rt_v(l, vrow)), rows, n_rows);
    rt_kir_expr *v;
    RT_TRY(rt_tr_read(l, rd, &v));
    v = rt_kir_cast(a, RT_KIR_F32, v);
    if (alpha != 1.0)
        v = rt_b(l, RT_KIR_MUL, v, rt_kir_flt(a, RT_KIR_F32, alpha));
    rt_kir_node *s1 = rt_kir_append(a, &iff->body, RT_KIR_N_STORE);
    rt_kir_node *s0 = rt_kir_append(a, &iff->else_body, RT_KIR_N_STORE);
    RT_LOWER_CHECK(l, s1 && s0 && v && dst);
    if (!s1 || !s0)
        return RT_OK;
    s1->buf = s0->buf = 0;
    s1->index = s0->index = dst;
    s1->value = v;
    s0->value = rt_kir_flt(a, RT_KIR_F32, 0.0);
    return RT_OK;
}

// The dim of read rd that the rows' innermost var x indexes, and x's coefficient there: the
// segmented pack needs x in exactly one dim with a positive coefficient (false otherwise).
bool rt_gemm_seg_dim(const rt_lower *l, const rt_expr *rd, int32_t x, int32_t *dx, int64_t *sx) {
    *dx = -1;
    *sx = 0;
    for (int32_t d = 0; d < rd->n_args; d++) {
        rt_affine af;
        if (!rt_expr_affine(l->op, rd->args[d], &af))
            return false;
        int64_t c = 0;
        for (int32_t i = 0; i < af.n_terms; i++)
            if (af.var[i] == x)
                c += af.coef[i];
        if (c == 0)
            continue;
        if (*dx >= 0 || c < 0)
            return false;
        *dx = d;
        *sx = c;
    }
    return *dx >= 0;
}

static rt_kir_node *rt_seg_loop(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *lo,
                                rt_kir_expr *hi, rt_kir_loop_kind kind) {
    rt_kir_node *n = rt_kir_loop(l->a, blk, var, lo, hi, kind);
    RT_LOWER_CHECK(l, n);
    return n;
}

static void rt_seg_store(rt_lower *l, rt_kir_block *blk, rt_kir_expr *index, rt_kir_expr *v) {
    rt_kir_node *st = rt_kir_append(l->a, blk, RT_KIR_N_STORE);
    RT_LOWER_CHECK(l, st && index && v);
    if (!st)
        return;
    st->buf = 0;
    st->index = index;
    st->value = v;
}

// The implicit GEMM's packing copy without per-element index arithmetic (same layout as
// rt_gemm_pack_affine). For each k of the block (its vars unflattened once) and each w-row
// panel, the panel's rows split into segments of constant outer row vars; in a segment the
// innermost row var x only moves along dim dx of rd (coefficient sx), so the bounds of every
// other dim are one scalar test and those of dim dx one clamped x range [xlo, xhi): the rows
// outside it take the pad value, the rows inside are a strided run of the source (contiguous
// for stride 1, vectorized); rows of the last panel past `valid` are zero.
rt_status rt_gemm_pack_segments(rt_lower *l, rt_kir_block *blk, const rt_gemm_pack_desc *pd,
                                int32_t dx, int64_t sx) {
    const char *what = pd->what;
    int32_t w = pd->w, n_rows = pd->n_rows, n_ks = pd->n_ks;
    rt_kir_expr *valid = pd->valid, *kcur = pd->kcur, *row0 = pd->row0, *k0 = pd->k0;
    rt_kir_expr *dst0 = pd->dst0;
    const rt_expr *rd = pd->rd;
    const int32_t *rows = pd->rows, *ks = pd->ks;
    double alpha = pd->alpha;
    rt_arena *a = l->a;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int32_t x = rows[n_rows - 1];
    int64_t X = 1;
    rt_expr_const_int(l->op, l->s->vars[x].hi, &X);
    rt_kir_node *copy = rt_gemm_copy_node(l, blk, what);
    if (!copy)
        return RT_OK;
    int32_t vk = rt_kir_add_var(a, l->p, "kk", RT_KIR_I64);
    int32_t vp = rt_kir_add_var(a, l->p, "panel", RT_KIR_I64);
    int32_t vjb = rt_kir_add_var(a, l->p, "jb", RT_KIR_I64);
    int32_t vje = rt_kir_add_var(a, l->p, "je", RT_KIR_I64);
    int32_t vdb = rt_kir_add_var(a, l->p, "dbase", RT_KIR_I64);
    int32_t vq = rt_kir_add_var(a, l->p, "q", RT_KIR_I64);
    int32_t vxa = rt_kir_add_var(a, l->p, "xa", RT_KIR_I64);
    int32_t vxb = rt_kir_add_var(a, l->p, "xb", RT_KIR_I64);
    int32_t vxlo = rt_kir_add_var(a, l->p, "xlo", RT_KIR_I64);
    int32_t vxhi = rt_kir_add_var(a, l->p, "xhi", RT_KIR_I64);
    int32_t vo0 = rt_kir_add_var(a, l->p, "o0", RT_KIR_I64);
    int32_t vsb = rt_kir_add_var(a, l->p, "sbase", RT_KIR_I64);
    int32_t vx = rt_kir_add_var(a, l->p, l->s->vars[x].name, RT_KIR_I64);
    int32_t vz = rt_kir_add_var(a, l->p, "tail", RT_KIR_I64);
    RT_LOWER_CHECK(l, vk >= 0 && vp >= 0 && vjb >= 0 && vje >= 0 && vdb >= 0 && vq >= 0 &&
                          vxa >= 0 && vxb >= 0 && vxlo >= 0 && vxhi >= 0 && vo0 >= 0 && vsb >= 0 &&
                          vx >= 0 && vz >= 0);
    if (l->oom)
        return RT_OK;
    rt_kir_node *lk = rt_seg_loop(l, &copy->body, vk, rt_i(l, 0), kcur, RT_KIR_LOOP_SERIAL);
    if (!lk)
        return RT_OK;
    rt_gemm_unflatten(l, &lk->body, rt_b(l, RT_KIR_ADD, k0, rt_v(l, vk)), ks, n_ks);
    rt_kir_node *lp =
        rt_seg_loop(l, &lk->body, vp, rt_i(l, 0),
                    rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, valid, rt_i(l, w - 1)), rt_i(l, w)),
                    RT_KIR_LOOP_SERIAL);
    if (!lp)
        return RT_OK;
    rt_kir_block *pb = &lp->body;
    // Panel rows [jb, je) of the flat row index; dst of row j is dbase + j.
    rt_let(l, pb, vjb, rt_b(l, RT_KIR_ADD, row0, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w))));
    rt_let(l, pb, vje,
           rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_ADD, rt_v(l, vjb), rt_i(l, w)),
                rt_b(l, RT_KIR_ADD, row0, valid)));
    rt_let(l, pb, vdb,
           rt_b(l, RT_KIR_SUB,
                rt_b(l, RT_KIR_ADD, dst0,
                     rt_b(l, RT_KIR_MUL,
                          rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), kcur), rt_v(l, vk)),
                          rt_i(l, w))),
                rt_v(l, vjb)));
    rt_kir_node *lq = rt_seg_loop(
        l, pb, vq, rt_b(l, RT_KIR_DIV, rt_v(l, vjb), rt_i(l, X)),
        rt_b(l, RT_KIR_ADD,
             rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_SUB, rt_v(l, vje), rt_i(l, 1)), rt_i(l, X)),
             rt_i(l, 1)),
        RT_KIR_LOOP_SERIAL);
    if (!lq)
        return RT_OK;
    rt_kir_block *qb = &lq->body;
    rt_gemm_unflatten(l, qb, rt_v(l, vq), rows, n_rows - 1);
    rt_kir_expr *qx = rt_b(l, RT_KIR_MUL, rt_v(l, vq), rt_i(l, X));
    rt_let(l, qb, vxa, rt_b(l, RT_KIR_MAX, rt_b(l, RT_KIR_SUB, rt_v(l, vjb), qx), rt_i(l, 0)));
    rt_let(l, qb, vxb, rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_SUB, rt_v(l, vje), qx), rt_i(l, X)));
    // The read's indices at x = 0 (x's phase var is 0 here, the run variable below).
    l->var_of[x] = vx;
    rt_let(l, qb, vx, rt_i(l, 0));
    rt_kir_expr *idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < rd->n_args; d++)
        RT_TRY(rt_tr_int(l, rd->args[d], &idx[d]));
    int64_t step = sx;
    for (int32_t d = tn->n_dims - 1; d > dx; d--)
        step *= l->extent[rd->tensor][d];
    rt_let(l, qb, vo0, rt_tr_offset(l, rd->tensor, idx, NULL));
    rt_kir_expr *pad = rt_kir_flt(a, RT_KIR_F32, alpha * tn->pad_value);
    if (tn->has_pad) {
        rt_kir_expr *ok = rt_i(l, 1);
        for (int32_t d = 0; d < tn->n_dims; d++)
            if (d != dx)
                ok = rt_b(l, RT_KIR_AND, ok,
                          rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_GE, idx[d], rt_i(l, 0)),
                               rt_b(l, RT_KIR_LT, idx[d], rt_i(l, l->extent[rd->tensor][d]))));
        // 0 <= kx + sx*x < ext  <=>  ceil(-kx / sx) <= x < ceil((ext - kx) / sx).
        rt_kir_expr *lo =
            rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_SUB, rt_i(l, sx - 1), idx[dx]), rt_i(l, sx));
        rt_kir_expr *hi = rt_b(
            l, RT_KIR_DIV,
            rt_b(l, RT_KIR_SUB, rt_i(l, l->extent[rd->tensor][dx] + sx - 1), idx[dx]), rt_i(l, sx));
        rt_let(l, qb, vxlo,
               rt_kir_select(
                   a, ok, rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_MAX, lo, rt_v(l, vxa)), rt_v(l, vxb)),
                   rt_v(l, vxb)));
        rt_let(l, qb, vxhi,
               rt_b(l, RT_KIR_MAX, rt_b(l, RT_KIR_MIN, hi, rt_v(l, vxb)), rt_v(l, vxlo)));
    } else {
        rt_let(l, qb, vxlo, rt_v(l, vxa));
        rt_let(l, qb, vxhi, rt_v(l, vxb));
    }
    rt_let(l, qb, vsb, rt_b(l, RT_KIR_ADD, rt_v(l, vdb), qx));
    if (tn->has_pad) {
        rt_kir_node *l1 = rt_seg_loop(l, qb, vx, rt_v(l, vxa), rt_v(l, vxlo), RT_KIR_LOOP_VECTOR);
        if (l1)
            rt_seg_store(l, &l1->body, rt_b(l, RT_KIR_ADD, rt_v(l, vsb), rt_v(l, vx)), pad);
    }
    rt_kir_node *l2 = rt_seg_loop(l, qb, vx, rt_v(l, vxlo), rt_v(l, vxhi), RT_KIR_LOOP_VECTOR);
    if (l2) {
        rt_kir_expr *v = rt_kir_load(
            a, l->k, l->data_buf[rd->tensor],
            rt_b(l, RT_KIR_ADD, rt_v(l, vo0), rt_b(l, RT_KIR_MUL, rt_v(l, vx), rt_i(l, step))));
        if (alpha != 1.0)
            v = rt_b(l, RT_KIR_MUL, v, rt_kir_flt(a, RT_KIR_F32, alpha));
        rt_seg_store(l, &l2->body, rt_b(l, RT_KIR_ADD, rt_v(l, vsb), rt_v(l, vx)), v);
    }
    if (tn->has_pad) {
        rt_kir_node *l3 = rt_seg_loop(l, qb, vx, rt_v(l, vxhi), rt_v(l, vxb), RT_KIR_LOOP_VECTOR);
        if (l3)
            rt_seg_store(l, &l3->body, rt_b(l, RT_KIR_ADD, rt_v(l, vsb), rt_v(l, vx)), pad);
    }
    // The last panel's rows past valid are zero.
    rt_kir_node *lz = rt_seg_loop(
        l, pb, vz, rt_v(l, vje), rt_b(l, RT_KIR_ADD, rt_v(l, vjb), rt_i(l, w)), RT_KIR_LOOP_VECTOR);
    if (lz)
        rt_seg_store(l, &lz->body, rt_b(l, RT_KIR_ADD, rt_v(l, vdb), rt_v(l, vz)),
                     rt_kir_flt(a, RT_KIR_F32, 0.0));
    return RT_OK;
}

bool rt_gemm_mask_plan(const rt_lower *l, const rt_expr *rd, const int32_t *rows, int32_t n_rows,
                       rt_gemm_mask *mp) {
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    const rt_stmt *s = l->s;
    if (!tn->has_pad || tn->ragged || tn->dtype != RT_DTYPE_F32 || rd->n_args != tn->n_dims ||
        n_rows < 1 || s->n_vars > 16)
        return false;
    int64_t csrc[16] = {0}; // source offset coefficient of each statement var
    int64_t stride = 1;
    mp->n_dims = 0;
    for (int32_t d = tn->n_dims - 1; d >= 0; d--) {
        int64_t ext = l->extent[rd->tensor][d];
        rt_affine *af = &mp->af[d];
        if (ext < 1 || ext >= (1 << 22) || !rt_expr_affine(l->op, rd->args[d], af))
            return false;
        bool moves = false;
        int64_t span = af->c0 < 0 ? -af->c0 : af->c0;
        for (int32_t i = 0; i < af->n_terms; i++) {
            int32_t v = af->var[i];
            int64_t lo, hi, c = af->coef[i];
            if (v < 0 || v >= s->n_vars || !rt_expr_const_int(l->op, s->vars[v].lo, &lo) ||
                lo != 0 || !rt_expr_const_int(l->op, s->vars[v].hi, &hi) || c <= -(1 << 22) ||
                c >= (1 << 22) || hi >= (1 << 22))
                return false;
            span += (c < 0 ? -c : c) * hi;
            csrc[v] += c * stride;
            for (int32_t r = 0; r < n_rows; r++)
                moves = moves || (rows[r] == v && c != 0);
        }
        if (span >= (1 << 22))
            return false;
        if (moves)
            mp->dim[mp->n_dims++] = d;
        stride *= ext;
    }
    for (int32_t i = 0; i < mp->n_dims / 2; i++) { // dims in increasing order
        int32_t t = mp->dim[i];
        mp->dim[i] = mp->dim[mp->n_dims - 1 - i];
        mp->dim[mp->n_dims - 1 - i] = t;
    }
    int64_t run = 1;
    for (int32_t i = n_rows - 1; i >= 0; i--) {
        int64_t hi = 0;
        if (csrc[rows[i]] != run || !rt_expr_const_int(l->op, s->vars[rows[i]].hi, &hi))
            return false;
        run *= hi;
    }
    return mp->n_dims > 0;
}

// The pack itself (layout of rt_gemm_pack_affine): tables of mp->n_dims x tbl_stride floats at
// scratch offset tbl0 (the rows' part of each moving index per row of the block, -1e30 past
// `valid` so those lanes read the pad value), then per k the bounds and per panel the masked
// vector loop.
rt_status rt_gemm_pack_masked(rt_lower *l, rt_kir_block *blk, const rt_gemm_pack_desc *pd,
                              const rt_gemm_mask *mp, int64_t tbl0, int64_t tbl_stride) {
    const char *what = pd->what;
    int32_t w = pd->w, n_rows = pd->n_rows, n_ks = pd->n_ks;
    rt_kir_expr *valid = pd->valid, *kcur = pd->kcur, *row0 = pd->row0, *k0 = pd->k0;
    rt_kir_expr *dst0 = pd->dst0;
    const rt_expr *rd = pd->rd;
    const int32_t *rows = pd->rows, *ks = pd->ks;
    double alpha = pd->alpha;
    rt_arena *a = l->a;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    rt_kir_node *copy = rt_gemm_copy_node(l, blk, what);
    if (!copy)
        return RT_OK;
    int32_t vj = rt_kir_add_var(a, l->p, "jj", RT_KIR_I64);
    int32_t vk = rt_kir_add_var(a, l->p, "kk", RT_KIR_I64);
    int32_t vp = rt_kir_add_var(a, l->p, "panel", RT_KIR_I64);
    int32_t vr = rt_kir_add_var(a, l->p, "r", RT_KIR_I64);
    int32_t vo = rt_kir_add_var(a, l->p, "o", RT_KIR_I64);
    int32_t vok = rt_kir_add_var(a, l->p, "ok", RT_KIR_I64);
    int32_t vz = rt_kir_add_var(a, l->p, "zero", RT_KIR_I64);
    int32_t vv = rt_kir_add_var(a, l->p, "v", RT_KIR_F32);
    int32_t vlo[RT_MAX_DIMS], vhi[RT_MAX_DIMS];
    bool vars_ok =
        vj >= 0 && vk >= 0 && vp >= 0 && vr >= 0 && vo >= 0 && vok >= 0 && vz >= 0 && vv >= 0;
    for (int32_t t = 0; t < mp->n_dims; t++) {
        vlo[t] = rt_kir_add_var(a, l->p, "tlo", RT_KIR_F32);
        vhi[t] = rt_kir_add_var(a, l->p, "thi", RT_KIR_F32);
        vars_ok = vars_ok && vlo[t] >= 0 && vhi[t] >= 0;
    }
    RT_LOWER_CHECK(l, vars_ok);
    if (!vars_ok)
        return RT_OK;
    rt_kir_expr *npan = rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, valid, rt_i(l, w - 1)), rt_i(l, w));
    // Tables: row jj of the block, its rows vars unflattened once per block.
    rt_kir_node *lt = rt_seg_loop(l, &copy->body, vj, rt_i(l, 0),
                                  rt_b(l, RT_KIR_MUL, npan, rt_i(l, w)), RT_KIR_LOOP_SERIAL);
    if (!lt)
        return RT_OK;
    rt_kir_node *in = rt_kir_append(a, &lt->body, RT_KIR_N_IF);
    RT_LOWER_CHECK(l, in);
    if (!in)
        return RT_OK;
    in->cond = rt_b(l, RT_KIR_LT, rt_v(l, vj), valid);
    rt_gemm_unflatten(l, &in->body, rt_b(l, RT_KIR_ADD, row0, rt_v(l, vj)), rows, n_rows);
    for (int32_t t = 0; t < mp->n_dims; t++) {
        const rt_affine *af = &mp->af[mp->dim[t]];
        rt_kir_expr *part = rt_i(l, 0);
        for (int32_t i = 0; i < af->n_terms; i++)
            for (int32_t r = 0; r < n_rows; r++)
                if (af->var[i] == rows[r])
                    part = rt_b(
                        l, RT_KIR_ADD, part,
                        rt_b(l, RT_KIR_MUL, rt_v(l, l->var_of[rows[r]]), rt_i(l, af->coef[i])));
        rt_kir_expr *at = rt_b(l, RT_KIR_ADD, rt_i(l, tbl0 + t * tbl_stride), rt_v(l, vj));
        rt_seg_store(l, &in->body, at, rt_kir_cast(a, RT_KIR_F32, part));
        rt_seg_store(l, &in->else_body, at, rt_kir_flt(a, RT_KIR_F32, -1e30));
    }
    rt_kir_node *lk = rt_seg_loop(l, &copy->body, vk, rt_i(l, 0), kcur, RT_KIR_LOOP_SERIAL);
    if (!lk)
        return RT_OK;
    rt_kir_block *kb = &lk->body;
    rt_gemm_unflatten(l, kb, rt_b(l, RT_KIR_ADD, k0, rt_v(l, vk)), ks, n_ks);
    // The read's indices with every rows var at 0: the k (and batch) part of each index.
    rt_let(l, kb, vz, rt_i(l, 0));
    for (int32_t r = 0; r < n_rows; r++)
        l->var_of[rows[r]] = vz;
    rt_kir_expr *idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < rd->n_args; d++)
        RT_TRY(rt_tr_int(l, rd->args[d], &idx[d]));
    rt_kir_expr *ok = rt_i(l, 1);
    for (int32_t d = 0, t = 0; d < tn->n_dims; d++) {
        int64_t ext = l->extent[rd->tensor][d];
        if (t < mp->n_dims && mp->dim[t] == d) {
            rt_kir_node *f0 = rt_kir_append(a, kb, RT_KIR_N_FSET);
            rt_kir_node *f1 = rt_kir_append(a, kb, RT_KIR_N_FSET);
            RT_LOWER_CHECK(l, f0 && f1);
            if (!f0 || !f1)
                return RT_OK;
            f0->var = vlo[t];
            f0->value = rt_kir_cast(a, RT_KIR_F32, rt_b(l, RT_KIR_SUB, rt_i(l, 0), idx[d]));
            f1->var = vhi[t];
            f1->value = rt_kir_cast(a, RT_KIR_F32, rt_b(l, RT_KIR_SUB, rt_i(l, ext), idx[d]));
            t++;
            continue;
        }
        ok = rt_b(l, RT_KIR_AND, ok,
                  rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_GE, idx[d], rt_i(l, 0)),
                       rt_b(l, RT_KIR_LT, idx[d], rt_i(l, ext))));
    }
    rt_let(l, kb, vok, ok);
    rt_let(l, kb, vo, rt_b(l, RT_KIR_ADD, rt_tr_offset(l, rd->tensor, idx, NULL), row0));
    rt_kir_node *lp = rt_seg_loop(l, kb, vp, rt_i(l, 0), npan, RT_KIR_LOOP_SERIAL);
    if (!lp)
        return RT_OK;
    rt_kir_node *lr = rt_seg_loop(l, &lp->body, vr, rt_i(l, 0), rt_i(l, w), RT_KIR_LOOP_VECTOR);
    if (!lr)
        return RT_OK;
    rt_kir_block *rb = &lr->body;
    rt_let(l, rb, vj,
           rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w)), rt_v(l, vr)));
    rt_kir_node *v0 = rt_kir_append(a, rb, RT_KIR_N_FSET);
    rt_kir_node *iv = rt_kir_append(a, rb, RT_KIR_N_IF);
    RT_LOWER_CHECK(l, v0 && iv);
    if (!v0 || !iv)
        return RT_OK;
    v0->var = vv;
    v0->value = rt_kir_flt(a, RT_KIR_F32, alpha * tn->pad_value);
    rt_kir_expr *cond = rt_v(l, vok);
    for (int32_t t = 0; t < mp->n_dims; t++) {
        rt_kir_expr *tv = rt_kir_load(
            a, l->k, 0, rt_b(l, RT_KIR_ADD, rt_i(l, tbl0 + t * tbl_stride), rt_v(l, vj)));
        cond = rt_b(l, RT_KIR_AND, cond,
                    rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_GE, tv, rt_v(l, vlo[t])),
                         rt_b(l, RT_KIR_LT, tv, rt_v(l, vhi[t]))));
    }
    iv->cond = cond;
    rt_kir_expr *x = rt_kir_load(a, l->k, l->data_buf[rd->tensor],
                                 rt_b(l, RT_KIR_ADD, rt_v(l, vo), rt_v(l, vj)));
    if (alpha != 1.0)
        x = rt_b(l, RT_KIR_MUL, x, rt_kir_flt(a, RT_KIR_F32, alpha));
    rt_kir_node *v1 = rt_kir_append(a, &iv->body, RT_KIR_N_FSET);
    RT_LOWER_CHECK(l, v1 && x && cond);
    if (!v1)
        return RT_OK;
    v1->var = vv;
    v1->value = x;
    rt_kir_expr *dst = rt_gemm_pack_dst(l, dst0, vp, vk, vr, kcur, w);
    rt_seg_store(l, rb, dst, rt_v(l, vv));
    return RT_OK;
}
