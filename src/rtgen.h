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
    double gflops, gbps, peak_pct; // of the median; peak_pct of FLOP or DRAM peak
    double max_abs_err, max_rel_err, nmse;
    const char *check; // "interpreter", "random-vector", "naive-kernel", "none"
    int32_t same_as;   // an earlier candidate lowered to identical code (its JIT'd
                       // functions and profile are shared), -1 when this one is unique
} rt_cpu_cand;

typedef struct rt_cpu_report {
    int32_t n;
    rt_cpu_cand *cands;
    int32_t winner; // index into cands, -1 when nothing was profiled correct
    int32_t threads;
    double top1_ms; // from the call until top-1 was JIT-compiled and callable
    double total_ms;
    const char *ext;          // "c" or "ll": the primary source
    bool ran;                 // the device's code runs on this host (JIT-compiled here)
    const char *target;       // the LLVM triple the code is built for; NULL: C only
    const char *note;         // NULL, or why only C was emitted
    const char *not_profiled; // NULL when profiled, else why not ("not this host (...)")
    // Internal: what rt_cpu_run_winner needs (opaque to callers).
    void *impl;
} rt_cpu_report;

// Lowers every candidate of perf (dev must be a CPU-class device), emits C and LLVM IR, and
// with opt->profile JIT-compiles, checks against the reference and times each candidate in a
// forked child (a crash or timeout marks that candidate, never fails the call). b: the bound
// data (prepared here when needed; reference outputs may be written into it). Errors:
// RT_ERR_BACKEND for constructs the CPU backend does not lower (with their location),
// RT_ERR_NOFIT when perf has no candidate, RT_ERR_BACKEND for LLVM failures, RT_ERR_NOMEM.
rt_status rt_cpu_build_and_profile(rt_arena *a, const rt_op *op, const rt_device *dev,
                                   rt_bindings *b, const rt_perf_result *perf,
                                   const rt_cpu_options *opt, rt_cpu_report **out, rt_err *err);

// Runs the winner (or candidate 0 when nothing was profiled) in this process on b's inputs and
// stores its outputs (rounded to their dtypes) into b. Errors: RT_ERR_BACKEND.
rt_status rt_cpu_run_winner(rt_cpu_report *r, rt_bindings *b, rt_err *err);

// A compiled candidate with buffers and a thread pool of its own, for running it many times in
// this process (an embedding program's loop, a benchmark timing it against a peer): made from
// b's values (inputs, and the outputs a '+=' adds to) in the kernel's types and layouts, 64-byte
// aligned. Every run reads and writes those buffers: fill inputs through rt_cpu_runner_data,
// read results there or with rt_cpu_runner_outputs. A runner lives apart from r's arena but
// calls r's JIT code and reads the start arrays of b's ragged dims: free it before either arena.
typedef struct rt_cpu_runner rt_cpu_runner;

// cand: an index into r->cands, or -1 for the winner (candidate 0 when nothing was profiled).
// Errors: RT_ERR_BACKEND (no such candidate, not compiled, no threads), RT_ERR_NOMEM.
rt_status rt_cpu_runner_new(const rt_cpu_report *r, int32_t cand, rt_bindings *b,
                            rt_cpu_runner **out, rt_err *err);
// The buffer of tensor `tensor` (float for f32, double for f64, int32_t for i32 elements, in
// the bound layout), NULL when the kernel does not use that tensor.
void *rt_cpu_runner_data(rt_cpu_runner *rn, int32_t tensor);
// Runs the kernel once on the runner's buffers. Errors: RT_ERR_NOMEM (scratch).
rt_status rt_cpu_runner_run(rt_cpu_runner *rn, rt_err *err);
// Stores the current contents of the kernel's outputs into b (rounded to their dtypes).
void rt_cpu_runner_outputs(const rt_cpu_runner *rn, rt_bindings *b);
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
