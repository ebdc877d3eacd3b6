// plan-cpu.c: the CPU plan of an rProgram (perfmodel.h rt_perf_cpu_plan) — made once per
// rProgram by rt_perf_evaluate from the rTiles and the device file, priced by cost.c, merged by
// construct.c (equal plans are one candidate), printed in the JSON report and executed by the
// CPU backend (codegen/lower-cpu.c), which prints the plan it executed in the kernel's opening
// comment. The row-wise fusion rule of the backend's loop nests lives here too, so that the
// plan knows whether the modeled statement gets a loop nest of its own.
#include "perfmodel.h"

#include <string.h>

static const char *const rt_plan_kind_names[] = {"none", "nest", "loops", "gemm"};
_Static_assert(sizeof rt_plan_kind_names / sizeof rt_plan_kind_names[0] ==
                   RT_PERF_CPU_PLAN_KIND_COUNT,
               "one name per plan kind");

static const char *const rt_win_pack_names[] = {"none", "x", "rows"};
_Static_assert(sizeof rt_win_pack_names / sizeof rt_win_pack_names[0] ==
                   RT_PERF_CPU_WIN_PACK_ROWS + 1,
               "one name per window packing");

const char *rt_perf_cpu_plan_kind_name(rt_perf_cpu_plan_kind k) {
    return k >= 0 && k < RT_PERF_CPU_PLAN_KIND_COUNT ? rt_plan_kind_names[k] : "?";
}

bool rt_perf_cpu_stmt_outer(const rt_op *op, const rt_stmt *s, int32_t *var, int64_t *lo,
                            int64_t *hi) {
    for (int32_t i = 0; i < s->n_loops; i++) {
        int32_t v = s->loops[i];
        if (v < 0 || v >= s->n_vars)
            return false;
        if (s->vars[v].is_reduce)
            continue;
        *var = v;
        return s->vars[v].lo && s->vars[v].hi && rt_expr_const_int(op, s->vars[v].lo, lo) &&
               rt_expr_const_int(op, s->vars[v].hi, hi) && *hi > *lo;
    }
    return false;
}

bool rt_perf_cpu_reads_tensor(const rt_expr *e, int32_t t, int32_t first_var, bool *ok) {
    if (!e)
        return false;
    bool found = false;
    if (e->kind == RT_EXPR_READ && e->tensor == t) {
        found = true;
        if (e->n_args < 1 || e->args[0]->kind != RT_EXPR_INDEX || e->args[0]->var != first_var)
            *ok = false;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        found = rt_perf_cpu_reads_tensor(e->args[i], t, first_var, ok) || found;
    return found;
}

bool rt_perf_cpu_row_fusable(const rt_op *op, int32_t g0, int32_t j) {
    int32_t vj, v0;
    int64_t lo0, hi0, loj, hij;
    const rt_stmt *sj = &op->stmts[j];
    if (!rt_perf_cpu_stmt_outer(op, &op->stmts[g0], &v0, &lo0, &hi0) ||
        !rt_perf_cpu_stmt_outer(op, sj, &vj, &loj, &hij) || lo0 != loj || hi0 != hij)
        return false;
    for (int32_t i = g0; i < j; i++) {
        const rt_stmt *si = &op->stmts[i];
        int32_t vi;
        int64_t a, b;
        if (!rt_perf_cpu_stmt_outer(op, si, &vi, &a, &b) || si->n_lhs < 1 || si->lhs_vars[0] != vi)
            return false;
        bool ok = true;
        rt_perf_cpu_reads_tensor(sj->rhs, si->out, vj, &ok);
        if (!ok || sj->out == si->out)
            return false;
        // sj writes what si reads: keep them apart unless si reads it by its own row too.
        bool ok2 = true;
        rt_perf_cpu_reads_tensor(si->rhs, sj->out, vi, &ok2);
        if (!ok2)
            return false;
    }
    return sj->n_lhs >= 1 && sj->lhs_vars[0] == vj;
}

// Does every read of tensor t in e index its first k dims by the vars 0..k-1 (the row)?
static bool reads_by_row(const rt_expr *e, int32_t t, int32_t k) {
    if (!e)
        return true;
    if (e->kind == RT_EXPR_READ && e->tensor == t) {
        if (e->n_args < k)
            return false;
        for (int32_t d = 0; d < k; d++)
            if (e->args[d]->kind != RT_EXPR_INDEX || e->args[d]->var != d)
                return false;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (!reads_by_row(e->args[i], t, k))
            return false;
    return true;
}

// Do the statements of group [g0, g1) share their first k kept loops as one row, each with
// loops of constant ranges below it?
static bool row_depth_ok(const rt_op *op, int32_t g0, int32_t g1, int32_t k) {
    const rt_stmt *s0 = &op->stmts[g0];
    for (int32_t si = g0; si < g1; si++) {
        const rt_stmt *s = &op->stmts[si];
        // Var d is the row's d-th: LHS vars come first (spec.h), each a loop of its own, and
        // at least one loop stays below the row (the vector loop).
        if (s->n_lhs < k || s->n_loops <= k || s->n_vars <= k)
            return false;
        for (int32_t d = 0; d < k; d++)
            if (s->lhs_vars[d] != d || s->loops[d] != d || s->vars[d].is_reduce ||
                !rt_expr_equal(s->vars[d].lo, s0->vars[d].lo) ||
                !rt_expr_equal(s->vars[d].hi, s0->vars[d].hi))
                return false;
        // The loops below the row run over constant ranges: a row of known length, the same
        // for every row. Below a ragged one (a ragged softmax's j < len(b)) the rows are as
        // long as the sequences, and short ones lose more than they gain: each row's statements
        // are a chain (max, then exp and sum, then the division) with scalar remainders whose
        // latency the out-of-order core overlapped across the rows of one statement; a softmax
        // over MRPC's rows (about 50) ran 1.2x slower at depth 3, over RACE's (about 350) 1.4x
        // faster.
        for (int32_t i = k; i < s->n_loops; i++) {
            int32_t v = s->loops[i];
            int64_t lo, hi;
            if (v < 0 || v >= s->n_vars || !s->vars[v].lo || !s->vars[v].hi ||
                !rt_expr_const_int(op, s->vars[v].lo, &lo) ||
                !rt_expr_const_int(op, s->vars[v].hi, &hi))
                return false;
        }
        // Every read of a tensor the group writes is of the row the reader is on.
        for (int32_t w = g0; w < g1; w++)
            if (!reads_by_row(s->rhs, op->stmts[w].out, k))
                return false;
    }
    return true;
}

int32_t rt_perf_cpu_row_depth(const rt_op *op, int32_t g0, int32_t g1) {
    int32_t k = 1;
    while (g1 - g0 > 1 && k < RT_MAX_DIMS && row_depth_ok(op, g0, g1, k + 1))
        k++;
    return k;
}

bool rt_perf_cpu_row_local(const rt_op *op, int32_t g1, int32_t depth, int32_t si,
                           int64_t *row_elems) {
    const rt_stmt *w = &op->stmts[si];
    int32_t t = w->out;
    const rt_tensor *tn = &op->tensors[t];
    if (tn->role != RT_ROLE_TEMP || tn->n_dims <= depth || w->op == RT_ASSIGN_ADD ||
        tn->dtype != RT_DTYPE_F32 || tn->has_pad)
        return false;
    int64_t row = 1;
    for (int32_t d = 0; d < tn->n_dims; d++) {
        int64_t e;
        bool dense = !rt_expr_mentions_dimref(tn->dims[d].extent) && tn->dims[d].extent &&
                     rt_expr_const_int(op, tn->dims[d].extent, &e) && e >= 1;
        if ((d >= depth || depth == 1) && !dense)
            return false;
        if (d >= depth)
            row *= e;
        if (row > 16384)
            return false;
    }
    for (int32_t j = 0; j < op->n_stmts; j++) {
        bool first_ok = true;
        if (j != si && op->stmts[j].out == t)
            return false;
        if (rt_perf_cpu_reads_tensor(op->stmts[j].rhs, t, 0, &first_ok) && (j <= si || j >= g1))
            return false;
    }
    *row_elems = row;
    return true;
}

bool rt_perf_cpu_row_group(const rt_op *op, int32_t s, int32_t *g0, int32_t *g1) {
    for (int32_t i = 0; i < op->n_stmts;) {
        int32_t j = i + 1;
        while (j < op->n_stmts && rt_perf_cpu_row_fusable(op, i, j))
            j++;
        if (s >= i && s < j) {
            *g0 = i;
            *g1 = j;
            return j - i > 1;
        }
        i = j;
    }
    return false;
}

// Is statement main alone in its row-wise group when the statements are grouped from the first
// (codegen/lower-cpu.c rt_lower_general)?
static bool main_alone(const rt_op *op, int32_t main) {
    for (int32_t i = 0; i < op->n_stmts;) {
        int32_t j = i + 1;
        while (j < op->n_stmts && rt_perf_cpu_row_fusable(op, i, j))
            j++;
        if (main >= i && main < j)
            return j == i + 1;
        i = j;
    }
    return false;
}

void rt_perf_cpu_plan_make(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if (m->thread_level >= 0)
        return;
    pl->kind = RT_PERF_CPU_PLAN_NEST;
    pl->block_level = m->block_level;
    pl->top = m->top;
    pl->loops_tiled = m->block_level >= 0 && m->top < RT_MAX_MEM_LEVELS &&
                      m->block_level <= m->top && rt_perf_cpu_loop_plan(m, p, &pl->loops);
    if (m->recursive)
        return; // recursion over a tree: level-by-level phases
    if (rt_perf_cpu_gemm_view(m, p, &pl->gemm)) {
        rt_perf_cpu_uk_rules ur;
        rt_perf_cpu_uk_rules_of(m->dev, &ur);
        pl->kind = RT_PERF_CPU_PLAN_GEMM;
        pl->uk_lanes = ur.lanes;
        return;
    }
    if (pl->loops_tiled && main_alone(m->op, m->main_stmt))
        pl->kind = RT_PERF_CPU_PLAN_LOOPS;
}

static void loops_text(const rt_perf_cpu_loops *lp, const rt_stmt *s, int32_t bl, int32_t top,
                       rt_buf *out) {
    rt_buf_printf(out, " items=%lld", (long long)lp->items);
    for (int32_t i = 0; i < lp->n_vars; i++) {
        int32_t v = lp->var[i];
        const char *name = s && v >= 0 && v < s->n_vars ? s->vars[v].name : "?";
        if (!lp->tiled[i]) {
            rt_buf_printf(out, " %s=untiled", name);
            continue;
        }
        rt_buf_printf(out, " %s=%lld+%lld:", name, (long long)lp->lo[i], (long long)lp->extent[i]);
        // The chain of tiles: the work item's, then one per level where it shrinks (a loop).
        rt_buf_printf(out, "%lld", (long long)lp->tile[i][bl]);
        for (int32_t lv = bl + 1; lv <= top; lv++)
            if (lp->tile[i][lv] < lp->tile[i][lv - 1])
                rt_buf_printf(out, "/%lld", (long long)lp->tile[i][lv]);
    }
    if (lp->window)
        rt_buf_printf(out, " window pack=%s yu=%lld", rt_win_pack_names[lp->win_pack],
                      (long long)lp->win_yu);
}

void rt_perf_cpu_plan_text(const rt_perf_cpu_plan *pl, const rt_op *op, const rt_stmt *s,
                           rt_buf *out) {
    (void)op;
    rt_buf_puts(out, rt_perf_cpu_plan_kind_name(pl->kind));
    if (pl->kind == RT_PERF_CPU_PLAN_GEMM) {
        const rt_perf_cpu_gemm *g = &pl->gemm;
        rt_buf_printf(out,
                      " M=%lld N=%lld K=%lld batch=%lld micro-kernel=%lldx%lld lanes=%lld "
                      "kc=%lld mc=%lld nc=%lld ng=%lld items=%lld%s%s%s%s%s%s%s%s",
                      (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->batch,
                      (long long)g->mr, (long long)g->nr, (long long)pl->uk_lanes, (long long)g->kc,
                      (long long)g->mc, (long long)g->nc, (long long)g->ng, (long long)g->items,
                      g->implicit ? " implicit" : "", g->a_batch ? " batch-a" : "",
                      g->b_prefetch ? " prefetch-b" : "", g->tri.on ? " triangular" : "",
                      g->tokens ? " tokens" : "", g->rentry ? " per-entry" : "",
                      g->row_tail_acc > 0 ? " row-tails" : "", g->re_warm ? " warm" : "");
    } else if (pl->kind == RT_PERF_CPU_PLAN_LOOPS) {
        loops_text(&pl->loops, s, pl->block_level, pl->top, out);
    }
}

static uint64_t key_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

uint64_t rt_perf_cpu_plan_key(const rt_perf_cpu_plan *pl) {
    uint64_t h = key_mix(0x51, (uint64_t)pl->kind);
    if (pl->kind == RT_PERF_CPU_PLAN_GEMM) {
        const rt_perf_cpu_gemm *g = &pl->gemm;
        const int64_t v[] = {g->mr,    g->nr,        g->kc,      g->mc,           g->nc,     g->ng,
                             g->items, pl->uk_lanes, g->a_batch, g->row_tail_acc, g->re_warm};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            h = key_mix(h, (uint64_t)v[i]);
        return h;
    }
    if (pl->kind != RT_PERF_CPU_PLAN_LOOPS)
        return h;
    // The tiles of the kept variables from the scale-out level down, and the loops they make (a
    // level adds one only where a tile shrinks), and the window's packing.
    const rt_perf_cpu_loops *lp = &pl->loops;
    int32_t bl = pl->block_level, top = pl->top;
    for (int32_t i = 0; i < lp->n_vars; i++)
        if (lp->tiled[i])
            h = key_mix(key_mix(h, (uint64_t)lp->var[i]), (uint64_t)lp->tile[i][bl]);
    for (int32_t lv = bl + 1; lv <= top; lv++)
        for (int32_t i = 0; i < lp->n_vars; i++)
            if (lp->tiled[i] && lp->tile[i][lv] < lp->tile[i][lv - 1])
                h = key_mix(key_mix(h, (uint64_t)lp->var[i] + 1000), (uint64_t)lp->tile[i][lv]);
    return key_mix(key_mix(h, (uint64_t)lp->win_pack), (uint64_t)lp->win_yu);
}

// ---------------------------------------------------------------------------------------------
// Token-flattened contractions (rt_perf_gemm_tokens_of)
// ---------------------------------------------------------------------------------------------

// Is tensor t an f32 (b:B, len(b), E1, ..., Eq) packed ragged tensor, q >= 1 dense constant
// trailing dims, len a length tensor read at dim 0? Gives B, D = E1 * ... * Eq (the row length:
// in the packed layout, src/ref/layout.h, element (b, i, e1, .., eq) sits at
// (start[1][b] + i) * D + the row-major offset of (e1, .., eq)) and the length tensor.
static bool tokens_tensor(const rt_op *op, int32_t t, int64_t *batch, int64_t *d, int32_t *len) {
    const rt_tensor *tn = &op->tensors[t];
    if (tn->n_dims < 3 || tn->dtype != RT_DTYPE_F32 || tn->has_pad || tn->dims[0].ragged ||
        !tn->dims[1].ragged || !rt_expr_const_int(op, tn->dims[0].extent, batch) || *batch < 1)
        return false;
    *d = 1;
    for (int32_t k = 2; k < tn->n_dims; k++) {
        int64_t e;
        if (tn->dims[k].ragged || !rt_expr_const_int(op, tn->dims[k].extent, &e) || e < 1)
            return false;
        *d *= e;
    }
    const rt_expr *e = tn->dims[1].extent;
    if (!e || e->kind != RT_EXPR_READ || e->n_args != 1 || e->args[0]->kind != RT_EXPR_DIMREF ||
        e->args[0]->dim != 0 || e->tensor < 0 || e->tensor >= op->n_tensors ||
        !op->tensors[e->tensor].is_length)
        return false;
    *len = e->tensor;
    return true;
}

static bool tokens_index(const rt_expr *e, int32_t var) {
    return e->kind == RT_EXPR_INDEX && e->var == var;
}

// Is var iv's range the constant [0, ext)?
static bool tokens_range(const rt_op *op, const rt_ivar *iv, int64_t ext) {
    int64_t lo, hi;
    return iv->lo && iv->hi && rt_expr_const_int(op, iv->lo, &lo) && lo == 0 &&
           rt_expr_const_int(op, iv->hi, &hi) && hi == ext;
}

// Do n vars, each over the constant [0, extent of dim d0 + j of tensor t), index dims w0.. of the
// dense W in that order, W's dims of the same extents? Then they flatten into one index of W
// (contiguous, row-major) as they do in t's rows.
static bool tokens_run(const rt_op *op, const rt_stmt *s, const int32_t *vars, int32_t n, int32_t t,
                       int32_t d0, const rt_expr *rw, int32_t w0) {
    const rt_tensor *tn = &op->tensors[t], *tw = &op->tensors[rw->tensor];
    for (int32_t j = 0; j < n; j++) {
        int64_t e, ew;
        if (!rt_expr_const_int(op, tn->dims[d0 + j].extent, &e) ||
            !rt_expr_const_int(op, tw->dims[w0 + j].extent, &ew) || e != ew ||
            !tokens_index(rw->args[w0 + j], vars[j]) || !tokens_range(op, &s->vars[vars[j]], e))
            return false;
    }
    return true;
}

// W's reads: (k.., n..) or (n.., k..), each run flattening (tokens_run). Fills wk, wn.
static bool tokens_weight(const rt_op *op, const rt_stmt *s, const rt_expr *rw,
                          rt_perf_gemm_tokens *out) {
    const rt_tensor *tw = &op->tensors[rw->tensor];
    int32_t nk = out->n_k, nn = out->n_n;
    if (tw->ragged || tw->has_pad || tw->dtype != RT_DTYPE_F32 || tw->n_dims != nk + nn ||
        rw->n_args != nk + nn)
        return false;
    if (tokens_run(op, s, out->k_vars, nk, out->ta, 2, rw, 0) &&
        tokens_run(op, s, out->n_vars, nn, s->out, 2, rw, nk)) {
        out->wk = out->N, out->wn = 1;
        return true;
    }
    if (tokens_run(op, s, out->n_vars, nn, s->out, 2, rw, 0) &&
        tokens_run(op, s, out->k_vars, nk, out->ta, 2, rw, nn)) {
        out->wk = 1, out->wn = out->K;
        return true;
    }
    return false;
}

// The (b, i) of C and A: b over [0, B), i over [0, len(b)).
static bool tokens_rows(const rt_op *op, const rt_stmt *s, int32_t bv, int32_t iv, int32_t len,
                        int64_t batch) {
    const rt_ivar *vi = &s->vars[iv];
    const rt_expr *ih = vi->hi;
    int64_t lo;
    return ih && ih->kind == RT_EXPR_READ && ih->tensor == len && ih->n_args == 1 &&
           tokens_index(ih->args[0], bv) && vi->lo && rt_expr_const_int(op, vi->lo, &lo) &&
           lo == 0 && tokens_range(op, &s->vars[bv], batch);
}

enum { TOKENS_VARS = 2 * RT_MAX_DIMS };

bool rt_perf_gemm_tokens_of(const rt_op *op, const rt_stmt *s, rt_perf_gemm_tokens *out) {
    memset(out, 0, sizeof *out);
    if (s->n_vars > TOKENS_VARS || (s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) ||
        s->n_preds > 0 || s->recursive || s->n_lhs < 3 || s->n_lhs > 2 + RT_PERF_TOKENS_MAX_RUN)
        return false;
    int32_t bv = s->lhs_vars[0], iv = s->lhs_vars[1];
    int64_t bc, nc;
    int32_t len;
    if (!tokens_tensor(op, s->out, &bc, &nc, &len) || op->tensors[s->out].n_dims != s->n_lhs)
        return false;
    // Every var once: b, i, the n run (C's trailing dims), the k run (A's); nothing else.
    bool seen[TOKENS_VARS] = {false};
    for (int32_t d = 0; d < s->n_lhs; d++) {
        int32_t v = s->lhs_vars[d];
        if (v < 0 || v >= s->n_vars || v >= TOKENS_VARS || seen[v] || s->vars[v].is_reduce)
            return false;
        seen[v] = true;
        if (d >= 2)
            out->n_vars[out->n_n++] = v;
    }
    const rt_expr *reads[2];
    int32_t n = 0;
    out->alpha = 1.0;
    if (!rt_expr_product_factors(s->rhs, reads, &n, &out->alpha) || n != 2)
        return false;
    for (int32_t ia = 0; ia < 2; ia++) {
        const rt_expr *ra = reads[ia], *rw = reads[1 - ia];
        int64_t ba, ka;
        int32_t la;
        if (ra->tensor == s->out || rw->tensor == s->out || ra->n_args < 3 ||
            ra->n_args > 2 + RT_PERF_TOKENS_MAX_RUN ||
            !tokens_tensor(op, ra->tensor, &ba, &ka, &la) ||
            op->tensors[ra->tensor].n_dims != ra->n_args || la != len || ba != bc ||
            !tokens_index(ra->args[0], bv) || !tokens_index(ra->args[1], iv) ||
            ra->n_args - 2 + out->n_n + 2 != s->n_vars)
            continue;
        bool seen_k[TOKENS_VARS] = {false}, ok = true;
        out->n_k = 0;
        for (int32_t d = 2; d < ra->n_args && ok; d++) {
            int32_t kv = ra->args[d]->kind == RT_EXPR_INDEX ? ra->args[d]->var : -1;
            ok = kv >= 0 && kv < s->n_vars && kv < TOKENS_VARS && s->vars[kv].is_reduce &&
                 !seen_k[kv];
            if (ok)
                seen_k[kv] = true, out->k_vars[out->n_k++] = kv;
        }
        out->ta = ra->tensor, out->K = ka, out->N = nc;
        if (!ok || !tokens_weight(op, s, rw, out))
            continue;
        if (!tokens_rows(op, s, bv, iv, len, bc))
            return false;
        out->b_var = bv, out->i_var = iv;
        out->k_var = out->k_vars[out->n_k - 1], out->n_var = out->n_vars[out->n_n - 1];
        out->tw = rw->tensor, out->len = len;
        out->ra = ra, out->rw = rw;
        out->batch = bc;
        return true;
    }
    return false;
}

static bool tokens_has(const int32_t *vars, int32_t n, int32_t v) {
    for (int32_t i = 0; i < n; i++)
        if (vars[i] == v)
            return true;
    return false;
}

// The group of a model axis of a token-flattened contraction: the fused (b.i) is m, an axis of
// n-run (k-run) vars only is n (k); -1 for any other.
int32_t rt_perf_gemm_tokens_group(const rt_axis *ax, const rt_perf_gemm_tokens *tk) {
    if (ax->n_members == 2 && ax->members[0] == tk->b_var && ax->members[1] == tk->i_var)
        return RT_PERF_GEMM_M;
    bool in_n = true, in_k = true;
    for (int32_t j = 0; j < ax->n_members; j++) {
        in_n = in_n && tokens_has(tk->n_vars, tk->n_n, ax->members[j]);
        in_k = in_k && tokens_has(tk->k_vars, tk->n_k, ax->members[j]);
    }
    return ax->n_members < 1 ? -1 : in_n ? RT_PERF_GEMM_N : in_k ? RT_PERF_GEMM_K : -1;
}
