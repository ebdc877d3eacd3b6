// rtgen.h: the public library entry points of the CPU backend — lower the ranked rPrograms of
// an operator to kernels, emit them (C and LLVM IR), JIT-compile them, check every candidate
// against a reference and time it in an isolated child process, and run the winner on the
// caller's data. The CLI (driver.c), the benchmarks and embedding programs share this path.
//
//   rt_perf_construct(a, op, dev, &popt, &perf, err);        // ranked rPrograms
//   rt_cpu_build_and_profile(a, op, dev, b, perf, &opt, &rep, err);
//   rt_cpu_run_winner(rep, b, err);                           // outputs land in b
//   rt_cpu_runner_new(rep, -1, b, &rn, err); rt_cpu_runner_run(rn, err); ...  // run it often
//
// Everything is allocated in the arena a (the JIT too) and released with it.
#ifndef RT_RTGEN_H
#define RT_RTGEN_H

#include "rt.h"
#include "spec.h"
#include "hal.h"
#include "interp.h"
#include "perfmodel.h"

typedef enum rt_cpu_emit {
    RT_CPU_EMIT_LLVM, // the .ll text is the primary source (written as <op>.ll)
    RT_CPU_EMIT_C,    // the portable C is the primary source (<op>.c)
} rt_cpu_emit;

// Faults a test injects into every candidate's checked run, to prove that each check rejects
// what it must (rtgen's own tests, and the CLI's RTGEN_TEST_FAULT; never set otherwise). The
// fault is applied in the profiling child around the candidate's first run, before the check;
// timed runs are not affected. The element is the middle one of the first output (or input)
// unless said otherwise. ORDER RT_CPU_FAULT: names in rtgen-check.c.
typedef enum rt_cpu_fault {
    RT_CPU_FAULT_NONE,
    RT_CPU_FAULT_CORRUPT,   // "corrupt": one output element moved by 1 + max |output|
    RT_CPU_FAULT_NAN,       // "nan": one output element set to NaN (or INT32_MIN)
    RT_CPU_FAULT_UNWRITTEN, // "unwritten": one output element keeps what the buffer held before
                            // the run: the first element that is 0 after it (where a zero-
                            // filled buffer would hide the omission), else the middle one
    RT_CPU_FAULT_CLOBBER,   // "clobber": one element of the first floating input changed after
                            // the run (the output stays right)
    RT_CPU_FAULT_ZERO,      // "zero": the first floating input and every output zeroed, as by a
                            // kernel that wipes an input and computes from it: consistent for a
                            // check that reads the inputs back after the run
    RT_CPU_FAULT_BLIND,     // "blind": two elements of one output row moved so that the product
                            // with the random-vector check's first vector is unchanged
    RT_CPU_FAULT_CRASH,     // "crash": the checked run dies of SIGABRT
    RT_CPU_FAULT_HANG,      // "hang": the checked run never returns
    RT_CPU_FAULT_COUNT
} rt_cpu_fault;

// The fault called name ("corrupt", ...); false when there is none of that name.
bool rt_cpu_fault_from_name(const char *name, rt_cpu_fault *out);

typedef struct rt_cpu_options {
    rt_cpu_emit emit;
    bool profile;              // compile, check and time every candidate on this host
    double budget_ms;          // timing budget of one candidate (0: 80): at least 3 repetitions
                               // unless they take 3x the budget; a candidate whose fastest run
                               // is 25% behind the best median so far stops after 3 repetitions
    bool full_timing;          // no early stop: every candidate gets its whole budget (for
                               // comparing the model with measurement over all candidates)
    double timeout_ms;         // a candidate's child is killed after this long (0: 10000, or 40
                               // predicted run times when that is longer)
    int32_t threads;           // 0: the device's units, at most the online CPUs
    bool progress;             // progress lines on stderr, only when it is a terminal
    int64_t interp_max_points; // reference by interpreter up to this many points (0: 1<<22)
    rt_cpu_fault fault;        // tests only (see rt_cpu_fault); RT_CPU_FAULT_NONE otherwise
    // Follows the candidate loop (run.h's rt_run_options.on_step): each step's name ("compile",
    // "prepare", "measure") and candidate; NULL: none.
    void (*on_step)(void *obs, const char *step, int32_t i);
    void *obs;
} rt_cpu_options;

// Outcome of one candidate. ORDER RT_CPU_CAND: names in rtgen.c.
typedef enum rt_cpu_cand_status {
    RT_CPU_CAND_NOT_PROFILED,
    RT_CPU_CAND_OK,
    RT_CPU_CAND_WRONG,   // output differs from the reference beyond tolerance: never wins
    RT_CPU_CAND_CRASHED, // its child died on a signal
    RT_CPU_CAND_TIMEOUT,
    RT_CPU_CAND_FAILED, // could not be compiled or run
    RT_CPU_CAND_COUNT
} rt_cpu_cand_status;

typedef struct rt_cpu_cand {
    int32_t rank;          // index into the perf result's cands
    const char *name;      // kernel (function) name
    const char *c_source;  // emitted C
    const char *ll_source; // emitted LLVM IR (before optimization)
    const char *summary;   // one line: path, blocking, micro-kernel
    rt_cpu_cand_status status;
    int signal; // CRASHED: the signal
    double predicted_ns;
    double compile_ms; // lowering + LLVM build + pass pipeline + JIT codegen
    double min_ns, median_ns;
    int32_t reps;
    double gflops, gbps, peak_pct; // of the median: the report's flops and the operator's
                                   // bytes over it; peak_pct of the report's peak_gflops
                                   // (compute_bound) or peak_gbps
    bool compute_bound;            // the model's bottleneck for it is compute (else a level)
    double max_abs_err, max_rel_err, nmse;
    const char *check;  // "interpreter", "random-vector", "naive-kernel", "none"
    double check_ns;    // the check of its first run's buffers, in its profiling child
    const char *reason; // every status but ok and not profiled: what went wrong, one line
                        // (the element and error of a wrong output, a clobbered input, the
                        // signal, where a timeout struck)
    int32_t same_as;    // an earlier candidate lowered to identical code (its JIT'd
                        // functions and profile are shared), -1 when this one is unique
    double runoff_ns;   // its median over the run-off's interleaved turns (run.h); 0: not in it
} rt_cpu_cand;

typedef struct rt_cpu_report {
    int32_t n;
    rt_cpu_cand *cands;
    int32_t winner; // index into cands, -1 when nothing was profiled correct
    // The run-off (run.h): its contenders (indices into cands, rank order) and turns; n_runoff
    // is 0 when there was none (fewer than two close contenders). The winner is its fastest.
    int32_t n_runoff, runoff_turns;
    int32_t runoff[4]; // RT_RUN_RUNOFF_MAX (checked in rtgen.c)
    bool profiled;     // candidates were run and checked (opt->profile)
    int32_t threads;
    double top1_ms;      // from the call until top-1 was JIT-compiled and callable
    double reference_ms; // computing the reference: the interpreter's or the naive kernel's
                         // outputs, or the random-vector check's alpha A (B t)
    double total_ms;
    double flops;    // profiled: the useful arithmetic of the bound data (rt_interp_flops), which
                     // every candidate's GFLOP/s divide by its median
    const char *ext; // "c" or "ll": the primary source
    bool ran;        // the device's code runs on this host (JIT-compiled here)
    const char *target;       // the LLVM triple the code is built for; NULL: C only
    const char *note;         // NULL, or why only C was emitted
    const char *not_profiled; // NULL when profiled, else why not ("not this host (...)")
    // The ceilings of peak_pct: the device's f32 peak, and the bandwidth of the level the model
    // takes the operator's compulsory traffic from (level 1, the last-level cache, when the
    // operator is warm -- rt_perf_cpu_warm -- else DRAM), with their labels ("measured DATE" or
    // "nominal", rt_hal_figure_label).
    double peak_gflops, peak_gbps;
    const char *peak_gbps_level; // the level's name: "dram", "l3"
    const char *peak_gbps_key;   // its figure: "bandwidth_gbps", or "stream_gbps" where higher
    char peak_gflops_label[32], peak_gbps_label[32];
    // Internal: what rt_cpu_run_winner needs (opaque to callers).
    void *impl;
} rt_cpu_report;

// Lowers every candidate of perf (dev must be a CPU-class device), emits C and LLVM IR, and
// with opt->profile JIT-compiles, checks against the reference and times each candidate in a
// forked child (a crash or timeout marks that candidate, never fails the call: a report whose
// winner is -1 after profiling is the caller's failure to handle). b: the bound data (prepared
// here when needed; its outputs, first filled with a poison — NaN, INT32_MIN for integers —
// then hold the interpreter's reference where it gave one, the poison elsewhere: the checked
// runs start from outputs so filled, so that an element a kernel never writes cannot pass;
// outputs a '+=' accumulates into keep the caller's values). Before anything
// is compiled or allocated, a profile whose data (bound tensors, the kernel's copies, the
// reference) exceeds the memory available is refused. Errors: RT_ERR_BACKEND for constructs the
// CPU backend does not lower (with their location), RT_ERR_NOFIT when perf has no candidate or
// the profile does not fit in memory, RT_ERR_BACKEND for LLVM failures, RT_ERR_NOMEM.
rt_status rt_cpu_build_and_profile(rt_arena *a, const rt_op *op, const rt_device *dev,
                                   rt_bindings *b, const rt_perf_result *perf,
                                   const rt_cpu_options *opt, rt_cpu_report **out, rt_err *err);

// Refuses (RT_ERR_NOFIT) a profile of op on b whose data cannot fit in the memory available
// now (MemAvailable, capped by a cgroup v2 limit), with the bytes it needs and those available:
// the bound tensors (doubles), the kernel's typed copies, the initial copies of what it writes,
// the profiling child's copy of those, and the naive kernel's reference. Allocates no tensor
// data (rt_bindings_count). perf may be NULL, before construction: the reference is then
// counted unless the interpreter gives it for a small ragged op. rt_cpu_build_and_profile calls
// it first. Errors: RT_ERR_NOFIT, those of rt_bindings_count.
rt_status rt_cpu_profile_fits(rt_arena *a, const rt_op *op, rt_bindings *b,
                              const rt_perf_result *perf, const rt_cpu_options *opt, rt_err *err);

// Runs the winner in this process on b's inputs and stores its outputs (rounded to their
// dtypes) into b. Errors: RT_ERR_BACKEND (no winner: see rt_cpu_runner_new).
rt_status rt_cpu_run_winner(rt_cpu_report *r, rt_bindings *b, rt_err *err);

// A compiled candidate with buffers and a thread pool of its own, for running it many times in
// this process (an embedding program's loop, a benchmark timing it against a peer): made from
// b's values (inputs, and the outputs a '+=' adds to) in the kernel's types and layouts, 64-byte
// aligned. Every run reads and writes those buffers: fill inputs through rt_cpu_runner_data,
// read results there or with rt_cpu_runner_outputs. A runner lives apart from r's arena but
// calls r's JIT code and reads the start arrays of b's ragged dims: free it before either arena.
typedef struct rt_cpu_runner rt_cpu_runner;

// cand: an index into r->cands, or -1 for the winner. Only a candidate whose check passed
// (status ok) runs. Errors: RT_ERR_BACKEND (no such candidate, no winner, a candidate that was
// not profiled or failed its profile: the message gives its status and reason, no threads),
// RT_ERR_NOMEM.
rt_status rt_cpu_runner_new(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                            rt_cpu_runner **out, rt_err *err);
// The same runner without buffers of its own (b laid out, not necessarily prepared: its values
// are not read): every data buffer is the caller's, bound with rt_cpu_runner_bind before the
// first run (a layer's buffers, shared by its kernels).
rt_status rt_cpu_runner_new_unbound(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                                    rt_cpu_runner **out, rt_err *err);
// The buffer of tensor `tensor` (float for f32, double for f64, int32_t for i32 elements, in
// the bound layout), NULL when the kernel does not use that tensor (or it is not bound yet).
void *rt_cpu_runner_data(rt_cpu_runner *rn, int32_t tensor);
// Bytes of the runner's buffer of tensor `tensor` (0 when the kernel does not use it).
size_t rt_cpu_runner_bytes(const rt_cpu_runner *rn, int32_t tensor);
// Points the kernel at the caller's buffer for tensor `tensor` (bytes: rt_cpu_runner_bytes; the
// kernel's element type, the bound layout), so that kernels share buffers (a layer's
// intermediates). The caller keeps buf alive while the runner runs. False (nothing changed)
// when the kernel has no buffer of that tensor or the sizes differ.
bool rt_cpu_runner_bind(rt_cpu_runner *rn, int32_t tensor, void *buf, size_t bytes);
// Points the kernel's start arrays of (tensor, dim) at the caller's (a prelude shared by several
// kernels) and returns how many it bound: 0 when the kernel reads no such array, -1 (nothing
// changed) when the caller's differs from the kernel's in length or contents.
int32_t rt_cpu_runner_bind_start(rt_cpu_runner *rn, int32_t tensor, int32_t dim, int64_t *start,
                                 size_t bytes);
// Stores v[0..n) (n at most the buffer's elements) into the runner's current buffer of tensor
// `tensor`, converted to its element type; false when the kernel does not use that tensor, it
// is not bound or n is too large.
bool rt_cpu_runner_load(rt_cpu_runner *rn, int32_t tensor, const double *v, int64_t n);
// Fills the runner's current buffer of tensor `tensor` with v in its element type; false when
// the kernel does not use that tensor.
bool rt_cpu_runner_fill(rt_cpu_runner *rn, int32_t tensor, double v);
// Runs the kernel once on the runner's buffers. Errors: RT_ERR_NOMEM (scratch), RT_ERR_BACKEND
// (an unbound runner's buffer not bound).
rt_status rt_cpu_runner_run(rt_cpu_runner *rn, rt_err *err);
// Stores the current contents of the kernel's outputs into b (rounded to their dtypes).
void rt_cpu_runner_outputs(const rt_cpu_runner *rn, rt_bindings *b);
// Reads the first n elements of the runner's current buffer of tensor `tensor` into out,
// rounded to its dtype; false when the kernel does not use it, it is not bound or n is too large.
bool rt_cpu_runner_read(const rt_cpu_runner *rn, int32_t tensor, double *out, int64_t n);
void rt_cpu_runner_free(rt_cpu_runner *rn);

// The source of candidate i in the primary emit language; *out_ext is "c" or "ll".
const char *rt_cpu_report_source(const rt_cpu_report *r, int32_t i, const char **out_ext);

// JSON array with one object per candidate (jansson json_t *, caller owns the reference; NULL
// on out of memory): rank, name, status, predicted/measured times, GFLOP/s or GB/s, % of peak,
// errors against the reference and the check used, and "winner": true on the winner.
void *rt_cpu_report_to_json(const rt_cpu_report *r);

// Short table for stdout.
void rt_cpu_report_print(const rt_cpu_report *r, rt_buf *out);

const char *rt_cpu_cand_status_name(rt_cpu_cand_status st);

#endif
