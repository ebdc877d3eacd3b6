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

// The run-off of the contenders within RT_RUN_RUNOFF_MARGIN of best among the n closest
// (close, ascending medians): the hook times them again, in rank order, and the lowest of its
// medians (the better rank on a tie) becomes the winner.
static rt_status rt_run_runoff(const rt_run_hooks *h, void *ctx, const rt_run_options *opt,
                               int32_t *close, const double *close_ns, int32_t n, double best,
                               int32_t *winner, rt_err *err) {
    int32_t k = 0;
    while (k < n && close_ns[k] <= best * (1.0 + RT_RUN_RUNOFF_MARGIN))
        k++;
    if (!h->runoff || k < 2)
        return RT_OK;
    for (int32_t i = 1; i < k; i++) // rank order
        for (int32_t j = i; j > 0 && close[j - 1] > close[j]; j--) {
            int32_t t = close[j];
            close[j] = close[j - 1], close[j - 1] = t;
        }
    if (opt->on_step)
        opt->on_step(opt->obs, "runoff", -1);
    double med[RT_RUN_RUNOFF_MAX] = {0};
    RT_TRY(h->runoff(ctx, close, k, med, err));
    double low = (double)INFINITY;
    for (int32_t j = 0; j < k; j++)
        if (med[j] > 0 && med[j] < low) {
            low = med[j];
            *winner = close[j];
        }
    return RT_OK;
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
    // The closest accepted medians so far (ascending; the better rank first on a tie).
    int32_t close[RT_RUN_RUNOFF_MAX];
    double close_ns[RT_RUN_RUNOFF_MAX];
    int32_t n_close = 0;
    for (int32_t i = 0; i < n; i++) {
        if (opt->on_step)
            opt->on_step(opt->obs, "measure", i);
        rt_run_measure m = {false, 0.0, false};
        RT_TRY(h->measure(ctx, i, best, &m, err));
        if (!m.accepted)
            continue;
        if (m.median_ns < best) {
            best = m.median_ns;
            *winner = i;
        }
        if (m.duplicate)
            continue;
        int32_t at = n_close;
        while (at > 0 && close_ns[at - 1] > m.median_ns)
            at--;
        if (at == RT_RUN_RUNOFF_MAX)
            continue;
        for (int32_t j = (n_close < RT_RUN_RUNOFF_MAX ? n_close : RT_RUN_RUNOFF_MAX - 1); j > at;
             j--)
            close[j] = close[j - 1], close_ns[j] = close_ns[j - 1];
        close[at] = i, close_ns[at] = m.median_ns;
        n_close += n_close < RT_RUN_RUNOFF_MAX;
    }
    return rt_run_runoff(h, ctx, opt, close, close_ns, n_close, best, winner, err);
}
