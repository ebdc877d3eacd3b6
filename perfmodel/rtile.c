// rtile.c: the statement as the micro-performance model sees it, and what an rTile implies.
//
// Builds rt_perf_model from the canonical IR (spec.h): the main statement's fused axes with
// their extents as distributions (vloops get length histograms), its tensor accesses as affine
// forms over those axes, and the fused prologue/epilogue statements as extra traffic. Then, for
// a tile shape: data tiles (Roller §3.1, halos of 2*y + r included), expected tile counts over
// ragged extents, memory footprint with bank padding, and traffic with transaction rounding
// (Roller §3.3 MemFootprint / MemTraffic). Construction (construct.c) and cost (cost.c) use it.
#include "perfmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Extent distributions
// ---------------------------------------------------------------------------------------------

rt_status rt_extent_dist_dense(rt_arena *a, int64_t value, rt_extent_dist *out, rt_err *err) {
    int64_t *v;
    double *w;
    RT_ALLOC(a, v, 1, err);
    RT_ALLOC(a, w, 1, err);
    v[0] = value < 0 ? 0 : value;
    w[0] = 1.0;
    out->n = 1;
    out->values = v;
    out->weights = w;
    return RT_OK;
}

rt_status rt_extent_dist_uniform(rt_arena *a, int64_t lo, int64_t hi, int32_t max_points,
                                 rt_extent_dist *out, rt_err *err) {
    if (lo < 0)
        lo = 0;
    if (hi < lo)
        hi = lo;
    if (max_points < 1)
        max_points = 1;
    int64_t count = hi - lo + 1;
    int32_t n = count < max_points ? (int32_t)count : max_points;
    int64_t *v;
    double *w;
    RT_ALLOC(a, v, n, err);
    RT_ALLOC(a, w, n, err);
    // Bucket i holds values (lo + floor(i*count/n), lo + floor((i+1)*count/n) - 1].
    for (int32_t i = 0; i < n; i++) {
        int64_t first = lo + (int64_t)((double)i * (double)count / n);
        int64_t last = lo + (int64_t)((double)(i + 1) * (double)count / n) - 1;
        if (i == n - 1)
            last = hi;
        if (last < first)
            last = first;
        v[i] = last;
        w[i] = (double)(last - first + 1) / (double)count;
    }
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += w[i];
    for (int32_t i = 0; i < n; i++)
        w[i] /= sum;
    out->n = n;
    out->values = v;
    out->weights = w;
    return RT_OK;
}

static int cmp_i64(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

// Sorted samples with more distinct values than RT_EXTENT_DIST_MAX_POINTS, in buckets of about
// n / RT_EXTENT_DIST_MAX_POINTS samples: a bucket ends at the first change of value past its
// share, is represented by its last (largest) value and weighs its samples' share.
static rt_status merged_samples(rt_arena *a, const int64_t *sorted, int32_t n, rt_extent_dist *out,
                                rt_err *err) {
    int64_t *v;
    double *w;
    RT_ALLOC(a, v, RT_EXTENT_DIST_MAX_POINTS, err);
    RT_ALLOC(a, w, RT_EXTENT_DIST_MAX_POINTS, err);
    int32_t k = 0, first = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t share = (int64_t)n * (k + 1) / RT_EXTENT_DIST_MAX_POINTS;
        if (i + 1 < n && (i + 1 < share || sorted[i + 1] == sorted[i]))
            continue;
        v[k] = sorted[i];
        w[k] = (double)(i + 1 - first) / n;
        first = i + 1;
        k++;
    }
    out->n = k;
    out->values = v;
    out->weights = w;
    return RT_OK;
}

rt_status rt_extent_dist_from_samples(rt_arena *a, const int64_t *samples, int32_t n, rt_loc loc,
                                      rt_extent_dist *out, rt_err *err) {
    if (n <= 0)
        return rt_fail(err, RT_ERR_SPEC, loc,
                       "length distribution is empty (expected at least "
                       "one length, got 0)");
    int64_t *sorted;
    RT_ALLOC(a, sorted, n, err);
    for (int32_t i = 0; i < n; i++) {
        if (samples[i] < 0)
            return rt_fail(err, RT_ERR_SPEC, loc,
                           "negative length (expected a non-negative integer, got %lld)",
                           (long long)samples[i]);
        sorted[i] = samples[i];
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    int32_t distinct = 0;
    for (int32_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1])
            distinct++;
    if (distinct > RT_EXTENT_DIST_MAX_POINTS)
        return merged_samples(a, sorted, n, out, err);
    int64_t *v;
    double *w;
    RT_ALLOC(a, v, distinct, err);
    RT_ALLOC(a, w, distinct, err);
    int32_t k = -1;
    for (int32_t i = 0; i < n; i++) {
        if (i == 0 || sorted[i] != sorted[i - 1])
            v[++k] = sorted[i];
        w[k] += 1.0 / n;
    }
    out->n = distinct;
    out->values = v;
    out->weights = w;
    return RT_OK;
}

void rt_extent_dist_coarsen(const rt_extent_dist *d, int32_t max_points, int64_t *values,
                            double *weights, rt_extent_dist *out) {
    if (max_points < 1 || d->n <= max_points) {
        *out = *d;
        return;
    }
    double total = 0, cum = 0, bw = 0, bs = 0;
    for (int32_t i = 0; i < d->n; i++)
        total += d->weights[i];
    int32_t n = 0;
    for (int32_t i = 0; i < d->n; i++) {
        cum += d->weights[i];
        bw += d->weights[i];
        bs += d->weights[i] * (double)d->values[i];
        // a bucket closes at its share of the weight, or where each point left must make a
        // bucket of its own; the last takes the rest
        bool close = i == d->n - 1 || (n < max_points - 1 && (cum >= total * (n + 1) / max_points ||
                                                              d->n - 1 - i <= max_points - 1 - n));
        if (!close)
            continue;
        values[n] = bw > 0 ? (int64_t)llround(bs / bw) : d->values[i];
        weights[n++] = bw;
        bw = bs = 0;
    }
    out->n = n;
    out->values = values;
    out->weights = weights;
}

double rt_extent_dist_mean(const rt_extent_dist *d) {
    double s = 0;
    for (int32_t i = 0; i < d->n; i++)
        s += d->weights[i] * (double)d->values[i];
    return s;
}

int64_t rt_extent_dist_max(const rt_extent_dist *d) {
    int64_t mx = 0;
    for (int32_t i = 0; i < d->n; i++)
        mx = rt_max64(mx, d->values[i]);
    return mx;
}

double rt_extent_dist_tiles(const rt_extent_dist *d, int64_t tile) {
    if (tile < 1)
        tile = 1;
    double s = 0;
    for (int32_t i = 0; i < d->n; i++)
        s += d->weights[i] * (double)rt_ceil_div(d->values[i], tile);
    return s;
}

double rt_extent_dist_padded(const rt_extent_dist *d, int64_t tile) {
    if (tile < 1)
        tile = 1;
    return rt_extent_dist_tiles(d, tile) * (double)tile;
}

// ---------------------------------------------------------------------------------------------
// Building the model
// ---------------------------------------------------------------------------------------------

typedef struct var_info {
    int32_t axis;   // axis of the model holding it
    int32_t member; // position inside the axis
    bool dense;
    int64_t extent; // dense extent or maximum
    double mean;
    rt_extent_dist dist;
    int32_t group; // length source (tensor index) or -1
} var_info;

static bool const_range(const rt_op *op, const rt_ivar *v, int64_t *ext) {
    int64_t lo, hi;
    if (!v->lo || !v->hi || !rt_expr_const_int(op, v->lo, &lo) ||
        !rt_expr_const_int(op, v->hi, &hi))
        return false;
    *ext = hi > lo ? hi - lo : 0;
    return true;
}

// Marks every statement variable read inside e (index positions) in used[].
static void collect_vars(const rt_expr *e, bool *used, int32_t n_vars) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_INDEX && e->var >= 0 && e->var < n_vars)
        used[e->var] = true;
    for (int32_t i = 0; i < e->n_args; i++)
        collect_vars(e->args[i], used, n_vars);
}

static const rt_perf_length_dist *find_length_entry(const rt_perf_options *opt, const char *name) {
    if (!opt || !name)
        return NULL;
    for (int32_t i = 0; i < opt->n_lengths; i++)
        if (opt->lengths[i].tensor && strcmp(opt->lengths[i].tensor, name) == 0 &&
            opt->lengths[i].dist.n > 0)
            return &opt->lengths[i];
    return NULL;
}

static const rt_extent_dist *find_length(const rt_perf_options *opt, const char *name) {
    const rt_perf_length_dist *e = find_length_entry(opt, name);
    return e ? &e->dist : NULL;
}

// The extent of every variable of st: dense, a length source, an affine bound, or the default.
static rt_status analyze_vars(rt_arena *a, rt_perf_model *m, const rt_stmt *st,
                              const rt_perf_options *opt, var_info *vi, bool *pin, rt_err *err) {
    const rt_op *op = m->op;
    int64_t dmax = opt && opt->default_max_len > 0 ? opt->default_max_len : RT_PERF_DEFAULT_MAX_LEN;
    // Dense first: affine bounds may refer to them.
    for (int32_t v = 0; v < st->n_vars; v++) {
        vi[v].group = -1;
        int64_t ext;
        if (const_range(op, &st->vars[v], &ext)) {
            vi[v].dense = true;
            vi[v].extent = ext;
            vi[v].mean = (double)ext;
            RT_TRY(rt_extent_dist_dense(a, ext, &vi[v].dist, err));
        }
    }
    for (int32_t v = 0; v < st->n_vars; v++) {
        if (vi[v].dense)
            continue;
        const rt_ivar *iv = &st->vars[v];
        const rt_expr *hi = iv->hi;
        int64_t lo = 0;
        if (iv->lo)
            (void)rt_expr_const_int(op, iv->lo, &lo);
        rt_affine aff;
        bool done = false;
        if (hi && hi->kind == RT_EXPR_READ && hi->tensor >= 0 && hi->tensor < op->n_tensors) {
            // lens(b): the length source is the tensor; b is pinned to tile 1.
            const rt_perf_length_dist *d = find_length_entry(opt, op->tensors[hi->tensor].name);
            if (d) {
                vi[v].dist = d->dist;
                if (d->note)
                    m->default_dist_note = d->note;
            } else {
                RT_TRY(rt_extent_dist_uniform(a, 1, dmax, RT_EXTENT_DIST_MAX_POINTS, &vi[v].dist,
                                              err));
                m->default_dist_note = rt_arena_printf(
                    a, "vloops without bound lengths: uniform over 1..%lld", (long long)dmax);
            }
            vi[v].group = hi->tensor;
            bool used[RT_PERF_MAX_AXES * 4] = {0};
            int32_t nv = st->n_vars < RT_PERF_MAX_AXES * 4 ? st->n_vars : RT_PERF_MAX_AXES * 4;
            collect_vars(hi, used, nv);
            for (int32_t u = 0; u < nv; u++)
                if (used[u])
                    pin[u] = true;
            done = true;
        } else if (hi && rt_expr_affine(op, hi, &aff)) {
            // e.g. k in 0:i+1 — the marginal of the bound over the outer variables' ranges.
            int64_t mn = aff.c0, mx = aff.c0;
            bool ok = true;
            for (int32_t t = 0; t < aff.n_terms && ok; t++) {
                int32_t u = aff.var[t];
                if (u < 0 || u >= st->n_vars || u == v) {
                    ok = false;
                    break;
                }
                int64_t ue = vi[u].dense ? vi[u].extent : rt_extent_dist_max(&vi[u].dist);
                if (!vi[u].dense && vi[u].dist.n == 0)
                    ue = dmax;
                int64_t span = aff.coef[t] * (ue > 0 ? ue - 1 : 0);
                if (span > 0)
                    mx += span;
                else
                    mn += span;
            }
            if (ok) {
                int64_t elo = rt_max64(1, mn - lo), ehi = rt_max64(elo, mx - lo);
                RT_TRY(rt_extent_dist_uniform(a, elo, ehi, RT_EXTENT_DIST_MAX_POINTS, &vi[v].dist,
                                              err));
                done = true;
            }
        }
        if (!done) {
            RT_TRY(rt_extent_dist_uniform(a, 1, dmax, RT_EXTENT_DIST_MAX_POINTS, &vi[v].dist, err));
            m->default_dist_note = rt_arena_printf(
                a, "vloops without bound lengths: uniform over 1..%lld", (long long)dmax);
        }
        vi[v].extent = rt_extent_dist_max(&vi[v].dist);
        vi[v].mean = rt_extent_dist_mean(&vi[v].dist);
    }
    return RT_OK;
}

// Arithmetic operations per iteration point (the reads' index expressions do not count).
static double count_ops(const rt_expr *e) {
    if (!e || rt_perf_expr_is_leaf(e))
        return 0;
    switch (e->kind) {
    case RT_EXPR_SUM:
        return 1 + count_ops(e->n_args > 0 ? e->args[0] : NULL);
    default: {
        double s = 1;
        for (int32_t i = 0; i < e->n_args; i++)
            s += count_ops(e->args[i]);
        return s;
    }
    }
}

static int64_t storage_extent(const rt_perf_model *m, const rt_tensor *t, int32_t d,
                              int64_t fallback) {
    int64_t v;
    if (d < t->n_dims && t->dims[d].extent && rt_expr_const_int(m->op, t->dims[d].extent, &v) &&
        v > 0)
        return v;
    return fallback > 0 ? fallback : 1;
}

// Is expression e exactly 1 * var?
static bool is_plain_var(const rt_op *op, const rt_expr *e, int32_t *var) {
    rt_affine aff;
    if (!e || !rt_expr_affine(op, e, &aff) || aff.n_terms != 1 || aff.coef[0] != 1 || aff.c0 != 0)
        return false;
    *var = aff.var[0];
    return true;
}

// Fills one access from its index expressions (args) or, for the output, lhs variables.
static void build_access(rt_perf_model *m, const rt_stmt *st, const var_info *vi, int32_t tensor,
                         rt_expr *const *args, const int32_t *lhs_vars, int32_t n_idx,
                         bool is_output, rt_perf_access *acc) {
    const rt_op *op = m->op;
    const rt_tensor *t = &op->tensors[tensor];
    memset(acc, 0, sizeof *acc);
    acc->tensor = tensor;
    acc->is_output = is_output;
    acc->elem_bytes = rt_dtype_bytes(t->dtype);
    int32_t nd = 0;
    for (int32_t d = 0; d < n_idx && nd < RT_MAX_DIMS;) {
        int32_t var = -1;
        bool plain = lhs_vars ? (var = lhs_vars[d], true) : is_plain_var(op, args[d], &var);
        if (plain && var >= 0 && var < st->n_vars && vi[var].axis >= 0) {
            int32_t ax = vi[var].axis;
            const rt_perf_axis *pa = &m->axes[ax];
            int32_t nm = 1;
            // A fused axis whose members appear as consecutive plain dims: one access dim.
            if (vi[var].member == 0 && ax < st->n_axes && st->axes[ax].n_members > 1) {
                const rt_axis *sa = &st->axes[ax];
                bool all = d + sa->n_members <= n_idx;
                for (int32_t k = 1; all && k < sa->n_members; k++) {
                    int32_t v2 = -1;
                    bool p2 = lhs_vars ? (v2 = lhs_vars[d + k], true)
                                       : is_plain_var(op, args[d + k], &v2);
                    all = p2 && v2 == sa->members[k];
                }
                if (all)
                    nm = sa->n_members;
            }
            int64_t ext = 1;
            for (int32_t k = 0; k < nm; k++) {
                int32_t vv = lhs_vars ? lhs_vars[d + k] : var;
                if (!lhs_vars && k > 0)
                    (void)is_plain_var(op, args[d + k], &vv);
                int64_t fb = vv >= 0 && vv < st->n_vars ? vi[vv].extent : 1;
                ext *= storage_extent(m, t, d + k, fb);
            }
            if (nm > 1)
                ext = rt_max64(ext, pa->extent);
            acc->affine[nd] = true;
            acc->coef[nd][ax] = 1;
            acc->dim_extent[nd] = ext;
            nd++;
            d += nm;
            continue;
        }
        rt_affine aff;
        int64_t fb = 1;
        if (!lhs_vars && rt_expr_affine(op, args[d], &aff)) {
            acc->affine[nd] = true;
            for (int32_t k = 0; k < aff.n_terms; k++) {
                int32_t v = aff.var[k];
                if (v < 0 || v >= st->n_vars || vi[v].axis < 0)
                    continue;
                int64_t c = aff.coef[k] < 0 ? -aff.coef[k] : aff.coef[k];
                acc->coef[nd][vi[v].axis] += c;
                fb = rt_max64(fb, c * vi[v].extent);
            }
        } else {
            bool used[64] = {0};
            int32_t nv = st->n_vars < 64 ? st->n_vars : 64;
            if (lhs_vars) {
                if (lhs_vars[d] >= 0 && lhs_vars[d] < nv)
                    used[lhs_vars[d]] = true;
            } else {
                collect_vars(args[d], used, nv);
            }
            acc->affine[nd] = false;
            for (int32_t v = 0; v < nv; v++)
                if (used[v] && vi[v].axis >= 0) {
                    acc->coef[nd][vi[v].axis] = 1;
                    fb = rt_max64(fb, vi[v].extent);
                }
        }
        acc->dim_extent[nd] = storage_extent(m, t, d, fb);
        nd++;
        d++;
    }
    if (nd == 0) { // a scalar: one element
        acc->affine[0] = true;
        acc->dim_extent[0] = 1;
        nd = 1;
    }
    acc->n_dims = nd;
    rt_perf_access_terms(m, acc);
}

void rt_perf_access_terms(const rt_perf_model *m, rt_perf_access *acc) {
    acc->axes_mask = 0;
    for (int32_t d = 0; d < acc->n_dims; d++) {
        acc->n_terms[d] = 0;
        for (int32_t x = 0; x < m->n_axes; x++)
            if (acc->coef[d][x]) {
                acc->term_axis[d][acc->n_terms[d]++] = (int8_t)x;
                acc->axes_mask |= 1u << x;
            }
    }
}

typedef struct read_list {
    int32_t n;
    const rt_expr *reads[64];
} read_list;

static void collect_reads(const rt_op *op, const rt_expr *e, read_list *rl) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_READ) {
        if (e->tensor < 0 || e->tensor >= op->n_tensors || op->tensors[e->tensor].is_length)
            return;
        for (int32_t i = 0; i < rl->n; i++) {
            const rt_expr *r = rl->reads[i];
            if (r->tensor != e->tensor || r->n_args != e->n_args)
                continue;
            bool same = true;
            for (int32_t k = 0; k < e->n_args && same; k++)
                same = rt_expr_equal(r->args[k], e->args[k]);
            if (same)
                return;
        }
        if (rl->n < 64)
            rl->reads[rl->n++] = e;
        return; // index expressions (gathers) are not data traffic of this model
    }
    for (int32_t i = 0; i < e->n_args; i++)
        collect_reads(op, e->args[i], rl);
}

static double stmt_points(const rt_op *op, const rt_stmt *st, int64_t dmax) {
    double p = 1;
    for (int32_t v = 0; v < st->n_vars; v++) {
        int64_t ext;
        p *= const_range(op, &st->vars[v], &ext) ? (double)ext : (double)dmax / 2;
    }
    return p;
}

// Cycles (rt_perf_cpu_expr_cycles) of the outermost sums inside e.
static double sum_cycles(const rt_device *dev, const rt_expr *e) {
    if (!e)
        return 0;
    if (e->kind == RT_EXPR_SUM)
        return rt_perf_cpu_expr_cycles(dev, e);
    double c = 0;
    for (int32_t i = 0; i < e->n_args; i++)
        c += sum_cycles(dev, e->args[i]);
    return c;
}

// CPU core cycles of a statement's vector instructions over its points (every var's, the
// summed ones of an '=' statement's sums included): expr_cycles per vector of its right-hand
// side, and an add per vector where it accumulates. What an '=' statement computes outside its
// sums runs once per element it stores, not once per summed point: the tanh of treernn's
// h(n, i) = tanh(sum_j ...) is one per (n, i), where counting it per (n, i, j) had predicted the
// 15-node recursion 18 times slower than it ran.
static double stmt_vector_cycles(const rt_device *dev, const rt_op *op, const rt_stmt *st,
                                 double expr_cycles, double points, int64_t dmax) {
    double lanes = dev->lanes > 0 ? dev->lanes : 1;
    double step = 1.0 / (dev->teus_per_unit > 0 ? dev->teus_per_unit : 1);
    double inner = st->op == RT_ASSIGN_SET ? sum_cycles(dev, st->rhs) : expr_cycles, summed = 1;
    for (int32_t v = 0; v < st->n_vars && st->op == RT_ASSIGN_SET; v++) {
        int64_t ext;
        if (st->vars[v].is_reduce)
            summed *= const_range(op, &st->vars[v], &ext) ? (double)ext : (double)dmax / 2;
    }
    double outer = expr_cycles - inner;
    return points / lanes *
           (inner + outer / (summed > 1 ? summed : 1) + (st->op != RT_ASSIGN_SET ? step : 0));
}

// The model's axes: the statement's canonical fused axes (dense, ragged, or a fused ragged axis
// with bulk padding), then the variables reduced inside sums; *n_axes their count.
static rt_status model_axes(rt_arena *a, rt_perf_model *m, const rt_stmt *st, var_info *vi,
                            const bool *pin, int32_t *n_axes, rt_err *err) {
    int32_t na = 0;
    for (int32_t x = 0; x < st->n_axes && na < RT_PERF_MAX_AXES; x++) {
        const rt_axis *ax = &st->axes[x];
        rt_perf_axis *pa = &m->axes[na];
        pa->name = ax->name ? ax->name : "?";
        pa->is_reduce = ax->is_reduce;
        pa->group = -1;
        double mean = 1;
        bool dense = true;
        for (int32_t k = 0; k < ax->n_members; k++) {
            int32_t v = ax->members[k];
            if (v < 0 || v >= st->n_vars)
                continue;
            vi[v].axis = na;
            vi[v].member = k;
            mean *= vi[v].mean;
            dense = dense && vi[v].dense;
            pa->pinned = pa->pinned || pin[v];
        }
        if (dense) {
            pa->extent = ax->extent >= 0 ? ax->extent : (int64_t)(mean + 0.5);
            RT_TRY(rt_extent_dist_dense(a, pa->extent, &pa->dist, err));
        } else if (ax->n_members == 1) {
            int32_t v = ax->members[0];
            pa->ragged = true;
            pa->dist = vi[v].dist;
            pa->extent = vi[v].extent;
            pa->group = vi[v].group >= 0 ? vi[v].group : 1000 + na;
        } else {
            // A fused ragged axis (b.i): bulk padding — one extent of sum(len) expected points.
            pa->ragged = true;
            pa->extent = rt_max64(1, (int64_t)(mean + 0.5));
            RT_TRY(rt_extent_dist_dense(a, pa->extent, &pa->dist, err));
        }
        if (pa->extent < 1) {
            pa->extent = 1;
            RT_TRY(rt_extent_dist_dense(a, 1, &pa->dist, err));
        }
        na++;
    }
    for (int32_t v = 0; v < st->n_vars && na < RT_PERF_MAX_AXES; v++) {
        if (vi[v].axis >= 0)
            continue;
        rt_perf_axis *pa = &m->axes[na];
        pa->name = st->vars[v].name ? st->vars[v].name : "?";
        pa->is_reduce = true;
        pa->group = vi[v].dense ? -1 : (vi[v].group >= 0 ? vi[v].group : 1000 + na);
        pa->ragged = !vi[v].dense;
        pa->dist = vi[v].dist;
        pa->extent = rt_max64(1, vi[v].extent);
        vi[v].axis = na;
        na++;
    }
    *n_axes = na;
    return RT_OK;
}

// Expected extent of a vloop bound or ragged dim extent e that reads a length tensor bound with a
// distribution (its mean); 0 when e is not one.
static double length_mean(const rt_op *op, const rt_perf_options *opt, const rt_expr *e) {
    if (!e || e->kind != RT_EXPR_READ || e->tensor < 0 || e->tensor >= op->n_tensors)
        return 0;
    const rt_extent_dist *d = find_length(opt, op->tensors[e->tensor].name);
    return d ? rt_extent_dist_mean(d) : 0;
}

// A fused statement's points and a tensor's bytes as stmt_points and tensor_bytes, with the
// expected length where a vloop or a ragged dim reads a bound length tensor (a ragged FFN's
// epilogue runs over sum(len) rows, not over B x dmax / 2).
static double fused_points(const rt_op *op, const rt_stmt *st, const rt_perf_options *opt,
                           int64_t dmax) {
    double p = 1;
    for (int32_t v = 0; v < st->n_vars; v++) {
        int64_t ext;
        double mean = length_mean(op, opt, st->vars[v].hi);
        p *= const_range(op, &st->vars[v], &ext) ? (double)ext : mean > 0 ? mean : (double)dmax / 2;
    }
    return p;
}

static double fused_tensor_bytes(const rt_perf_model *m, const rt_tensor *t,
                                 const rt_perf_options *opt, int64_t dmax) {
    double b = rt_dtype_bytes(t->dtype);
    for (int32_t d = 0; d < t->n_dims; d++) {
        int64_t v;
        double mean = length_mean(m->op, opt, t->dims[d].extent);
        b *= t->dims[d].extent && rt_expr_const_int(m->op, t->dims[d].extent, &v) ? (double)v
             : mean > 0                                                           ? mean
                        : (double)dmax / 2;
    }
    return b;
}

// The statements other than the main one: their reads of operator inputs and writes of
// outputs not counted yet, their FLOPs and vector cycles.
static void model_fused(rt_perf_model *m, int32_t best, const rt_perf_options *opt, int64_t dmax) {
    const rt_op *op = m->op;
    const rt_device *dev = m->dev;
    bool counted[256] = {0};
    for (int32_t i = 0; i < m->n_access; i++)
        if (m->access[i].tensor < 256)
            counted[m->access[i].tensor] = true;
    for (int32_t s = 0; s < op->n_stmts; s++) {
        if (s == best)
            continue;
        if (m->n_fused < 16)
            m->fused[m->n_fused++] = s;
        const rt_stmt *os = &op->stmts[s];
        read_list orl = {0};
        collect_reads(op, os->rhs, &orl);
        for (int32_t i = 0; i < orl.n; i++) {
            int32_t t = orl.reads[i]->tensor;
            if (t < 256 && !counted[t] && op->tensors[t].role == RT_ROLE_INPUT) {
                counted[t] = true;
                m->extra_dram_bytes += fused_tensor_bytes(m, &op->tensors[t], opt, dmax);
            }
        }
        if (os->out >= 0 && os->out < 256 && !counted[os->out] &&
            op->tensors[os->out].role == RT_ROLE_OUTPUT) {
            counted[os->out] = true;
            m->extra_dram_bytes += fused_tensor_bytes(m, &op->tensors[os->out], opt, dmax);
        }
        double ops = count_ops(os->rhs) + (os->op != RT_ASSIGN_SET ? 1 : 0);
        double points = fused_points(op, os, opt, dmax);
        m->extra_flops += points * (ops < 1 ? 1 : ops);
        m->fused_vector_cycles +=
            stmt_vector_cycles(dev, op, os, rt_perf_cpu_expr_cycles(dev, os->rhs), points, dmax);
    }
}

// The first tensor read in e other than length and index tensors, -1 when none.
static int32_t first_data_read(const rt_op *op, const rt_expr *e) {
    if (!e)
        return -1;
    if (e->kind == RT_EXPR_READ && !op->tensors[e->tensor].is_length &&
        !op->tensors[e->tensor].is_index)
        return e->tensor;
    for (int32_t i = 0; i < e->n_args; i++) {
        int32_t t = first_data_read(op, e->args[i]);
        if (t >= 0)
            return t;
    }
    return -1;
}

// Does e multiply reads of two different tensors (a contraction's product, which the CPU runs
// as a packed GEMM rather than on the general path)?
static bool has_product(const rt_op *op, const rt_expr *e) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_MUL && e->n_args == 2) {
        int32_t x = first_data_read(op, e->args[0]), y = first_data_read(op, e->args[1]);
        if (x >= 0 && y >= 0 && x != y)
            return true;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (has_product(op, e->args[i]))
            return true;
    return false;
}

// CPU: the main statement's accesses of temporaries that its row-wise group, run a row at a time
// (rt_perf_cpu_row_depth above 1), keeps in one row per thread (rt_perf_cpu_row_local): they
// move between L1 and the registers only (rt_perf_traffic_bytes), as in the backend's loop nest.
static void model_local(rt_perf_model *m) {
    const rt_op *op = m->op;
    int32_t g0, g1;
    if (m->thread_level >= 0 || !rt_perf_cpu_row_group(op, m->main_stmt, &g0, &g1) ||
        has_product(op, op->stmts[m->main_stmt].rhs))
        return;
    int32_t depth = rt_perf_cpu_row_depth(op, g0, g1);
    for (int32_t i = 0; i < m->n_access && depth > 1; i++)
        for (int32_t si = g0; si < g1; si++) {
            int64_t row;
            if (op->stmts[si].out == m->access[i].tensor &&
                rt_perf_cpu_row_local(op, g1, depth, si, &row))
                m->access[i].local = true;
        }
}

// The type the matrix units would multiply in: the output's, or a 16-bit float (or int8) that
// every tensor read of the main statement has (a half GEMM into a float C accumulates in f32).
static rt_dtype model_mma_dtype(const rt_perf_model *m) {
    const rt_op *op = m->op;
    const rt_expr *stack[64];
    int32_t sp = 0;
    rt_dtype in = RT_DTYPE_COUNT;
    stack[sp++] = op->stmts[m->main_stmt].rhs;
    while (sp > 0) {
        const rt_expr *e = stack[--sp];
        if (e->kind == RT_EXPR_READ) {
            rt_dtype t = op->tensors[e->tensor].dtype;
            if (op->tensors[e->tensor].is_length || op->tensors[e->tensor].is_index)
                continue;
            if (in != RT_DTYPE_COUNT && in != t)
                return m->dtype;
            in = t;
            continue;
        }
        for (int32_t i = 0; i < e->n_args && sp < 64; i++)
            stack[sp++] = e->args[i];
    }
    bool narrow = in == RT_DTYPE_F16 || in == RT_DTYPE_BF16 || in == RT_DTYPE_I8;
    return narrow && (m->dtype == RT_DTYPE_F32 || m->dtype == RT_DTYPE_I32) ? in : m->dtype;
}

// Level roles (from level properties only), whether the matrix units run it, and the peak.
static rt_status model_levels(rt_perf_model *m, const rt_perf_options *opt, rt_err *err) {
    const rt_device *dev = m->dev;
    int32_t na = m->n_axes;
    m->top = dev->n_levels - 1;
    m->thread_level = dev->level[m->top].scope == RT_MEM_SCOPE_THREAD ? m->top : -1;
    m->block_level = -1;
    for (int32_t l = 1; l < dev->n_levels; l++) {
        rt_mem_scope sc = dev->level[l].scope;
        if ((sc == RT_MEM_SCOPE_UNIT || sc == RT_MEM_SCOPE_BLOCK) && l != m->thread_level) {
            m->block_level = l;
            break;
        }
    }
    if (m->block_level < 0)
        m->block_level = m->thread_level >= 0 ? m->thread_level : 1;
    m->acc_persist = m->thread_level >= 0;
    bool has_red = false;
    for (int32_t x = 0; x < na; x++)
        has_red = has_red || m->axes[x].is_reduce;
    rt_dtype mt = model_mma_dtype(m);
    m->use_mma = !(opt && opt->no_mma) && has_red &&
                 (mt == RT_DTYPE_F16 || mt == RT_DTYPE_BF16 || mt == RT_DTYPE_I8) &&
                 dev->mma_gflops[mt] > 0 && dev->mma_m > 0 && dev->mma_n > 0 && dev->mma_k > 0;
    m->peak_gflops = rt_hal_peak_gflops(dev, m->use_mma ? mt : m->dtype, m->use_mma);
    if (!(m->peak_gflops > 0))
        m->peak_gflops = rt_hal_peak_gflops(dev, RT_DTYPE_F32, false);
    if (!(m->peak_gflops > 0))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device has no compute peak for %s (expected a positive [compute] "
                       "entry, got none)",
                       rt_dtype_name(m->dtype));
    return RT_OK;
}

rt_status rt_perf_model_build(rt_arena *a, const rt_op *op, const rt_device *dev,
                              const rt_perf_options *opt, rt_perf_model **out, rt_err *err) {
    if (!op || op->n_stmts <= 0)
        return rt_fail(err, RT_ERR_SPEC, op ? op->loc : RT_NOLOC,
                       "operator has no statement to construct tiles for");
    if (dev->n_levels < 2)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device has no memory level above level 0 (expected at least 2 levels, "
                       "got %d)",
                       dev->n_levels);
    rt_perf_model *m;
    RT_ALLOC(a, m, 1, err);
    RT_ALLOC(a, m->steps, 1, err);
    m->op = op;
    m->dev = dev;
    int64_t dmax = opt && opt->default_max_len > 0 ? opt->default_max_len : RT_PERF_DEFAULT_MAX_LEN;
    // Main statement: the most iteration points; ties go to reductions, then to the first.
    int32_t best = 0;
    double best_pts = -1;
    for (int32_t s = 0; s < op->n_stmts; s++) {
        const rt_stmt *st = &op->stmts[s];
        double pts = stmt_points(op, st, dmax);
        bool red = st->op != RT_ASSIGN_SET;
        bool best_red = op->stmts[best].op != RT_ASSIGN_SET;
        if (pts > best_pts * (1 + 1e-9) || (pts >= best_pts * (1 - 1e-9) && red && !best_red)) {
            best = s;
            best_pts = pts;
        }
        if (st->recursive || st->n_preds > 0)
            m->recursive = true;
    }
    m->main_stmt = best;
    const rt_stmt *st = &op->stmts[best];
    if (st->n_vars > 64)
        return rt_fail(err, RT_ERR_SPEC, st->loc,
                       "statement has too many index variables (expected at most 64, got %d)",
                       st->n_vars);
    m->assign = st->op;
    m->dtype = op->tensors[st->out].dtype;

    // Axes: the canonical fused axes, then variables reduced inside sums.
    var_info vi[64];
    bool pin[64];
    memset(vi, 0, sizeof vi);
    memset(pin, 0, sizeof pin);
    for (int32_t v = 0; v < st->n_vars; v++)
        vi[v].axis = -1;
    RT_TRY(analyze_vars(a, m, st, opt, vi, pin, err));
    int32_t na;
    RT_TRY(model_axes(a, m, st, vi, pin, &na, err));
    m->n_axes = na;
    // Pinned axes stay dense in the tile count: one tile per batch entry.
    for (int32_t x = 0; x < na; x++)
        if (m->axes[x].pinned && m->axes[x].ragged)
            m->axes[x].pinned = false; // a vloop itself is never pinned

    // Accesses: reads of the right-hand side, then the output.
    read_list rl = {0};
    collect_reads(op, st->rhs, &rl);
    int32_t nacc = 0;
    for (int32_t i = 0; i < rl.n && nacc < RT_PERF_MAX_ACCESS - 1; i++)
        build_access(m, st, vi, rl.reads[i]->tensor, rl.reads[i]->args, NULL, rl.reads[i]->n_args,
                     false, &m->access[nacc++]);
    build_access(m, st, vi, st->out, NULL, st->lhs_vars, st->n_lhs, true, &m->access[nacc++]);
    m->n_access = nacc;
    m->flops_per_point = count_ops(st->rhs) + (st->op != RT_ASSIGN_SET ? 1 : 0);
    if (m->flops_per_point < 1)
        m->flops_per_point = 1;
    int64_t one[RT_PERF_MAX_AXES];
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        one[x] = 1;
    m->real_points = rt_perf_padded_points(m, one);
    m->main_expr_cycles = rt_perf_cpu_expr_cycles(dev, st->rhs);
    m->main_vector_cycles =
        stmt_vector_cycles(dev, op, st, m->main_expr_cycles, m->real_points, dmax);

    model_fused(m, best, opt, dmax);

    RT_TRY(model_levels(m, opt, err));
    rt_perf_tri_access_view(m);
    model_local(m);
    m->warm = rt_perf_cpu_warm(m);
    m->l2_share = m->warm ? rt_perf_cpu_l2_share(m) : 0;
    rt_perf_cpu_flat_axis(m, st, &m->flat);
    if (m->thread_level < 0) {
        m->gemm_memo = rt_perf_gemm_memo_new(a);
        if (!m->gemm_memo)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    *out = m;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// What a tile implies
// ---------------------------------------------------------------------------------------------

// Extent of dim d of access acc's data tile for shape.
static int64_t data_tile_dim(const rt_perf_access *acc, int32_t d, const int64_t *shape) {
    int64_t ext = 1;
    for (int32_t k = 0; k < acc->n_terms[d]; k++) {
        int32_t x = acc->term_axis[d][k];
        if (acc->affine[d])
            ext += acc->coef[d][x] * (shape[x] - 1);
        else
            ext *= shape[x];
    }
    if (acc->dim_extent[d] > 0 && ext > acc->dim_extent[d])
        ext = acc->dim_extent[d];
    return ext < 1 ? 1 : ext;
}

void rt_perf_data_tile(const rt_perf_model *m, int32_t i, const int64_t *shape, int64_t *out) {
    const rt_perf_access *acc = &m->access[i];
    for (int32_t d = 0; d < acc->n_dims; d++)
        out[d] = data_tile_dim(acc, d, shape);
}

int64_t rt_perf_data_tile_inner(const rt_perf_model *m, int32_t i, const int64_t *shape) {
    const rt_perf_access *acc = &m->access[i];
    return data_tile_dim(acc, acc->n_dims - 1, shape);
}

void rt_perf_data_tiles(const rt_perf_model *m, const int64_t *shape,
                        const int64_t (*from)[RT_MAX_DIMS], int32_t axis,
                        int64_t (*out)[RT_MAX_DIMS]) {
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        if (from && !(acc->axes_mask >> axis & 1u))
            memcpy(out[i], from[i], sizeof(int64_t) * (size_t)acc->n_dims);
        else
            rt_perf_data_tile(m, i, shape, out[i]);
    }
}

// ceil(e / t) for e >= 0 and t >= 1, without dividing when one tile covers e.
static int64_t tiles_of(int64_t e, int64_t t) {
    return e >= 0 && t >= e ? (e > 0) : rt_ceil_div(e, t);
}

// E[prod f(v, T_a)] over axes, f = ceil(v/T) (count) or ceil(v/T)*T (padded) or v (real).
static double expect_over_axes(const rt_perf_model *m, const int64_t *shape, bool spatial_only,
                               int mode) {
    double r = 1;
    bool done[RT_PERF_MAX_AXES] = {0};
    for (int32_t x = 0; x < m->n_axes; x++) {
        const rt_perf_axis *ax = &m->axes[x];
        if (done[x] || (spatial_only && ax->is_reduce))
            continue;
        int64_t t = shape[x] < 1 ? 1 : shape[x];
        if (ax->group < 0 || ax->dist.n <= 1) {
            int64_t e = ax->dist.n == 1 ? ax->dist.values[0] : ax->extent;
            r *= mode == 0   ? (double)tiles_of(e, t)
                 : mode == 1 ? (double)(tiles_of(e, t) * t)
                             : (double)e;
            continue;
        }
        // Joint expectation over the axes sharing this length source.
        double s = 0;
        rt_perf_count_steps(m, ax->dist.n);
        for (int32_t k = 0; k < ax->dist.n; k++) {
            int64_t v = ax->dist.values[k];
            double p = 1;
            for (int32_t y = x; y < m->n_axes; y++) {
                const rt_perf_axis *ay = &m->axes[y];
                if (ay->group != ax->group || (spatial_only && ay->is_reduce))
                    continue;
                int64_t ty = shape[y] < 1 ? 1 : shape[y];
                p *= mode == 0   ? (double)rt_ceil_div(v, ty)
                     : mode == 1 ? (double)(rt_ceil_div(v, ty) * ty)
                                 : (double)v;
            }
            s += ax->dist.weights[k] * p;
        }
        for (int32_t y = x; y < m->n_axes; y++)
            if (m->axes[y].group == ax->group)
                done[y] = true;
        r *= s;
    }
    return r;
}

double rt_perf_tile_count(const rt_perf_model *m, const int64_t *shape, bool spatial_only) {
    return expect_over_axes(m, shape, spatial_only, 0);
}

double rt_perf_axis_tiles(const rt_perf_model *m, int32_t x, int64_t tile) {
    const rt_perf_axis *ax = &m->axes[x];
    int64_t e = ax->dist.n == 1 ? ax->dist.values[0] : ax->extent;
    return (double)tiles_of(e, tile < 1 ? 1 : tile);
}

void rt_perf_tile_counts_of(const rt_perf_model *m, const double *f, double *n_all, double *n_sp) {
    double ra = 1, rs = 1;
    for (int32_t x = 0; x < m->n_axes; x++) {
        ra *= f[x];
        if (!m->axes[x].is_reduce)
            rs *= f[x];
    }
    *n_all = ra;
    *n_sp = rs;
}

// rt_perf_tile_count(m, shape, false) in *n_all and (.., true) in *n_sp: over dense axes in one
// pass (the same products in the same order), else as two calls.
static void tile_counts(const rt_perf_model *m, const int64_t *shape, double *n_all, double *n_sp) {
    double ra = 1, rs = 1;
    for (int32_t x = 0; x < m->n_axes; x++) {
        const rt_perf_axis *ax = &m->axes[x];
        if (ax->group >= 0 && ax->dist.n > 1) {
            *n_all = expect_over_axes(m, shape, false, 0);
            *n_sp = expect_over_axes(m, shape, true, 0);
            return;
        }
        int64_t e = ax->dist.n == 1 ? ax->dist.values[0] : ax->extent;
        double f = (double)tiles_of(e, shape[x] < 1 ? 1 : shape[x]);
        ra *= f;
        if (!ax->is_reduce)
            rs *= f;
    }
    *n_all = ra;
    *n_sp = rs;
}

double rt_perf_padded_points(const rt_perf_model *m, const int64_t *shape) {
    return expect_over_axes(m, shape, false, 1);
}

int64_t rt_perf_bank_pad_elems(int32_t banks, int32_t bank_bytes, int32_t elem_bytes,
                               int64_t n_elems, int64_t reader_elems) {
    if (banks <= 0 || bank_bytes <= 0 || elem_bytes <= 0)
        return 0;
    int64_t bl = (int64_t)banks * bank_bytes;
    int64_t nb = n_elems * elem_bytes, rb = reader_elems * elem_bytes;
    int64_t pad_bytes = (bl - nb % bl + bank_bytes * rt_ceil_div(rb, bank_bytes)) % bl;
    return rt_ceil_div(pad_bytes, elem_bytes);
}

int64_t rt_perf_capacity_bytes(const rt_perf_model *m, int32_t level) {
    const rt_mem_level *l = &m->dev->level[level];
    int64_t cap = l->tile_capacity_bytes > 0 ? l->tile_capacity_bytes : l->capacity_bytes;
    if (l->managed == RT_MEM_CACHE && l->ways > 1 && l->tile_capacity_bytes <= 0)
        cap = cap / l->ways * (l->ways - 1); // one way left to streaming data (BLIS)
    return cap;
}

// Does the footprint at level count the output's data tile?
static bool footprint_with_out(const rt_perf_model *m, int32_t level) {
    return level == m->top || m->dev->level[level].managed == RT_MEM_CACHE;
}

int64_t rt_perf_footprint_of(const rt_perf_model *m, int32_t level,
                             const int64_t (*dt)[RT_MAX_DIMS], const int64_t *reader,
                             int64_t *pad_out) {
    const rt_mem_level *l = &m->dev->level[level];
    bool with_out = footprint_with_out(m, level);
    bool banked = l->managed == RT_MEM_EXPLICIT && l->banks > 0 && l->bank_bytes > 0 &&
                  level != m->thread_level && level != m->top;
    int64_t total = 0;
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        int64_t pad = 0;
        if (acc->is_output && !with_out) {
            if (pad_out)
                pad_out[i] = 0;
            continue;
        }
        int64_t rows = 1;
        for (int32_t d = 0; d + 1 < acc->n_dims; d++)
            rows *= dt[i][d];
        int64_t inner = dt[i][acc->n_dims - 1];
        if (banked && rows > 1 && !acc->is_output) {
            int64_t reader_inner = reader ? rt_perf_data_tile_inner(m, i, reader) : 1;
            pad = rt_perf_bank_pad_elems(l->banks, l->bank_bytes, acc->elem_bytes, inner,
                                         reader_inner);
        }
        if (pad_out)
            pad_out[i] = pad;
        total += rows * (inner + pad) * acc->elem_bytes;
    }
    return total;
}

int64_t rt_perf_footprint_bytes(const rt_perf_model *m, int32_t level, const int64_t *shape,
                                const int64_t *reader, int64_t *pad_out) {
    bool with_out = footprint_with_out(m, level);
    int64_t dt[RT_PERF_MAX_ACCESS][RT_MAX_DIMS];
    for (int32_t i = 0; i < m->n_access; i++)
        if (!m->access[i].is_output || with_out)
            rt_perf_data_tile(m, i, shape, dt[i]);
    return rt_perf_footprint_of(m, level, (const int64_t(*)[RT_MAX_DIMS])dt, reader, pad_out);
}

// Bytes of one data tile moved with transactions of txn bytes.
static double rounded_bytes(const rt_perf_access *acc, const int64_t *dt, int32_t txn) {
    int64_t rows = 1;
    for (int32_t d = 0; d + 1 < acc->n_dims; d++)
        rows *= dt[d];
    int64_t inner = dt[acc->n_dims - 1] * acc->elem_bytes;
    if (txn <= 0)
        return (double)rows * (double)inner;
    if (dt[acc->n_dims - 1] >= acc->dim_extent[acc->n_dims - 1]) // whole rows: contiguous
        return (double)rt_round_up(rows * inner, txn);
    return (double)rows * (double)rt_round_up(inner, txn);
}

// Traffic from the data tiles and the tile counts: the output's passes over the reduction from
// red_shape's counts (computed here, once per output access), else from n_red when it is not
// negative, else from n_all / n_sp.
static double traffic_sum(const rt_perf_model *m, int32_t level, const int64_t (*dt)[RT_MAX_DIMS],
                          double n_all, double n_sp, const int64_t *red_shape, double n_red_in) {
    const rt_mem_level *src = &m->dev->level[level > 0 ? level - 1 : 0];
    // Registers are filled by per-thread (vector) loads: no transaction rounding into them.
    int32_t txn = level == m->top              ? 0
                  : src->transaction_bytes > 0 ? src->transaction_bytes
                                               : src->line_bytes;
    double in = 0, out = 0;
    for (int32_t i = 0; i < m->n_access; i++) {
        if (m->access[i].local && level < m->top)
            continue; // a row in L1 scratch: nothing moves into the caches (model_local)
        double b = rounded_bytes(&m->access[i], dt[i], txn);
        if (!m->access[i].is_output) {
            in += b;
            continue;
        }
        double passes = 1;
        if (!m->acc_persist) {
            double n_red = n_red_in >= 0 ? n_red_in : n_all / n_sp;
            if (red_shape) {
                double red_all, red_sp;
                tile_counts(m, red_shape, &red_all, &red_sp);
                n_red = red_all / red_sp;
            }
            if (n_red > 1)
                passes = 2 * n_red - 1;
        }
        if (m->assign == RT_ASSIGN_ADD)
            passes += 1;
        out += b * passes;
    }
    double t = n_all * in + n_sp * out;
    // The fused statements' compulsory traffic (their inputs and outputs, once): into the
    // level that takes it from DRAM, and for a warm operator (rt_perf_cpu_warm: its tensors
    // stay in the last-level cache, whose fill is not priced) into the level below, where its
    // compulsory traffic is priced instead: a fused softmax's Y (as much as its X) went
    // unpriced, predicted at a third of its measured time.
    if (level == 1 || (m->warm && level == 2))
        t += m->extra_dram_bytes;
    return t;
}

double rt_perf_traffic_of(const rt_perf_model *m, int32_t level, const int64_t *shape,
                          const int64_t (*dt)[RT_MAX_DIMS], const int64_t *red_shape) {
    double n_all, n_sp;
    tile_counts(m, shape, &n_all, &n_sp);
    return traffic_sum(m, level, dt, n_all, n_sp, red_shape, -1);
}

double rt_perf_traffic_counted(const rt_perf_model *m, int32_t level,
                               const int64_t (*dt)[RT_MAX_DIMS], double n_all, double n_sp,
                               double n_red) {
    return traffic_sum(m, level, dt, n_all, n_sp, NULL, n_red);
}

double rt_perf_traffic_bytes(const rt_perf_model *m, int32_t level, const int64_t *shape,
                             const int64_t *red_shape) {
    int64_t dt[RT_PERF_MAX_ACCESS][RT_MAX_DIMS];
    for (int32_t i = 0; i < m->n_access; i++)
        if (!(m->access[i].local && level < m->top))
            rt_perf_data_tile(m, i, shape, dt[i]);
    return rt_perf_traffic_of(m, level, shape, (const int64_t(*)[RT_MAX_DIMS])dt, red_shape);
}
