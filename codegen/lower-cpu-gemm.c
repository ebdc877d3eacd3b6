// lower-cpu-gemm.c: the CPU lowering of a contraction as the plan's packed GEMM: detection of
// the plain and the implicit GEMM, the plan's blocking, the epilogue and the blocked loops
// around the micro-kernel (packing in lower-cpu-pack.c).
#include "lower-cpu-impl.h"

#include <math.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// The packed GEMM path
// ---------------------------------------------------------------------------------------------

// Offset coefficient of each statement var in a dense access (false: not affine/dense).
static bool rt_access_coefs(const rt_lower *l, const rt_stmt *s, int32_t t, rt_expr *const *args,
                            const int32_t *lhs, int32_t n_args, int64_t *coef, int64_t *c0) {
    const rt_tensor *tn = &l->op->tensors[t];
    if (tn->has_pad || tn->ragged || n_args != tn->n_dims || tn->dtype != RT_DTYPE_F32)
        return false;
    for (int32_t v = 0; v < s->n_vars; v++)
        coef[v] = 0;
    *c0 = 0;
    int64_t stride = 1;
    for (int32_t d = tn->n_dims - 1; d >= 0; d--) {
        if (l->extent[t][d] < 0)
            return false;
        if (lhs) {
            coef[lhs[d]] += stride;
        } else {
            rt_affine af;
            if (!rt_expr_affine(l->op, args[d], &af))
                return false;
            for (int32_t i = 0; i < af.n_terms; i++)
                coef[af.var[i]] += af.coef[i] * stride;
            *c0 += af.c0 * stride;
        }
        stride *= l->extent[t][d];
    }
    return true;
}

// Groups of vars (in loop order) must flatten into one index: coef(v_j) = coef(v_last) *
// product of the later extents, in every tensor that has them.
static bool rt_gemm_group(const rt_lower *l, const rt_stmt *s, const int32_t *vars, int32_t n,
                          const int64_t *const *coefs, int32_t n_coefs, int64_t *extent,
                          int64_t *stride) {
    int64_t ext = 1;
    int64_t inner[4] = {0};
    for (int32_t c = 0; c < n_coefs; c++)
        inner[c] = coefs[c][vars[n - 1]];
    for (int32_t i = n - 1; i >= 0; i--) {
        int64_t lo, hi;
        int32_t v = vars[i];
        if (!rt_expr_const_int(l->op, s->vars[v].lo, &lo) || lo != 0 ||
            !rt_expr_const_int(l->op, s->vars[v].hi, &hi) || hi < 1)
            return false;
        for (int32_t c = 0; c < n_coefs; c++)
            if (coefs[c][v] != inner[c] * ext)
                return false;
        ext *= hi;
    }
    *extent = ext;
    for (int32_t c = 0; c < n_coefs; c++)
        stride[c] = inner[c];
    return true;
}

bool rt_gemm_detect(const rt_lower *l, int32_t si, rt_gemm *g) {
    const rt_stmt *s = &l->op->stmts[si];
    memset(g, 0, sizeof *g);
    g->stmt = si;
    g->batch = 1;
    if ((s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) || s->n_preds > 0 ||
        s->n_vars > 16 || l->op->tensors[s->out].dtype != RT_DTYPE_F32)
        return false;
    const rt_expr *reads[2];
    int32_t n = 0;
    g->alpha = 1.0;
    if (!rt_expr_product_factors(s->rhs, reads, &n, &g->alpha) || n != 2)
        return false;
    int64_t ca[16], cb[16], cc[16], c0a, c0b, c0c;
    if (!rt_access_coefs(l, s, reads[0]->tensor, reads[0]->args, NULL, reads[0]->n_args, ca,
                         &c0a) ||
        !rt_access_coefs(l, s, reads[1]->tensor, reads[1]->args, NULL, reads[1]->n_args, cb,
                         &c0b) ||
        !rt_access_coefs(l, s, s->out, NULL, s->lhs_vars, s->n_lhs, cc, &c0c) || c0a || c0b || c0c)
        return false;
    int32_t mv[8], nv[8], kv[8], nm = 0, nn = 0, nk = 0;
    for (int32_t i = 0; i < s->n_loops; i++) {
        int32_t v = s->loops[i];
        bool in_a = ca[v] != 0, in_b = cb[v] != 0, in_c = cc[v] != 0;
        if (s->vars[v].is_reduce) {
            if (!in_a || !in_b || in_c || nk >= 8)
                return false;
            kv[nk++] = v;
        } else if (in_a && !in_b && in_c && nm < 8) {
            mv[nm++] = v;
        } else if (in_b && !in_a && in_c && nn < 8) {
            nv[nn++] = v;
        } else {
            return false;
        }
    }
    if (nm == 0 || nn == 0 || nk == 0)
        return false;
    const int64_t *cm_[2] = {ca, cc}, *cn_[2] = {cb, cc}, *ck_[2] = {ca, cb};
    int64_t sm[2], sn[2], sk[2];
    if (!rt_gemm_group(l, s, mv, nm, cm_, 2, &g->M, sm) ||
        !rt_gemm_group(l, s, nv, nn, cn_, 2, &g->N, sn) ||
        !rt_gemm_group(l, s, kv, nk, ck_, 2, &g->K, sk))
        return false;
    g->ta = reads[0]->tensor;
    g->tb = reads[1]->tensor;
    g->am = sm[0], g->cm = sm[1], g->bn = sn[0], g->ak = sk[0], g->bk = sk[1];
    g->m_var = mv[nm - 1], g->n_var = nv[nn - 1], g->k_var = kv[nk - 1];
    int64_t cn = sn[1];
    if (cn != 1) {
        if (g->cm != 1)
            return false;
        // C is column-major in (m, n): compute C^T = B^T A^T, swapping the roles.
        int64_t t;
        int32_t tv;
        t = g->M, g->M = g->N, g->N = t;
        tv = g->ta, g->ta = g->tb, g->tb = tv;
        t = g->am, g->am = g->bn, g->bn = t;
        t = g->ak, g->ak = g->bk, g->bk = t;
        g->cm = cn;
        tv = g->m_var, g->m_var = g->n_var, g->n_var = tv;
    }
    return true;
}

// Which of the statement vars an affine read uses (false: a dim is not affine, the tensor is
// not a dense f32 one with constant extents, or a var is out of range).
static bool rt_gemm_read_uses(const rt_lower *l, const rt_stmt *s, const rt_expr *rd, bool *used) {
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    if (tn->ragged || tn->dtype != RT_DTYPE_F32 || rd->n_args != tn->n_dims)
        return false;
    for (int32_t v = 0; v < s->n_vars; v++)
        used[v] = false;
    for (int32_t d = 0; d < tn->n_dims; d++) {
        rt_affine af;
        if (l->extent[rd->tensor][d] < 0 || !rt_expr_affine(l->op, rd->args[d], &af))
            return false;
        for (int32_t i = 0; i < af.n_terms; i++) {
            if (af.var[i] < 0 || af.var[i] >= s->n_vars)
                return false;
            used[af.var[i]] = used[af.var[i]] || af.coef[i] != 0;
        }
    }
    return true;
}

// Implicit GEMM: C(...) (+)= const * X(affine) * Y(affine) where every loop var runs over a
// constant [0, hi), each reduction var is read by both X and Y but not stored, and each stored
// var is read by one of them or both. The read holding C's innermost var is B (n: the stored
// vars of B alone that flatten into C's unit-stride suffix); the other's own stored vars are m
// (they must flatten in C too); B's other stored vars (a batch, like n of NCHW) and the stored
// vars both read (a shared batch, the heads of an attention: a_batch) index independent GEMMs.
// A convolution O(n, f, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) * W(f, c, r, s) becomes
// batch n, M = f, N = (y, x), K = (c, r, s); S(b, h, i, j) +=! Q(b, h, i, d) * K(b, h, j, d)
// batch (b, h), M = i, N = j, K = d, both packs strided copies (K's transposed). Depthwise
// (c stored and read by both, no m var) is not one.
bool rt_gemm_detect_implicit(const rt_lower *l, int32_t si, rt_gemm *g) {
    const rt_stmt *s = &l->op->stmts[si];
    const rt_tensor *to = &l->op->tensors[s->out];
    memset(g, 0, sizeof *g);
    g->stmt = si;
    g->batch = 1;
    g->implicit = true;
    if ((s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) || s->n_preds > 0 || s->recursive ||
        s->n_vars > 16 || s->n_loops != s->n_vars || s->n_lhs < 1 || to->dtype != RT_DTYPE_F32)
        return false;
    const rt_expr *reads[2];
    int32_t n = 0;
    g->alpha = 1.0;
    if (!rt_expr_product_factors(s->rhs, reads, &n, &g->alpha) || n != 2 ||
        reads[0]->tensor == s->out || reads[1]->tensor == s->out)
        return false;
    int64_t c0c, ext[16];
    bool u0[16], u1[16], in_c[16];
    if (!rt_access_coefs(l, s, s->out, NULL, s->lhs_vars, s->n_lhs, g->ccoef, &c0c) ||
        !rt_gemm_read_uses(l, s, reads[0], u0) || !rt_gemm_read_uses(l, s, reads[1], u1))
        return false;
    for (int32_t v = 0; v < s->n_vars; v++) {
        int64_t lo, hi;
        if (!s->vars[v].lo || !s->vars[v].hi || !rt_expr_const_int(l->op, s->vars[v].lo, &lo) ||
            lo != 0 || !rt_expr_const_int(l->op, s->vars[v].hi, &hi) || hi < 1)
            return false;
        ext[v] = hi;
        in_c[v] = g->ccoef[v] != 0;
    }
    int32_t inner = s->lhs_vars[s->n_lhs - 1];
    if (inner < 0 || inner >= s->n_vars || u0[inner] == u1[inner])
        return false;
    int32_t ib = u0[inner] ? 0 : 1;
    const bool *ua = ib ? u0 : u1, *ub = ib ? u1 : u0;
    g->ra = reads[1 - ib];
    g->rb = reads[ib];
    g->ta = g->ra->tensor;
    g->tb = g->rb->tensor;
    // n: C's unit-stride suffix of B's vars, inner first, then reversed to outer first.
    bool in_n[16] = {false};
    int64_t run = 1;
    for (int32_t d = s->n_lhs - 1; d >= 0; d--) {
        int32_t v = s->lhs_vars[d];
        if (v < 0 || v >= s->n_vars || !ub[v] || ua[v] || in_n[v] || g->ccoef[v] != run ||
            g->n_gvar[RT_GEMM_G_N] >= 8)
            break;
        in_n[v] = true;
        g->gvar[RT_GEMM_G_N][g->n_gvar[RT_GEMM_G_N]++] = v;
        run *= ext[v];
    }
    int32_t *nv = g->gvar[RT_GEMM_G_N], nn = g->n_gvar[RT_GEMM_G_N];
    for (int32_t i = 0; i < nn / 2; i++) {
        int32_t t = nv[i];
        nv[i] = nv[nn - 1 - i];
        nv[nn - 1 - i] = t;
    }
    for (int32_t i = 0; i < s->n_loops; i++) {
        int32_t v = s->loops[i], grp;
        if (v < 0 || v >= s->n_vars)
            return false;
        if (s->vars[v].is_reduce) {
            if (!ua[v] || !ub[v] || in_c[v])
                return false;
            grp = RT_GEMM_G_K;
        } else if (!in_c[v] || (!ua[v] && !ub[v])) {
            return false;
        } else if (ua[v] && ub[v]) {
            grp = RT_GEMM_G_BATCH; // a batch var both operands read (heads of an attention)
            g->a_batch = true;
        } else if (ua[v]) {
            grp = RT_GEMM_G_M;
        } else if (in_n[v]) {
            continue;
        } else {
            grp = RT_GEMM_G_BATCH;
        }
        if (g->n_gvar[grp] >= 8)
            return false;
        g->gvar[grp][g->n_gvar[grp]++] = v;
    }
    if (g->n_gvar[RT_GEMM_G_M] == 0 || nn == 0 || g->n_gvar[RT_GEMM_G_K] == 0)
        return false;
    // m vars outer first by their C stride, which must flatten like one index.
    int32_t *mv = g->gvar[RT_GEMM_G_M], nm = g->n_gvar[RT_GEMM_G_M];
    for (int32_t i = 1; i < nm; i++)
        for (int32_t j = i; j > 0 && g->ccoef[mv[j]] > g->ccoef[mv[j - 1]]; j--) {
            int32_t t = mv[j];
            mv[j] = mv[j - 1];
            mv[j - 1] = t;
        }
    int64_t m_run = 1;
    for (int32_t i = nm - 1; i >= 0; i--) {
        if (g->ccoef[mv[i]] != g->ccoef[mv[nm - 1]] * m_run)
            return false;
        m_run *= ext[mv[i]];
    }
    g->M = m_run;
    g->N = run;
    g->K = 1;
    for (int32_t i = 0; i < g->n_gvar[RT_GEMM_G_K]; i++)
        g->K *= ext[g->gvar[RT_GEMM_G_K][i]];
    for (int32_t i = 0; i < g->n_gvar[RT_GEMM_G_BATCH]; i++)
        g->batch *= ext[g->gvar[RT_GEMM_G_BATCH][i]];
    g->cm = g->ccoef[mv[nm - 1]];
    g->m_var = mv[nm - 1];
    g->n_var = nv[nn - 1];
    g->k_var = g->gvar[RT_GEMM_G_K][g->n_gvar[RT_GEMM_G_K] - 1];
    return c0c == 0;
}

// Model axis holding statement var v (the main statement's fused axes come first).
// Blocking: the plan's (rt_perf_cpu_plan.gemm: the model made it from the rTiles and priced it);
// false when the plan's GEMM is not the one detected here (the plan and the statement disagree).
bool rt_gemm_blocking(rt_lower *l, rt_gemm *g) {
    const rt_perf_cpu_plan *pl = &l->rp->cpu;
    const rt_perf_cpu_gemm *v = &pl->gemm;
    if (g->tokens && pl->kind == RT_PERF_CPU_PLAN_GEMM && v->tokens)
        g->M = v->M; // the expected rows; the actual ones are read at run time
    if (g->rentry && pl->kind == RT_PERF_CPU_PLAN_GEMM && v->rentry)
        g->M = v->M, g->N = v->N, g->K = v->K; // the longest entry's; each entry's at run time
    if (pl->kind != RT_PERF_CPU_PLAN_GEMM || v->tokens != g->tokens || v->rentry != g->rentry ||
        v->M != g->M || v->N != g->N || v->K != g->K || v->batch != g->batch ||
        v->implicit != g->implicit || v->a_batch != g->a_batch || v->tri.on != g->tri.on)
        return false;
    g->mr = (int32_t)v->mr, g->nr = (int32_t)v->nr, g->kc = (int32_t)v->kc;
    g->mc = (int32_t)v->mc, g->nc = (int32_t)v->nc, g->ng = v->ng;
    g->row_tail_acc = g->rentry ? v->row_tail_acc : 0;
    g->warm = g->rentry && v->re_warm;
    return true;
}

// The plan the packed GEMM executes (the header's "plan:" line): the blocking of g, the shape
// detected here, the micro-kernel's vector length.
void rt_gemm_executed(rt_lower *l, const rt_gemm *g) {
    rt_perf_cpu_plan *pl = &l->done;
    memset(pl, 0, sizeof *pl);
    pl->kind = RT_PERF_CPU_PLAN_GEMM;
    pl->uk_lanes = l->rp->cpu.uk_lanes;
    rt_perf_cpu_gemm *v = &pl->gemm;
    v->M = g->M, v->N = g->N, v->K = g->K, v->batch = g->batch;
    v->mr = g->mr, v->nr = g->nr, v->kc = g->kc, v->mc = g->mc, v->nc = g->nc, v->ng = g->ng;
    v->implicit = g->implicit;
    v->a_batch = g->a_batch;
    v->tokens = g->tokens;
    v->rentry = g->rentry;
    v->b_prefetch = !g->implicit && g->bn == 1;
    v->tri = g->tri;
    v->row_tail_acc = g->row_tail_acc;
    v->re_warm = g->warm;
}

// A pack of the implicit GEMM that is a plain strided copy: rd reads a tensor without padding
// whose rows vars and ks vars each flatten into one index (rt_gemm_group), the other vars
// being the batch vars bound in the phase. Gives the strides and the offset of the batch.
static bool rt_gemm_plain_read(rt_lower *l, const rt_gemm *g, const rt_expr *rd,
                               const int32_t *rows, int32_t n_rows, int64_t *s_row, int64_t *s_k,
                               rt_kir_expr **base) {
    const rt_stmt *s = &l->op->stmts[g->stmt];
    int64_t coef[16], c0, ext, st[1];
    if (!rt_access_coefs(l, s, rd->tensor, rd->args, NULL, rd->n_args, coef, &c0) || c0 != 0)
        return false;
    const int64_t *cs[1] = {coef};
    if (!rt_gemm_group(l, s, rows, n_rows, cs, 1, &ext, st))
        return false;
    *s_row = st[0];
    if (!rt_gemm_group(l, s, g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], cs, 1, &ext, st))
        return false;
    *s_k = st[0];
    rt_kir_expr *b = rt_i(l, 0);
    for (int32_t i = 0; i < g->n_gvar[RT_GEMM_G_BATCH]; i++) {
        int32_t v = g->gvar[RT_GEMM_G_BATCH][i];
        if (coef[v] != 0)
            b = rt_b(l, RT_KIR_ADD, b,
                     rt_b(l, RT_KIR_MUL, rt_v(l, l->var_of[v]), rt_i(l, coef[v])));
    }
    *base = b;
    return b != NULL;
}

// The next batch entry's operand block, prefetched while an item that is a whole entry of a
// batched GEMM (a_batch, one row and one column block: attention scores, 128-512 rows of K = 64)
// runs: its packs would otherwise wait on every line of the entry's A and B from L3 or memory
// (about 13% of the time of 96 x 128x128x64 on a Sapphire Rapids core). The read's lines are
// runs of its contiguous index (k, or the rows), rt_gemm_plain_read's strides; row panel ir of
// the n_ip issues its share of them, a few per panel. False (nothing emitted) where neither
// stride is 1 or the read is not a plain one.
typedef struct rt_gemm_next_pf {
    int32_t buf;
    int64_t runs, run_stride, lines_per_run, share; // lines: runs x lines_per_run
    rt_kir_expr *base;                              // the next entry's offset (phase expr)
} rt_gemm_next_pf;

static bool rt_gemm_next_entry_pf(rt_lower *l, const rt_gemm *g, const rt_expr *rd,
                                  const int32_t *rows, int32_t n_rows, int64_t n_rows_total,
                                  rt_kir_expr *next, int64_t n_ip, rt_gemm_next_pf *pf) {
    const rt_stmt *s = &l->op->stmts[g->stmt];
    int64_t coef[16], c0, ext, st[1], s_row, s_k;
    if (!rt_access_coefs(l, s, rd->tensor, rd->args, NULL, rd->n_args, coef, &c0) || c0 != 0)
        return false;
    const int64_t *cs[1] = {coef};
    if (!rt_gemm_group(l, s, rows, n_rows, cs, 1, &ext, st))
        return false;
    s_row = st[0];
    if (!rt_gemm_group(l, s, g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], cs, 1, &ext, st))
        return false;
    s_k = st[0];
    int64_t len;
    if (s_k == 1)
        pf->runs = n_rows_total, pf->run_stride = s_row, len = g->K;
    else if (s_row == 1)
        pf->runs = g->K, pf->run_stride = s_k, len = n_rows_total;
    else
        return false;
    pf->lines_per_run = rt_ceil_div(len, 16);
    pf->share = rt_ceil_div(pf->runs * pf->lines_per_run, n_ip);
    pf->buf = l->data_buf[rd->tensor];
    // The batch vars' digits of the next entry (outer first), times the read's coefficients.
    rt_kir_expr *b = rt_i(l, 0);
    int64_t inner = 1;
    for (int32_t i = g->n_gvar[RT_GEMM_G_BATCH] - 1; i >= 0; i--) {
        int32_t v = g->gvar[RT_GEMM_G_BATCH][i];
        int64_t hi = 1;
        rt_expr_const_int(l->op, s->vars[v].hi, &hi);
        if (coef[v] != 0)
            b = rt_b(
                l, RT_KIR_ADD, b,
                rt_b(l, RT_KIR_MUL,
                     rt_b(l, RT_KIR_MOD, rt_b(l, RT_KIR_DIV, next, rt_i(l, inner)), rt_i(l, hi)),
                     rt_i(l, coef[v])));
        inner *= hi;
    }
    pf->base = b;
    return b != NULL;
}

// In blk (the body of the row panel loop, var vir): row panel ir's share of pf's lines.
static void rt_gemm_next_entry_lines(rt_lower *l, rt_kir_block *blk, int32_t vir,
                                     const rt_gemm_next_pf *pf) {
    rt_arena *a = l->a;
    int32_t vq = rt_kir_add_var(a, l->p, "pf_line", RT_KIR_I64);
    RT_LOWER_CHECK(l, vq >= 0);
    if (vq < 0)
        return;
    rt_kir_expr *q0 = rt_b(l, RT_KIR_MUL, rt_v(l, vir), rt_i(l, pf->share));
    rt_kir_node *lq = rt_kir_loop(a, blk, vq, q0,
                                  rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_ADD, q0, rt_i(l, pf->share)),
                                       rt_i(l, pf->runs * pf->lines_per_run)),
                                  RT_KIR_LOOP_SERIAL);
    rt_kir_node *n = lq ? rt_kir_append(a, &lq->body, RT_KIR_N_PREFETCH) : NULL;
    RT_LOWER_CHECK(l, n);
    if (!n)
        return;
    rt_kir_expr *run = rt_b(l, RT_KIR_DIV, rt_v(l, vq), rt_i(l, pf->lines_per_run));
    rt_kir_expr *col = rt_b(l, RT_KIR_MOD, rt_v(l, vq), rt_i(l, pf->lines_per_run));
    n->buf = pf->buf;
    n->index = rt_b(l, RT_KIR_ADD, pf->base,
                    rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, run, rt_i(l, pf->run_stride)),
                         rt_b(l, RT_KIR_MUL, col, rt_i(l, 16))));
    RT_LOWER_CHECK(l, n->index);
}

// Does e read tensor t only as t(p, q) (*p, *q set by the first such read, -1 before), never
// read tensor y, and hold no sum or tree construct?
static bool rt_epi_reads_ok(const rt_expr *e, int32_t t, int32_t y, int32_t *p, int32_t *q) {
    if (e->kind == RT_EXPR_SUM || e->kind == RT_EXPR_CHILD)
        return false;
    if (e->kind == RT_EXPR_READ && e->tensor == y)
        return false;
    if (e->kind == RT_EXPR_READ && e->tensor == t) {
        if (e->n_args != 2 || e->args[0]->kind != RT_EXPR_INDEX ||
            e->args[1]->kind != RT_EXPR_INDEX || e->args[0]->var == e->args[1]->var)
            return false;
        if (*p < 0) {
            *p = e->args[0]->var;
            *q = e->args[1]->var;
        }
        return *p == e->args[0]->var && *q == e->args[1]->var;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (e->args[i] && !rt_epi_reads_ok(e->args[i], t, y, p, q))
            return false;
    return true;
}

static bool rt_expr_reads(const rt_expr *e, int32_t t) {
    if (e->kind == RT_EXPR_READ && e->tensor == t)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (e->args[i] && rt_expr_reads(e->args[i], t))
            return true;
    return false;
}

bool rt_gemm_epi_detect(const rt_lower *l, const rt_gemm *g, rt_gemm_epi *epi) {
    const rt_op *op = l->op;
    const rt_stmt *s = &op->stmts[g->stmt];
    int32_t si = g->stmt + 1, t = s->out;
    int64_t lo, hi;
    epi->stmt = -1;
    epi->p = epi->q = epi->b0 = -1;
    if (g->tokens)
        return rt_gemm_epi_detect_tokens(l, g, epi);
    if (g->implicit || si >= op->n_stmts || s->n_lhs != 2 || s->lhs_vars[0] != g->m_var ||
        s->lhs_vars[1] != g->n_var || g->cm != g->N || l->extent[t][0] != g->M ||
        l->extent[t][1] != g->N)
        return false;
    const rt_stmt *s2 = &op->stmts[si];
    if (s2->op != RT_ASSIGN_SET || s2->n_preds > 0 || s2->recursive || s2->reduces ||
        s2->out == t || s2->n_vars != 2 || s2->n_loops != 2 ||
        !rt_epi_reads_ok(s2->rhs, t, s2->out, &epi->p, &epi->q) || epi->p < 0)
        return false;
    const rt_ivar *vp = &s2->vars[epi->p], *vq = &s2->vars[epi->q];
    if (!rt_expr_const_int(op, vp->lo, &lo) || lo != 0 || !rt_expr_const_int(op, vp->hi, &hi) ||
        hi != g->M || !rt_expr_const_int(op, vq->lo, &lo) || lo != 0 ||
        !rt_expr_const_int(op, vq->hi, &hi) || hi != g->N)
        return false;
    epi->keep_c = op->tensors[t].role == RT_ROLE_OUTPUT;
    for (int32_t j = si + 1; j < op->n_stmts; j++)
        epi->keep_c = epi->keep_c || op->stmts[j].out == t || rt_expr_reads(op->stmts[j].rhs, t);
    epi->stmt = si;
    return true;
}

// Reads of the fused statement: C(p, q) is the element's final value (the epilogue's acc var),
// everything else loads as usual.
typedef struct rt_epi_ctx {
    int32_t t, acc;
} rt_epi_ctx;

static rt_status rt_tr_read_epi(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    const rt_epi_ctx *ec = x->user;
    if (e->tensor == ec->t) {
        *out = rt_kir_var_ref(x->a, x->ph, ec->acc);
        x->oom = x->oom || !*out;
        return RT_OK;
    }
    rt_kir_expr *idx[RT_MAX_DIMS];
    RT_TRY(rt_lx_indices(x, e, idx));
    return rt_lx_load(x, e, idx, out);
}

static const struct rt_lx_ops rt_tr_ops_epi = {
    .backend = "CPU", .sum_inner_loop = RT_KIR_LOOP_VECTOR, .read = rt_tr_read_epi};

// The epilogue of micro-kernel u: statement epi->stmt stored at the element the epilogue binds.
static rt_status rt_gemm_epi_lower(rt_lower *l, const rt_gemm *g, const rt_gemm_epi *epi,
                                   rt_kir_ukernel *u) {
    rt_arena *a = l->a;
    const rt_stmt *s2 = &l->op->stmts[epi->stmt];
    RT_TRY(rt_lower_begin_stmt(l, s2));
    u->epi = rt_arena_calloc(a, 1, sizeof *u->epi);
    u->epi_acc = rt_kir_add_var(a, l->p, "cval", RT_KIR_F32);
    u->epi_row = rt_kir_add_var(a, l->p, s2->vars[epi->p].name, RT_KIR_I64);
    u->epi_col = rt_kir_add_var(a, l->p, s2->vars[epi->q].name, RT_KIR_I64);
    if (!u->epi || u->epi_acc < 0 || u->epi_row < 0 || u->epi_col < 0)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    u->epi_keep_c = epi->keep_c;
    l->var_of[epi->p] = u->epi_row;
    l->var_of[epi->q] = u->epi_col;
    l->pre = u->epi;
    if (epi->b0 >= 0) {
        // Token rows: (0, row) is the flat row's (b, i) in the packed layout.
        l->var_of[epi->b0] = rt_kir_add_var(a, l->p, s2->vars[epi->b0].name, RT_KIR_I64);
        if (l->var_of[epi->b0] < 0)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        rt_let(l, u->epi, l->var_of[epi->b0], rt_i(l, 0));
    }
    rt_epi_ctx ec = {l->op->stmts[g->stmt].out, u->epi_acc};
    rt_lx x = rt_tr_ctx(l);
    x.ops = &rt_tr_ops_epi;
    x.user = &ec;
    rt_kir_expr *value;
    RT_TRY(rt_tr_done(l, &x, rt_lx_num(&x, s2->rhs, &value)));
    rt_kir_expr *idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < s2->n_lhs; d++) {
        int32_t v = s2->lhs_vars[d];
        if (v != epi->p && v != epi->q && v != epi->b0)
            return rt_fail(l->err, RT_ERR_SPEC, s2->loc, "output index outside its loop");
        idx[d] = rt_v(l, l->var_of[v]);
    }
    int32_t ob = l->data_buf[s2->out];
    rt_kir_node *st = rt_kir_append(a, u->epi, RT_KIR_N_STORE);
    rt_kir_expr *off = rt_tr_offset(l, s2->out, idx, NULL);
    RT_LOWER_CHECK(l, st && off && value);
    if (st) {
        st->buf = ob;
        st->index = off;
        st->value = rt_kir_cast(a, l->k->bufs[ob].type, value);
    }
    // The output is a tensor the GEMM never touched, so its tile would miss on every store:
    // where its rows are contiguous along the columns (the last index is the column var, dense
    // dims), the micro-kernel prefetches the tile before the last k block's loop.
    const rt_tensor *to = &l->op->tensors[s2->out];
    int32_t nd = to->n_dims;
    u->epi_pf_buf = -1;
    if (nd == s2->n_lhs && s2->lhs_vars[nd - 1] == epi->q && !to->ragged && !to->has_pad) {
        int64_t ld = 0, stride = 1;
        rt_kir_expr *at[RT_MAX_DIMS];
        for (int32_t d = nd - 1; d >= 0; d--) {
            bool row = s2->lhs_vars[d] == epi->p;
            at[d] = row ? u->epi_row0 : u->epi_col0;
            ld = row ? stride : ld;
            stride *= l->extent[s2->out][d];
        }
        u->epi_pf_buf = ob;
        u->epi_pf_off = rt_tr_offset(l, s2->out, at, NULL);
        u->epi_pf_ld = ld;
        RT_LOWER_CHECK(l, u->epi_pf_off);
    }
    return RT_OK;
}

// Software prefetch of the B block packed next (the next column block of the run, or the run's
// first at the next k block), spread over the row panels of the current one: row panel ir
// prefetches rows [ir R, (ir + 1) R) of it, R = kc / the row panels of a block, so that its
// lines arrive from memory while the micro-kernels run, a few at a time. Without it the pack
// stalls on every line: a B of 16 MiB (128x1000x4032, where B is read once for only 128 rows of
// A) packed at 9 GB/s on a Zen 4 core, a third of the time of the GEMM. Issued in one burst
// after the pack instead, the prefetches filled the miss buffers and stalled the core about as
// long. One hint per 64-byte line of each row (B contiguous along n). First
// rt_gemm_next_b_at: in blk, where the current column block jb of [jb_lo, jb_hi) and k block
// start p0 are known, the next block's column block *vjn and k block start *vpn.
static void rt_gemm_next_b_at(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vjb,
                              rt_kir_expr *jb_lo, rt_kir_expr *jb_hi, int32_t vp0, int32_t *vjn,
                              int32_t *vpn) {
    rt_arena *a = l->a;
    *vjn = rt_kir_add_var(a, l->p, "pf_jb", RT_KIR_I64);
    *vpn = rt_kir_add_var(a, l->p, "pf_p0", RT_KIR_I64);
    rt_kir_node *c = rt_kir_append(a, blk, RT_KIR_N_COMMENT);
    RT_LOWER_CHECK(l, *vjn >= 0 && *vpn >= 0 && c);
    if (*vjn < 0 || *vpn < 0 || !c)
        return;
    c->text = "the B block packed next, prefetched a share per row panel below";
    rt_kir_expr *last = rt_b(l, RT_KIR_GE, rt_b(l, RT_KIR_ADD, rt_v(l, vjb), rt_i(l, 1)), jb_hi);
    rt_let(l, blk, *vjn,
           rt_kir_select(a, last, jb_lo, rt_b(l, RT_KIR_ADD, rt_v(l, vjb), rt_i(l, 1))));
    // A triangular GEMM's p0 is its clamped start (rt_gemm_tri_kclamp): the next k block
    // begins at the block's end.
    rt_let(l, blk, *vpn,
           g->tri.on ? rt_kir_select(
                           a, last,
                           rt_b(l, RT_KIR_MUL,
                                rt_b(l, RT_KIR_ADD,
                                     rt_b(l, RT_KIR_DIV, rt_v(l, vp0), rt_i(l, g->kc)), rt_i(l, 1)),
                                rt_i(l, g->kc)),
                           rt_v(l, vp0))
                     : rt_b(l, RT_KIR_ADD, rt_v(l, vp0),
                            rt_kir_select(a, last, rt_i(l, g->kc), rt_i(l, 0))));
}

// Then in panel, the body of the row panel loop (var ir), its share of the lines. k_end: where
// the rows end (a triangular GEMM's row block range, rt_gemm_tri_khi), NULL: K.
static void rt_gemm_prefetch_next_b(rt_lower *l, const rt_gemm *g, rt_kir_block *panel, int32_t vir,
                                    int32_t buf_b, int32_t vjn, int32_t vpn, rt_kir_expr *k_end) {
    rt_arena *a = l->a;
    int32_t vk = rt_kir_add_var(a, l->p, "pf_k", RT_KIR_I64),
            vq = rt_kir_add_var(a, l->p, "pf_line", RT_KIR_I64);
    RT_LOWER_CHECK(l, vk >= 0 && vq >= 0);
    if (vjn < 0 || vpn < 0 || vk < 0 || vq < 0)
        return;
    rt_kir_expr *j0 =
        rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_MOD, rt_v(l, vjn), rt_i(l, rt_ceil_div(g->N, g->nc))),
             rt_i(l, g->nc));
    rt_kir_expr *cols = rt_b(l, RT_KIR_MIN, rt_i(l, g->nc), rt_b(l, RT_KIR_SUB, rt_i(l, g->N), j0));
    rt_kir_expr *rows =
        rt_b(l, RT_KIR_MIN, rt_i(l, g->kc), rt_b(l, RT_KIR_SUB, rt_i(l, g->K), rt_v(l, vpn)));
    if (k_end) // up to the end of pf_p0's k block or of the range
        rows = rt_b(l, RT_KIR_SUB,
                    rt_b(l, RT_KIR_MIN,
                         rt_b(l, RT_KIR_MUL,
                              rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_DIV, rt_v(l, vpn), rt_i(l, g->kc)),
                                   rt_i(l, 1)),
                              rt_i(l, g->kc)),
                         k_end),
                    rt_v(l, vpn));
    int64_t share = rt_ceil_div(g->kc, rt_ceil_div(g->mc, g->mr));
    rt_kir_expr *k_lo = rt_b(l, RT_KIR_MUL, rt_v(l, vir), rt_i(l, share));
    rt_kir_node *lk = rt_kir_loop(
        a, panel, vk, k_lo, rt_b(l, RT_KIR_MIN, rows, rt_b(l, RT_KIR_ADD, k_lo, rt_i(l, share))),
        RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lk);
    if (!lk)
        return;
    rt_kir_expr *off = NULL;
    rt_kir_node *pf = rt_prefetch_lines(l, &lk->body, vq, cols, &off);
    if (!pf)
        return;
    pf->buf = buf_b;
    pf->index =
        rt_b(l, RT_KIR_ADD,
             rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, rt_v(l, vpn), rt_v(l, vk)), rt_i(l, g->bk)),
             rt_b(l, RT_KIR_ADD, j0, off));
    RT_LOWER_CHECK(l, pf->index);
}

// One operand of the packed GEMM (rt_lower_gemm): A (mr-tall panels, alpha folded in) or B
// (nr-wide panels), its block's valid rows and k steps, first row and k (phase vars), where its
// panels go in scratch, and for a masked pack its mask and row table.
typedef struct rt_gemm_operand {
    bool is_b;
    int32_t w;
    int32_t v_valid, v_kcur, v_row0, v_k0; // phase vars
    int64_t dst0;
    const rt_gemm_mask *mask; // NULL: not a masked pack
    int64_t tbl, tbl_rows;
} rt_gemm_operand;

// Packs one operand block: a plain strided copy where the read allows one, else (implicit
// GEMMs) a masked copy of contiguous rows, a copy by row segments where the rows' innermost var
// moves along one dim of the read, or the per-element gather.
static rt_status rt_gemm_pack_operand(rt_lower *l, rt_kir_block *blk, const rt_gemm *g,
                                      const rt_gemm_operand *op) {
    if (g->tri.on && !op->is_b)
        return rt_gemm_tri_pack_a_panels(l, blk, g, op->v_valid, op->v_kcur, op->v_row0, op->v_k0,
                                         op->dst0);
    static const char *const what[2][4] = {
        {"A block -> scratch, mr-tall k-major panels (L3 level; one in L1 at a time)",
         "A block -> scratch, mr-tall k-major panels of masked contiguous rows (L3 level; one in "
         "L1 at a time)",
         "A block -> scratch, mr-tall k-major panels copied by row segments (L3 level; one in L1 "
         "at a time)",
         "A block -> scratch, gathered mr-tall k-major panels (L3 level; one in L1 at a time)"},
        {"B block -> scratch, nr-wide k-major panels (L2 level)",
         "B block -> scratch, nr-wide k-major panels of masked contiguous rows (L2 level)",
         "B block -> scratch, nr-wide k-major panels copied by row segments (L2 level)",
         "B block -> scratch, gathered nr-wide k-major panels (L2 level)"}};
    const char *const *wh = what[op->is_b];
    int32_t grp = op->is_b ? RT_GEMM_G_N : RT_GEMM_G_M;
    const int32_t *vars = g->gvar[grp];
    int32_t nv = g->n_gvar[grp];
    const rt_expr *rd = op->is_b ? g->rb : g->ra;
    int32_t buf = l->data_buf[op->is_b ? g->tb : g->ta];
    double alpha = op->is_b ? 1.0 : g->alpha;
    int64_t srow = op->is_b ? g->bn : g->am, sk = op->is_b ? g->bk : g->ak;
    rt_kir_expr *pbase = rt_i(l, 0);
    if (!g->implicit || rt_gemm_plain_read(l, g, rd, vars, nv, &srow, &sk, &pbase)) {
        rt_kir_expr *off =
            rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, op->v_row0), rt_i(l, srow)),
                 rt_b(l, RT_KIR_MUL, rt_v(l, op->v_k0), rt_i(l, sk)));
        if (op->is_b && srow != 1 && rt_perf_cpu_b_t16(op->w, l->rp->cpu.uk_lanes, sk == 1)) {
            rt_gemm_pack_t16(l, blk, wh[0], op->w, rt_v(l, op->v_valid), rt_v(l, op->v_kcur), buf,
                             g->implicit ? rt_b(l, RT_KIR_ADD, pbase, off) : off, rt_i(l, srow),
                             alpha, rt_i(l, op->dst0));
            return RT_OK;
        }
        rt_gemm_pack(l, blk, wh[0], op->w, rt_v(l, op->v_valid), rt_v(l, op->v_kcur), buf,
                     g->implicit ? rt_b(l, RT_KIR_ADD, pbase, off) : off, srow, sk, alpha,
                     rt_i(l, op->dst0));
        return RT_OK;
    }
    rt_gemm_pack_desc pd = {NULL,
                            op->w,
                            rt_v(l, op->v_valid),
                            rt_v(l, op->v_kcur),
                            rd,
                            vars,
                            nv,
                            g->gvar[RT_GEMM_G_K],
                            g->n_gvar[RT_GEMM_G_K],
                            rt_v(l, op->v_row0),
                            rt_v(l, op->v_k0),
                            alpha,
                            rt_i(l, op->dst0)};
    int32_t dx;
    int64_t sx;
    if (op->mask) {
        pd.what = wh[1];
        return rt_gemm_pack_masked(l, blk, &pd, op->mask, op->tbl, op->tbl_rows);
    }
    if (rt_gemm_seg_dim(l, rd, vars[nv - 1], &dx, &sx)) {
        pd.what = wh[2];
        return rt_gemm_pack_segments(l, blk, &pd, dx, sx);
    }
    pd.what = wh[3];
    return rt_gemm_pack_affine(l, blk, &pd);
}

// Where the micro-kernel call of the packed GEMM (rt_lower_gemm) works: the phase vars of its
// row and column panel, the k block's length and first k step, the block's first row and column
// and its valid rows and columns, B's panels' offset in scratch, C and its batch offset.
typedef struct rt_gemm_uk_at {
    int32_t ip, jp, kc, i0, j0, mc, nc, pk;
    int64_t a_elems;
    int32_t c_buf;
    rt_kir_expr *c_batch;
    // Triangular GEMMs (-1 otherwise): the row panel's first k step in the block and its
    // count (rt_gemm_tri_panel_k), the item's first and past-the-last k block.
    int32_t ks, kn, pk_lo, pk_hi;
    // A read in place (a_ld > 0, rt_lower_gemm): its buffer, the entry's offset, the k block's
    // first k step (phase var).
    int64_t a_ld;
    int32_t a_buf, p0;
    rt_kir_expr *a_base;
} rt_gemm_uk_at;

// The micro-kernel call on one mr x nr panel pair, with its epilogue on the last k block.
static rt_status rt_gemm_ukernel_call(rt_lower *l, rt_kir_block *blk, const rt_gemm *g,
                                      const rt_gemm_epi *epi, const rt_gemm_uk_at *at) {
    const rt_stmt *s = &l->op->stmts[g->stmt];
    rt_kir_node *u = rt_kir_append(l->a, blk, RT_KIR_N_UKERNEL);
    RT_LOWER_CHECK(l, u);
    if (!u)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_expr *rows = rt_b(l, RT_KIR_MUL, rt_v(l, at->ip), rt_i(l, g->mr));
    rt_kir_expr *cols = rt_b(l, RT_KIR_MUL, rt_v(l, at->jp), rt_i(l, g->nr));
    u->uk.mr = g->mr;
    u->uk.nr = g->nr;
    u->uk.vl = (int32_t)l->rp->cpu.uk_lanes;
    u->uk.kc = rt_v(l, at->kc);
    u->uk.a_off = rt_b(l, RT_KIR_MUL, rows, rt_v(l, at->kc));
    u->uk.b_off =
        rt_b(l, RT_KIR_ADD, rt_i(l, at->a_elems), rt_b(l, RT_KIR_MUL, cols, rt_v(l, at->kc)));
    if (at->ks >= 0) { // the panel's k steps [ks, ks + kn) of the block
        u->uk.kc = rt_v(l, at->kn);
        u->uk.a_off =
            rt_b(l, RT_KIR_ADD, u->uk.a_off, rt_b(l, RT_KIR_MUL, rt_v(l, at->ks), rt_i(l, g->mr)));
        u->uk.b_off =
            rt_b(l, RT_KIR_ADD, u->uk.b_off, rt_b(l, RT_KIR_MUL, rt_v(l, at->ks), rt_i(l, g->nr)));
    }
    if (at->a_ld > 0) { // row i0 + rows of the entry's A at k step p0 (kir.h)
        u->uk.a_ld = at->a_ld;
        u->uk.a_buf = at->a_buf;
        u->uk.a_off = rt_b(
            l, RT_KIR_ADD, at->a_base,
            rt_b(l, RT_KIR_ADD,
                 rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, rt_v(l, at->i0), rows), rt_i(l, at->a_ld)),
                 rt_v(l, at->p0)));
    }
    u->uk.c_buf = at->c_buf;
    u->uk.c_off =
        rt_b(l, RT_KIR_ADD,
             rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, rt_v(l, at->i0), rows), rt_i(l, g->cm)),
             rt_b(l, RT_KIR_ADD, rt_v(l, at->j0), cols));
    if (g->implicit)
        u->uk.c_off = rt_b(l, RT_KIR_ADD, at->c_batch, u->uk.c_off);
    u->uk.ldc = g->cm;
    u->uk.m_valid = rt_b(l, RT_KIR_MIN, rt_i(l, g->mr), rt_b(l, RT_KIR_SUB, rt_v(l, at->mc), rows));
    u->uk.n_valid = rt_b(l, RT_KIR_MIN, rt_i(l, g->nr), rt_b(l, RT_KIR_SUB, rt_v(l, at->nc), cols));
    u->uk.accumulate = s->op == RT_ASSIGN_ADD ? rt_i(l, 1)
                       : g->K <= g->kc        ? rt_i(l, 0)
                                              : rt_b(l, RT_KIR_GT, rt_v(l, at->pk),
                                              at->pk_lo >= 0 ? rt_v(l, at->pk_lo) : rt_i(l, 0));
    // Streaming stores: a single k block overwriting a C over half the largest cache (it
    // would evict most of it and is not read back by this phase).
    int64_t cache_bytes = rt_largest_cache_bytes(l->dev);
    u->uk.stream = s->op == RT_ASSIGN_ADD_INIT && g->K <= g->kc && g->cm % 16 == 0 &&
                   cache_bytes > 0 && epi->stmt < 0 &&
                   4.0 * (double)g->batch * (double)g->M * (double)g->N > 0.5 * (double)cache_bytes;
    RT_LOWER_CHECK(l, u->uk.kc && u->uk.a_off && u->uk.b_off && u->uk.c_off && u->uk.m_valid &&
                          u->uk.n_valid && u->uk.accumulate);
    if (epi->stmt >= 0) {
        u->uk.epi_row0 = rt_b(l, RT_KIR_ADD, rt_v(l, at->i0), rows);
        u->uk.epi_col0 = rt_b(l, RT_KIR_ADD, rt_v(l, at->j0), cols);
        u->uk.epi_last = rt_b(l, RT_KIR_EQ, rt_v(l, at->pk),
                              at->pk_hi >= 0 ? rt_b(l, RT_KIR_SUB, rt_v(l, at->pk_hi), rt_i(l, 1))
                                             : rt_i(l, rt_ceil_div(g->K, g->kc) - 1));
        RT_LOWER_CHECK(l, u->uk.epi_row0 && u->uk.epi_col0 && u->uk.epi_last);
        RT_TRY(rt_gemm_epi_lower(l, g, epi, &u->uk));
    }
    return RT_OK;
}

// Binds the batch vars in blk to the digits of batch entry e and gives C's offset of the entry.
static rt_kir_expr *rt_gemm_bind_batch(rt_lower *l, const rt_gemm *g, rt_kir_block *blk,
                                       rt_kir_expr *e) {
    rt_gemm_unflatten(l, blk, e, g->gvar[RT_GEMM_G_BATCH], g->n_gvar[RT_GEMM_G_BATCH]);
    rt_kir_expr *c_batch = rt_i(l, 0);
    for (int32_t i = 0; i < g->n_gvar[RT_GEMM_G_BATCH]; i++) {
        int32_t v = g->gvar[RT_GEMM_G_BATCH][i];
        c_batch = rt_b(l, RT_KIR_ADD, c_batch,
                       rt_b(l, RT_KIR_MUL, rt_v(l, l->var_of[v]), rt_i(l, g->ccoef[v])));
    }
    return c_batch;
}

// The phase's description: which GEMM, its blocks and micro-kernel (NULL: out of memory).
static const char *rt_gemm_phase_what(rt_arena *a, const rt_gemm *g) {
    if (g->tokens)
        return rt_arena_printf(a,
                               "statement %d: packed GEMM of token rows, sum(len) (expected "
                               "%lld) x %lld x %lld, blocks mc=%d nc=%d kc=%d, micro-kernel %dx%d",
                               (int)g->stmt, (long long)g->M, (long long)g->N, (long long)g->K,
                               g->mc, g->nc, g->kc, g->mr, g->nr);
    if (g->implicit)
        return rt_arena_printf(a,
                               "statement %d: implicit GEMM %lld x %lldx%lldx%lld (gathered "
                               "packs), blocks mc=%d nc=%d kc=%d, micro-kernel %dx%d",
                               (int)g->stmt, (long long)g->batch, (long long)g->M, (long long)g->N,
                               (long long)g->K, g->mc, g->nc, g->kc, g->mr, g->nr);
    return rt_arena_printf(a,
                           "statement %d: packed GEMM %lldx%lldx%lld, blocks "
                           "mc=%d nc=%d kc=%d, micro-kernel %dx%d",
                           (int)g->stmt, (long long)g->M, (long long)g->N, (long long)g->K, g->mc,
                           g->nc, g->kc, g->mr, g->nr);
}

// An item that is a whole entry (item = entry): the next entry's A and B rows, spread over the
// row panels (loop var vip, body blk).
static void rt_gemm_prefetch_next_entry(rt_lower *l, const rt_gemm *g, rt_kir_block *blk,
                                        int32_t vip) {
    int64_t n_ip = rt_ceil_div(g->M, g->mr);
    rt_kir_expr *next = rt_b(l, RT_KIR_ADD, rt_v(l, l->p->item_var), rt_i(l, 1));
    rt_gemm_next_pf pfa, pfb;
    if (rt_gemm_next_entry_pf(l, g, g->ra, g->gvar[RT_GEMM_G_M], g->n_gvar[RT_GEMM_G_M], g->M, next,
                              n_ip, &pfa))
        rt_gemm_next_entry_lines(l, blk, vip, &pfa);
    if (rt_gemm_next_entry_pf(l, g, g->rb, g->gvar[RT_GEMM_G_N], g->n_gvar[RT_GEMM_G_N], g->N, next,
                              n_ip, &pfb))
        rt_gemm_next_entry_lines(l, blk, vip, &pfb);
}

// A serial loop of var v over [lo, hi) in blk; *body its body.
static rt_status rt_gemm_loop(rt_lower *l, rt_kir_block *blk, int32_t v, rt_kir_expr *lo,
                              rt_kir_expr *hi, rt_kir_block **body) {
    rt_kir_node *lp = rt_kir_loop(l->a, blk, v, lo, hi, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lp);
    if (!lp)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    *body = &lp->body;
    return RT_OK;
}

// The loop of the panels of step elements over [0, vcur) (var v) in blk; *body its body.
static rt_status rt_gemm_panel_loop(rt_lower *l, rt_kir_block *blk, int32_t v, int32_t vcur,
                                    int64_t step, rt_kir_block **body) {
    return rt_gemm_loop(
        l, blk, v, rt_i(l, 0),
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, rt_v(l, vcur), rt_i(l, step - 1)), rt_i(l, step)),
        body);
}

// A batched GEMM's A of one k block with rows contiguous along k (attention's Q, K = 64) is read
// in place by the micro-kernel, as a brgemm does: its pack cost 7% of 96 x 128x128x64 on a
// Sapphire Rapids core (the A block is used by only N / nr column panels). *a_srow its row
// stride, *a_base its address.
static bool rt_gemm_a_in_place(rt_lower *l, const rt_gemm *g, bool masked_a, int64_t *a_srow,
                               rt_kir_expr **a_base) {
    int64_t a_sk = 0;
    return g->implicit && g->a_batch && g->alpha == 1.0 && g->K <= g->kc && !g->tri.on &&
           !g->tokens && !masked_a &&
           rt_gemm_plain_read(l, g, g->ra, g->gvar[RT_GEMM_G_M], g->n_gvar[RT_GEMM_G_M], a_srow,
                              &a_sk, a_base) &&
           a_sk == 1 && *a_srow > 1;
}

rt_status rt_lower_gemm(rt_lower *l, const rt_gemm *g, const rt_gemm_epi *epi) {
    rt_arena *a = l->a;
    const rt_stmt *s = &l->op->stmts[g->stmt];
    int64_t mt = rt_ceil_div(g->M, g->mc), ntl = rt_ceil_div(g->N, g->nc);
    // Work item = one mc row block x a run of bpg column blocks: A is packed once per (mc, kc)
    // and reused across the run (BLIS order pc -> jc inside the item), B once per (kc, nc). The
    // column blocks are the nc blocks of every batch entry, batch-major (nblk of them): A holds
    // no batch var, so a run over several entries packs it once for all of them. The number of
    // runs is the model's (rt_perf_cpu_gemm_block).
    // With a_batch A is an entry's too: the runs stay within an entry (nblk = its ntl blocks)
    // and the items are entry-major, batch x mt x ng of them.
    int64_t nblk = g->a_batch ? ntl : g->batch * ntl, entries = g->a_batch ? g->batch : 1;
    int64_t ng = g->ng > 0 && g->ng <= nblk ? g->ng : nblk;
    int64_t bpg = rt_ceil_div(nblk, ng);
    ng = rt_ceil_div(nblk, bpg);
    const char *what = rt_gemm_phase_what(a, g);
    l->p = rt_kir_add_phase(a, l->k, what ? what : "gemm", entries * mt * ng);
    if (!l->p)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    l->done.gemm.ng = ng;
    l->done.gemm.items = entries * mt * ng;
    rt_kir_phase *p = l->p;
    if (g->implicit)
        RT_TRY(rt_lower_begin_stmt(l, s));
    int64_t a_elems = rt_round_up((int64_t)g->mc * g->kc, 16);
    int64_t b_end = a_elems + rt_round_up(g->nc, g->nr) * g->kc;
    // Masked packs (rt_gemm_pack_masked) keep their row tables after the B block.
    rt_gemm_mask mask_a, mask_b;
    bool masked_a = g->implicit && rt_gemm_mask_plan(l, g->ra, g->gvar[RT_GEMM_G_M],
                                                     g->n_gvar[RT_GEMM_G_M], &mask_a);
    bool masked_b = g->implicit && rt_gemm_mask_plan(l, g->rb, g->gvar[RT_GEMM_G_N],
                                                     g->n_gvar[RT_GEMM_G_N], &mask_b);
    int64_t rows_a = rt_round_up(g->mc, g->mr), rows_b = rt_round_up(g->nc, g->nr);
    int64_t tbl_a = b_end, tbl_b = b_end + (masked_a ? mask_a.n_dims * rows_a : 0);
    p->scratch_bytes = (tbl_b + (masked_b ? mask_b.n_dims * rows_b : 0)) * 4;
    if (p->scratch_bytes > l->k->scratch_bytes)
        l->k->scratch_bytes = p->scratch_bytes;
    int32_t vi0 = rt_kir_add_var(a, p, "i0", RT_KIR_I64),
            vj0 = rt_kir_add_var(a, p, "j0", RT_KIR_I64);
    int32_t vmc = rt_kir_add_var(a, p, "mcur", RT_KIR_I64),
            vnc = rt_kir_add_var(a, p, "ncur", RT_KIR_I64);
    int32_t vpk = rt_kir_add_var(a, p, "pk", RT_KIR_I64),
            vp0 = rt_kir_add_var(a, p, "p0", RT_KIR_I64);
    int32_t vkc = rt_kir_add_var(a, p, "kcur", RT_KIR_I64);
    int32_t vjb = rt_kir_add_var(a, p, "jb", RT_KIR_I64);
    int32_t vjp = rt_kir_add_var(a, p, "jr", RT_KIR_I64),
            vip = rt_kir_add_var(a, p, "ir", RT_KIR_I64);
    bool batched = g->implicit && g->n_gvar[RT_GEMM_G_BATCH] > 0 && !g->a_batch;
    int32_t vcb = batched ? rt_kir_add_var(a, p, "cb", RT_KIR_I64) : vjb;
    rt_kir_block *body = &p->body;
    rt_kir_expr *item = rt_v(l, p->item_var);
    rt_kir_expr *c_batch = rt_i(l, 0);
    if (g->a_batch) {
        // Item = entry x (mt x ng) + the entry's item: the batch vars index A, B and C.
        c_batch = rt_gemm_bind_batch(l, g, body, rt_b(l, RT_KIR_DIV, item, rt_i(l, mt * ng)));
        item = rt_b(l, RT_KIR_MOD, item, rt_i(l, mt * ng));
    }
    rt_let(l, body, vi0,
           rt_b(l, RT_KIR_MUL,
                rt_gemm_tri_row_block(l, g, rt_b(l, RT_KIR_MOD, item, rt_i(l, mt)), mt),
                rt_i(l, g->mc)));
    rt_let(l, body, vmc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->mc), rt_b(l, RT_KIR_SUB, rt_i(l, g->M), rt_v(l, vi0))));
    if (g->tokens) // the actual row blocks: this item's of the plan's, then every mt-th
        body = rt_gemm_token_rows(l, g, body, item, mt, vi0, vmc);
    rt_kir_expr *jb_lo = rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_DIV, item, rt_i(l, mt)), rt_i(l, bpg));
    int32_t vpl = -1, vph = -1;
    if (g->tri.on) // only the k blocks the row block's range meets
        rt_gemm_tri_kblocks(l, g, body, vi0, vmc, &vpl, &vph);
    rt_kir_block *kb = NULL;
    RT_TRY(rt_gemm_loop(l, body, vpk, vpl >= 0 ? rt_v(l, vpl) : rt_i(l, 0),
                        vph >= 0 ? rt_v(l, vph) : rt_i(l, rt_ceil_div(g->K, g->kc)), &kb));
    rt_let(l, kb, vp0, rt_b(l, RT_KIR_MUL, rt_v(l, vpk), rt_i(l, g->kc)));
    rt_let(l, kb, vkc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->kc), rt_b(l, RT_KIR_SUB, rt_i(l, g->K), rt_v(l, vp0))));
    if (g->tri.on) // only the k steps the row block's range meets
        rt_gemm_tri_kclamp(l, g, kb, vi0, vmc, vp0, vkc);
    int32_t buf_b = l->data_buf[g->tb], buf_c = l->data_buf[s->out];
    // A block (mcur x kcur) as mr-tall panels (alpha folded in) once per k block, then for each
    // nc block of the run the B block (kcur x ncur) as nr-wide panels after it.
    int64_t a_srow = 0;
    rt_kir_expr *a_base = NULL;
    bool a_direct = rt_gemm_a_in_place(l, g, masked_a, &a_srow, &a_base);
    rt_gemm_operand opa = {false, g->mr, vmc, vkc, vi0, vp0, 0, masked_a ? &mask_a : NULL,
                           tbl_a, rows_a};
    if (!a_direct)
        RT_TRY(rt_gemm_pack_operand(l, kb, g, &opa));
    rt_kir_block *jbb = NULL;
    RT_TRY(rt_gemm_loop(
        l, kb, vcb, jb_lo,
        rt_b(l, RT_KIR_MIN, rt_i(l, nblk), rt_b(l, RT_KIR_ADD, jb_lo, rt_i(l, bpg))), &jbb));
    if (batched) {
        // Column block cb = batch index x ntl + nc block; the batch vars index C and B directly.
        rt_let(l, jbb, vjb, rt_b(l, RT_KIR_MOD, rt_v(l, vcb), rt_i(l, ntl)));
        c_batch = rt_gemm_bind_batch(l, g, jbb, rt_b(l, RT_KIR_DIV, rt_v(l, vcb), rt_i(l, ntl)));
    }
    rt_let(l, jbb, vj0, rt_b(l, RT_KIR_MUL, rt_v(l, vjb), rt_i(l, g->nc)));
    rt_let(l, jbb, vnc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->nc), rt_b(l, RT_KIR_SUB, rt_i(l, g->N), rt_v(l, vj0))));
    rt_gemm_operand opb = {true,  g->nr, vnc, vkc, vj0, vp0, a_elems, masked_b ? &mask_b : NULL,
                           tbl_b, rows_b};
    RT_TRY(rt_gemm_pack_operand(l, jbb, g, &opb));
    // A next B block (the model's rt_perf_cpu_gemm.b_prefetch and its test in gemm_time).
    bool pf_next = !g->implicit && g->bn == 1 && (bpg > 1 || g->K > g->kc);
    int32_t vjn = -1, vpn = -1;
    if (pf_next)
        rt_gemm_next_b_at(
            l, g, jbb, vjb, jb_lo,
            rt_b(l, RT_KIR_MIN, rt_i(l, nblk), rt_b(l, RT_KIR_ADD, jb_lo, rt_i(l, bpg))), vp0, &vjn,
            &vpn);
    // Row panels outside, column panels inside: the mr x kc A micro-panel (the broadcast
    // operand) stays in L1 while the micro-kernels stream the B block's panels from L2, as
    // BLIS keeps its broadcast operand's micro-panel in L1. kc is then bounded by mr x kc
    // rather than by the nr-wide B panel (kc x 64 floats would fill a 32 KiB L1 at kc = 80):
    // on a Zen 4 core this order at kc = 512 ran 3-5% faster than B panels outside at kc = 80-160
    // (1024^3-4096^3, BERT's FFN, 3x3 convolution; interleaved runs).
    rt_kir_block *ib = NULL, *jpb = NULL;
    RT_TRY(rt_gemm_panel_loop(l, jbb, vip, vmc, g->mr, &ib));
    if (pf_next)
        rt_gemm_prefetch_next_b(l, g, ib, vip, buf_b, vjn, vpn,
                                g->tri.on ? rt_gemm_tri_khi(l, g, vi0, vmc) : NULL);
    if (g->a_batch && mt == 1 && ng == 1 && !g->tokens && !g->tri.on)
        rt_gemm_prefetch_next_entry(l, g, ib, vip);
    int32_t vks = -1, vkn = -1;
    if (g->tri.on) // the row panel's k steps
        rt_gemm_tri_panel_k(l, g, ib, vip, vi0, vmc, vp0, vkc, &vks, &vkn);
    RT_TRY(rt_gemm_panel_loop(l, ib, vjp, vnc, g->nr, &jpb));
    rt_gemm_uk_at at = {vip,
                        vjp,
                        vkc,
                        vi0,
                        vj0,
                        vmc,
                        vnc,
                        vpk,
                        a_elems,
                        buf_c,
                        c_batch,
                        vks,
                        vkn,
                        vpl,
                        vph,
                        a_direct ? a_srow : 0,
                        l->data_buf[g->ta],
                        vp0,
                        a_base};
    return rt_gemm_ukernel_call(l, jpb, g, epi, &at);
}
