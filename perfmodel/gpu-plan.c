// gpu-plan.c: the GPU plan of an rProgram (gpu-plan.h): phases, their modes, grid dims, block
// and register tiles, staged reads and their shared arrays, block order and unrolling.
#include "gpu-plan.h"
#include "spec-eval.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ORDER rt_gpu_mode
static const char *const rt_gpu_mode_names[] = {"direct", "regtile", "staged", "tree", "rows"};
_Static_assert(sizeof rt_gpu_mode_names / sizeof rt_gpu_mode_names[0] == RT_GPU_MODE_COUNT,
               "ORDER rt_gpu_mode");

const char *rt_gpu_mode_name(rt_gpu_mode m) {
    return m >= 0 && m < RT_GPU_MODE_COUNT ? rt_gpu_mode_names[m] : "?";
}

typedef struct rt_gp {
    rt_arena *a;
    const rt_op *op;
    const rt_device *dev;
    const rt_perf_model *m; // NULL: naive
    const rt_rprog *p;
    rt_err *err;
    bool oom;
} rt_gp;

static rt_status rt_gp_unsupported(rt_gp *g, rt_loc loc, const char *what) {
    return rt_fail(g->err, RT_ERR_BACKEND, loc, "%s is not supported by the GPU backend", what);
}

// ---------------------------------------------------------------------------------------------
// Expression tests
// ---------------------------------------------------------------------------------------------

// True when statement s starts with the LHS vars of t (same names and ranges, in order).
static bool rt_gp_same_prefix(const rt_stmt *t, const rt_stmt *s) {
    if (s->n_lhs < t->n_lhs)
        return false;
    for (int32_t i = 0; i < t->n_lhs; i++) {
        if (t->lhs_vars[i] != i || s->lhs_vars[i] != i)
            return false;
        const rt_ivar *a = &t->vars[i], *b = &s->vars[i];
        if (strcmp(a->name, b->name) != 0 || !rt_expr_equal(a->lo, b->lo) ||
            !rt_expr_equal(a->hi, b->hi))
            return false;
    }
    return true;
}

// Every read of a tensor in written[] is at the first n vars (the thread's own element).
static bool rt_gp_reads_at_prefix(const rt_expr *e, const bool *written, int32_t n) {
    if (!e)
        return true;
    if (e->kind == RT_EXPR_READ && written[e->tensor]) {
        if (e->n_args < n)
            return false;
        for (int32_t d = 0; d < n; d++)
            if (e->args[d]->kind != RT_EXPR_INDEX || e->args[d]->var != d)
                return false;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (!rt_gp_reads_at_prefix(e->args[i], written, n))
            return false;
    return true;
}

static bool rt_gp_is_read_of(const rt_expr *e, const void *t) {
    return e->kind == RT_EXPR_READ && e->tensor == *(const int32_t *)t;
}
static bool rt_gp_reads_tensor(const rt_expr *e, int32_t t) {
    return rt_expr_any(e, rt_gp_is_read_of, &t);
}

static bool rt_gp_is_sum(const rt_expr *e, const void *unused) {
    (void)unused;
    return e->kind == RT_EXPR_SUM;
}
static bool rt_gp_has_sum(const rt_expr *e) {
    return rt_expr_any(e, rt_gp_is_sum, NULL);
}

// Does expression e mention index var v (directly)?
static bool rt_gp_is_var(const rt_expr *e, const void *v) {
    return e->kind == RT_EXPR_INDEX && e->var == *(const int32_t *)v;
}
static bool rt_gp_mentions_var(const rt_expr *e, int32_t v) {
    return rt_expr_any(e, rt_gp_is_var, &v);
}

// ---------------------------------------------------------------------------------------------
// Grid dims and tiles
// ---------------------------------------------------------------------------------------------

static void rt_gp_dim_finish(rt_gpu_dim *d) {
    if (d->T1 < 1)
        d->T1 = 1;
    if (d->R < 1)
        d->R = 1;
    if (d->R > d->T1)
        d->R = d->T1;
    d->nt = rt_ceil_div(d->T1, d->R);
    d->T1 = d->nt * d->R;
    d->nb = d->ragged ? 0 : rt_ceil_div(d->extent, d->T1);
    if (!d->ragged && d->nb < 1)
        d->nb = 1;
}

// A dense dim of vars[] (all with constant ranges) or a ragged dim of one var.
static bool rt_gp_dim_make(const rt_op *op, const rt_stmt *s, const int32_t *vars, int32_t n,
                           int64_t T1, int64_t R, rt_gpu_dim *d) {
    memset(d, 0, sizeof *d);
    d->extent = 1;
    d->T1 = T1;
    d->R = R;
    for (int32_t k = 0; k < n; k++) {
        const rt_ivar *iv = &s->vars[vars[k]];
        int64_t lo, hi;
        d->members[d->n_members] = vars[k];
        if (iv->lo && iv->hi && rt_expr_const_int(op, iv->lo, &lo) &&
            rt_expr_const_int(op, iv->hi, &hi)) {
            d->mlo[d->n_members] = lo;
            d->mext[d->n_members] = hi > lo ? hi - lo : 0;
            d->extent *= d->mext[d->n_members];
        } else {
            if (n != 1)
                return false;
            d->ragged = true;
        }
        d->n_members++;
    }
    rt_gp_dim_finish(d);
    return true;
}

// Spatial dims of tiling statement s from the rProgram: the block-level rTile and the
// thread-level one of each spatial axis of the model's main statement.
static rt_status rt_gp_dims_prog(rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s) {
    const rt_perf_model *m = g->m;
    int32_t bl = m->block_level >= 0 ? m->block_level : 1;
    int32_t tl = m->thread_level;
    for (int32_t x = 0; x < s->n_axes && x < m->n_axes; x++) {
        const rt_axis *ax = &s->axes[x];
        if (ax->is_reduce)
            continue;
        int64_t T1 = g->p->tile[bl].shape[x];
        int64_t R = tl >= 0 ? g->p->tile[tl].shape[x] : 1;
        if (pl->n_dims >= RT_GPU_PLAN_MAX_DIMS)
            return rt_gp_unsupported(g, s->loc, "a statement with this many axes");
        if (rt_gp_dim_make(g->op, s, ax->members, ax->n_members, T1, R, &pl->dims[pl->n_dims])) {
            pl->n_dims++;
            continue;
        }
        // A fused ragged axis: its vloop member takes the tile, the others one per block.
        int32_t last_ragged = -1;
        for (int32_t k = 0; k < ax->n_members; k++)
            if (s->vars[ax->members[k]].ragged)
                last_ragged = k;
        for (int32_t k = 0; k < ax->n_members; k++) {
            if (pl->n_dims >= RT_GPU_PLAN_MAX_DIMS)
                return rt_gp_unsupported(g, s->loc, "a statement with this many axes");
            bool tiled = k == last_ragged;
            if (!rt_gp_dim_make(g->op, s, &ax->members[k], 1, tiled ? T1 : 1, tiled ? R : 1,
                                &pl->dims[pl->n_dims]))
                return rt_gp_unsupported(g, s->loc, "this ragged axis");
            pl->n_dims++;
        }
    }
    return RT_OK;
}

// The naive tiling: the dense vars fused into one dim of up to 256 threads, each ragged var a
// dim of its own.
static rt_status rt_gp_dims_naive(rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s) {
    int32_t dense[RT_MAX_DIMS], nd = 0;
    int64_t ext = 1;
    for (int32_t i = 0; i < s->n_lhs; i++) {
        const rt_ivar *iv = &s->vars[i];
        int64_t lo, hi;
        if (iv->lo && iv->hi && rt_expr_const_int(g->op, iv->lo, &lo) &&
            rt_expr_const_int(g->op, iv->hi, &hi)) {
            dense[nd++] = i;
            ext *= hi > lo ? hi - lo : 0;
        }
    }
    int64_t T1 = rt_min64(256, rt_round_up(rt_max64(ext, 1), 32));
    if (nd > 0 && !rt_gp_dim_make(g->op, s, dense, nd, T1, 1, &pl->dims[pl->n_dims++]))
        return rt_gp_unsupported(g, s->loc, "this statement");
    for (int32_t i = 0; i < s->n_lhs; i++) {
        bool is_dense = false;
        for (int32_t k = 0; k < nd; k++)
            is_dense = is_dense || dense[k] == i;
        if (is_dense)
            continue;
        if (!rt_gp_dim_make(g->op, s, &i, 1, 1, 1, &pl->dims[pl->n_dims++]))
            return rt_gp_unsupported(g, s->loc, "this statement");
    }
    return RT_OK;
}

static rt_status rt_gp_dims(rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s) {
    pl->n_dims = 0;
    RT_TRY(pl->from_prog ? rt_gp_dims_prog(g, pl, s) : rt_gp_dims_naive(g, pl, s));
    if (pl->n_dims == 0) { // a scalar output: one dim of extent 1
        memset(&pl->dims[0], 0, sizeof pl->dims[0]);
        pl->dims[0].extent = 1;
        pl->dims[0].T1 = pl->dims[0].R = 1;
        rt_gp_dim_finish(&pl->dims[0]);
        pl->n_dims = 1;
    }
    int32_t n_ragged = 0;
    pl->threads = 1;
    pl->Rtot = 1;
    pl->blocks = 1;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        rt_gpu_dim *gd = &pl->dims[d];
        gd->grid = gd->ragged ? 1 + n_ragged++ : 0;
        pl->threads *= gd->nt;
        pl->Rtot *= gd->R;
        if (gd->grid == 0)
            pl->blocks *= gd->nb;
    }
    if (n_ragged > 2)
        return rt_gp_unsupported(g, s->loc, "more than two ragged spatial dims");
    if (pl->threads > g->dev->max_threads_per_block && g->dev->max_threads_per_block > 0)
        return rt_fail(g->err, RT_ERR_NOFIT, s->loc,
                       "block of %lld threads exceeds the device (expected at most %d)",
                       (long long)pl->threads, (int)g->dev->max_threads_per_block);
    return RT_OK;
}

// Block-uniform var of the tiling statement: its dim gives one value per block.
static bool rt_gp_uniform_var(const rt_gpu_phase_plan *pl, int32_t v) {
    for (int32_t d = 0; d < pl->n_dims; d++)
        for (int32_t k = 0; k < pl->dims[d].n_members; k++)
            if (pl->dims[d].members[k] == v)
                return pl->dims[d].T1 == 1 && pl->dims[d].n_members == 1;
    return false;
}

// ---------------------------------------------------------------------------------------------
// Staging
// ---------------------------------------------------------------------------------------------

// The data tile of read e under the tile T[] per var, and its shared array (rows padded by the
// bank rule of level lv); false when a dim is not affine in the statement's vars.
static bool rt_gp_stage_read(rt_gp *g, const rt_stmt *s, const rt_expr *e, const int64_t *T,
                             const rt_mem_level *lv, rt_gpu_stage *st) {
    memset(st, 0, sizeof *st);
    st->read = e;
    st->n_dims = e->n_args;
    for (int32_t d = 0; d < e->n_args; d++) {
        if (!rt_expr_affine(g->op, e->args[d], &st->aff[d]))
            return false;
        st->span[d] = 1;
        for (int32_t t = 0; t < st->aff[d].n_terms; t++) {
            int32_t v = st->aff[d].var[t];
            if (v < 0 || v >= s->n_vars)
                return false;
            int64_t c = st->aff[d].coef[t];
            st->span[d] += (c < 0 ? -c : c) * (T[v] - 1);
        }
    }
    int64_t stride = 1;
    for (int32_t d = st->n_dims - 1; d >= 0; d--) {
        int64_t row = st->span[d];
        if (d == st->n_dims - 1 && lv->banks > 0 && lv->bank_bytes > 0)
            row += rt_perf_bank_pad_elems(lv->banks, lv->bank_bytes, 4, st->span[d], 1);
        st->stride[d] = stride;
        stride *= row;
    }
    st->elems = stride;
    return true;
}

// The first and last origin of var v's tile over the blocks (spatial) or reduction steps of
// phase pl — interior: over the blocks and steps whose tile lies inside the range; false when
// v has neither (or, interior, none such).
static bool rt_gp_var_origins(const rt_gp *g, const rt_gpu_phase_plan *pl, const rt_stmt *s,
                              int32_t v, bool interior, int64_t *first, int64_t *last) {
    for (int32_t d = 0; d < pl->n_dims; d++) {
        const rt_gpu_dim *gd = &pl->dims[d];
        if (gd->n_members == 1 && gd->members[0] == v && !gd->ragged) {
            int64_t nb = interior ? gd->extent / gd->T1 : gd->nb;
            *first = gd->mlo[0];
            *last = gd->mlo[0] + (nb - 1) * gd->T1;
            return nb >= 1;
        }
    }
    int64_t lo, hi;
    if (v >= RT_GPU_PLAN_MAX_VARS || pl->red_T1[v] <= 0 ||
        !rt_expr_const_int(g->op, s->vars[v].lo, &lo) ||
        !rt_expr_const_int(g->op, s->vars[v].hi, &hi) || hi <= lo)
        return false;
    int64_t steps = interior ? (hi - lo) / pl->red_T1[v] : rt_ceil_div(hi - lo, pl->red_T1[v]);
    *first = lo;
    *last = lo + (steps - 1) * pl->red_T1[v];
    return steps >= 1;
}

// Whether staged read st's data tile (as the lowering's copy places it: per dim, the origin
// c0 + sum c * (origin of var + (c < 0 ? T - 1 : 0)) and span elements) lies inside its tensor
// for every block and reduction step (interior: every interior block and full step).
static bool rt_gp_stage_full(const rt_gp *g, const rt_gpu_phase_plan *pl, const rt_stmt *s,
                             const int64_t *T, const rt_gpu_stage *st, bool interior) {
    const rt_tensor *tn = &g->op->tensors[st->read->tensor];
    for (int32_t d = 0; d < st->n_dims; d++) {
        int64_t ext;
        if (!tn->dims[d].extent || !rt_expr_const_int(g->op, tn->dims[d].extent, &ext))
            return false;
        int64_t lo_min = st->aff[d].c0, lo_max = st->aff[d].c0;
        for (int32_t t = 0; t < st->aff[d].n_terms; t++) {
            int32_t v = st->aff[d].var[t];
            int64_t c = st->aff[d].coef[t], first, last;
            if (!rt_gp_var_origins(g, pl, s, v, interior, &first, &last))
                return false;
            int64_t adj = c < 0 ? T[v] - 1 : 0;
            int64_t x = c * (first + adj), y = c * (last + adj);
            lo_min += x < y ? x : y;
            lo_max += x < y ? y : x;
        }
        if (lo_min < 0 || lo_max + st->span[d] > ext)
            return false;
    }
    return true;
}

// Whether expression e (a statement's range bound) reads only vars that one block of phase pl
// holds one value of (single-member dims of block tile 1) besides constants.
static bool rt_gp_block_uniform_expr(const rt_gpu_phase_plan *pl, const rt_expr *e) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_INDEX) {
        for (int32_t d = 0; d < pl->n_dims; d++)
            if (pl->dims[d].n_members == 1 && pl->dims[d].members[0] == e->var)
                return pl->dims[d].T1 == 1 && !pl->dims[d].ragged;
        return false;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (!rt_gp_block_uniform_expr(pl, e->args[i]))
            return false;
    return e->kind != RT_EXPR_SUM && e->kind != RT_EXPR_CHILD;
}

// The tile per var of statement s in a staged phase: the block tile of each spatial dim, the
// block-level rTile of each reduction axis (single-member dense axes only); false when s does
// not qualify.
static bool rt_gp_stage_tiles(rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s, int64_t *T) {
    const rt_perf_model *m = g->m;
    int32_t bl = m->block_level;
    for (int32_t v = 0; v < s->n_vars; v++)
        T[v] = 0;
    for (int32_t x = 0; x < s->n_axes; x++) {
        const rt_axis *ax = &s->axes[x];
        if (ax->n_members != 1 || x >= m->n_axes)
            return false;
        int32_t v = ax->members[0];
        int64_t lo, hi;
        if (ax->is_reduce && rt_expr_const_int(g->op, s->vars[v].lo, &lo) &&
            rt_expr_const_int(g->op, s->vars[v].hi, &hi)) {
            T[v] = rt_max64(1, rt_min64(g->p->tile[bl].shape[x], hi - lo));
            pl->red_T1[v] = T[v];
        } else if (ax->is_reduce) {
            // a ragged range (attn_v's j < len(b)): a run-time number of steps, the same for
            // the whole block, so its bound may read only vars one block holds one value of
            if (!rt_expr_const_int(g->op, s->vars[v].lo, &lo) ||
                !rt_gp_block_uniform_expr(pl, s->vars[v].hi))
                return false;
            T[v] = rt_max64(1, g->p->tile[bl].shape[x]);
            pl->red_T1[v] = T[v];
        }
    }
    for (int32_t d = 0; d < pl->n_dims; d++) {
        if (pl->dims[d].n_members != 1)
            return false;
        T[pl->dims[d].members[0]] = pl->dims[d].T1;
    }
    for (int32_t v = 0; v < s->n_vars; v++)
        if (T[v] == 0)
            return false;
    return true;
}

// The plan dim whose single member is var v, -1 none.
static int32_t rt_gp_dim_of_var(const rt_gpu_phase_plan *pl, int32_t v) {
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].n_members == 1 && pl->dims[d].members[0] == v && !pl->dims[d].ragged)
            return d;
    return -1;
}

// Whether every origin of var v's tile (over the blocks or the reduction steps) is a multiple
// of 4, and so is its tile.
static bool rt_gp_origin4(const rt_gp *g, const rt_gpu_phase_plan *pl, const rt_stmt *s, int32_t v,
                          const int64_t *T) {
    int32_t d = rt_gp_dim_of_var(pl, v);
    if (d >= 0)
        return pl->dims[d].mlo[0] % 4 == 0 && pl->dims[d].T1 % 4 == 0;
    int64_t lo;
    return v < RT_GPU_PLAN_MAX_VARS && pl->red_T1[v] > 0 && T[v] % 4 == 0 &&
           rt_expr_const_int(g->op, s->vars[v].lo, &lo) && lo % 4 == 0;
}

// Whether every row of staged read st's data tile starts 16-byte aligned in its tensor and
// holds a multiple of 4 elements: the tensor's innermost extent (its row length), the
// innermost index's offset and every origin of its var multiples of 4 (a 128-bit copy's rule).
static bool rt_gp_aligned4(const rt_gp *g, const rt_gpu_phase_plan *pl, const rt_stmt *s,
                           const int64_t *T, const rt_gpu_stage *st) {
    const rt_tensor *tn = &g->op->tensors[st->read->tensor];
    const rt_affine *in = &st->aff[st->n_dims - 1];
    int64_t ext = 0;
    return in->n_terms == 1 && tn->dims[st->n_dims - 1].extent &&
           rt_expr_const_int(g->op, tn->dims[st->n_dims - 1].extent, &ext) && ext % 4 == 0 &&
           in->c0 % 4 == 0 && st->span[st->n_dims - 1] % 4 == 0 &&
           rt_gp_origin4(g, pl, s, in->var[0], T);
}

// Staged read st under the vec4 layout (rt_gpu_stage.vdim): false when it does not qualify —
// every index a plain var (coefficient 1), exactly one of a spatial dim whose register tile is
// a multiple of 4, the others reduction vars.
static bool rt_gp_vec4_read(const rt_gp *g, const rt_gpu_phase_plan *pl, const rt_stmt *s,
                            const int64_t *T, rt_gpu_stage *st) {
    st->vdim = st->frag = -1;
    for (int32_t d = 0; d < st->n_dims; d++) {
        const rt_affine *af = &st->aff[d];
        if (af->n_terms != 1 || af->coef[0] != 1)
            return false;
        int32_t pd = rt_gp_dim_of_var(pl, af->var[0]);
        if (pd < 0) {
            if (af->var[0] >= RT_GPU_PLAN_MAX_VARS || pl->red_T1[af->var[0]] <= 0)
                return false;
            continue;
        }
        if (st->frag >= 0 || pl->dims[pd].R % 4 != 0)
            return false;
        st->vdim = d;
        st->frag = pd;
    }
    if (st->frag < 0)
        return false;
    // 128-bit copies: an unguarded tile whose rows start 16-byte aligned
    st->gvec = st->full && rt_gp_aligned4(g, pl, s, T, st);
    // the layout: vdim innermost, then the other dims from the tensor's innermost outwards;
    // rows padded to 4 (16-byte aligned fragments) and then by the multiple of 4 that makes the
    // copy's stores and the fragment loads the fewest bank wavefronts (gpu-smem.c)
    const rt_mem_level *lv = &g->dev->level[g->m->block_level];
    rt_gpu_stage_pad(pl, st, rt_round_up(st->span[st->vdim], 4), 4,
                     lv->bank_bytes == 4 ? lv->banks : 0, g->dev->lanes);
    return true;
}

// The vec4 decision of a staged phase (gpu-plan.h): every staged read qualifies
// (rt_gp_vec4_read) and the re-laid-out tiles fit cap; then the fragments' dims are chunked.
// st[] keeps the scalar layout when it returns false.
static bool rt_gp_vec4(rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s, const int64_t *T,
                       rt_gpu_stage *st, int32_t n, int64_t cap) {
    rt_gpu_stage v[RT_GPU_PLAN_MAX_READS];
    int64_t bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        v[i] = st[i];
        if (!rt_gp_vec4_read(g, pl, s, T, &v[i]))
            return false;
        bytes += v[i].elems * 4;
    }
    if (bytes > cap)
        return false;
    for (int32_t i = 0; i < n; i++) {
        st[i] = v[i];
        pl->dims[st[i].frag].chunk4 = true;
    }
    return true;
}

// The interior/edge split of staged phase pl (rt_gpu_phase_plan.split), decided once here:
// when a spatial extent or a reduction range is not a multiple of its tile, the interior blocks
// (every tile inside its extent) run the full reduction steps without bounds checks — 128-bit
// copies where the tensor's rows keep 16-byte alignment, decided per read (rt_gp_aligned4) —
// and only the edge blocks and the last, partial step run the guarded code. Planned where it
// removes a guard (a read whose interior tiles are full though its tiles are not, or an inexact
// step), at most one reduction range has a partial step and an interior block and full step
// exist. Not priced by the model (cost.c reads the plan's guarded copies as before).
static void rt_gp_edge_split(const rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s,
                             const int64_t *T) {
    pl->split = false;
    pl->split_var = -1;
    pl->split_steps = 0;
    bool spatial_edge = false, gain = !pl->red_exact;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        rt_gpu_dim *gd = &pl->dims[d];
        gd->nb_full = gd->ragged ? 0 : gd->extent / gd->T1;
        spatial_edge = spatial_edge || gd->nb_full != gd->nb;
    }
    for (int32_t v = 0; v < s->n_vars && v < RT_GPU_PLAN_MAX_VARS; v++) {
        int64_t lo, hi;
        if (pl->red_T1[v] <= 0 || !rt_expr_const_int(g->op, s->vars[v].lo, &lo) ||
            !rt_expr_const_int(g->op, s->vars[v].hi, &hi) || (hi - lo) % pl->red_T1[v] == 0)
            continue;
        if (pl->split_var >= 0)
            return; // two partial steps: the guarded code would not be one range of steps
        pl->split_var = v;
        pl->split_steps = (hi - lo) / pl->red_T1[v];
    }
    for (int32_t i = 0; i < pl->n_stage; i++) {
        rt_gpu_stage *st = &pl->stage[i];
        st->ifull = st->full || rt_gp_stage_full(g, pl, s, T, st, true);
        st->igvec = st->gvec || (pl->vec4 && st->ifull && rt_gp_aligned4(g, pl, s, T, st));
        gain = gain || st->ifull != st->full;
    }
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].nb_full < 1)
            gain = false; // no interior block
    if (pl->split_var >= 0 && pl->split_steps < 1)
        gain = false; // no full step
    pl->split = gain && (spatial_edge || pl->split_var >= 0);
    for (int32_t i = 0; !pl->split && i < pl->n_stage; i++) {
        pl->stage[i].ifull = pl->stage[i].full;
        pl->stage[i].igvec = pl->stage[i].gvec;
    }
    if (!pl->split)
        pl->split_var = -1, pl->split_steps = 0;
}

// The staged reads of statement s (affine reads of dense float tensors) and their shared
// arrays; false when s does not qualify or the tiles do not fit the block level.
static bool rt_gp_plan_stage(rt_gp *g, rt_gpu_phase_plan *pl, const rt_stmt *s) {
    int32_t bl = g->m->block_level;
    if (bl < 1 || g->op->tensors[s->out].dtype != RT_DTYPE_F32 || rt_gp_has_sum(s->rhs) ||
        s->n_vars > RT_GPU_PLAN_MAX_VARS)
        return false;
    int64_t T[RT_GPU_PLAN_MAX_VARS];
    if (!rt_gp_stage_tiles(g, pl, s, T))
        return false;
    rt_gpu_stage st[RT_GPU_PLAN_MAX_READS];
    int32_t n = 0;
    // Collect the distinct reads (iterative walk over the expression tree).
    const rt_expr *stack[256];
    int32_t sp = 0;
    stack[sp++] = s->rhs;
    int64_t bytes = 0;
    const rt_mem_level *lv = &g->dev->level[bl];
    while (sp > 0) {
        const rt_expr *e = stack[--sp];
        if (e->kind == RT_EXPR_READ && !rt_dtype_is_int(g->op->tensors[e->tensor].dtype)) {
            bool seen = false;
            for (int32_t i = 0; i < n; i++)
                seen = seen || rt_expr_equal(st[i].read, e);
            if (seen)
                continue;
            if (n >= RT_GPU_PLAN_MAX_READS || g->op->tensors[e->tensor].dtype != RT_DTYPE_F32 ||
                !rt_gp_stage_read(g, s, e, T, lv, &st[n]))
                return false;
            bytes += st[n++].elems * 4;
            continue;
        }
        for (int32_t i = 0; i < e->n_args && sp < 256; i++)
            stack[sp++] = e->args[i];
    }
    int64_t cap = lv->tile_capacity_bytes > 0 ? lv->tile_capacity_bytes : lv->capacity_bytes;
    if (n == 0 || bytes > cap)
        return false;
    pl->stage = rt_arena_calloc(g->a, (size_t)n, sizeof *pl->stage);
    if (!pl->stage) {
        g->oom = true;
        return false;
    }
    for (int32_t i = 0; i < n; i++) {
        st[i].full = rt_gp_stage_full(g, pl, s, T, &st[i], false);
        st[i].vdim = st[i].frag = -1;
    }
    pl->vec4 = rt_gp_vec4(g, pl, s, T, st, n, cap);
    memcpy(pl->stage, st, sizeof *st * (size_t)n);
    pl->n_stage = n;
    pl->red_exact = true;
    for (int32_t v = 0; v < s->n_vars; v++) {
        int64_t lo, hi;
        if (pl->red_T1[v] > 0 &&
            (!rt_expr_const_int(g->op, s->vars[v].lo, &lo) ||
             !rt_expr_const_int(g->op, s->vars[v].hi, &hi) || (hi - lo) % pl->red_T1[v] != 0))
            pl->red_exact = false;
    }
    rt_gp_edge_split(g, pl, s, T);
    for (int32_t i = s->n_loops - 1; i >= 0; i--) { // the innermost reduction loop
        int32_t v = s->loops[i];
        if (v >= 0 && v < s->n_vars && s->vars[v].is_reduce) {
            pl->step_var = v;
            pl->step_unroll = rt_gpu_step_unroll(pl->red_T1[v], pl->Rtot);
            break;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------------

int64_t rt_gpu_plan_tree_row(const rt_op *op, const rt_stmt *s) {
    int64_t e = 1, lo, hi;
    for (int32_t d = 1; d < s->n_lhs; d++) {
        const rt_ivar *iv = &s->vars[s->lhs_vars[d]];
        if (!iv->lo || !iv->hi || !rt_expr_const_int(op, iv->lo, &lo) ||
            !rt_expr_const_int(op, iv->hi, &hi))
            return -1;
        e *= hi > lo ? hi - lo : 0;
    }
    return e;
}

// A tree group (tree statement si and every later statement writing its tensor, as
// codegen/lower-tree.c rt_tree_group_plan forms it): row threads per node, blocks of up to 256.
// The statements need not be consecutive; first..first + n_stmts counts only the group's.
static rt_status rt_gp_tree(rt_gp *g, int32_t si, bool *done, rt_gpu_phase_plan *pl) {
    const rt_op *op = g->op;
    memset(pl, 0, sizeof *pl);
    pl->mode = RT_GPU_TREE;
    pl->first = pl->tstmt = si;
    pl->epi = -1;
    int64_t E = 1;
    for (int32_t k = si; k < op->n_stmts; k++) {
        const rt_stmt *s = &op->stmts[k];
        if (s->out != op->stmts[si].out)
            continue;
        done[k] = true;
        pl->n_stmts++;
        int64_t row = rt_gpu_plan_tree_row(op, s);
        if (row < 0)
            return rt_gp_unsupported(g, s->loc,
                                     "a tree statement whose row is not of constant size");
        E = rt_max64(E, row);
    }
    int64_t T = rt_min64(256, rt_round_up(E, 32));
    if (g->dev->max_threads_per_block > 0)
        T = rt_min64(T, g->dev->max_threads_per_block);
    pl->row = E;
    pl->threads = T;
    pl->Rtot = 1;
    return RT_OK; // blocks: per level, from the bound tree (rt_gpu_phase_steps)
}

// The statements of each phase: a statement joins the phase before it when it starts with the
// tiling statement's LHS vars and reads what the phase wrote only at its own element.
static rt_status rt_gp_group(rt_gp *g, rt_gpu_phase_plan *plans, int32_t *n_out) {
    const rt_op *op = g->op;
    bool *written, *done;
    RT_ALLOC(g->a, written, op->n_tensors, g->err);
    RT_ALLOC(g->a, done, op->n_stmts, g->err);
    int32_t n = 0, main_stmt = g->m ? g->m->main_stmt : -1;
    bool cut = false; // a statement was left out since the last phase: no fusing across it
    for (int32_t si = 0; si < op->n_stmts; si++) {
        const rt_stmt *s = &op->stmts[si];
        if (done[si]) {
            cut = true;
            continue;
        }
        if (s->recursive || s->n_preds > 0) {
            RT_TRY(rt_gp_tree(g, si, done, &plans[n++]));
            continue;
        }
        rt_gpu_phase_plan *cur =
            n > 0 && plans[n - 1].mode != RT_GPU_TREE && !cut ? &plans[n - 1] : NULL;
        cut = false;
        if (cur) {
            const rt_stmt *t = &op->stmts[cur->tstmt];
            bool ok = rt_gp_same_prefix(t, s) && rt_gp_reads_at_prefix(s->rhs, written, t->n_lhs);
            // the tiling statement must stay the main one when the rProgram tiles the phase
            if (ok && si == main_stmt && cur->tstmt != si && t->n_lhs != s->n_lhs)
                ok = false;
            if (ok) {
                if (si == main_stmt)
                    cur->tstmt = si;
                cur->n_stmts++;
                written[s->out] = true;
                continue;
            }
        }
        memset(&plans[n], 0, sizeof plans[n]);
        plans[n].first = si;
        plans[n].n_stmts = 1;
        plans[n].tstmt = si;
        plans[n].epi = -1;
        n++;
        for (int32_t t = 0; t < op->n_tensors; t++)
            written[t] = false;
        written[s->out] = true;
    }
    *n_out = n;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Matrix instructions (rt_gpu_mma, gpu-plan.h)
// ---------------------------------------------------------------------------------------------

#define RT_GP_MMA_FRAG 16 // WMMA m16n16k16

// Read e is tensor[x][y] (or [y][x]) of a dense 2-d 16-bit float tensor with plain vars x, y
// over [0, extent) of the statement, the tensor's whole extent.
static bool rt_gp_mma_read(const rt_gp *g, const rt_stmt *s, const rt_expr *e, rt_dtype dt) {
    const rt_tensor *tn = e->kind == RT_EXPR_READ ? &g->op->tensors[e->tensor] : NULL;
    if (!tn || tn->dtype != dt || tn->ragged || tn->has_pad || tn->n_dims != 2 || e->n_args != 2)
        return false;
    for (int32_t d = 0; d < 2; d++) {
        const rt_expr *ix = e->args[d];
        int64_t lo, hi, ext;
        if (ix->kind != RT_EXPR_INDEX || !rt_expr_const_int(g->op, s->vars[ix->var].lo, &lo) ||
            !rt_expr_const_int(g->op, s->vars[ix->var].hi, &hi) ||
            !rt_expr_const_int(g->op, tn->dims[d].extent, &ext) || lo != 0 || hi != ext)
            return false;
    }
    return e->args[0]->var != e->args[1]->var;
}

static bool rt_gp_mma_has_var(const rt_expr *e, int32_t v) {
    return e->args[0]->var == v || e->args[1]->var == v;
}

// The warp grid: wgm x wgn warps whose tiles of whole fragments cover the block tile, the
// squarest warp tile (most reuse of each loaded fragment); false when none exists.
static bool rt_gp_mma_warps(rt_gpu_mma *mm, int64_t T1m, int64_t T1n, int64_t threads) {
    int64_t wave = rt_gpu_mma_wave(mm), W = threads / wave, best = -1;
    int64_t fm = T1m / RT_GP_MMA_FRAG, fn = T1n / RT_GP_MMA_FRAG;
    if (threads % wave != 0 || W < 1)
        return false;
    for (int64_t wgm = 1; wgm <= W; wgm++) {
        int64_t wgn = W / wgm;
        if (W % wgm != 0 || fm % wgm != 0 || fn % wgn != 0)
            continue;
        int64_t wm = T1m / wgm, wn = T1n / wgn, d = wm > wn ? wm - wn : wn - wm;
        if (best < 0 || d < best) {
            best = d;
            mm->wgm = wgm;
            mm->wgn = wgn;
            mm->wm = wm;
            mm->wn = wn;
        }
    }
    return best >= 0;
}

// The instructions, warps and stages of mm over block tile T1m x T1n: of the warp counts the
// rProgram's threads give and 4, 8 and 16 (warp tiles of whole fragments, within the device's
// threads per block), on mma.sync (full tiles, async_ok layouts) and WMMA, the cheapest by
// rt_gpu_mma_price with its cheapest stage count (rt_gpu_mma_choose_stages) whose shared tiles
// fit the block; on a tie the earlier (mma.sync before WMMA, the rProgram's warps first).
// Returns the block's threads, 0 when nothing fits.
static int64_t rt_gp_mma_choose(rt_gp *g, rt_gpu_mma *mm, int64_t T1m, int64_t T1n,
                                const rt_gpu_phase_plan *pl, bool async_ok) {
    const rt_mem_level *lv = &g->dev->level[g->m->block_level];
    int64_t cap = lv->tile_capacity_bytes > 0 ? lv->tile_capacity_bytes : lv->capacity_bytes;
    const int64_t warps[] = {pl->threads / 32, 4, 8, 16};
    double best_ns = (double)INFINITY;
    int64_t best_threads = 0;
    rt_gpu_mma best = *mm;
    rt_gpu_mma_inst first, last;
    if (!rt_gpu_mma_insts(g->dev, &first, &last))
        return 0;
    for (int32_t in = (int32_t)last; in >= (int32_t)first; in--) {
        if (in == RT_GPU_MMA_SYNC && (!async_ok || !mm->full))
            continue;
        for (size_t w = 0; w < sizeof warps / sizeof warps[0]; w++) {
            // warp counts of 32 lanes; MFMA's wavefronts of 64 take the same threads
            int64_t th = warps[w] * 32;
            if ((w > 0 && warps[w] == warps[0]) ||
                (g->dev->max_threads_per_block > 0 && th > g->dev->max_threads_per_block))
                continue;
            rt_gpu_mma m = *mm;
            m.inst = (rt_gpu_mma_inst)in;
            if (!rt_gp_mma_warps(&m, T1m, T1n, th))
                continue;
            rt_gpu_mma_choose_stages(g->dev, &m, T1m, T1n, th, pl->blocks, g->m->peak_gflops, cap,
                                     lv->capacity_bytes, async_ok && in != RT_GPU_MMA_MFMA);
            rt_gpu_mma_cost c;
            if (m.smem_bytes > cap || !rt_gpu_mma_price(g->dev, &m, T1m, T1n, th, pl->blocks,
                                                        g->m->peak_gflops, lv->capacity_bytes, &c))
                continue;
            if (c.total_ns < best_ns) {
                best_ns = c.total_ns;
                best = m;
                best_threads = th;
            }
        }
    }
    *mm = best;
    return best_threads;
}

// Whether phase pl runs on matrix instructions, and how (pl->mma).
static void rt_gp_mma(rt_gp *g, rt_gpu_phase_plan *pl) {
    const rt_stmt *s = &g->op->stmts[pl->tstmt];
    const rt_expr *r = s->rhs;
    rt_gpu_mma mm = {.on = false};
    rt_gpu_mma_inst first, last;
    if (!g->m || !g->m->use_mma || !pl->from_prog || pl->mode != RT_GPU_REGTILE || pl->epi >= 0 ||
        !rt_gpu_mma_insts(g->dev, &first, &last) || s->op != RT_ASSIGN_ADD_INIT || s->n_lhs != 2 ||
        s->n_vars != 3 || s->n_preds != 0 || pl->n_dims != 2 || r->kind != RT_EXPR_BINARY ||
        r->bop != RT_BOP_MUL || g->op->tensors[s->out].dtype != RT_DTYPE_F32 ||
        g->op->tensors[s->out].n_dims != 2)
        return;
    rt_dtype dt = g->op->tensors[r->args[0]->kind == RT_EXPR_READ ? r->args[0]->tensor : 0].dtype;
    if ((dt != RT_DTYPE_F16 && dt != RT_DTYPE_BF16) || !rt_gp_mma_read(g, s, r->args[0], dt) ||
        !rt_gp_mma_read(g, s, r->args[1], dt))
        return;
    mm.vk = 2;
    mm.vm = s->lhs_vars[0];
    mm.vn = s->lhs_vars[1];
    const rt_expr *ea = r->args[0], *eb = r->args[1];
    if (!rt_gp_mma_has_var(ea, mm.vm)) { // B * A
        ea = r->args[1];
        eb = r->args[0];
    }
    if (!rt_gp_mma_has_var(ea, mm.vm) || !rt_gp_mma_has_var(ea, mm.vk) ||
        !rt_gp_mma_has_var(eb, mm.vn) || !rt_gp_mma_has_var(eb, mm.vk))
        return;
    mm.a = ea->tensor;
    mm.b = eb->tensor;
    if (mm.a == mm.b)
        return;
    int64_t T[RT_GPU_PLAN_MAX_VARS];
    int64_t red_T1[RT_GPU_PLAN_MAX_VARS];
    memcpy(red_T1, pl->red_T1, sizeof red_T1);
    bool tiles = rt_gp_stage_tiles(g, pl, s, T);
    memcpy(pl->red_T1, red_T1, sizeof red_T1); // the plan's reduction steps stay the staged ones
    if (!tiles)
        return;
    mm.dm = rt_gp_dim_of_var(pl, mm.vm);
    mm.dn = rt_gp_dim_of_var(pl, mm.vn);
    if (mm.dm < 0 || mm.dn < 0 || pl->dims[mm.dm].grid != 0 || pl->dims[mm.dn].grid != 0)
        return;
    int64_t T1m = pl->dims[mm.dm].T1, T1n = pl->dims[mm.dn].T1;
    mm.ks = T[mm.vk];
    if (T1m % RT_GP_MMA_FRAG || T1n % RT_GP_MMA_FRAG || mm.ks % RT_GP_MMA_FRAG)
        return;
    if (!rt_expr_const_int(g->op, s->vars[mm.vm].hi, &mm.M) ||
        !rt_expr_const_int(g->op, s->vars[mm.vn].hi, &mm.N) ||
        !rt_expr_const_int(g->op, s->vars[mm.vk].hi, &mm.K))
        return;
    mm.full = mm.M % T1m == 0 && mm.N % T1n == 0 && mm.K % mm.ks == 0;
    // cp.async's 16-byte copies and ldmatrix(.trans): A's rows run along k and B's along n in
    // memory (gpu-mma.c)
    bool a_rows_k = ea->args[1]->var == mm.vk, b_rows_n = eb->args[1]->var == mm.vn;
    bool async_ok = a_rows_k && b_rows_n;
    mm.vec_a = mm.full && a_rows_k;
    mm.vec_b = mm.full && b_rows_n;
    int64_t threads = rt_gp_mma_choose(g, &mm, T1m, T1n, pl, async_ok);
    if (threads == 0)
        return;
    mm.on = true;
    pl->mma = mm;
    pl->threads = threads;
}

// Whether phase pl (tiling statement t) runs a work list (gpu-plan.h): it has a ragged grid
// dim, and every ragged dim's range reads only vars the host binds per block — a grid x dim's
// one var at block tile 1 — or, for grid z, grid y's var (the host walks the rows of the tile).
static bool rt_gp_work_list(const rt_gpu_phase_plan *pl, const rt_stmt *t) {
    bool any = false;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        const rt_gpu_dim *gd = &pl->dims[d];
        if (gd->grid == 0)
            continue;
        any = true;
        int32_t v = gd->members[0];
        for (int32_t w = 0; w < t->n_vars; w++) {
            if (!rt_gp_mentions_var(t->vars[v].lo, w) && !rt_gp_mentions_var(t->vars[v].hi, w))
                continue;
            bool bound = false;
            for (int32_t e = 0; e < pl->n_dims; e++) {
                const rt_gpu_dim *ge = &pl->dims[e];
                bound =
                    bound || (ge->n_members == 1 && ge->members[0] == w &&
                              (ge->grid == 0 ? !ge->ragged && ge->T1 == 1 : ge->grid < gd->grid));
            }
            if (!bound)
                return false;
        }
    }
    return any && !pl->mma.on && pl->mode != RT_GPU_TREE;
}

// Phase pl is a single contraction (*epi -1), or one followed by an '=' epilogue over the same
// element (*epi: that statement).
static bool rt_gp_is_single(const rt_op *op, const rt_gpu_phase_plan *pl, int32_t *epi) {
    const rt_stmt *t = &op->stmts[pl->tstmt];
    *epi = -1;
    if (pl->first != pl->tstmt)
        return false;
    if (pl->n_stmts == 1)
        return true;
    const rt_stmt *e = &op->stmts[pl->first + 1];
    if (pl->n_stmts == 2 && e->op == RT_ASSIGN_SET && e->n_lhs == t->n_lhs &&
        e->n_loops == e->n_lhs && !rt_gp_has_sum(e->rhs) && !rt_gp_reads_tensor(e->rhs, e->out)) {
        *epi = pl->first + 1;
        return true;
    }
    return false;
}

// Whether phase pl is a row-wise group for the rows mode (gpu-plan.h), tiles aside: its tiling
// statement reduces, it is not a single contraction (a regtile phase), and every statement is a
// reduction to the row element (LHS the tiling statement's, an initialized accumulator) or an
// '=' over it.
static bool rt_gp_rows_group(const rt_op *op, const rt_gpu_phase_plan *pl) {
    const rt_stmt *t = &op->stmts[pl->tstmt];
    int32_t epi;
    if (pl->mode == RT_GPU_TREE || t->n_loops <= t->n_lhs || rt_gp_is_single(op, pl, &epi))
        return false;
    for (int32_t k = pl->first; k < pl->first + pl->n_stmts; k++) {
        const rt_stmt *s = &op->stmts[k];
        bool reduces = s->n_loops > s->n_lhs;
        if (s->op == RT_ASSIGN_ADD || (reduces && s->n_lhs != t->n_lhs) ||
            (!reduces && s->op != RT_ASSIGN_SET))
            return false;
    }
    return true;
}

// The main statement's innermost reduction axis of model m, -1 none.
static int32_t rt_gp_rows_axis_of(const rt_perf_model *m) {
    int32_t inner = -1;
    for (int32_t x = 0; x < m->n_axes; x++)
        if (m->axes[x].is_reduce)
            inner = x;
    return inner;
}

// The rows mode (gpu-plan.h) of a direct phase tiled by the rProgram that is a row-wise group
// (rt_gp_rows_group): threads per row element from the rProgram's tiles of the innermost
// reduction axis, at least 2 and within the device's block. Else the phase stays direct.
static void rt_gp_rows(rt_gp *g, rt_gpu_phase_plan *pl) {
    if (!pl->from_prog || !rt_gp_rows_group(g->op, pl))
        return;
    const rt_perf_model *m = g->m;
    int32_t bl = m->block_level >= 0 ? m->block_level : 1, tl = m->thread_level;
    int32_t inner = rt_gp_rows_axis_of(m);
    if (inner < 0 || tl < 0)
        return;
    int64_t T1 = g->p->tile[bl].shape[inner], R = g->p->tile[tl].shape[inner];
    int64_t nt = R > 0 ? T1 / R : 0, threads = pl->threads * nt;
    if (nt < 2 || (g->dev->max_threads_per_block > 0 && threads > g->dev->max_threads_per_block))
        return;
    pl->mode = RT_GPU_ROWS;
    pl->row_threads = nt;
    pl->threads = threads;
}

// The mode of a tiled phase, its staging, block order and unrolling.
static void rt_gp_mode(rt_gp *g, rt_gpu_phase_plan *pl) {
    const rt_stmt *t = &g->op->stmts[pl->tstmt];
    pl->mode = RT_GPU_DIRECT;
    bool has_red = t->n_loops > t->n_lhs;
    bool single = rt_gp_is_single(g->op, pl, &pl->epi);
    if (has_red && single && pl->Rtot <= 256 && !rt_gp_has_sum(t->rhs) && t->op != RT_ASSIGN_ADD) {
        // reduction ranges may depend only on block-uniform vars
        bool uniform = true;
        for (int32_t v = t->n_lhs; v < t->n_vars; v++)
            for (int32_t w = 0; w < t->n_lhs; w++)
                if ((rt_gp_mentions_var(t->vars[v].lo, w) ||
                     rt_gp_mentions_var(t->vars[v].hi, w)) &&
                    !rt_gp_uniform_var(pl, w))
                    uniform = false;
        if (uniform)
            pl->mode = RT_GPU_REGTILE;
    }
    if (pl->mode == RT_GPU_REGTILE && pl->from_prog && rt_gp_plan_stage(g, pl, t))
        pl->mode = RT_GPU_STAGED;
    if (pl->mode == RT_GPU_DIRECT) {
        pl->epi = -1;
        rt_gp_rows(g, pl);
    }
    if (pl->mode == RT_GPU_REGTILE && pl->from_prog)
        rt_gp_mma(g, pl);
    // direct and rows tiles (every statement per element; rows: its trees and barriers too)
    // unroll only when small
    pl->unroll = (pl->mode != RT_GPU_DIRECT && pl->mode != RT_GPU_ROWS) || pl->Rtot <= 16;
    // Grouped block order (L2 reuse) where the device file gives its group width.
    int32_t nx = 0;
    for (int32_t d = 0; d < pl->n_dims; d++)
        nx += pl->dims[d].grid == 0 && pl->dims[d].nb > 1;
    pl->work_list = rt_gp_work_list(pl, t);
    if (g->dev->raster_group_blocks > 0 && pl->mode == RT_GPU_STAGED && nx >= 2 && !pl->work_list)
        pl->raster = g->dev->raster_group_blocks;
}

static uint64_t rt_gp_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

// Everything of the plan that the kernel's code depends on (not its name).
static uint64_t rt_gp_key(const rt_gpu_plan *pl) {
    uint64_t h = rt_gp_mix(0x67707531, (uint64_t)pl->n_phases);
    for (int32_t i = 0; i < pl->n_phases; i++) {
        const rt_gpu_phase_plan *ph = &pl->phases[i];
        bool rt = !ph->mma.on; // a phase on matrix instructions has no register tile
        const int64_t v[] = {ph->first,        ph->n_stmts,   ph->tstmt,     ph->epi,
                             ph->mode,         ph->n_dims,    ph->threads,   ph->Rtot * rt,
                             ph->unroll && rt, ph->raster,    ph->n_stage,   ph->row,
                             ph->blocks,       ph->from_prog, ph->work_list, ph->row_threads};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            h = rt_gp_mix(h, (uint64_t)v[k]);
        for (int32_t d = 0; d < ph->n_dims; d++) {
            const rt_gpu_dim *gd = &ph->dims[d];
            const int64_t w[] = {gd->n_members, gd->ragged, gd->T1,
                                 gd->R * rt,    gd->grid,   gd->chunk4 && rt};
            for (size_t k = 0; k < sizeof w / sizeof w[0]; k++)
                h = rt_gp_mix(h, (uint64_t)w[k]);
            for (int32_t k = 0; k < gd->n_members; k++)
                h = rt_gp_mix(h, (uint64_t)gd->members[k]);
        }
        for (int32_t v2 = 0; ph->mode == RT_GPU_STAGED && v2 < RT_GPU_PLAN_MAX_VARS; v2++)
            h = rt_gp_mix(h, (uint64_t)ph->red_T1[v2]);
        h = rt_gp_mix(h, (uint64_t)ph->red_exact);
        h = rt_gp_mix(h, (uint64_t)ph->vec4);
        const rt_gpu_mma *mm = &ph->mma;
        const int64_t mw[] = {mm->on, mm->a,    mm->wgm,    mm->wgn,
                              mm->ks, mm->full, mm->stages, mm->inst};
        for (size_t k = 0; k < sizeof mw / sizeof mw[0]; k++)
            h = rt_gp_mix(h, (uint64_t)mw[k]);
        h = rt_gp_mix(h, (uint64_t)ph->split);
        h = rt_gp_mix(h, (uint64_t)ph->split_var);
        h = rt_gp_mix(h, (uint64_t)ph->split_steps);
        for (int32_t k = 0; k < ph->n_stage; k++) {
            const rt_gpu_stage *sg = &ph->stage[k];
            const int64_t w[] = {sg->full,  sg->vdim,  sg->frag, sg->gvec,
                                 sg->elems, sg->ifull, sg->igvec};
            for (size_t j = 0; j < sizeof w / sizeof w[0]; j++)
                h = rt_gp_mix(h, (uint64_t)w[j]);
        }
    }
    return h;
}

rt_status rt_gpu_plan_make(rt_arena *a, const rt_op *op, const rt_device *dev,
                           const rt_perf_model *m, const rt_rprog *p, const rt_gpu_plan **out,
                           rt_err *err) {
    rt_gp g = {.a = a, .op = op, .dev = dev, .m = p ? m : NULL, .p = m ? p : NULL, .err = err};
    rt_gpu_plan *pl;
    RT_ALLOC(a, pl, 1, err);
    RT_ALLOC(a, pl->phases, op->n_stmts, err);
    RT_TRY(rt_gp_group(&g, pl->phases, &pl->n_phases));
    int32_t bl = m && p ? m->block_level : -1;
    if (bl >= 1 && bl < dev->n_levels && dev->level[bl].bank_bytes == 4)
        pl->banks = dev->level[bl].banks;
    pl->lanes = dev->lanes;
    int32_t main_stmt = g.m ? g.m->main_stmt : -1;
    for (int32_t i = 0; i < pl->n_phases; i++) {
        rt_gpu_phase_plan *ph = &pl->phases[i];
        if (ph->mode == RT_GPU_TREE)
            continue;
        ph->from_prog = g.p && ph->tstmt == main_stmt;
        RT_TRY(rt_gp_dims(&g, ph, &op->stmts[ph->tstmt]));
        rt_gp_mode(&g, ph);
        if (g.oom)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    pl->key = rt_gp_key(pl);
    *out = pl;
    return RT_OK;
}

rt_status rt_gpu_plan_rows_axis(rt_arena *a, const rt_op *op, const rt_device *dev,
                                const rt_perf_model *m, int32_t *axis, rt_err *err) {
    *axis = -1;
    if (!m || m->thread_level < 0 || m->main_stmt < 0)
        return RT_OK;
    rt_gp g = {.a = a, .op = op, .dev = dev, .m = m, .err = err};
    rt_gpu_phase_plan *phases;
    int32_t n;
    RT_ALLOC(a, phases, op->n_stmts, err);
    RT_TRY(rt_gp_group(&g, phases, &n));
    for (int32_t i = 0; i < n; i++)
        if (phases[i].tstmt == m->main_stmt && rt_gp_rows_group(op, &phases[i]))
            *axis = rt_gp_rows_axis_of(m);
    return RT_OK;
}

int64_t rt_gpu_plan_smem_bytes(const rt_gpu_phase_plan *ph) {
    int64_t bytes = 0;
    for (int32_t s = 0; s < ph->n_stage; s++)
        bytes += ph->stage[s].elems * 4;
    return bytes;
}

// "; edge split: interior m 15/16, n 15/16 blocks, k 41/42 steps, unguarded A, B": the interior
// blocks and full steps of each tiled dim and reduction var, and the reads they copy unguarded.
static void rt_gp_print_split(const rt_op *op, const rt_gpu_phase_plan *ph, rt_buf *out) {
    const rt_stmt *t = &op->stmts[ph->tstmt];
    rt_buf_puts(out, "; edge split: interior");
    for (int32_t d = 0; d < ph->n_dims; d++)
        rt_buf_printf(out, "%s %s %lld/%lld", d ? "," : "", t->vars[ph->dims[d].members[0]].name,
                      (long long)ph->dims[d].nb_full, (long long)ph->dims[d].nb);
    rt_buf_puts(out, " blocks");
    if (ph->split_var >= 0)
        rt_buf_printf(out, ", %s %lld/%lld steps", t->vars[ph->split_var].name,
                      (long long)ph->split_steps, (long long)ph->split_steps + 1);
    rt_buf_puts(out, ", unguarded");
    for (int32_t k = 0, n = 0; k < ph->n_stage; k++)
        if (ph->stage[k].ifull)
            rt_buf_printf(out, "%s %s", n++ ? "," : "",
                          op->tensors[ph->stage[k].read->tensor].name);
}

void rt_gpu_plan_print_phase(const rt_op *op, const rt_gpu_plan *pl, int32_t i, rt_buf *out) {
    const rt_gpu_phase_plan *ph = &pl->phases[i];
    const rt_stmt *t = &op->stmts[ph->tstmt];
    rt_buf_printf(out, "phase %d: %s", (int)i, rt_gpu_mode_name(ph->mode));
    for (int32_t k = ph->first, n = 0; n < ph->n_stmts && k < op->n_stmts; k++) {
        if (ph->mode == RT_GPU_TREE && op->stmts[k].out != t->out)
            continue;
        rt_buf_printf(out, "%s%s%s", n ? " " : " ", op->tensors[op->stmts[k].out].name,
                      k == ph->epi ? "(epilogue)" : "");
        n++;
    }
    if (ph->mode == RT_GPU_TREE) {
        rt_buf_printf(out, "; threads %lld, %lld per node, level by level", (long long)ph->threads,
                      (long long)ph->row);
        return;
    }
    rt_buf_printf(out, "; threads %lld, blocks %lld", (long long)ph->threads,
                  (long long)ph->blocks);
    if (ph->work_list)
        rt_buf_puts(out, "; work list (non-empty blocks, longest first)");
    rt_buf_puts(out, "; block/register tile");
    for (int32_t d = 0; d < ph->n_dims; d++) {
        const rt_gpu_dim *gd = &ph->dims[d];
        rt_buf_puts(out, d ? ", " : " ");
        for (int32_t k = 0; k < gd->n_members; k++)
            rt_buf_printf(out, "%s%s", k ? "." : "", t->vars[gd->members[k]].name);
        if (gd->n_members == 0)
            rt_buf_puts(out, "1");
        rt_buf_printf(out, "%s %lld/%lld", gd->ragged ? "(ragged)" : "", (long long)gd->T1,
                      (long long)gd->R);
    }
    if (ph->mode == RT_GPU_STAGED) {
        rt_buf_puts(out, "; reduction step");
        for (int32_t v = 0; v < t->n_vars && v < RT_GPU_PLAN_MAX_VARS; v++)
            if (ph->red_T1[v] > 0)
                rt_buf_printf(out, " %s %lld", t->vars[v].name, (long long)ph->red_T1[v]);
        rt_buf_printf(out, "; shared %lld B", (long long)rt_gpu_plan_smem_bytes(ph));
        int32_t n_full = 0;
        for (int32_t k = 0; k < ph->n_stage; k++)
            n_full += ph->stage[k].full;
        if (n_full == ph->n_stage && ph->red_exact)
            rt_buf_puts(out, "; full tiles");
        else if (n_full > 0 || ph->red_exact)
            rt_buf_printf(out, "; full tiles in %d of %d reads%s", (int)n_full, (int)ph->n_stage,
                          ph->red_exact ? ", exact steps" : "");
        if (ph->split)
            rt_gp_print_split(op, ph, out);
        if (ph->vec4) {
            rt_buf_puts(out, "; 128-bit loads: shared");
            for (int32_t k = 0; k < ph->n_stage; k++)
                if (ph->stage[k].gvec || ph->stage[k].igvec)
                    rt_buf_printf(out, ", global %s%s", op->tensors[ph->stage[k].read->tensor].name,
                                  ph->stage[k].gvec ? "" : " interior");
        }
    }
    if (ph->mma.on) {
        const rt_gpu_mma *mm = &ph->mma;
        rt_buf_printf(out,
                      "; mma: %s %s, f32 accumulate; warps %lldx%lld, warp tile "
                      "%lldx%lld; k step %lld",
                      rt_gpu_mma_inst_name(mm->inst), rt_dtype_name(op->tensors[mm->a].dtype),
                      (long long)mm->wgm, (long long)mm->wgn, (long long)mm->wm, (long long)mm->wn,
                      (long long)mm->ks);
        if (mm->stages == 2)
            rt_buf_puts(out, ", double-buffered (cp.async)");
        else if (mm->stages > 2)
            rt_buf_printf(out, ", %d stages (cp.async)", (int)mm->stages);
        rt_buf_printf(out, "; shared %lld B%s", (long long)mm->smem_bytes,
                      mm->full ? "; full tiles" : "; guarded edges");
        return;
    }
    if (ph->mode == RT_GPU_ROWS)
        rt_buf_printf(out, "; %lld threads per row, reductions through shared memory",
                      (long long)ph->row_threads);
    rt_buf_printf(out, "; register tile %lld%s", (long long)ph->Rtot,
                  ph->unroll ? " unrolled" : " in a loop");
    if (ph->raster > 0)
        rt_buf_printf(out, "; grouped block order %lld", (long long)ph->raster);
}

int64_t rt_gpu_plan_main_threads(const rt_gpu_plan *pl, int32_t main_stmt) {
    for (int32_t i = 0; pl && i < pl->n_phases; i++)
        if (pl->phases[i].from_prog && pl->phases[i].tstmt == main_stmt)
            return pl->phases[i].threads;
    return 0;
}

rt_gpu_mode rt_gpu_plan_main_mode(const rt_gpu_plan *pl, int32_t main_stmt) {
    for (int32_t i = 0; pl && i < pl->n_phases; i++)
        if (pl->phases[i].from_prog && pl->phases[i].tstmt == main_stmt)
            return pl->phases[i].mode;
    return RT_GPU_MODE_COUNT;
}

double rt_gpu_plan_main_inflight_bytes(const rt_gpu_plan *pl, int32_t main_stmt, int32_t elem_bytes,
                                       bool reduces) {
    const rt_gpu_phase_plan *ph = NULL;
    for (int32_t i = 0; pl && i < pl->n_phases && !ph; i++)
        if (pl->phases[i].from_prog && pl->phases[i].tstmt == main_stmt)
            ph = &pl->phases[i];
    if (!ph)
        return 0;
    double eb = elem_bytes > 0 ? (double)elem_bytes : 4.0;
    if (ph->mode == RT_GPU_STAGED) { // the staged tiles of one reduction step, loaded at once
        double elems = 0;
        for (int32_t i = 0; i < ph->n_stage; i++)
            elems += (double)ph->stage[i].elems;
        return elems * eb;
    }
    double per_thread = 1;
    if (ph->mode == RT_GPU_REGTILE) { // one reduction step of the register tile: a row per dim
        per_thread = 0;
        for (int32_t d = 0; d < ph->n_dims; d++)
            per_thread += (double)(ph->dims[d].R > 0 ? ph->dims[d].R : 1);
    } else if (ph->mode == RT_GPU_DIRECT) { // the unrolled tile's loads
        per_thread = (double)(ph->unroll && ph->Rtot > 0 ? ph->Rtot : 1);
    }
    // A loop over a reduction (softmax's rows, a mean, a regtile's k) keeps about 4 steps of
    // loads in flight, as far as the compiler unrolls a loop of unknown trip count.
    if (reduces && ph->mode != RT_GPU_TREE)
        per_thread *= 4;
    return (double)ph->threads * per_thread * eb;
}

double rt_gpu_plan_main_issue_share(const rt_gpu_plan *pl, int32_t main_stmt) {
    const rt_gpu_phase_plan *ph = NULL;
    for (int32_t i = 0; pl && i < pl->n_phases && !ph; i++)
        if (pl->phases[i].from_prog && pl->phases[i].tstmt == main_stmt)
            ph = &pl->phases[i];
    if (!ph || ph->mode != RT_GPU_STAGED || ph->Rtot < 1 || ph->threads < 1)
        return 1;
    double iters = 1; // reduction iterations of one step
    for (int32_t v = 0; v < RT_GPU_PLAN_MAX_VARS; v++)
        if (ph->red_T1[v] > 0)
            iters *= (double)ph->red_T1[v];
    // per reduction iteration: the FMAs, the shared loads and a step's copy (global loads,
    // shared stores), each shared access times its bank wavefronts over the ideal (gpu-smem.c),
    // and the loop instructions of a step loop left rolled
    double fma = (double)ph->Rtot, lds = 0, copy = 0;
    for (int32_t i = 0; i < ph->n_stage; i++) {
        const rt_gpu_stage *sg = &ph->stage[i];
        rt_gpu_smem_cost c;
        rt_gpu_stage_smem(ph, sg, sg->gvec, pl->banks, pl->lanes, &c);
        lds += c.load_instr * c.load_ways;
        int64_t total = 1;
        for (int32_t k = 0; k < sg->n_dims; k++)
            total *= sg->span[k];
        double ldg = (double)rt_ceil_div(sg->gvec ? total / 4 : total, ph->threads);
        copy += (ldg + c.store_instr * c.store_ways) / iters;
    }
    double loop = ph->step_unroll > 0 ? rt_gpu_step_loop_instrs(ph->red_T1[ph->step_var],
                                                                ph->step_unroll, ph->n_stage)
                                      : 0;
    return fma / (fma + lds + copy + loop);
}
