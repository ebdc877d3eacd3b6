// lower-cpu-tri.c: triangular (affine-range) contractions on the packed GEMM (rt_lower_gemm with
// g->tri.on): detection (perfmodel/cpu-tri.c's rule), the order of the row blocks, the k blocks
// an item runs, each row panel's k steps, and the masked pack of A from its (packed) storage.
// Row m of the GEMM reduces over k in [lo0 + lo1 m, hi0 + hi1 m) within [0, K) (rt_perf_tri).
#include "lower-cpu-impl.h"

#include <string.h>

bool rt_gemm_detect_tri(const rt_lower *l, int32_t si, rt_gemm *g) {
    rt_perf_tri t;
    if (!rt_perf_tri_detect(l->op, si, &t))
        return false;
    const rt_stmt *s = &l->op->stmts[si];
    int32_t ta = t.ra->tensor, tb = t.rb->tensor;
    if (l->data_buf[ta] < 0 || l->data_buf[tb] < 0 || l->extent[tb][0] != t.K ||
        l->extent[tb][1] != t.N || l->extent[s->out][0] != t.M || l->extent[s->out][1] != t.N)
        return false;
    memset(g, 0, sizeof *g);
    g->stmt = si;
    g->batch = 1;
    g->alpha = t.alpha;
    g->ta = ta, g->tb = tb, g->ra = t.ra, g->rb = t.rb;
    g->M = t.M, g->N = t.N, g->K = t.K;
    g->am = 0, g->ak = 1, g->bk = t.N, g->bn = 1, g->cm = t.N;
    g->m_var = t.m_var, g->n_var = t.n_var, g->k_var = t.k_var;
    g->tri = t.range;
    g->tri_s = t.s, g->tri_c = t.c;
    return true;
}

// Range bound c0 + c1 * x.
static rt_kir_expr *rt_tri_at(rt_lower *l, int64_t c0, int64_t c1, rt_kir_expr *x) {
    return rt_b(l, RT_KIR_ADD, rt_i(l, c0), rt_b(l, RT_KIR_MUL, rt_i(l, c1), x));
}

static rt_kir_expr *rt_tri_clamp(rt_lower *l, rt_kir_expr *x, rt_kir_expr *lo, rt_kir_expr *hi) {
    return rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_MAX, x, lo), hi);
}

// The union of the ranges of rows [first, last] (both ends of an affine range), less off.
static void rt_tri_rows(rt_lower *l, const rt_gemm *g, rt_kir_expr *(*first)(rt_lower *, void *),
                        rt_kir_expr *(*last)(rt_lower *, void *), void *ctx, rt_kir_expr **a,
                        rt_kir_expr **b) {
    const rt_perf_tri_range *r = &g->tri;
    *a = rt_tri_at(l, r->lo0, r->lo1, r->lo1 >= 0 ? first(l, ctx) : last(l, ctx));
    *b = rt_tri_at(l, r->hi0, r->hi1, r->hi1 >= 0 ? last(l, ctx) : first(l, ctx));
}

rt_kir_expr *rt_gemm_tri_row_block(rt_lower *l, const rt_gemm *g, rt_kir_expr *q, int64_t mt) {
    if (!g->tri.on)
        return q;
    // rt_perf_tri_row_block: longest-first pairs, so that any even run of positions (a core's
    // share: rt_perf_cpu_tri_block makes it even) holds rows of equal total work.
    bool grows = g->tri.hi1 - g->tri.lo1 >= 0;
    rt_kir_expr *half = rt_b(l, RT_KIR_DIV, q, rt_i(l, 2));
    rt_kir_expr *top = rt_b(l, RT_KIR_SUB, rt_i(l, mt - 1), half);
    rt_kir_expr *even = rt_b(l, RT_KIR_EQ, rt_b(l, RT_KIR_MOD, q, rt_i(l, 2)), rt_i(l, 0));
    return grows ? rt_kir_select(l->a, even, top, half) : rt_kir_select(l->a, even, half, top);
}

typedef struct rt_tri_blk {
    int32_t vi0, vmc;
} rt_tri_blk;

static rt_kir_expr *rt_tri_blk_first(rt_lower *l, void *ctx) {
    return rt_v(l, ((rt_tri_blk *)ctx)->vi0);
}

static rt_kir_expr *rt_tri_blk_last(rt_lower *l, void *ctx) {
    const rt_tri_blk *c = ctx;
    return rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, rt_v(l, c->vi0), rt_v(l, c->vmc)), rt_i(l, 1));
}

void rt_gemm_tri_kblocks(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vi0, int32_t vmc,
                         int32_t *vpk_lo, int32_t *vpk_hi) {
    rt_arena *a = l->a;
    int32_t vlo = rt_kir_add_var(a, l->p, "tri_klo", RT_KIR_I64),
            vhi = rt_kir_add_var(a, l->p, "tri_khi", RT_KIR_I64);
    *vpk_lo = rt_kir_add_var(a, l->p, "pk_lo", RT_KIR_I64);
    *vpk_hi = rt_kir_add_var(a, l->p, "pk_hi", RT_KIR_I64);
    RT_LOWER_CHECK(l, vlo >= 0 && vhi >= 0 && *vpk_lo >= 0 && *vpk_hi >= 0);
    if (vlo < 0 || vhi < 0 || *vpk_lo < 0 || *vpk_hi < 0)
        return;
    rt_kir_node *c = rt_kir_append(a, blk, RT_KIR_N_COMMENT);
    RT_LOWER_CHECK(l, c);
    if (c)
        c->text = "triangular k range of the row block: only the k blocks it meets";
    rt_tri_blk ctx = {vi0, vmc};
    rt_kir_expr *x, *y;
    rt_tri_rows(l, g, rt_tri_blk_first, rt_tri_blk_last, &ctx, &x, &y);
    rt_let(l, blk, vlo, rt_tri_clamp(l, x, rt_i(l, 0), rt_i(l, g->K)));
    rt_let(l, blk, vhi, rt_tri_clamp(l, y, rt_v(l, vlo), rt_i(l, g->K)));
    // At least one k block: a row block of empty ranges still stores its zeros (+=!).
    int64_t nkb = rt_ceil_div(g->K, g->kc);
    rt_let(
        l, blk, *vpk_lo,
        rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_DIV, rt_v(l, vlo), rt_i(l, g->kc)), rt_i(l, nkb - 1)));
    rt_let(l, blk, *vpk_hi,
           rt_b(l, RT_KIR_MAX,
                rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, rt_v(l, vhi), rt_i(l, g->kc - 1)),
                     rt_i(l, g->kc)),
                rt_b(l, RT_KIR_ADD, rt_v(l, *vpk_lo), rt_i(l, 1))));
}

// The row block's range [*lo, *hi) within [0, K), as rt_gemm_tri_kblocks has it, again (a few
// operations where it is used) rather than vars carried from there.
static void rt_tri_blk_range(rt_lower *l, const rt_gemm *g, int32_t vi0, int32_t vmc,
                             rt_kir_expr **lo, rt_kir_expr **hi) {
    rt_tri_blk ctx = {vi0, vmc};
    rt_kir_expr *x, *y;
    rt_tri_rows(l, g, rt_tri_blk_first, rt_tri_blk_last, &ctx, &x, &y);
    *lo = rt_tri_clamp(l, x, rt_i(l, 0), rt_i(l, g->K));
    *hi = rt_tri_clamp(l, y, *lo, rt_i(l, g->K));
}

rt_kir_expr *rt_gemm_tri_khi(rt_lower *l, const rt_gemm *g, int32_t vi0, int32_t vmc) {
    rt_kir_expr *lo, *hi;
    rt_tri_blk_range(l, g, vi0, vmc, &lo, &hi);
    return hi;
}

void rt_gemm_tri_kclamp(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vi0, int32_t vmc,
                        int32_t vp0, int32_t vkc) {
    rt_kir_expr *lo, *hi;
    rt_tri_blk_range(l, g, vi0, vmc, &lo, &hi);
    // [p0, p0 + kcur) within [lo, hi): kcur first, from the block's own p0.
    rt_let(l, blk, vkc,
           rt_b(l, RT_KIR_MAX,
                rt_b(l, RT_KIR_SUB,
                     rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_ADD, rt_v(l, vp0), rt_v(l, vkc)), hi),
                     rt_b(l, RT_KIR_MAX, rt_v(l, vp0), lo)),
                rt_i(l, 0)));
    rt_let(l, blk, vp0, rt_b(l, RT_KIR_MAX, rt_v(l, vp0), lo));
}

typedef struct rt_tri_pan {
    int32_t vi0, vmc, vip;
    int64_t mr;
} rt_tri_pan;

static rt_kir_expr *rt_tri_pan_first(rt_lower *l, void *ctx) {
    const rt_tri_pan *c = ctx;
    return rt_b(l, RT_KIR_ADD, rt_v(l, c->vi0),
                rt_b(l, RT_KIR_MUL, rt_v(l, c->vip), rt_i(l, c->mr)));
}

static rt_kir_expr *rt_tri_pan_last(rt_lower *l, void *ctx) {
    const rt_tri_pan *c = ctx;
    rt_kir_expr *end =
        rt_b(l, RT_KIR_MIN,
             rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, rt_v(l, c->vip), rt_i(l, 1)), rt_i(l, c->mr)),
             rt_v(l, c->vmc));
    return rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, rt_v(l, c->vi0), end), rt_i(l, 1));
}

void rt_gemm_tri_panel_k(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vip, int32_t vi0,
                         int32_t vmc, int32_t vp0, int32_t vkc, int32_t *vks, int32_t *vkn) {
    rt_arena *a = l->a;
    *vks = rt_kir_add_var(a, l->p, "uk_k0", RT_KIR_I64);
    *vkn = rt_kir_add_var(a, l->p, "uk_kn", RT_KIR_I64);
    RT_LOWER_CHECK(l, *vks >= 0 && *vkn >= 0);
    if (*vks < 0 || *vkn < 0)
        return;
    // The panel's k steps in the block: outside them every row of its A panel is zero.
    rt_tri_pan ctx = {vi0, vmc, vip, g->mr};
    rt_kir_expr *x, *y;
    rt_tri_rows(l, g, rt_tri_pan_first, rt_tri_pan_last, &ctx, &x, &y);
    rt_let(l, blk, *vks,
           rt_tri_clamp(l, rt_b(l, RT_KIR_SUB, x, rt_v(l, vp0)), rt_i(l, 0), rt_v(l, vkc)));
    rt_let(l, blk, *vkn,
           rt_b(l, RT_KIR_SUB,
                rt_tri_clamp(l, rt_b(l, RT_KIR_SUB, y, rt_v(l, vp0)), rt_v(l, *vks), rt_v(l, vkc)),
                rt_v(l, *vks)));
}

static void rt_tri_store(rt_lower *l, rt_kir_block *blk, rt_kir_expr *at, rt_kir_expr *v) {
    rt_kir_node *st = rt_kir_append(l->a, blk, RT_KIR_N_STORE);
    RT_LOWER_CHECK(l, st && at && v);
    if (!st)
        return;
    st->buf = 0;
    st->index = at;
    st->value = v;
}

static void rt_tri_fset(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *v) {
    rt_kir_node *f = rt_kir_append(l->a, blk, RT_KIR_N_FSET);
    RT_LOWER_CHECK(l, f && v);
    if (!f)
        return;
    f->var = var;
    f->value = v;
}

// The A block (rows [i0, i0 + mcur), k steps [p0, p0 + kcur)) as mr-tall k-major panels: per
// panel, each row's base offset in A's storage (the layout's offset of A(m, 0): start arrays
// of packed triangular storage, or the row stride of a dense A) and its k steps in the block;
// then one vector loop over k with the mr rows unrolled, each a masked contiguous load (zero
// outside its row's range, and for the rows past mcur).
// own_k: each panel over its rows' k steps only (the union of their ranges), which are all its
// micro-kernel calls read (rt_gemm_tri_panel_k's range lies within it); else over the block's.
static rt_status rt_tri_pack_a(rt_lower *l, rt_kir_block *blk, const rt_gemm *g, int32_t vmc,
                               int32_t vkc, int32_t vi0, int32_t vp0, int64_t dst0, bool own_k) {
    rt_arena *a = l->a;
    int32_t w = g->mr;
    if (w > 32)
        return rt_fail(l->err, RT_ERR_BACKEND, RT_NOLOC, "internal: micro-panel over 32 rows");
    rt_kir_node *copy = rt_kir_append(a, blk, RT_KIR_N_COPY);
    RT_LOWER_CHECK(l, copy);
    if (!copy)
        return RT_OK;
    copy->text = own_k ? "A block -> scratch, mr-tall k-major panels of the triangular A's rows, "
                         "each over its rows' k steps, zero outside each row's range (L3 level; "
                         "one in L1 at a time)"
                       : "A block -> scratch, mr-tall k-major panels of the triangular A's rows, "
                         "zero outside each row's k range (L3 level; one in L1 at a time)";
    int32_t vp = rt_kir_add_var(a, l->p, "panel", RT_KIR_I64);
    int32_t vk = rt_kir_add_var(a, l->p, "kk", RT_KIR_I64);
    int32_t vlo[32], vhi[32], vbase[32], vval[32];
    bool ok = vp >= 0 && vk >= 0;
    for (int32_t r = 0; r < w; r++) {
        vlo[r] = rt_kir_add_var(a, l->p, "row_klo", RT_KIR_I64);
        vhi[r] = rt_kir_add_var(a, l->p, "row_khi", RT_KIR_I64);
        vbase[r] = rt_kir_add_var(a, l->p, "row_base", RT_KIR_I64);
        vval[r] = rt_kir_add_var(a, l->p, "a", RT_KIR_F32);
        ok = ok && vlo[r] >= 0 && vhi[r] >= 0 && vbase[r] >= 0 && vval[r] >= 0;
    }
    RT_LOWER_CHECK(l, ok);
    if (!ok)
        return RT_OK;
    rt_kir_expr *npan =
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, rt_v(l, vmc), rt_i(l, w - 1)), rt_i(l, w));
    rt_kir_node *lp = rt_kir_loop(a, &copy->body, vp, rt_i(l, 0), npan, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lp);
    if (!lp)
        return RT_OK;
    const rt_perf_tri_range *tr = &g->tri;
    for (int32_t r = 0; r < w; r++) {
        rt_kir_expr *row =
            rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, w)), rt_i(l, r));
        // Rows past mcur read row mcur - 1's base (in A) and get an empty range.
        rt_kir_expr *m =
            rt_b(l, RT_KIR_ADD, rt_v(l, vi0),
                 rt_b(l, RT_KIR_MIN, row, rt_b(l, RT_KIR_SUB, rt_v(l, vmc), rt_i(l, 1))));
        rt_kir_expr *lo = rt_b(l, RT_KIR_SUB, rt_tri_at(l, tr->lo0, tr->lo1, m), rt_v(l, vp0));
        rt_kir_expr *hi = rt_b(l, RT_KIR_SUB, rt_tri_at(l, tr->hi0, tr->hi1, m), rt_v(l, vp0));
        rt_let(l, &lp->body, vlo[r], rt_tri_clamp(l, lo, rt_i(l, 0), rt_v(l, vkc)));
        rt_let(l, &lp->body, vhi[r],
               rt_kir_select(a, rt_b(l, RT_KIR_LT, row, rt_v(l, vmc)),
                             rt_tri_clamp(l, hi, rt_v(l, vlo[r]), rt_v(l, vkc)), rt_v(l, vlo[r])));
        // A(m, k) with k = p0 + kk - s m - c: base = offset of A(m, 0) + p0 - s m - c (a
        // per-entry GEMM's A also holds its batch vars, bound in the phase: causal attention's
        // P(b, h, i, j)).
        rt_kir_expr *idx[RT_MAX_DIMS];
        for (int32_t d = 0; d < g->ra->n_args && d < RT_MAX_DIMS; d++) {
            int32_t v = g->ra->args[d]->var;
            idx[d] = v == g->m_var ? m : v == g->k_var ? rt_i(l, 0) : rt_v(l, l->var_of[v]);
        }
        rt_kir_expr *off = rt_tr_offset(l, g->ta, idx, NULL);
        rt_let(l, &lp->body, vbase[r],
               rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, off, rt_v(l, vp0)),
                    rt_tri_at(l, g->tri_c, g->tri_s, m)));
    }
    rt_kir_expr *k0 = rt_i(l, 0), *k1 = rt_v(l, vkc);
    for (int32_t r = 0; own_k && r < w; r++) {
        k0 = r ? rt_b(l, RT_KIR_MIN, k0, rt_v(l, vlo[r])) : rt_v(l, vlo[r]);
        k1 = r ? rt_b(l, RT_KIR_MAX, k1, rt_v(l, vhi[r])) : rt_v(l, vhi[r]);
    }
    rt_kir_node *lk = rt_kir_loop(a, &lp->body, vk, k0, k1, RT_KIR_LOOP_VECTOR);
    RT_LOWER_CHECK(l, lk);
    if (!lk)
        return RT_OK;
    rt_kir_expr *drow =
        rt_b(l, RT_KIR_ADD, rt_i(l, dst0),
             rt_b(l, RT_KIR_MUL,
                  rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_v(l, vkc)), rt_v(l, vk)),
                  rt_i(l, w)));
    for (int32_t r = 0; r < w; r++) {
        rt_tri_fset(l, &lk->body, vval[r], rt_kir_flt(a, RT_KIR_F32, 0.0));
        rt_kir_node *iff = rt_kir_append(a, &lk->body, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, iff);
        if (!iff)
            return RT_OK;
        iff->cond = rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_GE, rt_v(l, vk), rt_v(l, vlo[r])),
                         rt_b(l, RT_KIR_LT, rt_v(l, vk), rt_v(l, vhi[r])));
        rt_kir_expr *x = rt_kir_load(a, l->k, l->data_buf[g->ta],
                                     rt_b(l, RT_KIR_ADD, rt_v(l, vbase[r]), rt_v(l, vk)));
        if (g->alpha != 1.0)
            x = rt_b(l, RT_KIR_MUL, x, rt_kir_flt(a, RT_KIR_F32, g->alpha));
        rt_tri_fset(l, &iff->body, vval[r], x);
        rt_tri_store(l, &lk->body, rt_b(l, RT_KIR_ADD, drow, rt_i(l, r)), rt_v(l, vval[r]));
    }
    return RT_OK;
}

rt_status rt_gemm_tri_pack_a(rt_lower *l, rt_kir_block *blk, const rt_gemm *g, int32_t vmc,
                             int32_t vkc, int32_t vi0, int32_t vp0, int64_t dst0) {
    return rt_tri_pack_a(l, blk, g, vmc, vkc, vi0, vp0, dst0, false);
}

rt_status rt_gemm_tri_pack_a_panels(rt_lower *l, rt_kir_block *blk, const rt_gemm *g, int32_t vmc,
                                    int32_t vkc, int32_t vi0, int32_t vp0, int64_t dst0) {
    return rt_tri_pack_a(l, blk, g, vmc, vkc, vi0, vp0, dst0, true);
}
