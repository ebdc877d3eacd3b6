// run.c: the candidate loop of the run layer (run.h) and the host data its backends share.
#include "run.h"

#include <math.h>

const int32_t *rt_run_tree_array(const rt_tree_data *t, rt_kir_tree_field f, int64_t *n) {
    switch (f) {
    case RT_KIR_TREE_CHILD:
        *n = (int64_t)t->n_nodes * t->max_children;
        return t->child;
    case RT_KIR_TREE_ORDER:
        *n = t->n_nodes;
        return t->order;
    case RT_KIR_TREE_LEVEL_BEGIN:
        *n = (int64_t)t->n_levels + 1;
        return t->level_begin;
    case RT_KIR_TREE_N_LEVELS:
        *n = 1;
        return &t->n_levels;
    default:
        *n = 0;
        return NULL;
    }
}

rt_status rt_run_candidates(const rt_run_hooks *h, void *ctx, int32_t n, const rt_run_options *opt,
                            int32_t *winner, rt_err *err) {
    *winner = -1;
    rt_run_options defaults = {0};
    if (!opt)
        opt = &defaults;
    if (n < 0)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%d candidates (expected at least 0)", (int)n);
    if (h->compile) {
        if (opt->on_step)
            opt->on_step(opt->obs, "compile", -1);
        RT_TRY(h->compile(ctx, n, opt->compile_threads > 0 ? opt->compile_threads : 2, err));
    }
    bool measure = h->measure != NULL;
    if (measure && h->prepare) {
        if (opt->on_step)
            opt->on_step(opt->obs, "prepare", -1);
        RT_TRY(h->prepare(ctx, &measure, err));
    }
    if (!measure)
        return RT_OK;
    double best = (double)INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (opt->on_step)
            opt->on_step(opt->obs, "measure", i);
        rt_run_measure m = {false, 0.0};
        RT_TRY(h->measure(ctx, i, best, &m, err));
        if (m.accepted && m.median_ns < best) {
            best = m.median_ns;
            *winner = i;
        }
    }
    return RT_OK;
}
