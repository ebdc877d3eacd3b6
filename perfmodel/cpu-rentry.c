// cpu-rentry.c: contractions over a ragged batch whose every entry is its own GEMM (CORA's
// per-entry operators: attention scores Q.K^T and attention x V over len(b) x len(b) per batch
// entry and head, the variable-size batched GEMM): their detection from the statement (one rule
// for the model and codegen/lower-cpu-rentry.c), the model's groups and the time of the plan the
// backend executes (a work list of per-entry GEMMs split over the threads by cost), causal
// ones (j in 0:i + 1: the packed triangles of masked attention) priced row block by row block.
#include "perfmodel.h"

#include <string.h>

// Is e a read of a length tensor at one batch var (len(b))? Gives the tensor and the var.
static bool rentry_len_read(const rt_op *op, const rt_expr *e, const bool *is_batch, int32_t *len,
                            int32_t *bv) {
    if (!e || e->kind != RT_EXPR_READ || e->n_args != 1 || e->tensor < 0 ||
        e->tensor >= op->n_tensors || !op->tensors[e->tensor].is_length ||
        e->args[0]->kind != RT_EXPR_INDEX || e->args[0]->var < 0 || !is_batch[e->args[0]->var])
        return false;
    *len = e->tensor;
    *bv = e->args[0]->var;
    return true;
}

// Every dim of tensor t indexed by one of vars[0..n) (one var per dim, each at most once).
static bool rentry_plain(const rt_op *op, int32_t t, const int32_t *vars, int32_t n) {
    const rt_tensor *tn = &op->tensors[t];
    if (tn->dtype != RT_DTYPE_F32 || tn->has_pad || n != tn->n_dims)
        return false;
    for (int32_t d = 0; d < n; d++)
        for (int32_t e = 0; e < d; e++)
            if (vars[d] == vars[e] || vars[d] < 0)
                return false;
    return true;
}

// Within one entry (the batch vars fixed) the offset of t at vars is affine in the GEMM vars:
// every dim inside a dim indexed by a GEMM var has an extent that only the batch vars decide
// (a constant, or len(x) with dim x indexed by a batch var), so that the rows of a ragged dim
// under one entry are equally long and consecutive (src/ref/layout.h).
// Is dim d of t the causal triangle of r: its last, indexed by r's tri var, of extent
// DIMREF(d - 1) + tri_c with dim d - 1 indexed by m (float(..., i:len(b), i + 1))?
static bool rentry_tri_dim(const rt_op *op, int32_t t, const int32_t *vars, int32_t d,
                           const rt_perf_gemm_rentry *r) {
    const rt_tensor *tn = &op->tensors[t];
    int32_t tv = r->tri == 1 ? r->n_var : r->tri == 2 ? r->k_var : -1;
    if (tv < 0 || d != tn->n_dims - 1 || d < 1 || vars[d] != tv || vars[d - 1] != r->m_var)
        return false;
    const rt_expr *e = tn->dims[d].extent, *ref = e;
    int64_t c = 0;
    if (e && e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_ADD && e->n_args == 2) {
        int32_t iref = e->args[0]->kind == RT_EXPR_DIMREF ? 0 : 1;
        ref = e->args[iref];
        if (!rt_expr_const_int(op, e->args[1 - iref], &c))
            return false;
    }
    return ref && ref->kind == RT_EXPR_DIMREF && ref->dim == d - 1 && c == r->tri_c;
}

static bool rentry_layout_ok(const rt_op *op, int32_t t, const int32_t *vars, const bool *is_batch,
                             const rt_perf_gemm_rentry *r) {
    const rt_tensor *tn = &op->tensors[t];
    int32_t first = tn->n_dims;
    for (int32_t d = 0; d < tn->n_dims && first == tn->n_dims; d++)
        if (!is_batch[vars[d]])
            first = d;
    for (int32_t d = first + 1; d < tn->n_dims; d++) {
        const rt_expr *e = tn->dims[d].extent;
        int64_t c;
        if (rentry_tri_dim(op, t, vars, d, r))
            continue;
        if (!tn->dims[d].ragged) {
            if (!rt_expr_const_int(op, e, &c))
                return false;
            continue;
        }
        if (!e || e->kind != RT_EXPR_READ || e->n_args != 1 || e->tensor < 0 ||
            !op->tensors[e->tensor].is_length || e->args[0]->kind != RT_EXPR_DIMREF ||
            e->args[0]->dim < 0 || e->args[0]->dim >= d || !is_batch[vars[e->args[0]->dim]])
            return false;
    }
    return true;
}

static void rentry_read_vars(const rt_expr *r, int32_t *vars) {
    for (int32_t d = 0; d < r->n_args && d < RT_MAX_DIMS; d++)
        vars[d] = r->args[d]->kind == RT_EXPR_INDEX ? r->args[d]->var : -1;
}

static bool rentry_uses(const rt_expr *r, int32_t v) {
    for (int32_t d = 0; d < r->n_args; d++)
        if (r->args[d]->kind == RT_EXPR_INDEX && r->args[d]->var == v)
            return true;
    return false;
}

// The vars' roles: batch (stored, read by both), m (stored, A's), n (C's innermost, B's), k.
static bool rentry_roles(const rt_op *op, const rt_stmt *s, const rt_expr *const *reads, bool *is_b,
                         rt_perf_gemm_rentry *out) {
    bool in_c[16] = {false};
    for (int32_t d = 0; d < s->n_lhs; d++)
        in_c[s->lhs_vars[d]] = true;
    int32_t inner = s->lhs_vars[s->n_lhs - 1];
    int32_t ib = rentry_uses(reads[0], inner) ? 0 : 1;
    out->ra = reads[1 - ib], out->rb = reads[ib];
    out->m_var = out->n_var = out->k_var = -1;
    for (int32_t i = 0; i < s->n_loops; i++) {
        int32_t v = s->loops[i];
        int64_t lo;
        bool ua = rentry_uses(out->ra, v), ub = rentry_uses(out->rb, v);
        if (!s->vars[v].lo || !rt_expr_const_int(op, s->vars[v].lo, &lo) || lo != 0)
            return false;
        if (s->vars[v].is_reduce && ua && ub && !in_c[v] && out->k_var < 0)
            out->k_var = v;
        else if (in_c[v] && ua && ub && out->n_batch < RT_PERF_RENTRY_MAX_BATCH)
            is_b[v] = true, out->batch_var[out->n_batch++] = v;
        else if (in_c[v] && ua && !ub && out->m_var < 0)
            out->m_var = v;
        else if (in_c[v] && ub && !ua && v == inner && out->n_var < 0)
            out->n_var = v;
        else
            return false;
    }
    return out->m_var >= 0 && out->n_var >= 0 && out->k_var >= 0 && out->n_batch > 0;
}

// The causal range (rt_perf_gemm_rentry.tri): n or k over [0, m + c), c <= 1; at most one.
// Scores (on n) also need one k block of constant depth and '+=!' (C is written once, by the
// micro-kernel's masked epilogue). False where a var's range is another affine form.
static bool rentry_tri_of(const rt_op *op, const rt_stmt *s, rt_perf_gemm_rentry *out) {
    out->tri = 0;
    const int32_t gv[3] = {out->m_var, out->n_var, out->k_var};
    for (int32_t g = 0; g < 3; g++) {
        const rt_expr *hi = s->vars[gv[g]].hi;
        int64_t c;
        rt_affine af;
        if (!hi || rt_expr_const_int(op, hi, &c) || hi->kind == RT_EXPR_READ)
            continue;
        if (g == 0 || out->tri || !rt_expr_affine(op, hi, &af) || af.n_terms != 1 ||
            af.var[0] != out->m_var || af.coef[0] != 1 || af.c0 > 1)
            return false;
        out->tri = g, out->tri_c = af.c0;
    }
    int64_t kc;
    if (out->tri == 1 && (s->op != RT_ASSIGN_ADD_INIT || !s->vars[out->k_var].hi ||
                          !rt_expr_const_int(op, s->vars[out->k_var].hi, &kc)))
        return false;
    return true;
}

bool rt_perf_gemm_rentry_of(const rt_op *op, const rt_stmt *s, rt_perf_gemm_rentry *out) {
    memset(out, 0, sizeof *out);
    if ((s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) || s->n_preds > 0 || s->recursive ||
        s->n_vars > 16 || s->n_loops != s->n_vars || s->n_lhs < 2)
        return false;
    const rt_expr *reads[2];
    int32_t n = 0;
    out->alpha = 1.0;
    if (!rt_expr_product_factors(s->rhs, reads, &n, &out->alpha) || n != 2 ||
        reads[0]->tensor == s->out || reads[1]->tensor == s->out)
        return false;
    bool is_b[16] = {false};
    if (!rentry_roles(op, s, reads, is_b, out))
        return false;
    if (!rentry_tri_of(op, s, out))
        return false;
    int32_t va[RT_MAX_DIMS], vb[RT_MAX_DIMS];
    rentry_read_vars(out->ra, va);
    rentry_read_vars(out->rb, vb);
    if (!rentry_plain(op, out->ra->tensor, va, out->ra->n_args) ||
        !rentry_plain(op, out->rb->tensor, vb, out->rb->n_args) ||
        !rentry_plain(op, s->out, s->lhs_vars, s->n_lhs) ||
        !rentry_layout_ok(op, out->ra->tensor, va, is_b, out) ||
        !rentry_layout_ok(op, out->rb->tensor, vb, is_b, out) ||
        !rentry_layout_ok(op, s->out, s->lhs_vars, is_b, out))
        return false;
    // Scores' C is addressed as the packed triangle (row m at m (m - 1) / 2 + m tri_c).
    if (out->tri == 1 && !rentry_tri_dim(op, s->out, s->lhs_vars, s->n_lhs - 1, out))
        return false;
    out->entries = 1;
    for (int32_t i = 0; i < out->n_batch; i++) {
        int64_t hi;
        if (!rt_expr_const_int(op, s->vars[out->batch_var[i]].hi, &hi) || hi < 1)
            return false;
        out->batch_ext[i] = hi;
        out->entries *= hi;
    }
    const int32_t gv[3] = {out->m_var, out->n_var, out->k_var};
    bool ragged = out->tri != 0;
    for (int32_t g = 0; g < 3; g++) {
        const rt_expr *hi = s->vars[gv[g]].hi;
        out->len[g] = out->len_b[g] = -1;
        if (out->tri && g == out->tri) { // M + tri_c - 1 per entry
            out->ext[g] = -1;
            continue;
        }
        if (rt_expr_const_int(op, hi, &out->ext[g]) && out->ext[g] >= 1)
            continue;
        if (!rentry_len_read(op, hi, is_b, &out->len[g], &out->len_b[g]))
            return false;
        out->ext[g] = -1;
        ragged = true;
    }
    return ragged; // all-dense batches are the implicit GEMM's
}

int64_t rt_perf_gemm_rentry_run(const rt_perf_gemm_rentry *r) {
    int64_t run = 1;
    for (int32_t i = r->n_batch - 1; i >= 0; i--) {
        for (int32_t g = 0; g < 3; g++)
            if (r->len[g] >= 0 && r->len_b[g] == r->batch_var[i])
                return run;
        run *= r->batch_ext[i];
    }
    return run;
}

// A per-entry A is read in place by the micro-kernel, as a brgemm does, where its rows run
// along k (its last dim) and it needs no causal pack: an entry's A block is used by only
// N / nr column panels, so its pack (a transpose into mr-tall panels, about a third of a short
// entry's time) buys little. The row stride is the entry's (rentry_layout_ok): a constant
// (attention's Q as (b, i, h, d)) or one the lengths decide (attention's P as (b, h, i, j),
// rows of len(b)), read at run time.
static bool rentry_a_in_place(const rt_op *op, const rt_perf_gemm_rentry *r) {
    const rt_expr *ra = r->ra;
    const rt_tensor *t = &op->tensors[ra->tensor];
    if (r->tri == 2 || ra->n_args != t->n_dims || ra->args[ra->n_args - 1]->var != r->k_var)
        return false;
    int32_t dm = -1;
    for (int32_t d = 0; d < ra->n_args; d++)
        if (ra->args[d]->kind == RT_EXPR_INDEX && ra->args[d]->var == r->m_var)
            dm = d;
    if (dm < 0)
        return false;
    for (int32_t d = dm + 1; d < t->n_dims; d++)
        if (ra->args[d]->kind != RT_EXPR_INDEX)
            return false;
    return true;
}

// A per-entry B may be read in place where its rows run along n, n of a constant extent (the
// plan's nr and nc must divide it: rt_perf_cpu_rentry_block), k's stride a constant (the dims
// inside it of constant extents: *ld), no causal range, and no scale to fold into its pack
// (A read in place has none). Its pack copied each k step's nr floats as they are: the
// micro-kernel loads the same lines from the tensor instead.
static bool rentry_b_in_place(const rt_op *op, const rt_perf_gemm_rentry *r, bool a_in_place,
                              int64_t *ld) {
    const rt_expr *rb = r->rb;
    const rt_tensor *t = &op->tensors[rb->tensor];
    const rt_expr *last = rb->args[rb->n_args - 1];
    if (r->tri || r->ext[1] <= 0 || rb->n_args != t->n_dims || last->kind != RT_EXPR_INDEX ||
        last->var != r->n_var || (a_in_place && r->alpha != 1.0))
        return false;
    *ld = 1;
    for (int32_t d = rb->n_args - 1; d >= 0; d--) {
        if (rb->args[d]->kind == RT_EXPR_INDEX && rb->args[d]->var == r->k_var)
            return true;
        int64_t e;
        if (t->dims[d].ragged || !rt_expr_const_int(op, t->dims[d].extent, &e) || e <= 0)
            return false;
        *ld *= e;
    }
    return false;
}

bool rt_perf_cpu_rentry_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    rt_perf_gemm_rentry r;
    if (m->n_access != 3 || !rt_perf_gemm_rentry_of(m->op, &m->op->stmts[m->main_stmt], &r))
        return false;
    const rt_stmt *s = &m->op->stmts[m->main_stmt];
    memset(g, 0, sizeof *g);
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        g->group[x] = -1;
    g->axis_m = g->axis_n = g->axis_k = -1;
    for (int32_t x = 0; x < s->n_axes && x < m->n_axes; x++) {
        if (s->axes[x].n_members != 1)
            return false;
        int32_t v = s->axes[x].members[0];
        int32_t grp = v == r.m_var   ? RT_PERF_GEMM_M
                      : v == r.n_var ? RT_PERF_GEMM_N
                      : v == r.k_var ? RT_PERF_GEMM_K
                                     : RT_PERF_GEMM_BATCH;
        g->group[x] = grp;
        if (grp != RT_PERF_GEMM_BATCH)
            *(grp == RT_PERF_GEMM_M   ? &g->axis_m
              : grp == RT_PERF_GEMM_N ? &g->axis_n
                                      : &g->axis_k) = x;
    }
    if (g->axis_m < 0 || g->axis_n < 0 || g->axis_k < 0)
        return false;
    g->in_a = g->in_b = -1;
    for (int32_t i = 0; i < 2; i++) {
        if (m->access[i].tensor == r.ra->tensor)
            g->in_a = i;
        if (m->access[i].tensor == r.rb->tensor)
            g->in_b = i;
    }
    if (g->in_a < 0 || g->in_b < 0 || g->in_a == g->in_b)
        return false;
    // Blocks sized for the longest entry; the backend runs each entry at its own extents.
    g->M = rt_max64(1, m->axes[g->axis_m].extent);
    g->N = rt_max64(1, m->axes[g->axis_n].extent);
    g->K = rt_max64(1, m->axes[g->axis_k].extent);
    g->batch = r.entries;
    g->rentry = true;
    g->re_tri = r.tri, g->re_tri_c = r.tri_c;
    g->re_run = rt_perf_gemm_rentry_run(&r);
    // A's and B's panels read along k where k is the read's innermost dim.
    g->a_k_unit = r.ra->args[r.ra->n_args - 1]->var == r.k_var;
    g->b_k_unit = r.rb->args[r.rb->n_args - 1]->var == r.k_var;
    g->re_a_in_place = rentry_a_in_place(m->op, &r);
    g->re_b_in_place = rentry_b_in_place(m->op, &r, g->re_a_in_place, &g->re_b_ld);
    double mean[3];
    const int32_t ax[3] = {g->axis_m, g->axis_n, g->axis_k};
    for (int32_t i = 0; i < 3; i++)
        mean[i] = m->axes[ax[i]].ragged ? rt_extent_dist_mean(&m->axes[ax[i]].dist)
                                        : (double)m->axes[ax[i]].extent;
    double e = (double)r.entries;
    if (r.tri) // the triangle's var: about half the rows' extent on average
        mean[r.tri] = 0.5 * (mean[0] + 1.0);
    g->re_n_mean = mean[1];
    g->a_bytes = 4.0 * e * mean[0] * mean[2];
    g->b_bytes = 4.0 * e * mean[2] * mean[1];
    g->c_bytes = 4.0 * e * mean[0] * mean[1];
    return true;
}

// Work items of the per-entry plan: four per thread, rounded up to a power of two, so that the
// cost ranges (the backend's split) fall evenly at every power-of-two thread count up to the
// device's. Each item walks the work list's runs to find its share (the model's `walk`): more
// items than that only multiply the walks (64 items cost a tenth of short entries' time).
int64_t rt_perf_cpu_rentry_items(const rt_device *dev) {
    int64_t units = dev && dev->units > 0 ? dev->units : 1, items = 4;
    while (items < 4 * units)
        items *= 2;
    return items;
}

int32_t rt_perf_cpu_rentry_b_sub(int32_t nr, int64_t lanes, bool k_unit) {
    int32_t ws = RT_PERF_CPU_MAX_INTERLEAVE;
    return k_unit && nr > ws && nr % ws == 0 && lanes >= 1 && ws % lanes == 0 ? ws : 0;
}

int64_t rt_perf_cpu_rentry_b_cols(const rt_perf_cpu_gemm *g) {
    int64_t nc = rt_max64(1, g->nc), kc = rt_max64(1, g->kc);
    int64_t fit = rt_max64(1, RT_PERF_RENTRY_B_BYTES / (4 * kc) / nc);
    return nc * rt_min64(rt_ceil_div(rt_max64(1, g->N), nc), fit);
}

// Do a k block's rows of B read in place (nr floats each, re_b_ld apart) stay in L1? Rows a
// stride of s lines apart start in only sets / gcd(sets, s) of L1's sets, so at most that many
// times its ways of them stay: attention x V's V as (b, j, h, d), 2 KiB apart, starts in 2 of
// a 48 KiB 12-way L1's 64 sets, 24 rows. Past that the micro-kernels of an entry's row panels
// each fetch B from L2 again: same-process A/B on Sapphire Rapids, V in place over sentences of
// at most 24 tokens 6-9% faster than its pack, over 78 as fast to 3% slower, over 512
// 14-25% slower.
static bool rentry_b_rows_fit(const rt_device *dev, const rt_perf_cpu_gemm *g) {
    int32_t t1 = dev->n_levels - 2;
    if (t1 < 0)
        return false;
    const rt_mem_level *l1 = &dev->level[t1];
    int64_t line = l1->line_bytes > 0 ? l1->line_bytes : 64, ways = l1->ways > 0 ? l1->ways : 8;
    int64_t sets = rt_max64(1, l1->capacity_bytes / (line * ways));
    int64_t a = sets, b = (4 * g->re_b_ld / line) % sets;
    while (b > 0) { // a = gcd(sets, the stride in lines), sets where it is a multiple of them
        int64_t r = a % b;
        a = b, b = r;
    }
    return rt_min64(g->K, g->kc) <= sets / a * ways;
}

// The per-entry plan's blocks: the dense rule for the longest entry, row blocks of at most 128
// rows (a work unit is one entry's row block: the threads' shares differ by one unit at most).
void rt_perf_cpu_rentry_block(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    if (!g->rentry)
        return;
    const rt_device *dev = m->dev;
    g->re_warm = m->warm;
    g->mc = rt_max64(g->mr, rt_min64(g->mc, rt_round_up(128, g->mr)));
    g->ng = 1;
    if (g->re_tri == 1) // scores: one k block (C is written once, by the masked epilogue)
        g->kc = rt_max64(g->kc, g->K);
    g->items = rt_perf_cpu_rentry_items(dev);
    rt_perf_cpu_uk_rules ur;
    rt_perf_cpu_uk_rules_of(dev, &ur);
    // Short entries (N one vector on average: sentence-length attention scores) take one
    // vector of columns: a wider micro-kernel would mostly multiply the zeros past N.
    if (g->re_n_mean <= (double)ur.lanes && g->nr > ur.lanes && g->nc % ur.lanes == 0)
        g->nr = ur.lanes;
    g->b_sub = rt_perf_cpu_rentry_b_sub((int32_t)g->nr, ur.lanes, g->b_k_unit);
    // An entry's last row panel runs a kernel of its rows rounded up to a quarter of mr
    // (rentry_call), its k steps split until acc_min accumulators hide the FMA latency: the
    // mr-row kernel multiplies the rows past the entry's end too (13 rows, mr = 12: 24 rows).
    g->row_tail_acc = g->mr > 1 ? (int32_t)ur.acc_min : 0;
    // B in place: every column panel full (no edge panel would read past the rows), and the
    // rows of a k block within L1's ways at their stride (rentry_b_rows_fit).
    g->re_b_in_place = g->re_b_in_place && g->b_sub == 0 && g->N % g->nr == 0 &&
                       g->nc % g->nr == 0 && rentry_b_rows_fit(dev, g);
    // A in place only for narrow entries: where they are RT_PERF_RENTRY_A_PACK_COLS wide on
    // average, each A element feeds that many multiply-adds and its pack is a few percent of
    // the entry, while the micro-kernel then reads one stream instead of mr rows.
    if (g->re_n_mean >= RT_PERF_RENTRY_A_PACK_COLS)
        g->re_a_in_place = false;
}

// Cycles of one micro-kernel call on a tile of `rows` valid rows (at most mr) over kk k steps:
// the mr-row kernel's (full, priced by the caller) or, with row tails, the tail kernel's.
static double rentry_call(const rt_device *dev, const rt_perf_cpu_gemm *g,
                          const rt_perf_ukernel *full, int64_t rows, int64_t kk) {
    rows = rt_perf_cpu_tail_rows(g->mr, rows);
    if (rows >= g->mr || g->row_tail_acc <= 0)
        return full->call_cycles;
    int64_t lanes = dev->lanes > 0 ? dev->lanes : 1, nv = rt_ceil_div(g->nr, lanes);
    rt_perf_ukernel t;
    (void)rt_perf_cpu_ukernel_sets(dev, 4, rows, g->nr, rt_max64(1, kk),
                                   rt_perf_cpu_tail_sets(g->mr, nv, rows, g->row_tail_acc), &t);
    return t.call_cycles;
}

// Extra cycles of the store of an edge tile over a full one (codegen/emit-llvm-uk.c rt_l_uk_edge)
// with rows x cols valid: the accumulators spilled to the stack, then per valid row its whole
// vectors (a load of the spill, C's load and store) and the columns of the vector that cols
// cuts one by one (a load of the spill, C's load and store each; about 1.4 cycles per element
// measured on a Zen 3 core, 34.1 ns per 6 x 13 tile). With mask registers (ur->masked_edge)
// no spill: per valid row its vectors straight from the registers, the cut one masked.
static double rentry_edge_cycles(const rt_perf_cpu_gemm *g, const rt_perf_cpu_uk_rules *ur,
                                 int64_t rows, int64_t cols) {
    if (rows >= g->mr && cols >= g->nr)
        return 0;
    int64_t vl = ur->lanes > 0 ? ur->lanes : 1, whole = cols / vl, cut = cols % vl;
    if (ur->masked_edge) // per valid row its vectors from the registers, the cut one masked
        return (double)rows * ((double)rt_ceil_div(cols, vl) * 2.0 + 1.0);
    double spill = (double)(g->mr * (g->nr / vl));
    return spill + (double)rows * ((double)whole * 3.0 + (double)cut * 1.4 + 1.0);
}

// The entry's k blocks (codegen/lower-cpu-rentry.c): as few as kc allows, of equal depth
// (1024 as 342 x 3 rather than 470 + 470 + 84); one empty block when Ke = 0 (it zeroes C).
static void rentry_kblocks(const rt_perf_cpu_gemm *g, int64_t Ke, int64_t *nkb, int64_t *kk) {
    *nkb = rt_max64(1, rt_ceil_div(Ke, g->kc));
    *kk = rt_ceil_div(Ke, *nkb);
}

// Cycles of C's traffic for rows x cols of an entry over nkb k blocks: the first block's stores
// write it, each later one reads and writes it again, at the bandwidth of the level the whole
// output lives in (an entry's C is not read again once done, so no cache keeps it for the
// next). The micro-kernels' stores of lines that miss stall the k loop once the store buffer
// fills: perf over Q.K^T on RACE sentences puts 17% of the kernel's samples on its C stores.
static double rentry_c_cycles(const rt_device *dev, const rt_perf_cpu_gemm *g, int64_t rows,
                              int64_t cols, int64_t nkb, double ghz) {
    double bytes = 4.0 * (double)rows * (double)cols * (double)(2 * rt_max64(1, nkb) - 1);
    return bytes * rt_perf_cpu_stream_cycles_per_byte(dev, g->c_bytes, 4.0 * (double)g->nr, ghz);
}

// Cycles of one entry's row block of r rows (packing share in *pack): per k block and run of
// b_cols columns of B, A's pack, then per column block of nc the micro-kernel calls.
static double rentry_row_block(const rt_perf_model *m, const rt_perf_cpu_gemm *g, int64_t r,
                               int64_t Ne, int64_t Ke, double ghz, double *pack) {
    const rt_device *dev = m->dev;
    int64_t nkb, kk, ncb = rt_ceil_div(Ne, g->nc);
    rentry_kblocks(g, Ke, &nkb, &kk);
    double runs = (double)rt_max64(1, rt_ceil_div(Ne, rt_perf_cpu_rentry_b_cols(g)));
    rt_perf_ukernel uk;
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, rt_max64(1, kk), &uk);
    // A read in place saves its pack's instructions, not its read: the first column panel's
    // micro-kernels bring the block's rows from the level A lives in, at that level's bandwidth
    // share, once per k block (the pack is bound by the same read where A is large).
    double a_read = g->re_a_in_place
                        ? 4.0 * (double)r * (double)kk *
                              rt_perf_cpu_stream_cycles_per_byte(
                                  dev, g->a_bytes, 4.0 * (double)r * (double)g->kc, ghz)
                        : 0;
    double a = g->re_a_in_place ? 0 : rt_perf_cpu_pack_cycles(dev, g, false, r, kk, ghz);
    double blk = runs * a + a_read;
    // Edge tiles: the last row panel (r % mr rows) and the last column panel of a block.
    rt_perf_cpu_uk_rules ur;
    rt_perf_cpu_uk_rules_of(dev, &ur);
    int64_t rm = r % g->mr, rfull = r / g->mr;
    // The row panels' calls per column panel: the full ones, and the last's of rm rows.
    double calls = (double)rfull * uk.call_cycles + (rm ? rentry_call(dev, g, &uk, rm, kk) : 0);
    for (int32_t lc = 0; lc < 2 && ncb > 0; lc++) {
        int64_t c = lc ? Ne - (ncb - 1) * g->nc : g->nc, ct = lc ? 1 : ncb - 1;
        int64_t cm = c % g->nr, cfull = c / g->nr;
        double edge = (double)cfull * (rm ? rentry_edge_cycles(g, &ur, rm, g->nr) : 0) +
                      (double)rfull * (cm ? rentry_edge_cycles(g, &ur, g->mr, cm) : 0) +
                      (rm && cm ? rentry_edge_cycles(g, &ur, rm, cm) : 0);
        blk += (double)ct * ((double)rt_ceil_div(c, g->nr) * calls + edge);
    }
    *pack = (double)nkb * runs * a;
    return (double)nkb * blk + rentry_c_cycles(dev, g, r, Ne, nkb, ghz);
}

// Extra cycles of the masked epilogue store of a scores tile (rows x cols, the causal C of
// lower-cpu-rentry.c): the accumulators spilled to the stack, then per row its valid columns
// with their packed-row offsets, vector-wide where the row is whole, masked on the diagonal.
static double rentry_tri_store_cycles(const rt_perf_cpu_gemm *g, int64_t lanes, int64_t rows,
                                      int64_t cols, bool diag) {
    int64_t vl = lanes > 0 ? lanes : 1;
    double spill = (double)(g->mr * (g->nr / vl));
    double per_row = diag ? (double)cols * 1.4 + 2.0 : (double)rt_ceil_div(cols, vl) * 2.0 + 2.0;
    return spill + (double)rows * per_row;
}

// Cycles of one row block [i0, i0 + r) of a causal entry (g->re_tri, packing share in *pack):
// scores (tri 1) run each row panel's column panels up to its last row + tri_c, stores masked
// per row; attention x V (tri 2) packs A with zeros past each row's range, runs the k blocks
// up to the block's last row + tri_c and each panel's micro-kernels over its own k steps.
static double rentry_tri_row_block(const rt_perf_model *m, const rt_perf_cpu_gemm *g, int64_t i0,
                                   int64_t r, const int64_t *e, double ghz, double *pack) {
    const rt_device *dev = m->dev;
    rt_perf_cpu_uk_rules ur;
    rt_perf_cpu_uk_rules_of(dev, &ur);
    int64_t c = g->re_tri_c, lim = rt_max64(0, i0 + r - 1 + c), rp = rt_ceil_div(r, g->mr);
    double cyc = 0;
    if (g->re_tri == 1) {
        int64_t Ke = e[2], kk = rt_max64(1, Ke);
        rt_perf_ukernel uk;
        (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, kk, &uk);
        *pack = rt_perf_cpu_pack_cycles(dev, g, false, r, Ke, ghz);
        cyc = *pack;
        for (int64_t p = 0; p < rp; p++) {
            int64_t rows = rt_min64(g->mr, r - p * g->mr);
            int64_t hi = rt_min64(e[1], rt_max64(0, i0 + p * g->mr + rows - 1 + c));
            int64_t tiles = rt_ceil_div(hi, g->nr);
            // Tiles wholly under the diagonal store plainly; those it cuts, masked.
            int64_t below = rt_max64(0, i0 + p * g->mr + c) / g->nr;
            below = rt_min64(below, tiles);
            cyc +=
                (double)tiles * rentry_call(dev, g, &uk, rows, kk) +
                rentry_c_cycles(dev, g, rows, rt_min64(hi, tiles * g->nr), 1, ghz) +
                (double)below * rentry_tri_store_cycles(g, ur.lanes, rows, g->nr, false) +
                (double)(tiles - below) * rentry_tri_store_cycles(g, ur.lanes, rows, g->nr, true);
        }
        return cyc;
    }
    int64_t nkb = rt_max64(1, rt_ceil_div(lim, g->kc)), kk = rt_ceil_div(lim, nkb);
    int64_t ncb = rt_ceil_div(e[1], g->nr);
    rt_perf_ukernel uk;
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, rt_max64(1, kk), &uk);
    // The masked pack reads the row's valid part and writes the whole panel.
    *pack = (double)nkb * rt_perf_cpu_pack_cycles(dev, g, false, r, kk, ghz);
    cyc = *pack;
    int64_t cm = e[1] % g->nr;
    for (int64_t pk = 0; pk < nkb; pk++) {
        int64_t p0 = pk * kk, kcur = rt_min64(kk, lim - p0);
        for (int64_t p = 0; p < rp; p++) {
            int64_t rows = rt_min64(g->mr, r - p * g->mr);
            int64_t ks = rt_min64(kcur, rt_max64(0, i0 + p * g->mr + rows - 1 + c - p0));
            if (ks == 0 && pk > 0)
                continue;
            double call = rentry_call(dev, g, &uk, rows, kk) * (double)rt_max64(1, ks) /
                          (double)rt_max64(1, kk);
            double edge = (double)(ncb - (cm ? 1 : 0)) *
                              (rows < g->mr ? rentry_edge_cycles(g, &ur, rows, g->nr) : 0) +
                          (cm ? rentry_edge_cycles(g, &ur, rows, cm) : 0);
            cyc += (double)ncb * call + edge;
        }
    }
    return cyc + rentry_c_cycles(dev, g, r, e[1], nkb, ghz);
}

// Cycles of B's packs of one entry: once per k block and run of b_cols columns.
static double rentry_b_packs(const rt_perf_model *m, const rt_perf_cpu_gemm *g, int64_t Ne,
                             int64_t Ke, double ghz) {
    if (g->re_b_in_place) // the micro-kernels read B's rows where they are
        return 0;
    int64_t nkb, kk, w = rt_perf_cpu_rentry_b_cols(g), runs = rt_ceil_div(Ne, w);
    rentry_kblocks(g, Ke, &nkb, &kk);
    double b = 0;
    if (runs > 1)
        b += (double)(runs - 1) * rt_perf_cpu_pack_cycles(m->dev, g, true, w, kk, ghz);
    if (runs > 0)
        b += rt_perf_cpu_pack_cycles(m->dev, g, true, Ne - (runs - 1) * w, kk, ghz);
    return (double)nkb * b;
}

// Cycles of one entry of extents (Me, Ne, Ke), of its packing, of its largest unit (a row
// block) and of its B packs (a thread that owns some of its row blocks packs B on its own).
static double rentry_entry(const rt_perf_model *m, const rt_perf_cpu_gemm *g, const int64_t *e,
                           double ghz, double *pack, double *unit, double *b_pack) {
    int64_t nb = rt_ceil_div(e[0], g->mc);
    *pack = *unit = *b_pack = 0;
    if (nb == 0)
        return 0;
    if (g->re_tri) { // row blocks of their own extents; B packed up to the last row's range
        double t = 0;
        for (int64_t b = 0; b < nb; b++) {
            double p, u = rentry_tri_row_block(m, g, b * g->mc, rt_min64(g->mc, e[0] - b * g->mc),
                                               e, ghz, &p);
            t += u;
            *pack += p;
            *unit = u > *unit ? u : *unit;
        }
        *b_pack = rentry_b_packs(m, g, e[1], e[2], ghz);
        *pack += *b_pack;
        return t + *b_pack;
    }
    double p_full, p_last;
    double full = rentry_row_block(m, g, rt_min64(g->mc, e[0]), e[1], e[2], ghz, &p_full);
    double last = rentry_row_block(m, g, e[0] - (nb - 1) * g->mc, e[1], e[2], ghz, &p_last);
    *b_pack = rentry_b_packs(m, g, e[1], e[2], ghz);
    *pack = (double)(nb - 1) * p_full + p_last + *b_pack;
    *unit = full;
    return (double)(nb - 1) * full + last + *b_pack;
}

// Expectation over the entries: the ragged extents of one length source (the axes' group) move
// together, different sources independently; dense extents are constants.
bool rt_perf_cpu_rentry_time(const rt_perf_model *m, const rt_perf_cpu_gemm *g, double *ns,
                             double *pack_ns, double *eff) {
    const rt_device *dev = m->dev;
    double ghz = rt_perf_cpu_ghz(dev);
    const int32_t ax[3] = {g->axis_m, g->axis_n, g->axis_k};
    const rt_extent_dist *src[3];
    int32_t n_src = 0, src_of[3];
    for (int32_t i = 0; i < 3; i++) {
        const rt_perf_axis *a = &m->axes[ax[i]];
        src_of[i] = -1;
        if (!a->ragged || a->dist.n < 1 ||
            (g->re_tri && i == g->re_tri)) // the causal var follows m
            continue;
        for (int32_t j = 0; j < i && src_of[i] < 0; j++)
            if (src_of[j] >= 0 && a->group >= 0 && m->axes[ax[j]].group == a->group)
                src_of[i] = src_of[j];
        if (src_of[i] < 0) {
            src[n_src] = &a->dist;
            src_of[i] = n_src++;
        }
    }
    // Independent sources multiply their points: at most RT_PERF_RENTRY_MAX_POINTS entries in
    // all (vgemm's M, N and K from three length tensors: 4 buckets each, not 64^3 entries).
    rt_extent_dist coarse[3];
    int64_t cvals[3][RT_PERF_RENTRY_MAX_POINTS];
    double cwts[3][RT_PERF_RENTRY_MAX_POINTS];
    int32_t per = 1; // the most points per source whose product stays within the bound
    while (n_src > 0) {
        int64_t prod = 1;
        for (int32_t s = 0; s < n_src; s++)
            prod *= per + 1;
        if (prod > RT_PERF_RENTRY_MAX_POINTS)
            break;
        per++;
    }
    for (int32_t s = 0; s < n_src; s++) {
        rt_extent_dist_coarsen(src[s], per, cvals[s], cwts[s], &coarse[s]);
        src[s] = &coarse[s];
    }
    int32_t at[3] = {0, 0, 0};
    double total = 0, pack = 0, unit = 0, b_pack = 0;
    for (;;) {
        int64_t e[3];
        double w = 1;
        for (int32_t i = 0; i < 3; i++)
            e[i] = src_of[i] < 0 ? m->axes[ax[i]].extent : src[src_of[i]]->values[at[src_of[i]]];
        for (int32_t s = 0; s < n_src; s++)
            w *= src[s]->weights[at[s]];
        if (g->re_tri) // the causal var's extent: the last row's range
            e[g->re_tri] = rt_max64(0, e[0] + g->re_tri_c - 1);
        double p, u, bp, c = rentry_entry(m, g, e, ghz, &p, &u, &bp);
        total += w * c;
        pack += w * p;
        unit = u > unit ? u : unit;
        b_pack = bp > b_pack ? bp : b_pack;
        rt_perf_count_steps(m, 1);
        int32_t s = 0;
        while (s < n_src && ++at[s] == src[s]->n)
            at[s++] = 0;
        if (s == n_src)
            break;
    }
    int64_t units = dev->units > 0 ? dev->units : 1;
    double entries = (double)g->batch;
    // The work list's walk: every item visits every run of equal-cost entries twice (their
    // cost, then their units) and the entries of the runs its share meets (about two).
    double run = (double)rt_max64(1, g->re_run);
    double walk = 8.0 * (double)g->items * (entries / run + 2.0 * run) / (double)units;
    // A thread's share ends within one unit of its cost range; where it starts inside an entry
    // it packs that entry's B too.
    double busiest = entries * total / (double)units + unit + (units > 1 ? b_pack : 0) + walk;
    rt_perf_ukernel uk;
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, g->kc, &uk);
    *eff = uk.eff;
    *ns = busiest / ghz;
    *pack_ns = entries * pack / (double)units / ghz;
    return true;
}
