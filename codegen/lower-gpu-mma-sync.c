// lower-gpu-mma-sync.c: the mma.sync form of a matrix-instruction GEMM phase (rt_gpu_mma, inst
// RT_GPU_MMA_SYNC; lower-gpu-mma.c prints the tile copies and the staged k loop around it).
// Full tiles only, A's shared tile T1m x ks (rows m), B's ks x T1n (rows n-major), rows padded
// by RT_GPU_MMA_PAD 16-bit elements, which keeps every ldmatrix conflict-free (a row stride of an
// odd count of 16 bytes: rt_gpu_mma_ldsm_ways prices it). Warp (wy, wx) owns a wm x wn warp
// tile: (wm / 16) x (wn / 8) m16n8 accumulators of 4 floats per lane. Per 16 of the k step it
// loads A's m16k16 fragment of each m16 tile with one ldmatrix.x4 and B's k16n16 fragments of
// each pair of n8 tiles with one ldmatrix.x4.trans, then issues
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 on each pair. Which row each
// lane addresses, which register each 8x8 matrix lands in, and which C element each
// accumulator register holds come from perfmodel/gpu-mma.c's tables (rt_gpu_mma_ldsm_a / _b,
// rt_gpu_mma_acc_row / _col), packed into 32-bit constants the kernel indexes by lane once;
// tests/unit/test-gpu-mma-map.c checks those tables against the PTX ISA's fragment layouts and
// tests/unit/test-gpu-mma-host.sh runs the emitted kernel against wmma-host.hpp's ISA model of
// ldmatrix and mma.sync. The store writes each lane's two adjacent floats of a row with one
// 64-bit store.
#include "lower-gpu-mma.h"

#include <string.h>

// The device helpers, once per file (emit-gpu.c). RT_MMA_HOST: the host stand-in supplies its
// own (tests/unit/wmma-host.hpp).
const char rt_gpu_mma_sync_prelude[] =
    "#ifndef RT_MMA_HOST\n"
    "__device__ __forceinline__ void rt_ldsm_x4(unsigned &r0, unsigned &r1, unsigned &r2,\n"
    "                                           unsigned &r3, const void *p) {\n"
    "    unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n\"\n"
    "                 : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"r\"(s));\n"
    "}\n"
    "__device__ __forceinline__ void rt_ldsm_x4_trans(unsigned &r0, unsigned &r1, unsigned &r2,\n"
    "                                                 unsigned &r3, const void *p) {\n"
    "    unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
    "[%4];\\n\"\n"
    "                 : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"r\"(s));\n"
    "}\n"
    "__device__ __forceinline__ void rt_mma_16816_f16(float *d, const unsigned *a, unsigned b0,\n"
    "                                                 unsigned b1) {\n"
    "    asm(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, \"\n"
    "        \"{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n\"\n"
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "__device__ __forceinline__ void rt_mma_16816_bf16(float *d, const unsigned *a, unsigned b0,\n"
    "                                                  unsigned b1) {\n"
    "    asm(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, \"\n"
    "        \"{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n\"\n"
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "#endif\n";

// Lane offset into a shared tile of row length ld: the row and column map's ldmatrix.x4 has
// lane `lane` address (rt_gpu_mma_ldsm_lane), as the kernel computes it.
static void rt_gm_lane_off(rt_buf *b, const char *name, const rt_gpu_mma_ldsm_map *map,
                           int64_t ld) {
    rt_buf_linef(b, 1,
                 "const int %s = ((lane & 7) + (int)((0x%08xu >> ((lane >> 3) * 8)) & 0xffu)) * "
                 "%lld + (int)((0x%08xu >> ((lane >> 3) * 8)) & 0xffu);",
                 name, rt_gm_pack(map->row0, 4, 8), (long long)ld, rt_gm_pack(map->col0, 4, 8));
}

void rt_gm_sync_decls(rt_buf *b, const rt_gpu_mma *mm, int64_t lda, int64_t ldb) {
    int64_t fm = mm->wm / 16, fn8 = mm->wn / 8;
    rt_gm_lane_off(b, "rt_la", &rt_gpu_mma_ldsm_a, lda);
    rt_gm_lane_off(b, "rt_lb", &rt_gpu_mma_ldsm_b, ldb);
    rt_buf_linef(b, 1, "float acc[%lld][%lld][4];", (long long)fm, (long long)fn8);
    rt_buf_linef(b, 1, "#pragma unroll");
    rt_buf_linef(b, 1, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int j = 0; j < %lld; ++j)", (long long)fn8);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int q = 0; q < 4; ++q)");
    rt_buf_linef(b, 4, "acc[i][j][q] = 0.0f;");
}

// One ldmatrix.x4 into the registers map routes matrix j to: A's fa[i][reg], B's
// fb[2 * p + ntile][reg].
static void rt_gm_ldsm(rt_buf *b, const rt_gpu_mma_ldsm_map *map, const char *dst,
                       const char *addr) {
    const char *r[4];
    for (int32_t j = 0; j < 4; j++)
        r[j] = map->trans ? rt_arena_printf(b->arena, "%s[2 * p + %d][%d]", dst, map->ntile[j],
                                            map->reg[j])
                          : rt_arena_printf(b->arena, "%s[i][%d]", dst, map->reg[j]);
    rt_buf_linef(b, 4, "rt_ldsm_x4%s(%s, %s, %s, %s, %s);", map->trans ? "_trans" : "", r[0], r[1],
                 r[2], r[3], addr);
}

void rt_gm_sync_compute(rt_buf *b, const rt_gpu_mma *mm, const char *ty, int64_t lda, int64_t ldb,
                        const char *aoff, const char *boff) {
    int64_t fm = mm->wm / 16, fn8 = mm->wn / 8;
    bool bf = strcmp(ty, "__nv_bfloat16") == 0;
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int kk = 0; kk < %lld; kk += 16) {", (long long)mm->ks);
    rt_buf_linef(b, 3, "unsigned fa[%lld][4], fb[%lld][2];", (long long)fm, (long long)fn8);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_gm_ldsm(b, &rt_gpu_mma_ldsm_a, "fa",
               rt_arena_printf(b->arena, "&rt_As[%s + (wy * %lld + i * 16) * %lld + kk + rt_la]",
                               aoff, (long long)mm->wm, (long long)lda));
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int p = 0; p < %lld; ++p)", (long long)(fn8 / 2));
    rt_gm_ldsm(b, &rt_gpu_mma_ldsm_b, "fb",
               rt_arena_printf(b->arena, "&rt_Bs[%s + kk * %lld + wx * %lld + p * 16 + rt_lb]",
                               boff, (long long)ldb, (long long)mm->wn));
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int i = 0; i < %lld; ++i)", (long long)fm);
    rt_buf_linef(b, 4, "#pragma unroll");
    rt_buf_linef(b, 4, "for (int j = 0; j < %lld; ++j)", (long long)fn8);
    rt_buf_linef(b, 5, "rt_mma_16816_%s(acc[i][j], fa[i], fb[j][0], fb[j][1]);",
                 bf ? "bf16" : "f16");
    rt_buf_linef(b, 2, "}");
}

void rt_gm_sync_store(rt_buf *b, const rt_gpu_mma *mm, const char *cname) {
    int64_t fm = mm->wm / 16, fn8 = mm->wn / 8;
    rt_buf_linef(b, 1,
                 "const int rt_sr = (int)((0x%08xu >> ((lane >> 2) * 4)) & 15u), "
                 "rt_sc = (int)((0x%04xu >> ((lane & 3) * 4)) & 15u);",
                 rt_gm_pack(rt_gpu_mma_acc_row, 8, 4), rt_gm_pack(rt_gpu_mma_acc_col, 4, 4));
    rt_buf_linef(b, 1, "#pragma unroll");
    rt_buf_linef(b, 1, "for (int i = 0; i < %lld; ++i) {", (long long)fm);
    rt_buf_linef(b, 2, "#pragma unroll");
    rt_buf_linef(b, 2, "for (int j = 0; j < %lld; ++j) {", (long long)fn8);
    rt_buf_linef(b, 3, "#pragma unroll");
    rt_buf_linef(b, 3, "for (int h = 0; h < 2; ++h) {");
    rt_buf_linef(b, 4,
                 "int gm = m0 + wy * %lld + i * 16 + rt_sr + 8 * h, gn = n0 + wx * %lld + j * 8 + "
                 "rt_sc;",
                 (long long)mm->wm, (long long)mm->wn);
    rt_buf_linef(b, 4,
                 "*(float2 *)&%s[(long long)gm * %lldLL + gn] = make_float2(acc[i][j][2 * h], "
                 "acc[i][j][2 * h + 1]);",
                 cname, (long long)mm->N);
    rt_buf_linef(b, 3, "}");
    rt_buf_linef(b, 2, "}");
    rt_buf_linef(b, 1, "}");
}
