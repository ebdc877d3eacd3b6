// run.h: the run layer — what turns the emitted candidates of an operator into a report: one
// candidate loop for every backend (compile, check against the reference, time the kernel
// alone, pick, report), with each backend's steps as hooks (rtgen.c for CPUs, gpu-cands.c and
// gpu-profile.c for GPUs), and the host data the kernels run on. Above codegen and the HAL's
// runtime headers, below the CLIs.
#ifndef RT_RUN_H
#define RT_RUN_H

#include "rt.h"
#include "interp.h"
#include "compare.h"
#include "kir.h"

// The host array of tree t that a kernel's TREE buffer of field f holds (as the bindings
// linearized it), and its length in *n; NULL for an unknown field.
const int32_t *rt_run_tree_array(const rt_tree_data *t, rt_kir_tree_field f, int64_t *n);

// ---------------------------------------------------------------------------------------------
// The candidate loop (run.c): every backend's candidates go through it
// ---------------------------------------------------------------------------------------------

// What the measure hook found for one candidate.
typedef struct rt_run_measure {
    bool accepted;    // it ran and passed its check (the tolerance table of interp.h:
                      // rt_tolerance_of / rt_compare_accept, or a check that implies it)
    double median_ns; // accepted: the median of the kernel alone (no upload, no read-back)
    bool duplicate;   // its code is an earlier candidate's (the outcome copied): no run-off
} rt_run_measure;

// The run-off (rt_run_hooks.runoff): at most this many accepted candidates whose medians lie
// within RT_RUN_RUNOFF_MARGIN of the best (the closest first) are timed again, interleaved.
#define RT_RUN_RUNOFF_MAX    4
#define RT_RUN_RUNOFF_MARGIN 0.30

// A backend's steps, each on its own context ctx. The loop calls compile once, prepare once, then
// measure for each candidate in rank order; each hook records its candidate's outcome (status, reason,
// errors, times) in its own report, at the candidate's index, so the report's order is the
// ranks' whatever the threads.
typedef struct rt_run_hooks {
    const char *backend; // "cpu", "cuda", "hip", "opencl": in messages
    // Compiles candidates [0, n) on up to threads threads (each independent of the others; the
    // backend says how many it can use: the CPU JIT shares one LLVM context, so 1). A failed
    // compile is the candidate's outcome, not an error. NULL: the candidates come compiled.
    rt_status (*compile)(void *ctx, int32_t n, int32_t threads, rt_err *err);
    // After the compile, before the first measure: the data the candidates run on and the
    // reference they are checked against. *measure false: nothing is run (the backend's report
    // says why: profiling off, no device, too large). NULL: always measure.
    rt_status (*prepare)(void *ctx, bool *measure, rt_err *err);
    // Runs candidate i once on the bound data and checks its outputs and inputs against the
    // reference, then, when it passed, times the kernel alone. best_ns is the best median so far
    // (INFINITY: none), for a backend that stops a hopeless timing early. A candidate that
    // failed to compile, crashed, timed out or was wrong is an outcome (out->accepted false),
    // not an error. NULL: nothing is run (compile only).
    rt_status (*measure)(void *ctx, int32_t i, double best_ns, rt_run_measure *out, rt_err *err);
    // The run-off of the close contenders cands[0..n) (2 <= n <= RT_RUN_RUNOFF_MAX, in rank
    // order): each is timed again in turns that run every one of them briefly, so that a slow
    // spell of a shared machine falls on all of them instead of on the one timed during it;
    // median_ns[j] gets cands[j]'s median over the turns (0: it was not timed). The winner is
    // the lowest of these. NULL: no run-off (the first medians decide).
    rt_status (*runoff)(void *ctx, const int32_t *cands, int32_t n, double *median_ns, rt_err *err);
} rt_run_hooks;

typedef struct rt_run_options {
    int32_t compile_threads; // 0: 2
    // Called before each step with its name ("compile", "prepare", "measure", "runoff") and
    // candidate (-1: the whole batch); NULL: none. For progress lines and for tests that follow the loop.
    void (*on_step)(void *obs, const char *step, int32_t i);
    void *obs;
} rt_run_options;

// The loop: compile (once, for all n), prepare, measure each candidate in rank order, pick the
// winner: the lowest kernel median among the accepted candidates, the better rank on a tie;
// -1 when none was accepted or nothing was measured. With a runoff hook and two or more close
// contenders (RT_RUN_RUNOFF_MAX, RT_RUN_RUNOFF_MARGIN; duplicates of an earlier candidate's
// code are not contenders), the run-off's lowest median picks among them instead. The compile threads never change what is
// compiled nor the order of the report. Errors: those of the hooks (not a candidate's outcome:
// out of memory, no data to run on), RT_ERR_USAGE for n < 0.
rt_status rt_run_candidates(const rt_run_hooks *h, void *ctx, int32_t n, const rt_run_options *opt,
                            int32_t *winner, rt_err *err);

#endif
