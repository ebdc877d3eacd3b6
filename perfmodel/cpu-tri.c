// cpu-tri.c: triangular (affine-range) contractions on the CPU's packed GEMM (trmm, lower and
// upper): their detection from the statement (one rule for the model and codegen/lower-cpu-tri.c),
// the arithmetic of their row ranges, the model's groups and the balancing of their row blocks.
// The time of the plan is rt_perf_cpu_gemm_time's (cpu.c, tri_cycles).
#include "perfmodel.h"

#include <string.h>

// e = c0 + c1 * var mv (every other term zero); a NULL e is 0.
static bool tri_affine_in(const rt_op *op, const rt_expr *e, int32_t mv, int64_t *c0, int64_t *c1) {
    *c0 = *c1 = 0;
    if (!e)
        return true;
    rt_affine af;
    if (!rt_expr_affine(op, e, &af))
        return false;
    *c0 = af.c0;
    for (int32_t i = 0; i < af.n_terms; i++) {
        if (af.coef[i] == 0)
            continue;
        if (af.var[i] != mv)
            return false;
        *c1 += af.coef[i];
    }
    return true;
}

static bool tri_is_index(const rt_expr *e, int32_t v) {
    return e && e->kind == RT_EXPR_INDEX && e->var == v;
}

// A dense f32 tensor of two constant extents, without padding: its extents.
static bool tri_dense2(const rt_op *op, const rt_tensor *tn, int64_t *e0, int64_t *e1) {
    return tn->dtype == RT_DTYPE_F32 && !tn->ragged && !tn->has_pad && tn->n_dims == 2 &&
           tn->dims[0].extent && tn->dims[1].extent &&
           rt_expr_const_int(op, tn->dims[0].extent, e0) &&
           rt_expr_const_int(op, tn->dims[1].extent, e1) && *e0 >= 1 && *e1 >= 1;
}

bool rt_perf_tri_detect(const rt_op *op, int32_t si, rt_perf_tri *t) {
    memset(t, 0, sizeof *t);
    if (!op || si < 0 || si >= op->n_stmts)
        return false;
    const rt_stmt *s = &op->stmts[si];
    int64_t cm, cn, bk, bn, lo, hi;
    if ((s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) || s->n_preds > 0 || s->recursive ||
        s->n_vars != 3 || s->n_loops != 3 || s->n_lhs != 2 || !s->rhs ||
        !tri_dense2(op, &op->tensors[s->out], &cm, &cn))
        return false;
    const rt_expr *reads[2];
    int32_t n = 0;
    t->alpha = 1.0;
    if (!rt_expr_product_factors(s->rhs, reads, &n, &t->alpha) || n != 2)
        return false;
    int32_t mv = s->lhs_vars[0], nv = s->lhs_vars[1], kv = -1;
    for (int32_t v = 0; v < s->n_vars; v++)
        if (s->vars[v].is_reduce)
            kv = v;
    if (kv < 0 || mv < 0 || nv < 0 || mv >= s->n_vars || nv >= s->n_vars || mv == nv || mv == kv ||
        nv == kv)
        return false;
    // m and n over C's extents.
    if (!s->vars[mv].lo || !rt_expr_const_int(op, s->vars[mv].lo, &lo) || lo != 0 ||
        !s->vars[mv].hi || !rt_expr_const_int(op, s->vars[mv].hi, &hi) || hi != cm ||
        !s->vars[nv].lo || !rt_expr_const_int(op, s->vars[nv].lo, &lo) || lo != 0 ||
        !s->vars[nv].hi || !rt_expr_const_int(op, s->vars[nv].hi, &hi) || hi != cn)
        return false;
    int32_t ib = reads[0]->n_args == 2 && tri_is_index(reads[0]->args[1], nv) ? 0 : 1;
    const rt_expr *ra = reads[1 - ib], *rb = reads[ib];
    if (ra->tensor == s->out || rb->tensor == s->out || ra->tensor == rb->tensor ||
        rb->n_args != 2 || !tri_is_index(rb->args[1], nv) ||
        !tri_dense2(op, &op->tensors[rb->tensor], &bk, &bn) || bn != cn)
        return false;
    // B(k + s m + c, n).
    rt_affine af;
    if (!rt_expr_affine(op, rb->args[0], &af))
        return false;
    int64_t ck = 0;
    t->c = af.c0;
    for (int32_t i = 0; i < af.n_terms; i++) {
        if (af.var[i] == kv)
            ck += af.coef[i];
        else if (af.var[i] == mv)
            t->s += af.coef[i];
        else if (af.coef[i] != 0)
            return false;
    }
    // A(m, k): f32, two dims, no padding (ragged storage allowed: the layout gives its offsets).
    const rt_tensor *ta = &op->tensors[ra->tensor];
    if (ck != 1 || ta->dtype != RT_DTYPE_F32 || ta->has_pad || ta->n_dims != 2 || ra->n_args != 2 ||
        !tri_is_index(ra->args[0], mv) || !tri_is_index(ra->args[1], kv))
        return false;
    int64_t lo0, lo1, hi0, hi1;
    if (!tri_affine_in(op, s->vars[kv].lo, mv, &lo0, &lo1) || !s->vars[kv].hi ||
        !tri_affine_in(op, s->vars[kv].hi, mv, &hi0, &hi1) || (lo1 == 0 && hi1 == 0))
        return false;
    t->m_var = mv, t->n_var = nv, t->k_var = kv;
    t->ra = ra, t->rb = rb;
    t->M = cm, t->N = cn, t->K = bk;
    t->range = (rt_perf_tri_range){true, lo0 + t->c, lo1 + t->s, hi0 + t->c, hi1 + t->s};
    return true;
}

void rt_perf_tri_access_view(rt_perf_model *m) {
    rt_perf_tri t;
    if (m->thread_level >= 0 || !rt_perf_tri_detect(m->op, m->main_stmt, &t) || t.s == 0)
        return;
    const rt_stmt *s = &m->op->stmts[m->main_stmt];
    int32_t xm = -1;
    for (int32_t x = 0; x < s->n_axes && x < m->n_axes; x++)
        if (s->axes[x].n_members == 1 && s->axes[x].members[0] == t.m_var)
            xm = x;
    for (int32_t i = 0; i < m->n_access && xm >= 0; i++) {
        rt_perf_access *acc = &m->access[i];
        if (!acc->is_output && acc->tensor == t.rb->tensor && acc->n_dims == 2 && acc->affine[0]) {
            acc->coef[0][xm] = 0;
            rt_perf_access_terms(m, acc);
        }
    }
}

void rt_perf_tri_rows_range(const rt_perf_tri_range *r, int64_t K, int64_t m0, int64_t m1,
                            int64_t *lo, int64_t *hi) {
    int64_t last = m1 > m0 ? m1 - 1 : m0;
    int64_t a = r->lo0 + r->lo1 * (r->lo1 >= 0 ? m0 : last);
    int64_t b = r->hi0 + r->hi1 * (r->hi1 >= 0 ? last : m0);
    *lo = rt_min64(rt_max64(a, 0), K);
    *hi = rt_min64(rt_max64(b, *lo), K);
}

static double tri_f(int64_t lo0, int64_t lo1, int64_t hi0, int64_t hi1, int64_t K, int64_t j) {
    int64_t l = rt_min64(rt_max64(lo0 + lo1 * j, 0), K);
    int64_t h = rt_min64(rt_max64(hi0 + hi1 * j, 0), K);
    return h > l ? (double)(h - l) : 0;
}

// f(j) = max(0, min(K, hi0 + hi1 j) - max(0, lo0 + lo1 j)) is linear wherever none of its five
// clamps (lo = 0, lo = K, hi = 0, hi = K, hi = lo) changes regime. Each change lies within one
// of [q - 1, q + 1] of its root's truncated quotient q; cutting at q - 1 .. q + 2 leaves pieces
// of length one around it and linear pieces elsewhere, each summed as an arithmetic series.
double rt_perf_tri_sum(int64_t lo0, int64_t lo1, int64_t hi0, int64_t hi1, int64_t K, int64_t n) {
    if (n <= 0)
        return 0;
    int64_t cuts[20], nc = 0;
    const int64_t c0[5] = {lo0, lo0 - K, hi0, hi0 - K, hi0 - lo0};
    const int64_t c1[5] = {lo1, lo1, hi1, hi1, hi1 - lo1};
    for (int32_t i = 0; i < 5; i++) {
        if (c1[i] == 0)
            continue;
        int64_t q = -c0[i] / c1[i];
        for (int64_t d = -1; d <= 2; d++)
            if (q + d > 0 && q + d < n)
                cuts[nc++] = q + d;
    }
    for (int64_t i = 1; i < nc; i++) // sort
        for (int64_t j = i; j > 0 && cuts[j] < cuts[j - 1]; j--) {
            int64_t x = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = x;
        }
    double sum = 0;
    int64_t a = 0;
    for (int64_t i = 0; i <= nc; i++) {
        int64_t b = i < nc ? cuts[i] : n; // piece [a, b)
        if (b <= a)
            continue;
        sum += (tri_f(lo0, lo1, hi0, hi1, K, a) + tri_f(lo0, lo1, hi0, hi1, K, b - 1)) * 0.5 *
               (double)(b - a);
        a = b;
    }
    return sum;
}

bool rt_perf_cpu_tri_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    rt_perf_tri t;
    if (m->n_access != 3 || !rt_perf_tri_detect(m->op, m->main_stmt, &t))
        return false;
    const rt_stmt *s = &m->op->stmts[m->main_stmt];
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        g->group[x] = -1;
    g->axis_m = g->axis_n = g->axis_k = -1;
    for (int32_t x = 0; x < s->n_axes && x < m->n_axes; x++) {
        if (s->axes[x].n_members != 1)
            return false;
        int32_t v = s->axes[x].members[0];
        int32_t grp = v == t.m_var   ? RT_PERF_GEMM_M
                      : v == t.n_var ? RT_PERF_GEMM_N
                      : v == t.k_var ? RT_PERF_GEMM_K
                                     : -1;
        if (grp < 0)
            return false;
        g->group[x] = grp;
        *(grp == RT_PERF_GEMM_M ? &g->axis_m : grp == RT_PERF_GEMM_N ? &g->axis_n : &g->axis_k) = x;
    }
    if (g->axis_m < 0 || g->axis_n < 0 || g->axis_k < 0 || m->n_axes != 3)
        return false;
    g->in_a = g->in_b = -1;
    for (int32_t i = 0; i < 2; i++) {
        if (m->access[i].tensor == t.ra->tensor)
            g->in_a = i;
        if (m->access[i].tensor == t.rb->tensor)
            g->in_b = i;
    }
    if (g->in_a < 0 || g->in_b < 0 || g->in_a == g->in_b)
        return false;
    g->M = t.M, g->N = t.N, g->K = t.K, g->batch = 1;
    g->tri = t.range;
    g->a_k_unit = true;
    g->b_prefetch = true; // B plain, contiguous along n (rt_gemm_executed)
    // A holds the rows' useful elements (packed storage; a dense A is read only there too).
    g->a_bytes =
        4.0 * rt_perf_tri_sum(t.range.lo0, t.range.lo1, t.range.hi0, t.range.hi1, t.K, t.M);
    g->b_bytes = 4.0 * (double)t.K * (double)t.N;
    g->c_bytes = 4.0 * (double)t.M * (double)t.N;
    return true;
}

int64_t rt_perf_tri_row_block(const rt_perf_tri_range *r, int64_t q, int64_t mt) {
    bool grows = r->hi1 - r->lo1 >= 0; // later rows longer: the last block first
    bool hi_half = (q % 2 == 0) == grows;
    return hi_half ? mt - 1 - q / 2 : q / 2;
}

void rt_perf_cpu_tri_block(const rt_device *dev, rt_perf_cpu_gemm *g) {
    int64_t units = dev && dev->units > 0 ? dev->units : 1;
    if (!g->tri.on || units < 2)
        return;
    int64_t mt = rt_ceil_div(g->M, g->mc), ntl = rt_ceil_div(g->N, g->nc);
    int64_t ng = g->ng > 0 && g->ng <= ntl ? g->ng : ntl;
    // Whole column groups per core: every core then has every row block (equal work).
    if (ng % units == 0)
        return;
    // Else an even count of row blocks per core, in pairs of equal work, each item running all
    // the column blocks (column groups of unequal width would unbalance the cores again).
    int64_t rows = rt_round_up(rt_max64(mt, 2 * units), 2 * units);
    int64_t mc = rt_round_up(rt_ceil_div(g->M, rows), g->mr);
    if (mc < g->mr || rt_ceil_div(g->M, mc) % (2 * units) != 0)
        return; // too few rows to pair: leave the blocking
    g->mc = mc;
    g->ng = 1;
    g->items = rt_ceil_div(g->M, g->mc);
}
