// layer.h: running a layer — the defs of a multi-op spec (spec.h rt_layer) — end to end on a
// CPU: each def's winning kernel (from the single-op pipeline, rtgen.h) in file order, on
// buffers the layer owns (one per layer tensor: inputs, intermediates, outputs), with the
// prelude of every ragged structure (the start arrays of layout.h) computed once and shared by
// every kernel that reads it, checked against the layer's interpreter (rt_layer_interp_run) and
// timed per op and in total.
//
//   rt_layer_bindings_new(a, layer, seed, &lb, err); ... per def: rt_perf_construct,
//   rt_cpu_build_and_profile(a, op_k, dev, lb->ops[k], ...) -> cpu[k]
//   rt_layer_run(a, layer, cpu, lb, &opt, &rep, err);
//   rt_layer_report_print(rep, &buf); rt_layer_report_to_json(rep);
#ifndef RT_LAYER_H
#define RT_LAYER_H

#include "rtgen.h"
#include "run-gpu.h"

typedef struct rt_layer_options {
    double budget_ms; // timing budget of the whole layer (0: 200): at least 3 repetitions
    uint64_t seed;    // the reference's inputs (the same seed as lb's)
    bool check;       // compare with the interpreter (the layer's reference)
    // The interpreter checks a layer of at most this many FLOPs (rt_interp_flops summed over
    // the defs; 0: RT_LAYER_INTERP_MAX_FLOPS). A larger layer (the interpreter would take
    // minutes) is checked by rerunning each def's kernel alone, on buffers and start arrays of
    // its own holding copies of its in-layer inputs, against its in-layer outputs: what the
    // layer adds to the kernels (the shared buffers and prelude); each kernel was checked
    // against its reference when it was profiled.
    double interp_max_flops;
    // Tests only (rt_layer_gpu_run): the last element of the last def's first output is changed
    // after the checked run's read-back, so that the layer's check fails at will.
    bool test_corrupt;
} rt_layer_options;

#define RT_LAYER_INTERP_MAX_FLOPS 2e8

// One shared start array of the prelude: dim `dim` of tensor `tensor` of def `op` is where it
// was computed; every kernel reading a start array of the same ragged structure (the same
// extents of dims 0..dim) reads this one.
typedef struct rt_layer_prelude_entry {
    int32_t op, tensor, dim;
    int64_t *start;
    size_t bytes;
    int32_t n_users; // kernel buffers bound to it
} rt_layer_prelude_entry;

typedef struct rt_layer_op_result {
    const rt_op *op;
    const rt_cpu_report *cpu; // NULL on a GPU device (rt_layer_gpu_run)
    int32_t winner;           // index into cpu->cands (the GPU report's cands)
    const char *kernel;       // the winner's name (GPU: its kernels' names)
    int32_t rank;             // the winner's rank in the construction (1-based)
    double predicted_ns;      // the model's, of the winner
    double profiled_ns;       // the winner's median when profiled alone
    double layer_median_ns;   // its median inside the layer run
    double max_abs_err;       // of its outputs against the layer's interpreter (-1: unchecked)
    double max_rel_err, nmse;
    bool correct; // every output accepted (rt_compare_accept)
} rt_layer_op_result;

// One launch of a GPU layer's sequence: def, kernel, geometry for the bound lengths, and its
// arguments by name (a layer tensor, "def.temporary", or a view of the prelude).
typedef struct rt_layer_launch {
    const char *def, *kernel;
    int64_t grid[3];
    int32_t block[3];
    int32_t n_args;
    const char **args;
} rt_layer_launch;

typedef struct rt_layer_report {
    const rt_layer *layer;
    int32_t n_ops;
    rt_layer_op_result *ops;
    int32_t n_prelude; // distinct start arrays computed
    rt_layer_prelude_entry *prelude;
    int32_t n_start_bufs;     // kernel start buffers bound to them
    double prelude_ns;        // computing them once (measured, the minimum of the repetitions)
    double predicted_ns;      // sum over the ops
    double min_ns, median_ns; // the whole layer: kernels in order, prelude not included
    int32_t reps;
    int32_t threads;
    // A GPU run (rt_layer_gpu_run): the live device's name, how the kernels were timed, the
    // prelude's one buffer (its bytes) and the launches in order; NULL / 0 on a CPU.
    const char *device;
    const char *timed_with;
    int64_t prelude_bytes;
    int32_t n_launches;
    struct rt_layer_launch *launches;
    bool checked;      // compared with the interpreter, or each kernel rerun alone (check)
    const char *check; // "interpreter" or "rerun" (NULL: unchecked)
    bool correct;      // every op's outputs accepted
    const char *why;   // the first rejected output, NULL when correct
} rt_layer_report;

// Runs the layer l on the winners of cpu[0..l->n_ops) (each profiled on lb->ops[k]; a def
// without a winner is an RT_ERR_BACKEND error naming it): computes the prelude once, allocates
// one buffer per layer tensor (inputs from lb's values, intermediates and outputs poisoned),
// binds every kernel to them, runs the kernels in order once and (opt->check) compares every
// def's outputs with the interpreter's run of the whole layer on the same inputs (bindings of
// its own from opt->seed, in a scratch arena released after the check; the outputs read back
// are stored into lb where lb holds their data: rt_layer_bindings_prepare, not
// rt_layer_bindings_prepare_inputs), then times the layer. The runners have no buffers of their
// own: the layer holds one buffer per layer tensor, and lb needs only its inputs' values. Errors: RT_ERR_BACKEND (no winner, a buffer
// the kernels disagree on, an output accumulated with '+='), RT_ERR_NOMEM, the interpreter's.
rt_status rt_layer_run(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                       rt_layer_bindings *lb, const rt_layer_options *opt, rt_layer_report **out,
                       rt_err *err);

// The layer as a handle an embedding program runs many times (rt_layer_run is built on it):
// each def's winner as a runner, bound to one buffer per layer tensor and to the shared prelude
// (computed once, at rt_layer_runner_new). Inputs hold lb's values; intermediates and outputs
// the poison until the first run. Errors of _new: those of rt_layer_run's setup (no winner, a
// buffer or start array the kernels disagree on, an output accumulated with '+=', no memory).
typedef struct rt_layer_runner rt_layer_runner;
rt_status rt_layer_runner_new(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                              rt_layer_bindings *lb, rt_layer_runner **out, rt_err *err);
// Runs def k's kernel (0 <= k < l->n_ops), or every kernel in order (k < 0).
rt_status rt_layer_runner_run(rt_layer_runner *rn, int32_t k, rt_err *err);
// The layer's buffer of the layer tensor called name (the kernels' element type, the bound
// layout: ragged tensors packed as rt_layout_compute lays them out) and its bytes; NULL when
// no kernel uses it or no layer tensor has that name.
void *rt_layer_runner_data(rt_layer_runner *rn, const char *name, size_t *bytes);
// The report being filled: the prelude's arrays and time (per-op results as rt_layer_run's,
// untimed and unchecked until rt_layer_run fills them).
const rt_layer_report *rt_layer_runner_report(const rt_layer_runner *rn);
void rt_layer_runner_free(rt_layer_runner *rn);

// Whether dims 0..d of (oa, ta) and (ob, tb) have the same extents: the same ragged structure
// up to dim d, hence the same start array of dim d (one prelude array serves both).
bool rt_layer_same_structure(const rt_op *oa, const rt_tensor *ta, const rt_op *ob,
                             const rt_tensor *tb, int32_t d);

// The check of rt_layer_run by rerunning (layer.h rt_layer_options.interp_max_flops) on the
// runner's current buffers, after a run: fills the report's per-op errors, checked, correct,
// why. Errors: RT_ERR_NOMEM.
rt_status rt_layer_runner_check_rerun(rt_layer_runner *rn, rt_err *err);

// The layer's reference on lb's lengths and inputs: bindings of its own from seed with lb's
// length tensors and layer inputs, every def's outputs poisoned, then the interpreter's run of
// the defs in order (rt_layer_interp_run). Errors: the interpreter's, RT_ERR_NOMEM.
rt_status rt_layer_reference(rt_arena *a, const rt_layer *l, rt_layer_bindings *lb, uint64_t seed,
                             rt_layer_bindings **out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// The layer on a GPU-class device (layer-gpu.c)
// ---------------------------------------------------------------------------------------------

// Runs the layer l on the winners of gpu[0..l->n_ops) (each profiled by rt_gpu_build_and_profile
// on lb->ops[k] for dev, whose runtime rt is open) on device buffers: one launch sequence (every
// def's phases in file order, each kernel bound to the layer's buffers through its step's
// arg_map), uploaded once: the layer inputs, the intermediates and outputs (poisoned), each
// def's temporaries, and the prelude — every distinct start array (one per ragged structure,
// rt_layer_same_structure) in one int32 buffer, each kernel's start argument a view of it. The
// run's buffers are read back once: every def's outputs are compared with the interpreter's run
// of the layer (opt->check; a layer above opt->interp_max_flops: each def's kernels rerun alone
// on copies of their in-layer inputs, as rt_layer_run), the inputs and the prelude must come
// back unchanged. Then the sequence is timed on the device (all defs; then each def's kernels on
// the layer's buffers). The report is rt_layer_run's, with device, timed_with, prelude_bytes and
// launches. Errors: RT_ERR_BACKEND (a def without a winner, a def with '+=' or a tree, buffers
// the kernels disagree on, a failed launch), RT_ERR_NOMEM, the interpreter's.
rt_status rt_layer_gpu_run(rt_arena *a, const rt_layer *l, rt_gpu_runtime *rt,
                           const rt_gpu_report *const *gpu, rt_layer_bindings *lb,
                           const rt_layer_options *opt, rt_layer_report **out, rt_err *err);

// The per-op and total table for stdout.
void rt_layer_report_print(const rt_layer_report *r, rt_buf *out);
// The same as a jansson json_t * (void *: this header does not need jansson.h); the caller
// owns it. NULL on out of memory.
void *rt_layer_report_to_json(const rt_layer_report *r);

#endif
