// lower-cpu.c: turns one ranked rProgram (perfmodel.h) of an operator into the kernel IR for a
// CPU. Two shapes of code come out:
//   - the packed GEMM path, for a contraction C(m, n) (+)= A(m, k) * B(k, n) * const over dense
//     fp32 tensors (any strides of A and B, unit stride along n in C): the model's blocking rule
//     (rt_perf_cpu_gemm_block: kc from L1 for the A micro-panel, nc from L2 for the B block, mc
//     from L3, the rTiles seeding it) gives the blocks, the register rTile the mr x nr
//     micro-kernel, and the scale-out the work items (mc x nc blocks) spread over cores; B and A
//     panels are packed into per-thread scratch (BLIS / TPP BRGEMM structure), row panels
//     outside column panels, the next B block prefetched while the current one is used;
//   - the general path for everything else (elementwise, reductions, softmax, ragged ops):
//     loop nests over each statement's index variables with ragged bounds read from the length
//     tensors and offsets through the rt_layout start arrays, statements that share their outer
//     loop fused row-wise into one phase, the outer loop spread over cores and the innermost
//     loop marked for vectorization; where they share more leading loops over rows of constant
//     length (a layer norm's (b, i) rows), every statement runs on one row before the next, the
//     row temporaries in L1 scratch, the rows split over the cores (rt_lower_rows). The same
//     path with `naive` is the oracle for large shapes.
//     With an rProgram, the modeled statement alone in its phase is blocked by its rTiles
//     (rt_lower_tiled): scale-out tiles as work items, a tile loop per lower level, point loops
//     innermost, so every ranked candidate lowers to its own loop nest.
#include "lower-cpu-impl.h"

#include <math.h>
#include <string.h>

_Static_assert(RT_KIR_UK_MAX_ACC == RT_PERF_CPU_UK_MAX_ACC &&
                   RT_KIR_UK_MAX_NV == RT_PERF_CPU_UK_MAX_NV,
               "the micro-kernel the model chooses is one the emitters build");

static rt_status rt_lower_unsupported(rt_lower *l, rt_loc loc, const char *what) {
    return rt_fail(l->err, RT_ERR_BACKEND, loc, "%s is not supported by the CPU backend", what);
}

static rt_kir_type rt_lower_dtype(rt_dtype t, bool *ok) {
    *ok = true;
    switch (t) {
    case RT_DTYPE_F32:
        return RT_KIR_F32;
    case RT_DTYPE_F64:
        return RT_KIR_F64;
    case RT_DTYPE_I32:
        return RT_KIR_I32;
    default:
        *ok = false;
        return RT_KIR_F32;
    }
}

// The int32 arrays of every tree parameter a statement names (rt_kir_tree_field), after the
// tensors' buffers: "tree_T_child", "tree_T_order", ...
static rt_status rt_lower_tree_buffers(rt_lower *l) {
    return rt_tree_add_buffers(l->a, l->k, l->op, &l->tree_buf, &l->tree_child, l->err);
}

// Buffers: a data array per tensor and a start array per ragged dim (args order = this order),
// then the arrays of the trees.
static rt_status rt_lower_buffers(rt_lower *l) {
    const rt_op *op = l->op;
    RT_ALLOC(l->a, l->data_buf, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->start_buf, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->extent, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->local_base, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->local_dims, op->n_tensors, l->err);
    for (int32_t t = 0; t < op->n_tensors; t++) {
        const rt_tensor *tn = &op->tensors[t];
        l->local_base[t] = -1;
        bool ok;
        rt_kir_type ty = rt_lower_dtype(tn->dtype, &ok);
        if (!ok)
            return rt_lower_unsupported(l, tn->loc,
                                        rt_arena_printf(l->a, "tensor '%s' of type %s", tn->name,
                                                        rt_dtype_name(tn->dtype)));
        l->data_buf[t] = rt_kir_add_buf(l->a, l->k, rt_arena_printf(l->a, "t_%s", tn->name),
                                        RT_KIR_BUF_DATA, ty, t, -1);
        if (l->data_buf[t] < 0)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        l->k->bufs[l->data_buf[t]].written = tn->role != RT_ROLE_INPUT;
        for (int32_t d = 0; d < RT_MAX_DIMS; d++)
            l->start_buf[t][d] = -1;
        for (int32_t d = 0; d < tn->n_dims; d++) {
            if (rt_expr_mentions_dimref(tn->dims[d].extent)) {
                l->extent[t][d] = -1;
                l->start_buf[t][d] = rt_kir_add_buf(
                    l->a, l->k, rt_arena_printf(l->a, "t_%s_start%d", tn->name, (int)d),
                    RT_KIR_BUF_START, RT_KIR_I64, t, d);
                if (l->start_buf[t][d] < 0)
                    return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            } else if (!tn->dims[d].extent ||
                       !rt_expr_const_int(op, tn->dims[d].extent, &l->extent[t][d])) {
                return rt_lower_unsupported(
                    l, tn->dims[d].loc,
                    rt_arena_printf(l->a, "a run-time extent of '%s'", tn->name));
            }
        }
    }
    return rt_lower_tree_buffers(l);
}

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

static const struct rt_lx_ops rt_tr_ops = {.backend = "CPU", .sum_inner_loop = RT_KIR_LOOP_VECTOR};
// The naive kernel's: a vector-hinted reduction loop lets LLVM split a sum into lane partial sums;
// the oracle takes each element's terms in order, one chain.
static const struct rt_lx_ops rt_tr_ops_naive = {.backend = "CPU",
                                                 .sum_inner_loop = RT_KIR_LOOP_SERIAL};

// Position of statement var v among the window vars, -1 when it is not one.
int32_t rt_win_index(const rt_lower *l, int32_t v) {
    for (int32_t i = 0; i < l->win_nr; i++)
        if (l->win_red[i] == v)
            return i;
    return -1;
}

// Constant range [*lo, *hi) of statement var v, false when it has none.
bool rt_var_range(const rt_lower *l, int32_t v, int64_t *lo, int64_t *hi) {
    const rt_ivar *iv = &l->s->vars[v];
    return iv->lo && iv->hi && rt_expr_const_int(l->op, iv->lo, lo) &&
           rt_expr_const_int(l->op, iv->hi, hi) && *hi > *lo;
}

// Class of index expression e (extent ext) of a padded read in the window nest, where the kept
// vars, x and the window vars are bound; *af receives its affine form.
rt_win_dim rt_win_dim_of(const rt_lower *l, const rt_expr *e, int64_t ext, rt_affine *af) {
    const rt_stmt *s = l->s;
    if (!rt_expr_affine(l->op, e, af))
        return RT_WIN_GUARD;
    int64_t mn = af->c0, mx = af->c0, ax = 0;
    bool bounded = true;
    for (int32_t i = 0; i < af->n_terms; i++) {
        int32_t v = af->var[i];
        int64_t c = af->coef[i], lo, hi, p, q;
        if (v < 0 || v >= s->n_vars || l->var_of[v] < 0 ||
            (s->vars[v].is_reduce && rt_win_index(l, v) < 0))
            return RT_WIN_GUARD; // a var of a sum inside the expression
        if (v == l->win_x)
            ax = c;
        if (!rt_var_range(l, v, &lo, &hi)) {
            bounded = false;
            continue;
        }
        if (__builtin_mul_overflow(c, c > 0 ? lo : hi - 1, &p) ||
            __builtin_mul_overflow(c, c > 0 ? hi - 1 : lo, &q) ||
            __builtin_add_overflow(mn, p, &mn) || __builtin_add_overflow(mx, q, &mx))
            return RT_WIN_GUARD;
    }
    if (bounded && mn >= 0 && mx < ext)
        return RT_WIN_IN;
    return ax > 0 ? RT_WIN_X : ax < 0 ? RT_WIN_GUARD : RT_WIN_ROW;
}

// Does read e get the window treatment (padded float tensor, dense)?
bool rt_win_padded(const rt_lower *l, const rt_expr *e) {
    const rt_tensor *tn = &l->op->tensors[e->tensor];
    if (!tn->has_pad || e->n_args != tn->n_dims ||
        !rt_kir_type_is_float(l->k->bufs[l->data_buf[e->tensor]].type))
        return false;
    for (int32_t d = 0; d < tn->n_dims; d++)
        if (l->start_buf[e->tensor][d] >= 0)
            return false;
    return true;
}

// The scratch element holding the packed read at the current x, y and window point l->win_pt.
static rt_kir_expr *rt_win_pack_at(rt_lower *l, const rt_win_pack *pk) {
    rt_arena *a = l->a;
    int64_t b = -pk->bmin, h = -pk->brmin + l->win_dy * pk->ay;
    for (int32_t i = 0; i < l->win_nr; i++) {
        b += pk->bx[i] * l->win_pt[i];
        h += pk->br[i] * l->win_pt[i];
    }
    rt_kir_expr *x =
        rt_kir_bin(a, RT_KIR_SUB, rt_kir_var_ref(a, l->p, l->var_of[l->win_x]), pk->lo);
    // The row's offset: with y handed over a let of the y iteration (rt_win_rows; one expression
    // for every output row reading the row, so that their loads are one), else h rows in.
    rt_kir_expr *row = pk->rb ? pk->rb[h] : rt_kir_int(a, h * pk->a * pk->q);
    return rt_kir_load(a, l->k, 0,
                       rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_ADD, x, row),
                                  rt_kir_int(a, (b % pk->a) * pk->q + b / pk->a + pk->shift)));
}

static rt_status rt_tr_read_window(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_lower *l = x->user;
    rt_arena *a = x->a;
    if (l->win_pack && e == l->win_pack->read) {
        *out = rt_win_pack_at(l, l->win_pack);
        x->oom = x->oom || !*out;
        return RT_OK;
    }
    rt_kir_expr *idx[RT_MAX_DIMS];
    RT_TRY(rt_lx_indices(x, e, idx));
    if (!rt_win_padded(l, e))
        return rt_lx_load(x, e, idx, out);
    rt_kir_expr *valid = rt_kir_int(a, 1);
    for (int32_t d = 0; d < e->n_args; d++) {
        rt_affine af;
        int64_t ext = x->extent[e->tensor][d];
        rt_win_dim c = rt_win_dim_of(l, e->args[d], ext, &af);
        if (c == RT_WIN_IN || (c == RT_WIN_X && !l->win_guard_x) ||
            (c == RT_WIN_ROW && !l->win_guard_row))
            continue;
        valid =
            rt_kir_bin(a, RT_KIR_AND, valid,
                       rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, idx[d], rt_kir_int(a, 0)),
                                  rt_kir_bin(a, RT_KIR_LT, idx[d], rt_kir_int(a, ext))));
        idx[d] = rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_MAX, idx[d], rt_kir_int(a, 0)),
                            rt_kir_int(a, ext - 1));
    }
    int32_t db = x->data_buf[e->tensor];
    rt_kir_expr *v = rt_kir_load(a, x->k, db, rt_lx_offset(x, e->tensor, idx, NULL));
    *out = rt_kir_select(a, valid, v,
                         rt_kir_flt(a, x->k->bufs[db].type, x->op->tensors[e->tensor].pad_value));
    x->oom = x->oom || !*out;
    return RT_OK;
}

static const struct rt_lx_ops rt_tr_ops_window = {
    .backend = "CPU", .sum_inner_loop = RT_KIR_LOOP_VECTOR, .read = rt_tr_read_window};

// The expression context (lower-expr.h) of statement l->s; rt_tr_done hands its oom back to l.
rt_lx rt_tr_ctx(rt_lower *l) {
    return (rt_lx){.ops = l->win     ? &rt_tr_ops_window
                          : l->naive ? &rt_tr_ops_naive
                                     : &rt_tr_ops,
                   .a = l->a,
                   .op = l->op,
                   .k = l->k,
                   .ph = l->p,
                   .s = l->s,
                   .var_of = l->var_of,
                   .ct = l->ct,
                   .pre = l->pre,
                   .data_buf = l->data_buf,
                   .start_buf = l->start_buf,
                   .extent = l->extent,
                   .local_base = l->local_base,
                   .local_dims = l->local_dims,
                   .tree_child_buf = l->tree_child,
                   .sum_at = l->sum_at,
                   .sum_value = l->sum_value,
                   .user = l,
                   .err = l->err};
}

rt_status rt_tr_done(rt_lower *l, const rt_lx *x, rt_status st) {
    RT_LOWER_CHECK(l, !x->oom);
    return st;
}

rt_kir_expr *rt_tr_offset(rt_lower *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid) {
    rt_lx x = rt_tr_ctx(l);
    rt_kir_expr *pos = rt_lx_offset(&x, t, idx, valid);
    RT_LOWER_CHECK(l, !x.oom);
    return pos;
}

rt_status rt_tr_read(rt_lower *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_read(&x, e, out));
}

rt_status rt_tr_int(rt_lower *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_int(&x, e, out));
}

rt_status rt_tr_loops_range(rt_lower *l, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_range(&x, v, lo, hi));
}

// Value of e in the statement's compute type.
rt_status rt_tr_num(rt_lower *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_num(&x, e, out));
}

// ---------------------------------------------------------------------------------------------
// The general path: loop nests per statement
// ---------------------------------------------------------------------------------------------

rt_status rt_lower_begin_stmt(rt_lower *l, const rt_stmt *s) {
    l->s = s;
    bool ok;
    l->ct = rt_lower_dtype(l->op->tensors[s->out].dtype, &ok);
    if (!ok || l->ct == RT_KIR_I32)
        return rt_lower_unsupported(l, s->loc, "a statement writing a non-float tensor");
    RT_ALLOC(l->a, l->var_of, s->n_vars, l->err);
    for (int32_t v = 0; v < s->n_vars; v++)
        l->var_of[v] = -1;
    return RT_OK;
}

// How a reduction statement's accumulator takes one more value.
rt_kir_bop rt_assign_bop(rt_assign op) {
    return op == RT_ASSIGN_MUL_INIT   ? RT_KIR_MUL
           : op == RT_ASSIGN_MAX_INIT ? RT_KIR_MAX
           : op == RT_ASSIGN_MIN_INIT ? RT_KIR_MIN
                                      : RT_KIR_ADD;
}

// The flat offset of statement l->s's output element at the current LHS vars.
rt_status rt_lower_out_offset(rt_lower *l, rt_kir_expr **off) {
    const rt_stmt *s = l->s;
    rt_kir_expr *idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < s->n_lhs; d++) {
        int32_t v = s->lhs_vars[d];
        idx[d] = v >= 0 && v < s->n_vars && l->var_of[v] >= 0
                     ? rt_kir_var_ref(l->a, l->p, l->var_of[v])
                     : NULL;
        if (!idx[d])
            return rt_fail(l->err, RT_ERR_SPEC, s->loc, "output index outside its loop");
    }
    *off = rt_tr_offset(l, s->out, idx, NULL);
    return RT_OK;
}

// Stores value, converted to the output's element type, at off of statement l->s's output.
rt_kir_node *rt_lower_store_out(rt_lower *l, rt_kir_block *blk, rt_kir_expr *off,
                                rt_kir_expr *value) {
    int32_t ob = l->data_buf[l->s->out];
    rt_kir_node *st = rt_kir_append(l->a, blk, RT_KIR_N_STORE);
    RT_LOWER_CHECK(l, st && off && value);
    if (st) {
        st->buf = ob;
        st->index = off;
        st->value = rt_kir_cast(l->a, l->k->bufs[ob].type, value);
    }
    return st;
}

// Capacity of the device's largest cache (0: none known).
int64_t rt_largest_cache_bytes(const rt_device *dev) {
    int64_t cache_bytes = 0;
    for (int32_t lv = 1; dev && lv < dev->n_levels; lv++)
        if (dev->level[lv].capacity_bytes > cache_bytes)
            cache_bytes = dev->level[lv].capacity_bytes;
    return cache_bytes;
}

// Should statement l->s's elementwise output take streaming (non-temporal) stores? Where the
// model does not find the operator warm (rt_perf_cpu_warm: its tensors together exceed half the
// last-level cache), the output cannot stay cached for a consumer, and each line of it written
// costs a read for ownership first; a non-temporal store skips that read. Dense f32 outputs
// only (a ragged one's size is not known here).
static bool rt_stream_out(const rt_lower *l) {
    const rt_op *op = l->op;
    int32_t t = l->s->out;
    if (!l->dev || !l->m || op->tensors[t].role != RT_ROLE_OUTPUT || l->data_buf[t] <= 0 ||
        l->k->bufs[l->data_buf[t]].type != RT_KIR_F32)
        return false;
    for (int32_t i = 0; i < op->n_tensors; i++)
        for (int32_t d = 0; l->data_buf[i] > 0 && d < op->tensors[i].n_dims; d++)
            if (l->extent[i][d] < 0)
                return false;
    return !l->m->warm;
}

// The element of statement l->s at the current LHS vars: evaluate or reduce, then store.
rt_status rt_lower_element(rt_lower *l, rt_kir_block *blk, const int32_t *red, int32_t n_red) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    rt_kir_expr *off;
    RT_TRY(rt_lower_out_offset(l, &off));
    int32_t ob = l->data_buf[s->out];
    rt_kir_expr *value;
    if (n_red == 0 && s->op == RT_ASSIGN_SET) {
        l->pre = blk;
        RT_TRY(rt_tr_num(l, s->rhs, &value));
    } else {
        int32_t acc = rt_kir_add_var(a, l->p, "acc", l->ct);
        if (acc < 0)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        rt_kir_node *init = rt_kir_append(a, blk, RT_KIR_N_FSET);
        RT_LOWER_CHECK(l, init);
        if (!init)
            return RT_OK;
        init->var = acc;
        init->value = s->op == RT_ASSIGN_ADD ? rt_kir_cast(a, l->ct, rt_kir_load(a, l->k, ob, off))
                                             : rt_kir_flt(a, l->ct, rt_assign_identity(s->op));
        rt_kir_block *inner = blk;
        for (int32_t i = 0; i < n_red; i++) {
            int32_t v = red[i];
            rt_kir_expr *lo, *hi;
            RT_TRY(rt_tr_loops_range(l, v, &lo, &hi));
            l->var_of[v] = rt_kir_add_var(a, l->p, s->vars[v].name, RT_KIR_I64);
            // Serial in the naive kernel, one chain per element (rt_tr_ops_naive).
            bool vec = i == n_red - 1 && !l->naive;
            rt_kir_node *loop = rt_kir_loop(a, inner, l->var_of[v], lo, hi,
                                            vec ? RT_KIR_LOOP_VECTOR : RT_KIR_LOOP_SERIAL);
            RT_LOWER_CHECK(l, loop);
            if (!loop)
                return RT_OK;
            inner = &loop->body;
        }
        l->pre = inner;
        rt_kir_expr *x;
        RT_TRY(rt_tr_num(l, s->rhs, &x));
        rt_kir_expr *cur = rt_kir_var_ref(a, l->p, acc);
        rt_kir_expr *nv = rt_kir_bin(a, rt_assign_bop(s->op), cur, x);
        rt_kir_node *upd = rt_kir_append(a, inner, RT_KIR_N_FSET);
        RT_LOWER_CHECK(l, upd && nv);
        if (!upd)
            return RT_OK;
        upd->var = acc;
        upd->value = nv;
        value = rt_kir_var_ref(a, l->p, acc);
    }
    rt_kir_node *st = rt_lower_store_out(l, blk, off, value);
    // An elementwise store sits in the innermost (vector) loop; a reduction's does not.
    if (st && n_red == 0 && s->op == RT_ASSIGN_SET)
        st->stream = rt_stream_out(l);
    return RT_OK;
}

// Loops over the statement's kept vars from position first (earlier ones are bound).
static rt_status rt_lower_nest(rt_lower *l, rt_kir_block *blk, int32_t first) {
    const rt_stmt *s = l->s;
    int32_t kept[RT_MAX_DIMS * 2], red[RT_MAX_DIMS * 2], nk = 0, nr = 0;
    for (int32_t i = 0; i < s->n_loops && i < RT_MAX_DIMS * 2; i++) {
        int32_t v = s->loops[i];
        if (v < 0 || v >= s->n_vars)
            return rt_fail(l->err, RT_ERR_SPEC, s->loc, "loop over an unknown index variable");
        if (s->vars[v].is_reduce)
            red[nr++] = v;
        else
            kept[nk++] = v;
    }
    // The naive kernel may run a kept var innermost, under the reduced ones (lower-cpu-naive.c).
    rt_naive_order order;
    int32_t inner = rt_naive_plan(l, kept, nk, first, red, nr, &order) ? order.c : -1;
    for (int32_t i = first; i < nk; i++) {
        int32_t v = kept[i];
        if (v == inner)
            continue;
        rt_kir_expr *lo, *hi;
        RT_TRY(rt_tr_loops_range(l, v, &lo, &hi));
        l->var_of[v] = rt_kir_add_var(l->a, l->p, s->vars[v].name, RT_KIR_I64);
        bool innermost = i == nk - 1 && nr == 0 && inner < 0;
        rt_kir_node *loop = rt_kir_loop(l->a, blk, l->var_of[v], lo, hi,
                                        innermost ? RT_KIR_LOOP_VECTOR : RT_KIR_LOOP_SERIAL);
        RT_LOWER_CHECK(l, loop);
        if (!loop)
            return RT_OK;
        blk = &loop->body;
    }
    if (inner >= 0)
        return rt_lower_naive_rows(l, blk, &order);
    return rt_lower_element(l, blk, red, nr);
}

// Temporaries of the row-wise group [g0, g1) that need not leave it: written by one statement of
// the group (not accumulated into), by its row, and read only after it and only within the
// group (rt_perf_cpu_row_local). Each lives in one row per thread at the end of the phase's
// scratch instead of a full array in memory: softmax's e(n, d) then costs no DRAM traffic, where
// it would double the compulsory bytes. The row is what is below the group's depth rows
// (rt_perf_cpu_row_depth: the first depth dims are the row's vars and may be ragged); the
// phase's scratch grows by their size.
static void rt_group_localize(rt_lower *l, int32_t g0, int32_t g1, int32_t depth) {
    const rt_op *op = l->op;
    int64_t base = rt_round_up(l->p->scratch_bytes, 64) / 4;
    for (int32_t si = g0; si < g1; si++) {
        int32_t t = op->stmts[si].out;
        int64_t row;
        if (l->local_base[t] >= 0 || !rt_perf_cpu_row_local(op, g1, depth, si, &row))
            continue;
        l->local_base[t] = base;
        l->local_dims[t] = depth;
        l->data_buf[t] = 0;
        base += rt_round_up(row, 16);
    }
    if (base * 4 > l->p->scratch_bytes)
        l->p->scratch_bytes = base * 4;
    if (l->p->scratch_bytes > l->k->scratch_bytes)
        l->k->scratch_bytes = l->p->scratch_bytes;
}

// Gives the temporaries of rt_group_localize their own arrays back (for later phases).
static void rt_group_unlocalize(rt_lower *l, int32_t g0, int32_t g1) {
    for (int32_t si = g0; si < g1; si++) {
        int32_t t = l->op->stmts[si].out;
        if (l->local_base[t] >= 0) {
            l->local_base[t] = -1;
            for (int32_t b = 1; b < l->k->n_bufs; b++)
                if (l->k->bufs[b].role == RT_KIR_BUF_DATA && l->k->bufs[b].tensor == t)
                    l->data_buf[t] = b;
        }
    }
}

// The loops of the rows of a row-wise group of depth rows (rt_perf_cpu_row_depth), from
// statement s's vars: row var 0 over [lo, lo + n0), vars 1..depth-1 serial loops over their
// ranges (the same in every statement of the group). The rows are independent, so the work
// items are n0 x parts: item k is part k / n0 of row var 1's range under row var 0 = k % n0 + lo.
// With parts the cores, core t of as many takes part t of every (b, i) range: the ragged
// sequences' rows in equal shares, where one item per sequence left one core a few long ones.
// rowv receives the vars, *body the block inside the last loop; the group's statements each run
// their nest from position depth there.
static rt_status rt_lower_rows(rt_lower *l, const rt_stmt *s, int32_t depth, int64_t lo, int64_t n0,
                               int64_t parts, int32_t *rowv, rt_kir_block **body) {
    RT_TRY(rt_lower_begin_stmt(l, s));
    rt_kir_block *blk = &l->p->body;
    rt_kir_expr *item = rt_v(l, l->p->item_var);
    for (int32_t d = 0; d < depth; d++) {
        l->var_of[d] = rowv[d] = rt_kir_add_var(l->a, l->p, s->vars[d].name, RT_KIR_I64);
        if (rowv[d] < 0)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (d == 0) {
            rt_let(l, blk, rowv[0],
                   rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MOD, item, rt_i(l, n0)), rt_i(l, lo)));
            continue;
        }
        rt_kir_expr *a, *b;
        RT_TRY(rt_tr_loops_range(l, d, &a, &b));
        if (d == 1 && parts > 1) {
            rt_kir_expr *part = rt_b(l, RT_KIR_DIV, item, rt_i(l, n0)),
                        *len = rt_b(l, RT_KIR_SUB, b, a);
            rt_kir_expr *a0 = a;
            a = rt_b(l, RT_KIR_ADD, a0,
                     rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_MUL, part, len), rt_i(l, parts)));
            b = rt_b(l, RT_KIR_ADD, a0,
                     rt_b(l, RT_KIR_DIV,
                          rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, part, rt_i(l, 1)), len),
                          rt_i(l, parts)));
        }
        rt_kir_node *loop = rt_kir_loop(l->a, blk, rowv[d], a, b, RT_KIR_LOOP_SERIAL);
        if (!loop)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        blk = &loop->body;
    }
    *body = blk;
    return RT_OK;
}

static rt_status rt_lower_general(rt_lower *l, int32_t s0, int32_t s1, bool fuse) {
    const rt_op *op = l->op;
    for (int32_t i = s0; i < s1;) {
        int32_t j = i + 1;
        while (fuse && j < s1 && rt_perf_cpu_row_fusable(op, i, j))
            j++;
        if (j == i + 1 && l->m && l->rp && i == l->m->main_stmt && l->m->block_level >= 0 &&
            l->m->top < RT_MAX_MEM_LEVELS && l->m->block_level <= l->m->top) {
            bool done;
            RT_TRY(rt_lower_tiled(l, i, &done));
            if (done) {
                i = j;
                continue;
            }
        }
        int32_t v;
        int64_t lo = 0, hi = 1;
        bool outer = rt_perf_cpu_stmt_outer(op, &op->stmts[i], &v, &lo, &hi);
        int32_t depth = outer && j - i > 1 ? rt_perf_cpu_row_depth(op, i, j) : 1;
        const char *what = rt_arena_printf(
            l->a, "statement%s %d%s%s%s", j - i > 1 ? "s" : "", (int)i,
            j - i > 1 ? rt_arena_printf(l->a, "-%d", (int)(j - 1)) : "",
            j - i > 1 ? " fused row-wise" : "",
            depth > 1 ? rt_arena_printf(l->a, ", rows of %d loops", (int)depth) : "");
        int64_t parts = depth > 1 && l->dev && l->dev->units > 1 ? l->dev->units : 1;
        l->p =
            rt_kir_add_phase(l->a, l->k, what ? what : "statement", outer ? (hi - lo) * parts : 1);
        if (!l->p)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (j - i > 1 && outer)
            rt_group_localize(l, i, j, depth);
        int32_t rowv[RT_MAX_DIMS];
        rt_kir_block *rows = &l->p->body;
        if (depth > 1)
            RT_TRY(rt_lower_rows(l, &op->stmts[i], depth, lo, hi - lo, parts, rowv, &rows));
        for (int32_t si = i; si < j; si++) {
            const rt_stmt *s = &op->stmts[si];
            RT_TRY(rt_lower_begin_stmt(l, s));
            if (depth > 1) {
                for (int32_t d = 0; d < depth; d++)
                    l->var_of[d] = rowv[d];
                RT_TRY(rt_lower_nest(l, rows, depth));
                continue;
            }
            int32_t first = 0;
            if (outer) {
                int32_t sv;
                int64_t a, b;
                rt_perf_cpu_stmt_outer(op, s, &sv, &a, &b);
                l->var_of[sv] = rt_kir_add_var(l->a, l->p, s->vars[sv].name, RT_KIR_I64);
                rt_kir_node *let = rt_kir_append(l->a, &l->p->body, RT_KIR_N_LET);
                RT_LOWER_CHECK(l, let);
                if (!let)
                    break;
                let->var = l->var_of[sv];
                let->value =
                    rt_kir_bin(l->a, RT_KIR_ADD, rt_kir_var_ref(l->a, l->p, l->p->item_var),
                               rt_kir_int(l->a, a));
                first = 1;
            }
            RT_TRY(rt_lower_nest(l, &l->p->body, first));
        }
        rt_group_unlocalize(l, i, j);
        i = j;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Recursion over a tree (CORTEX): level-by-level phases (lower-tree.c finds the groups)
// ---------------------------------------------------------------------------------------------

// The statements of group g that run at the leaves (inner false: level 0 only) or at the inner
// nodes (levels 1.., one repetition per level), in one phase whose work items are positions in
// the tree's level order: item k is node order[k], and each statement's loop nest runs under it
// with its node var bound to that node, in statement order.
static rt_status rt_lower_tree_phase(rt_lower *l, const rt_tree_group *g, bool inner) {
    const rt_op *op = l->op;
    int32_t first = -1;
    for (int32_t i = 0; i < g->n_stmts && first < 0; i++)
        if (inner ? g->at_inner[i] : g->at_leaves[i])
            first = g->stmts[i];
    if (first < 0)
        return RT_OK; // no statement writes these nodes: they keep what they held
    const char *what = rt_tree_group_what(l->a, op, g, inner);
    int64_t n_nodes = op->sizes[op->trees[g->tree].n_sym].value;
    l->p = what ? rt_kir_add_phase(l->a, l->k, what, n_nodes) : NULL;
    if (!l->p)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    const int32_t *tb = l->tree_buf[g->tree];
    l->p->levels = (rt_kir_levels){.on = true,
                                   .tree = g->tree,
                                   .first = inner ? 1 : 0,
                                   .last = inner ? -1 : 1,
                                   .begin_buf = tb[RT_KIR_TREE_LEVEL_BEGIN],
                                   .count_buf = tb[RT_KIR_TREE_N_LEVELS],
                                   .level_var = -1};
    const rt_stmt *s0 = &op->stmts[first];
    int32_t node = rt_kir_add_var(l->a, l->p, s0->vars[s0->lhs_vars[0]].name, RT_KIR_I64);
    rt_kir_node *let = node >= 0 ? rt_kir_append(l->a, &l->p->body, RT_KIR_N_LET) : NULL;
    if (!let)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    let->var = node;
    let->value = rt_kir_cast(
        l->a, RT_KIR_I64,
        rt_kir_load(l->a, l->k, tb[RT_KIR_TREE_ORDER], rt_kir_var_ref(l->a, l->p, l->p->item_var)));
    RT_LOWER_CHECK(l, let->value);
    for (int32_t i = 0; i < g->n_stmts; i++) {
        if (!(inner ? g->at_inner[i] : g->at_leaves[i]))
            continue;
        const rt_stmt *s = &op->stmts[g->stmts[i]];
        RT_TRY(rt_lower_begin_stmt(l, s));
        l->var_of[s->lhs_vars[0]] = node;
        RT_TRY(rt_lower_nest(l, &l->p->body, 1));
    }
    return RT_OK;
}

// An operator with tree statements: each tree group as its leaf phase and its level-by-level
// phase (at its first statement, as the interpreter runs it), the runs of other statements
// between them on the general path.
static rt_status rt_lower_with_trees(rt_lower *l, bool fuse) {
    const rt_op *op = l->op;
    bool *done;
    RT_ALLOC(l->a, done, op->n_stmts, l->err);
    for (int32_t i = 0; i < op->n_stmts;) {
        if (done[i]) {
            i++;
            continue;
        }
        if (rt_tree_stmt(op, i)) {
            rt_tree_group g;
            RT_TRY(rt_tree_group_plan(op, i, "CPU", &g, l->err));
            for (int32_t k = 0; k < g.n_stmts; k++)
                done[g.stmts[k]] = true;
            RT_TRY(rt_lower_tree_phase(l, &g, false));
            RT_TRY(rt_lower_tree_phase(l, &g, true));
            continue;
        }
        int32_t j = i + 1;
        while (j < op->n_stmts && !done[j] && !rt_tree_stmt(op, j))
            j++;
        RT_TRY(rt_lower_general(l, i, j, fuse));
        i = j;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Entry
// ---------------------------------------------------------------------------------------------

static void rt_lower_header(rt_lower *l, const rt_device *dev, const rt_perf_model *m,
                            const rt_rprog *p, const rt_lower_options *opt) {
    rt_buf b;
    rt_buf_init(&b, l->a);
    const rt_op *op = l->op;
    rt_buf_printf(&b, "rtgen %s: %s, candidate %d\n", RT_VERSION_STRING, op->name,
                  opt ? opt->rank : 0);
    rt_buf_printf(&b, "spec: %s\n",
                  opt && opt->spec_path ? opt->spec_path
                  : op->file            ? op->file
                                        : "(text)");
    for (int32_t s = 0; s < op->n_sizes; s++)
        rt_buf_printf(&b, "%s%s=%lld%s", s ? " " : "sizes: ", op->sizes[s].name,
                      (long long)op->sizes[s].value, s == op->n_sizes - 1 ? "\n" : "");
    rt_buf_printf(&b, "device: %s (%s, cpu %s)\n", dev ? dev->name : "?", dev ? dev->path : "?",
                  dev && dev->arch[0] ? dev->arch : "?");
    if (m && p) {
        // The plan executed, in the JSON report's words ("plan" of the candidate).
        rt_buf_puts(&b, "plan: ");
        rt_perf_cpu_plan_text(&l->done, op, &op->stmts[m->main_stmt], &b);
        rt_buf_puts(&b, "\n");
        for (int32_t lv = 0; lv < p->n_levels && lv < (dev ? dev->n_levels : 0); lv++) {
            rt_buf_printf(&b, "rTile L%d %-6s [", (int)lv, dev->level[lv].name);
            for (int32_t x = 0; x < m->n_axes; x++)
                rt_buf_printf(&b, "%s%s=%lld", x ? ", " : "", m->axes[x].name,
                              (long long)p->tile[lv].shape[x]);
            rt_buf_printf(&b, "] footprint %lld B\n", (long long)p->tile[lv].footprint_bytes);
        }
        rt_buf_printf(
            &b, "predicted: %.3f us (bottleneck %s), %.4g GFLOP\n", p->predicted_ns * 1e-3,
            p->bottleneck >= 0 && p->bottleneck < dev->n_levels ? dev->level[p->bottleneck].name
                                                                : "compute",
            p->flops * 1e-9);
    } else {
        rt_buf_puts(&b, "naive loop nests (reference kernel)\n");
    }
    for (int32_t i = 0; i < l->k->n_phases; i++) {
        const rt_kir_phase *ph = &l->k->phases[i];
        if (ph->levels.on)
            rt_buf_printf(&b,
                          "phase %s: %s; work items: the positions of a level in %s's level "
                          "order (%lld nodes in all)\n",
                          ph->name, ph->what, op->trees[ph->levels.tree].name,
                          (long long)ph->n_items);
        else
            rt_buf_printf(&b, "phase %s: %s, %lld work items\n", ph->name, ph->what,
                          (long long)ph->n_items);
    }
    l->k->header = b.oom ? "" : b.data;
}

static rt_status rt_lower_cpu_kernel(rt_arena *a, const rt_op *op, const rt_device *dev,
                                     const rt_perf_model *m, const rt_rprog *p,
                                     const rt_lower_options *opt, rt_kir_kernel **out,
                                     rt_err *err) {
    bool naive = (opt && opt->naive) || !p || !m;
    rt_lower l;
    memset(&l, 0, sizeof l);
    l.a = a;
    l.op = op;
    l.err = err;
    l.naive = naive;
    const char *name = naive ? rt_arena_printf(a, "rt_%s_naive", op->name)
                             : rt_arena_printf(a, "rt_%s_c%d", op->name, opt ? opt->rank : 0);
    l.k = name ? rt_kir_kernel_new(a, name) : NULL;
    if (!l.k)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    bool trees = false;
    for (int32_t s = 0; s < op->n_stmts; s++)
        trees = trees || rt_tree_stmt(op, s);
    RT_TRY(rt_lower_buffers(&l));
    if (!naive && dev) {
        l.dev = dev;
        l.m = m;
        l.rp = p;
        rt_perf_cpu_uk_rules ur;
        rt_perf_cpu_uk_rules_of(dev, &ur);
        l.k->masked_edge = ur.masked_edge;
    }
    rt_gemm g;
    int32_t main_stmt = m ? m->main_stmt : -1;
    if (!naive)
        l.done.kind = RT_PERF_CPU_PLAN_NEST;
    bool gemm = !naive && !trees && main_stmt >= 0 && p->cpu.kind == RT_PERF_CPU_PLAN_GEMM;
    if (gemm &&
        !(rt_gemm_detect(&l, main_stmt, &g) || rt_gemm_detect_implicit(&l, main_stmt, &g) ||
          rt_gemm_detect_tokens(&l, main_stmt, &g) || rt_gemm_detect_tri(&l, main_stmt, &g) ||
          rt_gemm_detect_rentry(&l, main_stmt, &g)))
        gemm = false; // the kernel's header then says which plan was executed instead
    if (gemm && !rt_gemm_blocking(&l, &g))
        return rt_fail(err, RT_ERR_BACKEND, op->stmts[main_stmt].loc,
                       "internal: the plan's GEMM is not the statement's (%lldx%lldx%lld)",
                       (long long)g.M, (long long)g.N, (long long)g.K);
    if (trees) {
        RT_TRY(rt_lower_with_trees(&l, !naive));
        l.k->flops = p ? p->flops : 0.0;
    } else if (gemm) {
        rt_gemm_executed(&l, &g);
        RT_TRY(rt_lower_general(&l, 0, main_stmt, true));
        rt_gemm_epi epi = {-1, -1, -1, false, -1};
        if (g.rentry) {
            RT_TRY(rt_lower_gemm_rentry(&l, &g));
        } else {
            rt_gemm_epi_detect(&l, &g, &epi);
            RT_TRY(rt_lower_gemm(&l, &g, &epi));
        }
        RT_TRY(rt_lower_general(&l, main_stmt + 1 + (epi.stmt >= 0), op->n_stmts, true));
        l.k->flops = 2.0 * (double)g.batch * (double)g.M * (double)g.N * (double)g.K;
        if (g.tri.on) // the useful FLOPs: each row's k range
            l.k->flops = 2.0 * (double)g.N *
                         rt_perf_tri_sum(g.tri.lo0, g.tri.lo1, g.tri.hi0, g.tri.hi1, g.K, g.M);
        l.k->compute_bound = true;
        // The random-vector check needs plain strides: an implicit or triangular GEMM has none.
        l.k->gemm = (rt_kir_contraction){!g.implicit && !g.tri.on,
                                         g.ta,
                                         g.tb,
                                         op->stmts[main_stmt].out,
                                         g.M,
                                         g.N,
                                         g.K,
                                         g.am,
                                         g.ak,
                                         g.bk,
                                         g.bn,
                                         g.cm,
                                         g.alpha,
                                         op->stmts[main_stmt].op == RT_ASSIGN_ADD};
        // Token rows: M at run time is sum(len), which the plan's M only estimates.
        l.k->gemm.valid = l.k->gemm.valid && !g.tokens;
        if (g.rentry) { // per-entry extents: the plan's FLOPs, no plain strides to check with
            l.k->flops = p ? p->flops : 0.0;
            l.k->gemm.valid = false;
        }
    } else {
        RT_TRY(rt_lower_general(&l, 0, op->n_stmts, !naive));
        l.k->flops = p ? p->flops : 0.0;
    }
    if (l.oom || (!naive && (!rt_kir_fuse_loops(a, l.k) || !rt_kir_hoist_reciprocals(a, l.k)))) {
        // Out of memory where the arena says so (rt_lower_cpu), else a lowering defect.
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "internal: the CPU lowering of %s left a kernel node incomplete%s", op->name,
                       naive ? " (naive kernel)" : "");
    }
    rt_lower_header(&l, dev, naive ? NULL : m, naive ? NULL : p, opt);
    RT_TRY(rt_kir_validate(l.k, err));
    *out = l.k;
    return RT_OK;
}

rt_status rt_lower_cpu(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_model *m,
                       const rt_rprog *p, const rt_lower_options *opt, rt_kir_kernel **out,
                       rt_err *err) {
    return rt_arena_status(a, rt_lower_cpu_kernel(a, op, dev, m, p, opt, out, err), err);
}
