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
//     loop marked for vectorization. The same path with `naive` is the oracle for large shapes.
//     With an rProgram, the modeled statement alone in its phase is blocked by its rTiles
//     (rt_lower_tiled): scale-out tiles as work items, a tile loop per lower level, point loops
//     innermost, so every ranked candidate lowers to its own loop nest.
#include "emit.h"
#include "lower-expr.h"

#include <math.h>
#include <string.h>

typedef struct rt_lower {
    rt_arena *a;
    const rt_op *op;
    rt_kir_kernel *k;
    rt_kir_phase *p;
    rt_err *err;
    int32_t *data_buf;                 // per tensor: its data buffer (-1: none)
    int32_t (*start_buf)[RT_MAX_DIMS]; // per tensor and dim: start array buffer (-1: dense)
    int64_t (*extent)[RT_MAX_DIMS];    // per tensor and dim: dense extent (-1: ragged)
    int64_t *local_base; // per tensor: scratch offset of its per-thread row (-1: none; rt_lx)
    int32_t (*tree_buf)[RT_KIR_TREE_FIELD_COUNT]; // per tree parameter: its arrays (-1: unused)
    int32_t *tree_child;                          // per tree parameter: its CHILD buffer (rt_lx)
    const rt_stmt *s;
    int32_t *var_of;   // statement var -> phase var (-1: unbound)
    rt_kir_type ct;    // compute type of the statement
    rt_kir_block *pre; // where reductions inside expressions put their loops
    bool oom;
    const rt_device *dev; // general path: the rTile blocking (NULL when naive)
    const rt_perf_model *m;
    const rt_rprog *rp;
    // Window reductions (rt_lower_window): while win is set, padded reads go through
    // rt_tr_read_window with win_x the statement var in vector lanes and win_red the window vars;
    // guard_x / guard_row: which dims of those reads get a clamped index and a pad select.
    bool win, win_guard_x, win_guard_row;
    int32_t win_x, win_nr;
    const int32_t *win_red;
    int64_t win_pt[3];                  // window var values of the point being translated
    int64_t win_dy;                     // output row (of the win_pack->yu) being translated
    const struct rt_win_pack *win_pack; // the strided read packed into scratch (NULL: none)
    rt_perf_cpu_plan done; // the plan the kernel executes (kind NONE: naive), for the header
} rt_lower;

#define RT_LOWER_CHECK(l, x)                                                                       \
    do {                                                                                           \
        if (!(x))                                                                                  \
            (l)->oom = true;                                                                       \
    } while (0)

_Static_assert(RT_KIR_UK_MAX_ACC == RT_PERF_CPU_UK_MAX_ACC &&
                   RT_KIR_UK_MAX_NV == RT_PERF_CPU_UK_MAX_NV,
               "the micro-kernel the model chooses is one the emitters build");

static rt_status rt_lower_unsupported(rt_lower *l, rt_loc loc, const char *what) {
    return rt_fail(l->err, RT_ERR_BACKEND, loc, "%s is not supported by the CPU backend", what);
}

static bool rt_mentions_dimref(const rt_expr *e) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_DIMREF)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_mentions_dimref(e->args[i]))
            return true;
    return false;
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
    const rt_op *op = l->op;
    RT_ALLOC(l->a, l->tree_buf, op->n_trees, l->err);
    RT_ALLOC(l->a, l->tree_child, op->n_trees, l->err);
    for (int32_t t = 0; t < op->n_trees; t++) {
        bool used = rt_tree_used(op, t);
        for (int32_t f = 0; f < RT_KIR_TREE_FIELD_COUNT; f++) {
            l->tree_buf[t][f] = -1;
            if (!used)
                continue;
            const char *name = rt_arena_printf(l->a, "tree_%s_%s", op->trees[t].name,
                                               rt_kir_tree_field_name((rt_kir_tree_field)f));
            l->tree_buf[t][f] =
                name ? rt_kir_add_buf(l->a, l->k, name, RT_KIR_BUF_TREE, RT_KIR_I32, t, f) : -1;
            if (l->tree_buf[t][f] < 0)
                return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        }
        l->tree_child[t] = l->tree_buf[t][RT_KIR_TREE_CHILD];
    }
    return RT_OK;
}

// Buffers: a data array per tensor and a start array per ragged dim (args order = this order),
// then the arrays of the trees.
static rt_status rt_lower_buffers(rt_lower *l) {
    const rt_op *op = l->op;
    RT_ALLOC(l->a, l->data_buf, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->start_buf, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->extent, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->local_base, op->n_tensors, l->err);
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
            if (rt_mentions_dimref(tn->dims[d].extent)) {
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

// Window reductions (rt_lower_window) run their x loop in vector lanes with every window point
// unrolled in its body. A padded read there must not be a per-lane branch or a clamped-index
// select along x (both become gathers at stride 2), so each of its dims is classified: dims the
// var ranges keep in the extents need nothing, dims along x are in the extents on the x interior
// (the borders are separate scalar loops), and dims that do not move with x (the rows of a
// window) are in the extents for whole rows, tested once per row.
typedef enum rt_win_dim {
    RT_WIN_IN,    // always within the extents: plain index
    RT_WIN_X,     // coefficient > 0 on x: within the extents on the x interior
    RT_WIN_ROW,   // independent of x: within the extents or not for a whole x row
    RT_WIN_GUARD, // anything else: clamped index and pad select wherever it is read
} rt_win_dim;

// Position of statement var v among the window vars, -1 when it is not one.
static int32_t rt_win_index(const rt_lower *l, int32_t v) {
    for (int32_t i = 0; i < l->win_nr; i++)
        if (l->win_red[i] == v)
            return i;
    return -1;
}

// Constant range [*lo, *hi) of statement var v, false when it has none.
static bool rt_var_range(const rt_lower *l, int32_t v, int64_t *lo, int64_t *hi) {
    const rt_ivar *iv = &l->s->vars[v];
    return iv->lo && iv->hi && rt_expr_const_int(l->op, iv->lo, lo) &&
           rt_expr_const_int(l->op, iv->hi, hi) && *hi > *lo;
}

// Class of index expression e (extent ext) of a padded read in the window nest, where the kept
// vars, x and the window vars are bound; *af receives its affine form.
static rt_win_dim rt_win_dim_of(const rt_lower *l, const rt_expr *e, int64_t ext, rt_affine *af) {
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
static bool rt_win_padded(const rt_lower *l, const rt_expr *e) {
    const rt_tensor *tn = &l->op->tensors[e->tensor];
    if (!tn->has_pad || e->n_args != tn->n_dims ||
        !rt_kir_type_is_float(l->k->bufs[l->data_buf[e->tensor]].type))
        return false;
    for (int32_t d = 0; d < tn->n_dims; d++)
        if (l->start_buf[e->tensor][d] >= 0)
            return false;
    return true;
}

// How many rows ahead the row packing prefetches its read (rt_win_pack_rows).
#define RT_WIN_PF_ROWS 16

// A window reduction's read that moves along x with a stride a >= 2, or 1 on a padded tensor
// (rt_win_pack_plan), packed into scratch (rt_win_pack_rows) before the x loop: the run of
// elements the x loop needs, split by phase (element j of the run at (j % a) * q + j / a), with
// the pad value where it leaves the extents, one such row per value of the read's row index (its
// one other dim that moves with the window: 2y + r - 2 of a 2D window). The x loop then reads
// scratch at unit stride: no interleaved loads (whose unused last member, as 2x+2 of a 5-wide
// stride-2 window, makes LLVM keep a scalar iteration per vector block), no guards and no x
// borders. When the lowering also hands over the loop of y (yv >= 0), y runs over the work
// item's whole tile and every row is packed once, into a ring of scratch rows, and shared by the
// output rows that overlap (a 5-row window of stride 2 packs 2 new rows per output row instead of
// 5); the ring keeps the scratch a few rows long (L1-resident) whatever the tile. Where outputs
// may be recomputed, each y iteration computes yu = 2 output rows (y, y + 1) in one x loop, the
// window points ordered by the packed row they read so that a row's loads feed both outputs
// (rt_win_body): 7 rows of 5 loads for 50 multiply-adds of a 5x5 stride-2 window instead of 10
// rows, and the loads, not the FMAs, were the bound (each unaligned 64-byte load crosses a line).
typedef struct rt_win_pack {
    const rt_expr *read;
    int32_t dim;          // its dim along x
    rt_affine af;         // the index along dim: a * x + sum bx * w + outer kept vars
    int64_t a;            // the stride along x
    int64_t bx[3];        // per window var: its coefficient along dim
    int64_t bmin, bmax;   // range of sum bx * w
    int32_t rdim;         // its row dim (-1: none, one row)
    rt_affine raf;        // the index along rdim: ay * y + sum br * w + outer kept vars
    int32_t yv;           // the statement var y when its loop is handed over, else -1
    int64_t ay;           // coefficient of y along rdim (0 unless yv >= 0)
    int64_t br[3];        // per window var: its coefficient along rdim
    int64_t brmin, brmax; // range of sum br * w
    int64_t q;            // scratch elements per phase of a row
    int64_t rows;         // scratch rows; with yv >= 0 a ring (a power of two), row h at h % rows
    int64_t yu;           // output rows per y iteration (1, or RT_WIN_Y_ROWS; rt_win_rows)
    int32_t yvar[RT_WIN_Y_ROWS]; // with yv >= 0: the KIR var of y + dy per output row dy
    rt_kir_expr **rb; // with yv >= 0: scratch offset of the y iteration's row h (rt_win_rows)
    int64_t shift;    // offset of element 0 of a phase (rt_win_pack_setup)
    rt_kir_expr *lo;  // the first x of the loop
    // Set up by rt_win_pack_setup for rt_win_pack_rows: the run's length, its count of q, its
    // start along dim, the q range [qa, qb) copied without guards, the row dim's index of row 0,
    // the read's other indices and whether they stay within their extents, the loop vars of the
    // rows, of the copy and (with a row dim) of the prefetched lines.
    rt_kir_expr *len, *nq, *u0, *qa, *qb, *r0, *valid, *idx[RT_MAX_DIMS];
    int32_t hv, qv, pv;
} rt_win_pack;

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
static rt_lx rt_tr_ctx(rt_lower *l) {
    return (rt_lx){.ops = l->win ? &rt_tr_ops_window : &rt_tr_ops,
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
                   .tree_child_buf = l->tree_child,
                   .user = l,
                   .err = l->err};
}

static rt_status rt_tr_done(rt_lower *l, const rt_lx *x, rt_status st) {
    RT_LOWER_CHECK(l, !x->oom);
    return st;
}

static rt_kir_expr *rt_tr_offset(rt_lower *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid) {
    rt_lx x = rt_tr_ctx(l);
    rt_kir_expr *pos = rt_lx_offset(&x, t, idx, valid);
    RT_LOWER_CHECK(l, !x.oom);
    return pos;
}

static rt_status rt_tr_read(rt_lower *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_read(&x, e, out));
}

static rt_status rt_tr_int(rt_lower *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_int(&x, e, out));
}

static rt_status rt_tr_loops_range(rt_lower *l, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_range(&x, v, lo, hi));
}

// Value of e in the statement's compute type.
static rt_status rt_tr_num(rt_lower *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_tr_ctx(l);
    return rt_tr_done(l, &x, rt_lx_num(&x, e, out));
}

// ---------------------------------------------------------------------------------------------
// The general path: loop nests per statement
// ---------------------------------------------------------------------------------------------

static double rt_assign_init(rt_assign op) {
    switch (op) {
    case RT_ASSIGN_MUL_INIT:
        return 1.0;
    case RT_ASSIGN_MAX_INIT:
        return -HUGE_VAL;
    case RT_ASSIGN_MIN_INIT:
        return HUGE_VAL;
    default:
        return 0.0;
    }
}

static rt_status rt_lower_begin_stmt(rt_lower *l, const rt_stmt *s) {
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
static rt_kir_bop rt_assign_bop(rt_assign op) {
    return op == RT_ASSIGN_MUL_INIT   ? RT_KIR_MUL
           : op == RT_ASSIGN_MAX_INIT ? RT_KIR_MAX
           : op == RT_ASSIGN_MIN_INIT ? RT_KIR_MIN
                                      : RT_KIR_ADD;
}

// The flat offset of statement l->s's output element at the current LHS vars.
static rt_status rt_lower_out_offset(rt_lower *l, rt_kir_expr **off) {
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
static rt_kir_node *rt_lower_store_out(rt_lower *l, rt_kir_block *blk, rt_kir_expr *off,
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
static int64_t rt_largest_cache_bytes(const rt_device *dev) {
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
static rt_status rt_lower_element(rt_lower *l, rt_kir_block *blk, const int32_t *red,
                                  int32_t n_red) {
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
                                             : rt_kir_flt(a, l->ct, rt_assign_init(s->op));
        rt_kir_block *inner = blk;
        for (int32_t i = 0; i < n_red; i++) {
            int32_t v = red[i];
            rt_kir_expr *lo, *hi;
            RT_TRY(rt_tr_loops_range(l, v, &lo, &hi));
            l->var_of[v] = rt_kir_add_var(a, l->p, s->vars[v].name, RT_KIR_I64);
            rt_kir_node *loop =
                rt_kir_loop(a, inner, l->var_of[v], lo, hi,
                            i == n_red - 1 ? RT_KIR_LOOP_VECTOR : RT_KIR_LOOP_SERIAL);
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
    for (int32_t i = first; i < nk; i++) {
        int32_t v = kept[i];
        rt_kir_expr *lo, *hi;
        RT_TRY(rt_tr_loops_range(l, v, &lo, &hi));
        l->var_of[v] = rt_kir_add_var(l->a, l->p, s->vars[v].name, RT_KIR_I64);
        bool innermost = i == nk - 1 && nr == 0;
        rt_kir_node *loop = rt_kir_loop(l->a, blk, l->var_of[v], lo, hi,
                                        innermost ? RT_KIR_LOOP_VECTOR : RT_KIR_LOOP_SERIAL);
        RT_LOWER_CHECK(l, loop);
        if (!loop)
            return RT_OK;
        blk = &loop->body;
    }
    return rt_lower_element(l, blk, red, nr);
}

// ---------------------------------------------------------------------------------------------
// The general path with the rTiles: the modeled statement's loop nest blocked level by level
// ---------------------------------------------------------------------------------------------

// One kept var of the blocked nest: its constant range, its tile extent per level (levels
// block_level..top, each at most the one above) and the bounds [base, end) of the current tile.
typedef struct rt_tvar {
    int32_t v;
    const char *name; // the var's, or a flat axis's ("c_h_w" for c.h.w, m->flat)
    bool tiled;       // false: a vloop or a var of no model axis, looped over its own range
    int64_t lo, hi;
    int64_t t[RT_MAX_MEM_LEVELS];
    bool exact; // the current tile is always full (its end is base + t)
    rt_kir_expr *base, *end;
} rt_tvar;

// An integer let of a fresh phase var; constants are returned as they are.
static rt_kir_expr *rt_gen_let(rt_lower *l, rt_kir_block *blk, const char *name, rt_kir_expr *v) {
    int64_t c;
    if (v && rt_kir_is_int(v, &c))
        return v;
    int32_t var = rt_kir_add_var(l->a, l->p, name ? name : "t", RT_KIR_I64);
    rt_kir_node *n = var >= 0 ? rt_kir_append(l->a, blk, RT_KIR_N_LET) : NULL;
    RT_LOWER_CHECK(l, n && v);
    if (!n || !v)
        return rt_kir_int(l->a, 0);
    n->var = var;
    n->value = v;
    return rt_kir_var_ref(l->a, l->p, var);
}

static int64_t rt_ceil_div64(int64_t x, int64_t y) {
    return (x + y - 1) / y;
}

// The kept vars of s with their tiles as the plan's loop nest gives them (rt_perf_cpu_loops;
// nothing is derived here), and the reduction vars in loop order. A flat axis (m->flat) is one
// var: its last member's, over the whole axis; the other members are left out (rt_lower_tiled
// binds them to 0).
static void rt_tiled_vars(const rt_lower *l, const rt_stmt *s, const rt_perf_cpu_loops *lp,
                          rt_tvar *tv, int32_t *n_red, int32_t *red) {
    const rt_perf_flat *fl = &l->m->flat;
    int32_t nr = 0;
    for (int32_t i = 0; i < s->n_loops && nr < RT_MAX_DIMS * 2; i++)
        if (s->loops[i] >= 0 && s->loops[i] < s->n_vars && s->vars[s->loops[i]].is_reduce)
            red[nr++] = s->loops[i];
    *n_red = nr;
    for (int32_t i = 0; i < lp->n_vars; i++) {
        rt_tvar *t = &tv[i];
        memset(t, 0, sizeof *t);
        t->v = lp->var[i];
        t->name = s->vars[t->v].name;
        t->tiled = lp->tiled[i];
        t->lo = lp->lo[i];
        t->hi = lp->lo[i] + lp->extent[i];
        memcpy(t->t, lp->tile[i], sizeof t->t);
        if (fl->n > 0 && i == lp->n_vars - 1) {
            char *nm = rt_arena_strdup(l->a, s->axes[fl->axis].name);
            for (char *c = nm; c && *c; c++)
                *c = *c == '.' ? '_' : *c;
            t->name = nm ? nm : t->name;
        }
    }
}

// The plan the kernel executes, from what the lowering built (the header's "plan:" line).
static void rt_tiled_executed(rt_lower *l, const rt_tvar *tv, int32_t nk, bool window,
                              const rt_win_pack *pk, bool packed) {
    rt_perf_cpu_plan *pl = &l->done;
    const rt_perf_model *m = l->m;
    memset(pl, 0, sizeof *pl);
    pl->kind = RT_PERF_CPU_PLAN_LOOPS;
    pl->block_level = m->block_level;
    pl->top = m->top;
    rt_perf_cpu_loops *lp = &pl->loops;
    lp->n_vars = nk;
    lp->items = 1;
    for (int32_t i = 0; i < nk; i++) {
        lp->var[i] = tv[i].v;
        lp->tiled[i] = tv[i].tiled;
        lp->lo[i] = tv[i].tiled ? tv[i].lo : 0;
        lp->extent[i] = tv[i].tiled ? tv[i].hi - tv[i].lo : 0;
        memcpy(lp->tile[i], tv[i].t, sizeof tv[i].t);
        if (tv[i].tiled)
            lp->items *= rt_ceil_div64(tv[i].hi - tv[i].lo, tv[i].t[m->block_level]);
    }
    lp->window = window;
    lp->win_pack = !packed       ? RT_PERF_CPU_WIN_PACK_NONE
                   : pk->yv >= 0 ? RT_PERF_CPU_WIN_PACK_ROWS
                                 : RT_PERF_CPU_WIN_PACK_X;
    lp->win_yu = packed ? pk->yu : 1;
}

// Does e mention none of the statement's reduction vars (and hold no sum)?
static bool rt_win_invariant(const rt_stmt *s, const rt_expr *e) {
    if (!e)
        return true;
    if (e->kind == RT_EXPR_SUM)
        return false;
    if (e->kind == RT_EXPR_INDEX && e->var >= 0 && e->var < s->n_vars && s->vars[e->var].is_reduce)
        return false;
    for (int32_t i = 0; i < e->n_args; i++)
        if (!rt_win_invariant(s, e->args[i]))
            return false;
    return true;
}

// Over the padded reads below e (rt_win_dim_of): raises *xlo and lowers *xhi to the x interior
// of each dim along x, and ands into *rows the condition that each row dim stays within its
// extents at every window point. Called with x and the window vars bound.
static void rt_win_bounds(rt_lower *l, const rt_expr *e, rt_kir_expr **xlo, rt_kir_expr **xhi,
                          rt_kir_expr **rows) {
    rt_arena *a = l->a;
    for (int32_t i = 0; e && i < e->n_args; i++)
        rt_win_bounds(l, e->args[i], xlo, xhi, rows);
    if (!e || e->kind != RT_EXPR_READ || !rt_win_padded(l, e) ||
        (l->win_pack && e == l->win_pack->read))
        return;
    for (int32_t d = 0; d < e->n_args; d++) {
        rt_affine af;
        int64_t ext = l->extent[e->tensor][d];
        rt_win_dim c = rt_win_dim_of(l, e->args[d], ext, &af);
        if (c != RT_WIN_X && c != RT_WIN_ROW)
            continue;
        // index = ax * x + rest + w, w over [mn, mx] from the window vars (and c0).
        int64_t ax = 0, mn = af.c0, mx = af.c0, lo, hi;
        rt_kir_expr *rest = rt_kir_int(a, 0);
        for (int32_t t = 0; t < af.n_terms; t++) {
            int32_t v = af.var[t];
            int64_t k = af.coef[t];
            if (v == l->win_x) {
                ax = k;
            } else if (rt_win_index(l, v) >= 0 && rt_var_range(l, v, &lo, &hi)) {
                mn += k * (k > 0 ? lo : hi - 1);
                mx += k * (k > 0 ? hi - 1 : lo);
            } else {
                rest = rt_kir_bin(a, RT_KIR_ADD, rest,
                                  rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, k),
                                             rt_kir_var_ref(a, l->p, l->var_of[v])));
            }
        }
        rt_kir_expr *low = rt_kir_bin(a, RT_KIR_ADD, rest, rt_kir_int(a, mn));
        rt_kir_expr *high = rt_kir_bin(a, RT_KIR_ADD, rest, rt_kir_int(a, mx));
        if (c == RT_WIN_ROW) {
            *rows = rt_kir_bin(a, RT_KIR_AND, *rows,
                               rt_kir_bin(a, RT_KIR_AND,
                                          rt_kir_bin(a, RT_KIR_GE, low, rt_kir_int(a, 0)),
                                          rt_kir_bin(a, RT_KIR_LT, high, rt_kir_int(a, ext))));
            continue;
        }
        // ax * x + low >= 0 and ax * x + high < ext (floor division).
        rt_kir_expr *first = rt_kir_neg(a, rt_kir_bin(a, RT_KIR_DIV, low, rt_kir_int(a, ax)));
        rt_kir_expr *end = rt_kir_bin(
            a, RT_KIR_ADD,
            rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, ext - 1), high),
                       rt_kir_int(a, ax)),
            rt_kir_int(a, 1));
        *xlo = rt_kir_bin(a, RT_KIR_MAX, *xlo, first);
        *xhi = rt_kir_bin(a, RT_KIR_MIN, *xhi, end);
    }
}

// One output element of a window reduction at the current x, in blk (with a packed read of
// yu > 1 rows per y, one per output row y + dy): an accumulator starts from the reduction's
// identity (or the output for '+='), takes every window point in order (the window vars set to
// constants, so the body is straight-line code), and is stored. A sum of `f / k` or `f * k` with
// k free of the window accumulates f and divides (multiplies) once: one division per output
// instead of one per point.
static rt_status rt_win_body(rt_lower *l, rt_kir_block *blk) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    const rt_win_pack *pk = l->win_pack && l->win_pack->rb ? l->win_pack : NULL;
    int32_t yu = pk ? (int32_t)pk->yu : 1, yv = pk ? pk->yv : -1;
    int32_t ob = l->data_buf[s->out], y0 = yv >= 0 ? l->var_of[yv] : -1;
    const rt_expr *point = s->rhs, *post = NULL;
    bool sum = s->op == RT_ASSIGN_ADD || s->op == RT_ASSIGN_ADD_INIT;
    const rt_expr *e = s->rhs;
    if (sum && !e->is_int && e->kind == RT_EXPR_BINARY && e->n_args == 2 &&
        (e->bop == RT_BOP_DIV || e->bop == RT_BOP_MUL)) {
        if (rt_win_invariant(s, e->args[1]))
            point = e->args[0], post = e->args[1];
        else if (e->bop == RT_BOP_MUL && rt_win_invariant(s, e->args[0]))
            point = e->args[1], post = e->args[0];
    }
    rt_kir_bop bop = rt_assign_bop(s->op);
    int64_t wlo[3], wext[3], n_points = 1;
    for (int32_t i = 0; i < l->win_nr; i++) {
        int64_t h;
        rt_var_range(l, l->win_red[i], &wlo[i], &h);
        wext[i] = h - wlo[i];
        n_points *= wext[i];
    }
    // Points go round-robin to up to four accumulators (two per output row of two), combined at
    // the end: a row has only a few vector iterations, too few to hide one chain of 25 dependent
    // adds (a 5x5 window); more would spill the window's weights held in registers.
    int32_t n_acc = n_points < 4 / yu ? (int32_t)n_points : 4 / yu, acc[RT_WIN_Y_ROWS][4];
    rt_kir_expr *off[RT_WIN_Y_ROWS], *out_now[RT_WIN_Y_ROWS];
    for (int32_t dy = 0; dy < yu; dy++) {
        if (pk)
            l->var_of[yv] = pk->yvar[dy];
        RT_TRY(rt_lower_out_offset(l, &off[dy]));
        out_now[dy] = rt_kir_cast(a, l->ct, rt_kir_load(a, l->k, ob, off[dy]));
        for (int32_t i = 0; i < n_acc; i++) {
            acc[dy][i] = rt_kir_add_var(a, l->p, "acc", l->ct);
            rt_kir_node *init = acc[dy][i] >= 0 ? rt_kir_append(a, blk, RT_KIR_N_FSET) : NULL;
            RT_LOWER_CHECK(l, init);
            if (!init)
                return RT_OK;
            init->var = acc[dy][i];
            init->value = i == 0 && s->op == RT_ASSIGN_ADD && !post
                              ? out_now[dy]
                              : rt_kir_flt(a, l->ct, rt_assign_init(s->op));
        }
    }
    // The (output row, point) pairs in order: by point, or with several rows by the packed row
    // and column they read (the rows' shared loads next to each other).
    int64_t order[RT_WIN_Y_ROWS * 49], key[RT_WIN_Y_ROWS * 49], n_items = n_points * yu;
    for (int64_t it = 0; it < n_items; it++) {
        int64_t pt = it / yu, dy = it % yu, h = dy * (pk ? pk->ay : 0), b = 0;
        for (int64_t i = l->win_nr - 1, rem = pt; yu > 1 && i >= 0; i--) {
            h += pk->br[i] * (wlo[i] + rem % wext[i]);
            b += pk->bx[i] * (wlo[i] + rem % wext[i]);
            rem /= wext[i];
        }
        key[it] = yu > 1 ? (h * 4096 + b) * 128 + it : it;
        int64_t j = it;
        for (; j > 0 && key[order[j - 1]] > key[it]; j--)
            order[j] = order[j - 1];
        order[j] = it;
    }
    l->pre = blk;
    int64_t set[3] = {0, 0, 0};
    for (int64_t k = 0; k < n_items; k++) {
        int64_t pt = order[k] / yu, dy = order[k] % yu;
        if (pk)
            l->var_of[yv] = pk->yvar[dy];
        l->win_dy = dy;
        // Window vars of point pt (the last one fastest), set where they change.
        for (int64_t i = l->win_nr - 1, rem = pt; i >= 0; i--) {
            l->win_pt[i] = wlo[i] + rem % wext[i];
            rem /= wext[i];
            if (k > 0 && set[i] == l->win_pt[i])
                continue;
            set[i] = l->win_pt[i];
            rt_kir_node *let = rt_kir_append(a, blk, RT_KIR_N_LET);
            RT_LOWER_CHECK(l, let);
            if (!let)
                return RT_OK;
            let->var = l->var_of[l->win_red[i]];
            let->value = rt_kir_int(a, l->win_pt[i]);
        }
        rt_kir_expr *x;
        RT_TRY(rt_tr_num(l, point, &x));
        rt_kir_node *upd = rt_kir_append(a, blk, RT_KIR_N_FSET);
        int32_t ai = acc[dy][pt % n_acc];
        rt_kir_expr *nv = rt_kir_bin(a, bop, rt_kir_var_ref(a, l->p, ai), x);
        RT_LOWER_CHECK(l, upd && nv);
        if (!upd)
            return RT_OK;
        upd->var = ai;
        upd->value = nv;
    }
    l->win_dy = 0;
    for (int32_t dy = 0; dy < yu; dy++) {
        if (pk)
            l->var_of[yv] = pk->yvar[dy];
        rt_kir_expr *part[4];
        for (int32_t i = 0; i < n_acc; i++)
            part[i] = rt_kir_var_ref(a, l->p, acc[dy][i]);
        for (int32_t w = 1; w < n_acc; w *= 2)
            for (int32_t i = 0; i + w < n_acc; i += 2 * w)
                part[i] = rt_kir_bin(a, bop, part[i], part[i + w]);
        rt_kir_expr *value = part[0];
        if (post) {
            rt_kir_expr *k;
            RT_TRY(rt_tr_num(l, post, &k));
            value = rt_kir_bin(a, e->bop == RT_BOP_DIV ? RT_KIR_DIV : RT_KIR_MUL, value, k);
            if (s->op == RT_ASSIGN_ADD)
                value = rt_kir_bin(a, RT_KIR_ADD, out_now[dy], value);
        }
        rt_lower_store_out(l, blk, off[dy], value);
    }
    if (pk)
        l->var_of[yv] = y0;
    return RT_OK;
}

// Loops var over [lo, hi) of kind `kind` and returns in body[0..*n) the blocks where the caller
// puts the iteration (two when the choice below is made at run time). A vector loop longer than
// `lanes` whose iterations may run twice (`redo`: they recompute and overwrite) runs as blocks of
// exactly `lanes`, the last one shifted back to end at hi: every block is one full vector with
// no scalar remainder, which for rows like 40 = 2 x 16 + 8 outputs of a 5x5 window would
// otherwise cost as much as the vector part (25 scalar multiply-adds per output).
static void rt_win_loops(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *lo,
                         rt_kir_expr *hi, rt_kir_loop_kind kind, bool redo, rt_kir_block **body,
                         int32_t *n) {
    rt_arena *a = l->a;
    int64_t clo, chi, lanes = l->dev && l->dev->lanes > 1 ? l->dev->lanes : 1;
    bool known = rt_kir_is_int(lo, &clo) && rt_kir_is_int(hi, &chi);
    *n = 0;
    if (known && chi <= clo)
        return;
    rt_kir_expr *len = rt_kir_bin(a, RT_KIR_SUB, hi, lo);
    bool block = kind == RT_KIR_LOOP_VECTOR && lanes > 1 && redo && (!known || chi - clo > lanes);
    rt_kir_block *plain = blk;
    if (block && !known) {
        rt_kir_node *br = rt_kir_append(a, blk, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, br && len);
        if (!br)
            return;
        br->cond = rt_kir_bin(a, RT_KIR_GT, len, rt_kir_int(a, lanes));
        blk = &br->body;
        plain = &br->else_body;
    }
    if (block) {
        int32_t vb =
            rt_kir_add_var(a, l->p, rt_arena_printf(a, "%s_v", l->p->vars[var].name), RT_KIR_I64);
        rt_kir_expr *nb =
            rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_ADD, len, rt_kir_int(a, lanes - 1)),
                       rt_kir_int(a, lanes));
        rt_kir_node *outer =
            vb >= 0 ? rt_kir_loop(a, blk, vb, rt_kir_int(a, 0), nb, RT_KIR_LOOP_SERIAL) : NULL;
        RT_LOWER_CHECK(l, outer);
        if (!outer)
            return;
        rt_kir_expr *v0 =
            rt_gen_let(l, &outer->body, rt_arena_printf(a, "%s_v0", l->p->vars[var].name),
                       rt_kir_bin(a, RT_KIR_MIN,
                                  rt_kir_bin(a, RT_KIR_ADD, lo,
                                             rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->p, vb),
                                                        rt_kir_int(a, lanes))),
                                  rt_kir_bin(a, RT_KIR_SUB, hi, rt_kir_int(a, lanes))));
        rt_kir_node *loop = rt_kir_loop(a, &outer->body, var, v0,
                                        rt_kir_bin(a, RT_KIR_ADD, v0, rt_kir_int(a, lanes)), kind);
        RT_LOWER_CHECK(l, loop);
        if (!loop)
            return;
        body[(*n)++] = &loop->body;
        if (known)
            return;
    }
    rt_kir_node *loop = rt_kir_loop(a, plain, var, lo, hi, kind);
    RT_LOWER_CHECK(l, loop);
    if (loop)
        body[(*n)++] = &loop->body;
}

// x over [lo, hi) of a window reduction, each iteration one whole output (rt_win_body); outputs
// are recomputed where blocks overlap unless the statement accumulates into them ('+=').
static rt_status rt_win_loop(rt_lower *l, rt_kir_block *blk, int32_t xv, rt_kir_expr *lo,
                             rt_kir_expr *hi, rt_kir_loop_kind kind) {
    rt_kir_block *body[2];
    int32_t n;
    rt_win_loops(l, blk, l->var_of[xv], lo, hi, kind, l->s->op != RT_ASSIGN_ADD, body, &n);
    for (int32_t i = 0; i < n; i++)
        RT_TRY(rt_win_body(l, body[i]));
    return RT_OK;
}

static bool rt_mentions_var(const rt_expr *e, int32_t v) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_INDEX && e->var == v)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_mentions_var(e->args[i], v))
            return true;
    return false;
}

// Number of reads below e with an index mentioning var v; *found gets the last.
static int32_t rt_reads_with_var(const rt_expr *e, int32_t v, const rt_expr **found) {
    if (!e)
        return 0;
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_args; i++)
        n += rt_reads_with_var(e->args[i], v, found);
    if (e->kind == RT_EXPR_READ && rt_mentions_var(e, v)) {
        *found = e;
        n++;
    }
    return n;
}

// Range [*mn, *mx] of sum coef[i] * w_i over the window vars.
static void rt_win_span(const rt_lower *l, const int64_t *coef, int64_t *mn, int64_t *mx) {
    *mn = *mx = 0;
    for (int32_t i = 0; i < l->win_nr; i++) {
        int64_t lo = 0, hi = 1;
        rt_var_range(l, l->win_red[i], &lo, &hi);
        *mn += coef[i] * (coef[i] > 0 ? lo : hi - 1);
        *mx += coef[i] * (coef[i] > 0 ? hi - 1 : lo);
    }
}

// Binds the packed-rows read the plan chose (rt_perf_cpu_loops.win_pack, perfmodel/cpu.c
// window_pack decides it; nothing is decided here) to the statement: the one read of an f32
// dense tensor that moves with x, in one affine dim (stride a) whose other vars are window vars
// or outer kept vars; at most one other dim (the row dim) holds window vars (or yv, y's loop
// handed over, yu output rows per y iteration), affine in them and outer kept vars. False when
// the statement has no such read (the plan and the statement disagree).
static bool rt_win_pack_bind(const rt_lower *l, int32_t xv, int32_t yv, int64_t x_max, int64_t yu,
                             rt_win_pack *pk) {
    const rt_stmt *s = l->s;
    const rt_expr *rd = NULL;
    memset(pk, 0, sizeof *pk);
    pk->dim = pk->rdim = -1;
    pk->yv = yv;
    if (l->ct != RT_KIR_F32 || rt_reads_with_var(s->rhs, xv, &rd) != 1)
        return false;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    if (rd->n_args != tn->n_dims || l->k->bufs[l->data_buf[rd->tensor]].type != RT_KIR_F32)
        return false;
    pk->read = rd;
    for (int32_t d = 0; d < rd->n_args; d++) {
        rt_affine af;
        bool on_x = false, on_row = false;
        if (l->start_buf[rd->tensor][d] >= 0 || !rt_expr_affine(l->op, rd->args[d], &af))
            return false;
        for (int32_t i = 0; i < af.n_terms; i++) {
            int32_t v = af.var[i];
            if (v == xv)
                on_x = true;
            else if (v == yv || rt_win_index(l, v) >= 0)
                on_row = true;
            else if (v < 0 || v >= s->n_vars || s->vars[v].is_reduce)
                return false;
        }
        if (on_x && pk->dim < 0)
            pk->dim = d, pk->af = af;
        else if (!on_x && on_row && pk->rdim < 0)
            pk->rdim = d, pk->raf = af;
        else if (on_x || on_row)
            return false;
    }
    if (pk->dim < 0)
        return false;
    for (int32_t i = 0; i < pk->af.n_terms; i++) {
        int32_t v = pk->af.var[i], w = rt_win_index(l, v);
        if (v == yv)
            return false;
        if (v == xv)
            pk->a = pk->af.coef[i];
        else if (w >= 0)
            pk->bx[w] = pk->af.coef[i];
    }
    for (int32_t i = 0; pk->rdim >= 0 && i < pk->raf.n_terms; i++) {
        int32_t v = pk->raf.var[i], w = rt_win_index(l, v);
        if (v == yv)
            pk->ay = pk->raf.coef[i];
        else if (w >= 0 && pk->bx[w] != 0)
            return false;
        else if (w >= 0)
            pk->br[w] = pk->raf.coef[i];
    }
    if (pk->a < 1 || (yv >= 0 && pk->ay < 1))
        return false;
    rt_win_span(l, pk->bx, &pk->bmin, &pk->bmax);
    rt_win_span(l, pk->br, &pk->brmin, &pk->brmax);
    // Each phase of a row has room for the run and a shift of up to 15 (rt_win_pack_setup),
    // rounded to whole vectors.
    pk->q = rt_win_pack_row_elems(x_max, pk->a, pk->bmax - pk->bmin);
    int64_t span = pk->brmax - pk->brmin + 1;
    pk->yu = yv >= 0 ? yu : 1;
    pk->rows = yv >= 0 ? rt_win_pack_ring_rows(span, pk->ay, pk->yu) : span;
    return true;
}

// The part of affine index af from the outer kept vars (all but x, y and the window vars).
static rt_kir_expr *rt_win_outer(rt_lower *l, const rt_affine *af, const rt_win_pack *pk) {
    rt_kir_expr *k = rt_kir_int(l->a, af->c0);
    for (int32_t i = 0; i < af->n_terms; i++) {
        int32_t v = af->var[i];
        if (v != l->win_x && v != pk->yv && rt_win_index(l, v) < 0)
            k = rt_kir_bin(l->a, RT_KIR_ADD, k,
                           rt_kir_bin(l->a, RT_KIR_MUL, rt_kir_int(l->a, af->coef[i]),
                                      rt_kir_var_ref(l->a, l->p, l->var_of[v])));
    }
    return k;
}

// One packing store per phase ph: scratch[base + ph*q + qv] = the read at run element
// j = a*qv + ph (index u0 + j along the x dim, idx along the others), guarded (j < len and within
// the extents, else the pad value) or not.
static void rt_win_pack_copy(rt_lower *l, rt_kir_block *blk, const rt_win_pack *pk,
                             rt_kir_expr **idx, rt_kir_expr *u0, rt_kir_expr *len,
                             rt_kir_expr *base, int32_t qv, bool guard) {
    rt_arena *a = l->a;
    const rt_expr *rd = pk->read;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int64_t ext = l->extent[rd->tensor][pk->dim];
    for (int64_t ph = 0; ph < pk->a; ph++) {
        rt_kir_expr *q = rt_kir_var_ref(a, l->p, qv);
        rt_kir_expr *j = rt_kir_bin(
            a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, q, rt_kir_int(a, pk->a)), rt_kir_int(a, ph));
        rt_kir_expr *u = rt_kir_bin(a, RT_KIR_ADD, u0, j), *ok = rt_kir_int(a, 1);
        rt_kir_expr *sub[RT_MAX_DIMS];
        memcpy(sub, idx, sizeof sub);
        sub[pk->dim] = u;
        if (guard) {
            ok = rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_LT, j, len),
                            rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, u, rt_kir_int(a, 0)),
                                       rt_kir_bin(a, RT_KIR_LT, u, rt_kir_int(a, ext))));
            sub[pk->dim] = rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_MAX, u, rt_kir_int(a, 0)),
                                      rt_kir_int(a, ext - 1));
        }
        rt_kir_expr *v =
            rt_kir_load(a, l->k, l->data_buf[rd->tensor], rt_tr_offset(l, rd->tensor, sub, NULL));
        rt_kir_node *st = rt_kir_append(a, blk, RT_KIR_N_STORE);
        RT_LOWER_CHECK(l, st && v && ok);
        if (!st)
            return;
        st->buf = 0;
        st->index = rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_ADD, base, q),
                               rt_kir_int(a, ph * pk->q + pk->shift));
        st->value = rt_kir_select(a, ok, v, rt_kir_flt(a, RT_KIR_F32, tn->pad_value));
    }
}

// What the packed rows of pk for x over [lo, hi) (y from ylo when handed over) share, as lets in
// blk before any row is packed (see the fields of rt_win_pack); reserves the scratch.
static rt_status rt_win_pack_setup(rt_lower *l, rt_kir_block *blk, rt_win_pack *pk, rt_kir_expr *lo,
                                   rt_kir_expr *hi, rt_kir_expr *ylo) {
    rt_arena *a = l->a;
    const rt_expr *rd = pk->read;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int64_t A = pk->a, ext = l->extent[rd->tensor][pk->dim];
    int64_t bytes = pk->rows * A * pk->q * 4;
    if (bytes > l->p->scratch_bytes)
        l->p->scratch_bytes = bytes;
    if (bytes > l->k->scratch_bytes)
        l->k->scratch_bytes = bytes;
    pk->lo = lo;
    pk->len = rt_gen_let(
        l, blk, "pk_len",
        rt_kir_bin(a, RT_KIR_ADD,
                   rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, A),
                              rt_kir_bin(a, RT_KIR_SUB, rt_kir_bin(a, RT_KIR_SUB, hi, lo),
                                         rt_kir_int(a, 1))),
                   rt_kir_int(a, pk->bmax - pk->bmin + 1)));
    pk->nq = rt_gen_let(l, blk, "pk_nq",
                        rt_kir_bin(a, RT_KIR_DIV,
                                   rt_kir_bin(a, RT_KIR_ADD, pk->len, rt_kir_int(a, A - 1)),
                                   rt_kir_int(a, A)));
    // The run starts at u0 = a * lo + bmin + (the outer kept vars' part of the index).
    pk->u0 = rt_gen_let(l, blk, "pk_u0",
                        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, A), lo),
                                   rt_kir_bin(a, RT_KIR_ADD, rt_win_outer(l, &pk->af, pk),
                                              rt_kir_int(a, pk->bmin))));
    // q over [qa, qb): every phase within the run and (padded tensors) the extents.
    rt_kir_expr *qa = rt_kir_int(a, 0), *qb = rt_kir_bin(a, RT_KIR_DIV, pk->len, rt_kir_int(a, A));
    if (tn->has_pad) {
        qa = rt_kir_bin(a, RT_KIR_MAX, qa,
                        rt_kir_neg(a, rt_kir_bin(a, RT_KIR_DIV, pk->u0, rt_kir_int(a, A))));
        qb = rt_kir_bin(a, RT_KIR_MIN, qb,
                        rt_kir_bin(a, RT_KIR_DIV,
                                   rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, ext), pk->u0),
                                   rt_kir_int(a, A)));
    }
    pk->qa = rt_gen_let(l, blk, "pk_q0", rt_kir_bin(a, RT_KIR_MIN, qa, pk->nq));
    pk->qb = rt_gen_let(l, blk, "pk_q1", rt_kir_bin(a, RT_KIR_MAX, qb, pk->qa));
    // Element q of a phase sits at q + shift, so that the vector copy from qa stores whole
    // 64-byte lines (a store split over two lines costs twice) when qa is known here.
    int64_t qa0;
    pk->shift = rt_kir_is_int(pk->qa, &qa0) ? (16 - qa0 % 16) % 16 : 0;
    // Row h is at index r0 + h along the row dim.
    if (pk->rdim >= 0) {
        rt_kir_expr *r =
            rt_kir_bin(a, RT_KIR_ADD, rt_win_outer(l, &pk->raf, pk), rt_kir_int(a, pk->brmin));
        if (pk->yv >= 0)
            r = rt_kir_bin(a, RT_KIR_ADD, r, rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, pk->ay), ylo));
        pk->r0 = rt_gen_let(l, blk, "pk_r0", r);
    }
    // The read's other indices, and whether those that may leave the extents stay within.
    pk->valid = rt_kir_int(a, 1);
    for (int32_t d = 0; d < rd->n_args; d++) {
        rt_affine daf;
        int64_t dext = l->extent[rd->tensor][d];
        pk->idx[d] = NULL;
        if (d == pk->dim || d == pk->rdim)
            continue;
        RT_TRY(rt_tr_int(l, rd->args[d], &pk->idx[d]));
        if (tn->has_pad && rt_win_dim_of(l, rd->args[d], dext, &daf) != RT_WIN_IN)
            pk->valid = rt_kir_bin(
                a, RT_KIR_AND, pk->valid,
                rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, pk->idx[d], rt_kir_int(a, 0)),
                           rt_kir_bin(a, RT_KIR_LT, pk->idx[d], rt_kir_int(a, dext))));
    }
    pk->hv = rt_kir_add_var(a, l->p, "pk_h", RT_KIR_I64);
    pk->qv = rt_kir_add_var(a, l->p, "pk_q", RT_KIR_I64);
    pk->pv = pk->rdim >= 0 ? rt_kir_add_var(a, l->p, "pk_pf", RT_KIR_I64) : 0;
    if (pk->hv < 0 || pk->qv < 0 || pk->pv < 0)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

// A loop of var over the 64-byte lines of a run of len f32 elements, with one PREFETCH in it whose
// buffer and index the caller fills in: the index is the run's start plus *off, the element var
// 16 of the run, the last line's hint at its last element. A run need not start on a line (rows of
// 1000 or 83 floats do not), and then it spans one line more than (len + 15) / 16: on 128x1000x4032
// leaving that line out of the next B block's prefetch (every other row) cost 4% of the GEMM on a
// Zen 4 core, the pack stalling on it. So the loop runs (len + 15) / 16 + 1 times (the last hint
// repeats the line before it when the run does start on one). NULL when out of memory.
static rt_kir_node *rt_prefetch_lines(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *len,
                                      rt_kir_expr **off) {
    rt_arena *a = l->a;
    rt_kir_expr *lines =
        rt_kir_bin(a, RT_KIR_ADD,
                   rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_ADD, len, rt_kir_int(a, 15)),
                              rt_kir_int(a, 16)),
                   rt_kir_bin(a, RT_KIR_MIN, len, rt_kir_int(a, 1)));
    rt_kir_node *lp = rt_kir_loop(a, blk, var, rt_kir_int(a, 0), lines, RT_KIR_LOOP_SERIAL);
    rt_kir_node *pf = lp ? rt_kir_append(a, &lp->body, RT_KIR_N_PREFETCH) : NULL;
    *off = rt_kir_bin(a, RT_KIR_MIN,
                      rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->p, var), rt_kir_int(a, 16)),
                      rt_kir_bin(a, RT_KIR_SUB, len, rt_kir_int(a, 1)));
    RT_LOWER_CHECK(l, pf && *off);
    return pf && *off ? pf : NULL;
}

// Packs rows [from, to) of pk in blk (after rt_win_pack_setup): each row, when its index along
// the row dim is within the extents, as a vector copy of the part of the run within the extents
// and scalar guarded copies at its ends, else as a row of pad values.
static void rt_win_pack_rows(rt_lower *l, rt_kir_block *blk, rt_win_pack *pk, rt_kir_expr *from,
                             rt_kir_expr *to) {
    rt_arena *a = l->a;
    const rt_expr *rd = pk->read;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int64_t A = pk->a;
    rt_kir_node *hl = rt_kir_loop(a, blk, pk->hv, from, to, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, hl);
    if (!hl)
        return;
    rt_kir_block *rb = &hl->body;
    rt_kir_expr *h = rt_kir_var_ref(a, l->p, pk->hv), *valid = pk->valid;
    rt_kir_expr *idx[RT_MAX_DIMS];
    memcpy(idx, pk->idx, sizeof idx);
    if (pk->rdim >= 0) {
        rt_affine raf;
        int64_t rext = l->extent[rd->tensor][pk->rdim];
        idx[pk->rdim] = rt_gen_let(l, rb, "pk_row", rt_kir_bin(a, RT_KIR_ADD, pk->r0, h));
        if (tn->has_pad && rt_win_dim_of(l, rd->args[pk->rdim], rext, &raf) != RT_WIN_IN)
            valid = rt_kir_bin(
                a, RT_KIR_AND, valid,
                rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, idx[pk->rdim], rt_kir_int(a, 0)),
                           rt_kir_bin(a, RT_KIR_LT, idx[pk->rdim], rt_kir_int(a, rext))));
    }
    // Prefetch of the run RT_WIN_PF_ROWS rows further down, one hint per 64-byte line: the
    // packing reads each row once, right before the FMAs that use it, and the hardware
    // prefetcher does not run far enough ahead across the planes a work item interleaves.
    if (pk->rdim >= 0) {
        rt_kir_expr *sub[RT_MAX_DIMS];
        memcpy(sub, idx, sizeof sub);
        sub[pk->rdim] = rt_kir_bin(a, RT_KIR_ADD, idx[pk->rdim], rt_kir_int(a, RT_WIN_PF_ROWS));
        rt_kir_expr *off = NULL;
        rt_kir_node *pf = rt_prefetch_lines(l, rb, pk->pv, pk->len, &off);
        sub[pk->dim] = rt_kir_bin(a, RT_KIR_ADD, pk->u0, off);
        RT_LOWER_CHECK(l, sub[pk->rdim] && sub[pk->dim]);
        if (pf) {
            pf->buf = l->data_buf[rd->tensor];
            pf->index = rt_tr_offset(l, rd->tensor, sub, NULL);
            RT_LOWER_CHECK(l, pf->index);
        }
    }
    rt_kir_expr *base = rt_kir_bin(
        a, RT_KIR_MUL, pk->yv >= 0 ? rt_kir_bin(a, RT_KIR_MOD, h, rt_kir_int(a, pk->rows)) : h,
        rt_kir_int(a, A * pk->q));
    rt_kir_block *fill = NULL;
    int64_t all;
    if (!rt_kir_is_int(valid, &all) || !all) {
        rt_kir_node *br = rt_kir_append(a, rb, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, br && valid);
        if (!br)
            return;
        br->cond = valid;
        rb = &br->body;
        fill = &br->else_body;
    }
    rt_kir_block *body[2];
    int32_t n, qv = pk->qv;
    rt_win_loops(l, rb, qv, rt_kir_int(a, 0), pk->qa, RT_KIR_LOOP_SERIAL, false, body, &n);
    for (int32_t i = 0; i < n; i++)
        rt_win_pack_copy(l, body[i], pk, idx, pk->u0, pk->len, base, qv, true);
    rt_win_loops(l, rb, qv, pk->qa, pk->qb, RT_KIR_LOOP_VECTOR, true, body, &n);
    for (int32_t i = 0; i < n; i++)
        rt_win_pack_copy(l, body[i], pk, idx, pk->u0, pk->len, base, qv, false);
    rt_win_loops(l, rb, qv, pk->qb, pk->nq, RT_KIR_LOOP_SERIAL, false, body, &n);
    for (int32_t i = 0; i < n; i++)
        rt_win_pack_copy(l, body[i], pk, idx, pk->u0, pk->len, base, qv, true);
    if (!fill)
        return;
    rt_win_loops(l, fill, qv, rt_kir_int(a, 0), pk->nq, RT_KIR_LOOP_VECTOR, true, body, &n);
    for (int32_t i = 0; i < n; i++)
        for (int64_t ph = 0; ph < A; ph++) {
            rt_kir_node *st = rt_kir_append(a, body[i], RT_KIR_N_STORE);
            RT_LOWER_CHECK(l, st);
            if (!st)
                return;
            st->buf = 0;
            st->index = rt_kir_bin(a, RT_KIR_ADD,
                                   rt_kir_bin(a, RT_KIR_ADD, base, rt_kir_var_ref(a, l->p, qv)),
                                   rt_kir_int(a, ph * pk->q + pk->shift));
            st->value = rt_kir_flt(a, RT_KIR_F32, tn->pad_value);
        }
}

// y's loop handed to the packing (pk->yv >= 0), yu = pk->yu output rows per iteration
// (rt_win_pack_plan): packs the rows of the first iteration in *blk and opens y's loop of
// ceil(n / yu) iterations over its n >= yu values from ylo; *blk becomes the loop's body, where
// y = min(ylo + yu i, yhi - yu) (the last iteration shifted back to end at yhi: it recomputes
// rows of the one before), y + dy the output row dy, the rows the next iteration adds are packed
// (before its x loop, so that their loads overlap that loop's arithmetic), and pk->rb holds the
// offsets of the iteration's span + ay (yu - 1) rows in the ring (NULL *blk when out of memory).
static rt_status rt_win_rows(rt_lower *l, rt_kir_block **blk, rt_win_pack *pk, rt_kir_expr *ylo,
                             rt_kir_expr *yhi, rt_kir_expr *lo, rt_kir_expr *hi) {
    rt_arena *a = l->a;
    int64_t span = pk->brmax - pk->brmin + 1, yu = pk->yu, ay = pk->ay;
    RT_TRY(rt_win_pack_setup(l, *blk, pk, lo, hi, ylo));
    l->win_pack = pk;
    // Iteration i computes rows t(i) = min(yu i, n - yu) .. t(i) + yu - 1 (relative to ylo) and
    // reads packed rows [ay t(i), ay (t(i) + yu - 1) + span).
    rt_kir_expr *n = rt_gen_let(l, *blk, "y_n", rt_kir_bin(a, RT_KIR_SUB, yhi, ylo));
    rt_win_pack_rows(l, *blk, pk, rt_kir_int(a, 0), rt_kir_int(a, ay * (yu - 1) + span));
    int32_t iv = rt_kir_add_var(a, l->p, "y_i", RT_KIR_I64);
    pk->rb = rt_arena_alloc(a, sizeof *pk->rb * (size_t)(span + ay * (yu - 1)));
    rt_kir_node *yl =
        iv >= 0 && pk->rb
            ? rt_kir_loop(a, *blk, iv, rt_kir_int(a, 0),
                          rt_kir_bin(a, RT_KIR_DIV,
                                     rt_kir_bin(a, RT_KIR_ADD, n, rt_kir_int(a, yu - 1)),
                                     rt_kir_int(a, yu)),
                          RT_KIR_LOOP_SERIAL)
            : NULL;
    RT_LOWER_CHECK(l, yl);
    *blk = yl ? &yl->body : NULL;
    if (!yl)
        return RT_OK;
    rt_kir_block *b = *blk;
    rt_kir_expr *nlast = rt_kir_bin(a, RT_KIR_SUB, n, rt_kir_int(a, yu));
    rt_kir_expr *i = rt_kir_var_ref(a, l->p, iv);
    rt_kir_expr *t = rt_gen_let(
        l, b, "y_t",
        rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_MUL, i, rt_kir_int(a, yu)), nlast));
    for (int64_t dy = 0; dy < yu; dy++) {
        const char *name = l->s->vars[pk->yv].name;
        pk->yvar[dy] = dy == 0 ? l->var_of[pk->yv]
                               : rt_kir_add_var(a, l->p, rt_arena_printf(a, "%s_%d", name, (int)dy),
                                                RT_KIR_I64);
        rt_kir_node *let = pk->yvar[dy] >= 0 ? rt_kir_append(a, b, RT_KIR_N_LET) : NULL;
        RT_LOWER_CHECK(l, let);
        if (!let)
            return RT_OK;
        let->var = pk->yvar[dy];
        let->value =
            rt_kir_bin(a, RT_KIR_ADD, ylo, rt_kir_bin(a, RT_KIR_ADD, t, rt_kir_int(a, dy)));
    }
    // The rows the next iteration adds: [max(ay t', end), ay t' + ay (yu - 1) + span) for
    // t' = min(t + yu, n - yu), end = ay t + ay (yu - 1) + span (none after the last).
    rt_kir_expr *tn =
        rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_ADD, t, rt_kir_int(a, yu)), nlast);
    rt_kir_expr *cover = rt_kir_int(a, ay * (yu - 1) + span);
    rt_kir_expr *end =
        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, t, rt_kir_int(a, ay)), cover);
    rt_kir_expr *first = rt_kir_bin(a, RT_KIR_MUL, tn, rt_kir_int(a, ay));
    rt_win_pack_rows(l, b, pk, rt_gen_let(l, b, "pk_h0", rt_kir_bin(a, RT_KIR_MAX, first, end)),
                     rt_kir_bin(a, RT_KIR_ADD, first, cover));
    // Offsets of the iteration's rows in the ring.
    for (int64_t h = 0; h < span + ay * (yu - 1); h++)
        pk->rb[h] = rt_gen_let(
            l, b, "pk_rb",
            rt_kir_bin(a, RT_KIR_MUL,
                       rt_kir_bin(a, RT_KIR_MOD,
                                  rt_kir_bin(a, RT_KIR_ADD,
                                             rt_kir_bin(a, RT_KIR_MUL, t, rt_kir_int(a, ay)),
                                             rt_kir_int(a, h)),
                                  rt_kir_int(a, pk->rows)),
                       rt_kir_int(a, pk->a * pk->q)));
    return RT_OK;
}

// The innermost kept var xv over [lo, hi) of a window reduction (rt_window_form), and with pk
// and yv >= 0 the one before it, y over [ylo, yhi): the packed rows first (pk, when not NULL),
// then per y (when handed over) the x borders where a padded read may leave its extents as
// scalar loops with guarded reads, the interior as one vector loop of unguarded reads; when a
// row of the window may leave its extents (top and bottom rows of a padded conv), that vector
// loop is versioned on it, the slow copy selecting the pad value per row (x-invariant, so the
// loads stay unit-stride or interleaved). The caller (rt_lower_tiled) has set win_x, win_red
// and win_nr of l.
static rt_status rt_lower_window(rt_lower *l, rt_kir_block *blk, rt_win_pack *pk, rt_kir_expr *ylo,
                                 rt_kir_expr *yhi, int32_t xv, rt_kir_expr *lo, rt_kir_expr *hi) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int32_t yv = pk ? pk->yv : -1;
    if (yv >= 0)
        l->var_of[yv] = rt_kir_add_var(a, l->p, s->vars[yv].name, RT_KIR_I64);
    l->var_of[xv] = rt_kir_add_var(a, l->p, s->vars[xv].name, RT_KIR_I64);
    for (int32_t i = 0; i < l->win_nr; i++)
        l->var_of[l->win_red[i]] = rt_kir_add_var(a, l->p, s->vars[l->win_red[i]].name, RT_KIR_I64);
    l->win = true;
    l->win_pack = NULL;
    if (yv >= 0) {
        RT_TRY(rt_win_rows(l, &blk, pk, ylo, yhi, lo, hi));
        if (!blk)
            return RT_OK;
    } else if (pk) {
        // The only rows, before the x loop.
        RT_TRY(rt_win_pack_setup(l, blk, pk, lo, hi, ylo));
        rt_win_pack_rows(l, blk, pk, rt_kir_int(a, 0), rt_kir_int(a, pk->brmax - pk->brmin + 1));
        l->win_pack = pk;
    }
    rt_kir_expr *xlo = lo, *xhi = hi, *rows = rt_kir_int(a, 1);
    rt_win_bounds(l, s->rhs, &xlo, &xhi, &rows);
    // Interior [xlo, xhi) within [lo, hi).
    xlo = rt_gen_let(l, blk, "x_in0", rt_kir_bin(a, RT_KIR_MIN, xlo, hi));
    xhi = rt_gen_let(l, blk, "x_in1", rt_kir_bin(a, RT_KIR_MAX, xhi, xlo));
    rt_status st = RT_OK;
    l->win_guard_x = l->win_guard_row = true;
    st = rt_win_loop(l, blk, xv, lo, xlo, RT_KIR_LOOP_SERIAL);
    int64_t all_rows = 0;
    if (st == RT_OK && rt_kir_is_int(rows, &all_rows) && all_rows) {
        l->win_guard_x = l->win_guard_row = false;
        st = rt_win_loop(l, blk, xv, xlo, xhi, RT_KIR_LOOP_VECTOR);
    } else if (st == RT_OK) {
        rt_kir_node *br = rt_kir_append(a, blk, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, br && rows);
        if (br) {
            br->cond = rows;
            l->win_guard_x = l->win_guard_row = false;
            st = rt_win_loop(l, &br->body, xv, xlo, xhi, RT_KIR_LOOP_VECTOR);
            l->win_guard_row = true;
            if (st == RT_OK)
                st = rt_win_loop(l, &br->else_body, xv, xlo, xhi, RT_KIR_LOOP_VECTOR);
        }
    }
    l->win_guard_x = l->win_guard_row = true;
    if (st == RT_OK)
        st = rt_win_loop(l, blk, xv, xhi, hi, RT_KIR_LOOP_SERIAL);
    l->win = false;
    l->win_pack = NULL;
    l->win_nr = 0; // win_red is the caller's
    return st;
}

// Statement si blocked by the rTiles into a phase of its own: the scale-out level's tiles are
// the work items (spread over cores), each lower level a serial tile loop per tiled var (outer
// tile loops before inner ones), the register level's point loops innermost with the last kept
// var vectorized. *done is false when nothing is tiled (no phase was added).
static rt_status rt_lower_tiled(rt_lower *l, int32_t si, bool *done) {
    rt_arena *a = l->a;
    const rt_stmt *s = &l->op->stmts[si];
    const rt_perf_model *m = l->m;
    int32_t bl = m->block_level, top = m->top, nk, red[RT_MAX_DIMS * 2], nr;
    int64_t n_items;
    rt_tvar tv[RT_MAX_DIMS * 2];
    const rt_perf_flat *fl = &m->flat;
    const rt_perf_cpu_loops *lp = &l->rp->cpu.loops;
    *done = false;
    if (l->rp->cpu.kind != RT_PERF_CPU_PLAN_LOOPS || lp->n_vars < 1)
        return RT_OK;
    *done = true;
    nk = lp->n_vars;
    n_items = lp->items;
    rt_tiled_vars(l, s, lp, tv, &nr, red);
    RT_TRY(rt_lower_begin_stmt(l, s));
    // A window reduction whose strided read can be packed: when its row index moves with the
    // kept var before x (y), y's tiles below the work item are dropped so that y runs over the
    // item's rows right outside x and each packed row is shared by the output rows that overlap
    // it (the ring of packed rows is the L1 set the y tiles stood for); the tile and point
    // loops of the other vars go outside y. The model's loop plan (perfmodel/cpu.c) does the
    // same.
    // The plan's tiles of y already run over the item's rows when it hands y's loop over.
    bool window = lp->window;
    rt_win_pack pk;
    bool packed = false;
    if (window) {
        l->win_x = tv[nk - 1].v;
        l->win_red = red;
        l->win_nr = nr;
        rt_tvar *tx = &tv[nk - 1], *ty = nk >= 2 ? &tv[nk - 2] : NULL;
        int64_t x_max = 0, lo, hi;
        if (tx->tiled)
            x_max = tx->t[top];
        else if (rt_var_range(l, tx->v, &lo, &hi))
            x_max = hi - lo;
        if (lp->win_pack != RT_PERF_CPU_WIN_PACK_NONE) {
            bool rows = lp->win_pack == RT_PERF_CPU_WIN_PACK_ROWS && ty;
            packed = rt_win_pack_bind(l, tx->v, rows ? ty->v : -1, x_max, lp->win_yu, &pk);
            if (!packed)
                return rt_fail(
                    l->err, RT_ERR_BACKEND, s->loc,
                    "internal: the plan packs a window read the statement does not have");
        }
    }
    rt_tiled_executed(l, tv, nk, window, &pk, packed);
    rt_buf b;
    rt_buf_init(&b, a);
    rt_buf_printf(&b, "statement %d blocked by the rTiles [", (int)si);
    for (int32_t lv = bl; lv <= top; lv++) {
        rt_buf_printf(&b, "%s", lv > bl ? "; " : "");
        for (int32_t i = 0, first = 1; i < nk; i++)
            if (tv[i].tiled) {
                rt_buf_printf(&b, "%s%s=%lld", first ? "" : ",", tv[i].name,
                              (long long)tv[i].t[lv]);
                first = 0;
            }
    }
    rt_buf_puts(&b, "]");
    if (packed)
        rt_buf_puts(&b, pk.yv >= 0 ? ", strided read packed by rows" : ", strided read packed");
    if (packed && pk.yu > 1)
        rt_buf_printf(&b, ", %d output rows per y", (int)pk.yu);
    l->p = rt_kir_add_phase(a, l->k, b.oom ? "statement" : b.data, n_items);
    if (!l->p)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_block *blk = &l->p->body;
    // The flat axis's outer members: 0 in every offset (the flat index holds their part).
    if (fl->n > 0) {
        rt_kir_node *c = rt_kir_append(a, blk, RT_KIR_N_COMMENT);
        const char *text =
            rt_arena_printf(a, "%s as one flat index %s (every access reads it as one run)",
                            s->axes[fl->axis].name, tv[nk - 1].name);
        if (!c || !text)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        c->text = text;
    }
    for (int32_t i = 0; i + 1 < fl->n; i++) {
        int32_t v = fl->mem[i];
        l->var_of[v] = rt_kir_add_var(a, l->p, s->vars[v].name, RT_KIR_I64);
        rt_kir_node *let = l->var_of[v] >= 0 ? rt_kir_append(a, blk, RT_KIR_N_LET) : NULL;
        if (!let)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        let->var = l->var_of[v];
        let->value = rt_kir_int(a, 0);
    }
    // Work item -> tile index per tiled var (the first var varies slowest).
    rt_kir_expr *rem = rt_kir_var_ref(a, l->p, l->p->item_var);
    int64_t left = n_items;
    for (int32_t i = nk - 1; i >= 0; i--) {
        rt_tvar *t = &tv[i];
        if (!t->tiled)
            continue;
        const char *name = t->name;
        int64_t ext = t->hi - t->lo, nb = rt_ceil_div64(ext, t->t[bl]);
        t->exact = ext % t->t[bl] == 0;
        if (nb == 1) {
            t->base = rt_kir_int(a, t->lo);
            t->end = rt_kir_int(a, t->hi);
            continue;
        }
        rt_kir_expr *bi = left == nb ? rem : rt_kir_bin(a, RT_KIR_MOD, rem, rt_kir_int(a, nb));
        left /= nb;
        rem = left > 1 ? rt_kir_bin(a, RT_KIR_DIV, rem, rt_kir_int(a, nb)) : rt_kir_int(a, 0);
        t->base = rt_gen_let(l, blk, rt_arena_printf(a, "%s_b%d", name, (int)bl),
                             rt_kir_bin(a, RT_KIR_ADD, rt_kir_int(a, t->lo),
                                        rt_kir_bin(a, RT_KIR_MUL, bi, rt_kir_int(a, t->t[bl]))));
        rt_kir_expr *end = rt_kir_bin(a, RT_KIR_ADD, t->base, rt_kir_int(a, t->t[bl]));
        t->end = t->exact ? end
                          : rt_gen_let(l, blk, rt_arena_printf(a, "%s_e%d", name, (int)bl),
                                       rt_kir_bin(a, RT_KIR_MIN, end, rt_kir_int(a, t->hi)));
    }
    // Tile loops of the levels below, outer levels first.
    for (int32_t lv = bl + 1; lv <= top; lv++) {
        for (int32_t i = 0; i < nk; i++) {
            rt_tvar *t = &tv[i];
            if (!t->tiled || t->t[lv] >= t->t[lv - 1])
                continue;
            const char *name = t->name;
            int64_t tl = t->t[lv];
            bool exact = t->exact && t->t[lv - 1] % tl == 0;
            rt_kir_expr *trip =
                t->exact ? rt_kir_int(a, rt_ceil_div64(t->t[lv - 1], tl))
                         : rt_kir_bin(a, RT_KIR_DIV,
                                      rt_kir_bin(a, RT_KIR_ADD,
                                                 rt_kir_bin(a, RT_KIR_SUB, t->end, t->base),
                                                 rt_kir_int(a, tl - 1)),
                                      rt_kir_int(a, tl));
            int32_t ti =
                rt_kir_add_var(a, l->p, rt_arena_printf(a, "%s_t%d", name, (int)lv), RT_KIR_I64);
            if (ti < 0)
                return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            rt_kir_node *loop = rt_kir_loop(a, blk, ti, rt_kir_int(a, 0), trip, RT_KIR_LOOP_SERIAL);
            RT_LOWER_CHECK(l, loop && trip);
            if (!loop)
                return RT_OK;
            blk = &loop->body;
            rt_kir_expr *base =
                rt_gen_let(l, blk, rt_arena_printf(a, "%s_b%d", name, (int)lv),
                           rt_kir_bin(a, RT_KIR_ADD, t->base,
                                      rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->p, ti),
                                                 rt_kir_int(a, tl))));
            rt_kir_expr *end = rt_kir_bin(a, RT_KIR_ADD, base, rt_kir_int(a, tl));
            t->end = exact ? end
                           : rt_gen_let(l, blk, rt_arena_printf(a, "%s_e%d", name, (int)lv),
                                        rt_kir_bin(a, RT_KIR_MIN, end, t->end));
            t->base = base;
            t->exact = exact;
        }
    }
    // Point loops in the statement's order; vloops read their bounds here.
    bool by_rows = window && packed && pk.yv >= 0;
    for (int32_t i = 0; i < nk; i++) {
        rt_tvar *t = &tv[i];
        rt_kir_expr *lo = t->base, *hi = t->end;
        if (!t->tiled)
            RT_TRY(rt_tr_loops_range(l, t->v, &lo, &hi));
        if (window && i == nk - (by_rows ? 2 : 1)) {
            rt_kir_expr *xlo = tv[nk - 1].base, *xhi = tv[nk - 1].end;
            if (!tv[nk - 1].tiled)
                RT_TRY(rt_tr_loops_range(l, tv[nk - 1].v, &xlo, &xhi));
            if (!by_rows)
                lo = hi = NULL;
            return rt_lower_window(l, blk, packed ? &pk : NULL, lo, hi, tv[nk - 1].v, xlo, xhi);
        }
        l->var_of[t->v] = rt_kir_add_var(a, l->p, t->name, RT_KIR_I64);
        bool innermost = i == nk - 1 && nr == 0;
        rt_kir_node *loop = rt_kir_loop(a, blk, l->var_of[t->v], lo, hi,
                                        innermost ? RT_KIR_LOOP_VECTOR : RT_KIR_LOOP_SERIAL);
        RT_LOWER_CHECK(l, loop);
        if (!loop)
            return RT_OK;
        blk = &loop->body;
    }
    return rt_lower_element(l, blk, red, nr);
}

// Temporaries of the row-wise group [g0, g1) that need not leave it: written by one statement of
// the group (not accumulated into), by its row, and read only after it and only within the
// group. Each lives in one row per thread at the end of the phase's scratch instead of a full
// array in memory: softmax's e(n, d) then costs no DRAM traffic, where it would double the
// compulsory bytes. Dense f32 rows up to 64 KiB; the phase's scratch grows by their size.
static void rt_group_localize(rt_lower *l, int32_t g0, int32_t g1) {
    const rt_op *op = l->op;
    int64_t base = rt_round_up(l->p->scratch_bytes, 64) / 4;
    for (int32_t si = g0; si < g1; si++) {
        const rt_stmt *w = &op->stmts[si];
        int32_t t = w->out;
        const rt_tensor *tn = &op->tensors[t];
        if (tn->role != RT_ROLE_TEMP || tn->n_dims < 2 || w->op == RT_ASSIGN_ADD ||
            l->k->bufs[l->data_buf[t]].type != RT_KIR_F32 || tn->has_pad)
            continue;
        int64_t row = 1;
        for (int32_t d = 0; d < tn->n_dims; d++)
            if (l->start_buf[t][d] >= 0 || l->extent[t][d] < 1)
                row = -1;
        for (int32_t d = 1; d < tn->n_dims && row > 0; d++)
            row *= l->extent[t][d];
        bool ok = row > 0 && row <= 16384;
        for (int32_t j = 0; j < op->n_stmts && ok; j++) {
            bool first_ok = true;
            if (j != si && op->stmts[j].out == t)
                ok = false;
            else if (rt_perf_cpu_reads_tensor(op->stmts[j].rhs, t, 0, &first_ok) &&
                     (j <= si || j >= g1))
                ok = false;
        }
        if (!ok)
            continue;
        l->local_base[t] = base;
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
        const char *what =
            rt_arena_printf(l->a, "statement%s %d%s%s", j - i > 1 ? "s" : "", (int)i,
                            j - i > 1 ? rt_arena_printf(l->a, "-%d", (int)(j - 1)) : "",
                            j - i > 1 ? " fused row-wise" : "");
        l->p = rt_kir_add_phase(l->a, l->k, what ? what : "statement", outer ? hi - lo : 1);
        if (!l->p)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (j - i > 1 && outer)
            rt_group_localize(l, i, j);
        for (int32_t si = i; si < j; si++) {
            const rt_stmt *s = &op->stmts[si];
            RT_TRY(rt_lower_begin_stmt(l, s));
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
// The packed GEMM path
// ---------------------------------------------------------------------------------------------

typedef struct rt_gemm {
    int32_t stmt;
    int32_t ta, tb; // tensors: A holds the M vars, B the N vars
    int64_t M, N, K;
    int64_t am, ak, bk, bn, cm; // flat strides (cn == 1)
    double alpha;
    int32_t m_var, n_var, k_var; // last (innermost) var of each group, for the rTile lookup
    int32_t mr, nr, kc, mc, nc;
    int64_t ng;    // n groups: a work item is one mc row block x a run of nc blocks
    int64_t batch; // independent GEMMs (implicit: product of the batch var extents)
    // Implicit GEMM (a contraction over affine reads, e.g. a convolution): the packs gather
    // A and B through the reads themselves (pad value outside the extents), decomposing the flat
    // m, n, k of a block into the statement vars of each group (outer first).
    bool implicit;
    const rt_expr *ra, *rb; // the reads holding the m and the n vars
    int32_t gvar[4][8];     // groups: RT_GEMM_G_M, _N, _K, _BATCH
    int32_t n_gvar[4];
    int64_t ccoef[16]; // flat offset coefficient of each statement var in C
} rt_gemm;

enum { RT_GEMM_G_M, RT_GEMM_G_N, RT_GEMM_G_K, RT_GEMM_G_BATCH };

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

// rhs = product of exactly two f32 reads and numeric constants.
static bool rt_gemm_factors(const rt_expr *e, const rt_expr **reads, int32_t *n, double *alpha) {
    if (e->kind == RT_EXPR_NUM) {
        *alpha *= e->num;
        return true;
    }
    if (e->kind == RT_EXPR_READ) {
        if (*n >= 2)
            return false;
        reads[(*n)++] = e;
        return true;
    }
    if (e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_MUL)
        return rt_gemm_factors(e->args[0], reads, n, alpha) &&
               rt_gemm_factors(e->args[1], reads, n, alpha);
    if (e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_DIV && e->args[1]->kind == RT_EXPR_NUM &&
        e->args[1]->num != 0) {
        *alpha /= e->args[1]->num;
        return rt_gemm_factors(e->args[0], reads, n, alpha);
    }
    return false;
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

static bool rt_gemm_detect(const rt_lower *l, int32_t si, rt_gemm *g) {
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
    if (!rt_gemm_factors(s->rhs, reads, &n, &g->alpha) || n != 2)
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
// var is read by exactly one of them. The read holding C's innermost var is B (n: the stored
// vars of B that flatten into C's unit-stride suffix); the other's stored vars are m (they must
// flatten in C too); B's other stored vars (a batch, like n of NCHW) index independent GEMMs.
// A convolution O(n, f, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) * W(f, c, r, s) becomes
// batch n, M = f, N = (y, x), K = (c, r, s). Depthwise (c stored and read by both) is not one.
static bool rt_gemm_detect_implicit(const rt_lower *l, int32_t si, rt_gemm *g) {
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
    if (!rt_gemm_factors(s->rhs, reads, &n, &g->alpha) || n != 2 || reads[0]->tensor == s->out ||
        reads[1]->tensor == s->out)
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
        } else if (!in_c[v] || ua[v] == ub[v]) {
            return false;
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
static bool rt_gemm_blocking(rt_lower *l, rt_gemm *g) {
    const rt_perf_cpu_plan *pl = &l->rp->cpu;
    const rt_perf_cpu_gemm *v = &pl->gemm;
    if (pl->kind != RT_PERF_CPU_PLAN_GEMM || v->M != g->M || v->N != g->N || v->K != g->K ||
        v->batch != g->batch || v->implicit != g->implicit)
        return false;
    g->mr = (int32_t)v->mr, g->nr = (int32_t)v->nr, g->kc = (int32_t)v->kc;
    g->mc = (int32_t)v->mc, g->nc = (int32_t)v->nc, g->ng = v->ng;
    return true;
}

// The plan the packed GEMM executes (the header's "plan:" line): the blocking of g, the shape
// detected here, the micro-kernel's vector length.
static void rt_gemm_executed(rt_lower *l, const rt_gemm *g) {
    rt_perf_cpu_plan *pl = &l->done;
    memset(pl, 0, sizeof *pl);
    pl->kind = RT_PERF_CPU_PLAN_GEMM;
    pl->uk_lanes = l->rp->cpu.uk_lanes;
    rt_perf_cpu_gemm *v = &pl->gemm;
    v->M = g->M, v->N = g->N, v->K = g->K, v->batch = g->batch;
    v->mr = g->mr, v->nr = g->nr, v->kc = g->kc, v->mc = g->mc, v->nc = g->nc, v->ng = g->ng;
    v->implicit = g->implicit;
    v->b_prefetch = !g->implicit && g->bn == 1;
}

static rt_kir_expr *rt_v(rt_lower *l, int32_t var) {
    return rt_kir_var_ref(l->a, l->p, var);
}
static rt_kir_expr *rt_i(rt_lower *l, int64_t v) {
    return rt_kir_int(l->a, v);
}
static rt_kir_expr *rt_b(rt_lower *l, rt_kir_bop op, rt_kir_expr *x, rt_kir_expr *y) {
    return rt_kir_bin(l->a, op, x, y);
}
static void rt_let(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *v) {
    rt_kir_node *n = rt_kir_append(l->a, blk, RT_KIR_N_LET);
    RT_LOWER_CHECK(l, n && v);
    if (n) {
        n->var = var;
        n->value = v;
    }
}

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
                                int64_t s_k, double alpha, rt_kir_expr *dst0, const int32_t *vars) {
    rt_arena *a = l->a;
    int32_t vp = vars[0], vk = vars[1], vr = vars[2], vrow = vars[3];
    rt_kir_node *lp = rt_kir_loop(a, blk, vp, plo, phi, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lp);
    if (!lp)
        return;
    if (!guarded && s_k == 1 && s_row != 1 && w <= RT_PERF_CPU_MAX_INTERLEAVE) {
        // Source rows contiguous along k (A of a row-major GEMM, conv weights): the k loop
        // runs in vector lanes with the w rows unrolled in its body, so each row is read with
        // plain vector loads and the w-way interleave is done with shuffles, instead of a
        // w-element gather at stride s_row per k. LLVM interleaves at most 8 ways: taller
        // panels (mr = 12) became scatters, slower than the gathers below (12x32 on
        // 256x256x256, one Zen 4 core: 357 us scattered, 344 gathered, 301 for 4x64).
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
                 rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vp), rt_i(l, (int64_t)w * s_row)),
                      rt_v(l, vk)));
        for (int32_t r = 0; r < w; r++) {
            rt_kir_expr *v =
                rt_kir_load(a, l->k, src, rt_b(l, RT_KIR_ADD, srow, rt_i(l, (int64_t)r * s_row)));
            if (alpha != 1.0)
                v = rt_b(l, RT_KIR_MUL, v, rt_kir_flt(a, RT_KIR_F32, alpha));
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
                             rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vrow), rt_i(l, s_row)),
                                  rt_b(l, RT_KIR_MUL, rt_v(l, vk), rt_i(l, s_k))));
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
static void rt_gemm_pack(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                         rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                         int64_t s_row, int64_t s_k, double alpha, rt_kir_expr *dst0) {
    rt_arena *a = l->a;
    rt_kir_node *copy = rt_gemm_copy_node(l, blk, what);
    if (!copy)
        return;
    int32_t vars[4] = {
        rt_kir_add_var(a, l->p, "panel", RT_KIR_I64), rt_kir_add_var(a, l->p, "kk", RT_KIR_I64),
        rt_kir_add_var(a, l->p, "r", RT_KIR_I64), rt_kir_add_var(a, l->p, "row", RT_KIR_I64)};
    rt_kir_expr *full = rt_b(l, RT_KIR_DIV, valid, rt_i(l, w));
    rt_kir_expr *all = rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, valid, rt_i(l, w - 1)), rt_i(l, w));
    rt_gemm_pack_panels(l, &copy->body, w, rt_i(l, 0), full, false, valid, kcur, src, base, s_row,
                        s_k, alpha, dst0, vars);
    rt_gemm_pack_panels(l, &copy->body, w, full, all, true, valid, kcur, src, base, s_row, s_k,
                        alpha, dst0, vars);
}

// Binds the statement vars vars[0..n) (outer first, each over [0, hi)) to the digits of the
// flat index x in blk: v_i = x / (product of the later extents) mod hi_i.
static void rt_gemm_unflatten(rt_lower *l, rt_kir_block *blk, rt_kir_expr *x, const int32_t *vars,
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
static rt_status rt_gemm_pack_affine(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                                     rt_kir_expr *valid, rt_kir_expr *kcur, const rt_expr *rd,
                                     const int32_t *rows, int32_t n_rows, const int32_t *ks,
                                     int32_t n_ks, rt_kir_expr *row0, rt_kir_expr *k0, double alpha,
                                     rt_kir_expr *dst0) {
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
static bool rt_gemm_seg_dim(const rt_lower *l, const rt_expr *rd, int32_t x, int32_t *dx,
                            int64_t *sx) {
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
static rt_status rt_gemm_pack_segments(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                                       rt_kir_expr *valid, rt_kir_expr *kcur, const rt_expr *rd,
                                       const int32_t *rows, int32_t n_rows, const int32_t *ks,
                                       int32_t n_ks, rt_kir_expr *row0, rt_kir_expr *k0,
                                       double alpha, rt_kir_expr *dst0, int32_t dx, int64_t sx) {
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

// Masked packing of an implicit GEMM operand whose rows are contiguous in the source: the rows
// vars flatten into the read's offset with unit stride, as the output pixels (y, x) of a stride-1
// convolution with 'same' padding do in each input plane. Row j of k is then src[o(k) + j] where
// it is inside the extents and the pad value elsewhere, so each w-row panel of a k is one vector
// loop of masked loads at consecutive addresses, with no per-segment bounds arithmetic. Which
// lanes are inside is tested against a table of the rows' part of every index that moves with
// the rows (float, exact since every index stays below 2^22), with bounds computed once per k.
typedef struct rt_gemm_mask {
    int32_t n_dims;            // dims of the read with a rows term, tested per lane
    int32_t dim[RT_MAX_DIMS];  // in the order of their tables
    rt_affine af[RT_MAX_DIMS]; // affine form of every index of the read
} rt_gemm_mask;

static bool rt_gemm_mask_plan(const rt_lower *l, const rt_expr *rd, const int32_t *rows,
                              int32_t n_rows, rt_gemm_mask *mp) {
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
static rt_status rt_gemm_pack_masked(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                                     rt_kir_expr *valid, rt_kir_expr *kcur, const rt_expr *rd,
                                     const rt_gemm_mask *mp, const int32_t *rows, int32_t n_rows,
                                     const int32_t *ks, int32_t n_ks, rt_kir_expr *row0,
                                     rt_kir_expr *k0, double alpha, rt_kir_expr *dst0, int64_t tbl0,
                                     int64_t tbl_stride) {
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

// An elementwise statement right after a plain GEMM C(m, n) (+)= A * B that reads C only as
// C(p, q) over exactly the GEMM's rows p in [0, M) and columns q in [0, N), such as the bias and
// activation of a linear layer: Y(m, n) = gelu(t(m, n) + bias(n)). It is fused into the
// micro-kernel's store on the last k block (rt_kir_ukernel's epilogue), so C's final values are
// never written and read back by a separate pass; C is still stored where something else
// reads it (an output, a later statement).
typedef struct rt_gemm_epi {
    int32_t stmt; // the fused statement, -1 when none
    int32_t p, q; // its vars over the rows and the columns
    bool keep_c;
} rt_gemm_epi;

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

static bool rt_gemm_epi_detect(const rt_lower *l, const rt_gemm *g, rt_gemm_epi *epi) {
    const rt_op *op = l->op;
    const rt_stmt *s = &op->stmts[g->stmt];
    int32_t si = g->stmt + 1, t = s->out;
    int64_t lo, hi;
    epi->stmt = -1;
    epi->p = epi->q = -1;
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
    rt_epi_ctx ec = {l->op->stmts[g->stmt].out, u->epi_acc};
    rt_lx x = rt_tr_ctx(l);
    x.ops = &rt_tr_ops_epi;
    x.user = &ec;
    rt_kir_expr *value;
    RT_TRY(rt_tr_done(l, &x, rt_lx_num(&x, s2->rhs, &value)));
    rt_kir_expr *idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < s2->n_lhs; d++) {
        int32_t v = s2->lhs_vars[d];
        if (v != epi->p && v != epi->q)
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
    rt_let(l, blk, *vpn,
           rt_b(l, RT_KIR_ADD, rt_v(l, vp0), rt_kir_select(a, last, rt_i(l, g->kc), rt_i(l, 0))));
}

// Then in panel, the body of the row panel loop (var ir), its share of the lines.
static void rt_gemm_prefetch_next_b(rt_lower *l, const rt_gemm *g, rt_kir_block *panel, int32_t vir,
                                    int32_t buf_b, int32_t vjn, int32_t vpn) {
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

static rt_status rt_lower_gemm(rt_lower *l, const rt_gemm *g, const rt_gemm_epi *epi) {
    rt_arena *a = l->a;
    const rt_stmt *s = &l->op->stmts[g->stmt];
    int64_t mt = rt_ceil_div(g->M, g->mc), ntl = rt_ceil_div(g->N, g->nc);
    // Work item = one mc row block x a run of bpg column blocks: A is packed once per (mc, kc)
    // and reused across the run (BLIS order pc -> jc inside the item), B once per (kc, nc). The
    // column blocks are the nc blocks of every batch entry, batch-major (nblk of them): A holds
    // no batch var, so a run over several entries packs it once for all of them. The number of
    // runs is the model's (rt_perf_cpu_gemm_block).
    int64_t nblk = g->batch * ntl;
    int64_t ng = g->ng > 0 && g->ng <= nblk ? g->ng : nblk;
    int64_t bpg = rt_ceil_div(nblk, ng);
    ng = rt_ceil_div(nblk, bpg);
    const char *what = rt_arena_printf(a,
                                       "statement %d: packed GEMM %lldx%lldx%lld, blocks "
                                       "mc=%d nc=%d kc=%d, micro-kernel %dx%d",
                                       (int)g->stmt, (long long)g->M, (long long)g->N,
                                       (long long)g->K, g->mc, g->nc, g->kc, g->mr, g->nr);
    if (g->implicit)
        what = rt_arena_printf(a,
                               "statement %d: implicit GEMM %lld x %lldx%lldx%lld (gathered "
                               "packs), blocks mc=%d nc=%d kc=%d, micro-kernel %dx%d",
                               (int)g->stmt, (long long)g->batch, (long long)g->M, (long long)g->N,
                               (long long)g->K, g->mc, g->nc, g->kc, g->mr, g->nr);
    l->p = rt_kir_add_phase(a, l->k, what ? what : "gemm", mt * ng);
    if (!l->p)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    l->done.gemm.ng = ng;
    l->done.gemm.items = mt * ng;
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
    bool batched = g->implicit && g->n_gvar[RT_GEMM_G_BATCH] > 0;
    int32_t vcb = batched ? rt_kir_add_var(a, p, "cb", RT_KIR_I64) : vjb;
    rt_kir_block *body = &p->body;
    rt_kir_expr *item = rt_v(l, p->item_var);
    rt_kir_expr *c_batch = rt_i(l, 0);
    rt_let(l, body, vi0,
           rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_MOD, item, rt_i(l, mt)), rt_i(l, g->mc)));
    rt_let(l, body, vmc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->mc), rt_b(l, RT_KIR_SUB, rt_i(l, g->M), rt_v(l, vi0))));
    rt_kir_expr *jb_lo = rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_DIV, item, rt_i(l, mt)), rt_i(l, bpg));
    rt_kir_node *lk = rt_kir_loop(a, body, vpk, rt_i(l, 0), rt_i(l, rt_ceil_div(g->K, g->kc)),
                                  RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lk);
    if (!lk)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_block *kb = &lk->body;
    rt_let(l, kb, vp0, rt_b(l, RT_KIR_MUL, rt_v(l, vpk), rt_i(l, g->kc)));
    rt_let(l, kb, vkc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->kc), rt_b(l, RT_KIR_SUB, rt_i(l, g->K), rt_v(l, vp0))));
    int32_t buf_a = l->data_buf[g->ta], buf_b = l->data_buf[g->tb], buf_c = l->data_buf[s->out];
    // A block (mcur x kcur) as mr-tall panels (alpha folded in) once per k block, then for each
    // nc block of the run the B block (kcur x ncur) as nr-wide panels after it.
    // Segmented packs where the rows' innermost var moves along one dim of the read, else the
    // per-element gather (implicit GEMMs).
    int32_t dxb, dxa;
    int64_t sxb, sxa;
    const int32_t *nvars = g->gvar[RT_GEMM_G_N], *mvars = g->gvar[RT_GEMM_G_M];
    int32_t nn = g->n_gvar[RT_GEMM_G_N], nm = g->n_gvar[RT_GEMM_G_M];
    int64_t srow, sk;
    rt_kir_expr *pbase;
    if (g->implicit) {
        if (rt_gemm_plain_read(l, g, g->ra, mvars, nm, &srow, &sk, &pbase))
            rt_gemm_pack(
                l, kb, "A block -> scratch, mr-tall k-major panels (L3 level; one in L1 at a time)",
                g->mr, rt_v(l, vmc), rt_v(l, vkc), buf_a,
                rt_b(l, RT_KIR_ADD, pbase,
                     rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vi0), rt_i(l, srow)),
                          rt_b(l, RT_KIR_MUL, rt_v(l, vp0), rt_i(l, sk)))),
                srow, sk, g->alpha, rt_i(l, 0));
        else if (masked_a)
            RT_TRY(rt_gemm_pack_masked(l, kb,
                                       "A block -> scratch, mr-tall k-major panels of masked "
                                       "contiguous rows (L3 level; one in L1 at a time)",
                                       g->mr, rt_v(l, vmc), rt_v(l, vkc), g->ra, &mask_a, mvars, nm,
                                       g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], rt_v(l, vi0),
                                       rt_v(l, vp0), g->alpha, rt_i(l, 0), tbl_a, rows_a));
        else if (rt_gemm_seg_dim(l, g->ra, mvars[nm - 1], &dxa, &sxa))
            RT_TRY(rt_gemm_pack_segments(l, kb,
                                         "A block -> scratch, mr-tall k-major panels "
                                         "copied by row segments (L3 level; one in L1 at a time)",
                                         g->mr, rt_v(l, vmc), rt_v(l, vkc), g->ra, mvars, nm,
                                         g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], rt_v(l, vi0),
                                         rt_v(l, vp0), g->alpha, rt_i(l, 0), dxa, sxa));
        else
            RT_TRY(rt_gemm_pack_affine(l, kb,
                                       "A block -> scratch, gathered mr-tall k-major "
                                       "panels (L3 level; one in L1 at a time)",
                                       g->mr, rt_v(l, vmc), rt_v(l, vkc), g->ra, mvars, nm,
                                       g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], rt_v(l, vi0),
                                       rt_v(l, vp0), g->alpha, rt_i(l, 0)));
    } else {
        rt_gemm_pack(l, kb,
                     "A block -> scratch, mr-tall k-major panels (L3 level; one in L1 at a time)",
                     g->mr, rt_v(l, vmc), rt_v(l, vkc), buf_a,
                     rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vi0), rt_i(l, g->am)),
                          rt_b(l, RT_KIR_MUL, rt_v(l, vp0), rt_i(l, g->ak))),
                     g->am, g->ak, g->alpha, rt_i(l, 0));
    }
    rt_kir_node *lb =
        rt_kir_loop(a, kb, vcb, jb_lo,
                    rt_b(l, RT_KIR_MIN, rt_i(l, nblk), rt_b(l, RT_KIR_ADD, jb_lo, rt_i(l, bpg))),
                    RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lb);
    if (!lb)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_block *jbb = &lb->body;
    if (batched) {
        // Column block cb = batch index x ntl + nc block; the batch vars index C and B directly.
        rt_let(l, jbb, vjb, rt_b(l, RT_KIR_MOD, rt_v(l, vcb), rt_i(l, ntl)));
        rt_gemm_unflatten(l, jbb, rt_b(l, RT_KIR_DIV, rt_v(l, vcb), rt_i(l, ntl)),
                          g->gvar[RT_GEMM_G_BATCH], g->n_gvar[RT_GEMM_G_BATCH]);
        for (int32_t i = 0; i < g->n_gvar[RT_GEMM_G_BATCH]; i++) {
            int32_t v = g->gvar[RT_GEMM_G_BATCH][i];
            c_batch = rt_b(l, RT_KIR_ADD, c_batch,
                           rt_b(l, RT_KIR_MUL, rt_v(l, l->var_of[v]), rt_i(l, g->ccoef[v])));
        }
    }
    rt_let(l, jbb, vj0, rt_b(l, RT_KIR_MUL, rt_v(l, vjb), rt_i(l, g->nc)));
    rt_let(l, jbb, vnc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->nc), rt_b(l, RT_KIR_SUB, rt_i(l, g->N), rt_v(l, vj0))));
    if (g->implicit) {
        if (rt_gemm_plain_read(l, g, g->rb, nvars, nn, &srow, &sk, &pbase))
            rt_gemm_pack(l, jbb, "B block -> scratch, nr-wide k-major panels (L2 level)", g->nr,
                         rt_v(l, vnc), rt_v(l, vkc), buf_b,
                         rt_b(l, RT_KIR_ADD, pbase,
                              rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vj0), rt_i(l, srow)),
                                   rt_b(l, RT_KIR_MUL, rt_v(l, vp0), rt_i(l, sk)))),
                         srow, sk, 1.0, rt_i(l, a_elems));
        else if (masked_b)
            RT_TRY(rt_gemm_pack_masked(l, jbb,
                                       "B block -> scratch, nr-wide k-major panels of masked "
                                       "contiguous rows (L2 level)",
                                       g->nr, rt_v(l, vnc), rt_v(l, vkc), g->rb, &mask_b, nvars, nn,
                                       g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], rt_v(l, vj0),
                                       rt_v(l, vp0), 1.0, rt_i(l, a_elems), tbl_b, rows_b));
        else if (rt_gemm_seg_dim(l, g->rb, nvars[nn - 1], &dxb, &sxb))
            RT_TRY(rt_gemm_pack_segments(l, jbb,
                                         "B block -> scratch, nr-wide k-major panels "
                                         "copied by row segments (L2 level)",
                                         g->nr, rt_v(l, vnc), rt_v(l, vkc), g->rb, nvars, nn,
                                         g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], rt_v(l, vj0),
                                         rt_v(l, vp0), 1.0, rt_i(l, a_elems), dxb, sxb));
        else
            RT_TRY(rt_gemm_pack_affine(l, jbb,
                                       "B block -> scratch, gathered nr-wide k-major "
                                       "panels (L2 level)",
                                       g->nr, rt_v(l, vnc), rt_v(l, vkc), g->rb, nvars, nn,
                                       g->gvar[RT_GEMM_G_K], g->n_gvar[RT_GEMM_G_K], rt_v(l, vj0),
                                       rt_v(l, vp0), 1.0, rt_i(l, a_elems)));
    } else {
        rt_gemm_pack(l, jbb, "B block -> scratch, nr-wide k-major panels (L2 level)", g->nr,
                     rt_v(l, vnc), rt_v(l, vkc), buf_b,
                     rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vj0), rt_i(l, g->bn)),
                          rt_b(l, RT_KIR_MUL, rt_v(l, vp0), rt_i(l, g->bk))),
                     g->bn, g->bk, 1.0, rt_i(l, a_elems));
    }
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
    rt_kir_node *li = rt_kir_loop(
        a, jbb, vip, rt_i(l, 0),
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, rt_v(l, vmc), rt_i(l, g->mr - 1)), rt_i(l, g->mr)),
        RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, li);
    if (!li)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (pf_next)
        rt_gemm_prefetch_next_b(l, g, &li->body, vip, buf_b, vjn, vpn);
    rt_kir_node *lj = rt_kir_loop(
        a, &li->body, vjp, rt_i(l, 0),
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, rt_v(l, vnc), rt_i(l, g->nr - 1)), rt_i(l, g->nr)),
        RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lj);
    if (!lj)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_node *u = rt_kir_append(a, &lj->body, RT_KIR_N_UKERNEL);
    RT_LOWER_CHECK(l, u);
    if (!u)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_expr *rows = rt_b(l, RT_KIR_MUL, rt_v(l, vip), rt_i(l, g->mr));
    rt_kir_expr *cols = rt_b(l, RT_KIR_MUL, rt_v(l, vjp), rt_i(l, g->nr));
    u->uk.mr = g->mr;
    u->uk.nr = g->nr;
    u->uk.vl = (int32_t)l->rp->cpu.uk_lanes;
    u->uk.kc = rt_v(l, vkc);
    u->uk.a_off = rt_b(l, RT_KIR_MUL, rows, rt_v(l, vkc));
    u->uk.b_off = rt_b(l, RT_KIR_ADD, rt_i(l, a_elems), rt_b(l, RT_KIR_MUL, cols, rt_v(l, vkc)));
    u->uk.c_buf = buf_c;
    u->uk.c_off = rt_b(l, RT_KIR_ADD,
                       rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, rt_v(l, vi0), rows), rt_i(l, g->cm)),
                       rt_b(l, RT_KIR_ADD, rt_v(l, vj0), cols));
    if (g->implicit)
        u->uk.c_off = rt_b(l, RT_KIR_ADD, c_batch, u->uk.c_off);
    u->uk.ldc = g->cm;
    u->uk.m_valid = rt_b(l, RT_KIR_MIN, rt_i(l, g->mr), rt_b(l, RT_KIR_SUB, rt_v(l, vmc), rows));
    u->uk.n_valid = rt_b(l, RT_KIR_MIN, rt_i(l, g->nr), rt_b(l, RT_KIR_SUB, rt_v(l, vnc), cols));
    u->uk.accumulate = s->op == RT_ASSIGN_ADD ? rt_i(l, 1)
                       : g->K <= g->kc        ? rt_i(l, 0)
                                              : rt_b(l, RT_KIR_GT, rt_v(l, vpk), rt_i(l, 0));
    // Streaming stores: a single k block overwriting a C over half the largest cache (it
    // would evict most of it and is not read back by this phase).
    int64_t cache_bytes = rt_largest_cache_bytes(l->dev);
    u->uk.stream = s->op == RT_ASSIGN_ADD_INIT && g->K <= g->kc && g->cm % 16 == 0 &&
                   cache_bytes > 0 && epi->stmt < 0 &&
                   4.0 * (double)g->batch * (double)g->M * (double)g->N > 0.5 * (double)cache_bytes;
    RT_LOWER_CHECK(l, u->uk.kc && u->uk.a_off && u->uk.b_off && u->uk.c_off && u->uk.m_valid &&
                          u->uk.n_valid && u->uk.accumulate);
    if (epi->stmt >= 0) {
        u->uk.epi_row0 = rt_b(l, RT_KIR_ADD, rt_v(l, vi0), rows);
        u->uk.epi_col0 = rt_b(l, RT_KIR_ADD, rt_v(l, vj0), cols);
        u->uk.epi_last = rt_b(l, RT_KIR_EQ, rt_v(l, vpk), rt_i(l, rt_ceil_div(g->K, g->kc) - 1));
        RT_LOWER_CHECK(l, u->uk.epi_row0 && u->uk.epi_col0 && u->uk.epi_last);
        RT_TRY(rt_gemm_epi_lower(l, g, epi, &u->uk));
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

rt_status rt_lower_cpu(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_model *m,
                       const rt_rprog *p, const rt_lower_options *opt, rt_kir_kernel **out,
                       rt_err *err) {
    bool naive = (opt && opt->naive) || !p || !m;
    rt_lower l;
    memset(&l, 0, sizeof l);
    l.a = a;
    l.op = op;
    l.err = err;
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
    }
    rt_gemm g;
    int32_t main_stmt = m ? m->main_stmt : -1;
    if (!naive)
        l.done.kind = RT_PERF_CPU_PLAN_NEST;
    bool gemm = !naive && !trees && main_stmt >= 0 && p->cpu.kind == RT_PERF_CPU_PLAN_GEMM;
    if (gemm && !(rt_gemm_detect(&l, main_stmt, &g) || rt_gemm_detect_implicit(&l, main_stmt, &g)))
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
        rt_gemm_epi epi;
        rt_gemm_epi_detect(&l, &g, &epi);
        RT_TRY(rt_lower_gemm(&l, &g, &epi));
        RT_TRY(rt_lower_general(&l, main_stmt + 1 + (epi.stmt >= 0), op->n_stmts, true));
        l.k->flops = 2.0 * (double)g.batch * (double)g.M * (double)g.N * (double)g.K;
        l.k->compute_bound = true;
        // The random-vector check needs plain strides: an implicit GEMM has none.
        l.k->gemm = (rt_kir_contraction){!g.implicit, g.ta,
                                         g.tb,        op->stmts[main_stmt].out,
                                         g.M,         g.N,
                                         g.K,         g.am,
                                         g.ak,        g.bk,
                                         g.bn,        g.cm,
                                         g.alpha,     op->stmts[main_stmt].op == RT_ASSIGN_ADD};
    } else {
        RT_TRY(rt_lower_general(&l, 0, op->n_stmts, !naive));
        l.k->flops = p ? p->flops : 0.0;
    }
    if (l.oom || (!naive && (!rt_kir_fuse_loops(a, l.k) || !rt_kir_hoist_reciprocals(a, l.k))))
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_lower_header(&l, dev, naive ? NULL : m, naive ? NULL : p, opt);
    RT_TRY(rt_kir_validate(l.k, err));
    *out = l.k;
    return RT_OK;
}
