// gpu-launch.c: the launches of a lowered GPU kernel on bound data — the grid of each phase, its
// ragged dims sized from the bound lengths (the maximum extent over the bound values) or, for a
// phase that runs a work list, the list of its non-empty blocks longest first, and the
// one-launch-per-level steps of a phase that runs a tree level by level. Extents are evaluated
// by the shared integer evaluator (spec-eval.h).
#include "run-gpu.h"
#include "gpu-plan.h"
#include "spec-eval.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Launch: ragged grid dims from the bound lengths
// ---------------------------------------------------------------------------------------------

typedef struct rt_gl_eval {
    const rt_op *op;
    const rt_stmt *s;
    rt_bindings *b;
    int64_t vals[64];
    bool bound[64];
    int64_t budget; // leaf evaluations left
    rt_spec_eval se;
    rt_err scratch; // why an extent could not be evaluated (the caller reports its own)
} rt_gl_eval;

// Index vars bound by rt_gl_max_hi, sizes and reads of the bound length tensors.
static rt_status rt_gl_eval_leaf(rt_spec_eval *se, const rt_expr *e, int64_t *out) {
    rt_gl_eval *ev = se->ctx;
    int64_t idx[RT_MAX_DIMS], off;
    switch (e->kind) {
    case RT_EXPR_SIZE:
        if (e->sym < 0 || e->sym >= ev->op->n_sizes)
            break;
        *out = ev->b->sizes[e->sym];
        return RT_OK;
    case RT_EXPR_INDEX:
        if (e->var < 0 || e->var >= 64 || !ev->bound[e->var])
            break;
        *out = ev->vals[e->var];
        return RT_OK;
    case RT_EXPR_READ:
        for (int32_t i = 0; i < e->n_args && i < RT_MAX_DIMS; i++)
            RT_TRY(rt_spec_eval_int(se, e->args[i], &idx[i]));
        if (!rt_tensor_offset(ev->b, e->tensor, idx, &off))
            break;
        *out = (int64_t)ev->b->tensors[e->tensor].data[off];
        return RT_OK;
    default:
        break;
    }
    return rt_fail(se->err, RT_ERR_SPEC, e->loc, "not known before the launch");
}

static bool rt_gl_eval_int(rt_gl_eval *ev, const rt_expr *e, int64_t *out) {
    return rt_spec_eval_int(&ev->se, e, out) == RT_OK;
}

static void rt_gl_collect_vars(const rt_expr *e, uint64_t *mask) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_INDEX && e->var >= 0 && e->var < 64)
        *mask |= (uint64_t)1 << e->var;
    for (int32_t i = 0; i < e->n_args; i++)
        rt_gl_collect_vars(e->args[i], mask);
}

// Maximum of hi(v) over every assignment of the vars in deps (ascending), each in its range.
static bool rt_gl_max_hi(rt_gl_eval *ev, int32_t v, const int32_t *deps, int32_t n, int32_t i,
                         int64_t *best) {
    if (i == n) {
        int64_t h;
        if (--ev->budget < 0 || !rt_gl_eval_int(ev, ev->s->vars[v].hi, &h))
            return false;
        *best = h > *best ? h : *best;
        return true;
    }
    int32_t w = deps[i];
    int64_t lo, hi;
    if (!rt_gl_eval_int(ev, ev->s->vars[w].lo, &lo) || !rt_gl_eval_int(ev, ev->s->vars[w].hi, &hi))
        return false;
    ev->bound[w] = true;
    for (int64_t x = lo; x < hi; x++) {
        ev->vals[w] = x;
        if (!rt_gl_max_hi(ev, v, deps, n, i + 1, best))
            return false;
    }
    ev->bound[w] = false;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Work lists: the non-empty blocks of a phase, longest first
// ---------------------------------------------------------------------------------------------

typedef struct rt_gw_entry {
    int64_t x, y, z;   // grid x item, grid y and z blocks
    double work;       // product of the reduction ranges at the block's last live element
    int64_t live, ext; // live elements of the tile's ragged dims, product of their extents
    int64_t seq;       // position in grid order
} rt_gw_entry;

// The range [*lo, *hi) of var v of ev's statement with its bound vars; false when it reads a
// var not bound.
static bool rt_gw_range(rt_gl_eval *ev, int32_t v, int64_t *lo, int64_t *hi) {
    return rt_gl_eval_int(ev, ev->s->vars[v].lo, lo) && rt_gl_eval_int(ev, ev->s->vars[v].hi, hi);
}

// The blocks of ragged dim g (its var v) that hold an element of [lo, hi): [*first, *end).
static void rt_gw_blocks(int64_t lo, int64_t hi, int64_t tile, int64_t *first, int64_t *end) {
    int64_t from = lo > 0 ? lo : 0;
    *first = from / tile;
    *end = hi > from ? rt_ceil_div(hi, tile) : *first;
}

static bool rt_gw_is_var(const rt_expr *e, const void *v) {
    return e->kind == RT_EXPR_INDEX && e->var == *(const int32_t *)v;
}
static bool rt_gw_mentions(const rt_expr *e, int32_t v) {
    return rt_expr_any(e, rt_gw_is_var, &v);
}

static rt_status rt_gw_rows(const rt_gpu_kernel *k, const rt_gpu_phase_plan *pl, rt_gl_eval *evp,
                            const rt_gpu_dim *const *gd, const int32_t *xs, int32_t nxd, int64_t nx,
                            bool zdep, int64_t *zlo, int64_t *zhi, rt_gw_entry *out, int64_t *n,
                            rt_err *err);

// Walks phase p's non-empty blocks in grid order (x item, then y, then z), counting them into
// *n and, where out is not NULL, writing each.
static rt_status rt_gw_walk(const rt_gpu_kernel *k, const rt_gpu_phase *gp, rt_bindings *b,
                            rt_gw_entry *out, int64_t *n, rt_err *err) {
    const rt_gpu_phase_plan *pl = gp->work;
    const rt_stmt *s = &k->op->stmts[pl->tstmt];
    rt_gl_eval ev = {.op = k->op, .s = s, .b = b};
    ev.se = (rt_spec_eval){
        .op = k->op, .stmt = s, .err = &ev.scratch, .ctx = &ev, .leaf = rt_gl_eval_leaf};
    const rt_gpu_dim *gd[2] = {NULL, NULL};
    int32_t xs[RT_GPU_PLAN_MAX_DIMS], nxd = 0;
    int64_t nx = 1;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        if (pl->dims[d].grid == 0) {
            xs[nxd++] = d;
            nx *= pl->dims[d].nb;
        } else if (pl->dims[d].grid <= 2) {
            gd[pl->dims[d].grid - 1] = &pl->dims[d];
        }
    }
    if (!gd[0] || (gd[1] && gd[1]->members[0] >= 64) || gd[0]->members[0] >= 64)
        return rt_fail(err, RT_ERR_BACKEND, s->loc, "a work list needs a ragged grid y dim");
    int32_t vy0 = gd[0]->members[0];
    bool zdep = gd[1] && (rt_gw_mentions(s->vars[gd[1]->members[0]].lo, vy0) ||
                          rt_gw_mentions(s->vars[gd[1]->members[0]].hi, vy0));
    int64_t rows = zdep ? gd[0]->T1 : 1, zlo_one[1], zhi_one[1];
    int64_t *zlo = zdep ? malloc((size_t)rows * sizeof *zlo) : zlo_one;
    int64_t *zhi = zdep ? malloc((size_t)rows * sizeof *zhi) : zhi_one;
    rt_status st = RT_OK;
    if (!zlo || !zhi)
        st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (st == RT_OK)
        st = rt_gw_rows(k, pl, &ev, gd, xs, nxd, nx, zdep, zlo, zhi, out, n, err);
    if (zdep) {
        free(zlo);
        free(zhi);
    }
    return st;
}

// rt_gw_walk's loops; zlo / zhi hold grid z's range per row of a grid y tile (one row unless
// zdep).
static rt_status rt_gw_rows(const rt_gpu_kernel *k, const rt_gpu_phase_plan *pl, rt_gl_eval *evp,
                            const rt_gpu_dim *const *gd, const int32_t *xs, int32_t nxd, int64_t nx,
                            bool zdep, int64_t *zlo, int64_t *zhi, rt_gw_entry *out, int64_t *n,
                            rt_err *err) {
    const rt_stmt *s = &k->op->stmts[pl->tstmt];
    rt_gl_eval ev = *evp;
    ev.se.ctx = &ev;
    *n = 0;
    for (int64_t item = 0; item < nx; item++) {
        memset(ev.bound, 0, sizeof ev.bound);
        int64_t rest = item;
        for (int32_t i = nxd - 1; i >= 0; i--) {
            const rt_gpu_dim *g = &pl->dims[xs[i]];
            int64_t bc = i == 0 ? rest : rest % g->nb;
            rest = i == 0 ? rest : rest / g->nb;
            int32_t v = g->members[0];
            if (g->n_members == 1 && g->T1 == 1 && !g->ragged && v < 64) {
                ev.vals[v] = bc + g->mlo[0];
                ev.bound[v] = true;
            }
        }
        int32_t vy = gd[0]->members[0], vz = gd[1] ? gd[1]->members[0] : -1;
        int64_t ylo, yhi, y0, y1;
        ev.bound[vy] = false;
        if (!rt_gw_range(&ev, vy, &ylo, &yhi))
            return rt_fail(err, RT_ERR_SPEC, s->vars[vy].loc,
                           "cannot evaluate the range of '%s' for the work list", s->vars[vy].name);
        rt_gw_blocks(ylo, yhi, gd[0]->T1, &y0, &y1);
        for (int64_t y = y0; y < y1; y++) {
            int64_t ya = rt_max64(y * gd[0]->T1, ylo), yb = rt_min64((y + 1) * gd[0]->T1, yhi);
            // grid z's range at each row i of the tile where it reads grid y's var (a causal
            // mask), else once
            int64_t i0 = zdep ? ya : yb - 1, z0 = 0, z1 = 1;
            for (int64_t i = i0; i < yb && vz >= 0; i++) {
                ev.vals[vy] = i;
                ev.bound[vy] = true;
                ev.bound[vz] = false;
                int64_t *lo = &zlo[i - i0], *hi = &zhi[i - i0], f, e;
                if (!rt_gw_range(&ev, vz, lo, hi))
                    return rt_fail(err, RT_ERR_SPEC, s->vars[vz].loc,
                                   "cannot evaluate the range of '%s' for the work list",
                                   s->vars[vz].name);
                rt_gw_blocks(*lo, *hi, gd[1]->T1, &f, &e);
                z0 = i == i0 || f < z0 ? f : z0;
                z1 = i == i0 ? e : rt_max64(z1, e);
            }
            for (int64_t z = z0; z < z1; z++) {
                int64_t live = yb - ya, ext = yhi, last = yb - 1;
                if (vz >= 0) { // live elements over the rows, the last row holding one
                    int64_t zl = -1, ze = 0;
                    live = 0;
                    for (int64_t i = i0; i < yb; i++) {
                        int64_t za = rt_max64(z * gd[1]->T1, zlo[i - i0]);
                        int64_t zb = rt_min64((z + 1) * gd[1]->T1, zhi[i - i0]);
                        if (zb <= za)
                            continue;
                        live += zb - za;
                        last = i, zl = zb - 1, ze = zhi[i - i0];
                    }
                    if (live == 0)
                        continue;
                    live *= zdep ? 1 : yb - ya;
                    ext *= ze;
                    ev.vals[vz] = zl;
                    ev.bound[vz] = true;
                }
                ev.vals[vy] = last; // the last live element: the longest causal range
                ev.bound[vy] = true;
                double work = 1;
                for (int32_t v = 0; v < s->n_vars && v < 64; v++) {
                    int64_t lo, hi;
                    if (s->vars[v].is_reduce && rt_gw_range(&ev, v, &lo, &hi))
                        work *= (double)(hi > lo ? hi - lo : 0);
                }
                if (out)
                    out[*n] = (rt_gw_entry){.x = item,
                                            .y = y,
                                            .z = z,
                                            .work = work,
                                            .live = live,
                                            .ext = ext,
                                            .seq = *n};
                ++*n;
            }
        }
    }
    return RT_OK;
}

// Longest first: more work, then more live elements, then the longer sequence; grid order on a
// tie (qsort is not stable: seq makes the order total).
static int rt_gw_cmp(const void *pa, const void *pb) {
    const rt_gw_entry *a = pa, *b = pb;
    if (a->work != b->work)
        return a->work > b->work ? -1 : 1;
    if (a->live != b->live)
        return a->live > b->live ? -1 : 1;
    if (a->ext != b->ext)
        return a->ext > b->ext ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static rt_status rt_gw_check(const rt_gpu_kernel *k, int32_t phase, rt_err *err) {
    if (phase < 0 || phase >= k->n_phases)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "kernel has no phase %d (expected 0..%d)",
                       (int)phase, (int)k->n_phases - 1);
    if (!k->phases[phase].work)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "phase %d of %s runs no work list", (int)phase,
                       k->kir->name);
    return RT_OK;
}

rt_status rt_gpu_work_count(const rt_gpu_kernel *k, int32_t phase, rt_bindings *b, int64_t *out,
                            rt_err *err) {
    RT_TRY(rt_gw_check(k, phase, err));
    RT_TRY(rt_bindings_prepare(b, err));
    return rt_gw_walk(k, &k->phases[phase], b, NULL, out, err);
}

rt_status rt_gpu_work_list(rt_arena *a, const rt_gpu_kernel *k, int32_t phase, rt_bindings *b,
                           int32_t **out, int64_t *n_ints, rt_err *err) {
    int64_t n;
    RT_TRY(rt_gpu_work_count(k, phase, b, &n, err));
    if (n > (INT32_MAX - 1) / 3)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%lld blocks in one work list", (long long)n);
    rt_gw_entry *e;
    RT_ALLOC(a, e, rt_at_least_one((size_t)n), err);
    RT_TRY(rt_gw_walk(k, &k->phases[phase], b, e, &n, err));
    qsort(e, (size_t)n, sizeof *e, rt_gw_cmp);
    int32_t *w;
    RT_ALLOC(a, w, 1 + 3 * (size_t)n, err);
    w[0] = (int32_t)n;
    for (int64_t i = 0; i < n; i++) {
        if (e[i].x > INT32_MAX || e[i].y > INT32_MAX || e[i].z > INT32_MAX)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "a block index of the work list "
                           "exceeds int32");
        w[1 + 3 * i] = (int32_t)e[i].x;
        w[2 + 3 * i] = (int32_t)e[i].y;
        w[3 + 3 * i] = (int32_t)e[i].z;
    }
    *out = w;
    *n_ints = 1 + 3 * n;
    return RT_OK;
}

rt_status rt_gpu_phase_launch(const rt_gpu_kernel *k, int32_t phase, rt_bindings *b,
                              rt_gpu_launch *out, rt_err *err) {
    if (phase < 0 || phase >= k->n_phases)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "kernel has no phase %d (expected 0..%d)",
                       (int)phase, (int)k->n_phases - 1);
    const rt_gpu_phase *gp = &k->phases[phase];
    if (gp->by_level)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "phase %d of %s runs level by level: one launch per level "
                       "(rt_gpu_phase_steps)",
                       (int)phase, k->kir->name);
    memset(out, 0, sizeof *out);
    out->grid[0] = gp->grid_x;
    out->grid[1] = out->grid[2] = 1;
    out->block[0] = gp->threads;
    out->block[1] = out->block[2] = 1;
    if (gp->n_ragged > 0)
        RT_TRY(rt_bindings_prepare(b, err));
    if (gp->work) { // one block per entry; an empty list runs one block that exits
        int64_t n;
        RT_TRY(rt_gw_walk(k, gp, b, NULL, &n, err));
        out->grid[0] = rt_max64(1, n);
        return RT_OK;
    }
    for (int32_t i = 0; i < gp->n_ragged; i++) {
        const rt_gpu_ragged_grid *r = &gp->ragged[i];
        const rt_stmt *s = &k->op->stmts[r->stmt];
        rt_gl_eval ev = {.op = k->op, .s = s, .b = b, .budget = (int64_t)1 << 24};
        ev.se = (rt_spec_eval){
            .op = k->op, .stmt = s, .err = &ev.scratch, .ctx = &ev, .leaf = rt_gl_eval_leaf};
        // the vars hi depends on, transitively through their own ranges
        uint64_t mask = 0, done = 0;
        rt_gl_collect_vars(s->vars[r->var].hi, &mask);
        while (mask != done) {
            uint64_t pending = mask & ~done;
            for (int32_t w = 0; w < 64 && w < s->n_vars; w++)
                if (pending & ((uint64_t)1 << w)) {
                    rt_gl_collect_vars(s->vars[w].lo, &mask);
                    rt_gl_collect_vars(s->vars[w].hi, &mask);
                    done |= (uint64_t)1 << w;
                }
        }
        int32_t deps[64], n = 0;
        for (int32_t w = 0; w < 64 && w < s->n_vars; w++)
            if (mask & ((uint64_t)1 << w))
                deps[n++] = w;
        int64_t best = 0;
        if (!rt_gl_max_hi(&ev, r->var, deps, n, 0, &best))
            return rt_fail(err, RT_ERR_SPEC, s->vars[r->var].loc,
                           "cannot evaluate the extent of '%s' from the bound lengths",
                           s->vars[r->var].name);
        out->grid[1 + i] = rt_max64(1, rt_ceil_div(best, r->tile));
    }
    return RT_OK;
}

rt_status rt_gpu_phase_steps(rt_arena *a, const rt_gpu_kernel *k, int32_t phase,
                             const rt_gpu_binary *bin, rt_bindings *b, rt_gpu_step **out,
                             int32_t *n_out, rt_err *err) {
    if (phase < 0 || phase >= k->n_phases)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "kernel has no phase %d (expected 0..%d)",
                       (int)phase, (int)k->n_phases - 1);
    const rt_gpu_phase *gp = &k->phases[phase];
    if (!gp->by_level) {
        RT_ALLOC(a, *out, 1, err);
        (*out)->bin = bin;
        *n_out = 1;
        return rt_gpu_phase_launch(k, phase, b, &(*out)->cfg, err);
    }
    RT_TRY(rt_bindings_prepare(b, err));
    const rt_kir_levels *lv = &k->kir->phases[phase].levels;
    const rt_tree_data *t = b->trees[lv->tree];
    if (!t)
        return rt_fail(err, RT_ERR_SPEC, k->op->trees[lv->tree].loc, "tree '%s' is not bound",
                       k->op->trees[lv->tree].name);
    int32_t last = lv->last < 0 || lv->last > t->n_levels ? t->n_levels : lv->last;
    int32_t n = last > lv->first ? last - lv->first : 0;
    RT_ALLOC(a, *out, rt_at_least_one((size_t)n), err);
    for (int32_t i = 0; i < n; i++) {
        int32_t h = lv->first + i;
        int64_t nodes = t->level_begin[h + 1] - t->level_begin[h];
        rt_gpu_step *st = &(*out)[i];
        st->bin = bin;
        st->cfg.grid[0] = rt_max64(1, rt_ceil_div(nodes * gp->row, gp->threads));
        st->cfg.grid[1] = st->cfg.grid[2] = 1;
        st->cfg.block[0] = gp->threads;
        st->cfg.block[1] = st->cfg.block[2] = 1;
        st->n_ints = 1;
        st->ints[0] = h;
    }
    *n_out = n;
    return RT_OK;
}
