// rtgen 0.1.0: qkt, candidate 0
// spec: examples/qkt.spec
// sizes: B=8 H=2 D=16
// device: x86-64 AVX-512, 2 cores (Sapphire Rapids class) (devices/x86-avx512.ini, cpu sapphirerapids)
// plan: gemm M=17 N=17 K=16 batch=16 micro-kernel=12x16 lanes=16 kc=16 mc=24 nc=32 ng=1 items=8 per-entry row-tails warm
// rTile L0 dram   [b=8, h=2, i=17, j=17, d=16] footprint 0 B
// rTile L1 l3     [b=1, h=2, i=12, j=1, d=16] footprint 1760 B
// rTile L2 l2     [b=1, h=2, i=12, j=1, d=16] footprint 1760 B
// rTile L3 l1     [b=1, h=2, i=12, j=1, d=16] footprint 1760 B
// rTile L4 reg    [b=1, h=2, i=12, j=1, d=8] footprint 928 B
// predicted: 1.292 us (bottleneck compute), 7.258e-05 GFLOP
// phase p0: statement 0: packed GEMM per entry of 16 (each at its own extents, at most 17x17x16), work units of mc=24 rows split by cost over 8 items, nc=32 kc=16, micro-kernel 12x16, 8 work items
// Build: cc -O3 -march=native -fopenmp -shared -fPIC -o kernel.so kernel.c -lm
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int64_t rt_floordiv(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t rt_floormod(int64_t a, int64_t b) {
    return a - rt_floordiv(a, b) * b;
}
static inline int64_t rt_imin(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t rt_imax(int64_t a, int64_t b) {
    return a > b ? a : b;
}

// Buffers (args[i]): scratch is per thread (3584 bytes)
//   args[1] i32 t_len
//   args[2] f32 t_Q
//   args[3] i64 t_Q_start1 (ragged starts)
//   args[4] f32 t_K
//   args[5] i64 t_K_start1 (ragged starts)
//   args[6] f32 t_S
//   args[7] i64 t_S_start2 (ragged starts)
//   args[8] i64 t_S_start3 (ragged starts)

// phase p0: statement 0: packed GEMM per entry of 16 (each at its own extents, at most 17x17x16), work units of mc=24 rows split by cost over 8 items, nc=32 kc=16, micro-kernel 12x16 (8 work items)
static void rt_qkt_c0_p0_body(float *restrict scratch, const int32_t *restrict t_len, const float *restrict t_Q, const int64_t *restrict t_Q_start1, const float *restrict t_K, const int64_t *restrict t_K_start1, float *restrict t_S, const int64_t *restrict t_S_start2, const int64_t *restrict t_S_start3, int64_t lo, int64_t hi) {
    int64_t item;
    int64_t w_total;
    int64_t entry;
    int64_t h;
    int64_t b;
    int64_t m_len;
    int64_t n_len;
    int64_t e_cost;
    int64_t w_lo;
    int64_t w_hi;
    int64_t e_cost0;
    int64_t entry_1;
    int64_t h_1;
    int64_t b_1;
    int64_t m_len_1;
    int64_t n_len_1;
    int64_t e_cost_1;
    int64_t run_cost;
    int64_t e_cost1;
    int64_t entry_2;
    int64_t h_2;
    int64_t b_2;
    int64_t m_len_2;
    int64_t n_len_2;
    int64_t e_cost_2;
    int64_t base;
    int64_t base_1;
    int64_t base_2;
    int64_t ld;
    int64_t u_cost;
    int64_t rb_lo;
    int64_t rb_hi;
    int64_t pk;
    int64_t p0;
    int64_t kcur;
    int64_t sb;
    int64_t s0;
    int64_t wcur;
    int64_t bpanel;
    int64_t bsub;
    int64_t bk;
    int64_t br;
    int64_t rb;
    int64_t i0;
    int64_t mcur;
    int64_t jb;
    int64_t j0;
    int64_t ncur;
    int64_t ir;
    int64_t pf_line;
    int64_t jr;
    (void)scratch;
    for (item = lo; item < hi; item++) {
        w_total = 0;
        for (entry = 0; entry < 8; entry++) {
            h = rt_floormod((entry * 2), 2);
            b = rt_floordiv((entry * 2), 2);
            m_len = ((int64_t)t_len[b]);
            n_len = ((int64_t)t_len[b]);
            e_cost = ((m_len * ((n_len + 1) * 17)) + (rt_floordiv((m_len + 23), 24) * (((n_len + 1) * 17) + 64)));
            w_total = (w_total + (e_cost * 2));
        }
        w_lo = rt_floordiv(((item * w_total) + 7), 8);
        w_hi = rt_floordiv((((item + 1) * w_total) + 7), 8);
        e_cost0 = 0;
        for (entry_1 = 0; entry_1 < 8; entry_1++) {
            h_1 = rt_floormod((entry_1 * 2), 2);
            b_1 = rt_floordiv((entry_1 * 2), 2);
            m_len_1 = ((int64_t)t_len[b_1]);
            n_len_1 = ((int64_t)t_len[b_1]);
            e_cost_1 = ((m_len_1 * ((n_len_1 + 1) * 17)) + (rt_floordiv((m_len_1 + 23), 24) * (((n_len_1 + 1) * 17) + 64)));
            run_cost = (e_cost_1 * 2);
            if ((int64_t)((int64_t)(e_cost0 < w_hi) && (int64_t)((e_cost0 + run_cost) > w_lo))) {
                e_cost1 = e_cost0;
                for (entry_2 = 0; entry_2 < 2; entry_2++) {
                    h_2 = rt_floormod(((entry_1 * 2) + entry_2), 2);
                    b_2 = rt_floordiv(((entry_1 * 2) + entry_2), 2);
                    m_len_2 = ((int64_t)t_len[b_2]);
                    n_len_2 = ((int64_t)t_len[b_2]);
                    e_cost_2 = ((m_len_2 * ((n_len_2 + 1) * 17)) + (rt_floordiv((m_len_2 + 23), 24) * (((n_len_2 + 1) * 17) + 64)));
                    if ((int64_t)((int64_t)(e_cost1 < w_hi) && (int64_t)((e_cost1 + e_cost_2) > w_lo))) {
                        base = (((t_Q_start1[b_2] * 2) + h_2) * 16);
                        base_1 = (((t_K_start1[b_2] * 2) + h_2) * 16);
                        base_2 = t_S_start3[t_S_start2[((b_2 * 2) + h_2)]];
                        ld = ((int64_t)t_len[b_2]);
                        u_cost = ((24 * ((n_len_2 + 1) * 17)) + (((n_len_2 + 1) * 17) + 64));
                        rb_lo = rt_imin(rt_floordiv((m_len_2 + 23), 24), rt_floordiv(((rt_imax(0, (w_lo - e_cost1)) + u_cost) - 1), u_cost));
                        rb_hi = rt_imin(rt_floordiv((m_len_2 + 23), 24), rt_floordiv(((rt_imax(0, (w_hi - e_cost1)) + u_cost) - 1), u_cost));
                        if ((int64_t)(rb_lo < rb_hi)) {
                            for (pk = 0; pk < 1; pk++) {
                                p0 = (pk * 16);
                                kcur = rt_imin(16, (16 - p0));
                                for (sb = 0; sb < rt_floordiv((n_len_2 + 31), 32); sb++) {
                                    s0 = (sb * 32);
                                    wcur = rt_imin(32, (n_len_2 - s0));
                                    for (bpanel = 0; bpanel < rt_floordiv((wcur + 15), 16); bpanel++) {
                                        for (bsub = 0; bsub < 1; bsub++) {
                                            // copy: B rows of the entry (k contiguous) -> the nr-wide k-major panel, 16 x 16 transposes
                                            for (bk = 0; bk < kcur; bk++) {
                                                #pragma GCC ivdep
                                                for (br = 0; br < 16; br++) {
                                                    if ((int64_t)(br < rt_imin(16, rt_imax(0, (wcur - ((bpanel * 16) + (bsub * 16))))))) {
                                                        scratch[((384 + (((bpanel * kcur) * 16) + (bsub * 16))) + ((bk * 16) + br))] = (t_K[(((base_1 + ((s0 * 32) + p0)) + (((bpanel * 16) + (bsub * 16)) * 32)) + ((br * 32) + bk))] * 0.125f);
                                                    } else {
                                                        scratch[((384 + (((bpanel * kcur) * 16) + (bsub * 16))) + ((bk * 16) + br))] = 0.0f;
                                                    }
                                                }
                                            }
                                        }
                                    }
                                    for (rb = rb_lo; rb < rb_hi; rb++) {
                                        i0 = (rb * 24);
                                        mcur = rt_imin(24, (m_len_2 - i0));
                                        for (jb = 0; jb < rt_floordiv((wcur + 31), 32); jb++) {
                                            j0 = (s0 + (jb * 32));
                                            ncur = rt_imin(32, (wcur - (jb * 32)));
                                            for (ir = 0; ir < rt_floordiv((mcur + 11), 12); ir++) {
                                                if ((int64_t)(wcur > 32)) {
                                                    for (pf_line = 0; pf_line < (rt_floordiv((rt_imax(0, rt_imin(rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12))), ((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) - (ir * rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12))))))) + 15), 16) + rt_imin(rt_imax(0, rt_imin(rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12))), ((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) - (ir * rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12))))))), 1)); pf_line++) {
                                                        __builtin_prefetch(&scratch[(384 + ((rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32)) * kcur) + ((ir * rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12)))) + rt_imin((pf_line * 16), (rt_imax(0, rt_imin(rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12))), ((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) - (ir * rt_floordiv((((rt_imin(32, (rt_floordiv(((wcur - rt_floormod(((jb * 32) + 32), (rt_floordiv((wcur + 31), 32) * 32))) + 15), 16) * 16)) * kcur) + rt_floordiv((mcur + 11), 12)) - 1), rt_imax(1, rt_floordiv((mcur + 11), 12))))))) - 1)))))], 0, 2);
                                                    }
                                                }
                                                for (jr = 0; jr < rt_floordiv((ncur + 15), 16); jr++) {
                                                    { // micro-kernel 12x16: broadcast A, FMA with B rows, reduce over k
                                                        const float *ua = t_Q + (base + (((i0 + (ir * 12)) * 32) + p0));
                                                        const int64_t uma = rt_imin(12, (mcur - (ir * 12)));
                                                        const float *ub = scratch + (384 + (((jb * 32) + (jr * 16)) * kcur));
                                                        float uacc[12][16];
                                                        memset(uacc, 0, sizeof uacc);
                                                        const int64_t ukc = kcur;
                                                        for (int64_t uk = 0; uk < ukc; uk++) {
                                                            for (int ui = 0; ui < (uma < 12 ? (uma + 2) / 3 * 3 : 12); ui++) {
                                                                const float av = ua[(ui < uma ? ui : uma - 1) * 32 + uk];
                                                                for (int uj = 0; uj < 16; uj++)
                                                                    uacc[ui][uj] += av * ub[uk * 16 + uj];
                                                            }
                                                        }
                                                        float *uc = t_S + (base_2 + (((i0 + (ir * 12)) * ld) + (j0 + (jr * 16))));
                                                        const int64_t uldc = ld;
                                                        const int64_t umv = rt_imin(12, (mcur - (ir * 12))), unv = rt_imin(16, (ncur - (jr * 16)));
                                                        if ((int64_t)(pk > 0)) {
                                                            for (int64_t ui = 0; ui < umv; ui++)
                                                                for (int64_t uj = 0; uj < unv; uj++)
                                                                    uc[ui * uldc + uj] += uacc[ui][uj];
                                                        } else {
                                                            for (int64_t ui = 0; ui < umv; ui++)
                                                                for (int64_t uj = 0; uj < unv; uj++)
                                                                    uc[ui * uldc + uj] = uacc[ui][uj];
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    e_cost1 = (e_cost1 + e_cost_2);
                }
            }
            e_cost0 = (e_cost0 + run_cost);
        }
    }
}

void rt_qkt_c0_p0(void **args, int64_t lo, int64_t hi, float *scratch) {
    rt_qkt_c0_p0_body(scratch, (int32_t *)args[1], (float *)args[2], (int64_t *)args[3], (float *)args[4], (int64_t *)args[5], (float *)args[6], (int64_t *)args[7], (int64_t *)args[8], lo, hi);
}

// Runs every phase in order; the end of an omp for is the barrier.
void rt_qkt_c0(void **args) {
    #pragma omp parallel
    {
        float *scratch = aligned_alloc(64, 3584);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < 8; i++)
            rt_qkt_c0_p0(args, i, i + 1, scratch);
        free(scratch);
    }
}
