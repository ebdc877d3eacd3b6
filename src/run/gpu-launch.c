// gpu-launch.c: the launches of a lowered GPU kernel on bound data — the grid of each phase, its
// ragged dims sized from the bound lengths (the maximum extent over the bound values), and the
// one-launch-per-level steps of a phase that runs a tree level by level. Extents are evaluated
// by the shared integer evaluator (spec-eval.h).
#include "run-gpu.h"
#include "spec-eval.h"

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
