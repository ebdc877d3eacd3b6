// rtgen-int.h: what rtgen.c (build, profile, run) and rtgen-check.c (the numerical checks of a
// profiled candidate) share; not part of the library's interface. Top layer.
#ifndef RT_RTGEN_INT_H
#define RT_RTGEN_INT_H

#include "rtgen.h"
#include "kir.h"
#include "run.h"
#include "vcheck.h"

// Repetitions a candidate may time within its budget. At 64 a 70 us kernel stopped after 4.5 ms
// of an 80 ms budget, and its median moved 10-20% between profiling runs on the 2-core VM.
#define RT_CPU_MAX_REPS 4096
// Turns of the run-off (run.h): each runs every contender for budget_ms / RT_CPU_RUNOFF_TURNS.
#define RT_CPU_RUNOFF_TURNS 5

// How far a profiling child got: a crash or a timeout is reported with the phase it struck in.
// ORDER RT_CPU_PHASE: names in rtgen.c.
typedef enum rt_cpu_phase {
    RT_CPU_PHASE_START, // thread pool, buffers restored
    RT_CPU_PHASE_RUN,   // the first run, whose outputs are checked
    RT_CPU_PHASE_CHECK, // inputs and outputs compared with the reference
    RT_CPU_PHASE_TIME,  // timed repetitions
    RT_CPU_PHASE_COUNT
} rt_cpu_phase;

// Written by the profiling child in memory shared with the parent.
typedef struct rt_cpu_shared {
    int32_t phase; // rt_cpu_phase
    int32_t checked;
    int32_t correct;
    double max_abs_err, max_rel_err, nmse;
    double check_ns; // the check of the first run's buffers (inputs and outputs)
    char why[512];   // what the check found, or why the child gave up (NUL-terminated)
    int32_t reps;
    double times_ns[RT_CPU_MAX_REPS];
    // The run-off's child (rtgen.c rt_cpu_runoff_main): per contender the median of each turn.
    int32_t runoff_turns;
    double runoff_ns[RT_RUN_RUNOFF_MAX][RT_CPU_RUNOFF_TURNS];
} rt_cpu_shared;

// Typed copies of the bound data, in the buffer order shared by every kernel of the op.
typedef struct rt_cpu_data {
    int32_t n_bufs;
    void **args;
    void **init; // initial contents of written buffers (restore before a run)
    // Written buffers that start uniform (poisoned outputs and temporaries, rt_cpu_poisoned):
    // restored by filling them with fill[i], without a copy (init[i] NULL).
    bool *uniform;
    double *fill;
    size_t *bytes;
    void **start_copy; // START buffers (b's own arrays): a copy to find them overwritten
    double **ref;      // per tensor: reference values of outputs (NULL: none)
    const char *check;
    const rt_vcheck *vc; // check "random-vector": its reference (vcheck.h)
    bool restore_each;   // an op with '+=' accumulates into the caller's values
} rt_cpu_data;

double rt_cpu_buf_get(const rt_kir_buf *bf, const void *p, int64_t i);
// Element e of buffer i's initial contents (the profile's data: init or uniform).
double rt_cpu_init_get(const rt_kir_kernel *k, const rt_cpu_data *d, int32_t i, int64_t e);

// The value an element of tensor t holds before the op writes it: NaN for floating tensors,
// INT32_MIN for integers.
double rt_cpu_poison_of(const rt_tensor *t);
// Whether tensor t starts the run filled with the poison: an output or temporary that no '+='
// statement accumulates into.
bool rt_cpu_poisoned(const rt_op *op, int32_t t);
// Fills every poisoned tensor of b (prepared) with its poison, so that an element the op does
// not write holds the same value in the reference and in a kernel's buffer.
void rt_cpu_poison_bindings(const rt_op *op, rt_bindings *b);

// The checks of one candidate's first run (d->args after the run, b the bound inputs and
// d->ref the reference): every input buffer still holds b's values (and every start array its
// copy), then every output agrees with the reference (rt_compare_accept) or, for
// d->check == "random-vector", the contraction C t = alpha A (B t) (+ C0 t) holds for two
// independent random vectors t computed from b's untouched inputs (rt_vcheck_output on d->vc). Fills sh's errors and, when
// something is wrong, sh->why. True when all hold.
bool rt_cpu_check_candidate(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                            const rt_bindings *b, rt_cpu_shared *sh);
// Whether every input buffer still holds b's values (an explanation appended to why, of size
// why_size, when not).
bool rt_cpu_check_inputs(const rt_op *op, const rt_kir_kernel *k, const rt_cpu_data *d,
                         const rt_bindings *b, char *why, size_t why_size);

// The lowered kernel of candidate i of r (its buffers in the order of the emitted entry's args),
// NULL when i is out of range. The layer's emitted C (layer-emit.c) binds them.
const rt_kir_kernel *rt_cpu_report_kernel(const rt_cpu_report *r, int32_t i);

// Applies fault f (rtgen.h) to the buffers of a candidate's first run, after it ran.
void rt_cpu_fault_apply(rt_cpu_fault f, const rt_op *op, const rt_kir_kernel *k,
                        const rt_cpu_data *d);

#endif
