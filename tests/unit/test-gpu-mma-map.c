// test-gpu-mma-map.c: the mma.sync path's lane math (perfmodel/gpu-mma.c's tables, which
// codegen/lower-gpu-mma-sync.c prints into the kernel) against the PTX ISA's fragment layouts,
// written here from the ISA independently of those tables (issue 22 item 4), no GPU needed:
//   - ldmatrix .x4 (PTX ISA, "ldmatrix"): lanes 8j .. 8j + 7 give the addresses of rows 0 .. 7
//     of 8x8 matrix j; lane t receives in register j the two 16-bit elements of row t / 4,
//     columns 2 (t % 4), 2 (t % 4) + 1 (lower column in the lower half); with .trans those of
//     column t / 4, rows 2 (t % 4), 2 (t % 4) + 1;
//   - mma.m16n8k16 with 16-bit floating-point A and B (PTX ISA, "Matrix Fragments for
//     mma.m16n8k16 with floating point type"), groupID g = lane >> 2, t = lane % 4: A's a_i
//     (i = 0 .. 7, register i / 2) is A(g + 8 for a2 a3 a6 a7, 2 t + (i & 1) + 8 for a4 .. a7);
//     B's b_i (i = 0 .. 3) is B(2 t + (i & 1) + 8 for b2 b3, g); C's c_i is
//     C(g + 8 for c2 c3, 2 t + (i & 1)).
// Checked: the registers each lane's ldmatrix.x4 (A) and ldmatrix.x4.trans (B), routed as the
// tables say, are exactly the operand registers the ISA wants; a 32 x 16 x 32 GEMM computed
// through these simulated instructions from padded shared tiles (the kernel's row lengths) and
// stored through the accumulator table equals the exact product, every element written once;
// the padded rows make the ldmatrix conflict-free and unpadded ones do not
// (rt_gpu_mma_ldsm_ways). A change to any table entry fails it.
#include "test.h"

#include "gpu-plan.h"

#include <stdint.h>
#include <string.h>

// What lane `lane` receives in register j of an ldmatrix.x4 whose lanes give row addresses
// rows[0 .. 31] (indices into sm): ISA semantics.
static uint32_t isa_ldsm(const uint16_t *sm, const int64_t *rows, int32_t lane, int32_t j,
                         bool trans) {
    uint16_t lo, hi;
    if (!trans) {
        lo = sm[rows[8 * j + lane / 4] + 2 * (lane % 4)];
        hi = sm[rows[8 * j + lane / 4] + 2 * (lane % 4) + 1];
    } else {
        lo = sm[rows[8 * j + 2 * (lane % 4)] + lane / 4];
        hi = sm[rows[8 * j + 2 * (lane % 4) + 1] + lane / 4];
    }
    return (uint32_t)lo | (uint32_t)hi << 16;
}

// The operand registers the ISA wants: A (16x16 at a[r * lda + c]) register q of lane l; B
// (16 x 8, k rows, at b[k * ldb + n]) register q of lane l.
static uint32_t isa_a_reg(const uint16_t *a, int64_t lda, int32_t l, int32_t q) {
    int32_t g = l >> 2, t = l % 4;
    uint16_t h[2];
    for (int32_t e = 0; e < 2; e++) {
        int32_t i = 2 * q + e;
        int32_t row = g + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0);
        int32_t col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        h[e] = a[row * lda + col];
    }
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}
static uint32_t isa_b_reg(const uint16_t *b, int64_t ldb, int32_t l, int32_t q) {
    int32_t g = l >> 2, t = l % 4;
    uint16_t h[2];
    for (int32_t e = 0; e < 2; e++) {
        int32_t i = 2 * q + e;
        int32_t k = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
        h[e] = b[k * ldb + g];
    }
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

// The ldmatrix.x4 of map over a tile at sm[base] of row length ld, its matrices' registers
// routed as map says: out[lane][ntile][reg].
static void map_ldsm(const rt_gpu_mma_ldsm_map *map, const uint16_t *sm, int64_t base, int64_t ld,
                     uint32_t out[32][2][4]) {
    int64_t rows[32];
    for (int32_t l = 0; l < 32; l++) {
        int32_t r, c;
        rt_gpu_mma_ldsm_lane(map, l, &r, &c);
        rows[l] = base + r * ld + c;
        RT_EXPECT(rows[l] % 8 == 0); // 16-byte aligned rows
    }
    memset(out, 0xff, sizeof(uint32_t) * 32 * 2 * 4);
    for (int32_t l = 0; l < 32; l++)
        for (int32_t j = 0; j < 4; j++)
            out[l][map->ntile[j]][map->reg[j]] = isa_ldsm(sm, rows, l, j, map->trans);
}

// Small integers as f16 bits (exact): |v| < 2048.
static uint16_t f16_of(int32_t v) {
    if (v == 0)
        return 0;
    uint16_t s = v < 0 ? 0x8000 : 0;
    uint32_t a = (uint32_t)(v < 0 ? -v : v);
    int32_t e = 31 - __builtin_clz(a);
    return (uint16_t)(s | (uint32_t)(e + 15) << 10 | ((a << (10 - e)) & 0x3ffu));
}
static double f16_val(uint16_t h) {
    double m = 1 + (h & 0x3ff) / 1024.0;
    int32_t e = ((h >> 10) & 0x1f) - 15;
    return ((h >> 10) & 0x1f) == 0 ? 0 : ((h & 0x8000) ? -1 : 1) * ldexp(m, e);
}

// mma.m16n8k16 .row.col on the lanes' registers (ISA layouts): d[lane][i] += sum_k A B.
static void isa_mma(const uint32_t a[32][4], const uint32_t b[32][2], double d[32][4]) {
    double A[16][16], B[16][8];
    for (int32_t l = 0; l < 32; l++) {
        int32_t g = l >> 2, t = l % 4;
        for (int32_t i = 0; i < 8; i++) {
            uint16_t h = (uint16_t)(a[l][i / 2] >> (16 * (i % 2)));
            A[g + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0)]
             [2 * t + (i & 1) + (i >= 4 ? 8 : 0)] = f16_val(h);
        }
        for (int32_t i = 0; i < 4; i++) {
            uint16_t h = (uint16_t)(b[l][i / 2] >> (16 * (i % 2)));
            B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = f16_val(h);
        }
    }
    for (int32_t l = 0; l < 32; l++)
        for (int32_t i = 0; i < 4; i++) {
            int32_t g = l >> 2, t = l % 4, r = g + (i >= 2 ? 8 : 0), c = 2 * t + (i & 1);
            for (int32_t k = 0; k < 16; k++)
                d[l][i] += A[r][k] * B[k][c];
        }
}

#define TM  32 // warp tile rows (two m16 tiles)
#define TN  16 // warp tile columns (one ldmatrix.x4.trans: two n8 tiles)
#define TK  32 // k step (two k16)
#define LDA (TK + RT_GPU_MMA_PAD)
#define LDB (TN + RT_GPU_MMA_PAD)

// The registers of every ldmatrix are the ISA's operand registers, for every lane.
static void test_operands(const uint16_t *As, const uint16_t *Bs) {
    uint32_t got[32][2][4];
    int32_t bad = 0;
    map_ldsm(&rt_gpu_mma_ldsm_a, As, 16 * LDA + 16, LDA, got); // m16 tile 1, k16 step 1
    for (int32_t l = 0; l < 32; l++)
        for (int32_t q = 0; q < 4; q++)
            bad += got[l][0][q] != isa_a_reg(As + 16 * LDA + 16, LDA, l, q);
    map_ldsm(&rt_gpu_mma_ldsm_b, Bs, 16 * LDB, LDB, got); // k16 step 1, n8 tiles 0 and 1
    for (int32_t l = 0; l < 32; l++)
        for (int32_t nt = 0; nt < 2; nt++)
            for (int32_t q = 0; q < 2; q++)
                bad += got[l][nt][q] != isa_b_reg(Bs + 16 * LDB + nt * 8, LDB, l, q);
    RT_EXPECT_EQ(bad, 0);
}

// C = A B through the simulated instructions, stored through the accumulator table.
static void test_gemm(const uint16_t *As, const uint16_t *Bs, const int32_t *Ai,
                      const int32_t *Bi) {
    double d[TM / 16][TN / 8][32][4];
    memset(d, 0, sizeof d);
    for (int32_t kk = 0; kk < TK; kk += 16) {
        uint32_t fa[TM / 16][32][2][4], fb[32][2][4];
        for (int32_t i = 0; i < TM / 16; i++)
            map_ldsm(&rt_gpu_mma_ldsm_a, As, (i * 16) * LDA + kk, LDA, fa[i]);
        map_ldsm(&rt_gpu_mma_ldsm_b, Bs, kk * LDB, LDB, fb);
        for (int32_t i = 0; i < TM / 16; i++)
            for (int32_t j = 0; j < TN / 8; j++) {
                uint32_t a[32][4], b[32][2];
                for (int32_t l = 0; l < 32; l++) {
                    memcpy(a[l], fa[i][l][0], sizeof a[l]);
                    b[l][0] = fb[l][j][0];
                    b[l][1] = fb[l][j][1];
                }
                isa_mma(a, b, d[i][j]);
            }
    }
    double C[TM][TN];
    int32_t written[TM][TN];
    memset(written, 0, sizeof written);
    for (int32_t i = 0; i < TM / 16; i++)
        for (int32_t j = 0; j < TN / 8; j++)
            for (int32_t l = 0; l < 32; l++)
                for (int32_t q = 0; q < 4; q++) {
                    int32_t r, c;
                    rt_gpu_mma_acc_lane(l, q, &r, &c);
                    RT_EXPECT(r >= 0 && r < 16 && c >= 0 && c < 8);
                    if (r < 0 || r >= 16 || c < 0 || c >= 8)
                        continue;
                    C[i * 16 + r][j * 8 + c] = d[i][j][l][q];
                    written[i * 16 + r][j * 8 + c]++;
                }
    int32_t bad = 0;
    for (int32_t m = 0; m < TM; m++)
        for (int32_t n = 0; n < TN; n++) {
            double s = 0;
            for (int32_t k = 0; k < TK; k++)
                s += (double)Ai[m * TK + k] * Bi[k * TN + n];
            if (written[m][n] != 1 || C[m][n] != s) {
                if (bad++ < 3)
                    fprintf(stderr, "C[%d][%d] = %g (written %d), expected %g\n", m, n, C[m][n],
                            written[m][n], s);
            }
        }
    RT_EXPECT_EQ(bad, 0);
}

// Padded rows (an odd count of 16 bytes) serve each 8-lane phase in one wavefront; unpadded
// rows of 32 or 64 bytes put two or four rows on the same banks.
static void test_ways(void) {
    RT_EXPECT_NEAR(rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_a, 16 + RT_GPU_MMA_PAD, 32), 1.0, 1e-12);
    RT_EXPECT_NEAR(rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_a, 32 + RT_GPU_MMA_PAD, 32), 1.0, 1e-12);
    RT_EXPECT_NEAR(rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_b, 256 + RT_GPU_MMA_PAD, 32), 1.0, 1e-12);
    RT_EXPECT_NEAR(rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_a, 16, 32), 2.0, 1e-12);
    RT_EXPECT_NEAR(rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_a, 32, 32), 4.0, 1e-12);
    RT_EXPECT_NEAR(rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_b, 128, 32), 8.0, 1e-12);
}

int main(void) {
    static uint16_t As[TM * LDA], Bs[TK * LDB];
    static int32_t Ai[TM * TK], Bi[TK * TN];
    uint32_t x = 12345;
    for (int32_t i = 0; i < TM * TK; i++) {
        x = x * 1103515245u + 12345u;
        Ai[i] = (int32_t)((x >> 16) % 15) - 7;
    }
    for (int32_t i = 0; i < TK * TN; i++) {
        x = x * 1103515245u + 12345u;
        Bi[i] = (int32_t)((x >> 16) % 15) - 7;
    }
    for (int32_t i = 0; i < TM * LDA; i++) // the pad poisoned: 0x7e00 is a NaN
        As[i] = (i % LDA) < TK ? f16_of(Ai[(i / LDA) * TK + i % LDA]) : 0x7e00;
    for (int32_t i = 0; i < TK * LDB; i++)
        Bs[i] = (i % LDB) < TN ? f16_of(Bi[(i / LDB) * TN + i % LDB]) : 0x7e00;
    test_operands(As, Bs);
    test_gemm(As, Bs, Ai, Bi);
    test_ways();
    return rt_test_finish("test-gpu-mma-map");
}
