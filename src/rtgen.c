// rtgen.c: the library entry of the CPU backend (rtgen.h). For each ranked rProgram it lowers
// (codegen/lower-cpu.c), emits C and LLVM IR, JIT-compiles the LLVM module (hal/hal-cpu.c),
// then profiles: each candidate runs in a forked child that checks its output against the
// reference (interpreter for small shapes, the random-vector check C*t ~ A*(B*t) for large
// GEMMs, the naive loop-nest kernel otherwise) and times warm-up + repetitions up to a budget.
// A wrong, crashing or hanging candidate is marked and can never win. Top layer: above codegen.
#include "rtgen.h"

#include "emit.h"
#include "hal-cpu.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// clang-format off
static const char *const rt_cpu_cand_names[RT_CPU_CAND_COUNT] = {
    "not profiled", "ok", "wrong", "crashed", "timeout", "failed"};
// clang-format on
_Static_assert(sizeof rt_cpu_cand_names / sizeof *rt_cpu_cand_names == RT_CPU_CAND_COUNT,
               "ORDER RT_CPU_CAND");

const char *rt_cpu_cand_status_name(rt_cpu_cand_status st) {
    return (unsigned)st < RT_CPU_CAND_COUNT ? rt_cpu_cand_names[st] : "?";
}

// Repetitions a candidate may time within its budget. At 64 a 70 us kernel stopped after 4.5 ms
// of an 80 ms budget, and its median moved 10-20% between profiling runs on the 2-core VM.
#define RT_CPU_MAX_REPS 4096

typedef struct rt_cpu_shared {
    int32_t checked;
    int32_t correct;
    double max_abs_err, max_rel_err, nmse;
    int32_t reps;
    double times_ns[RT_CPU_MAX_REPS];
} rt_cpu_shared;

typedef struct rt_cpu_impl {
    rt_arena *a;
    const char **keys; // per candidate: its code with name and header left out
    const rt_op *op;
    const rt_device *dev;
    rt_cpu_jit *jit;         // NULL: LLVM has no backend for the device's isa (C only)
    bool runs;               // the device's code runs here (jit JIT-compiles; else it only emits)
    rt_kir_kernel **kernels; // per candidate
    rt_cpu_phase_fn **fns;   // per candidate, NULL when not compiled
    int32_t threads;
} rt_cpu_impl;

// Typed copies of the bound data, in the buffer order shared by every kernel of the op.
typedef struct rt_cpu_data {
    int32_t n_bufs;
    void **args;
    void **init; // initial contents of written buffers (restore before a run)
    size_t *bytes;
    double **ref; // per tensor: reference values of outputs (NULL: none)
    const char *check;
    bool restore_each; // an op with '+=' accumulates into the caller's values
} rt_cpu_data;

static double rt_cpu_ms(double t0) {
    return (rt_cpu_now_ns() - t0) * 1e-6;
}

// Lowers, emits and (when jit) compiles candidate i (rank) or the naive kernel (rank -1).
static rt_status rt_cpu_build_one(rt_cpu_impl *im, const rt_perf_result *perf, int32_t rank,
                                  rt_cpu_cand *c, bool want_jit, rt_err *err) {
    rt_arena *a = im->a;
    double t0 = rt_cpu_now_ns();
    rt_lower_options lo = {rank < 0, rank < 0 ? 0 : rank, im->op->file};
    rt_kir_kernel *k;
    RT_TRY(rt_lower_cpu(a, im->op, im->dev, perf ? perf->model : NULL,
                        rank >= 0 ? &perf->cands[rank] : NULL, &lo, &k, err));
    c->rank = rank;
    c->name = k->name;
    c->predicted_ns = rank >= 0 ? perf->cands[rank].predicted_ns : 0.0;
    c->summary = k->n_phases > 0 ? k->phases[0].what : "";
    c->same_as = -1;
    for (int32_t i = 0; i < k->n_phases; i++)
        if (strstr(k->phases[i].what, "GEMM"))
            c->summary = k->phases[i].what;
    RT_TRY(rt_emit_c(a, k, &c->c_source, err));
    if (rank >= 0) {
        // Different rTiles often lower to the same blocking: such a candidate shares the code
        // (and later the profile) of the first one instead of being compiled and timed again.
        rt_kir_kernel anon = *k;
        anon.name = "rt_k";
        anon.header = "";
        RT_TRY(rt_emit_c(a, &anon, &im->keys[rank], err));
        for (int32_t j = 0; j < rank && c->same_as < 0; j++)
            if (im->keys[j] && strcmp(im->keys[j], im->keys[rank]) == 0)
                c->same_as = im->fns[j] || !want_jit ? j : -1;
        if (c->same_as >= 0 && want_jit) {
            want_jit = false;
            im->fns[rank] = im->fns[c->same_as];
        }
    }
    void *mod = NULL;
    if (im->jit) {
        rt_llvm_target t = {rt_cpu_jit_context(im->jit), rt_cpu_jit_target_machine(im->jit),
                            rt_cpu_jit_avx512(im->jit)};
        RT_TRY(rt_emit_llvm(a, k, &t, want_jit, &mod, &c->ll_source, err));
    }
    rt_cpu_phase_fn *fns = NULL;
    if (want_jit && im->jit && !im->runs) {
        // Code for another host: compiled to an object for the device's triple, never run.
        size_t bytes;
        RT_TRY(rt_cpu_jit_emit_object(im->jit, mod, &bytes, err));
    } else if (want_jit && im->jit) {
        RT_TRY(rt_cpu_jit_add_module(im->jit, mod, err));
        RT_ALLOC(a, fns, k->n_phases, err);
        for (int32_t i = 0; i < k->n_phases; i++) {
            char *name = rt_arena_printf(a, "%s_%s", k->name, k->phases[i].name);
            if (!name)
                return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            void *f;
            RT_TRY(rt_cpu_jit_lookup(im->jit, name, &f, err));
            fns[i] = (rt_cpu_phase_fn)f;
        }
    } else {
        rt_emit_llvm_dispose(mod); // only the text was wanted
    }
    if (rank >= 0) {
        im->kernels[rank] = k;
        if (c->same_as < 0)
            im->fns[rank] = fns;
    } else {
        im->kernels[perf ? perf->n_cands : 0] = k;
        im->fns[perf ? perf->n_cands : 0] = fns;
    }
    c->compile_ms = rt_cpu_ms(t0);
    return RT_OK;
}

static void rt_cpu_launch_of(const rt_kir_kernel *k, rt_cpu_phase_fn *fns, void **args,
                             int64_t *items, rt_cpu_launch *l) {
    for (int32_t i = 0; i < k->n_phases; i++)
        items[i] = k->phases[i].n_items;
    *l = (rt_cpu_launch){k->n_phases, fns, items, args, k->scratch_bytes};
}

static bool rt_cpu_run(rt_cpu_pool *pool, const rt_kir_kernel *k, rt_cpu_phase_fn *fns,
                       void **args) {
    int64_t items[64];
    if (k->n_phases > 64)
        return false;
    rt_cpu_launch l;
    rt_cpu_launch_of(k, fns, args, items, &l);
    return rt_cpu_pool_run(pool, &l);
}

// Typed buffers from the bindings (prepared), plus (with keep_init) the initial copies of
// written buffers.
static rt_status rt_cpu_data_make(rt_arena *a, const rt_kir_kernel *k, rt_bindings *b,
                                  bool keep_init, rt_cpu_data *d, rt_err *err) {
    d->n_bufs = k->n_bufs;
    RT_ALLOC(a, d->args, k->n_bufs, err);
    RT_ALLOC(a, d->init, k->n_bufs, err);
    RT_ALLOC(a, d->bytes, k->n_bufs, err);
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        const rt_tensor_data *td = &b->tensors[bf->tensor];
        if (bf->role == RT_KIR_BUF_START) {
            if (!td->layout.start[bf->dim])
                return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                               "tensor %s has no start array "
                               "for dim %d",
                               b->op->tensors[bf->tensor].name, (int)bf->dim);
            d->args[i] = td->layout.start[bf->dim];
            continue;
        }
        int64_t n = td->layout.elems;
        size_t eb = bf->type == RT_KIR_F64 ? 8 : 4;
        d->bytes[i] = (size_t)rt_at_least_one((size_t)n) * eb;
        void *p = rt_arena_alloc(a, d->bytes[i] + 64);
        if (!p)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        p = (void *)rt_round_up((int64_t)(uintptr_t)p, 64);
        for (int64_t e = 0; e < n; e++) {
            double v = td->data ? td->data[e] : 0.0;
            if (bf->type == RT_KIR_F32)
                ((float *)p)[e] = (float)v;
            else if (bf->type == RT_KIR_F64)
                ((double *)p)[e] = v;
            else
                ((int32_t *)p)[e] = (int32_t)v;
        }
        d->args[i] = p;
        if (bf->written && keep_init) {
            d->init[i] = rt_arena_alloc(a, d->bytes[i]);
            if (!d->init[i])
                return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            memcpy(d->init[i], p, d->bytes[i]);
        }
    }
    return RT_OK;
}

static void rt_cpu_data_restore(const rt_cpu_data *d) {
    for (int32_t i = 1; i < d->n_bufs; i++)
        if (d->init[i])
            memcpy(d->args[i], d->init[i], d->bytes[i]);
}

static double rt_cpu_buf_get(const rt_kir_buf *bf, const void *p, int64_t i) {
    if (bf->type == RT_KIR_F32)
        return (double)((const float *)p)[i];
    if (bf->type == RT_KIR_F64)
        return ((const double *)p)[i];
    return (double)((const int32_t *)p)[i];
}

// Compares every output against d->ref, streaming (no copy of the output: relu-sized tensors
// run to gigabytes). Same measures as rt_compare_data. Returns true when within the dtype's
// tolerance.
static bool rt_cpu_check_outputs(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                                 const rt_bindings *b, rt_cpu_shared *sh) {
    bool ok = true;
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || op->tensors[bf->tensor].role != RT_ROLE_OUTPUT ||
            !d->ref[bf->tensor])
            continue;
        int64_t n = b->tensors[bf->tensor].layout.elems, nonfinite = 0;
        const double *ref = d->ref[bf->tensor];
        double ref_max = 0, max_abs = 0, max_rel = 0, err2 = 0, ref2 = 0;
        for (int64_t e = 0; e < n; e++) {
            double r = ref[e], g = rt_cpu_buf_get(bf, d->args[i], e), abs_err, rel_err;
            if (!isfinite(r) || !isfinite(g)) {
                if ((isnan(r) && isnan(g)) || r == g)
                    continue;
                nonfinite++;
                abs_err = rel_err = HUGE_VAL;
            } else {
                abs_err = fabs(g - r);
                rel_err = abs_err / fmax(fabs(r), RT_COMPARE_REL_FLOOR);
                err2 += abs_err * abs_err;
                ref2 += r * r;
                ref_max = fmax(ref_max, fabs(r));
            }
            max_abs = fmax(max_abs, abs_err);
            max_rel = fmax(max_rel, rel_err);
        }
        double nmse = nonfinite ? HUGE_VAL : ref2 > 0.0 ? err2 / ref2 : err2;
        sh->max_abs_err = fmax(sh->max_abs_err, max_abs);
        sh->max_rel_err = fmax(sh->max_rel_err, max_rel);
        sh->nmse = fmax(sh->nmse, nmse);
        bool f64 = bf->type == RT_KIR_F64;
        double nmse_tol = f64 ? 1e-20 : 1e-8, abs_tol = (f64 ? 1e-9 : 1e-3) * (1.0 + ref_max);
        if (nonfinite > 0 || !(nmse <= nmse_tol) || !(max_abs <= abs_tol))
            ok = false;
    }
    return ok;
}

// The random-vector check of a contraction: C*t against alpha*A*(B*t) (BLIS test_gemm).
static bool rt_cpu_check_gemm(const rt_kir_kernel *k, const rt_cpu_data *d, rt_cpu_shared *sh) {
    const rt_kir_contraction *g = &k->gemm;
    int32_t ba = -1, bb = -1, bc = -1;
    for (int32_t i = 1; i < k->n_bufs; i++) {
        if (k->bufs[i].role != RT_KIR_BUF_DATA)
            continue;
        if (k->bufs[i].tensor == g->ta)
            ba = i;
        if (k->bufs[i].tensor == g->tb)
            bb = i;
        if (k->bufs[i].tensor == g->tc)
            bc = i;
    }
    if (ba < 0 || bb < 0 || bc < 0)
        return false;
    const float *A = d->args[ba], *B = d->args[bb], *C = d->args[bc], *C0 = d->init[bc];
    double *t = malloc((size_t)g->N * sizeof *t), *z = malloc((size_t)g->K * sizeof *z);
    if (!t || !z) {
        free(t);
        free(z);
        return false;
    }
    rt_rng r;
    rt_rng_seed(&r, 12345);
    for (int64_t n = 0; n < g->N; n++)
        t[n] = rt_rng_uniform(&r) * 2 - 1;
    for (int64_t q = 0; q < g->K; q++) {
        double s = 0;
        for (int64_t n = 0; n < g->N; n++)
            s += (double)B[q * g->bk + n * g->bn] * t[n];
        z[q] = s;
    }
    double max_err = 0, max_ref = 0;
    for (int64_t m = 0; m < g->M; m++) {
        double y = 0, w = 0, c0 = 0;
        for (int64_t n = 0; n < g->N; n++) {
            y += (double)C[m * g->cm + n] * t[n];
            if (g->accumulate && C0)
                c0 += (double)C0[m * g->cm + n] * t[n];
        }
        for (int64_t q = 0; q < g->K; q++)
            w += (double)A[m * g->am + q * g->ak] * z[q];
        w = g->alpha * w + c0;
        max_err = fmax(max_err, fabs(y - w));
        max_ref = fmax(max_ref, fabs(w));
        if (!isfinite(y))
            max_err = INFINITY;
    }
    free(t);
    free(z);
    sh->max_abs_err = max_err;
    sh->max_rel_err = max_err / fmax(max_ref, RT_COMPARE_REL_FLOOR);
    sh->nmse = 0;
    return max_err <= 1e-4 * fmax(1.0, max_ref);
}

typedef struct rt_cpu_child {
    rt_cpu_impl *im;
    int32_t cand;
    rt_cpu_data *d;
    rt_bindings *b;
    rt_cpu_shared *sh;
    double budget_ms;
    double best_ns; // best median so far (INFINITY: none)
} rt_cpu_child;

static int rt_cpu_cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

// Median of n > 0 times (sorted on a copy).
static double rt_cpu_median(const double *t, int32_t n) {
    double tmp[RT_CPU_MAX_REPS];
    n = n < RT_CPU_MAX_REPS ? n : RT_CPU_MAX_REPS;
    memcpy(tmp, t, (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, rt_cpu_cmp_double);
    return tmp[n / 2];
}

static int rt_cpu_child_main(void *ctx) {
    rt_cpu_child *c = ctx;
    const rt_kir_kernel *k = c->im->kernels[c->cand];
    rt_cpu_phase_fn *fns = c->im->fns[c->cand];
    rt_cpu_pool *pool = rt_cpu_pool_new(c->im->threads);
    if (!pool)
        return 2;
    rt_cpu_data_restore(c->d);
    if (!rt_cpu_run(pool, k, fns, c->d->args))
        return 3;
    bool ok = strcmp(c->d->check, "random-vector") == 0
                  ? rt_cpu_check_gemm(k, c->d, c->sh)
                  : rt_cpu_check_outputs(c->im->op, k, c->d, c->b, c->sh);
    c->sh->checked = 1;
    c->sh->correct = ok;
    double start = rt_cpu_now_ns(), min_ns = (double)INFINITY;
    while (c->sh->reps < RT_CPU_MAX_REPS) {
        if (c->d->restore_each)
            rt_cpu_data_restore(c->d);
        double t0 = rt_cpu_now_ns();
        rt_cpu_run(pool, k, fns, c->d->args);
        double t = rt_cpu_now_ns() - t0;
        c->sh->times_ns[c->sh->reps++] = t;
        min_ns = fmin(min_ns, t);
        // At least 3 repetitions, unless one alone outlasts the budget (4096^3 GEMMs). A
        // candidate stops early once even its fastest run is 25% behind the best median: a slow
        // first few runs (a thread placed late, a page fault) must not cut a good one short.
        double spent_ms = rt_cpu_ms(start);
        if (c->sh->reps >= 3 && (spent_ms >= c->budget_ms || min_ns > 1.25 * c->best_ns))
            break;
        if (spent_ms >= 3 * c->budget_ms)
            break;
    }
    rt_cpu_pool_free(pool);
    return 0;
}

static double rt_cpu_points(const rt_perf_result *perf) {
    return perf && perf->model ? perf->model->real_points : 1e18;
}

// The reference outputs: the interpreter, the naive kernel, or none (random-vector check).
static rt_status rt_cpu_reference(rt_cpu_impl *im, const rt_perf_result *perf, rt_bindings *b,
                                  const rt_cpu_options *opt, rt_cpu_data *d, rt_err *err) {
    const rt_op *op = im->op;
    RT_ALLOC(im->a, d->ref, op->n_tensors, err);
    double limit = opt->interp_max_points > 0 ? (double)opt->interp_max_points : (double)(1 << 22);
    const rt_kir_kernel *k0 = im->kernels[0];
    // Ragged ops: the model's points follow length distributions, the data is what was bound.
    bool ragged = false;
    double elems = 0;
    for (int32_t t = 0; t < op->n_tensors; t++) {
        ragged = ragged || op->tensors[t].ragged;
        elems += (double)b->tensors[t].layout.elems;
    }
    if (ragged ? elems <= limit / 2 : rt_cpu_points(perf) <= limit) {
        RT_TRY(rt_interp_run(op, b, err));
        for (int32_t t = 0; t < op->n_tensors; t++)
            if (op->tensors[t].role == RT_ROLE_OUTPUT)
                d->ref[t] = b->tensors[t].data;
        d->check = "interpreter";
        return RT_OK;
    }
    if (k0->gemm.valid && op->n_stmts == 1) {
        d->check = "random-vector";
        return RT_OK;
    }
    // The naive loop nests, compiled from the same IR without tiling or packing.
    rt_cpu_cand naive;
    memset(&naive, 0, sizeof naive);
    RT_TRY(rt_cpu_build_one(im, perf, -1, &naive, true, err));
    int32_t ni = perf->n_cands;
    rt_cpu_pool *pool = rt_cpu_pool_new(im->threads);
    if (!pool)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start the thread pool");
    rt_cpu_data_restore(d);
    bool ran = rt_cpu_run(pool, im->kernels[ni], im->fns[ni], d->args);
    rt_cpu_pool_free(pool);
    if (!ran)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory for scratch buffers");
    for (int32_t i = 1; i < d->n_bufs; i++) {
        const rt_kir_buf *bf = &k0->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || op->tensors[bf->tensor].role != RT_ROLE_OUTPUT)
            continue;
        int64_t n = b->tensors[bf->tensor].layout.elems;
        RT_ALLOC(im->a, d->ref[bf->tensor], n, err);
        for (int64_t e = 0; e < n; e++)
            d->ref[bf->tensor][e] = rt_cpu_buf_get(bf, d->args[i], e);
    }
    d->check = "naive-kernel";
    return RT_OK;
}

static double rt_cpu_data_bytes(const rt_op *op, const rt_bindings *b) {
    double bytes = 0;
    for (int32_t t = 0; t < op->n_tensors; t++)
        if (op->tensors[t].role != RT_ROLE_TEMP && b->tensors[t].laid_out)
            bytes += (double)b->tensors[t].layout.elems * rt_dtype_bytes(op->tensors[t].dtype);
    return bytes;
}

rt_status rt_cpu_build_and_profile(rt_arena *a, const rt_op *op, const rt_device *dev,
                                   rt_bindings *b, const rt_perf_result *perf,
                                   const rt_cpu_options *opt, rt_cpu_report **out, rt_err *err) {
    double t_start = rt_cpu_now_ns();
    rt_cpu_options defaults = {0};
    if (!opt)
        opt = &defaults;
    if (!perf || perf->n_cands < 1)
        return rt_fail(err, RT_ERR_NOFIT, RT_NOLOC, "no candidate to build for %s", op->name);
    rt_cpu_report *r;
    RT_ALLOC(a, r, 1, err);
    rt_cpu_impl *im;
    RT_ALLOC(a, im, 1, err);
    r->impl = im;
    im->a = a;
    im->op = op;
    im->dev = dev;
    int32_t threads = opt->threads > 0 ? opt->threads : (dev && dev->units > 0 ? dev->units : 1);
    im->threads = threads < rt_cpu_online() ? threads : rt_cpu_online();
    r->threads = im->threads;
    r->winner = -1;
    r->ext = opt->emit == RT_CPU_EMIT_C ? "c" : "ll";
    r->n = perf->n_cands;
    RT_ALLOC(a, r->cands, r->n, err);
    RT_ALLOC(a, im->kernels, r->n + 1, err);
    RT_ALLOC(a, im->fns, r->n + 1, err);
    RT_ALLOC(a, im->keys, r->n, err);
    const char *why = NULL;
    im->runs = rt_cpu_runs_here(a, dev, &why);
    if (im->runs)
        RT_TRY(rt_cpu_jit_new(a, dev, &im->jit, err));
    else
        RT_TRY(rt_cpu_target_new(a, dev, &im->jit, err));
    r->target = im->jit ? rt_cpu_jit_triple(im->jit) : NULL;
    r->ran = im->runs;
    if (!im->jit) {
        r->ext = "c";
        r->note =
            rt_arena_printf(a, "this LLVM has no %s backend: C only", rt_cpu_isa_name(dev->isa));
    }
    bool profile = opt->profile && im->runs;
    r->not_profiled = !im->runs ? why : !opt->profile ? "profiling off" : NULL;
    bool tty = opt->progress && isatty(2);
    for (int32_t i = 0; i < r->n; i++) {
        if (tty)
            fprintf(stderr, "\rrtgen: compiling candidate %d/%d", (int)i + 1, (int)r->n);
        RT_TRY(rt_cpu_build_one(im, perf, i, &r->cands[i], profile || i == 0, err));
        if (i == 0)
            r->top1_ms = rt_cpu_ms(t_start);
    }
    if (!profile) {
        if (tty)
            fprintf(stderr, "\r\033[K");
        r->total_ms = rt_cpu_ms(t_start);
        *out = r;
        return RT_OK;
    }
    RT_TRY(rt_bindings_prepare(b, err));
    rt_cpu_data *d;
    RT_ALLOC(a, d, 1, err);
    RT_TRY(rt_cpu_data_make(a, im->kernels[0], b, true, d, err));
    for (int32_t s = 0; s < op->n_stmts; s++)
        d->restore_each = d->restore_each || op->stmts[s].op == RT_ASSIGN_ADD;
    RT_TRY(rt_cpu_reference(im, perf, b, opt, d, err));
    rt_cpu_shared *sh = rt_cpu_shared_alloc(sizeof *sh);
    if (!sh)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "cannot map shared memory for profiling");
    double bytes = rt_cpu_data_bytes(op, b);
    double peak_gflops = dev ? rt_hal_peak_gflops(dev, RT_DTYPE_F32, false) : 0.0;
    double peak_gbps = dev && dev->n_levels > 0 ? dev->level[0].bandwidth_gbps : 0.0;
    double best = INFINITY;
    for (int32_t i = 0; i < r->n; i++) {
        rt_cpu_cand *c = &r->cands[i];
        if (c->same_as >= 0) {
            const rt_cpu_cand *o = &r->cands[c->same_as];
            c->status = o->status;
            c->signal = o->signal;
            c->check = o->check;
            c->max_abs_err = o->max_abs_err;
            c->max_rel_err = o->max_rel_err;
            c->nmse = o->nmse;
            c->reps = o->reps;
            c->min_ns = o->min_ns;
            c->median_ns = o->median_ns;
            c->gflops = o->gflops;
            c->gbps = o->gbps;
            c->peak_pct = o->peak_pct;
            continue;
        }
        if (tty)
            fprintf(stderr, "\r\033[Krtgen: profiling candidate %d/%d (%s)", (int)i + 1, (int)r->n,
                    c->name);
        memset(sh, 0, sizeof *sh);
        rt_cpu_child ch = {im,
                           i,
                           d,
                           b,
                           sh,
                           opt->budget_ms > 0 ? opt->budget_ms : 80.0,
                           opt->full_timing ? (double)INFINITY : best};
        rt_cpu_child_status cs;
        int code = 0;
        // Default timeout: 10 s, or 40 predicted runs when longer (check run + repetitions).
        double timeout_ms =
            opt->timeout_ms > 0 ? opt->timeout_ms : fmax(10000.0, 40e-6 * c->predicted_ns);
        rt_status st = rt_cpu_run_isolated(rt_cpu_child_main, &ch, timeout_ms, &cs, &code, err);
        if (st != RT_OK) {
            rt_cpu_shared_free(sh, sizeof *sh);
            return st;
        }
        c->check = d->check;
        c->max_abs_err = sh->max_abs_err;
        c->max_rel_err = sh->max_rel_err;
        c->nmse = sh->nmse;
        c->reps = sh->reps;
        if (cs == RT_CPU_CHILD_CRASHED) {
            c->status = RT_CPU_CAND_CRASHED;
            c->signal = code;
        } else if (cs == RT_CPU_CHILD_TIMEOUT) {
            c->status = RT_CPU_CAND_TIMEOUT;
        } else if (cs == RT_CPU_CHILD_FAILED || !sh->checked) {
            c->status = RT_CPU_CAND_FAILED;
        } else {
            c->status = sh->correct ? RT_CPU_CAND_OK : RT_CPU_CAND_WRONG;
        }
        if (sh->reps > 0) {
            int32_t reps = sh->reps < RT_CPU_MAX_REPS ? sh->reps : RT_CPU_MAX_REPS;
            c->min_ns = sh->times_ns[0];
            for (int32_t q = 1; q < reps; q++)
                c->min_ns = fmin(c->min_ns, sh->times_ns[q]);
            c->median_ns = rt_cpu_median(sh->times_ns, reps);
            const rt_kir_kernel *k = im->kernels[i];
            double flops = k->flops > 0 ? k->flops : perf->cands[i].flops;
            c->gflops = flops / c->median_ns;
            c->gbps = bytes / c->median_ns;
            if (k->compute_bound)
                c->peak_pct = peak_gflops > 0 ? 100.0 * c->gflops / peak_gflops : 0.0;
            else
                c->peak_pct = peak_gbps > 0 ? 100.0 * c->gbps / peak_gbps : 0.0;
        }
        if (c->status == RT_CPU_CAND_OK && c->median_ns < best) {
            best = c->median_ns;
            r->winner = i;
        }
    }
    rt_cpu_shared_free(sh, sizeof *sh);
    if (tty)
        fprintf(stderr, "\r\033[K");
    r->total_ms = rt_cpu_ms(t_start);
    *out = r;
    return RT_OK;
}

struct rt_cpu_runner {
    rt_arena *a; // the runner's own: its buffers go with it
    const rt_op *op;
    const rt_kir_kernel *k;
    rt_cpu_phase_fn *fns;
    rt_cpu_pool *pool;
    rt_cpu_data d;
};

rt_status rt_cpu_runner_new(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                            rt_cpu_runner **out, rt_err *err) {
    const rt_cpu_impl *im = r->impl;
    int32_t w = cand >= 0 ? cand : r->winner >= 0 ? r->winner : 0;
    *out = NULL;
    if (w >= r->n)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "no candidate %d (the report has %d)", (int)w,
                       (int)r->n);
    if (!im->fns[w])
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "candidate %d was not compiled", (int)w);
    RT_TRY(rt_bindings_prepare(b, err));
    rt_arena *a = rt_arena_new(1 << 16);
    if (!a)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_cpu_runner *rn = rt_arena_alloc(a, sizeof *rn);
    if (!rn) {
        rt_arena_free(a);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    *rn = (rt_cpu_runner){a, im->op, im->kernels[w], im->fns[w], NULL, {0}};
    rt_status st = rt_cpu_data_make(a, rn->k, b, false, &rn->d, err);
    if (st == RT_OK && !(rn->pool = rt_cpu_pool_new(im->threads)))
        st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start the thread pool");
    if (st != RT_OK) {
        rt_arena_free(a);
        return st;
    }
    *out = rn;
    return RT_OK;
}

void *rt_cpu_runner_data(rt_cpu_runner *rn, int32_t tensor) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++)
        if (rn->k->bufs[i].role == RT_KIR_BUF_DATA && rn->k->bufs[i].tensor == tensor)
            return rn->d.args[i];
    return NULL;
}

rt_status rt_cpu_runner_run(rt_cpu_runner *rn, rt_err *err) {
    if (!rt_cpu_run(rn->pool, rn->k, rn->fns, rn->d.args))
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory for scratch buffers");
    return RT_OK;
}

void rt_cpu_runner_outputs(const rt_cpu_runner *rn, rt_bindings *b) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++) {
        const rt_kir_buf *bf = &rn->k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || !bf->written)
            continue;
        rt_tensor_data *td = &b->tensors[bf->tensor];
        for (int64_t e = 0; e < td->layout.elems; e++)
            td->data[e] = rt_dtype_round(rn->op->tensors[bf->tensor].dtype,
                                         rt_cpu_buf_get(bf, rn->d.args[i], e));
    }
}

void rt_cpu_runner_free(rt_cpu_runner *rn) {
    if (!rn)
        return;
    rt_cpu_pool_free(rn->pool);
    rt_arena_free(rn->a);
}

rt_status rt_cpu_run_winner(rt_cpu_report *r, rt_bindings *b, rt_err *err) {
    rt_cpu_runner *rn;
    RT_TRY(rt_cpu_runner_new(r, -1, b, &rn, err));
    rt_status st = rt_cpu_runner_run(rn, err);
    if (st == RT_OK)
        rt_cpu_runner_outputs(rn, b);
    rt_cpu_runner_free(rn);
    return st;
}

const char *rt_cpu_report_source(const rt_cpu_report *r, int32_t i, const char **out_ext) {
    if (i < 0 || i >= r->n)
        return NULL;
    bool c = strcmp(r->ext, "c") == 0;
    if (out_ext)
        *out_ext = c ? "c" : "ll";
    return c ? r->cands[i].c_source : r->cands[i].ll_source;
}

void *rt_cpu_report_to_json(const rt_cpu_report *r) {
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    for (int32_t i = 0; i < r->n; i++) {
        const rt_cpu_cand *c = &r->cands[i];
        json_t *o = json_object();
        if (!o) {
            json_decref(arr);
            return NULL;
        }
        json_object_set_new(o, "rank", json_integer(c->rank));
        json_object_set_new(o, "kernel", json_string(c->name));
        json_object_set_new(o, "lowering", json_string(c->summary ? c->summary : ""));
        json_object_set_new(o, "status", json_string(rt_cpu_cand_status_name(c->status)));
        json_object_set_new(o, "winner", json_boolean(i == r->winner));
        json_object_set_new(o, "predicted_ns", json_real(c->predicted_ns));
        json_object_set_new(o, "compile_ms", json_real(c->compile_ms));
        if (c->same_as >= 0)
            json_object_set_new(o, "same_code_as", json_integer(r->cands[c->same_as].rank));
        if (c->status != RT_CPU_CAND_NOT_PROFILED) {
            json_object_set_new(o, "threads", json_integer(r->threads));
            json_object_set_new(o, "measured_min_ns", json_real(c->min_ns));
            json_object_set_new(o, "measured_median_ns", json_real(c->median_ns));
            json_object_set_new(o, "reps", json_integer(c->reps));
            json_object_set_new(o, "gflops", json_real(c->gflops));
            json_object_set_new(o, "gbps", json_real(c->gbps));
            json_object_set_new(o, "peak_pct", json_real(c->peak_pct));
            json_object_set_new(o, "check", json_string(c->check ? c->check : "none"));
            json_object_set_new(o, "max_abs_err",
                                json_real(isfinite(c->max_abs_err) ? c->max_abs_err : -1.0));
            json_object_set_new(o, "max_rel_err",
                                json_real(isfinite(c->max_rel_err) ? c->max_rel_err : -1.0));
            json_object_set_new(o, "nmse", json_real(isfinite(c->nmse) ? c->nmse : -1.0));
            if (c->status == RT_CPU_CAND_CRASHED)
                json_object_set_new(o, "signal", json_integer(c->signal));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

void rt_cpu_report_print(const rt_cpu_report *r, rt_buf *out) {
    rt_buf_printf(out, "%-4s %-28s %-12s %12s %12s %10s %8s %10s\n", "rank", "kernel", "status",
                  "predicted_us", "median_us", "GFLOP/s", "peak%", "max_err");
    for (int32_t i = 0; i < r->n; i++) {
        const rt_cpu_cand *c = &r->cands[i];
        rt_buf_printf(out, "%-4d %-28s %-12s %12.2f %12.2f %10.1f %8.1f %10.2e%s\n", (int)c->rank,
                      c->name, rt_cpu_cand_status_name(c->status), c->predicted_ns * 1e-3,
                      c->median_ns * 1e-3, c->gflops, c->peak_pct, c->max_abs_err,
                      i == r->winner ? "  <- winner" : "");
    }
    if (r->ran)
        rt_buf_printf(out, "top-1 JIT-compiled in %.1f ms; total %.1f ms on %d threads\n",
                      r->top1_ms, r->total_ms, (int)r->threads);
    else if (r->target)
        rt_buf_printf(out, "top-1 compiled for %s (not run) in %.1f ms; total %.1f ms\n", r->target,
                      r->top1_ms, r->total_ms);
    if (r->note)
        rt_buf_printf(out, "note: %s\n", r->note);
    if (r->not_profiled)
        rt_buf_printf(out, "not profiled: %s\n", r->not_profiled);
}
