// lower-gpu-mfma.c: the MFMA form of a matrix-instruction GEMM phase (rt_gpu_mma, inst
// RT_GPU_MMA_MFMA: a half or bfloat16 C(m, n) +=! A * B with a float C on a HIP gfx90a device),
// printed as the HIP body of the phase's kernel. Block b covers C rows m0 .. m0 + T1m and
// columns n0 .. n0 + T1n (n fastest over blocks); wavefront w (64 lanes) owns the wave tile
// (w / wgn, w % wgn) of wm x wn: (wm / 16) x (wn / 16) 16x16 f32 accumulators of 4 floats per
// lane. Per k step:
//   - the block copies A's T1m x ks tile into LDS as rows m (k along the row) and B's ks x T1n
//     tile as rows n (k along the row, transposed), both rows padded by RT_GPU_MMA_PAD
//     elements, so that an operand's 4 k values of one lane are one 64-bit LDS read for A and B
//     alike; A 8 elements per 128-bit access where full and its rows run along k (else element by
//     element, zero beyond M, N or K), B where full and its rows run along n by 128-bit global
//     loads whose 8 elements go to 8 rows of the transposed tile (else element by element, n
//     fastest over the threads: coalesced);
//   - a barrier, then per 16 of the step each lane reads its 4-element operand of each A and B
//     fragment and the wave issues v_mfma_f32_16x16x16f16 (bf16: _16x16x16bf16_1k) on each pair
//     (clang's __builtin_amdgcn_mfma_*, one instruction each), then a barrier.
// Which row and k each lane reads, and which C element each accumulator element holds, come from
// perfmodel/gpu-mma.c's tables (rt_gpu_mfma_ab_k, rt_gpu_mfma_acc_r), packed into constants the
// kernel indexes by lane once; tests/unit/test-gpu-mfma-map.c checks them against the CDNA 2
// ISA's layouts and tests/unit/test-gpu-mfma-host.sh runs the emitted kernel against
// mfma-host.hpp's model of the instructions. The store writes each accumulator element to C
// (16 lanes along a row: 64 contiguous bytes), checked against M and N unless full.
#include "lower-gpu-mma.h"

#include <string.h>

// RT_MFMA_HOST: the host stand-in supplies its own (tests/unit/mfma-host.hpp).
const char rt_gpu_mfma_prelude[] =
    "#ifndef RT_MFMA_HOST\n"
    "typedef _Float16 rt_v4h __attribute__((ext_vector_type(4)));\n"
    "typedef short rt_v4s __attribute__((ext_vector_type(4)));\n"
    "typedef float rt_v4f __attribute__((ext_vector_type(4)));\n"
    "static __device__ inline rt_v4f rt_mfma_f16(rt_v4h a, rt_v4h b, rt_v4f c) {\n"
    "    return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);\n"
    "}\n"
    "static __device__ inline rt_v4f rt_mfma_bf16(rt_v4s a, rt_v4s b, rt_v4f c) {\n"
    "    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);\n"
    "}\n"
    "#endif\n";

// B's ks x T1n tile (rows k at stride sr, n contiguous) into the transposed LDS tile rt_Bs (rows
// n of length ld): per thread 128-bit global loads of 8 n-consecutive elements, each element to
// its row.
static void rt_gm_mfma_copy_bt(rt_buf *b, const char *src, const char *ty, int64_t ks, int64_t T1n,
                               int64_t sr, int64_t ld, int64_t threads) {
    int64_t n = ks * T1n / 8, per = T1n / 8, rounds = rt_ceil_div(n, threads);
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int rc = 0; rc < %lld; ++rc) {", (long long)rounds);
    rt_buf_linef(b, 3, "int e = tid + rc * %lld;", (long long)threads);
    if (n % threads != 0)
        rt_buf_linef(b, 3, "if (e < %lld) {", (long long)n);
    rt_buf_linef(b, 3, "int r = e / %lld, c = (e %% %lld) * 8;", (long long)per, (long long)per);
    rt_buf_linef(b, 3, "uint4 v = *(const uint4 *)&%s[(long long)(k0 + r) * %lldLL + (n0 + c)];",
                 src, (long long)sr);
    rt_buf_linef(b, 3, "const %s *h = (const %s *)&v;", ty, ty);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int x = 0; x < 8; ++x)");
    rt_buf_linef(b, 4, "rt_Bs[(c + x) * %lld + r] = h[x];", (long long)ld);
    if (n % threads != 0)
        rt_buf_linef(b, 3, "}");
    rt_buf_linef(b, 2, "}");
}

// One k step's compute: per 16 of ks, each lane's operands of the wave's A and B fragments (one
// 64-bit LDS read each) and the MFMA of each pair.
static void rt_gm_mfma_compute(rt_buf *b, const rt_gpu_mma *mm, bool bf, int64_t ld) {
    int64_t fm = mm->wm / 16, fn = mm->wn / 16;
    const char *vt = bf ? "rt_v4s" : "rt_v4h";
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int kk = 0; kk < %lld; kk += 16) {", (long long)mm->ks);
    rt_buf_linef(b, 3, "%s fa[%lld], fb[%lld];", vt, (long long)fm, (long long)fn);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 4,
                 "fa[i] = *(const %s *)&rt_As[(wy * %lld + i * 16 + rt_fr) * %lld + kk + rt_fk];",
                 vt, (long long)mm->wm, (long long)ld);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int j = 0; j < %lld; ++j)", (long long)fn);
    rt_buf_linef(b, 4,
                 "fb[j] = *(const %s *)&rt_Bs[(wx * %lld + j * 16 + rt_fr) * %lld + kk + rt_fk];",
                 vt, (long long)mm->wn, (long long)ld);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 4, "#pragma unroll");
    rt_buf_linef(b, 4, "for (int j = 0; j < %lld; ++j)", (long long)fn);
    rt_buf_linef(b, 5, "acc[i][j] = rt_mfma_%s(fa[i], fb[j], acc[i][j]);", bf ? "bf16" : "f16");
    rt_buf_linef(b, 2, "}");
}

// The store: accumulator element v of lane `lane` is C(rt_cr + v, rt_cc) of its 16x16 tile.
static void rt_gm_mfma_store(rt_buf *b, const rt_gpu_mma *mm, const char *cname) {
    int64_t fm = mm->wm / 16, fn = mm->wn / 16;
    rt_buf_linef(b, 1,
                 "const int rt_cr = (int)((0x%08xu >> ((lane / %d) * 8)) & 0xffu), rt_cc = lane %% "
                 "%d;",
                 rt_gm_pack(rt_gpu_mfma_acc_r, 4, 8), RT_GPU_MFMA_ROWS, RT_GPU_MFMA_ROWS);
    rt_buf_linef(b, 1, "#pragma unroll");
    rt_buf_linef(b, 1, "for (int i = 0; i < %lld; ++i) {", (long long)fm);
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int j = 0; j < %lld; ++j) {", (long long)fn);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int v = 0; v < 4; ++v) {");
    rt_buf_linef(b, 4,
                 "int gm = m0 + wy * %lld + i * 16 + rt_cr + v, gn = n0 + wx * %lld + j * 16 + "
                 "rt_cc;",
                 (long long)mm->wm, (long long)mm->wn);
    if (!mm->full)
        rt_buf_linef(b, 4, "if (gm < %lld && gn < %lld)", (long long)mm->M, (long long)mm->N);
    rt_buf_linef(b, mm->full ? 4 : 5, "%s[(long long)gm * %lldLL + gn] = acc[i][j][v];", cname,
                 (long long)mm->N);
    rt_buf_linef(b, 3, "}");
    rt_buf_linef(b, 2, "}");
    rt_buf_linef(b, 1, "}");
}

rt_status rt_gm_mfma_body(rt_arena *a, const rt_op *op, const struct rt_gpu_phase_plan *pl,
                          const char *const names[3], const char **out, rt_err *err) {
    const rt_gpu_mma *mm = &pl->mma;
    const rt_stmt *s = &op->stmts[pl->tstmt];
    bool bf = op->tensors[mm->a].dtype == RT_DTYPE_BF16;
    const char *ty = bf ? "unsigned short" : "_Float16";
    int64_t T1m = pl->dims[mm->dm].T1, T1n = pl->dims[mm->dn].T1, nbn = pl->dims[mm->dn].nb;
    int64_t ld = mm->ks + RT_GPU_MMA_PAD, fm = mm->wm / 16, fn = mm->wn / 16, wave = 64;
    int64_t sam = rt_gm_stride(op, s, mm->a, mm->vm);
    int64_t sak = rt_gm_stride(op, s, mm->a, mm->vk);
    int64_t sbk = rt_gm_stride(op, s, mm->b, mm->vk);
    int64_t sbn = rt_gm_stride(op, s, mm->b, mm->vn);
    if (sam < 1 || sak < 1 || sbk < 1 || sbn < 1)
        return rt_fail(err, RT_ERR_BACKEND, s->loc, "matrix-instruction GEMM of a run-time size");
    if (mm->stages > 1 || pl->threads != mm->wgm * mm->wgn * wave)
        return rt_fail(err, RT_ERR_BACKEND, s->loc,
                       "internal: MFMA planned with cp.async stages or threads other than its "
                       "wavefronts");
    // A: rows m, columns k; B transposed: rows n, columns k
    rt_gm_copy ca = {.dst = "rt_As",
                     .src = names[0],
                     .zero = bf ? "(unsigned short)0" : "(_Float16)0.0f",
                     .rows = T1m,
                     .cols = mm->ks,
                     .ld = ld,
                     .sr = sam,
                     .sc = sak,
                     .rmax = mm->M,
                     .cmax = mm->K,
                     .row0 = "m0",
                     .col0 = "k0",
                     .off = "0"};
    rt_gm_copy cb = ca;
    cb.dst = "rt_Bs";
    cb.src = names[1];
    cb.rows = T1n;
    cb.sr = sbn;
    cb.sc = sbk;
    cb.rmax = mm->N;
    cb.row0 = "n0";
    bool bt_vec = mm->full && sbn == 1 && T1n % 8 == 0 && sbk % 8 == 0;
    rt_buf b;
    rt_buf_init(&b, a);
    rt_buf_linef(&b, 1,
                 "// matrix instructions: %lldx%lld wavefronts of %lldx%lld MFMA 16x16x16 tiles, "
                 "k step %lld",
                 (long long)mm->wgm, (long long)mm->wgn, (long long)mm->wm, (long long)mm->wn,
                 (long long)mm->ks);
    rt_buf_linef(&b, 1, "__shared__ %s rt_As[%lld] __attribute__((aligned(16)));", ty,
                 (long long)(T1m * ld));
    rt_buf_linef(&b, 1, "__shared__ %s rt_Bs[%lld] __attribute__((aligned(16)));", ty,
                 (long long)(T1n * ld));
    rt_buf_linef(&b, 1, "int tid = threadIdx.x, wave = tid / %lld, lane = tid %% %lld;",
                 (long long)wave, (long long)wave);
    rt_buf_linef(&b, 1, "int wy = wave / %lld, wx = wave %% %lld;", (long long)mm->wgn,
                 (long long)mm->wgn);
    rt_buf_linef(&b, 1,
                 "int m0 = (int)(blockIdx.x / %lld) * %lld, n0 = (int)(blockIdx.x %% %lld) * %lld;",
                 (long long)nbn, (long long)T1m, (long long)nbn, (long long)T1n);
    rt_buf_linef(&b, 1,
                 "const int rt_fr = lane %% %d, rt_fk = (int)((0x%08xu >> ((lane / %d) * 8)) & "
                 "0xffu);",
                 RT_GPU_MFMA_ROWS, rt_gm_pack(rt_gpu_mfma_ab_k, 4, 8), RT_GPU_MFMA_ROWS);
    rt_buf_linef(&b, 1, "rt_v4f acc[%lld][%lld];", (long long)fm, (long long)fn);
    rt_buf_linef(&b, 1, "#pragma unroll");
    rt_buf_linef(&b, 1, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(&b, 2, "#pragma unroll");
    rt_buf_linef(&b, 2, "for (int j = 0; j < %lld; ++j)", (long long)fn);
    rt_buf_linef(&b, 3, "acc[i][j] = rt_v4f{0.0f, 0.0f, 0.0f, 0.0f};");
    rt_buf_linef(&b, 1, "for (int k0 = 0; k0 < %lld; k0 += %lld) {", (long long)mm->K,
                 (long long)mm->ks);
    rt_gm_copy_tile(&b, &ca, mm->full, pl->threads, false, 2);
    if (bt_vec)
        rt_gm_mfma_copy_bt(&b, names[1], ty, mm->ks, T1n, sbk, ld, pl->threads);
    else
        rt_gm_copy_tile(&b, &cb, mm->full, pl->threads, false, 2);
    rt_buf_linef(&b, 2, "__syncthreads();");
    rt_gm_mfma_compute(&b, mm, bf, ld);
    rt_buf_linef(&b, 2, "__syncthreads();");
    rt_buf_linef(&b, 1, "}");
    rt_gm_mfma_store(&b, mm, names[2]);
    if (b.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    *out = b.data;
    return RT_OK;
}
