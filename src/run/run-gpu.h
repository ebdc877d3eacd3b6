// run-gpu.h: the run layer's GPU candidates — each ranked rProgram lowered and emitted by codegen
// (gpu.h), compiled in-process for the device (NVRTC / hipRTC / OpenCL, through the HAL), checked
// numerically on a live device (a GPU, or OpenCL on PoCL) against the reference interpreter,
// timed (the kernel alone) and ranked, through the one candidate loop of run.h.
//
// Pipeline position: rt_gpu_emit (gpu.h) --rt_gpu_compile_topk (hal-gpu.h)--> binaries +
//   resources --rt_gpu_check_run--> error against rt_interp_run --rt_gpu_profile--> kernel
//   times, winner.
// Everything lives in the caller's arena.
#ifndef RT_RUN_GPU_H
#define RT_RUN_GPU_H

#include "gpu.h"
#include "hal-gpu.h"
#include "interp.h"
#include "compare.h"
#include "run.h"

// ---------------------------------------------------------------------------------------------
// Launches of a lowered kernel on bound data (gpu-launch.c)
// ---------------------------------------------------------------------------------------------

// The launch of phase i for bindings b (prepared): grid (with the ragged grid dims sized from
// the bound lengths; a work-list phase: one block along x per entry of its list, at least one)
// and block. Errors: RT_ERR_SPEC when an extent cannot be evaluated,
// RT_ERR_USAGE for a level-by-level phase (rt_gpu_phase_steps).
rt_status rt_gpu_phase_launch(const rt_gpu_kernel *k, int32_t phase, rt_bindings *b,
                              rt_gpu_launch *out, rt_err *err);
// The work list of phase i, one that runs a work list (k->phases[i].work, gpu-plan.h), for
// bindings b: *out (in a) holds the entry count, then per non-empty block of the phase (a tile
// holding an element of every ragged dim's range) its grid x item, grid y and grid z blocks;
// ordered longest first: by the product of the tiling statement's reduction ranges at the
// block's last live element, then the tile's live elements, then the product of its ragged
// extents, ties in grid order. *n_ints = 1 + 3 * entries. rt_gpu_work_count counts the
// entries (the launch's blocks). Errors: RT_ERR_USAGE for a phase without a work list,
// RT_ERR_SPEC when a ragged range cannot be evaluated from b, RT_ERR_BACKEND past int32.
rt_status rt_gpu_work_list(rt_arena *a, const rt_gpu_kernel *k, int32_t phase, rt_bindings *b,
                           int32_t **out, int64_t *n_ints, rt_err *err);
rt_status rt_gpu_work_count(const rt_gpu_kernel *k, int32_t phase, rt_bindings *b, int64_t *out,
                            rt_err *err);
// The launches of phase i (binary bin) for bindings b as a list of steps: one
// (rt_gpu_phase_launch), or for a level-by-level phase one per level of its tree as b holds it,
// in order, each with its level as the step's int argument. *out lives in a.
rt_status rt_gpu_phase_steps(rt_arena *a, const rt_gpu_kernel *k, int32_t phase,
                             const rt_gpu_binary *bin, rt_bindings *b, rt_gpu_step **out,
                             int32_t *n_out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Candidates: emit, compile (gpu-cands.c)
// ---------------------------------------------------------------------------------------------

// One emitted candidate: the lowered kernel and its source in one target's dialect.
typedef struct rt_gpu_candidate {
    int32_t rank; // 1-based
    const rt_rprog *prog;
    rt_gpu_kernel *kernel;
    rt_gpu_target target;
    const char *source;
    // Filled by rt_gpu_compile_topk, per phase (kernel):
    bool compiled; // every phase compiled
    rt_status compile_status;
    rt_err compile_err;   // first failing phase's error (log in compile_err.log)
    rt_gpu_binary **bins; // [n_phases], NULL entries for phases that failed
    int32_t regs;         // max over phases (-1 unknown)
    int64_t spill_bytes;  // sum of spill stores + loads over phases
    int64_t smem_bytes;   // max over phases
    double occupancy;     // min over phases
    char compiled_arch[128];
    const char *note; // e.g. "sm_70 is not supported by NVRTC 13; compiled for sm_75"
} rt_gpu_candidate;

// Lowers and emits the candidate of rank `rank` (1-based) of result r in target t.
rt_status rt_gpu_emit_candidate(rt_arena *a, const rt_perf_result *r, int32_t rank, rt_gpu_target t,
                                const rt_gpu_lower_options *opt, rt_gpu_candidate *out,
                                rt_err *err);

// Emits the first n candidates of r (n <= r->n_cands) for dev's own target and compiles them
// on n_threads threads with rt_gpu_compile_many for dev. out receives n candidates; a compile
// failure is recorded in the candidate (compiled false), not returned. Errors: lowering errors,
// RT_ERR_DEVICE for a non-GPU device, RT_ERR_NOMEM.
rt_status rt_gpu_compile_topk(rt_arena *a, const rt_perf_result *r, const rt_device *dev, int32_t n,
                              int32_t n_threads, rt_gpu_candidate **out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Candidates on a live device: check, time, rank (gpu-profile.c)
// ---------------------------------------------------------------------------------------------

// Result of a numerical check of one candidate on a live device (a GPU, or OpenCL on PoCL).
typedef struct rt_gpu_check {
    int32_t n_outputs;      // op->n_outputs: every output is compared
    rt_compare_result *cmp; // [n_outputs] in op->outputs order; n_elems 0 where there was no
                            // buffer to compare (which fails the check)
    double max_rel_err;     // over outputs
    double nmse;            // max over outputs
    double checked_run_ns;  // wall time of the checked run: upload, every phase, read-back (and,
                            // on first use, loading or building the kernels): never a ranking
    const char *check;      // "interpreter", or "random-vector" for a large contraction
                            // (src/ref/vcheck.h: C t against alpha A (B t), two vectors)
    double check_ns;        // the check of the read-back buffers (inputs and outputs)
    bool accepted;          // every output compared and passing rt_compare_accept (or the
                            // random-vector check), every input unchanged
    const char *reason;     // why not accepted (the first failure found); NULL when accepted
} rt_gpu_check;

// Runs candidate c (emitted for the target of dev, the device rt was opened on: CUDA, HIP or
// OpenCL) with the data of bindings b, all phases in order on device-resident buffers, and
// compares every output with the reference interpreter run on the same data -- or, for a
// contraction whose interpreter run would pass 1 << 22 points, checks it with two random
// vectors against alpha A (B t) computed from b (src/ref/vcheck.h). Before the run,
// the buffers of tensors the kernel writes are poisoned (NaN; the most negative value for
// integers) so that an element never written fails, except outputs of '+=' (RT_ASSIGN_ADD),
// which keep their start values; after it, every buffer the kernel only reads (inputs, start
// arrays of ragged dims) is read back and must equal what was uploaded. A failed comparison is
// a result (accepted false, reason), not an error. b is left as it was (prepared). Errors:
// those of rt_gpu_compile / rt_gpu_run_steps, RT_ERR_SPEC from the interpreter.
rt_status rt_gpu_check_run(rt_arena *a, rt_gpu_runtime *rt, const rt_device *dev,
                           const rt_gpu_candidate *c, rt_bindings *b, rt_gpu_check *out,
                           rt_err *err);

// How rt_gpu_profile times the candidates that pass their check. Each is timed alone by
// rt_gpu_time_steps (its phases on device-resident buffers, device events): warmup untimed
// launches, then reps = budget_ns / checked_run_ns (an upper bound of one launch) clamped to
// [min_reps, max_reps].
typedef struct rt_gpu_time_options {
    int32_t warmup;   // >= 0
    int32_t min_reps; // >= 1
    int32_t max_reps; // >= min_reps
    double budget_ns;
    bool test_corrupt; // tests only: the first element of every candidate's first output is
                       // changed after its checked run, so that every check fails at will
    // Follows the candidate loop (run.h's rt_run_options.on_step); NULL: none.
    void (*on_step)(void *obs, const char *step, int32_t i);
    void *obs;
} rt_gpu_time_options;

// The defaults: 2 warm-up launches, 5 to 100 repetitions, 0.2 s per candidate.
extern const rt_gpu_time_options rt_gpu_time_defaults;

// Outcome of one candidate. ORDER RT_GPU_CAND: names in gpu-profile.c.
typedef enum rt_gpu_cand_status {
    RT_GPU_CAND_COMPILED,       // compiled, not run
    RT_GPU_CAND_COMPILE_FAILED, // reason: the compiler's message
    RT_GPU_CAND_RUN_FAILED,     // the checked run or the timing returned an error: reason
    RT_GPU_CAND_WRONG,          // the check rejected it (reason): never wins
    RT_GPU_CAND_OK,             // checked and timed
    RT_GPU_CAND_COUNT
} rt_gpu_cand_status;

// "compiled", "compile failed", "run failed", "wrong", "ok".
const char *rt_gpu_cand_status_name(rt_gpu_cand_status st);

typedef struct rt_gpu_result {
    rt_gpu_cand_status status;
    const char *reason; // compile failed, run failed, wrong: why (arena); NULL otherwise
    bool checked;       // the checked run completed: check holds its result
    rt_gpu_check check;
    rt_gpu_timing timing; // status ok: the kernel alone (all phases per sample)
} rt_gpu_result;

// Checks each of the n candidates (rt_gpu_check_run, against one reference computed from b;
// candidates without binaries are compiled first), times each that passed with opt (NULL:
// rt_gpu_time_defaults), and sets *out_winner to the candidate with the lowest kernel median
// among those with status ok (the better rank on a tie; -1 when none). A candidate that failed
// to compile, failed its run (e.g. a launch error) or was wrong is marked in out[i], never
// returned as an error. b is left as it was. Errors: the reference interpreter's
// (RT_ERR_SPEC), bad options (RT_ERR_USAGE), RT_ERR_NOMEM.
rt_status rt_gpu_profile(rt_arena *a, rt_gpu_runtime *rt, const rt_device *dev,
                         const rt_gpu_candidate *cands, int32_t n, rt_bindings *b,
                         const rt_gpu_time_options *opt, rt_gpu_result *out, int32_t *out_winner,
                         rt_err *err);

// ---------------------------------------------------------------------------------------------
// rtgen's GPU path through the candidate loop, and its report (gpu-report.c)
// ---------------------------------------------------------------------------------------------

typedef struct rt_gpu_report_options {
    rt_gpu_target target;   // the dialect emitted; only the device's own target is compiled and run
    const char *spec_path;  // another target's header comments (NULL: op->file)
    bool profile;           // false: compile only ("--no-profile")
    rt_bindings *b;         // the data the candidates are checked on
    const char *test_fault; // tests only (RTGEN_TEST_FAULT): NULL, "" or "corrupt"
    int32_t compile_threads;                                 // 0: 2
    void (*on_step)(void *obs, const char *step, int32_t i); // rt_run_options.on_step
    void *obs;
} rt_gpu_report_options;

// What the GPU path produced: one emitted (and, for the device's own target, compiled)
// candidate per rank, and when a runtime was found, each checked and, when right, timed.
typedef struct rt_gpu_report {
    int32_t n;
    rt_gpu_candidate *cands;
    rt_gpu_result *res;       // per candidate when profiled (rt_gpu_profile), else NULL
    const char **status;      // "emitted", "compiled", or rt_gpu_cand_status_name
    const char **reason;      // why a candidate failed (compile, run, check); NULL otherwise
    int32_t winner;           // lowest kernel median among "ok", -1 when none
    const char *not_profiled; // why nothing ran (no GPU, other target, too large)
    const char *ext;
    double flops; // useful FLOPs of the bound data (rt_interp_flops) when profiled, else 0
} rt_gpu_report;

// Emits every candidate of res in opt->target, compiles them when that is dev's own target, and
// with opt->profile, where dev is present and the operator small enough for the reference
// check, checks and times each through the candidate loop (run.h). Not profiled is a result
// (g->not_profiled), a profile in which nothing passed too (g->winner -1). Errors: RT_ERR_DEVICE
// for a device without a GPU target, RT_ERR_USAGE for a fault other than "corrupt", those of
// lowering and of a runtime that is present but fails to open, RT_ERR_NOMEM.
rt_status rt_gpu_build_and_profile(rt_arena *a, const rt_device *dev, const rt_perf_result *res,
                                   const rt_gpu_report_options *opt, rt_gpu_report *g, rt_err *err);
// The model's choice among g's candidates (an index): the least predicted time among those that
// compiled, which after compilation is priced with the compiler's registers
// (rt_perf_reprice_compiled); candidate 0 when none compiled (emitted only).
int32_t rt_gpu_report_model_choice(const rt_gpu_report *g);
// JSON array with one object per candidate (jansson json_t *, caller owns it): rank, status,
// reason, winner, the predicted time, its phases, the compile's resources, the check's errors
// and the kernel's times.
void *rt_gpu_report_to_json(const rt_gpu_report *g, const rt_perf_result *res);
// The table: kernel min/median (the kernel alone, what ranks), the checked run (upload, launch,
// read-back; not ranked), then each failed candidate's reason and how the kernels were timed.
void rt_gpu_report_print(const rt_gpu_report *g, const rt_perf_result *res, rt_buf *out);

#endif
