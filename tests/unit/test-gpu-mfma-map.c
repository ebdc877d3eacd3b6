// test-gpu-mfma-map.c: the MFMA path's lane math (perfmodel/gpu-mma.c's tables, which
// codegen/lower-gpu-mfma.c prints into the kernel) against the operand layouts of
// v_mfma_f32_16x16x16f16 and v_mfma_f32_16x16x16bf16_1k, written here from the AMD CDNA 2 ISA
// (and AMD's matrix instruction calculator) independently of those tables (issue 22 item 4), no
// GPU needed. Wavefront of 64 lanes; each lane holds 4 16-bit elements of A and of B and 4 f32
// of the accumulator:
//   - A (16 x 16, rows m, columns k): A(i, k) is element k % 4 of lane i + 16 (k / 4);
//   - B (16 x 16, rows k, columns n): B(k, j) is element k % 4 of lane j + 16 (k / 4);
//   - C and D (16 x 16): D(i, j) is element i % 4 of lane j + 16 (i / 4).
// Checked: every lane element the tables address is the one the ISA wants, each of the 256
// elements of a tile exactly once; a 32 x 48 x 32 GEMM computed through a simulation of the
// instruction (ISA layout) from operands gathered from padded LDS tiles as the kernel gathers
// them (A rows m, B rows n, k along both; the kernel's row length) and stored through the
// accumulator table equals the exact product, every element written once; the devices that
// plan MFMA (gfx90a) and those that do not (gfx906, CUDA); the registers the price counts for a
// wavefront's accumulators. A change to any table entry fails it.
#include "test.h"

#include "gpu-plan.h"

#include <stdint.h>
#include <string.h>

#define TM 32
#define TN 48
#define TK 32
#define LD (TK + RT_GPU_MMA_PAD)

// The ISA's lane and element of A(i, k) (and of B(k, j) with j for i), and of D(i, j).
static void isa_ab(int32_t i, int32_t k, int32_t *lane, int32_t *elem) {
    *lane = i + 16 * (k / 4);
    *elem = k % 4;
}
static void isa_d(int32_t i, int32_t j, int32_t *lane, int32_t *elem) {
    *lane = j + 16 * (i / 4);
    *elem = i % 4;
}

static void test_tables(void) {
    int32_t seen_ab[16][16], seen_d[16][16];
    memset(seen_ab, 0, sizeof seen_ab);
    memset(seen_d, 0, sizeof seen_d);
    for (int32_t l = 0; l < 64; l++)
        for (int32_t v = 0; v < 4; v++) {
            int32_t r, k, lane, elem;
            rt_gpu_mfma_ab_lane(l, v, &r, &k);
            RT_EXPECT(r >= 0 && r < 16 && k >= 0 && k < 16);
            if (r < 0 || r >= 16 || k < 0 || k >= 16)
                continue;
            isa_ab(r, k, &lane, &elem);
            RT_EXPECT_EQ(lane, l);
            RT_EXPECT_EQ(elem, v);
            seen_ab[r][k]++;
            int32_t i, j;
            rt_gpu_mfma_acc_lane(l, v, &i, &j);
            RT_EXPECT(i >= 0 && i < 16 && j >= 0 && j < 16);
            if (i < 0 || i >= 16 || j < 0 || j >= 16)
                continue;
            isa_d(i, j, &lane, &elem);
            RT_EXPECT_EQ(lane, l);
            RT_EXPECT_EQ(elem, v);
            seen_d[i][j]++;
        }
    int32_t once = 0;
    for (int32_t r = 0; r < 16; r++)
        for (int32_t c = 0; c < 16; c++)
            once += seen_ab[r][c] == 1 && seen_d[r][c] == 1;
    RT_EXPECT_EQ(once, 256);
}

// The instruction as the ISA defines it: d[lane][e] += sum_k A(i, k) B(k, j) over the operands
// a[lane][e], b[lane][e] of the 64 lanes.
static void isa_mfma(const double a[64][4], const double b[64][4], double d[64][4]) {
    double r[64][4];
    for (int32_t i = 0; i < 16; i++)
        for (int32_t j = 0; j < 16; j++) {
            int32_t dl, de;
            isa_d(i, j, &dl, &de);
            double s = d[dl][de];
            for (int32_t k = 0; k < 16; k++) {
                int32_t al, ae, bl, be;
                isa_ab(i, k, &al, &ae);
                isa_ab(j, k, &bl, &be);
                s += a[al][ae] * b[bl][be];
            }
            r[dl][de] = s;
        }
    memcpy(d, r, sizeof r);
}

static void test_gemm(void) {
    static double As[TM * LD], Bs[TN * LD]; // A rows m, B rows n, k along both (the kernel's)
    static int32_t Ai[TM][TK], Bi[TK][TN];
    uint32_t x = 4242;
    for (int32_t m = 0; m < TM; m++)
        for (int32_t k = 0; k < TK; k++) {
            x = x * 1103515245u + 12345u;
            Ai[m][k] = (int32_t)((x >> 16) % 15) - 7;
        }
    for (int32_t k = 0; k < TK; k++)
        for (int32_t n = 0; n < TN; n++) {
            x = x * 1103515245u + 12345u;
            Bi[k][n] = (int32_t)((x >> 16) % 15) - 7;
        }
    for (int32_t i = 0; i < TM * LD; i++) // the pad poisoned
        As[i] = i % LD < TK ? Ai[i / LD][i % LD] : NAN;
    for (int32_t i = 0; i < TN * LD; i++)
        Bs[i] = i % LD < TK ? Bi[i % LD][i / LD] : NAN;
    static double d[TM / 16][TN / 16][64][4];
    memset(d, 0, sizeof d);
    for (int32_t kk = 0; kk < TK; kk += 16)
        for (int32_t i = 0; i < TM / 16; i++)
            for (int32_t j = 0; j < TN / 16; j++) {
                double a[64][4], b[64][4];
                for (int32_t l = 0; l < 64; l++)
                    for (int32_t v = 0; v < 4; v++) {
                        int32_t r, k;
                        rt_gpu_mfma_ab_lane(l, v, &r, &k);
                        a[l][v] = As[(i * 16 + r) * LD + kk + k];
                        b[l][v] = Bs[(j * 16 + r) * LD + kk + k];
                    }
                isa_mfma(a, b, d[i][j]);
            }
    double C[TM][TN];
    int32_t written[TM][TN];
    memset(written, 0, sizeof written);
    for (int32_t i = 0; i < TM / 16; i++)
        for (int32_t j = 0; j < TN / 16; j++)
            for (int32_t l = 0; l < 64; l++)
                for (int32_t v = 0; v < 4; v++) {
                    int32_t r, c;
                    rt_gpu_mfma_acc_lane(l, v, &r, &c);
                    if (r < 0 || r >= 16 || c < 0 || c >= 16)
                        continue;
                    C[i * 16 + r][j * 16 + c] = d[i][j][l][v];
                    written[i * 16 + r][j * 16 + c]++;
                }
    int32_t bad = 0;
    for (int32_t m = 0; m < TM; m++)
        for (int32_t n = 0; n < TN; n++) {
            double s = 0;
            for (int32_t k = 0; k < TK; k++)
                s += (double)Ai[m][k] * Bi[k][n];
            if (written[m][n] != 1 || C[m][n] != s) {
                if (bad++ < 3)
                    fprintf(stderr, "C[%d][%d] = %g (written %d), expected %g\n", m, n, C[m][n],
                            written[m][n], s);
            }
        }
    RT_EXPECT_EQ(bad, 0);
}

// MFMA on gfx90a only; WMMA and mma.sync on CUDA sm_80+; none on gfx906.
static void test_devices(void) {
    const char *paths[] = {"devices/mi250x.ini", "devices/mi50.ini", "devices/a100.ini"};
    const bool want[] = {true, false, true};
    const rt_gpu_mma_inst first_want[] = {RT_GPU_MMA_MFMA, 0, RT_GPU_MMA_WMMA};
    const rt_gpu_mma_inst last_want[] = {RT_GPU_MMA_MFMA, 0, RT_GPU_MMA_SYNC};
    for (int32_t i = 0; i < 3; i++) {
        rt_device dev;
        rt_err err = {0};
        RT_EXPECT_EQ(rt_hal_load_device(paths[i], &dev, &err), RT_OK);
        rt_gpu_mma_inst first = RT_GPU_MMA_INST_COUNT, last = RT_GPU_MMA_INST_COUNT;
        RT_EXPECT_EQ(rt_gpu_mma_insts(&dev, &first, &last), want[i]);
        if (want[i]) {
            RT_EXPECT_EQ(first, first_want[i]);
            RT_EXPECT_EQ(last, last_want[i]);
        }
        if (i != 0)
            continue;
        // 4x4 wavefronts of 64x64 tiles: 16 accumulators of 4 registers and 4 + 4 operands of
        // 2 per lane, besides the nominal 40
        rt_gpu_mma mm = {.on = true,
                         .inst = RT_GPU_MMA_MFMA,
                         .wgm = 4,
                         .wgn = 4,
                         .wm = 64,
                         .wn = 64,
                         .ks = 32,
                         .M = 4096,
                         .N = 4096,
                         .K = 4096,
                         .full = true,
                         .vec_a = true,
                         .vec_b = true,
                         .stages = 1};
        RT_EXPECT_EQ(rt_gpu_mma_wave(&mm), 64);
        mm.smem_bytes = rt_gpu_mma_smem_bytes(&mm, 256, 256, 1024);
        RT_EXPECT_EQ(mm.smem_bytes, (256 + 256) * (32 + RT_GPU_MMA_PAD) * 2);
        rt_gpu_mma_cost c;
        RT_EXPECT(rt_gpu_mma_price(&dev, &mm, 256, 256, 1024, 256, dev.mma_gflops[RT_DTYPE_F16],
                                   dev.level[1].capacity_bytes, &c));
        RT_EXPECT_EQ(c.regs, 4 * 16 + 2 * 8 + 40);
        // the matrix instructions at the INI's peak: 2 M N K over 191.5 TFLOP/s at the least
        double flops = 2.0 * 4096 * 4096 * 4096;
        RT_EXPECT(c.total_ns >= flops / dev.mma_gflops[RT_DTYPE_F16]);
        fprintf(stderr,
                "mi250x 4096^3, 256x256 over 4x4 waves of 64x64, k 32: %.0f us (%d resident)\n",
                c.total_ns / 1e3, (int)c.resident);
    }
}

int main(void) {
    test_tables();
    test_gemm();
    test_devices();
    return rt_test_finish("test-gpu-mfma-map");
}
