// gpu.h: the GPU code generator — lowering of a ranked rProgram to GPU-structured kernel IR
// (blocks, threads, shared-memory staging, per-thread register tiles), one emitter printing it
// as CUDA, HIP or OpenCL C through a dialect table, and the helpers that compile the top-K
// in-process (NVRTC / hipRTC / OpenCL), check a kernel numerically on a live device (a GPU, or
// OpenCL on PoCL) against the reference interpreter, and time and rank the kernels that pass.
//
// Pipeline position: rt_perf_construct (perfmodel.h) --rt_gpu_lower--> rt_gpu_kernel
//   --rt_gpu_emit--> source text --rt_gpu_compile_topk (hal-gpu.h)--> binaries + resources
//   --rt_gpu_check_run--> error against rt_interp_run --rt_gpu_profile--> kernel times, winner.
// Everything lives in the caller's arena. Output is deterministic.
#ifndef RT_GPU_H
#define RT_GPU_H

#include "rt.h"
#include "spec.h"
#include "hal.h"
#include "hal-gpu.h"
#include "perfmodel.h"
#include "interp.h"
#include "kir.h"

// ---------------------------------------------------------------------------------------------
// Dialects (dialect-cuda.c, dialect-hip.c, dialect-opencl.c): the constructs a target prints.
// ---------------------------------------------------------------------------------------------

typedef enum rt_gpu_target {
    RT_GPU_TARGET_CUDA,
    RT_GPU_TARGET_HIP,
    RT_GPU_TARGET_OPENCL,
    RT_GPU_TARGET_COUNT
} rt_gpu_target;

typedef struct rt_gpu_dialect {
    const char *target;              // "cuda", "hip", "opencl"
    const char *ext;                 // file extension of the source ("cu", "hip.cpp", "cl")
    const char *prelude;             // lines before the kernels (pragmas, helpers), may be ""
    const char *kernel_qual;         // before the return type: `extern "C" __global__`, `__kernel`
    const char *bounds_fmt;          // launch-bounds attribute, one %d for threads per block
    bool bounds_after_void;          // cuda/hip: `__global__ void __launch_bounds__(n) k(`
    const char *global_qual;         // address space of kernel buffer arguments ("" or "__global ")
    const char *shared_qual;         // block-shared arrays: "__shared__", "__local"
    const char *restrict_kw;         // "__restrict__", "restrict"
    const char *thread_idx;          // thread index in the block
    const char *block_idx[3];        // block index along x, y, z
    const char *barrier;             // block barrier statement
    const char *unroll;              // pragma line asking for full unrolling
    const char *i64;                 // 64-bit signed integer type
    const char *vec4;                // 4-wide float vector type
    const char *inf;                 // +infinity of float
    const char *fn_qual;             // qualifiers of the helper functions of the prelude
    const char *fmod_f32;            // float remainder ("fmodf", "fmod")
    const char *fn_f32[RT_FN_COUNT]; // math functions of float (NULL: printed as an expression)
    const char *fn_f64[RT_FN_COUNT]; // of double
} rt_gpu_dialect;

extern const rt_gpu_dialect rt_gpu_dialect_cuda;
extern const rt_gpu_dialect rt_gpu_dialect_hip;
extern const rt_gpu_dialect rt_gpu_dialect_opencl;

// The dialect of a target, and the target of a device class (cuda, hip, opencl).
const rt_gpu_dialect *rt_gpu_dialect_of(rt_gpu_target t);
// Parses "cuda" / "hip" / "opencl" (the --emit values of GPU targets); false when unknown.
bool rt_gpu_target_from_name(const char *name, rt_gpu_target *out);
// The natural target of a GPU device class; false for the cpu class.
bool rt_gpu_target_of_device(const rt_device *dev, rt_gpu_target *out);

// ---------------------------------------------------------------------------------------------
// Lowering (lower-gpu.c)
// ---------------------------------------------------------------------------------------------

// One kernel argument, in order: the data array of a tensor, or the start array of a ragged dim
// (int32 on the device, rt_layout.start of the tensor's dim).
typedef struct rt_gpu_buffer {
    const char *name;
    bool is_start; // false: data of tensor; true: start array of tensor's dim
    bool is_tree;  // an int32 array of tree parameter `tensor`: rt_kir_tree_field `dim`
    int32_t tensor;
    int32_t dim;     // is_start: the ragged dim; is_tree: the tree array
    rt_dtype dtype;  // element type on the device
    bool written;    // the kernel writes it (outputs, materialized temporaries)
    int32_t kir_buf; // its buffer in the kernel IR
} rt_gpu_buffer;

// A grid dimension whose block count depends on the bound lengths (ragged spatial dims).
typedef struct rt_gpu_ragged_grid {
    int32_t stmt, var; // statement and index var whose maximum extent sets the block count
    int64_t tile;      // elements of var per block
} rt_gpu_ragged_grid;

// One kernel of the program (a phase of the IR): launched in order, each after the previous.
typedef struct rt_gpu_phase {
    const char *kernel_name;
    int64_t grid_x;   // blocks along x (fixed)
    int32_t n_ragged; // 0..2: grid y and z are ragged_grid[0], [1]
    rt_gpu_ragged_grid ragged[2];
    int32_t threads;    // threads per block (x)
    int64_t smem_bytes; // static shared memory per block
    bool staged;        // inputs staged through shared memory per reduction step
    const char *what;   // one line: statements it runs
    // Level by level (kir phase levels, lower-tree.c): launched once per level of the tree with
    // the level as a trailing int argument and ceil(nodes of the level * row / threads) blocks;
    // grid_x is then the bound for all the tree's nodes.
    bool by_level;
    int64_t row; // by_level: threads per node (elements of the output at one node)
} rt_gpu_phase;

typedef struct rt_gpu_lower_options {
    int32_t rank;          // candidate rank (1-based), in names and the header
    const char *spec_path; // for the header comment (NULL: op->file)
} rt_gpu_lower_options;

typedef struct rt_gpu_kernel {
    const rt_op *op;
    const rt_device *dev;
    const rt_rprog *prog; // NULL for the naive lowering
    rt_kir_kernel *kir;
    int32_t n_bufs;
    rt_gpu_buffer *bufs; // kernel arguments, the same list for every phase
    int32_t n_phases;
    rt_gpu_phase *phases; // phases[i] is kir->phases[i]
    const char *header;   // the comment text opening the source (spec, device, rTiles, time)
    bool idx32;           // every index fits in 32 bits: index math is printed as int
} rt_gpu_kernel;

// Lowers rProgram p of op (built by model m) for GPU device dev. p == NULL lowers a naive
// program (one element per thread, 256 threads per block, no staging) used as a baseline.
// Errors: RT_ERR_BACKEND at the construct the GPU backend does not support (recursion over trees,
// half/bfloat16/int8 tensors, a run-time size), RT_ERR_NOMEM.
rt_status rt_gpu_lower(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_model *m,
                       const rt_rprog *p, const rt_gpu_lower_options *opt, rt_gpu_kernel **out,
                       rt_err *err);

// The launch of phase i for bindings b (prepared): grid (with the ragged grid dims sized from
// the bound lengths) and block. Errors: RT_ERR_SPEC when an extent cannot be evaluated,
// RT_ERR_USAGE for a level-by-level phase (rt_gpu_phase_steps).
rt_status rt_gpu_phase_launch(const rt_gpu_kernel *k, int32_t phase, rt_bindings *b,
                              rt_gpu_launch *out, rt_err *err);
// The launches of phase i (binary bin) for bindings b as a list of steps: one
// (rt_gpu_phase_launch), or for a level-by-level phase one per level of its tree as b holds it,
// in order, each with its level as the step's int argument. *out lives in a.
rt_status rt_gpu_phase_steps(rt_arena *a, const rt_gpu_kernel *k, int32_t phase,
                             const rt_gpu_binary *bin, rt_bindings *b, rt_gpu_step **out,
                             int32_t *n_out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Emitter (emit-gpu.c)
// ---------------------------------------------------------------------------------------------

// Prints every phase of k as one source text in dialect d. Errors: RT_ERR_BACKEND for an
// invalid kernel.
rt_status rt_gpu_emit(rt_arena *a, const rt_gpu_kernel *k, const rt_gpu_dialect *d,
                      const char **out_text, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Candidates: emit, compile (emit-gpu.c)
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
// Candidates on a live device: check, time, rank (profile-gpu.c)
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
    bool accepted;          // every output compared and passing rt_compare_accept, every input
                            // unchanged
    const char *reason;     // why not accepted (the first failure found); NULL when accepted
} rt_gpu_check;

// Runs candidate c (emitted for the target of dev, the device rt was opened on: CUDA, HIP or
// OpenCL) with the data of bindings b, all phases in order on device-resident buffers, and
// compares every output with the reference interpreter run on the same data. Before the run,
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
} rt_gpu_time_options;

// The defaults: 2 warm-up launches, 5 to 100 repetitions, 0.2 s per candidate.
extern const rt_gpu_time_options rt_gpu_time_defaults;

// Outcome of one candidate. ORDER RT_GPU_CAND: names in profile-gpu.c.
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

#endif
