// layer.c: a layer run end to end on a CPU (layer.h). Top of the run layer, above the single-op
// pipeline (rtgen.c): each def's winner becomes a runner without buffers of its own
// (rt_cpu_runner_new_unbound), bound to the layer's — one per layer tensor, so a producer writes
// straight into what its reader reads — and whose start arrays are pointed at the layer's prelude: one array
// per distinct ragged structure, computed once (rt_layout_compute) whatever the number of
// kernels and tensors that read it. The run is checked against the interpreter's run of the
// whole layer (rt_layer_interp_run) and timed per kernel and in total.
#include "layer.h"
#include "rtgen-int.h"
#include "hal-cpu.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RT_LAYER_MAX_REPS 1000

struct rt_layer_runner {
    rt_arena *a;
    const rt_layer *l;
    rt_layer_bindings *lb;
    rt_cpu_runner **rn; // [n_ops]
    void **bufs;        // [n_tensors]: the layer's buffers (NULL: no kernel reads or writes it)
    size_t *bytes;      // [n_tensors]
    rt_layer_report *r;
    rt_err *err; // the current call's
};
typedef struct rt_layer_runner rt_layer_run_ctx;

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median_of(double *v, int32_t n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

bool rt_layer_same_structure(const rt_op *oa, const rt_tensor *ta, const rt_op *ob,
                             const rt_tensor *tb, int32_t d) {
    if (ta->n_dims <= d || tb->n_dims <= d)
        return false;
    for (int32_t k = 0; k <= d; k++)
        if (!rt_layer_extent_equal(oa, ta->dims[k].extent, ob, tb->dims[k].extent))
            return false;
    return true;
}

// The prelude entry of (op k, tensor t, dim d), made (computed) when it is the first of its
// structure.
static rt_status prelude_entry(rt_layer_run_ctx *c, int32_t k, int32_t t, int32_t d, int32_t *out) {
    rt_layer_report *r = c->r;
    const rt_op *op = c->l->ops[k];
    for (int32_t e = 0; e < r->n_prelude; e++) {
        const rt_layer_prelude_entry *p = &r->prelude[e];
        const rt_op *po = c->l->ops[p->op];
        if (p->dim == d &&
            rt_layer_same_structure(po, &po->tensors[p->tensor], op, &op->tensors[t], d)) {
            *out = e;
            return RT_OK;
        }
    }
    rt_layout lay;
    RT_TRY(rt_layout_compute(c->lb->ops[k], t, &lay, c->err));
    rt_layer_prelude_entry *p = &r->prelude[r->n_prelude];
    *p = (rt_layer_prelude_entry){
        k, t, d, lay.start[d], (size_t)(lay.n_rows[d] + 1) * sizeof(int64_t), 0};
    *out = r->n_prelude++;
    return RT_OK;
}

// The prelude: every start array a kernel reads, computed once per structure and bound.
static rt_status prelude_bind(rt_layer_run_ctx *c) {
    const rt_layer *l = c->l;
    int32_t cap = 0;
    for (int32_t k = 0; k < l->n_ops; k++)
        cap += l->ops[k]->n_tensors * RT_MAX_DIMS;
    RT_ALLOC(c->a, c->r->prelude, cap, c->err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_bindings *b = c->lb->ops[k];
        for (int32_t t = 0; t < l->ops[k]->n_tensors; t++) {
            for (int32_t d = 0; d < b->tensors[t].layout.n_dims; d++) {
                if (!b->tensors[t].layout.start[d])
                    continue;
                int32_t e;
                RT_TRY(prelude_entry(c, k, t, d, &e));
                rt_layer_prelude_entry *p = &c->r->prelude[e];
                int32_t n = rt_cpu_runner_bind_start(c->rn[k], t, d, p->start, p->bytes);
                if (n < 0)
                    return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                                   "the start array of dim %d of %s in def %s differs from the "
                                   "shared prelude's",
                                   (int)d, l->ops[k]->tensors[t].name, l->ops[k]->name);
                p->n_users += n;
                c->r->n_start_bufs += n;
            }
        }
    }
    // Its time: every distinct array computed again (one layout computation gives all the
    // arrays of its tensor), the best of a few repetitions.
    double best = INFINITY;
    for (int32_t rep = 0; rep < 5; rep++) {
        double t0 = rt_cpu_now_ns();
        for (int32_t e = 0; e < c->r->n_prelude; e++) {
            const rt_layer_prelude_entry *p = &c->r->prelude[e];
            bool done = false;
            for (int32_t f = 0; f < e && !done; f++)
                done = c->r->prelude[f].op == p->op && c->r->prelude[f].tensor == p->tensor;
            if (done)
                continue;
            rt_layout lay;
            RT_TRY(rt_layout_compute(c->lb->ops[p->op], p->tensor, &lay, c->err));
        }
        best = fmin(best, rt_cpu_now_ns() - t0);
    }
    c->r->prelude_ns = c->r->n_prelude ? best : 0;
    return RT_OK;
}

// A 64-byte aligned buffer of n bytes in a.
static void *buffer_new(rt_arena *a, size_t n) {
    char *p = rt_arena_alloc(a, n + 64);
    return p ? (void *)rt_round_up((int64_t)(uintptr_t)p, 64) : NULL;
}

// Binds a buffer of a's to every data buffer of def k's runner rn that is not a layer tensor
// (a temporary the kernel keeps in memory), poisoned as the profile's.
static rt_status own_buffers_bind(rt_arena *a, const rt_layer *l, int32_t k, rt_cpu_runner *rn,
                                  rt_err *err) {
    const rt_op *op = l->ops[k];
    for (int32_t t = 0; t < op->n_tensors; t++) {
        size_t n = rt_cpu_runner_bytes(rn, t);
        if (l->tensor_of[k][t] >= 0 || n == 0)
            continue;
        void *p = buffer_new(a, n);
        if (!p)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        rt_cpu_runner_bind(rn, t, p, n);
        if (rt_cpu_poisoned(op, t))
            rt_cpu_runner_fill(rn, t, rt_cpu_poison_of(&op->tensors[t]));
    }
    return RT_OK;
}

// One buffer per layer tensor that some kernel uses, bound in every kernel that uses it (the
// runners have none of their own): layer inputs start from lb's values, everything else from
// the poison.
static rt_status buffers_bind(rt_layer_run_ctx *c) {
    const rt_layer *l = c->l;
    RT_ALLOC(c->a, c->bufs, l->n_tensors, c->err);
    RT_ALLOC(c->a, c->bytes, l->n_tensors, c->err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        for (int32_t t = 0; t < op->n_tensors; t++) {
            int32_t i = l->tensor_of[k][t];
            size_t n = rt_cpu_runner_bytes(c->rn[k], t);
            if (i < 0 || n == 0)
                continue;
            bool fresh = !c->bufs[i];
            if (fresh) {
                if (!(c->bufs[i] = buffer_new(c->a, n)))
                    return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
                c->bytes[i] = n;
            }
            if (!rt_cpu_runner_bind(c->rn[k], t, c->bufs[i], c->bytes[i]))
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "the kernels disagree on the buffer of '%s' (%zu bytes in def %s, "
                               "%zu before)",
                               l->tensors[i].name, n, op->name, c->bytes[i]);
            const rt_tensor_data *td = &c->lb->ops[k]->tensors[t];
            if (fresh && l->tensors[i].is_input &&
                !rt_cpu_runner_load(c->rn[k], t, td->data, td->data ? td->layout.elems : 0))
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "the values of layer input '%s' do not fit def %s's buffer",
                               l->tensors[i].name, op->name);
            if (!l->tensors[i].is_input && l->tensors[i].op == k)
                rt_cpu_runner_fill(c->rn[k], t, rt_cpu_poison_of(&op->tensors[t]));
        }
        RT_TRY(own_buffers_bind(c->a, l, k, c->rn[k], c->err));
    }
    return RT_OK;
}

// The layer's reference (layer.h): outputs poisoned first, as the profile's reference (elements
// an op does not write hold the poison on both sides).
rt_status rt_layer_reference(rt_arena *a, const rt_layer *l, rt_layer_bindings *lb, uint64_t seed,
                             rt_layer_bindings **out, rt_err *err) {
    rt_layer_run_ctx ctx = {.a = a, .l = l, .lb = lb, .err = err}, *c = &ctx;
    rt_layer_bindings *ref = NULL;
    RT_TRY(rt_layer_bindings_new(c->a, l, seed, &ref, c->err));
    for (int32_t i = 0; i < l->n_tensors; i++) {
        const rt_layer_tensor *lt = &l->tensors[i];
        const rt_tensor_data *src = &c->lb->ops[lt->op]->tensors[lt->tensor];
        if (!lt->is_input || !l->ops[lt->op]->tensors[lt->tensor].is_length)
            continue;
        int32_t *v;
        RT_ALLOC(c->a, v, src->layout.elems, c->err);
        for (int64_t e = 0; e < src->layout.elems; e++)
            v[e] = (int32_t)src->data[e];
        RT_TRY(rt_bindings_set_lengths(ref->ops[lt->op], lt->name, v, src->layout.elems, c->err));
    }
    RT_TRY(rt_layer_bindings_prepare(ref, c->err));
    // Every def that declares a layer input gets lb's values (prepare gave the later ones the
    // generated values of ref's own seed).
    for (int32_t k = 0; k < l->n_ops; k++)
        for (int32_t t = 0; t < l->ops[k]->n_tensors; t++) {
            int32_t i = l->tensor_of[k][t];
            if (i < 0 || !l->tensors[i].is_input || l->ops[k]->tensors[t].is_length)
                continue;
            const rt_layer_tensor *lt = &l->tensors[i];
            const rt_tensor_data *src = &c->lb->ops[lt->op]->tensors[lt->tensor];
            RT_TRY(rt_bindings_set_data(ref->ops[k], l->ops[k]->tensors[t].name, src->data,
                                        src->layout.elems, c->err));
        }
    for (int32_t k = 0; k < l->n_ops; k++)
        rt_cpu_poison_bindings(l->ops[k], ref->ops[k]);
    RT_TRY(rt_layer_interp_run(ref, c->err));
    *out = ref;
    return RT_OK;
}

// Reads def k's outputs (into lb's data where lb holds it, else into s, the caller's scratch
// arena) and compares them with want[j] (one per output, in lb's layout), whose: what they are,
// for the message.
static rt_status compare_def(rt_layer_run_ctx *c, rt_arena *s, int32_t k, double *const *want,
                             const char *whose) {
    const rt_op *op = c->l->ops[k];
    rt_layer_report *r = c->r;
    rt_layer_op_result *o = &r->ops[k];
    o->correct = true;
    for (int32_t j = 0; j < op->n_outputs; j++) {
        int32_t t = op->outputs[j];
        int64_t n = c->lb->ops[k]->tensors[t].layout.elems;
        // Into lb when it holds the output's data (prepared in full), else into s.
        double *got = c->lb->ops[k]->tensors[t].data;
        if (!got)
            RT_ALLOC(s, got, n, c->err);
        if (!rt_cpu_runner_read(c->rn[k], t, got, n))
            return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC, "def %s's kernel has no output %s",
                           op->name, op->tensors[t].name);
        rt_compare_result cr;
        rt_compare_data(want[j], got, n, &cr);
        o->max_abs_err = fmax(o->max_abs_err, cr.max_abs_err);
        o->max_rel_err = fmax(o->max_rel_err, cr.max_rel_err);
        o->nmse = fmax(o->nmse, cr.nmse);
        if (rt_compare_accept(&cr, op->tensors[t].dtype))
            continue;
        o->correct = r->correct = false;
        if (!r->why)
            r->why = rt_arena_printf(c->a,
                                     "def %s: output %s differs from %s: max abs error %.3g at "
                                     "element %lld, nmse %.3g",
                                     op->name, op->tensors[t].name, whose, cr.max_abs_err,
                                     (long long)cr.worst_index, cr.nmse);
    }
    return RT_OK;
}

// Runs the kernels once in order, reads every def's outputs back into lb and compares them with
// the reference.
static rt_status check_run(rt_layer_run_ctx *c, uint64_t seed) {
    const rt_layer *l = c->l;
    rt_layer_report *r = c->r;
    for (int32_t k = 0; k < l->n_ops; k++)
        RT_TRY(rt_cpu_runner_run(c->rn[k], c->err));
    // The reference and the outputs read back live in a scratch arena of their own.
    rt_arena *s = rt_arena_new(1 << 16);
    if (!s)
        return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_layer_bindings *ref = NULL;
    rt_status st = rt_layer_reference(s, l, c->lb, seed, &ref, c->err);
    if (st == RT_OK) {
        r->checked = r->correct = true;
        r->check = "interpreter";
    }
    for (int32_t k = 0; st == RT_OK && k < l->n_ops; k++) {
        double **want = rt_arena_calloc(s, (size_t)l->ops[k]->n_outputs + 1, sizeof *want);
        if (!want) {
            st = rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            break;
        }
        for (int32_t j = 0; j < l->ops[k]->n_outputs; j++)
            want[j] = ref->ops[k]->tensors[l->ops[k]->outputs[j]].data;
        st = compare_def(c, s, k, want, "the interpreter's");
    }
    rt_arena_free(s);
    return st;
}

// Def k's winner alone, on buffers (in s) and start arrays of its own: its layer inputs copied
// from the layer's buffers, its outputs and temporaries poisoned, run once; its outputs read into
// want[j] (in s).
static rt_status rerun_alone(rt_layer_runner *c, rt_arena *s, int32_t k, double **want,
                             rt_err *err) {
    const rt_layer *l = c->l;
    const rt_op *op = l->ops[k];
    rt_cpu_runner *alone = NULL;
    RT_TRY(rt_cpu_runner_new_unbound(c->r->ops[k].cpu, c->r->ops[k].winner, c->lb->ops[k], &alone,
                                     err));
    rt_status st = own_buffers_bind(s, l, k, alone, err);
    for (int32_t t = 0; st == RT_OK && t < op->n_tensors; t++) {
        int32_t i = l->tensor_of[k][t];
        size_t n = rt_cpu_runner_bytes(alone, t);
        if (i < 0 || n == 0)
            continue;
        void *p = buffer_new(s, n);
        if (!p) {
            st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            break;
        }
        rt_cpu_runner_bind(alone, t, p, n);
        if (!l->tensors[i].is_input && l->tensors[i].op == k)
            rt_cpu_runner_fill(alone, t, rt_cpu_poison_of(&op->tensors[t]));
        else if (c->bufs[i] && c->bytes[i] == n)
            memcpy(p, c->bufs[i], n);
    }
    if (st == RT_OK)
        st = rt_cpu_runner_run(alone, err);
    for (int32_t j = 0; st == RT_OK && j < op->n_outputs; j++) {
        int32_t t = op->outputs[j];
        int64_t n = c->lb->ops[k]->tensors[t].layout.elems;
        want[j] = rt_arena_calloc(s, (size_t)rt_at_least_one((size_t)n), sizeof(double));
        if (!want[j])
            st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        else if (!rt_cpu_runner_read(alone, t, want[j], n))
            st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "def %s's kernel has no output %s",
                         op->name, op->tensors[t].name);
    }
    rt_cpu_runner_free(alone);
    return st;
}

rt_status rt_layer_runner_check_rerun(rt_layer_runner *c, rt_err *err) {
    rt_layer_report *r = c->r;
    r->checked = r->correct = true;
    r->check = "rerun";
    r->why = NULL;
    // One def's buffers and outputs at a time, released before the next def's.
    for (int32_t k = 0; k < c->l->n_ops; k++) {
        rt_arena *s = rt_arena_new(1 << 16);
        if (!s)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        double **want = rt_arena_calloc(s, (size_t)c->l->ops[k]->n_outputs + 1, sizeof *want);
        rt_status st = want ? rerun_alone(c, s, k, want, err)
                            : rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (st == RT_OK)
            st = compare_def(c, s, k, want, "its kernel's run alone on the same inputs");
        rt_arena_free(s);
        RT_TRY(st);
    }
    return RT_OK;
}

// The layer's check: the interpreter's run of the layer when it is small enough, else each
// kernel rerun alone (rt_layer_options.interp_max_flops).
static rt_status check_layer(rt_layer_run_ctx *c, const rt_layer_options *opt) {
    double flops = 0,
           limit = opt->interp_max_flops > 0 ? opt->interp_max_flops : RT_LAYER_INTERP_MAX_FLOPS;
    for (int32_t k = 0; k < c->l->n_ops; k++)
        flops += c->r->ops[k].cpu->flops; // rt_interp_flops of the profiled def's data
    if (flops <= limit)
        return check_run(c, opt->seed);
    RT_TRY(rt_layer_runner_run(c, -1, c->err));
    return rt_layer_runner_check_rerun(c, c->err);
}

// Times the layer: repetitions of the kernels in order, each kernel timed on its own too.
static rt_status time_layer(rt_layer_run_ctx *c, double budget_ms) {
    const rt_layer *l = c->l;
    rt_layer_report *r = c->r;
    double *total, **per;
    RT_ALLOC(c->a, total, RT_LAYER_MAX_REPS, c->err);
    RT_ALLOC(c->a, per, l->n_ops, c->err);
    for (int32_t k = 0; k < l->n_ops; k++)
        RT_ALLOC(c->a, per[k], RT_LAYER_MAX_REPS, c->err);
    double start = rt_cpu_now_ns();
    int32_t n = 0;
    while (n < RT_LAYER_MAX_REPS && (n < 3 || (rt_cpu_now_ns() - start) * 1e-6 < budget_ms)) {
        double t0 = rt_cpu_now_ns(), t = t0;
        for (int32_t k = 0; k < l->n_ops; k++) {
            RT_TRY(rt_cpu_runner_run(c->rn[k], c->err));
            double now = rt_cpu_now_ns();
            per[k][n] = now - t;
            t = now;
        }
        total[n++] = t - t0;
    }
    r->reps = n;
    r->median_ns = median_of(total, n);
    r->min_ns = total[0];
    for (int32_t k = 0; k < l->n_ops; k++)
        r->ops[k].layer_median_ns = median_of(per[k], n);
    return RT_OK;
}

// Fills the per-op results from the profiles; errors for a def that cannot run in a layer.
static rt_status ops_begin(rt_layer_run_ctx *c, rt_cpu_report *const *cpu) {
    const rt_layer *l = c->l;
    rt_layer_report *r = c->r;
    RT_ALLOC(c->a, r->ops, l->n_ops, c->err);
    RT_ALLOC(c->a, c->rn, l->n_ops, c->err);
    r->n_ops = l->n_ops;
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        for (int32_t s = 0; s < op->n_stmts; s++)
            if (op->stmts[s].op == RT_ASSIGN_ADD)
                return rt_fail(c->err, RT_ERR_BACKEND, op->stmts[s].loc,
                               "def %s accumulates into the caller's values ('+='), which a "
                               "layer run does not support",
                               op->name);
        int32_t w = cpu[k]->winner;
        if (w < 0)
            return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                           "def %s of layer %s has no winner to run: %s", op->name, l->name,
                           cpu[k]->profiled ? "no candidate passed its check"
                                            : "its candidates were not profiled");
        r->ops[k] = (rt_layer_op_result){.op = op,
                                         .cpu = cpu[k],
                                         .winner = w,
                                         .kernel = cpu[k]->cands[w].name,
                                         .rank = cpu[k]->cands[w].rank + 1,
                                         .predicted_ns = cpu[k]->cands[w].predicted_ns,
                                         .profiled_ns = cpu[k]->cands[w].median_ns,
                                         .max_abs_err = -1,
                                         .max_rel_err = -1,
                                         .nmse = -1};
        r->predicted_ns += r->ops[k].predicted_ns;
    }
    r->threads = cpu[0]->threads;
    return RT_OK;
}

void rt_layer_runner_free(rt_layer_runner *rn) {
    if (!rn || !rn->rn)
        return;
    for (int32_t k = 0; k < rn->l->n_ops; k++)
        rt_cpu_runner_free(rn->rn[k]);
    rn->rn = NULL;
}

rt_status rt_layer_runner_new(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                              rt_layer_bindings *lb, rt_layer_runner **out, rt_err *err) {
    rt_layer_runner *c;
    RT_ALLOC(a, c, 1, err);
    RT_ALLOC(a, c->r, 1, err);
    *c = (rt_layer_runner){a, l, lb, NULL, NULL, NULL, c->r, err};
    c->r->layer = l;
    RT_TRY(ops_begin(c, cpu));
    RT_TRY(rt_layer_bindings_prepare_inputs(lb, err));
    rt_status st = RT_OK;
    for (int32_t k = 0; st == RT_OK && k < l->n_ops; k++)
        st = rt_cpu_runner_new_unbound(cpu[k], -1, lb->ops[k], &c->rn[k], err);
    if (st == RT_OK)
        st = prelude_bind(c);
    if (st == RT_OK)
        st = buffers_bind(c);
    if (st != RT_OK) {
        rt_layer_runner_free(c);
        return st;
    }
    *out = c;
    return RT_OK;
}

rt_status rt_layer_runner_run(rt_layer_runner *rn, int32_t k, rt_err *err) {
    if (k >= 0)
        return rt_cpu_runner_run(rn->rn[k], err);
    for (int32_t i = 0; i < rn->l->n_ops; i++)
        RT_TRY(rt_cpu_runner_run(rn->rn[i], err));
    return RT_OK;
}

void *rt_layer_runner_data(rt_layer_runner *rn, const char *name, size_t *bytes) {
    for (int32_t i = 0; i < rn->l->n_tensors; i++)
        if (!strcmp(rn->l->tensors[i].name, name)) {
            if (bytes)
                *bytes = rn->bytes[i];
            return rn->bufs[i];
        }
    return NULL;
}

const rt_layer_report *rt_layer_runner_report(const rt_layer_runner *rn) {
    return rn->r;
}

rt_status rt_layer_run(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                       rt_layer_bindings *lb, const rt_layer_options *opt, rt_layer_report **out,
                       rt_err *err) {
    rt_layer_runner *c;
    RT_TRY(rt_layer_runner_new(a, l, cpu, lb, &c, err));
    rt_status st = RT_OK;
    if (opt->check)
        st = check_layer(c, opt);
    if (st == RT_OK)
        st = time_layer(c, opt->budget_ms > 0 ? opt->budget_ms : 200);
    rt_layer_runner_free(c);
    if (st != RT_OK)
        return st;
    *out = c->r;
    return RT_OK;
}

void rt_layer_report_print(const rt_layer_report *r, rt_buf *out) {
    if (r->device)
        rt_buf_printf(out,
                      "layer %s: %d ops, kernels in order on %s (device buffers: inputs uploaded "
                      "once, intermediates on the device; timed with %s)\n",
                      r->layer->name, (int)r->n_ops, r->device, r->timed_with);
    else
        rt_buf_printf(out, "layer %s: %d ops, kernels in order on %d threads\n", r->layer->name,
                      (int)r->n_ops, (int)r->threads);
    rt_buf_printf(out, "%-3s %-20s %-28s %12s %12s %12s %10s %s\n", "op", "def", "kernel",
                  "predicted_us", "alone_us", "in_layer_us", "max_err", "check");
    for (int32_t k = 0; k < r->n_ops; k++) {
        const rt_layer_op_result *o = &r->ops[k];
        rt_buf_printf(out, "%-3d %-20s %-28s %12.2f %12.2f %12.2f %10.2e %s\n", (int)k + 1,
                      o->op->name, o->kernel, o->predicted_ns * 1e-3, o->profiled_ns * 1e-3,
                      o->layer_median_ns * 1e-3, o->max_abs_err,
                      !r->checked  ? "none"
                      : o->correct ? "ok"
                                   : "WRONG");
    }
    rt_buf_printf(out,
                  "total: predicted %.2f us, measured %.2f us (median of %d runs, min %.2f us)\n",
                  r->predicted_ns * 1e-3, r->median_ns * 1e-3, (int)r->reps, r->min_ns * 1e-3);
    rt_buf_printf(out,
                  "prelude: %d start arrays computed once for %d kernel buffers in %.2f us "
                  "(%.2f%% of the layer)",
                  (int)r->n_prelude, (int)r->n_start_bufs, r->prelude_ns * 1e-3,
                  r->median_ns > 0 ? 100.0 * r->prelude_ns / (r->prelude_ns + r->median_ns) : 0.0);
    if (r->device)
        rt_buf_printf(out, ", in one device buffer of %lld bytes copied once",
                      (long long)r->prelude_bytes);
    rt_buf_printf(out, "\n");
    if (r->checked)
        rt_buf_printf(out, "layer check %s: %s%s\n",
                      strcmp(r->check, "rerun") ? "against the interpreter"
                                                : "(each kernel rerun alone on copies of its "
                                                  "in-layer inputs: the layer is too large to "
                                                  "interpret)",
                      r->correct ? "ok" : "WRONG: ", r->correct ? "" : r->why);
}

static json_t *op_json(const rt_layer_op_result *o, bool checked) {
    json_t *j = json_object();
    if (!j)
        return NULL;
    json_object_set_new(j, "def", json_string(o->op->name));
    json_object_set_new(j, "kernel", json_string(o->kernel));
    json_object_set_new(j, "rank", json_integer(o->rank));
    json_object_set_new(j, "predicted_ns", json_real(o->predicted_ns));
    json_object_set_new(j, "alone_median_ns", json_real(o->profiled_ns));
    json_object_set_new(j, "in_layer_median_ns", json_real(o->layer_median_ns));
    if (checked) {
        json_object_set_new(j, "correct", json_boolean(o->correct));
        json_object_set_new(j, "max_abs_err",
                            json_real(isfinite(o->max_abs_err) ? o->max_abs_err : -1.0));
        json_object_set_new(j, "max_rel_err",
                            json_real(isfinite(o->max_rel_err) ? o->max_rel_err : -1.0));
        json_object_set_new(j, "nmse", json_real(isfinite(o->nmse) ? o->nmse : -1.0));
    }
    return j;
}

void *rt_layer_report_to_json(const rt_layer_report *r) {
    json_t *j = json_object(), *ops = json_array();
    if (!j || !ops) {
        json_decref(j);
        json_decref(ops);
        return NULL;
    }
    for (int32_t k = 0; k < r->n_ops; k++)
        json_array_append_new(ops, op_json(&r->ops[k], r->checked));
    json_object_set_new(j, "layer", json_string(r->layer->name));
    json_object_set_new(j, "ran", json_true());
    if (r->device) {
        json_object_set_new(j, "device", json_string(r->device));
        json_object_set_new(j, "timed_with", json_string(r->timed_with));
        json_object_set_new(j, "prelude_bytes", json_integer(r->prelude_bytes));
        json_t *ls = json_array();
        for (int32_t i = 0; ls && i < r->n_launches; i++) {
            const rt_layer_launch *L = &r->launches[i];
            json_t *args = json_array();
            for (int32_t k = 0; args && k < L->n_args; k++)
                json_array_append_new(args, json_string(L->args[k]));
            json_array_append_new(ls,
                                  json_pack("{s:s, s:s, s:[I,I,I], s:[i,i,i], s:o}", "def", L->def,
                                            "kernel", L->kernel, "grid", (json_int_t)L->grid[0],
                                            (json_int_t)L->grid[1], (json_int_t)L->grid[2], "block",
                                            L->block[0], L->block[1], L->block[2], "args", args));
        }
        json_object_set_new(j, "launches", ls);
    } else {
        json_object_set_new(j, "threads", json_integer(r->threads));
    }
    json_object_set_new(j, "ops", ops);
    json_object_set_new(j, "predicted_ns", json_real(r->predicted_ns));
    json_object_set_new(j, "measured_median_ns", json_real(r->median_ns));
    json_object_set_new(j, "measured_min_ns", json_real(r->min_ns));
    json_object_set_new(j, "reps", json_integer(r->reps));
    json_object_set_new(j, "prelude_arrays", json_integer(r->n_prelude));
    json_object_set_new(j, "prelude_kernel_buffers", json_integer(r->n_start_bufs));
    json_object_set_new(j, "prelude_ns", json_real(r->prelude_ns));
    json_object_set_new(j, "checked", json_boolean(r->checked));
    if (r->check)
        json_object_set_new(j, "check", json_string(r->check));
    if (r->checked)
        json_object_set_new(j, "correct", json_boolean(r->correct));
    if (r->why)
        json_object_set_new(j, "why", json_string(r->why));
    return j;
}
