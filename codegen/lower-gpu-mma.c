// lower-gpu-mma.c: the matrix-instruction form of a GEMM phase (perfmodel/gpu-plan.h,
// rt_gpu_mma; decided by the plan, derived again nowhere here), printed as the CUDA body of the
// phase's kernel. A half or bfloat16 C(m, n) +=! A * B with a float C runs as a staged tile
// program over the rProgram's block tile, threads and k step:
//   - block b covers C rows m0 .. m0 + T1m and columns n0 .. n0 + T1n (n fastest over blocks);
//   - per k step, the block copies A's T1m x ks tile and B's ks x T1n tile into shared memory
//     as 16-bit values (rows padded by 8 elements: WMMA's ldm is a multiple of 8 and the
//     fragment rows start 32-byte aligned), 8 elements per 128-bit access where the tile is
//     full and the tensor's innermost dim runs along the shared row, else element by element,
//     zero beyond M, N or K (guarded edges); then a barrier, the compute, a barrier;
//   - S > 1 stages (mma.stages, the plan's choice on sm_80+ for full tiles copied 8 at a
//     time): S shared stages, filled by cp.async 16-byte copies (cuda_pipeline.h's
//     __pipeline_memcpy_async, cp.async.cg.shared.global: global -> shared without registers).
//     The copies of steps 0 .. S - 2 are committed before the loop, one group each; step t
//     waits until at most S - 2 groups are in flight (__pipeline_wait_prior(S - 2): its own
//     copy has landed), passes one barrier (the stage visible to every warp, every warp done
//     with stage (t - 1) % S), issues and commits the copy of step t + S - 1 into that stage,
//     and computes while up to S - 1 copies are in flight;
//   - warp w owns the warp tile (w / wgn, w % wgn) of wm x wn. WMMA (inst wmma): (wm / 16) x
//     (wn / 16) WMMA
//     16x16x16 accumulator fragments of float, and per 16 of the k step loads its A and B
//     fragments from shared memory and issues mma_sync on each pair (nvcuda::wmma, which NVRTC
//     lowers to mma.sync on sm_80 and sm_90); the store writes each fragment straight to C
//     (store_matrix_sync) where the tiles are full, else through a 16x16 float scratch per
//     warp, element by element inside M x N. mma.sync (full tiles only): lower-gpu-mma-sync.c.
// Only CUDA spells it (the emitter refuses other dialects for such a phase); AMD's MFMA (inst
// mfma, HIP) is lower-gpu-mfma.c's.
#include "lower-gpu-mma.h"

#include <string.h>

int64_t rt_gm_stride(const rt_op *op, const rt_stmt *s, int32_t tensor, int32_t v) {
    const rt_expr *r = s->rhs;
    const rt_expr *e = r->args[0]->tensor == tensor ? r->args[0] : r->args[1];
    int64_t ext1 = 0;
    if (!rt_expr_const_int(op, s->vars[e->args[1]->var].hi, &ext1))
        return -1;
    return e->args[1]->var == v ? 1 : ext1;
}

unsigned rt_gm_pack(const uint8_t *v, int32_t n, int32_t bits) {
    unsigned x = 0;
    for (int32_t i = 0; i < n; i++)
        x |= (unsigned)v[i] << (i * bits);
    return x;
}

// Whether the copy moves 8 elements (16 bytes) per access: full tile along the tensor's rows.
static bool rt_gm_copy_vec(const rt_gm_copy *c, bool full) {
    return full && c->sc == 1 && c->cols % 8 == 0 && c->sr % 8 == 0;
}

// async: cp.async 16-byte copies (cuda_pipeline.h, cp.async.cg.shared.global), committed and
// waited for by the caller; else 128-bit loads and stores through registers.
void rt_gm_copy_tile(rt_buf *b, const rt_gm_copy *c, bool full, int64_t threads, bool async,
                     int ind) {
    if (rt_gm_copy_vec(c, full)) { // 128-bit, 8 per access
        // rounds of `threads` accesses, counted exactly (the loop unrolls fully, no test per
        // access unless the last round is partial)
        int64_t n = c->rows * c->cols / 8, per = c->cols / 8, rounds = rt_ceil_div(n, threads);
        rt_buf_linef(b, ind, "#pragma unroll");
        rt_buf_linef(b, ind, "for (int rc = 0; rc < %lld; ++rc) {", (long long)rounds);
        rt_buf_linef(b, ind + 1, "int e = tid + rc * %lld;", (long long)threads);
        if (n % threads != 0)
            rt_buf_linef(b, ind + 1, "if (e < %lld) {", (long long)n);
        rt_buf_linef(b, ind + 1, "int r = e / %lld, c = (e %% %lld) * 8;", (long long)per,
                     (long long)per);
        if (async)
            rt_buf_linef(b, ind + 1,
                         "__pipeline_memcpy_async(&%s[%s + r * %lld + c], &%s[(long long)(%s + r) "
                         "* %lldLL + (%s + c)], 16);",
                         c->dst, c->off, (long long)c->ld, c->src, c->row0, (long long)c->sr,
                         c->col0);
        else
            rt_buf_linef(b, ind + 1,
                         "*(uint4 *)&%s[%s + r * %lld + c] = *(const uint4 *)&%s[(long long)(%s + "
                         "r) * %lldLL + (%s + c)];",
                         c->dst, c->off, (long long)c->ld, c->src, c->row0, (long long)c->sr,
                         c->col0);
        if (n % threads != 0)
            rt_buf_linef(b, ind + 1, "}");
        rt_buf_linef(b, ind, "}");
        return;
    }
    // element by element, the tensor's stride-1 dim fastest over the threads (coalesced)
    bool col_fast = c->sc == 1;
    int64_t n = c->rows * c->cols, fast = col_fast ? c->cols : c->rows;
    rt_buf_linef(b, ind, "#pragma unroll 4");
    rt_buf_linef(b, ind, "for (int e = tid; e < %lld; e += %lld) {", (long long)n,
                 (long long)threads);
    if (col_fast)
        rt_buf_linef(b, ind + 1, "int r = e / %lld, c = e %% %lld;", (long long)fast,
                     (long long)fast);
    else
        rt_buf_linef(b, ind + 1, "int c = e / %lld, r = e %% %lld;", (long long)fast,
                     (long long)fast);
    rt_buf_linef(b, ind + 1, "int gr = %s + r, gc = %s + c;", c->row0, c->col0);
    const char *ld =
        rt_arena_printf(b->arena, "%s[(long long)gr * %lldLL + (long long)gc * %lldLL]", c->src,
                        (long long)c->sr, (long long)c->sc);
    if (full)
        rt_buf_linef(b, ind + 1, "%s[%s + r * %lld + c] = %s;", c->dst, c->off, (long long)c->ld,
                     ld);
    else
        rt_buf_linef(b, ind + 1, "%s[%s + r * %lld + c] = (gr < %lld && gc < %lld) ? %s : %s;",
                     c->dst, c->off, (long long)c->ld, (long long)c->rmax, (long long)c->cmax, ld,
                     c->zero);
    rt_buf_linef(b, ind, "}");
}

// The store of the accumulators to C (float, dims in LHS order: row m, column n).
static void rt_gm_store(rt_buf *b, const rt_gpu_mma *mm, const char *cname, int64_t fm,
                        int64_t fn) {
    rt_buf_linef(b, 1, "#pragma unroll");
    rt_buf_linef(b, 1, "for (int i = 0; i < %lld; ++i) {", (long long)fm);
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int j = 0; j < %lld; ++j) {", (long long)fn);
    rt_buf_linef(b, 3, "int gm = m0 + wy * %lld + i * 16, gn = n0 + wx * %lld + j * 16;",
                 (long long)mm->wm, (long long)mm->wn);
    if (mm->full) {
        rt_buf_linef(b, 3,
                     "wmma::store_matrix_sync(&%s[(long long)gm * %lldLL + gn], acc[i][j], %lld, "
                     "wmma::mem_row_major);",
                     cname, (long long)mm->N, (long long)mm->N);
    } else {
        rt_buf_linef(b, 3, "float *cs = &rt_Cs[warp * 256];");
        rt_buf_linef(b, 3, "wmma::store_matrix_sync(cs, acc[i][j], 16, wmma::mem_row_major);");
        rt_buf_linef(b, 3, "__syncwarp();");
        rt_buf_linef(b, 3, "#pragma unroll");
        rt_buf_linef(b, 3, "for (int e = lane; e < 256; e += 32) {");
        rt_buf_linef(b, 4, "int r = gm + e / 16, c = gn + e %% 16;");
        rt_buf_linef(b, 4, "if (r < %lld && c < %lld)", (long long)mm->M, (long long)mm->N);
        rt_buf_linef(b, 5, "%s[(long long)r * %lldLL + c] = cs[e];", cname, (long long)mm->N);
        rt_buf_linef(b, 3, "}");
        rt_buf_linef(b, 3, "__syncwarp();");
    }
    rt_buf_linef(b, 2, "}");
    rt_buf_linef(b, 1, "}");
}

// The block's fragments of one k step from the shared tiles at offsets aoff, boff (stage).
static void rt_gm_compute(rt_buf *b, const rt_gpu_mma *mm, const char *ty, int64_t lda, int64_t ldb,
                          const char *aoff, const char *boff) {
    int64_t fm = mm->wm / 16, fn = mm->wn / 16;
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int kk = 0; kk < %lld; kk += 16) {", (long long)mm->ks);
    rt_buf_linef(b, 3, "wmma::fragment<wmma::matrix_a, 16, 16, 16, %s, wmma::row_major> fa[%lld];",
                 ty, (long long)fm);
    rt_buf_linef(b, 3, "wmma::fragment<wmma::matrix_b, 16, 16, 16, %s, wmma::row_major> fb[%lld];",
                 ty, (long long)fn);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 4,
                 "wmma::load_matrix_sync(fa[i], &rt_As[%s + (wy * %lld + i * 16) * %lld + kk], "
                 "%lld);",
                 aoff, (long long)mm->wm, (long long)lda, (long long)lda);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int j = 0; j < %lld; ++j)", (long long)fn);
    rt_buf_linef(b, 4,
                 "wmma::load_matrix_sync(fb[j], &rt_Bs[%s + kk * %lld + wx * %lld + j * 16], "
                 "%lld);",
                 boff, (long long)ldb, (long long)mm->wn, (long long)ldb);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 4, "#pragma unroll");
    rt_buf_linef(b, 4, "for (int j = 0; j < %lld; ++j)", (long long)fn);
    rt_buf_linef(b, 5, "wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);");
    rt_buf_linef(b, 2, "}");
}

// The k loop, one stage: copy (128-bit through registers or element by element), barrier,
// compute, barrier.
static void rt_gm_loop_1(rt_buf *b, const rt_gpu_mma *mm, int64_t threads, rt_gm_copy *ca,
                         rt_gm_copy *cb, const char *ty, int64_t lda, int64_t ldb,
                         rt_gm_compute_fn compute) {
    rt_buf_linef(b, 1, "for (int k0 = 0; k0 < %lld; k0 += %lld) {", (long long)mm->K,
                 (long long)mm->ks);
    ca->off = cb->off = "0";
    ca->col0 = cb->row0 = "k0";
    rt_gm_copy_tile(b, ca, mm->full, threads, false, 2);
    rt_gm_copy_tile(b, cb, mm->full, threads, false, 2);
    rt_buf_linef(b, 2, "__syncthreads();");
    compute(b, mm, ty, lda, ldb, "0", "0");
    rt_buf_linef(b, 2, "__syncthreads();");
    rt_buf_linef(b, 1, "}");
}

// The k loop, S = mm->stages stages (cp.async): the copies of steps 0 .. S - 2 before the loop,
// one group each; per step t, wait until at most S - 2 groups are in flight (step t's copy has
// landed), a barrier (its data visible to every warp, and every warp done reading stage
// (t - 1) % S), the copy of step t + S - 1 into that stage, a commit (empty past the end, so
// the count of groups stays one per step), the compute of stage t % S.
void rt_gm_loop(rt_buf *b, const rt_gpu_mma *mm, int64_t threads, rt_gm_copy *ca, rt_gm_copy *cb,
                const char *ty, int64_t lda, int64_t ldb, int64_t sa, int64_t sb,
                rt_gm_compute_fn compute) {
    int64_t S = mm->stages;
    if (S < 2) {
        rt_gm_loop_1(b, mm, threads, ca, cb, ty, lda, ldb, compute);
        return;
    }
    for (int64_t s = 0; s < S - 1; s++) {
        if (s * mm->ks < mm->K) {
            rt_buf_linef(b, 1, "{");
            rt_buf_linef(b, 2, "const int k1 = %lld;", (long long)(s * mm->ks));
            ca->off = rt_arena_printf(b->arena, "%lld", (long long)(s * sa));
            cb->off = rt_arena_printf(b->arena, "%lld", (long long)(s * sb));
            ca->col0 = cb->row0 = "k1";
            rt_gm_copy_tile(b, ca, true, threads, true, 2);
            rt_gm_copy_tile(b, cb, true, threads, true, 2);
            rt_buf_linef(b, 1, "}");
        }
        rt_buf_linef(b, 1, "__pipeline_commit();");
    }
    rt_buf_linef(b, 1, "for (int k0 = 0, rd = 0, wr = %lld; k0 < %lld; k0 += %lld) {",
                 (long long)(S - 1), (long long)mm->K, (long long)mm->ks);
    rt_buf_linef(b, 2, "__pipeline_wait_prior(%lld);", (long long)(S - 2));
    rt_buf_linef(b, 2, "__syncthreads();");
    rt_buf_linef(b, 2, "if (k0 + %lld < %lld) {", (long long)((S - 1) * mm->ks), (long long)mm->K);
    rt_buf_linef(b, 3, "const int k1 = k0 + %lld, oa = wr * %lld, ob = wr * %lld;",
                 (long long)((S - 1) * mm->ks), (long long)sa, (long long)sb);
    ca->off = "oa";
    cb->off = "ob";
    rt_gm_copy_tile(b, ca, true, threads, true, 3);
    rt_gm_copy_tile(b, cb, true, threads, true, 3);
    rt_buf_linef(b, 2, "}");
    rt_buf_linef(b, 2, "__pipeline_commit();");
    compute(b, mm, ty, lda, ldb, rt_arena_printf(b->arena, "rd * %lld", (long long)sa),
            rt_arena_printf(b->arena, "rd * %lld", (long long)sb));
    rt_buf_linef(b, 2, "rd = rd == %lld ? 0 : rd + 1;", (long long)(S - 1));
    rt_buf_linef(b, 2, "wr = wr == %lld ? 0 : wr + 1;", (long long)(S - 1));
    rt_buf_linef(b, 1, "}");
}

// The declarations: shared tiles (per stage), thread, warp and block indices; WMMA's
// accumulators (mma.sync's: rt_gm_sync_decls).
static void rt_gm_decls(rt_buf *b, const rt_gpu_mma *mm, const struct rt_gpu_phase_plan *pl,
                        const char *ty, int64_t sa, int64_t sb) {
    int64_t T1m = pl->dims[mm->dm].T1, T1n = pl->dims[mm->dn].T1, nbn = pl->dims[mm->dn].nb;
    int64_t st = mm->stages > 1 ? mm->stages : 1, fm = mm->wm / 16, fn = mm->wn / 16;
    rt_buf_linef(
        b, 1, "// matrix instructions: %lldx%lld warps of %lldx%lld %s tiles, k step %lld%s",
        (long long)mm->wgm, (long long)mm->wgn, (long long)mm->wm, (long long)mm->wn,
        mm->inst == RT_GPU_MMA_SYNC ? "mma.sync m16n8k16" : "WMMA", (long long)mm->ks,
        st > 1 ? rt_arena_printf(b->arena, ", %lld shared stages filled by cp.async", (long long)st)
               : "");
    rt_buf_linef(b, 1, "__shared__ %s rt_As[%lld] __attribute__((aligned(32)));", ty,
                 (long long)(st * sa));
    rt_buf_linef(b, 1, "__shared__ %s rt_Bs[%lld] __attribute__((aligned(32)));", ty,
                 (long long)(st * sb));
    if (!mm->full)
        rt_buf_linef(b, 1, "__shared__ float rt_Cs[%lld] __attribute__((aligned(32)));",
                     (long long)(pl->threads / 32 * 256));
    rt_buf_linef(b, 1, "int tid = threadIdx.x, warp = tid / 32, lane = tid %% 32;");
    rt_buf_linef(b, 1, "int wy = warp / %lld, wx = warp %% %lld;", (long long)mm->wgn,
                 (long long)mm->wgn);
    rt_buf_linef(b, 1,
                 "int m0 = (int)(blockIdx.x / %lld) * %lld, n0 = (int)(blockIdx.x %% %lld) * %lld;",
                 (long long)nbn, (long long)T1m, (long long)nbn, (long long)T1n);
    rt_buf_linef(b, 1, "(void)lane;");
    if (mm->inst == RT_GPU_MMA_SYNC)
        return;
    rt_buf_linef(b, 1, "wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[%lld][%lld];",
                 (long long)fm, (long long)fn);
    rt_buf_linef(b, 1, "#pragma unroll");
    rt_buf_linef(b, 1, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int j = 0; j < %lld; ++j)", (long long)fn);
    rt_buf_linef(b, 3, "wmma::fill_fragment(acc[i][j], 0.0f);");
}

rt_status rt_gpu_mma_body(rt_arena *a, const rt_op *op, const struct rt_gpu_phase_plan *pl,
                          const rt_kir_kernel *k, const int32_t *data_buf, const char **out,
                          rt_err *err) {
    const rt_gpu_mma *mm = &pl->mma;
    const char *tensor_names[3] = {k->bufs[data_buf[mm->a]].name, k->bufs[data_buf[mm->b]].name,
                                   k->bufs[data_buf[op->stmts[pl->tstmt].out]].name};
    const rt_stmt *s = &op->stmts[pl->tstmt];
    if (!mm->on || pl->n_dims != 2)
        return rt_fail(err, RT_ERR_BACKEND, s->loc, "phase has no matrix-instruction plan");
    if (mm->inst == RT_GPU_MMA_MFMA)
        return rt_gm_mfma_body(a, op, pl, tensor_names, out, err);
    bool bf = op->tensors[mm->a].dtype == RT_DTYPE_BF16;
    const char *ty = bf ? "__nv_bfloat16" : "__half";
    const char *zero = bf ? "__float2bfloat16_rn(0.0f)" : "__float2half_rn(0.0f)";
    int64_t T1m = pl->dims[mm->dm].T1, T1n = pl->dims[mm->dn].T1;
    int64_t lda = mm->ks + RT_GPU_MMA_PAD, ldb = T1n + RT_GPU_MMA_PAD;
    int64_t sam = rt_gm_stride(op, s, mm->a, mm->vm), sak = rt_gm_stride(op, s, mm->a, mm->vk);
    int64_t sbk = rt_gm_stride(op, s, mm->b, mm->vk), sbn = rt_gm_stride(op, s, mm->b, mm->vn);
    if (sam < 1 || sak < 1 || sbk < 1 || sbn < 1)
        return rt_fail(err, RT_ERR_BACKEND, s->loc, "matrix-instruction GEMM of a run-time size");
    // A tile: rows m, columns k; B tile: rows k, columns n
    rt_gm_copy ca = {.dst = "rt_As",
                     .src = tensor_names[0],
                     .zero = zero,
                     .rows = T1m,
                     .cols = mm->ks,
                     .ld = lda,
                     .sr = sam,
                     .sc = sak,
                     .rmax = mm->M,
                     .cmax = mm->K,
                     .row0 = "m0"};
    rt_gm_copy cb = {.dst = "rt_Bs",
                     .src = tensor_names[1],
                     .zero = zero,
                     .rows = mm->ks,
                     .cols = T1n,
                     .ld = ldb,
                     .sr = sbk,
                     .sc = sbn,
                     .rmax = mm->K,
                     .cmax = mm->N,
                     .col0 = "n0"};
    bool async = mm->stages > 1, sync = mm->inst == RT_GPU_MMA_SYNC;
    if ((async || sync) && (!rt_gm_copy_vec(&ca, mm->full) || !rt_gm_copy_vec(&cb, mm->full)))
        return rt_fail(err, RT_ERR_BACKEND, s->loc,
                       "internal: cp.async stages or mma.sync planned for a copy of partial or "
                       "transposed tiles");
    rt_buf b;
    rt_buf_init(&b, a);
    rt_gm_decls(&b, mm, pl, ty, T1m * lda, mm->ks * ldb);
    if (sync)
        rt_gm_sync_decls(&b, mm, lda, ldb);
    rt_gm_loop(&b, mm, pl->threads, &ca, &cb, ty, lda, ldb, T1m * lda, mm->ks * ldb,
               sync ? rt_gm_sync_compute : rt_gm_compute);
    if (sync)
        rt_gm_sync_store(&b, mm, tensor_names[2]);
    else
        rt_gm_store(&b, mm, tensor_names[2], mm->wm / 16, mm->wn / 16);
    if (b.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    *out = b.data;
    return RT_OK;
}
