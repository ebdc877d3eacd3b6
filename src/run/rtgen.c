// rtgen.c: the library entry of the CPU backend (rtgen.h). For each ranked rProgram it lowers
// (codegen/lower-cpu.c), emits C and LLVM IR, JIT-compiles the LLVM module (hal/hal-cpu.c),
// then profiles: each candidate runs in a forked child that checks its output against the
// reference (interpreter for small shapes, the random-vector check C*t ~ A*(B*t) for large
// contractions (src/ref/vcheck.h), the naive loop-nest kernel otherwise; the checks are in rtgen-check.c) and times
// warm-up + repetitions up to a budget. A wrong, crashing or hanging candidate is marked with
// its reason and can never win, nor be run by an rt_cpu_runner. These are the CPU's steps of
// the run layer's one candidate loop (run.h: compile, prepare, measure; the loop picks). Run
// layer: above codegen and the HAL.
#include "rtgen.h"
#include "rtgen-int.h"

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

// clang-format off
static const char *const rt_cpu_phase_names[RT_CPU_PHASE_COUNT] = {
    "while starting", "in its first (checked) run", "while its output was checked",
    "while being timed"};
// clang-format on
_Static_assert(sizeof rt_cpu_phase_names / sizeof *rt_cpu_phase_names == RT_CPU_PHASE_COUNT,
               "ORDER RT_CPU_PHASE");

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

// The levels [first, last) a level-by-level phase runs on the tree arrays in args.
static void rt_cpu_levels(const rt_kir_phase *p, void **args, int64_t *first, int64_t *last) {
    int64_t n_levels = ((const int32_t *)args[p->levels.count_buf])[0];
    *first = p->levels.first;
    *last = p->levels.last < 0 || p->levels.last > n_levels ? n_levels : p->levels.last;
}

// The launch of kernel k (its functions fns) on the buffers args: a phase is one step over its
// items; a level-by-level phase (rt_kir_levels) one step per level of its tree, over the
// positions of that level in the level order (read from the tree's arrays in args), the pool's
// barrier after each. The step arrays live in a.
static rt_status rt_cpu_launch_of(rt_arena *a, const rt_kir_kernel *k, rt_cpu_phase_fn *fns,
                                  void **args, rt_cpu_launch *l, rt_err *err) {
    int64_t n = 0, first, last;
    for (int32_t i = 0; i < k->n_phases; i++) {
        if (!k->phases[i].levels.on) {
            n++;
            continue;
        }
        rt_cpu_levels(&k->phases[i], args, &first, &last);
        n += last > first ? last - first : 0;
    }
    if (n > INT32_MAX)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s: %lld steps in one run", k->name,
                       (long long)n);
    rt_cpu_phase_fn *sf;
    int64_t *items, *at;
    RT_ALLOC(a, sf, rt_at_least_one((size_t)n), err);
    RT_ALLOC(a, items, rt_at_least_one((size_t)n), err);
    RT_ALLOC(a, at, rt_at_least_one((size_t)n), err);
    int32_t j = 0;
    for (int32_t i = 0; i < k->n_phases; i++) {
        const rt_kir_phase *p = &k->phases[i];
        if (!p->levels.on) {
            sf[j] = fns[i];
            at[j] = 0;
            items[j++] = p->n_items;
            continue;
        }
        const int32_t *begin = args[p->levels.begin_buf];
        rt_cpu_levels(p, args, &first, &last);
        for (int64_t h = first; h < last; h++) {
            sf[j] = fns[i];
            at[j] = begin[h];
            items[j++] = begin[h + 1] - begin[h];
        }
    }
    *l = (rt_cpu_launch){j, sf, items, args, k->scratch_bytes, at};
    return RT_OK;
}

// Stores v[0..n) into the buffer p of bf's element type, or c in each element where v is NULL.
static void rt_cpu_buf_store(const rt_kir_buf *bf, void *p, const double *v, double c, int64_t n) {
    for (int64_t e = 0; e < n; e++) {
        double x = v ? v[e] : c;
        if (bf->type == RT_KIR_F32)
            ((float *)p)[e] = (float)x;
        else if (bf->type == RT_KIR_F64)
            ((double *)p)[e] = x;
        else
            ((int32_t *)p)[e] = (int32_t)x;
    }
}

// How rt_cpu_data_make treats the data buffers.
typedef enum rt_cpu_data_mode {
    RT_CPU_DATA_UNBOUND, // sizes only: the caller binds buffers of its own (a layer's)
    RT_CPU_DATA_COPY,    // typed copies of b's values
    RT_CPU_DATA_PROFILE, // the copies, the initial contents of written buffers and start arrays
} rt_cpu_data_mode;

// Typed buffers from the bindings (laid out; prepared unless unbound), plus (profile) the
// initial copies of written buffers and copies of the start arrays.
static rt_status rt_cpu_data_make(rt_arena *a, const rt_kir_kernel *k, rt_bindings *b,
                                  rt_cpu_data_mode mode, rt_cpu_data *d, rt_err *err) {
    bool keep_init = mode == RT_CPU_DATA_PROFILE;
    d->n_bufs = k->n_bufs;
    RT_ALLOC(a, d->args, k->n_bufs, err);
    RT_ALLOC(a, d->init, k->n_bufs, err);
    RT_ALLOC(a, d->uniform, k->n_bufs, err);
    RT_ALLOC(a, d->fill, k->n_bufs, err);
    RT_ALLOC(a, d->bytes, k->n_bufs, err);
    RT_ALLOC(a, d->start_copy, k->n_bufs, err);
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        if (bf->role == RT_KIR_BUF_TREE) {
            // The tree as the bindings linearized it, read only (like the start arrays).
            const rt_tree_data *t = b->trees[bf->tensor];
            int64_t n;
            const int32_t *arr = t ? rt_run_tree_array(t, (rt_kir_tree_field)bf->dim, &n) : NULL;
            if (!arr)
                return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "tree %s has no %s array",
                               b->op->trees[bf->tensor].name,
                               rt_kir_tree_field_name((rt_kir_tree_field)bf->dim));
            d->args[i] = (void *)arr;
            d->bytes[i] = (size_t)n * sizeof(int32_t);
            if (keep_init) {
                d->start_copy[i] = rt_arena_alloc(a, rt_at_least_one(d->bytes[i]));
                if (!d->start_copy[i])
                    return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
                memcpy(d->start_copy[i], d->args[i], d->bytes[i]);
            }
            continue;
        }
        const rt_tensor_data *td = &b->tensors[bf->tensor];
        if (bf->role == RT_KIR_BUF_START) {
            if (!td->layout.start[bf->dim])
                return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                               "tensor %s has no start array "
                               "for dim %d",
                               b->op->tensors[bf->tensor].name, (int)bf->dim);
            d->args[i] = td->layout.start[bf->dim];
            d->bytes[i] = (size_t)(td->layout.n_rows[bf->dim] + 1) * sizeof(int64_t);
            if (keep_init) {
                d->start_copy[i] = rt_arena_alloc(a, d->bytes[i]);
                if (!d->start_copy[i])
                    return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
                memcpy(d->start_copy[i], d->args[i], d->bytes[i]);
            }
            continue;
        }
        if (!td->laid_out)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "tensor %s is not laid out",
                           b->op->tensors[bf->tensor].name);
        int64_t n = td->layout.elems;
        size_t eb = bf->type == RT_KIR_F64 ? 8 : 4;
        d->bytes[i] = (size_t)rt_at_least_one((size_t)n) * eb;
        if (mode == RT_CPU_DATA_UNBOUND)
            continue;
        void *p = rt_arena_alloc(a, d->bytes[i] + 64);
        if (!p)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        p = (void *)rt_round_up((int64_t)(uintptr_t)p, 64);
        rt_cpu_buf_store(bf, p, td->data, 0.0, n);
        d->args[i] = p;
        if (bf->written && keep_init && rt_cpu_poisoned(b->op, bf->tensor)) {
            d->uniform[i] = true;
            d->fill[i] = rt_cpu_poison_of(&b->op->tensors[bf->tensor]);
        } else if (bf->written && keep_init) {
            d->init[i] = rt_arena_alloc(a, d->bytes[i]);
            if (!d->init[i])
                return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            memcpy(d->init[i], p, d->bytes[i]);
        }
    }
    return RT_OK;
}

double rt_cpu_init_get(const rt_kir_kernel *k, const rt_cpu_data *d, int32_t i, int64_t e) {
    return d->uniform[i] ? d->fill[i] : rt_cpu_buf_get(&k->bufs[i], d->init[i], e);
}

static void rt_cpu_data_restore(const rt_kir_kernel *k, const rt_cpu_data *d) {
    for (int32_t i = 1; i < d->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        if (d->init[i]) {
            memcpy(d->args[i], d->init[i], d->bytes[i]);
        } else if (d->uniform[i]) {
            rt_cpu_buf_store(bf, d->args[i], NULL, d->fill[i],
                             (int64_t)(d->bytes[i] / (bf->type == RT_KIR_F64 ? 8 : 4)));
        }
    }
}

typedef struct rt_cpu_child {
    rt_cpu_impl *im;
    int32_t cand;
    rt_cpu_data *d;
    rt_bindings *b;
    rt_cpu_shared *sh;
    double budget_ms;
    double best_ns;     // best median so far (INFINITY: none)
    rt_cpu_fault fault; // tests only
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

// One timed run of a launch (the written buffers restored first for an op that accumulates
// into them): its nanoseconds, or -1 when the pool could not run it (out of memory).
static double rt_cpu_timed_run(rt_cpu_pool *pool, const rt_cpu_launch *launch,
                               const rt_cpu_impl *im, const rt_cpu_data *d) {
    if (d->restore_each)
        rt_cpu_data_restore(im->kernels[0], d);
    double t0 = rt_cpu_now_ns();
    if (!rt_cpu_pool_run(pool, launch))
        return -1;
    return rt_cpu_now_ns() - t0;
}

static int rt_cpu_child_main(void *ctx) {
    rt_cpu_child *c = ctx;
    const rt_kir_kernel *k = c->im->kernels[c->cand];
    rt_cpu_phase_fn *fns = c->im->fns[c->cand];
    c->sh->phase = RT_CPU_PHASE_START;
    rt_cpu_pool *pool = rt_cpu_pool_new(c->im->threads);
    if (!pool) {
        snprintf(c->sh->why, sizeof c->sh->why, "cannot start its thread pool");
        return 2;
    }
    rt_cpu_launch launch;
    rt_err err;
    rt_err_clear(&err);
    if (rt_cpu_launch_of(c->im->a, k, fns, c->d->args, &launch, &err) != RT_OK) {
        snprintf(c->sh->why, sizeof c->sh->why, "%s", err.msg);
        return 3;
    }
    // The checked run starts from the initial buffers: outputs poisoned (rtgen-check.c).
    rt_cpu_data_restore(c->im->kernels[0], c->d);
    c->sh->phase = RT_CPU_PHASE_RUN;
    if (!rt_cpu_pool_run(pool, &launch)) {
        snprintf(c->sh->why, sizeof c->sh->why, "out of memory for its scratch buffers");
        return 3;
    }
    rt_cpu_fault_apply(c->fault, c->im->op, k, c->d);
    c->sh->phase = RT_CPU_PHASE_CHECK;
    double t_check = rt_cpu_now_ns();
    bool ok = rt_cpu_check_candidate(c->im->op, k, c->d, c->b, c->sh);
    c->sh->check_ns = rt_cpu_now_ns() - t_check;
    c->sh->checked = 1;
    c->sh->correct = ok;
    c->sh->phase = RT_CPU_PHASE_TIME;
    double start = rt_cpu_now_ns(), min_ns = (double)INFINITY;
    while (c->sh->reps < RT_CPU_MAX_REPS) {
        double t = rt_cpu_timed_run(pool, &launch, c->im, c->d);
        if (t < 0)
            break;
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

// Whether the interpreter gives the reference: up to opt's point limit; for ragged ops, whose
// model points follow length distributions, by the elements of the bound data (elems).
static bool rt_cpu_by_interpreter(const rt_op *op, const rt_perf_result *perf,
                                  const rt_cpu_options *opt, double elems) {
    double limit = opt->interp_max_points > 0 ? (double)opt->interp_max_points : (double)(1 << 22);
    bool ragged = false;
    for (int32_t t = 0; t < op->n_tensors; t++)
        ragged = ragged || op->tensors[t].ragged;
    return ragged ? elems <= limit / 2 : rt_cpu_points(perf) <= limit;
}

// The reference outputs: the interpreter, the naive kernel, or none (random-vector check). The
// outputs in b and d start poisoned (rt_cpu_poison_bindings), so the reference holds the poison
// where the op writes nothing. The reference's data go in s (the profile's scratch arena).
static rt_status rt_cpu_reference(rt_cpu_impl *im, rt_arena *s, const rt_perf_result *perf,
                                  rt_bindings *b, const rt_cpu_options *opt, rt_cpu_data *d,
                                  rt_err *err) {
    const rt_op *op = im->op;
    RT_ALLOC(s, d->ref, op->n_tensors, err);
    const rt_kir_kernel *k0 = im->kernels[0];
    double elems = 0;
    for (int32_t t = 0; t < op->n_tensors; t++)
        elems += (double)b->tensors[t].layout.elems;
    // A contraction: the interpreter up to the limit, then the random-vector check (vcheck.h)
    // where it is cheaper; its reference needs finite inputs, else the interpreter.
    rt_vcheck *vc = NULL;
    const char *not_covered = NULL;
    RT_TRY(rt_vcheck_plan(s, op, b, &vc, &not_covered, err));
    if (rt_vcheck_preferred(vc, (double)opt->interp_max_points)) {
        rt_err vc_err;
        rt_err_clear(&vc_err);
        rt_status st = rt_vcheck_reference(vc, &vc_err);
        if (st == RT_OK) {
            d->vc = vc;
            d->check = "random-vector";
            return RT_OK;
        }
        if (st != RT_ERR_BACKEND) {
            *err = vc_err;
            return st;
        }
    }
    double limit = opt->interp_max_points > 0 ? (double)opt->interp_max_points : (double)(1 << 22);
    if (vc ? rt_vcheck_interp_points(vc) <= limit : rt_cpu_by_interpreter(op, perf, opt, elems)) {
        RT_TRY(rt_interp_run(op, b, err));
        for (int32_t t = 0; t < op->n_tensors; t++)
            if (op->tensors[t].role == RT_ROLE_OUTPUT)
                d->ref[t] = b->tensors[t].data;
        d->check = "interpreter";
        return RT_OK;
    }
    // The naive loop nests, compiled from the same IR without tiling or packing.
    rt_cpu_cand naive;
    memset(&naive, 0, sizeof naive);
    RT_TRY(rt_cpu_build_one(im, perf, -1, &naive, true, err));
    int32_t ni = perf->n_cands;
    rt_cpu_launch launch;
    RT_TRY(rt_cpu_launch_of(im->a, im->kernels[ni], im->fns[ni], d->args, &launch, err));
    rt_cpu_pool *pool = rt_cpu_pool_new(im->threads);
    if (!pool)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start the thread pool");
    rt_cpu_data_restore(k0, d);
    bool ran = rt_cpu_pool_run(pool, &launch);
    rt_cpu_pool_free(pool);
    if (!ran)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory for scratch buffers");
    char why[256] = "";
    if (!rt_cpu_check_inputs(op, k0, d, b, why, sizeof why))
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "the naive reference kernel of %s is wrong: %s", op->name, why);
    for (int32_t i = 1; i < d->n_bufs; i++) {
        const rt_kir_buf *bf = &k0->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || op->tensors[bf->tensor].role != RT_ROLE_OUTPUT)
            continue;
        int64_t n = b->tensors[bf->tensor].layout.elems;
        RT_ALLOC(s, d->ref[bf->tensor], n, err);
        for (int64_t e = 0; e < n; e++)
            d->ref[bf->tensor][e] = rt_cpu_buf_get(bf, d->args[i], e);
    }
    d->check = "naive-kernel";
    return RT_OK;
}

// Memory this process can still take: MemAvailable, capped by a cgroup v2 limit when the
// process runs under one (memory.max - memory.current); -1 when neither can be read.
static double rt_cpu_mem_available(void) {
    double avail = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        long long kb;
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            avail = (double)kb * 1024.0;
    }
    if (f)
        fclose(f);
    if (avail < 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0)
            avail = (double)pages * (double)page;
    }
    // cgroup v2: "0::/PATH" in /proc/self/cgroup, the limit in /sys/fs/cgroup/PATH/memory.max.
    char path[600] = "", cg[400] = "";
    f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0 && sscanf(line + 3, "%399s", cg) == 1)
            break;
    if (f)
        fclose(f);
    double lim = -1, cur = -1;
    for (int32_t which = 0; which < 2 && cg[0] == '/'; which++) {
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/%s", strcmp(cg, "/") ? cg : "",
                 which ? "memory.current" : "memory.max");
        f = fopen(path, "r");
        long long v;
        if (f && fscanf(f, "%lld", &v) == 1)
            *(which ? &cur : &lim) = (double)v;
        if (f)
            fclose(f);
    }
    if (lim >= 0 && cur >= 0 && (avail < 0 || lim - cur < avail))
        avail = fmax(0.0, lim - cur);
    return avail;
}

static const char *rt_cpu_fmt_bytes(char *buf, size_t size, double bytes) {
    if (bytes >= 1e9)
        snprintf(buf, size, "%.1f GB", bytes * 1e-9);
    else
        snprintf(buf, size, "%.1f MB", bytes * 1e-6);
    return buf;
}

// What a profile holds at once: the bound data (a double per element of every tensor), the
// kernel's typed copy of every tensor, the initial copy of what it writes and the profiling
// child's copy-on-write pages of it, and the naive kernel's reference (a double per output
// element) unless the interpreter gives it.
rt_status rt_cpu_profile_fits(rt_arena *a, const rt_op *op, rt_bindings *b,
                              const rt_perf_result *perf, const rt_cpu_options *opt, rt_err *err) {
    rt_cpu_options defaults = {0};
    if (!opt)
        opt = &defaults;
    double *elems;
    RT_ALLOC(a, elems, op->n_tensors, err);
    RT_TRY(rt_bindings_count(b, elems, err));
    double total = 0, need = 0, outputs = 0;
    for (int32_t t = 0; t < op->n_tensors; t++) {
        double kb = op->tensors[t].dtype == RT_DTYPE_F64 ? 8 : 4;
        bool written = op->tensors[t].role != RT_ROLE_INPUT;
        total += elems[t];
        need += elems[t] * (8 + kb + (written ? 2 * kb : 0));
        if (op->tensors[t].role == RT_ROLE_OUTPUT)
            outputs += elems[t];
    }
    if (!rt_cpu_by_interpreter(op, perf, opt, total))
        need += 8 * outputs;
    double avail = rt_cpu_mem_available();
    if (avail < 0 || need <= avail)
        return RT_OK;
    char nb[32], ab[32];
    return rt_fail(err, RT_ERR_NOFIT, RT_NOLOC,
                   "profiling %s needs %s (inputs, outputs and reference) but %s are available; "
                   "use --no-profile or shrink it with --set",
                   op->name, rt_cpu_fmt_bytes(nb, sizeof nb, need),
                   rt_cpu_fmt_bytes(ab, sizeof ab, avail));
}

static double rt_cpu_data_bytes(const rt_op *op, const rt_bindings *b) {
    double bytes = 0;
    for (int32_t t = 0; t < op->n_tensors; t++)
        if (op->tensors[t].role != RT_ROLE_TEMP && b->tensors[t].laid_out)
            bytes += (double)b->tensors[t].layout.elems * rt_dtype_bytes(op->tensors[t].dtype);
    return bytes;
}

// A candidate's status and reason from how its child ended and what it reported.
static void rt_cpu_cand_outcome(rt_arena *a, rt_cpu_cand *c, const rt_cpu_shared *sh,
                                rt_cpu_child_status cs, int code, double timeout_ms) {
    const char *phase = (unsigned)sh->phase < RT_CPU_PHASE_COUNT ? rt_cpu_phase_names[sh->phase]
                                                                 : "at an unknown point";
    if (cs == RT_CPU_CHILD_CRASHED) {
        c->status = RT_CPU_CAND_CRASHED;
        c->signal = code;
        c->reason = rt_arena_printf(a, "killed by signal %d (%s) %s", code, strsignal(code), phase);
    } else if (cs == RT_CPU_CHILD_TIMEOUT) {
        c->status = RT_CPU_CAND_TIMEOUT;
        c->reason = sh->phase == RT_CPU_PHASE_TIME
                        ? rt_arena_printf(a, "killed after %.0f ms %s, after %d timed runs%s",
                                          timeout_ms, phase, (int)sh->reps,
                                          sh->correct ? " (its check had passed)" : "")
                        : rt_arena_printf(a, "killed after %.0f ms %s", timeout_ms, phase);
    } else if (cs == RT_CPU_CHILD_FAILED || !sh->checked) {
        c->status = RT_CPU_CAND_FAILED;
        c->reason =
            rt_arena_printf(a, "%s (exit code %d %s)",
                            sh->why[0] ? sh->why : "its profiling child gave up", code, phase);
    } else if (!sh->correct) {
        c->status = RT_CPU_CAND_WRONG;
        c->reason = rt_arena_printf(a, "%s check: %s", c->check, sh->why);
    } else {
        c->status = RT_CPU_CAND_OK;
    }
}

// Runs candidate i in a child: checked run, check, timed runs (left in sh); fills its status,
// reason and errors. Errors only when no child could run at all.
static rt_status rt_cpu_profile_cand(rt_cpu_impl *im, rt_cpu_report *r, int32_t i, rt_cpu_data *d,
                                     rt_bindings *b, rt_cpu_shared *sh, const rt_cpu_options *opt,
                                     double best, rt_err *err) {
    rt_cpu_cand *c = &r->cands[i];
    memset(sh, 0, sizeof *sh);
    rt_cpu_child ch = {im,
                       i,
                       d,
                       b,
                       sh,
                       opt->budget_ms > 0 ? opt->budget_ms : 80.0,
                       opt->full_timing ? (double)INFINITY : best,
                       opt->fault};
    rt_cpu_child_status cs;
    int code = 0;
    // Default timeout: 10 s, or 40 predicted runs when longer (check run + repetitions).
    double timeout_ms =
        opt->timeout_ms > 0 ? opt->timeout_ms : fmax(10000.0, 40e-6 * c->predicted_ns);
    RT_TRY(rt_cpu_run_isolated(rt_cpu_child_main, &ch, timeout_ms, &cs, &code, err));
    c->check = d->check;
    c->check_ns = sh->checked ? sh->check_ns : 0.0;
    c->max_abs_err = sh->max_abs_err;
    c->max_rel_err = sh->max_rel_err;
    c->nmse = sh->nmse;
    c->reps = sh->reps;
    rt_cpu_cand_outcome(im->a, c, sh, cs, code, timeout_ms);
    if (c->status != RT_CPU_CAND_OK && !c->reason)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

// The ceilings of peak%: the f32 peak, and the bandwidth of the level the model takes the
// operator's compulsory traffic from -- the last-level cache (level 1) for a warm operator
// (rt_perf_cpu_warm: its tensors fit in half of it, so repeated runs find them there), DRAM
// otherwise, at the higher of its two triads (a cold elementwise output takes non-temporal
// stores, which the ordinary triad's 12 B per element undercount: ReLU read 1.2x it) -- each
// with its label.
static void rt_cpu_ceilings(rt_cpu_report *r, const rt_device *dev, const rt_perf_model *m) {
    snprintf(r->peak_gflops_label, sizeof r->peak_gflops_label, "none");
    snprintf(r->peak_gbps_label, sizeof r->peak_gbps_label, "none");
    r->peak_gbps_level = "none";
    r->peak_gbps_key = "bandwidth_gbps";
    if (!dev || dev->n_levels < 1)
        return;
    r->peak_gflops = rt_hal_peak_gflops(dev, RT_DTYPE_F32, false);
    rt_hal_figure_label(dev->compute_source, "f32_gflops", r->peak_gflops_label,
                        sizeof r->peak_gflops_label);
    const rt_mem_level *l = &dev->level[m && m->warm && dev->n_levels > 1 ? 1 : 0];
    bool stream = l->stream_gbps > l->bandwidth_gbps;
    r->peak_gbps = stream ? l->stream_gbps : l->bandwidth_gbps;
    r->peak_gbps_level = l->name;
    r->peak_gbps_key = stream ? "stream_gbps" : "bandwidth_gbps";
    rt_hal_figure_label(l->source, r->peak_gbps_key, r->peak_gbps_label, sizeof r->peak_gbps_label);
}

// The CPU backend's steps of the candidate loop (run.h).
typedef struct rt_cpu_loop {
    rt_cpu_impl *im;
    rt_cpu_report *r;
    const rt_perf_result *perf;
    const rt_cpu_options *opt;
    rt_bindings *b;
    bool profile, tty;
    double t_start;
    rt_arena *scratch; // the profile's data and reference, freed when the profile ends
    rt_cpu_data *d;
    rt_cpu_shared *sh;
    double bytes; // the operator's data, for GB/s
} rt_cpu_loop;

// Lowers, emits and (profiling, or top-1) JIT-compiles every candidate in rank order: the JIT
// shares one LLVM context, and a candidate whose code equals an earlier one's shares its
// functions, so the CPU compiles on one thread whatever the loop offers.
static rt_status rt_cpu_loop_compile(void *ctx, int32_t n, int32_t threads, rt_err *err) {
    rt_cpu_loop *L = ctx;
    (void)threads;
    for (int32_t i = 0; i < n; i++) {
        if (L->tty)
            fprintf(stderr, "\rrtgen: compiling candidate %d/%d", (int)i + 1, (int)n);
        RT_TRY(rt_cpu_build_one(L->im, L->perf, i, &L->r->cands[i], L->profile || i == 0, err));
        if (i == 0)
            L->r->top1_ms = rt_cpu_ms(L->t_start);
    }
    return RT_OK;
}

// The bound data in the kernels' types (outputs poisoned), the reference outputs, and the
// memory shared with the profiling children.
static rt_status rt_cpu_loop_prepare(void *ctx, bool *measure, rt_err *err) {
    rt_cpu_loop *L = ctx;
    rt_cpu_impl *im = L->im;
    *measure = L->profile;
    if (!L->profile)
        return RT_OK;
    const rt_op *op = im->op;
    RT_TRY(rt_bindings_prepare(L->b, err));
    rt_cpu_poison_bindings(op, L->b);
    if (!(L->scratch = rt_arena_new(1 << 16)))
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    RT_ALLOC(L->scratch, L->d, 1, err);
    RT_TRY(rt_cpu_data_make(L->scratch, im->kernels[0], L->b, RT_CPU_DATA_PROFILE, L->d, err));
    for (int32_t s = 0; s < op->n_stmts; s++)
        L->d->restore_each = L->d->restore_each || op->stmts[s].op == RT_ASSIGN_ADD;
    double t_ref = rt_cpu_now_ns();
    if (L->tty)
        fprintf(stderr, "\r\033[Krtgen: computing the reference outputs");
    RT_TRY(rt_cpu_reference(im, L->scratch, L->perf, L->b, L->opt, L->d, err));
    L->r->reference_ms = rt_cpu_ms(t_ref);
    L->r->profiled = true;
    L->sh = rt_cpu_shared_alloc(sizeof *L->sh);
    if (!L->sh)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "cannot map shared memory for profiling");
    L->bytes = rt_cpu_data_bytes(op, L->b);
    // GFLOP/s divide the arithmetic of the data the kernels run on, counted once for all: not
    // a plan's FLOPs, which for ragged rows take the model's expected sum(len) and for loop
    // nests count the padding.
    RT_TRY(rt_interp_flops(op, L->b, &L->r->flops, err));
    return RT_OK;
}

// Candidate i's check and timing in a forked child (or the outcome of the earlier candidate
// whose code it shares), and its rates and % of peak.
static rt_status rt_cpu_loop_measure(void *ctx, int32_t i, double best, rt_run_measure *m,
                                     rt_err *err) {
    rt_cpu_loop *L = ctx;
    rt_cpu_report *r = L->r;
    rt_cpu_cand *c = &r->cands[i];
    if (c->same_as >= 0) {
        const rt_cpu_cand *o = &r->cands[c->same_as];
        c->status = o->status;
        c->signal = o->signal;
        c->check = o->check;
        c->check_ns = o->check_ns;
        c->reason = o->reason;
        c->max_abs_err = o->max_abs_err;
        c->max_rel_err = o->max_rel_err;
        c->nmse = o->nmse;
        c->reps = o->reps;
        c->min_ns = o->min_ns;
        c->median_ns = o->median_ns;
        c->gflops = o->gflops;
        c->gbps = o->gbps;
        c->peak_pct = o->peak_pct;
        c->compute_bound = o->compute_bound;
        *m = (rt_run_measure){c->status == RT_CPU_CAND_OK, c->median_ns, true};
        return RT_OK;
    }
    if (L->tty)
        fprintf(stderr, "\r\033[Krtgen: profiling candidate %d/%d (%s)", (int)i + 1, (int)r->n,
                c->name);
    rt_cpu_shared *sh = L->sh;
    RT_TRY(rt_cpu_profile_cand(L->im, r, i, L->d, L->b, sh, L->opt, best, err));
    if (sh->reps > 0) {
        int32_t reps = sh->reps < RT_CPU_MAX_REPS ? sh->reps : RT_CPU_MAX_REPS;
        c->min_ns = sh->times_ns[0];
        for (int32_t q = 1; q < reps; q++)
            c->min_ns = fmin(c->min_ns, sh->times_ns[q]);
        c->median_ns = rt_cpu_median(sh->times_ns, reps);
        c->gflops = r->flops / c->median_ns;
        c->gbps = L->bytes / c->median_ns;
        // peak% is of the ceiling the model says binds (the bottleneck column of the ranking).
        c->compute_bound = L->perf->cands[i].bottleneck < 0;
        if (c->compute_bound)
            c->peak_pct = r->peak_gflops > 0 ? 100.0 * c->gflops / r->peak_gflops : 0.0;
        else
            c->peak_pct = r->peak_gbps > 0 ? 100.0 * c->gbps / r->peak_gbps : 0.0;
    }
    *m = (rt_run_measure){c->status == RT_CPU_CAND_OK, c->median_ns, false};
    return RT_OK;
}

// The run-off's child: per turn, every contender in order runs for slice_ms (at least once),
// and the turn's median of each goes to the shared memory.
typedef struct rt_cpu_runoff_child {
    rt_cpu_impl *im;
    const int32_t *cands;
    int32_t n;
    rt_cpu_data *d;
    rt_cpu_shared *sh;
    double slice_ms;
} rt_cpu_runoff_child;

static int rt_cpu_runoff_main(void *ctx) {
    rt_cpu_runoff_child *ro = ctx;
    rt_cpu_launch launch[RT_RUN_RUNOFF_MAX];
    rt_err err;
    rt_err_clear(&err);
    for (int32_t j = 0; j < ro->n; j++) {
        int32_t c = ro->cands[j];
        if (rt_cpu_launch_of(ro->im->a, ro->im->kernels[c], ro->im->fns[c], ro->d->args, &launch[j],
                             &err) != RT_OK)
            return 3;
    }
    rt_cpu_pool *pool = rt_cpu_pool_new(ro->im->threads);
    if (!pool)
        return 2;
    static double t[RT_CPU_MAX_REPS]; // the child's own copy (forked)
    for (int32_t turn = 0; turn < RT_CPU_RUNOFF_TURNS; turn++) {
        for (int32_t j = 0; j < ro->n; j++) {
            int32_t reps = 0;
            double start = rt_cpu_now_ns();
            do {
                double ns = rt_cpu_timed_run(pool, &launch[j], ro->im, ro->d);
                if (ns < 0) {
                    rt_cpu_pool_free(pool);
                    return 3;
                }
                t[reps++] = ns;
            } while (reps < RT_CPU_MAX_REPS && rt_cpu_ms(start) < ro->slice_ms);
            ro->sh->runoff_ns[j][turn] = rt_cpu_median(t, reps);
        }
        ro->sh->runoff_turns = turn + 1;
    }
    rt_cpu_pool_free(pool);
    return 0;
}

// The CPU run-off (run.h): the contenders in one forked child, each its budget again in all.
// A child that fails leaves the first medians to decide (no contender timed).
static rt_status rt_cpu_loop_runoff(void *ctx, const int32_t *cands, int32_t n, double *median_ns,
                                    rt_err *err) {
    rt_cpu_loop *L = ctx;
    rt_cpu_report *r = L->r;
    rt_cpu_shared *sh = L->sh;
    memset(sh, 0, sizeof *sh);
    double budget_ms = L->opt->budget_ms > 0 ? L->opt->budget_ms : 80.0, runs_ms = 0;
    for (int32_t j = 0; j < n; j++)
        runs_ms += r->cands[cands[j]].median_ns * 1e-6;
    rt_cpu_runoff_child ro = {L->im, cands, n, L->d, sh, budget_ms / RT_CPU_RUNOFF_TURNS};
    if (L->tty)
        fprintf(stderr, "\r\033[Krtgen: run-off of %d candidates", (int)n);
    // Each turn: a slice and one run past it per contender; ten times that, or 10 s.
    double timeout_ms = fmax(10000.0, 10.0 * RT_CPU_RUNOFF_TURNS * (n * ro.slice_ms + 2 * runs_ms));
    rt_cpu_child_status cs;
    int code = 0;
    RT_TRY(rt_cpu_run_isolated(rt_cpu_runoff_main, &ro, timeout_ms, &cs, &code, err));
    if (cs != RT_CPU_CHILD_OK || sh->runoff_turns < 1)
        return RT_OK;
    r->n_runoff = n;
    r->runoff_turns = sh->runoff_turns;
    for (int32_t j = 0; j < n; j++) {
        median_ns[j] = rt_cpu_median(sh->runoff_ns[j], sh->runoff_turns);
        r->runoff[j] = cands[j];
        r->cands[cands[j]].runoff_ns = median_ns[j];
    }
    return RT_OK;
}

_Static_assert(sizeof((rt_cpu_report *)0)->runoff / sizeof(int32_t) == RT_RUN_RUNOFF_MAX,
               "rt_cpu_report.runoff holds RT_RUN_RUNOFF_MAX contenders");

static const rt_run_hooks rt_cpu_loop_hooks = {
    .backend = "cpu",
    .compile = rt_cpu_loop_compile,
    .prepare = rt_cpu_loop_prepare,
    .measure = rt_cpu_loop_measure,
    .runoff = rt_cpu_loop_runoff,
};

// The report, the JIT (or the target machine of a foreign isa) and the ceilings, before the
// loop.
static rt_status rt_cpu_report_new(rt_arena *a, const rt_op *op, const rt_device *dev,
                                   const rt_perf_result *perf, const rt_cpu_options *opt,
                                   rt_cpu_report **out, rt_err *err) {
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
    rt_cpu_ceilings(r, dev, perf->model);
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
    r->not_profiled = !im->runs ? why : !opt->profile ? "profiling off" : NULL;
    *out = r;
    return RT_OK;
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
    if (opt->profile)
        RT_TRY(rt_cpu_profile_fits(a, op, b, perf, opt, err));
    rt_cpu_report *r = NULL;
    RT_TRY(rt_cpu_report_new(a, op, dev, perf, opt, &r, err));
    rt_cpu_impl *im = r->impl;
    rt_cpu_loop L = {.im = im,
                     .r = r,
                     .perf = perf,
                     .opt = opt,
                     .b = b,
                     .profile = opt->profile && im->runs,
                     .tty = opt->progress && isatty(2),
                     .t_start = t_start};
    rt_run_options ro = {.compile_threads = 1, .on_step = opt->on_step, .obs = opt->obs};
    rt_status st = rt_run_candidates(&rt_cpu_loop_hooks, &L, r->n, &ro, &r->winner, err);
    if (L.sh)
        rt_cpu_shared_free(L.sh, sizeof *L.sh);
    rt_arena_free(L.scratch);
    if (st != RT_OK)
        return st;
    if (L.tty)
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
    rt_cpu_launch launch; // on d's buffers
};

static rt_status rt_cpu_runner_make(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                                    rt_cpu_data_mode mode, rt_cpu_runner **out, rt_err *err) {
    const rt_cpu_impl *im = r->impl;
    int32_t w = cand >= 0 ? cand : r->winner;
    *out = NULL;
    if (w < 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s has no winner to run: %s", im->op->name,
                       r->profiled ? "no candidate passed its check"
                                   : "its candidates were not profiled");
    if (w >= r->n)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "no candidate %d (the report has %d)", (int)w,
                       (int)r->n);
    const rt_cpu_cand *c = &r->cands[w];
    if (c->status != RT_CPU_CAND_OK)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "only a candidate whose check passed runs; candidate %d (%s) is %s%s%s",
                       (int)w, c->name, rt_cpu_cand_status_name(c->status), c->reason ? ": " : "",
                       c->reason ? c->reason : "");
    if (!im->fns[w])
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "candidate %d was not compiled", (int)w);
    if (mode != RT_CPU_DATA_UNBOUND)
        RT_TRY(rt_bindings_prepare(b, err));
    rt_arena *a = rt_arena_new(1 << 16);
    if (!a)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_cpu_runner *rn = rt_arena_alloc(a, sizeof *rn);
    if (!rn) {
        rt_arena_free(a);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    *rn = (rt_cpu_runner){a, im->op, im->kernels[w], im->fns[w], NULL, {0}, {0}};
    rt_status st = rt_cpu_data_make(a, rn->k, b, mode, &rn->d, err);
    if (st == RT_OK)
        st = rt_cpu_launch_of(a, rn->k, rn->fns, rn->d.args, &rn->launch, err);
    if (st == RT_OK && !(rn->pool = rt_cpu_pool_new(im->threads)))
        st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start the thread pool");
    if (st != RT_OK) {
        rt_arena_free(a);
        return st;
    }
    *out = rn;
    return RT_OK;
}

rt_status rt_cpu_runner_new(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                            rt_cpu_runner **out, rt_err *err) {
    return rt_cpu_runner_make(r, cand, b, RT_CPU_DATA_COPY, out, err);
}

rt_status rt_cpu_runner_new_unbound(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                                    rt_cpu_runner **out, rt_err *err) {
    return rt_cpu_runner_make(r, cand, b, RT_CPU_DATA_UNBOUND, out, err);
}

void *rt_cpu_runner_data(rt_cpu_runner *rn, int32_t tensor) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++)
        if (rn->k->bufs[i].role == RT_KIR_BUF_DATA && rn->k->bufs[i].tensor == tensor)
            return rn->d.args[i];
    return NULL;
}

size_t rt_cpu_runner_bytes(const rt_cpu_runner *rn, int32_t tensor) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++)
        if (rn->k->bufs[i].role == RT_KIR_BUF_DATA && rn->k->bufs[i].tensor == tensor)
            return rn->d.bytes[i];
    return 0;
}

bool rt_cpu_runner_bind(rt_cpu_runner *rn, int32_t tensor, void *buf, size_t bytes) {
    bool found = false;
    for (int32_t i = 1; i < rn->k->n_bufs; i++)
        if (rn->k->bufs[i].role == RT_KIR_BUF_DATA && rn->k->bufs[i].tensor == tensor) {
            if (rn->d.bytes[i] != bytes)
                return false;
            rn->d.args[i] = buf; // the launch reads d.args
            found = true;
        }
    return found;
}

int32_t rt_cpu_runner_bind_start(rt_cpu_runner *rn, int32_t tensor, int32_t dim, int64_t *start,
                                 size_t bytes) {
    int32_t found = 0;
    for (int32_t i = 1; i < rn->k->n_bufs; i++) {
        const rt_kir_buf *bf = &rn->k->bufs[i];
        if (bf->role == RT_KIR_BUF_START && bf->tensor == tensor && bf->dim == dim) {
            if (rn->d.bytes[i] != bytes || memcmp(rn->d.args[i], start, bytes) != 0)
                return -1;
            rn->d.args[i] = start;
            found++;
        }
    }
    return found;
}

bool rt_cpu_runner_load(rt_cpu_runner *rn, int32_t tensor, const double *v, int64_t n) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++) {
        const rt_kir_buf *bf = &rn->k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || bf->tensor != tensor)
            continue;
        if (!rn->d.args[i] || (size_t)n > rn->d.bytes[i] / (bf->type == RT_KIR_F64 ? 8 : 4))
            return false;
        rt_cpu_buf_store(bf, rn->d.args[i], v, 0.0, n);
        return true;
    }
    return false;
}

bool rt_cpu_runner_fill(rt_cpu_runner *rn, int32_t tensor, double v) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++) {
        const rt_kir_buf *bf = &rn->k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || bf->tensor != tensor)
            continue;
        if (!rn->d.args[i])
            return false;
        rt_cpu_buf_store(bf, rn->d.args[i], NULL, v,
                         (int64_t)(rn->d.bytes[i] / (bf->type == RT_KIR_F64 ? 8 : 4)));
        return true;
    }
    return false;
}

rt_status rt_cpu_runner_run(rt_cpu_runner *rn, rt_err *err) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++)
        if (!rn->d.args[i])
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s: the buffer of %s is not bound",
                           rn->op->name, rn->op->tensors[rn->k->bufs[i].tensor].name);
    if (!rt_cpu_pool_run(rn->pool, &rn->launch))
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

bool rt_cpu_runner_read(const rt_cpu_runner *rn, int32_t tensor, double *out, int64_t n) {
    for (int32_t i = 1; i < rn->k->n_bufs; i++) {
        const rt_kir_buf *bf = &rn->k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || bf->tensor != tensor)
            continue;
        if (!rn->d.args[i] || (size_t)n > rn->d.bytes[i] / (bf->type == RT_KIR_F64 ? 8 : 4))
            return false;
        for (int64_t e = 0; e < n; e++)
            out[e] =
                rt_dtype_round(rn->op->tensors[tensor].dtype, rt_cpu_buf_get(bf, rn->d.args[i], e));
        return true;
    }
    return false;
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

const rt_kir_kernel *rt_cpu_report_kernel(const rt_cpu_report *r, int32_t i) {
    const rt_cpu_impl *im = r->impl;
    return i >= 0 && i < r->n ? im->kernels[i] : NULL;
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
            if (c->runoff_ns > 0)
                json_object_set_new(o, "runoff_median_ns", json_real(c->runoff_ns));
            json_object_set_new(o, "flops", json_real(r->flops));
            json_object_set_new(o, "gflops", json_real(c->gflops));
            json_object_set_new(o, "gbps", json_real(c->gbps));
            json_object_set_new(o, "peak_pct", json_real(c->peak_pct));
            // What peak_pct is of: "f32_gflops" or "mem.<level>.<key>".
            char of[64];
            if (c->compute_bound)
                snprintf(of, sizeof of, "f32_gflops");
            else
                snprintf(of, sizeof of, "mem.%s.%s", r->peak_gbps_level, r->peak_gbps_key);
            json_object_set_new(o, "peak_of", json_string(of));
            json_object_set_new(o, "peak_of_value",
                                json_real(c->compute_bound ? r->peak_gflops : r->peak_gbps));
            json_object_set_new(
                o, "peak_of_label",
                json_string(c->compute_bound ? r->peak_gflops_label : r->peak_gbps_label));
            json_object_set_new(o, "check", json_string(c->check ? c->check : "none"));
            json_object_set_new(o, "check_ns", json_real(c->check_ns));
            json_object_set_new(o, "max_abs_err",
                                json_real(isfinite(c->max_abs_err) ? c->max_abs_err : -1.0));
            json_object_set_new(o, "max_rel_err",
                                json_real(isfinite(c->max_rel_err) ? c->max_rel_err : -1.0));
            json_object_set_new(o, "nmse", json_real(isfinite(c->nmse) ? c->nmse : -1.0));
            if (c->status == RT_CPU_CAND_CRASHED)
                json_object_set_new(o, "signal", json_integer(c->signal));
            if (c->reason)
                json_object_set_new(o, "reason", json_string(c->reason));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

void rt_cpu_report_print(const rt_cpu_report *r, rt_buf *out) {
    rt_buf_printf(out, "%-4s %-28s %-12s %12s %12s %10s %8s %-5s %10s %10s\n", "rank", "kernel",
                  "status", "predicted_us", "median_us", "GFLOP/s", "peak%", "of", "max_err",
                  "check_us");
    for (int32_t i = 0; i < r->n; i++) {
        const rt_cpu_cand *c = &r->cands[i];
        rt_buf_printf(out, "%-4d %-28s %-12s %12.2f %12.2f %10.1f %8.1f %-5s %10.2e %10.1f%s\n",
                      (int)c->rank + 1, c->name, rt_cpu_cand_status_name(c->status),
                      c->predicted_ns * 1e-3, c->median_ns * 1e-3, c->gflops, c->peak_pct,
                      c->compute_bound ? "f32" : r->peak_gbps_level, c->max_abs_err,
                      c->check_ns * 1e-3, i == r->winner ? "  <- winner" : "");
    }
    rt_buf_printf(out,
                  "peak%% of: f32 %.4g GFLOP/s (%s) where the model's bottleneck is compute, %s "
                  "%.4g GB/s%s (%s) for the others%s\n",
                  r->peak_gflops, r->peak_gflops_label, r->peak_gbps_level, r->peak_gbps,
                  strcmp(r->peak_gbps_key, "stream_gbps") == 0 ? " streaming" : "",
                  r->peak_gbps_label,
                  r->peak_gbps_level && strcmp(r->peak_gbps_level, "dram") != 0
                      ? " (the operator fits in half of it: the model's warm rule)"
                      : "");
    if (r->profiled)
        rt_buf_printf(out,
                      "GFLOP/s: %.4g MFLOP, the operator's arithmetic on the bound lengths (no "
                      "padding), over the median\n",
                      r->flops * 1e-6);
    if (r->n_runoff > 0) {
        rt_buf_printf(out,
                      "run-off of the candidates within %.0f%% of the best median, %d "
                      "interleaved turns:",
                      100.0 * RT_RUN_RUNOFF_MARGIN, (int)r->runoff_turns);
        for (int32_t j = 0; j < r->n_runoff; j++) {
            const rt_cpu_cand *c = &r->cands[r->runoff[j]];
            rt_buf_printf(out, "%s rank %d %.2f us", j ? "," : "", (int)c->rank + 1,
                          c->runoff_ns * 1e-3);
        }
        rt_buf_printf(out, " (median of the turns' medians); the fastest wins\n");
    }
    for (int32_t i = 0; i < r->n; i++)
        if (r->cands[i].reason && r->cands[i].same_as < 0)
            rt_buf_printf(out, "rank %d %s: %s\n", (int)r->cands[i].rank + 1,
                          rt_cpu_cand_status_name(r->cands[i].status), r->cands[i].reason);
    if (r->profiled)
        rt_buf_printf(out, "reference (%s check) in %.1f ms\n",
                      r->n > 0 && r->cands[0].check ? r->cands[0].check : "none", r->reference_ms);
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
