// gpu-profile.c: the run layer's GPU candidates on a live device (a GPU, or OpenCL on PoCL).
// Check first: each candidate runs once, all phases in order on device-resident buffers, on the
// seeded data of the bindings, with the buffers it writes poisoned, and every output is compared
// with the reference interpreter through the one acceptance rule (rt_compare_accept) -- or, for a
// contraction too large to interpret quickly, checked with two random vectors against
// alpha A (B t) (src/ref/vcheck.h) -- while every buffer it only reads must come back unchanged. Then time: each candidate that passed is timed
// alone (rt_gpu_time_steps: warm-up, repetitions, device events), and the winner is the lowest
// kernel median among them. The checked run's wall time (uploads, read-back, first-use builds)
// is reported, never ranked.
#include "run-gpu-int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const rt_gpu_time_options rt_gpu_time_defaults = {
    .warmup = 2, .min_reps = 5, .max_reps = 100, .budget_ns = 2e8};

// ORDER RT_GPU_CAND
static const char *const rt_gpu_cand_status_names[] = {"compiled", "compile failed", "run failed",
                                                       "wrong", "ok"};
_Static_assert(sizeof rt_gpu_cand_status_names / sizeof *rt_gpu_cand_status_names ==
                   RT_GPU_CAND_COUNT,
               "ORDER RT_GPU_CAND");

const char *rt_gpu_cand_status_name(rt_gpu_cand_status st) {
    return (unsigned)st < RT_GPU_CAND_COUNT ? rt_gpu_cand_status_names[st] : "?";
}

static double rt_gp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

// ---------------------------------------------------------------------------------------------
// The reference
// ---------------------------------------------------------------------------------------------

// The random-vector check's reference when op is a contraction the interpreter would take
// long on (vcheck.h): ref->vc set; else ref->vc stays NULL. An input that is not finite leaves
// it to the interpreter.
static rt_status rt_gp_vector_reference(rt_arena *a, const rt_op *op, rt_bindings *b,
                                        rt_gp_ref *ref, rt_err *err) {
    rt_vcheck *vc = NULL;
    const char *why = NULL;
    RT_TRY(rt_vcheck_plan(a, op, b, &vc, &why, err));
    if (!rt_vcheck_preferred(vc, 0))
        return RT_OK;
    rt_err vc_err;
    rt_err_clear(&vc_err);
    rt_status st = rt_vcheck_reference(vc, &vc_err);
    if (st == RT_OK)
        ref->vc = vc;
    else if (st != RT_ERR_BACKEND) {
        *err = vc_err;
        return st;
    }
    return RT_OK;
}

// The reference: the random-vector check's for a large contraction, else the interpreter run
// on b with its outputs kept; every tensor it writes (outputs, temporaries) is put back as it
// was, so that b's start values serve every candidate.
static rt_status rt_gp_reference(rt_arena *a, const rt_op *op, rt_bindings *b, rt_gp_ref *ref,
                                 rt_err *err) {
    RT_TRY(rt_bindings_prepare(b, err));
    RT_TRY(rt_gp_vector_reference(a, op, b, ref, err));
    if (ref->vc)
        return RT_OK;
    double **saved;
    RT_ALLOC(a, saved, op->n_tensors, err);
    RT_ALLOC(a, ref->out, op->n_outputs, err);
    for (int32_t t = 0; t < op->n_tensors; t++) {
        if (op->tensors[t].role == RT_ROLE_INPUT)
            continue;
        int64_t n = rt_tensor_elems(b, t);
        RT_ALLOC(a, saved[t], n, err);
        if (n > 0)
            memcpy(saved[t], b->tensors[t].data, (size_t)n * sizeof(double));
    }
    for (int32_t o = 0; o < op->n_outputs; o++)
        RT_ALLOC(a, ref->out[o], rt_tensor_elems(b, op->outputs[o]), err);
    rt_status st = rt_interp_run(op, b, err);
    for (int32_t o = 0; st == RT_OK && o < op->n_outputs; o++) {
        int64_t n = rt_tensor_elems(b, op->outputs[o]);
        if (n > 0)
            memcpy(ref->out[o], b->tensors[op->outputs[o]].data, (size_t)n * sizeof(double));
    }
    for (int32_t t = 0; t < op->n_tensors; t++) {
        int64_t n = rt_tensor_elems(b, t);
        if (op->tensors[t].role != RT_ROLE_INPUT && n > 0)
            memcpy(b->tensors[t].data, saved[t], (size_t)n * sizeof(double));
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// One candidate's launch
// ---------------------------------------------------------------------------------------------

// The arguments and phases of a candidate on b's data, as rt_gpu_run_steps and
// rt_gpu_time_steps take them.
typedef struct rt_gp_launch {
    int32_t n_args;
    rt_gpu_arg *args; // one buffer per kernel argument, in k->bufs order, each read back
    double **host;    // their host copies (the read-back lands here)
    int32_t n_steps;
    rt_gpu_step *steps; // one per phase
} rt_gp_launch;

// Whether a statement accumulates into tensor t's start values ('+='): its buffer then keeps
// them instead of the poison.
static bool rt_gp_keeps_start(const rt_op *op, int32_t t) {
    for (int32_t s = 0; s < op->n_stmts; s++)
        if (op->stmts[s].out == t && op->stmts[s].op == RT_ASSIGN_ADD)
            return true;
    return false;
}

// What a buffer the kernel must write holds before the run: NaN, or for integers the most
// negative value (which no generated data holds).
static double rt_gp_poison(rt_dtype t) {
    switch (t) {
    case RT_DTYPE_I32:
        return -2147483648.0;
    case RT_DTYPE_I8:
        return -128.0;
    default:
        return NAN;
    }
}

// The binaries of c's phases: c's own, or compiled here (kept in the runtime's arena, where the
// runtime keeps the kernels it built, keyed by binary).
static rt_status rt_gp_binaries(rt_arena *a, rt_gpu_runtime *rt, const rt_device *dev,
                                const rt_gpu_candidate *c, rt_gpu_binary ***out, rt_err *err) {
    const rt_gpu_kernel *k = c->kernel;
    rt_gpu_binary **bins = NULL;
    RT_ALLOC(a, bins, k->n_phases, err);
    for (int32_t p = 0; p < k->n_phases; p++) {
        rt_gpu_compile_options o = {.threads_per_block = k->phases[p].threads};
        if (c->bins && c->bins[p])
            bins[p] = c->bins[p];
        else
            RT_TRY(rt_gpu_compile(rt_gpu_runtime_arena(rt), dev, c->source,
                                  k->phases[p].kernel_name, &o, &bins[p], err));
    }
    *out = bins;
    return RT_OK;
}

// The host array of a tree buffer (b prepared), NULL when its tree is not bound.
static const int32_t *rt_gp_tree_array(const rt_bindings *b, const rt_gpu_buffer *gb, int64_t *n) {
    const rt_tree_data *t = b->trees[gb->tensor];
    return t ? rt_run_tree_array(t, (rt_kir_tree_field)gb->dim, n) : NULL;
}

static rt_status rt_gp_setup(rt_arena *a, const rt_gpu_kernel *k, rt_gpu_binary **bins,
                             rt_bindings *b, rt_gp_launch *L, rt_err *err) {
    const rt_op *op = k->op;
    L->n_args = k->n_bufs;
    RT_ALLOC(a, L->host, k->n_bufs, err);
    RT_ALLOC(a, L->args, k->n_bufs, err);
    for (int32_t i = 0; i < k->n_bufs; i++) {
        const rt_gpu_buffer *gb = &k->bufs[i];
        if (gb->is_work) { // the phase's list of non-empty blocks (gpu-launch.c)
            int32_t *w;
            int64_t n;
            RT_TRY(rt_gpu_work_list(a, k, gb->dim, b, &w, &n, err));
            RT_ALLOC(a, L->host[i], n, err);
            for (int64_t j = 0; j < n; j++)
                L->host[i][j] = w[j];
            L->args[i] = (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER,
                                      .dtype = RT_DTYPE_I32,
                                      .n_elems = n,
                                      .host = L->host[i],
                                      .copy_out = true};
            continue;
        }
        if (gb->is_tree) {
            int64_t n;
            const int32_t *arr = rt_gp_tree_array(b, gb, &n);
            if (!arr)
                return rt_fail(err, RT_ERR_SPEC, op->trees[gb->tensor].loc,
                               "tree '%s' is not bound", op->trees[gb->tensor].name);
            RT_ALLOC(a, L->host[i], n > 0 ? n : 1, err);
            for (int64_t j = 0; j < n; j++)
                L->host[i][j] = arr[j];
            L->args[i] = (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER,
                                      .dtype = RT_DTYPE_I32,
                                      .n_elems = n > 0 ? n : 1,
                                      .host = L->host[i],
                                      .copy_out = true};
            continue;
        }
        const rt_tensor_data *td = &b->tensors[gb->tensor];
        int64_t n = gb->is_start ? td->layout.n_rows[gb->dim] + 1 : rt_tensor_elems(b, gb->tensor);
        RT_ALLOC(a, L->host[i], n > 0 ? n : 1, err); // an empty tensor still needs a buffer
        double *h = L->host[i];
        bool poison = gb->written && !rt_gp_keeps_start(op, gb->tensor);
        for (int64_t j = 0; j < n; j++) {
            if (gb->is_start) {
                int64_t v = td->layout.start[gb->dim][j];
                if (v > 2147483647LL)
                    return rt_fail(err, RT_ERR_SPEC, op->tensors[gb->tensor].loc,
                                   "ragged tensor '%s' too large for int32 offsets (got %lld)",
                                   op->tensors[gb->tensor].name, (long long)v);
                h[j] = (double)v;
            } else {
                h[j] = poison ? rt_gp_poison(gb->dtype) : td->data[j];
            }
        }
        L->args[i] = (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER,
                                  .dtype = gb->dtype,
                                  .n_elems = n > 0 ? n : 1,
                                  .host = h,
                                  .copy_out = true};
    }
    // One step per phase, a level-by-level phase one per level of its tree.
    rt_gpu_step **per = NULL;
    int32_t *n_per = NULL;
    RT_ALLOC(a, per, k->n_phases, err);
    RT_ALLOC(a, n_per, k->n_phases, err);
    int64_t n_steps = 0;
    for (int32_t p = 0; p < k->n_phases; p++) {
        RT_TRY(rt_gpu_phase_steps(a, k, p, bins[p], b, &per[p], &n_per[p], err));
        n_steps += n_per[p];
    }
    if (n_steps > INT32_MAX)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%lld launches in one run",
                       (long long)n_steps);
    RT_ALLOC(a, L->steps, rt_at_least_one((size_t)n_steps), err);
    L->n_steps = 0;
    for (int32_t p = 0; p < k->n_phases; p++)
        for (int32_t s = 0; s < n_per[p]; s++)
            L->steps[L->n_steps++] = per[p][s];
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------------------------

// Whether a buffer the kernel only reads came back different from what was uploaded; *reason
// then names the first such element (NULL when out of memory).
static bool rt_gp_changed_input(rt_arena *a, const rt_gpu_kernel *k, rt_bindings *b,
                                const rt_gp_launch *L, const char **reason) {
    for (int32_t i = 0; i < k->n_bufs; i++) {
        const rt_gpu_buffer *gb = &k->bufs[i];
        if (gb->written)
            continue;
        if (gb->is_work) {
            int32_t *w;
            int64_t n;
            if (rt_gpu_work_list(a, k, gb->dim, b, &w, &n, &(rt_err){0}) != RT_OK)
                continue; // rt_gp_setup made it from the same bindings
            for (int64_t j = 0; j < n; j++) {
                if (L->host[i][j] == (double)w[j])
                    continue;
                *reason = rt_arena_printf(a,
                                          "the kernel changed the work list of phase %d: entry "
                                          "%lld is %.9g (was %d)",
                                          (int)gb->dim, (long long)j, L->host[i][j], (int)w[j]);
                return true;
            }
            continue;
        }
        if (gb->is_tree) {
            int64_t n;
            const int32_t *arr = rt_gp_tree_array(b, gb, &n);
            for (int64_t j = 0; arr && j < n; j++) {
                if (L->host[i][j] == (double)arr[j])
                    continue;
                *reason = rt_arena_printf(a,
                                          "the kernel changed the %s array of tree '%s': entry "
                                          "%lld is %.9g (was %d)",
                                          rt_kir_tree_field_name((rt_kir_tree_field)gb->dim),
                                          k->op->trees[gb->tensor].name, (long long)j,
                                          L->host[i][j], (int)arr[j]);
                return true;
            }
            continue;
        }
        const rt_tensor_data *td = &b->tensors[gb->tensor];
        const char *name = k->op->tensors[gb->tensor].name;
        int64_t n = gb->is_start ? td->layout.n_rows[gb->dim] + 1 : rt_tensor_elems(b, gb->tensor);
        for (int64_t j = 0; j < n; j++) {
            double was = gb->is_start ? (double)td->layout.start[gb->dim][j]
                                      : rt_dtype_round(gb->dtype, td->data[j]);
            double now = L->host[i][j];
            if (now == was || (isnan(now) && isnan(was)))
                continue;
            if (gb->is_start)
                *reason = rt_arena_printf(a,
                                          "the kernel changed the start array of '%s' dim %d: "
                                          "entry %lld is %.9g (was %.9g)",
                                          name, (int)gb->dim, (long long)j, now, was);
            else
                *reason = rt_arena_printf(
                    a, "the kernel changed input '%s': element %lld is %.9g (was %.9g)", name,
                    (long long)j, now, was);
            return true;
        }
    }
    return false;
}

// Why output o failed rt_compare_accept: the first non-finite mismatch, or the error bound that
// does not hold (max error or NMSE) with the worst element.
static const char *rt_gp_wrong_output(rt_arena *a, const rt_op *op, int32_t o,
                                      const rt_compare_result *r, const double *ref,
                                      const double *got) {
    int32_t t = op->outputs[o];
    const char *name = op->tensors[t].name;
    const rt_tolerance *tol = rt_tolerance_of(op->tensors[t].dtype);
    int64_t w = r->worst_index;
    double g = w >= 0 ? got[w] : 0.0, e = w >= 0 ? ref[w] : 0.0;
    if (r->n_nonfinite > 0)
        return rt_arena_printf(a,
                               "output '%s': %lld of %lld elements non-finite where the "
                               "reference differs (first: element %lld is %.9g, expected %.9g)",
                               name, (long long)r->n_nonfinite, (long long)r->n_elems, (long long)w,
                               g, e);
    double bound = tol->abs_tol * (1.0 + r->ref_max_abs);
    if (r->max_abs_err > bound)
        return rt_arena_printf(a,
                               "output '%s': max error %.3g above %.3g at element %lld (%.9g, "
                               "expected %.9g)",
                               name, r->max_abs_err, bound, (long long)w, g, e);
    return rt_arena_printf(a, "output '%s': nmse %.3g above %.3g (max error %.3g at element %lld)",
                           name, r->nmse, tol->nmse_tol, r->max_abs_err, (long long)w);
}

// Output o (read back into got) against the random-vector check's reference; *ok false and the
// reason (when none yet) when rejected.
static rt_status rt_gp_check_vector(rt_arena *a, const rt_op *op, int32_t o, const double *got,
                                    int64_t n, const rt_gp_ref *ref, rt_gpu_check *out, bool *ok,
                                    rt_err *err) {
    rt_vcheck_result r;
    if (op->n_outputs != 1)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "the random-vector check covers one output, not %d", (int)op->n_outputs);
    RT_TRY(rt_vcheck_output(ref->vc, got, RT_DTYPE_F64, &r, err));
    rt_compare_begin(&out->cmp[o]);
    out->cmp[o].n_elems = n;
    out->cmp[o].max_abs_err = r.max_abs_err;
    out->cmp[o].max_rel_err = r.max_rel_err;
    out->cmp[o].nmse = r.nmse;
    out->cmp[o].n_nonfinite = r.n_nonfinite;
    out->max_rel_err = fmax(out->max_rel_err, r.max_rel_err);
    out->nmse = fmax(out->nmse, r.nmse);
    if (r.accepted)
        return RT_OK;
    if (*ok) {
        char line[400];
        rt_vcheck_explain(ref->vc, &r, line, sizeof line);
        out->reason = rt_arena_printf(a, "output '%s': %s", op->tensors[op->outputs[o]].name, line);
    }
    *ok = false;
    return RT_OK;
}

// The check of one candidate against ref, with its launch left in L for timing.
static rt_status rt_gp_check(rt_arena *a, rt_gpu_runtime *rt, const rt_gpu_candidate *c,
                             rt_gpu_binary **bins, rt_bindings *b, const rt_gp_ref *ref,
                             bool corrupt, rt_gpu_check *out, rt_gp_launch *L, rt_err *err) {
    const rt_gpu_kernel *k = c->kernel;
    const rt_op *op = k->op;
    memset(out, 0, sizeof *out);
    memset(L, 0, sizeof *L);
    RT_TRY(rt_gp_setup(a, k, bins, b, L, err));
    double t0 = rt_gp_now_ns();
    RT_TRY(rt_gpu_run_steps(rt, L->steps, L->n_steps, L->args, L->n_args, err));
    out->checked_run_ns = rt_gp_now_ns() - t0;
    for (int32_t i = 0; corrupt && i < k->n_bufs; i++)
        if (!k->bufs[i].is_start && !k->bufs[i].is_tree && !k->bufs[i].is_work &&
            op->n_outputs > 0 && k->bufs[i].tensor == op->outputs[0] &&
            rt_tensor_elems(b, op->outputs[0]) > 0) {
            L->host[i][0] += 1.0;
            break;
        }
    out->n_outputs = op->n_outputs;
    out->check = ref->vc ? "random-vector" : "interpreter";
    double t_check = rt_gp_now_ns();
    RT_ALLOC(a, out->cmp, op->n_outputs, err);
    // The first failure found is the reason: a changed input, then outputs in order.
    bool ok = !rt_gp_changed_input(a, k, b, L, &out->reason);
    for (int32_t o = 0; o < op->n_outputs; o++) {
        int32_t t = op->outputs[o], bi = -1;
        for (int32_t i = 0; i < k->n_bufs; i++)
            if (!k->bufs[i].is_start && !k->bufs[i].is_tree && !k->bufs[i].is_work &&
                k->bufs[i].tensor == t)
                bi = i;
        if (bi < 0) {
            rt_compare_begin(&out->cmp[o]);
            if (ok)
                out->reason = rt_arena_printf(
                    a, "output '%s' has no buffer in the kernel, so it was not compared",
                    op->tensors[t].name);
            ok = false;
            continue;
        }
        if (ref->vc) {
            RT_TRY(rt_gp_check_vector(a, op, o, L->host[bi], rt_tensor_elems(b, t), ref, out, &ok,
                                      err));
            continue;
        }
        rt_compare_data(ref->out[o], L->host[bi], rt_tensor_elems(b, t), &out->cmp[o]);
        if (!rt_compare_accept(&out->cmp[o], op->tensors[t].dtype)) {
            if (ok)
                out->reason = rt_gp_wrong_output(a, op, o, &out->cmp[o], ref->out[o], L->host[bi]);
            ok = false;
        }
        out->max_rel_err = fmax(out->max_rel_err, out->cmp[o].max_rel_err);
        out->nmse = fmax(out->nmse, out->cmp[o].nmse);
    }
    out->accepted = ok;
    out->check_ns = rt_gp_now_ns() - t_check;
    if (!ok && !out->reason)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

static rt_status rt_gp_target_check(const rt_device *dev, const rt_gpu_candidate *c, rt_err *err) {
    rt_gpu_target want;
    if (!rt_gpu_target_of_device(dev, &want) || c->target != want)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "candidate was emitted for %s, not for the device '%s'",
                       rt_gpu_dialect_of(c->target)->target, dev->name);
    return RT_OK;
}

rt_status rt_gpu_check_run(rt_arena *a, rt_gpu_runtime *rt, const rt_device *dev,
                           const rt_gpu_candidate *c, rt_bindings *b, rt_gpu_check *out,
                           rt_err *err) {
    memset(out, 0, sizeof *out);
    RT_TRY(rt_gp_target_check(dev, c, err));
    rt_gp_ref ref = {0};
    RT_TRY(rt_gp_reference(a, c->kernel->op, b, &ref, err));
    rt_gpu_binary **bins = NULL;
    RT_TRY(rt_gp_binaries(a, rt, dev, c, &bins, err));
    rt_gp_launch L;
    return rt_gp_check(a, rt, c, bins, b, &ref, false, out, &L, err);
}

// ---------------------------------------------------------------------------------------------
// Check, time, rank
// ---------------------------------------------------------------------------------------------

static rt_status rt_gp_time_options_check(const rt_gpu_time_options *o, rt_err *err) {
    if (o->warmup < 0 || o->min_reps < 1 || o->max_reps < o->min_reps || !(o->budget_ns >= 0.0))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "bad GPU timing options (expected warmup >= 0, 1 <= min_reps <= max_reps "
                       "and budget_ns >= 0, got %d, %d, %d and %g)",
                       (int)o->warmup, (int)o->min_reps, (int)o->max_reps, o->budget_ns);
    return RT_OK;
}

// A candidate's failure: the status and the message of e (a copy in a). Out of memory is not a
// candidate's failure: true when the caller must return it.
static bool rt_gp_fail(rt_arena *a, rt_gpu_result *r, rt_gpu_cand_status st, const char *what,
                       const rt_err *e) {
    if (e->status == RT_ERR_NOMEM)
        return true;
    r->status = st;
    r->reason = rt_arena_printf(a, "%s%s", what, e->msg);
    return r->reason == NULL;
}

// Checks candidate c and, when it passes, times it: out->status ok, wrong, run failed or
// compile failed. Returns only errors that are not the candidate's (out of memory).
static rt_status rt_gp_profile_one(rt_arena *a, rt_gpu_runtime *rt, const rt_device *dev,
                                   const rt_gpu_candidate *c, rt_bindings *b, const rt_gp_ref *ref,
                                   const rt_gpu_time_options *o, rt_gpu_result *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    out->status = RT_GPU_CAND_COMPILED;
    rt_err e;
    rt_err_clear(&e);
    if (c->bins && !c->compiled) {
        out->status = RT_GPU_CAND_COMPILE_FAILED;
        out->reason = c->compile_err.msg[0] ? c->compile_err.msg : "compile failed";
        return RT_OK;
    }
    rt_gpu_binary **bins = NULL;
    if (rt_gp_binaries(a, rt, dev, c, &bins, &e) != RT_OK) {
        if (rt_gp_fail(a, out, RT_GPU_CAND_COMPILE_FAILED, "", &e))
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        return RT_OK;
    }
    rt_gp_launch L;
    if (rt_gp_check(a, rt, c, bins, b, ref, o->test_corrupt, &out->check, &L, &e) != RT_OK) {
        if (rt_gp_fail(a, out, RT_GPU_CAND_RUN_FAILED, "", &e))
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        return RT_OK;
    }
    out->checked = true;
    if (!out->check.accepted) {
        out->status = RT_GPU_CAND_WRONG;
        out->reason = out->check.reason;
        return RT_OK;
    }
    double per_launch_ns = fmax(out->check.checked_run_ns, 1.0);
    double want = o->budget_ns / per_launch_ns;
    int32_t reps = want >= (double)o->max_reps   ? o->max_reps
                   : want <= (double)o->min_reps ? o->min_reps
                                                 : (int32_t)want;
    if (rt_gpu_time_steps(rt, L.steps, L.n_steps, L.args, L.n_args, o->warmup, reps, &out->timing,
                          &e) != RT_OK) {
        if (rt_gp_fail(a, out, RT_GPU_CAND_RUN_FAILED, "timing: ", &e))
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        return RT_OK;
    }
    out->status = RT_GPU_CAND_OK;
    return RT_OK;
}

// The GPU backend's check-and-time steps of the candidate loop (run-gpu-int.h).

// One reference for every candidate, from b.
rt_status rt_gp_loop_prepare(void *ctx, bool *measure, rt_err *err) {
    rt_gp_loop *L = ctx;
    *measure = true;
    return rt_gp_reference(L->a, L->cands[0].kernel->op, L->b, &L->ref, err);
}

rt_status rt_gp_loop_measure(void *ctx, int32_t i, double best_ns, rt_run_measure *m, rt_err *err) {
    rt_gp_loop *L = ctx;
    (void)best_ns; // each candidate is timed to its budget: no early stop
    rt_gpu_result *r = &L->out[i];
    RT_TRY(rt_gp_profile_one(L->a, L->rt, L->dev, &L->cands[i], L->b, &L->ref, L->o, r, err));
    *m = (rt_run_measure){r->status == RT_GPU_CAND_OK, r->timing.median_ns, false};
    return RT_OK;
}

static const rt_run_hooks rt_gp_loop_hooks = {
    .backend = "gpu",
    .prepare = rt_gp_loop_prepare,
    .measure = rt_gp_loop_measure,
};

rt_status rt_gpu_profile(rt_arena *a, rt_gpu_runtime *rt, const rt_device *dev,
                         const rt_gpu_candidate *cands, int32_t n, rt_bindings *b,
                         const rt_gpu_time_options *opt, rt_gpu_result *out, int32_t *out_winner,
                         rt_err *err) {
    *out_winner = -1;
    const rt_gpu_time_options *o = opt ? opt : &rt_gpu_time_defaults;
    RT_TRY(rt_gp_time_options_check(o, err));
    if (n <= 0)
        return RT_OK;
    for (int32_t i = 0; i < n; i++) {
        RT_TRY(rt_gp_target_check(dev, &cands[i], err));
        if (cands[i].kernel->op != cands[0].kernel->op)
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                           "candidate %d is of operator '%s', candidate 1 of '%s' (expected one "
                           "operator)",
                           (int)i + 1, cands[i].kernel->op->name, cands[0].kernel->op->name);
    }
    rt_gp_loop L = {.a = a, .rt = rt, .dev = dev, .cands = cands, .b = b, .o = o, .out = out};
    rt_run_options ro = {.on_step = o->on_step, .obs = o->obs};
    return rt_run_candidates(&rt_gp_loop_hooks, &L, n, &ro, out_winner, err);
}
