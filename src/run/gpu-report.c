// gpu-report.c: the GPU path of rtgen through the candidate loop (run.h) — the top K emitted in
// the chosen target, and for the device's own target compiled in one parallel batch, then,
// where the device is present (a GPU, or OpenCL on PoCL here), each checked against the
// reference and, when right, timed alone and ranked by its kernel median; and the report of it
// as JSON and as a table.
#include "run-gpu-int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

// Reference checks of GPU-structured kernels run the interpreter on the full operator: above
// this many iteration points they are skipped (shrink the op with --set to check it), unless
// the op is a contraction the random-vector check covers (src/ref/vcheck.h). Then the kernels'
// own runs bound the profile: one launch must fit in a second at RT_GPU_PROFILE_PEAK_FRACTION
// of the device's nominal f32 peak (H100: 6.7e11 points, an 8192^3 GEMM; PoCL here, 268.8
// nominal: 2.7e9, a 1024^3 GEMM, whose launches take 2.4 s at the 0.9 GFLOP/s PoCL reaches).
#define RT_GPU_CHECK_MAX_POINTS      (1 << 26)
#define RT_GPU_PROFILE_PEAK_FRACTION 0.02

// The GPU backend's steps of one loop: compile (or emit), then prepare decides whether anything
// runs (the runtime, the size, the fault) and computes the reference, then measure.
typedef struct rt_gr_loop {
    rt_gc_loop gc;
    rt_gp_loop gp;
    const rt_gpu_report_options *opt;
    rt_gpu_report *g;
    rt_gpu_time_options topt;
} rt_gr_loop;

static rt_status rt_gr_compile(void *ctx, int32_t n, int32_t threads, rt_err *err) {
    rt_gr_loop *L = ctx;
    rt_gpu_report *g = L->g;
    RT_TRY(rt_gc_loop_compile(&L->gc, n, threads, err));
    for (int32_t i = 0; i < n; i++) {
        const rt_gpu_candidate *c = &g->cands[i];
        g->status[i] = !L->gc.own ? "emitted" : c->compiled ? "compiled" : "compile failed";
        if (L->gc.own && !c->compiled)
            g->reason[i] = c->compile_err.msg;
    }
    return RT_OK;
}

// Run, check and time where the device is present: not with profiling off, another target, no
// device, or an operator too large for the reference check (g->not_profiled says which).
static rt_status rt_gr_prepare(void *ctx, bool *measure, rt_err *err) {
    rt_gr_loop *L = ctx;
    rt_gpu_report *g = L->g;
    rt_arena *a = L->gc.a;
    const rt_device *dev = L->gc.dev;
    const rt_perf_result *res = L->gc.r;
    *measure = false;
    if (!L->opt->profile) {
        g->not_profiled = "--no-profile";
        return RT_OK;
    }
    if (!L->gc.own) {
        g->not_profiled = rt_arena_printf(a, "emitted for %s, which is not the device's target",
                                          rt_gpu_dialect_of(L->gc.t)->target);
        return RT_OK;
    }
    rt_gpu_runtime *rt = NULL;
    rt_err open_err;
    rt_err_clear(&open_err);
    if (rt_gpu_runtime_open(a, dev, &rt, &open_err) != RT_OK) {
        if (!rt_gpu_err_is_absent(&open_err)) {
            *err = open_err;
            return open_err.status;
        }
        g->not_profiled = rt_arena_strdup(a, open_err.msg);
        return RT_OK;
    }
    const char *not_covered = NULL;
    double points = res->model ? res->model->real_points : 0.0;
    double launch_points =
        RT_GPU_PROFILE_PEAK_FRACTION * rt_hal_peak_gflops(dev, RT_DTYPE_F32, false) * 1e9 / 2;
    bool covered = L->opt->b && rt_vcheck_covers(L->opt->b->op, &not_covered);
    if (covered && points > (double)RT_GPU_CHECK_MAX_POINTS && points > launch_points) {
        g->not_profiled = rt_arena_printf(
            a,
            "%.3g iteration points: one launch would take over a second at %g%% of the device's "
            "nominal f32 peak; shrink the op with --set to run it",
            points, 100 * RT_GPU_PROFILE_PEAK_FRACTION);
        return RT_OK;
    }
    if (!covered && points > (double)RT_GPU_CHECK_MAX_POINTS) {
        g->not_profiled = rt_arena_printf(
            a,
            "%.3g iteration points exceed the reference check's limit of %d; shrink the op "
            "with --set to run it",
            points, RT_GPU_CHECK_MAX_POINTS);
        return RT_OK;
    }
    const char *fault = L->opt->test_fault;
    if (fault && *fault && strcmp(fault, "corrupt") != 0)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "RTGEN_TEST_FAULT: the GPU check takes only \"corrupt\" (got \"%s\")",
                       fault);
    L->topt.test_corrupt = fault && *fault;
    RT_ALLOC(a, g->res, g->n, err);
    L->gp = (rt_gp_loop){.a = a,
                         .rt = rt,
                         .dev = dev,
                         .cands = g->cands,
                         .b = L->opt->b,
                         .o = &L->topt,
                         .out = g->res};
    if (g->n <= 0)
        return RT_OK;
    RT_TRY(rt_gp_loop_prepare(&L->gp, measure, err));
    // GFLOP/s divide the arithmetic of the bound data (ragged lengths, triangles), counted once:
    // not the plan's FLOPs, which take the model's expected lengths.
    return rt_interp_flops(L->opt->b->op, L->opt->b, &g->flops, err);
}

static rt_status rt_gr_measure(void *ctx, int32_t i, double best_ns, rt_run_measure *m,
                               rt_err *err) {
    rt_gr_loop *L = ctx;
    RT_TRY(rt_gp_loop_measure(&L->gp, i, best_ns, m, err));
    L->g->status[i] = rt_gpu_cand_status_name(L->g->res[i].status);
    L->g->reason[i] = L->g->res[i].reason;
    return RT_OK;
}

static const rt_run_hooks rt_gr_hooks = {
    .backend = "gpu",
    .compile = rt_gr_compile,
    .prepare = rt_gr_prepare,
    .measure = rt_gr_measure,
};

rt_status rt_gpu_build_and_profile(rt_arena *a, const rt_device *dev, const rt_perf_result *res,
                                   const rt_gpu_report_options *opt, rt_gpu_report *g,
                                   rt_err *err) {
    memset(g, 0, sizeof *g);
    g->winner = -1;
    rt_gpu_target own;
    if (!rt_gpu_target_of_device(dev, &own))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin, "device class %s has no GPU target",
                       rt_devclass_name(dev->devclass));
    g->ext = rt_gpu_dialect_of(opt->target)->ext;
    g->n = res->n_cands;
    RT_ALLOC(a, g->status, g->n, err);
    RT_ALLOC(a, g->reason, g->n, err);
    RT_ALLOC(a, g->cands, g->n, err);
    rt_gr_loop L = {.gc = {a, res, dev, opt->target, g->cands, opt->target == own, opt->spec_path},
                    .opt = opt,
                    .g = g,
                    .topt = rt_gpu_time_defaults};
    rt_run_options ro = {
        .compile_threads = opt->compile_threads, .on_step = opt->on_step, .obs = opt->obs};
    return rt_run_candidates(&rt_gr_hooks, &L, g->n, &ro, &g->winner, err);
}

int32_t rt_gpu_report_model_choice(const rt_gpu_report *g) {
    int32_t best = -1;
    for (int32_t i = 0; i < g->n; i++)
        if (g->cands[i].compiled &&
            (best < 0 || g->cands[i].prog->predicted_ns < g->cands[best].prog->predicted_ns))
            best = i;
    return best < 0 ? 0 : best;
}

void *rt_gpu_report_to_json(const rt_gpu_report *g, const rt_perf_result *res) {
    json_t *arr = json_array();
    for (int32_t i = 0; i < g->n; i++) {
        const rt_gpu_candidate *c = &g->cands[i];
        json_t *j = json_object();
        json_object_set_new(j, "rank", json_integer(c->rank));
        json_object_set_new(j, "status", json_string(g->status[i]));
        if (g->reason[i])
            json_object_set_new(j, "reason", json_string(g->reason[i]));
        json_object_set_new(j, "winner", json_boolean(i == g->winner));
        json_object_set_new(j, "predicted_ns", json_real(res->cands[i].predicted_ns));
        json_t *phases = json_array();
        for (int32_t p = 0; p < c->kernel->n_phases; p++) {
            const rt_gpu_phase *ph = &c->kernel->phases[p];
            json_array_append_new(
                phases, json_pack("{s:s, s:I, s:i, s:i, s:I, s:b}", "kernel", ph->kernel_name,
                                  "grid_x", (json_int_t)ph->grid_x, "ragged_grid_dims",
                                  ph->n_ragged, "threads", ph->threads, "smem_bytes",
                                  (json_int_t)ph->smem_bytes, "staged", ph->staged));
        }
        json_object_set_new(j, "phases", phases);
        if (c->bins) {
            json_object_set_new(j, "compiled", json_boolean(c->compiled));
            json_object_set_new(j, "compiled_arch", json_string(c->compiled_arch));
            if (c->note)
                json_object_set_new(j, "compile_note", json_string(c->note));
            if (!c->compiled)
                json_object_set_new(j, "compile_error", json_string(c->compile_err.msg));
            json_object_set_new(j, "registers", json_integer(c->regs));
            json_object_set_new(j, "spill_bytes", json_integer(c->spill_bytes));
            json_object_set_new(j, "smem_bytes", json_integer(c->smem_bytes));
            json_object_set_new(j, "occupancy", json_real(c->occupancy));
        }
        const rt_gpu_result *r = g->res ? &g->res[i] : NULL;
        if (r && r->checked) { // the checked run's wall time: reported, never ranked
            json_object_set_new(j, "checked_run_ns", json_real(r->check.checked_run_ns));
            json_object_set_new(j, "check", json_string(r->check.check));
            json_object_set_new(j, "check_ns", json_real(r->check.check_ns));
            json_object_set_new(j, "max_rel_err", json_real(r->check.max_rel_err));
            json_object_set_new(j, "nmse", json_real(r->check.nmse));
        }
        if (r && r->status == RT_GPU_CAND_OK) { // the kernel alone: what ranks
            json_object_set_new(j, "kernel_min_ns", json_real(r->timing.min_ns));
            json_object_set_new(j, "kernel_median_ns", json_real(r->timing.median_ns));
            if (g->flops > 0 && r->timing.median_ns > 0) {
                json_object_set_new(j, "flops", json_real(g->flops));
                json_object_set_new(j, "gflops", json_real(g->flops / r->timing.median_ns));
            }
            json_object_set_new(j, "kernel_reps", json_integer(r->timing.reps));
            json_object_set_new(j, "kernel_warmup", json_integer(r->timing.warmup));
            json_object_set_new(j, "kernel_timed_with", json_string(r->timing.method));
        }
        json_array_append_new(arr, j);
    }
    return arr;
}

// The table: kernel min/median (the kernel alone, what ranks), the checked run (upload, launch,
// read-back; not ranked), then each failed candidate's reason and how the kernels were timed.
void rt_gpu_report_print(const rt_gpu_report *g, const rt_perf_result *res, rt_buf *out) {
    rt_buf_linef(out, 0, "rank %-16s %5s %7s %10s %6s %12s %12s %12s %12s %12s %10s", "status",
                 "regs", "spill_B", "smem_B", "occ", "predicted_us", "kernel_min_us",
                 "kernel_med_us", "run_us", "check_us", "max_rel");
    const rt_gpu_timing *timed = NULL;
    for (int32_t i = 0; i < g->n; i++) {
        const rt_gpu_candidate *c = &g->cands[i];
        const rt_gpu_result *r = g->res ? &g->res[i] : NULL;
        char kmin[32] = "-", kmed[32] = "-", run[32] = "-", chk[32] = "-", rel[32] = "-";
        if (r && r->checked) {
            snprintf(run, sizeof run, "%.2f", r->check.checked_run_ns / 1e3);
            snprintf(chk, sizeof chk, "%.2f%s", r->check.check_ns / 1e3,
                     r->check.check && strcmp(r->check.check, "random-vector") == 0 ? "v" : "");
            snprintf(rel, sizeof rel, "%.2e", r->check.max_rel_err);
        }
        if (r && r->status == RT_GPU_CAND_OK) {
            snprintf(kmin, sizeof kmin, "%.2f", r->timing.min_ns / 1e3);
            snprintf(kmed, sizeof kmed, "%.2f", r->timing.median_ns / 1e3);
            if (!timed || i == g->winner)
                timed = &r->timing;
        }
        rt_buf_linef(out, 0, "%4d %-16s %5d %7lld %10lld %6.2f %12.2f %12s %12s %12s %12s %10s%s",
                     (int)c->rank, g->status[i], (int)c->regs, (long long)c->spill_bytes,
                     (long long)c->smem_bytes, c->occupancy, res->cands[i].predicted_ns / 1e3, kmin,
                     kmed, run, chk, rel, i == g->winner ? "  <- winner" : "");
    }
    for (int32_t i = 0; i < g->n; i++)
        if (g->reason[i])
            rt_buf_linef(out, 0, "rank %d %s: %s", (int)g->cands[i].rank, g->status[i],
                         g->reason[i]);
    if (g->flops > 0 && g->winner >= 0) {
        double ns = g->res[g->winner].timing.median_ns;
        rt_buf_linef(out, 0,
                     "winner: %.4g useful FLOPs of the bound data (no padding) in %.2f us: %.1f "
                     "GFLOP/s",
                     g->flops, ns / 1e3, g->flops / ns);
    }
    if (timed)
        rt_buf_linef(out, 0,
                     "timing: kernel_*_us are all phases on device-resident buffers, %d "
                     "launches after %d warm-up, timed with %s; run_us is one checked run "
                     "with upload and read-back, check_us the check of its buffers (v: two "
                     "random vectors, else the interpreter's outputs), neither ranked",
                     (int)timed->reps, (int)timed->warmup, timed->method);
    if (g->n > 0 && g->cands[0].note)
        rt_buf_linef(out, 0, "note: %s", g->cands[0].note);
    if (g->not_profiled)
        rt_buf_linef(out, 0, "not profiled: %s", g->not_profiled);
}
