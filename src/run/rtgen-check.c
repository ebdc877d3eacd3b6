// rtgen-check.c: the numerical checks of a profiled CPU candidate (rtgen-int.h), and the faults
// rtgen's tests inject to prove that each check rejects what it must.
//
// A candidate's first run starts from outputs filled with a poison (NaN, INT32_MIN for
// integers: the reference holds the same value where the op writes nothing), so an element it
// never writes cannot pass. After the run every input buffer must still hold the bound values
// (a kernel that writes into an input is wrong even when its output is right), and then either
// every output is compared with the reference (interpreter or naive kernel) by the one
// acceptance rule (rt_compare_accept), or, for a large contraction, C t is compared with
// alpha A (B t) (+ C0 t) for two independent random vectors t, from the bound inputs rather
// than the buffers the kernel ran on (src/ref/vcheck.h, the same check as the GPU's; BLIS's
// test_gemm does one vector, and one alone misses an error pattern orthogonal to it). Top
// layer, beside rtgen.c.
#include "rtgen-int.h"
#include "compare.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// clang-format off
static const char *const rt_cpu_fault_names[RT_CPU_FAULT_COUNT] = {
    "none", "corrupt", "nan", "unwritten", "clobber", "zero", "blind", "crash", "hang"};
// clang-format on
_Static_assert(sizeof rt_cpu_fault_names / sizeof *rt_cpu_fault_names == RT_CPU_FAULT_COUNT,
               "ORDER RT_CPU_FAULT");

bool rt_cpu_fault_from_name(const char *name, rt_cpu_fault *out) {
    for (int32_t f = 0; f < RT_CPU_FAULT_COUNT; f++) {
        if (strcmp(name, rt_cpu_fault_names[f]) == 0) {
            *out = (rt_cpu_fault)f;
            return true;
        }
    }
    return false;
}

double rt_cpu_buf_get(const rt_kir_buf *bf, const void *p, int64_t i) {
    if (bf->type == RT_KIR_F32)
        return (double)((const float *)p)[i];
    if (bf->type == RT_KIR_F64)
        return ((const double *)p)[i];
    return (double)((const int32_t *)p)[i];
}

// v as the buffer's element type stores it (integers saturate; NaN becomes INT32_MIN).
static double rt_cpu_buf_round(const rt_kir_buf *bf, double v) {
    if (bf->type == RT_KIR_F32)
        return (double)(float)v;
    if (bf->type == RT_KIR_F64)
        return v;
    if (isnan(v) || v <= (double)INT32_MIN)
        return (double)INT32_MIN;
    return v >= (double)INT32_MAX ? (double)INT32_MAX : (double)(int32_t)v;
}

static void rt_cpu_buf_set(const rt_kir_buf *bf, void *p, int64_t i, double v) {
    v = rt_cpu_buf_round(bf, v);
    if (bf->type == RT_KIR_F32)
        ((float *)p)[i] = (float)v;
    else if (bf->type == RT_KIR_F64)
        ((double *)p)[i] = v;
    else
        ((int32_t *)p)[i] = (int32_t)v;
}

// Appends one clause to why ("; " between clauses), truncating at size.
static void rt_cpu_why(char *why, size_t size, const char *fmt, ...) {
    size_t n = strlen(why);
    if (n + 3 >= size)
        return;
    if (n > 0) {
        memcpy(why + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + n, size - n, fmt, ap);
    va_end(ap);
}

double rt_cpu_poison_of(const rt_tensor *t) {
    return rt_dtype_is_int(t->dtype) ? (double)INT32_MIN : (double)NAN;
}

bool rt_cpu_poisoned(const rt_op *op, int32_t t) {
    if (op->tensors[t].role == RT_ROLE_INPUT)
        return false;
    for (int32_t s = 0; s < op->n_stmts; s++)
        if (op->stmts[s].out == t && op->stmts[s].op == RT_ASSIGN_ADD)
            return false;
    return true;
}

void rt_cpu_poison_bindings(const rt_op *op, rt_bindings *b) {
    for (int32_t t = 0; t < op->n_tensors; t++) {
        rt_tensor_data *td = &b->tensors[t];
        if (!rt_cpu_poisoned(op, t) || !td->data)
            continue;
        double p = rt_cpu_poison_of(&op->tensors[t]);
        for (int64_t e = 0; e < td->layout.elems; e++)
            td->data[e] = p;
    }
}

// The DATA buffer of tensor t, -1 when the kernel has none.
static int32_t rt_cpu_buf_of(const rt_kir_kernel *k, int32_t t) {
    for (int32_t i = 1; i < k->n_bufs; i++)
        if (k->bufs[i].role == RT_KIR_BUF_DATA && k->bufs[i].tensor == t)
            return i;
    return -1;
}

bool rt_cpu_check_inputs(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                         const rt_bindings *b, char *why, size_t why_size) {
    bool ok = true;
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        if (bf->role == RT_KIR_BUF_TREE) {
            if (d->start_copy && d->start_copy[i] &&
                memcmp(d->args[i], d->start_copy[i], d->bytes[i]) != 0) {
                rt_cpu_why(why, why_size, "the kernel overwrote the %s array of tree %s",
                           rt_kir_tree_field_name((rt_kir_tree_field)bf->dim),
                           op->trees[bf->tensor].name);
                ok = false;
            }
            continue;
        }
        const char *name = bf->tensor >= 0 ? op->tensors[bf->tensor].name : "?";
        if (bf->role == RT_KIR_BUF_START) {
            if (d->start_copy && d->start_copy[i] &&
                memcmp(d->args[i], d->start_copy[i], d->bytes[i]) != 0) {
                rt_cpu_why(why, why_size, "the kernel overwrote the start array of %s's dim %d",
                           name, (int)bf->dim);
                ok = false;
            }
            continue;
        }
        if (bf->role != RT_KIR_BUF_DATA || bf->written)
            continue;
        const rt_tensor_data *td = &b->tensors[bf->tensor];
        for (int64_t e = 0; e < td->layout.elems; e++) {
            double want = rt_cpu_buf_round(bf, td->data ? td->data[e] : 0.0);
            double got = rt_cpu_buf_get(bf, d->args[i], e);
            if (got != want && !(isnan(got) && isnan(want))) {
                rt_cpu_why(why, why_size,
                           "the kernel wrote into input %s: %s[%lld] is %.9g, was %.9g", name, name,
                           (long long)e, got, want);
                ok = false;
                break;
            }
        }
    }
    return ok;
}

// One output compared with its reference, explained in sh->why when it is not accepted.
static bool rt_cpu_check_output(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                                const rt_bindings *b, int32_t t, rt_cpu_shared *sh) {
    const rt_tensor *tt = &op->tensors[t];
    int32_t i = rt_cpu_buf_of(k, t);
    if (i < 0) {
        rt_cpu_why(sh->why, sizeof sh->why,
                   "output %s is not among the kernel's buffers: nothing to compare", tt->name);
        return false;
    }
    if (!d->ref[t]) {
        rt_cpu_why(sh->why, sizeof sh->why, "output %s has no reference to compare with", tt->name);
        return false;
    }
    const rt_kir_buf *bf = &k->bufs[i];
    int64_t n = b->tensors[t].layout.elems;
    const double *ref = d->ref[t];
    // Streaming: no copy of the output (relu-sized tensors run to gigabytes).
    rt_compare_result cr;
    rt_compare_begin(&cr);
    for (int64_t e = 0; e < n; e++)
        rt_compare_add(&cr, ref[e], rt_cpu_buf_get(bf, d->args[i], e));
    rt_compare_end(&cr);
    sh->max_abs_err = fmax(sh->max_abs_err, cr.max_abs_err);
    sh->max_rel_err = fmax(sh->max_rel_err, cr.max_rel_err);
    sh->nmse = fmax(sh->nmse, cr.nmse);
    if (rt_compare_accept(&cr, tt->dtype))
        return true;
    const rt_tolerance *tol = rt_tolerance_of(tt->dtype);
    int64_t w = cr.worst_index >= 0 ? cr.worst_index : 0;
    double got = n > 0 ? rt_cpu_buf_get(bf, d->args[i], w) : 0.0;
    double poison = rt_cpu_buf_round(bf, rt_cpu_poison_of(tt));
    bool unwritten = rt_cpu_poisoned(op, t) && (got == poison || (isnan(got) && isnan(poison)));
    rt_cpu_why(sh->why, sizeof sh->why,
               "%s[%lld] is %.9g%s, the reference %.9g (max abs err %.3g, allowed %.3g; nmse "
               "%.3g, allowed %.3g; %lld non-finite)",
               tt->name, (long long)w, got,
               unwritten ? " (the poison it started with: never written?)" : "",
               n > 0 ? ref[w] : 0.0, cr.max_abs_err, tol->abs_tol * (1.0 + cr.ref_max_abs), cr.nmse,
               tol->nmse_tol, (long long)cr.n_nonfinite);
    return false;
}

// The random-vector check of a contraction (vcheck.h) on the kernel's output buffer, its
// reference computed from b's untouched inputs before any candidate ran.
static bool rt_cpu_check_vectors(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                                 rt_cpu_shared *sh) {
    int32_t t = op->n_outputs == 1 ? op->outputs[0] : -1;
    int32_t i = t >= 0 ? rt_cpu_buf_of(k, t) : -1;
    if (i < 0 || !d->vc || k->bufs[i].type == RT_KIR_I32) {
        rt_cpu_why(sh->why, sizeof sh->why,
                   "the random-vector check does not cover this kernel's outputs");
        return false;
    }
    rt_vcheck_result r;
    rt_err err;
    rt_err_clear(&err);
    if (rt_vcheck_output(d->vc, d->args[i],
                         k->bufs[i].type == RT_KIR_F32 ? RT_DTYPE_F32 : RT_DTYPE_F64, &r,
                         &err) != RT_OK) {
        rt_cpu_why(sh->why, sizeof sh->why, "%s", err.msg);
        return false;
    }
    sh->max_abs_err = fmax(sh->max_abs_err, r.max_abs_err);
    sh->max_rel_err = fmax(sh->max_rel_err, r.max_rel_err);
    sh->nmse = fmax(sh->nmse, r.nmse);
    if (r.accepted)
        return true;
    char line[400];
    rt_vcheck_explain(d->vc, &r, line, sizeof line);
    rt_cpu_why(sh->why, sizeof sh->why, "%s", line);
    return false;
}

bool rt_cpu_check_candidate(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                            const rt_bindings *b, rt_cpu_shared *sh) {
    bool ok = rt_cpu_check_inputs(op, k, d, b, sh->why, sizeof sh->why);
    if (strcmp(d->check, "random-vector") == 0)
        return rt_cpu_check_vectors(op, k, d, sh) && ok;
    for (int32_t o = 0; o < op->n_outputs; o++)
        ok = rt_cpu_check_output(op, k, d, b, op->outputs[o], sh) && ok;
    return ok;
}

// ---------------------------------------------------------------------------------------------
// Faults (tests only)
// ---------------------------------------------------------------------------------------------

// The first output's buffer (the contraction's C when the kernel is one), -1 when none.
static int32_t rt_cpu_fault_out(const rt_op *op, const rt_kir_kernel *k) {
    if (k->gemm.valid)
        return rt_cpu_buf_of(k, k->gemm.tc);
    return op->n_outputs > 0 ? rt_cpu_buf_of(k, op->outputs[0]) : -1;
}

// The first floating input's buffer, -1 when none.
static int32_t rt_cpu_fault_in(const rt_op *op, const rt_kir_kernel *k) {
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        if (bf->role == RT_KIR_BUF_DATA && !bf->written && bf->type != RT_KIR_I32 &&
            op->tensors[bf->tensor].role == RT_ROLE_INPUT)
            return i;
    }
    return -1;
}

static int64_t rt_cpu_buf_elems(const rt_kir_buf *bf, const rt_cpu_data *d, int32_t i) {
    return (int64_t)(d->bytes[i] / (bf->type == RT_KIR_F64 ? 8 : 4));
}

// Largest finite |value| in buffer i.
static double rt_cpu_buf_max_abs(const rt_kir_buf *bf, const rt_cpu_data *d, int32_t i) {
    double m = 0;
    for (int64_t e = 0; e < rt_cpu_buf_elems(bf, d, i); e++) {
        double v = rt_cpu_buf_get(bf, d->args[i], e);
        if (isfinite(v))
            m = fmax(m, fabs(v));
    }
    return m;
}

// Moves two elements of the output's first row so that its product with the first check vector
// stays the same (elsewhere: the first two elements, by +-(1 + max |output|)).
static void rt_cpu_fault_blind(const rt_kir_kernel *k, const rt_cpu_data *d, int32_t o) {
    const rt_kir_buf *bf = &k->bufs[o];
    if (rt_cpu_buf_elems(bf, d, o) < 2)
        return;
    double t[2] = {1, 1}, big = 1 + rt_cpu_buf_max_abs(bf, d, o);
    if (d->vc)
        rt_vcheck_vector(0, 0, 2, t);
    double s = big / fmax(fabs(t[0]), fabs(t[1]));
    rt_cpu_buf_set(bf, d->args[o], 0, rt_cpu_buf_get(bf, d->args[o], 0) + s * t[1]);
    rt_cpu_buf_set(bf, d->args[o], 1, rt_cpu_buf_get(bf, d->args[o], 1) - s * t[0]);
}

void rt_cpu_fault_apply(rt_cpu_fault f, const rt_op *op, const rt_kir_kernel *k,
                        const rt_cpu_data *d) {
    int32_t o = rt_cpu_fault_out(op, k), in = rt_cpu_fault_in(op, k);
    if (f == RT_CPU_FAULT_NONE || o < 0)
        return;
    const rt_kir_buf *bf = &k->bufs[o];
    int64_t n = rt_cpu_buf_elems(bf, d, o), e = n / 2;
    switch (f) {
    case RT_CPU_FAULT_CORRUPT:
        rt_cpu_buf_set(bf, d->args[o], e,
                       rt_cpu_buf_get(bf, d->args[o], e) + 1 + rt_cpu_buf_max_abs(bf, d, o));
        break;
    case RT_CPU_FAULT_NAN:
        rt_cpu_buf_set(bf, d->args[o], e, (double)NAN);
        break;
    case RT_CPU_FAULT_UNWRITTEN:
        for (int64_t q = 0; q < n; q++) {
            if (rt_cpu_buf_get(bf, d->args[o], q) == 0.0) {
                e = q;
                break;
            }
        }
        if (d->init[o] || d->uniform[o])
            rt_cpu_buf_set(bf, d->args[o], e, rt_cpu_init_get(k, d, o, e));
        break;
    case RT_CPU_FAULT_CLOBBER:
        if (in >= 0) {
            const rt_kir_buf *ib = &k->bufs[in];
            int64_t ie = rt_cpu_buf_elems(ib, d, in) / 2;
            rt_cpu_buf_set(ib, d->args[in], ie, rt_cpu_buf_get(ib, d->args[in], ie) + 1);
        }
        break;
    case RT_CPU_FAULT_ZERO:
        if (in >= 0)
            memset(d->args[in], 0, d->bytes[in]);
        for (int32_t q = 0; q < op->n_outputs; q++) {
            int32_t i = rt_cpu_buf_of(k, op->outputs[q]);
            if (i >= 0)
                memset(d->args[i], 0, d->bytes[i]);
        }
        break;
    case RT_CPU_FAULT_BLIND:
        rt_cpu_fault_blind(k, d, o);
        break;
    case RT_CPU_FAULT_CRASH: {
        // SIGABRT with its default action: sanitizers leave it alone (SIGSEGV they turn into a
        // report and an exit), and no handler another runtime installed runs.
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGABRT, &sa, NULL);
        raise(SIGABRT);
        break;
    }
    case RT_CPU_FAULT_HANG:
        for (;;)
            pause();
    default:
        break;
    }
}
