// lower-gpu-impl.h: the GPU lowering's state (rt_gl) and the helpers its files share:
// lower-gpu.c (the plan's phases as kernel IR) and lower-gpu-ragged.c (ragged extents of staged
// contractions). Internal to codegen/.
#ifndef RT_LOWER_GPU_IMPL_H
#define RT_LOWER_GPU_IMPL_H

#include "gpu.h"
#include "lower-expr.h"
#include "gpu-plan.h"

#define RT_GL_MAX_DIMS  RT_GPU_PLAN_MAX_DIMS
#define RT_GL_MAX_READS RT_GPU_PLAN_MAX_READS
// A copy loop of at most this many constant rounds is unrolled: every round's global load in
// flight before the first store waits (nvcc unrolls a 24-round copy 8 times by itself, and its
// three trips wait for global memory one after another).
#define RT_GL_MAX_UNROLLED_COPY 32

typedef struct rt_gl {
    rt_arena *a;
    const rt_op *op;
    const rt_device *dev;
    const rt_perf_model *m;
    const rt_rprog *p;
    rt_err *err;
    rt_kir_kernel *k;
    rt_kir_phase *ph;
    const rt_gpu_phase_plan *plan;                      // the phase being built (gpu-plan.h)
    int32_t bvar[RT_GL_MAX_DIMS], tvar[RT_GL_MAX_DIMS]; // per plan dim: block, thread coordinate
    int32_t sh_buf[RT_GL_MAX_READS];                    // per staged read: its shared array
    int32_t frag_buf[RT_GL_MAX_READS];                  // and its register fragment, -1 none
    rt_kir_expr *frag_e; // vec4 step: the register-tile element whose reads take fragments
    int32_t lo_var[RT_GL_MAX_READS][RT_MAX_DIMS]; // and its data tile's origin per dim
    int32_t *data_buf;                            // per tensor
    int32_t (*start_buf)[RT_MAX_DIMS];            // per tensor and dim, -1 dense
    int64_t (*extent)[RT_MAX_DIMS];               // per tensor and dim, -1 ragged
    int32_t **var_of; // per statement: stmt var -> phase var (-1 unbound)
    int32_t (*tree_buf)[RT_KIR_TREE_FIELD_COUNT]; // per tree parameter: its arrays (-1 unused)
    int32_t *tree_child;                          // per tree parameter: its CHILD buffer
    const rt_stmt *s;
    int32_t si; // index of s
    rt_kir_type ct;
    rt_kir_block *pre;    // where sums inside expressions put their loops
    bool staging;         // reads of staged expressions come from shared memory
    int32_t subst_tensor; // reads of it at the prefix vars give subst_value
    int32_t subst_n;
    rt_kir_expr *subst_value;
    int32_t *work_buf;  // per plan phase: its work list's kernel argument (bufs index), -1 none
    int32_t *work_kbuf; // and its kernel IR buffer
    // rows mode with a work list: the block holds an entry (no branch around the body's
    // barriers); NULL otherwise
    rt_kir_expr *work_live;
    bool oom;
} rt_gl;

#define RT_GL_CHECK(l, x)                                                                          \
    do {                                                                                           \
        if (!(x))                                                                                  \
            (l)->oom = true;                                                                       \
    } while (0)

// Errors of the GPU lowering: RT_ERR_BACKEND "<what> is not supported by the GPU backend", and
// out of memory.
rt_status rt_gl_unsupported(rt_gl *l, rt_loc loc, const char *what);
rt_status rt_gl_nomem(rt_gl *l);
// Flat offset of tensor t at idx (rt_layout); valid (may be NULL) gets the in-extent condition
// of the dense dims.
rt_kir_expr *rt_gl_offset(rt_gl *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid);
// The range of var v of l->s with its bound vars.
rt_status rt_gl_range(rt_gl *l, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi);

// lower-gpu.c's builders, shared with the files of the other modes.
rt_kir_expr *rt_gl_udiv(rt_arena *a, rt_kir_expr *x, int64_t d); // of non-negative x, folded
rt_kir_expr *rt_gl_umod(rt_arena *a, rt_kir_expr *x, int64_t d);
// Appends `var = value` (an integer named name) and returns a reference to var; NULL: oom.
rt_kir_expr *rt_gl_let(rt_gl *l, rt_kir_block *b, const char *name, rt_kir_expr *value);
// Appends buf[idx] = value (converted to buf's type).
void rt_gl_store(rt_gl *l, rt_kir_block *b, int32_t buf, rt_kir_expr *idx, rt_kir_expr *value);
rt_kir_node *rt_gl_if(rt_gl *l, rt_kir_block *b, rt_kir_expr *cond); // NULL: oom
// A serial loop over var v of l->s in its range, binding it; *body: its body (NULL: oom).
rt_status rt_gl_var_loop(rt_gl *l, rt_kir_block *b, int32_t v, rt_kir_block **body);
// Expression e of l->s at its bound vars (sums inside it loop in l->pre).
rt_status rt_gl_num(rt_gl *l, const rt_expr *e, rt_kir_expr **out);
// cur combined with x by reduction op (+, *, max, min).
rt_kir_expr *rt_gl_combine(rt_arena *a, rt_assign op, rt_kir_expr *cur, rt_kir_expr *x);
// Binds the tiling statement's LHS vars (and the phase's other statements' prefix) to element
// e of the thread's register tile; *valid: the element lies in the iteration space.
rt_status rt_gl_bind(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, rt_kir_expr *e,
                     rt_kir_expr **valid);
void rt_gl_set_stmt(rt_gl *l, int32_t si);               // l->s, l->si and l->ct of statement si
rt_status rt_gl_out_offset(rt_gl *l, rt_kir_expr **out); // l->s's output at its bound vars

// lower-gpu-rows.c: the body of a rows phase (gpu-plan.h) into b, td the thread's index in its
// row; adds its shared arrays' bytes to *smem_bytes.
rt_status rt_gl_rows(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, rt_kir_expr *td,
                     int64_t *smem_bytes);

// lower-gpu-ragged.c
rt_kir_expr *rt_gl_extent_at(rt_gl *l, const rt_expr *e, rt_kir_expr **idx);
rt_status rt_gl_ragged_valid(rt_gl *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid);
bool rt_gl_ragged_exact(const rt_gl *l, const rt_gpu_phase_plan *pl, const int32_t *red,
                        int32_t nr);
rt_status rt_gl_range_at_origin(rt_gl *l, const rt_gpu_phase_plan *pl, const int32_t *base_var,
                                int32_t v, bool *uniform, rt_kir_expr **lo, rt_kir_expr **hi);
rt_status rt_gl_block_live(rt_gl *l, const rt_gpu_phase_plan *pl, const int32_t *base_var,
                           rt_kir_expr **live);

#endif
