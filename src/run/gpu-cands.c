// gpu-cands.c: the GPU candidates of the run layer — each rank lowered and emitted by codegen in
// one target's dialect, and the top K compiled for the device in one parallel batch (the HAL's
// rt_gpu_compile_many: a thread pool, results in rank order whatever the threads), with their
// registers, spills, shared memory and occupancy.
#include "run-gpu-int.h"

#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Candidates
// ---------------------------------------------------------------------------------------------

rt_status rt_gpu_emit_candidate(rt_arena *a, const rt_perf_result *r, int32_t rank, rt_gpu_target t,
                                const rt_gpu_lower_options *opt, rt_gpu_candidate *out,
                                rt_err *err) {
    if (rank < 1 || rank > r->n_cands)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "no candidate of rank %d (expected 1..%d)",
                       (int)rank, (int)r->n_cands);
    rt_gpu_lower_options o = opt ? *opt : (rt_gpu_lower_options){0};
    o.rank = rank;
    memset(out, 0, sizeof *out);
    out->rank = rank;
    out->prog = &r->cands[rank - 1];
    out->target = t;
    out->regs = -1;
    const rt_perf_model *m = r->model;
    RT_TRY(rt_gpu_lower(a, m->op, m->dev, m, out->prog, &o, &out->kernel, err));
    return rt_gpu_emit(a, out->kernel, rt_gpu_dialect_of(t), &out->source, err);
}

// Candidate i's price with the registers its compiled kernel uses (rt_perf_reprice_compiled);
// a kernel whose block no longer fits a unit keeps the construction's price, and its note says
// so.
// The source's opening comment then gives the new price (the kernel's code is unchanged).
static void rt_gc_reprice(rt_arena *a, const rt_perf_result *r, int32_t i, rt_gpu_candidate *c) {
    rt_rprog *p = &r->cands[i];
    rt_rprog before = *p;
    const char *why = NULL;
    if (!rt_perf_reprice_compiled(r, p, c->regs, &why)) {
        *p = before;
        if (!c->note)
            c->note = "not priced with the compiler's registers: no block fits on a unit";
        return;
    }
    const rt_device *dev = r->model->dev;
    const char *was = rt_gpu_candidate_line(a, dev, &before, i + 1);
    const char *now = rt_gpu_candidate_line(a, dev, p, i + 1);
    const char *at = was && now && c->source ? strstr(c->source, was) : NULL;
    if (!at || !strcmp(was, now))
        return;
    char *text =
        rt_arena_printf(a, "%.*s%s%s", (int)(at - c->source), c->source, now, at + strlen(was));
    if (text)
        c->source = text;
}

// Emits the n candidates, then compiles all their phases in one batch on up to n_threads threads
// (rt_gpu_compile_many: its results are in job order whatever the threads) and folds each
// candidate's phases into its resources and occupancy.
rt_status rt_gc_loop_compile(void *ctx, int32_t n, int32_t n_threads, rt_err *err) {
    rt_gc_loop *L = ctx;
    rt_arena *a = L->a;
    const rt_perf_result *r = L->r;
    const rt_device *dev = L->dev;
    rt_gpu_target t = L->t;
    rt_gpu_candidate *cs = L->cs;
    if (!L->own) {
        for (int32_t i = 0; i < n; i++) {
            rt_gpu_lower_options lo = {.rank = i + 1, .spec_path = L->spec_path};
            RT_TRY(rt_gpu_emit_candidate(a, r, i + 1, t, &lo, &cs[i], err));
        }
        return RT_OK;
    }
    int32_t n_jobs = 0;
    for (int32_t i = 0; i < n; i++) {
        RT_TRY(rt_gpu_emit_candidate(a, r, i + 1, t, NULL, &cs[i], err));
        n_jobs += cs[i].kernel->n_phases;
    }
    rt_gpu_compile_job *jobs;
    RT_ALLOC(a, jobs, n_jobs, err);
    int32_t j = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t p = 0; p < cs[i].kernel->n_phases; p++, j++) {
            jobs[j].source = cs[i].source;
            jobs[j].kernel_name = cs[i].kernel->phases[p].kernel_name;
        }
    // One parallel batch; occupancy is then recomputed for each phase's own block size.
    rt_gpu_compile_options o = {.threads_per_block = 0};
    RT_TRY(rt_gpu_compile_many(a, dev, &o, n_threads, jobs, n_jobs, err));
    j = 0;
    for (int32_t i = 0; i < n; i++) {
        rt_gpu_candidate *c = &cs[i];
        int32_t np = c->kernel->n_phases;
        RT_ALLOC(a, c->bins, np, err);
        c->compiled = true;
        c->occupancy = 1.0;
        for (int32_t p = 0; p < np; p++, j++) {
            rt_gpu_compile_job *jb = &jobs[j];
            c->bins[p] = jb->out;
            if (jb->status != RT_OK || !jb->out) {
                if (c->compiled) {
                    c->compile_status = jb->status != RT_OK ? jb->status : RT_ERR_BACKEND;
                    c->compile_err = jb->err;
                }
                c->compiled = false;
                continue;
            }
            rt_gpu_binary *bin = jb->out;
            rt_err oe;
            rt_err_clear(&oe);
            rt_gpu_occupancy occ;
            if (rt_gpu_occupancy_of(dev, &bin->res, c->kernel->phases[p].threads, &occ, &oe) ==
                RT_OK)
                bin->occ = occ;
            c->regs = bin->res.regs > c->regs ? bin->res.regs : c->regs;
            if (bin->res.spill_store_bytes > 0)
                c->spill_bytes += bin->res.spill_store_bytes;
            if (bin->res.spill_load_bytes > 0)
                c->spill_bytes += bin->res.spill_load_bytes;
            c->smem_bytes =
                bin->res.smem_bytes > c->smem_bytes ? bin->res.smem_bytes : c->smem_bytes;
            if (bin->occ.occupancy < c->occupancy)
                c->occupancy = bin->occ.occupancy;
            snprintf(c->compiled_arch, sizeof c->compiled_arch, "%s", bin->compiled_arch);
            if (bin->note)
                c->note = bin->note;
        }
        if (!c->compiled)
            c->occupancy = 0.0;
        else if (c->regs > 0) // priced again with the compiler's registers (occupancy)
            rt_gc_reprice(a, r, i, c);
    }
    return RT_OK;
}

static const rt_run_hooks rt_gc_loop_hooks = {
    .backend = "gpu",
    .compile = rt_gc_loop_compile,
};

rt_status rt_gpu_compile_topk(rt_arena *a, const rt_perf_result *r, const rt_device *dev, int32_t n,
                              int32_t n_threads, rt_gpu_candidate **out, rt_err *err) {
    rt_gpu_target t;
    if (!rt_gpu_target_of_device(dev, &t))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device '%s' is not a GPU (expected class cuda, hip or opencl, got %s)",
                       dev->name, rt_devclass_name(dev->devclass));
    if (n > r->n_cands)
        n = r->n_cands;
    rt_gpu_candidate *cs;
    RT_ALLOC(a, cs, n, err);
    rt_gc_loop L = {a, r, dev, t, cs, true, NULL};
    rt_run_options ro = {.compile_threads = n_threads};
    int32_t winner;
    RT_TRY(rt_run_candidates(&rt_gc_loop_hooks, &L, n, &ro, &winner, err));
    *out = cs;
    return RT_OK;
}
