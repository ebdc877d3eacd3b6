// lower-gpu-mma.h: what the two matrix-instruction lowerings share: lower-gpu-mma.c (the tile
// copies, the staged k loop, WMMA) and lower-gpu-mma-sync.c (inline PTX mma.sync with
// ldmatrix), and lower-gpu-mfma.c (AMD MFMA) the tile copy. Internal to codegen/.
#ifndef RT_LOWER_GPU_MMA_H
#define RT_LOWER_GPU_MMA_H

#include "gpu.h"
#include "gpu-plan.h"

// One tile copy global -> shared: rows x cols of tensor `src` (element (r, c) at r * sr + c * sc
// from row0, col0) into shared array `dst` of row length ld; bounds rmax, cmax unless full.
typedef struct rt_gm_copy {
    const char *dst, *src, *zero;
    int64_t rows, cols, ld, sr, sc, rmax, cmax;
    const char *row0, *col0;
    const char *off; // the stage's offset into dst ("0" single-stage)
} rt_gm_copy;

// The stride of var v in the read of `tensor` (a dense row-major 2-d tensor indexed by two plain
// vars over its whole extent, rt_gp_mma_read): 1 for the inner index, else the inner extent; -1
// when that is not constant.
int64_t rt_gm_stride(const rt_op *op, const rt_stmt *s, int32_t tensor, int32_t v);

// n values of `bits` bits packed into one constant, value i at bit i * bits (lane tables the
// kernels index by shifting).
unsigned rt_gm_pack(const uint8_t *v, int32_t n, int32_t bits);

// Prints copy c of a tile: 8 elements per 128-bit access where full and c runs along the
// tensor's rows (cp.async 16-byte copies where async), else element by element, guarded unless
// full; at indent ind, over `threads` threads (tid).
void rt_gm_copy_tile(rt_buf *b, const rt_gm_copy *c, bool full, int64_t threads, bool async,
                     int ind);

// The compute of one k step from the stage at shared offsets aoff (A) and boff (B).
typedef void (*rt_gm_compute_fn)(rt_buf *b, const rt_gpu_mma *mm, const char *ty, int64_t lda,
                                 int64_t ldb, const char *aoff, const char *boff);

// The k loop over mm->stages stages (1: copy, barrier, compute, barrier; more: cp.async, the
// copy of step t + stages - 1 issued before step t's compute); sa, sb the elements of one stage
// of A's and B's shared tiles.
void rt_gm_loop(rt_buf *b, const rt_gpu_mma *mm, int64_t threads, rt_gm_copy *ca, rt_gm_copy *cb,
                const char *ty, int64_t lda, int64_t ldb, int64_t sa, int64_t sb,
                rt_gm_compute_fn compute);

// lower-gpu-mma-sync.c: the mma.sync phase's declarations, k step and store (its device
// helpers: rt_gpu_mma_sync_prelude, gpu.h).
void rt_gm_sync_decls(rt_buf *b, const rt_gpu_mma *mm, int64_t lda, int64_t ldb);
void rt_gm_sync_compute(rt_buf *b, const rt_gpu_mma *mm, const char *ty, int64_t lda, int64_t ldb,
                        const char *aoff, const char *boff);
void rt_gm_sync_store(rt_buf *b, const rt_gpu_mma *mm, const char *cname);

// lower-gpu-mfma.c: the whole HIP body of an MFMA phase (inst RT_GPU_MMA_MFMA); names: A's, B's
// and C's buffers.
rt_status rt_gm_mfma_body(rt_arena *a, const rt_op *op, const struct rt_gpu_phase_plan *pl,
                          const char *const names[3], const char **out, rt_err *err);

#endif
