// layer-gpu.c: a layer run end to end on a GPU-class device (layer.h rt_layer_gpu_run). Each
// def's winner (profiled alone by gpu-report.c) becomes launch steps of one sequence on the
// layer's device buffers (hal-gpu.h: every step's arg_map binds its kernel's arguments to them):
// one buffer per layer tensor, so that a producer writes what its reader reads, one per def
// temporary, and one prelude buffer holding every distinct start array once, each kernel's start
// argument a view of it. The sequence is uploaded once and run; its buffers are read back once
// and checked against the interpreter (rt_layer_reference), then it is timed on the device.
//
// Block order: a kernel phase with a ragged grid dim runs a work list where its plan says so
// (gpu-plan.h work_list): the host lists its non-empty blocks longest first (gpu-launch.c
// rt_gpu_work_list), once per length data — each distinct list once, in the same prelude buffer
// as the start arrays, a view argument each — and the launch has one block per entry. Other
// ragged phases put the batch in grid x and size the ragged grid dims by the longest bound
// sequence; their blocks past a shorter sequence's end exit at once, in the device's order.
#include "layer.h"
#include "hal-cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rt_lg {
    rt_arena *a;
    const rt_layer *l;
    rt_gpu_runtime *rt;
    const rt_gpu_report *const *gpu;
    rt_layer_bindings *lb;
    rt_layer_report *r;
    rt_err *err;
    const rt_gpu_candidate **win; // [n_ops]: each def's winner
    int32_t n_args, cap_args;
    rt_gpu_arg *args;
    const char **arg_name; // [n_args]: for the launch list
    int32_t *arg_tensor;   // [n_args]: the layer tensor (-1: prelude, view, temporary)
    int32_t *tensor_arg;   // [l->n_tensors]: its argument (-1: none yet)
    double *prelude;       // the prelude buffer's host values (arg 0 when any)
    double *prelude_sent;  // what was uploaded (the read-back must equal it)
    int32_t *view_arg;     // [r->n_prelude]: the view argument of each start array
    // The distinct work lists (rt_gpu_work_list) after the start arrays in the prelude buffer:
    // each computed from def work_op[w]'s bindings for phase work_phase[w] of its kernel.
    int32_t n_work;
    int32_t **work, *work_op, *work_phase, *work_view;
    int64_t *work_n;
    int32_t **map; // [n_ops]: arg_map of def k's kernel (one per k->bufs)
    int32_t n_steps;
    rt_gpu_step *steps;
    int32_t *first; // [n_ops + 1]: def k's steps are first[k] .. first[k + 1]
} rt_lg;

static double rt_lg_poison(rt_dtype t) {
    return t == RT_DTYPE_I32 ? -2147483648.0 : t == RT_DTYPE_I8 ? -128.0 : (double)NAN;
}

static rt_status rt_lg_add_arg(rt_lg *c, const rt_gpu_arg *g, const char *name, int32_t tensor,
                               int32_t *out) {
    if (c->n_args == c->cap_args) {
        int32_t cap = c->cap_args ? 2 * c->cap_args : 16;
        rt_gpu_arg *args;
        const char **names;
        int32_t *tens;
        RT_ALLOC(c->a, args, cap, c->err);
        RT_ALLOC(c->a, names, cap, c->err);
        RT_ALLOC(c->a, tens, cap, c->err);
        if (c->n_args) {
            memcpy(args, c->args, (size_t)c->n_args * sizeof *args);
            memcpy(names, c->arg_name, (size_t)c->n_args * sizeof *names);
            memcpy(tens, c->arg_tensor, (size_t)c->n_args * sizeof *tens);
        }
        c->args = args, c->arg_name = names, c->arg_tensor = tens, c->cap_args = cap;
    }
    c->args[c->n_args] = *g;
    c->arg_name[c->n_args] = name;
    c->arg_tensor[c->n_args] = tensor;
    *out = c->n_args++;
    return RT_OK;
}

// Per def: its winner, refusals (no winner, '+=', trees), the report's per-op row.
static rt_status rt_lg_ops_begin(rt_lg *c) {
    const rt_layer *l = c->l;
    rt_layer_report *r = c->r;
    RT_ALLOC(c->a, r->ops, l->n_ops, c->err);
    RT_ALLOC(c->a, c->win, l->n_ops, c->err);
    r->n_ops = l->n_ops;
    for (int32_t k = 0; k < l->n_ops; k++)
        for (int32_t s = 0; s < l->ops[k]->n_stmts; s++)
            if (l->ops[k]->stmts[s].op == RT_ASSIGN_ADD)
                return rt_fail(c->err, RT_ERR_BACKEND, l->ops[k]->stmts[s].loc,
                               "def %s accumulates into the caller's values ('+='), which a "
                               "layer run does not support",
                               l->ops[k]->name);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        const rt_gpu_report *g = c->gpu[k];
        if (g->winner < 0 || !g->res)
            return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                           "def %s of layer %s has no winner to run: %s", op->name, l->name,
                           g->not_profiled ? g->not_profiled : "no candidate passed its check");
        const rt_gpu_candidate *w = &g->cands[g->winner];
        c->win[k] = w;
        rt_buf names;
        rt_buf_init(&names, c->a);
        for (int32_t p = 0; p < w->kernel->n_phases; p++)
            rt_buf_printf(&names, "%s%s", p ? "+" : "", w->kernel->phases[p].kernel_name);
        if (names.oom)
            return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        r->ops[k] = (rt_layer_op_result){.op = op,
                                         .winner = g->winner,
                                         .kernel = names.data,
                                         .rank = w->rank,
                                         .predicted_ns = w->prog->predicted_ns,
                                         .profiled_ns = g->res[g->winner].timing.median_ns,
                                         .max_abs_err = -1,
                                         .max_rel_err = -1,
                                         .nmse = -1};
        r->predicted_ns += r->ops[k].predicted_ns;
    }
    return RT_OK;
}

// The prelude entry of start array (def k, tensor t, dim d): the first of its structure, made
// when there is none; its values must equal def k's own.
static rt_status rt_lg_prelude_entry(rt_lg *c, int32_t k, int32_t t, int32_t d, int32_t *out) {
    rt_layer_report *r = c->r;
    const rt_op *op = c->l->ops[k];
    const rt_tensor_data *td = &c->lb->ops[k]->tensors[t];
    int64_t n = td->layout.n_rows[d] + 1;
    for (int32_t e = 0; e < r->n_prelude; e++) {
        const rt_layer_prelude_entry *p = &r->prelude[e];
        const rt_op *po = c->l->ops[p->op];
        if (p->dim != d ||
            !rt_layer_same_structure(po, &po->tensors[p->tensor], op, &op->tensors[t], d))
            continue;
        if ((int64_t)(p->bytes / sizeof(int32_t)) != n ||
            memcmp(p->start, td->layout.start[d], (size_t)n * sizeof(int64_t)) != 0)
            return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                           "the start array of dim %d of %s in def %s differs from the shared "
                           "prelude's",
                           (int)d, op->tensors[t].name, op->name);
        *out = e;
        return RT_OK;
    }
    for (int64_t j = 0; j < n; j++)
        if (td->layout.start[d][j] > 2147483647LL)
            return rt_fail(c->err, RT_ERR_SPEC, op->tensors[t].loc,
                           "ragged tensor '%s' too large for int32 offsets (got %lld)",
                           op->tensors[t].name, (long long)td->layout.start[d][j]);
    r->prelude[r->n_prelude] =
        (rt_layer_prelude_entry){k, t, d, td->layout.start[d], (size_t)n * sizeof(int32_t), 0};
    *out = r->n_prelude++;
    return RT_OK;
}

// The prelude's work list for buffer gb of def k's kernel (*out, an index into c->work): the
// first equal list, added when there is none. Its map entry is -2 - *out until the views exist.
static rt_status rt_lg_work_entry(rt_lg *c, int32_t k, const rt_gpu_buffer *gb, int32_t *out) {
    int32_t *w;
    int64_t n;
    RT_TRY(rt_gpu_work_list(c->a, c->win[k]->kernel, gb->dim, c->lb->ops[k], &w, &n, c->err));
    for (int32_t e = 0; e < c->n_work; e++)
        if (c->work_n[e] == n && memcmp(c->work[e], w, (size_t)n * sizeof *w) == 0) {
            *out = e;
            return RT_OK;
        }
    c->work[c->n_work] = w;
    c->work_n[c->n_work] = n;
    c->work_op[c->n_work] = k;
    c->work_phase[c->n_work] = gb->dim;
    *out = c->n_work++;
    return RT_OK;
}

// The prelude: every start array a winner reads, once per structure, and every distinct work
// list of a phase that runs one, laid out in one int32 buffer (argument 0) at offsets aligned
// for views, one view argument each.
static rt_status rt_lg_prelude(rt_lg *c) {
    const rt_layer *l = c->l;
    rt_layer_report *r = c->r;
    int32_t cap = 0;
    for (int32_t k = 0; k < l->n_ops; k++)
        cap += c->win[k]->kernel->n_bufs;
    RT_ALLOC(c->a, r->prelude, cap, c->err);
    RT_ALLOC(c->a, c->work, cap, c->err);
    RT_ALLOC(c->a, c->work_n, cap, c->err);
    RT_ALLOC(c->a, c->work_op, cap, c->err);
    RT_ALLOC(c->a, c->work_phase, cap, c->err);
    RT_ALLOC(c->a, c->work_view, cap, c->err);
    RT_ALLOC(c->a, c->map, l->n_ops, c->err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_gpu_kernel *K = c->win[k]->kernel;
        RT_ALLOC(c->a, c->map[k], K->n_bufs, c->err);
        for (int32_t j = 0; j < K->n_bufs; j++) {
            const rt_gpu_buffer *gb = &K->bufs[j];
            if (gb->is_tree)
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "def %s reads tree '%s', which a layer run does not support",
                               l->ops[k]->name, l->ops[k]->trees[gb->tensor].name);
            c->map[k][j] = -1;
            if (gb->is_work) {
                int32_t w = -1;
                RT_TRY(rt_lg_work_entry(c, k, gb, &w));
                c->map[k][j] = -2 - w;
                continue;
            }
            if (!gb->is_start)
                continue;
            int32_t e = -1;
            RT_TRY(rt_lg_prelude_entry(c, k, gb->tensor, gb->dim, &e));
            c->map[k][j] = e; // an entry until the views exist
            r->prelude[e].n_users++;
            r->n_start_bufs++;
        }
    }
    if (r->n_prelude == 0 && c->n_work == 0)
        return RT_OK;
    const int64_t align = RT_GPU_VIEW_ALIGN_BYTES / (int64_t)sizeof(int32_t);
    int64_t *off, *woff, total = 0;
    RT_ALLOC(c->a, off, rt_at_least_one((size_t)r->n_prelude), c->err);
    RT_ALLOC(c->a, woff, rt_at_least_one((size_t)c->n_work), c->err);
    for (int32_t e = 0; e < r->n_prelude; e++) {
        off[e] = total;
        total += rt_round_up((int64_t)(r->prelude[e].bytes / sizeof(int32_t)), align);
    }
    for (int32_t w = 0; w < c->n_work; w++) {
        woff[w] = total;
        total += rt_round_up(c->work_n[w], align);
    }
    RT_ALLOC(c->a, c->prelude, total, c->err);
    RT_ALLOC(c->a, c->prelude_sent, total, c->err);
    for (int32_t e = 0; e < r->n_prelude; e++)
        for (size_t j = 0; j < r->prelude[e].bytes / sizeof(int32_t); j++)
            c->prelude[off[e] + (int64_t)j] = (double)r->prelude[e].start[j];
    for (int32_t w = 0; w < c->n_work; w++)
        for (int64_t j = 0; j < c->work_n[w]; j++)
            c->prelude[woff[w] + j] = (double)c->work[w][j];
    memcpy(c->prelude_sent, c->prelude, (size_t)total * sizeof(double));
    r->prelude_bytes = total * (int64_t)sizeof(int32_t);
    int32_t i;
    rt_gpu_arg pa = {.kind = RT_GPU_ARG_BUFFER,
                     .dtype = RT_DTYPE_I32,
                     .n_elems = total,
                     .host = c->prelude,
                     .copy_out = true};
    RT_TRY(rt_lg_add_arg(c, &pa, "prelude", -1, &i));
    RT_ALLOC(c->a, c->view_arg, r->n_prelude, c->err);
    for (int32_t e = 0; e < r->n_prelude; e++) {
        const rt_layer_prelude_entry *p = &r->prelude[e];
        rt_gpu_arg v = {.kind = RT_GPU_ARG_BUFFER,
                        .dtype = RT_DTYPE_I32,
                        .n_elems = (int64_t)(p->bytes / sizeof(int32_t)),
                        .view_of = 1,
                        .view_offset = off[e] * (int64_t)sizeof(int32_t)};
        const char *name = rt_arena_printf(c->a, "prelude[%lld..%lld): start of %s dim %d",
                                           (long long)off[e], (long long)(off[e] + v.n_elems),
                                           l->ops[p->op]->tensors[p->tensor].name, (int)p->dim);
        RT_TRY(rt_lg_add_arg(c, &v, name, -1, &c->view_arg[e]));
    }
    for (int32_t w = 0; w < c->n_work; w++) {
        rt_gpu_arg v = {.kind = RT_GPU_ARG_BUFFER,
                        .dtype = RT_DTYPE_I32,
                        .n_elems = c->work_n[w],
                        .view_of = 1,
                        .view_offset = woff[w] * (int64_t)sizeof(int32_t)};
        const char *name =
            rt_arena_printf(c->a, "prelude[%lld..%lld): work list of def %s phase %d (%d blocks)",
                            (long long)woff[w], (long long)(woff[w] + v.n_elems),
                            l->ops[c->work_op[w]]->name, (int)c->work_phase[w], (int)c->work[w][0]);
        RT_TRY(rt_lg_add_arg(c, &v, name, -1, &c->work_view[w]));
    }
    for (int32_t k = 0; k < l->n_ops; k++)
        for (int32_t j = 0; j < c->win[k]->kernel->n_bufs; j++)
            if (c->win[k]->kernel->bufs[j].is_start)
                c->map[k][j] = c->view_arg[c->map[k][j]];
            else if (c->win[k]->kernel->bufs[j].is_work)
                c->map[k][j] = c->work_view[-2 - c->map[k][j]];
    return RT_OK;
}

// The data buffers: one per layer tensor a winner uses (inputs from lb, the rest poisoned), one
// per def temporary; every kernel's map entry for them.
static rt_status rt_lg_buffers(rt_lg *c) {
    const rt_layer *l = c->l;
    RT_ALLOC(c->a, c->tensor_arg, l->n_tensors, c->err);
    for (int32_t i = 0; i < l->n_tensors; i++)
        c->tensor_arg[i] = -1;
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        const rt_gpu_kernel *K = c->win[k]->kernel;
        for (int32_t j = 0; j < K->n_bufs; j++) {
            const rt_gpu_buffer *gb = &K->bufs[j];
            if (gb->is_start || gb->is_work)
                continue;
            int32_t t = gb->tensor, li = l->tensor_of[k][t];
            int64_t n = rt_tensor_elems(c->lb->ops[k], t);
            int32_t have = li >= 0 ? c->tensor_arg[li] : -1;
            if (have >= 0) {
                if (c->args[have].dtype != gb->dtype || c->args[have].n_elems != rt_max64(n, 1))
                    return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                                   "the kernels disagree on the buffer of '%s' (%lld elements "
                                   "of %s in def %s, %lld of %s before)",
                                   l->tensors[li].name, (long long)n, rt_dtype_name(gb->dtype),
                                   op->name, (long long)c->args[have].n_elems,
                                   rt_dtype_name(c->args[have].dtype));
                c->map[k][j] = have;
                continue;
            }
            double *h;
            RT_ALLOC(c->a, h, rt_max64(n, 1), c->err);
            bool input = li >= 0 && l->tensors[li].is_input;
            for (int64_t e = 0; e < n; e++)
                h[e] = input ? c->lb->ops[k]->tensors[t].data[e] : rt_lg_poison(gb->dtype);
            rt_gpu_arg g = {.kind = RT_GPU_ARG_BUFFER,
                            .dtype = gb->dtype,
                            .n_elems = rt_max64(n, 1),
                            .host = h,
                            .copy_out = li >= 0};
            const char *name = li >= 0
                                   ? l->tensors[li].name
                                   : rt_arena_printf(c->a, "%s.%s", op->name, op->tensors[t].name);
            RT_TRY(rt_lg_add_arg(c, &g, name, li, &c->map[k][j]));
            if (li >= 0)
                c->tensor_arg[li] = c->map[k][j];
        }
    }
    return RT_OK;
}

// The launch sequence: every def's phases in order, each step bound through its def's map.
static rt_status rt_lg_steps(rt_lg *c) {
    const rt_layer *l = c->l;
    rt_gpu_step **per;
    int32_t *n_per, total = 0;
    RT_ALLOC(c->a, per, l->n_ops, c->err);
    RT_ALLOC(c->a, n_per, l->n_ops, c->err);
    RT_ALLOC(c->a, c->first, l->n_ops + 1, c->err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_gpu_candidate *w = c->win[k];
        const rt_gpu_kernel *K = w->kernel;
        RT_ALLOC(c->a, per[k], K->n_phases, c->err);
        n_per[k] = 0;
        for (int32_t p = 0; p < K->n_phases; p++) {
            rt_gpu_step *st;
            int32_t n;
            if (!w->bins || !w->bins[p])
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "def %s: phase %d of its winner has no binary", l->ops[k]->name,
                               (int)p);
            RT_TRY(rt_gpu_phase_steps(c->a, K, p, w->bins[p], c->lb->ops[k], &st, &n, c->err));
            if (n != 1) // by-level phases read trees, refused above
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "def %s: phase %d has %d launches (expected 1)", l->ops[k]->name,
                               (int)p, (int)n);
            st->arg_map = c->map[k];
            st->n_mapped = K->n_bufs;
            per[k][n_per[k]++] = *st;
        }
        total += n_per[k];
    }
    RT_ALLOC(c->a, c->steps, total, c->err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        c->first[k] = c->n_steps;
        for (int32_t s = 0; s < n_per[k]; s++)
            c->steps[c->n_steps++] = per[k][s];
    }
    c->first[l->n_ops] = c->n_steps;
    return RT_OK;
}

// The launch sequence for the report: per step its def, kernel, geometry and arguments by name.
static rt_status rt_lg_launches(rt_lg *c) {
    rt_layer_report *r = c->r;
    RT_ALLOC(c->a, r->launches, c->n_steps, c->err);
    for (int32_t k = 0; k < c->l->n_ops; k++)
        for (int32_t s = c->first[k]; s < c->first[k + 1]; s++) {
            const rt_gpu_step *st = &c->steps[s];
            rt_layer_launch *L = &r->launches[r->n_launches++];
            *L = (rt_layer_launch){
                .def = c->l->ops[k]->name, .kernel = st->bin->kernel_name, .n_args = st->n_mapped};
            for (int d = 0; d < 3; d++) {
                L->grid[d] = st->cfg.grid[d];
                L->block[d] = st->cfg.block[d];
            }
            RT_ALLOC(c->a, L->args, st->n_mapped + 1, c->err);
            for (int32_t j = 0; j < st->n_mapped; j++)
                L->args[j] = c->arg_name[st->arg_map[j]];
        }
    return RT_OK;
}

// The prelude's time: every distinct array's layout computed again on the host (as the CPU
// layer's), the best of a few repetitions; its one upload is part of the layer's.
static rt_status rt_lg_prelude_time(rt_lg *c) {
    rt_layer_report *r = c->r;
    double best = INFINITY;
    for (int32_t rep = 0; rep < 5 && (r->n_prelude || c->n_work); rep++) {
        double t0 = rt_cpu_now_ns();
        for (int32_t e = 0; e < r->n_prelude; e++) {
            bool done = false;
            for (int32_t f = 0; f < e && !done; f++)
                done = r->prelude[f].op == r->prelude[e].op &&
                       r->prelude[f].tensor == r->prelude[e].tensor;
            rt_layout lay;
            if (!done)
                RT_TRY(rt_layout_compute(c->lb->ops[r->prelude[e].op], r->prelude[e].tensor, &lay,
                                         c->err));
        }
        for (int32_t w = 0; w < c->n_work; w++) {
            int32_t *list;
            int64_t n;
            RT_TRY(rt_gpu_work_list(c->a, c->win[c->work_op[w]]->kernel, c->work_phase[w],
                                    c->lb->ops[c->work_op[w]], &list, &n, c->err));
        }
        best = fmin(best, rt_cpu_now_ns() - t0);
    }
    r->prelude_ns = r->n_prelude || c->n_work ? best : 0;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Check and time
// ---------------------------------------------------------------------------------------------

// Records a rejection: the first one is the report's why.
static void rt_lg_reject(rt_lg *c, const char *why) {
    c->r->correct = false;
    if (!c->r->why)
        c->r->why = why ? why : "out of memory";
}

// Def k's outputs in the layer's read-back buffers against want[j] (one per output).
static void rt_lg_compare_def(rt_lg *c, int32_t k, double *const *want, const char *whose) {
    const rt_op *op = c->l->ops[k];
    rt_layer_op_result *o = &c->r->ops[k];
    o->correct = true;
    for (int32_t j = 0; j < op->n_outputs; j++) {
        int32_t t = op->outputs[j], li = c->l->tensor_of[k][t];
        int32_t arg = li >= 0 ? c->tensor_arg[li] : -1;
        rt_compare_result cr;
        if (arg < 0) {
            o->correct = false;
            rt_lg_reject(c, rt_arena_printf(c->a, "def %s: output %s has no buffer in its kernel",
                                            op->name, op->tensors[t].name));
            continue;
        }
        rt_compare_data(want[j], c->args[arg].host, rt_tensor_elems(c->lb->ops[k], t), &cr);
        o->max_abs_err = fmax(o->max_abs_err, cr.max_abs_err);
        o->max_rel_err = fmax(o->max_rel_err, cr.max_rel_err);
        o->nmse = fmax(o->nmse, cr.nmse);
        if (rt_compare_accept(&cr, op->tensors[t].dtype))
            continue;
        o->correct = false;
        rt_lg_reject(c, rt_arena_printf(c->a,
                                        "def %s: output %s differs from %s: max abs error %.3g "
                                        "at element %lld, nmse %.3g",
                                        op->name, op->tensors[t].name, whose, cr.max_abs_err,
                                        (long long)cr.worst_index, cr.nmse));
    }
}

// After the run: the layer inputs and the prelude came back as they were uploaded.
static void rt_lg_check_inputs(rt_lg *c) {
    const rt_layer *l = c->l;
    for (int64_t j = 0; c->prelude && j < c->args[0].n_elems; j++)
        if (c->prelude[j] != c->prelude_sent[j]) {
            rt_lg_reject(c, rt_arena_printf(c->a,
                                            "the layer's kernels changed the prelude: entry %lld "
                                            "is %.9g (was %.9g)",
                                            (long long)j, c->prelude[j], c->prelude_sent[j]));
            return;
        }
    for (int32_t i = 0; i < l->n_tensors; i++) {
        int32_t arg = c->tensor_arg[i];
        const rt_layer_tensor *lt = &l->tensors[i];
        if (arg < 0 || !lt->is_input)
            continue;
        const rt_tensor_data *td = &c->lb->ops[lt->op]->tensors[lt->tensor];
        for (int64_t e = 0; e < td->layout.elems; e++) {
            double was = rt_dtype_round(c->args[arg].dtype, td->data[e]),
                   now = c->args[arg].host[e];
            if (now == was || (isnan(now) && isnan(was)))
                continue;
            rt_lg_reject(c, rt_arena_printf(c->a,
                                            "the layer's kernels changed input '%s': element "
                                            "%lld is %.9g (was %.9g)",
                                            lt->name, (long long)e, now, was));
            return;
        }
    }
}

// Def k's kernels alone on arguments of their own: copies of the layer's read-back buffers it
// reads (and of its start arrays), its outputs and temporaries poisoned; its outputs into want.
static rt_status rt_lg_rerun_alone(rt_lg *c, int32_t k, double **want) {
    const rt_op *op = c->l->ops[k];
    const rt_gpu_kernel *K = c->win[k]->kernel;
    rt_gpu_arg *args;
    RT_ALLOC(c->a, args, K->n_bufs, c->err);
    for (int32_t j = 0; j < K->n_bufs; j++) {
        const rt_gpu_arg *g = &c->args[c->map[k][j]];
        args[j] = *g;
        args[j].view_of = 0;
        args[j].view_offset = 0;
        args[j].copy_out = K->bufs[j].written;
        RT_ALLOC(c->a, args[j].host, g->n_elems, c->err);
        const double *src =
            g->view_of ? c->prelude + g->view_offset / (int64_t)sizeof(int32_t) : g->host;
        for (int64_t e = 0; e < g->n_elems; e++)
            args[j].host[e] = K->bufs[j].written ? rt_lg_poison(g->dtype) : src[e];
    }
    int32_t n = c->first[k + 1] - c->first[k];
    rt_gpu_step *steps;
    RT_ALLOC(c->a, steps, n, c->err);
    for (int32_t s = 0; s < n; s++) {
        steps[s] = c->steps[c->first[k] + s];
        steps[s].arg_map = NULL;
        steps[s].n_mapped = 0;
    }
    RT_TRY(rt_gpu_run_steps(c->rt, steps, n, args, K->n_bufs, c->err));
    for (int32_t o = 0; o < op->n_outputs; o++)
        for (int32_t j = 0; j < K->n_bufs; j++)
            if (!K->bufs[j].is_start && K->bufs[j].tensor == op->outputs[o])
                want[o] = args[j].host;
    return RT_OK;
}

// Runs the sequence once (uploads, every launch, one read-back) and checks it.
static rt_status rt_lg_check(rt_lg *c, const rt_layer_options *opt) {
    const rt_layer *l = c->l;
    rt_layer_report *r = c->r;
    RT_TRY(rt_gpu_run_steps(c->rt, c->steps, c->n_steps, c->args, c->n_args, c->err));
    const rt_op *last = l->ops[l->n_ops - 1];
    int32_t lt = last->n_outputs ? l->tensor_of[l->n_ops - 1][last->outputs[0]] : -1;
    if (opt->test_corrupt && lt >= 0 && c->tensor_arg[lt] >= 0) {
        const rt_gpu_arg *g = &c->args[c->tensor_arg[lt]];
        g->host[g->n_elems - 1] += 1.0;
    }
    if (!opt->check)
        return RT_OK;
    double flops = 0,
           limit = opt->interp_max_flops > 0 ? opt->interp_max_flops : RT_LAYER_INTERP_MAX_FLOPS;
    for (int32_t k = 0; k < l->n_ops; k++) {
        double f = 0;
        RT_TRY(rt_interp_flops(l->ops[k], c->lb->ops[k], &f, c->err));
        flops += f;
    }
    r->checked = r->correct = true;
    r->check = flops <= limit ? "interpreter" : "rerun";
    rt_layer_bindings *ref = NULL;
    if (flops <= limit)
        RT_TRY(rt_layer_reference(c->a, l, c->lb, opt->seed, &ref, c->err));
    for (int32_t k = 0; k < l->n_ops; k++) {
        double **want;
        RT_ALLOC(c->a, want, l->ops[k]->n_outputs + 1, c->err);
        for (int32_t j = 0; ref && j < l->ops[k]->n_outputs; j++)
            want[j] = ref->ops[k]->tensors[l->ops[k]->outputs[j]].data;
        if (!ref)
            RT_TRY(rt_lg_rerun_alone(c, k, want));
        rt_lg_compare_def(c, k, want,
                          ref ? "the interpreter's" : "its kernels' run alone on the same inputs");
    }
    rt_lg_check_inputs(c);
    return RT_OK;
}

// Times the whole sequence, then each def's launches, on the layer's buffers (holding the
// checked run's values): device-resident, the upload before each timing not timed.
// The repetitions fill budget_ms at the sum of the defs' medians alone (the checked run's wall
// time includes the kernels' first-use builds), 5 to 100 of them.
static rt_status rt_lg_time(rt_lg *c, double budget_ms) {
    rt_layer_report *r = c->r;
    double alone_ns = 0;
    for (int32_t k = 0; k < c->l->n_ops; k++)
        alone_ns += r->ops[k].profiled_ns;
    double want = budget_ms * 1e6 / fmax(alone_ns, 1.0);
    int32_t reps = want >= 100 ? 100 : want <= 5 ? 5 : (int32_t)want;
    rt_gpu_timing tm;
    RT_TRY(
        rt_gpu_time_steps(c->rt, c->steps, c->n_steps, c->args, c->n_args, 2, reps, &tm, c->err));
    r->reps = tm.reps;
    r->median_ns = tm.median_ns;
    r->min_ns = tm.min_ns;
    r->timed_with = tm.method;
    for (int32_t k = 0; k < c->l->n_ops; k++) {
        rt_gpu_timing tk;
        RT_TRY(rt_gpu_time_steps(c->rt, c->steps + c->first[k], c->first[k + 1] - c->first[k],
                                 c->args, c->n_args, 2, reps, &tk, c->err));
        r->ops[k].layer_median_ns = tk.median_ns;
    }
    return RT_OK;
}

rt_status rt_layer_gpu_run(rt_arena *a, const rt_layer *l, rt_gpu_runtime *rt,
                           const rt_gpu_report *const *gpu, rt_layer_bindings *lb,
                           const rt_layer_options *opt, rt_layer_report **out, rt_err *err) {
    rt_lg c = {.a = a, .l = l, .rt = rt, .gpu = gpu, .lb = lb, .err = err};
    RT_ALLOC(a, c.r, 1, err);
    c.r->layer = l;
    c.r->device = rt_gpu_runtime_device_name(rt);
    RT_TRY(rt_layer_bindings_prepare(lb, err));
    RT_TRY(rt_lg_ops_begin(&c));
    RT_TRY(rt_lg_prelude(&c));
    RT_TRY(rt_lg_buffers(&c));
    RT_TRY(rt_lg_steps(&c));
    RT_TRY(rt_lg_launches(&c));
    RT_TRY(rt_lg_prelude_time(&c));
    RT_TRY(rt_lg_check(&c, opt));
    RT_TRY(rt_lg_time(&c, opt->budget_ms > 0 ? opt->budget_ms : 200));
    *out = c.r;
    return RT_OK;
}
