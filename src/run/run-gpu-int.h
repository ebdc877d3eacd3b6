// run-gpu-int.h: what the GPU files of the run layer share (gpu-cands.c, gpu-profile.c,
// gpu-report.c): the GPU backend's steps of the candidate loop and their contexts. Not part of
// the library's interface.
#ifndef RT_RUN_GPU_INT_H
#define RT_RUN_GPU_INT_H

#include "run-gpu.h"
#include "vcheck.h"

// The compile step (gpu-cands.c): emits n candidates of r in target t into cs and, for the
// device's own target, compiles all their phases in one batch on up to n_threads threads
// (rt_gpu_compile_many: its results are in job order whatever the threads), folding each
// candidate's phases into its resources and occupancy. own false: emitted only.
typedef struct rt_gc_loop {
    rt_arena *a;
    const rt_perf_result *r;
    const rt_device *dev;
    rt_gpu_target t;
    rt_gpu_candidate *cs;
    bool own;              // t is the device's own target: compile (else emit only)
    const char *spec_path; // emit only: for the header comments (NULL: op->file)
} rt_gc_loop;
rt_status rt_gc_loop_compile(void *ctx, int32_t n, int32_t n_threads, rt_err *err);

// The reference, computed once per set of candidates: the interpreter's values of every output
// of op on b, or for a large contraction the random-vector check's alpha A (B t) (vc).
typedef struct rt_gp_ref {
    double **out;        // [op->n_outputs]; NULL with vc
    const rt_vcheck *vc; // NULL: the interpreter's outputs
} rt_gp_ref;

// The check-and-time steps (gpu-profile.c): one reference from b (prepare), then each candidate
// checked and, when right, timed alone (measure) into out[i].
typedef struct rt_gp_loop {
    rt_arena *a;
    rt_gpu_runtime *rt;
    const rt_device *dev;
    const rt_gpu_candidate *cands;
    rt_bindings *b;
    const rt_gpu_time_options *o;
    rt_gpu_result *out;
    rt_gp_ref ref;
} rt_gp_loop;
rt_status rt_gp_loop_prepare(void *ctx, bool *measure, rt_err *err);
rt_status rt_gp_loop_measure(void *ctx, int32_t i, double best_ns, rt_run_measure *m, rt_err *err);

#endif
