// test-perfmodel-shared.c: what the construction computes once and shares across candidates
// gives what computing it anew gives, to the bit: the GEMM views kept by their seeds
// (rt_perf_model.gemm_memo) against views made without the memo; data tiles grown along one
// axis from a neighbour's (rt_perf_data_tiles) against data tiles from scratch; footprint and
// traffic against the formulas written out here with rt_perf_data_tile and rt_perf_tile_count
// (rtile.c counts tiles over dense axes in one pass, or from per-axis counts); and every
// constructed candidate against its evaluation in a zeroed rProgram (construct.c evaluates in a
// reused slot).
#include "test.h"
#include "test-perfmodel-ops.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static int64_t rnd(int64_t lo, int64_t hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (int64_t)(rng_state % (uint64_t)(hi - lo + 1));
}

// The operators: a plain GEMM of odd sizes, a strided convolution (halo dims), a ragged QK^T
// (examples/qkt.spec: a GEMM per batch entry), a ragged projection (a joint expectation over a
// length source) and a reduction. NULL when the spec does not load.
static rt_op *case_op(rt_arena *a, int32_t i) {
    rt_op *op = NULL;
    rt_err err = {0};
    switch (i) {
    case 0:
        return tp_matmul(a, 517, 1000, 301, RT_DTYPE_F32);
    case 1:
        return tp_conv(a, 2, 16, 29, 24, 3, 2, 1);
    case 2:
        if (rt_spec_load(a, "examples/qkt.spec", NULL, 0, &op, &err) != RT_OK)
            fprintf(stderr, "examples/qkt.spec: %s\n", err.msg);
        return op;
    case 3:
        return tp_ragged_proj(a, 8, 96);
    default:
        return tp_reduce_mean(a, 64, 96, 121);
    }
}
#define N_CASES 5

static void random_shape(const rt_perf_model *m, int64_t *t) {
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        t[x] = x < m->n_axes ? rnd(1, rt_max64(1, m->axes[x].extent + 2)) : 1;
}

// Two views agree on everything the backend and the cost model read.
static bool same_view(const rt_perf_cpu_gemm *a, const rt_perf_cpu_gemm *b) {
    return a->mr == b->mr && a->nr == b->nr && a->kc == b->kc && a->mc == b->mc && a->nc == b->nc &&
           a->ng == b->ng && a->items == b->items && a->batch == b->batch && a->M == b->M &&
           a->N == b->N && a->K == b->K && a->steps == b->steps && a->b_sub == b->b_sub &&
           a->re_run == b->re_run && a->axis_m == b->axis_m && a->axis_n == b->axis_n &&
           a->axis_k == b->axis_k && a->a_batch == b->a_batch && a->tokens == b->tokens &&
           a->rentry == b->rentry && a->re_n_mean == b->re_n_mean &&
           memcmp(a->group, b->group, sizeof a->group) == 0;
}

// Views with the memo (the construction's, for its candidates; then an empty one every 32 random
// nested tiles, each followed by a variant with one tile entry doubled, so that one seed
// differs) against views made anew, and the model steps each adds.
static void test_gemm_memo(rt_arena *a, const rt_device *dev_caches) {
    // Without cache capacities the rTile seeds rule the blocking (kc, mc and nc too).
    rt_device seeded = *dev_caches;
    for (int32_t l = 1; l + 1 < seeded.n_levels; l++)
        seeded.level[l].capacity_bytes = seeded.level[l].tile_capacity_bytes = 0;
    for (int32_t c = 0; c < 2 * N_CASES; c++) {
        const rt_device *dev = c < N_CASES ? dev_caches : &seeded;
        rt_err err = {0};
        rt_perf_result *r = NULL; // the construction's candidates (none on `seeded`: nothing fits)
        rt_perf_model *built = NULL;
        rt_perf_options opt = {.top_k = 10};
        rt_op *op = case_op(a, c % N_CASES);
        if (!op || (c < N_CASES ? rt_perf_construct(a, op, dev, &opt, &r, &err)
                                : rt_perf_model_build(a, op, dev, NULL, &built, &err)) != RT_OK) {
            RT_EXPECT(0);
            continue;
        }
        int32_t n_cands = r ? r->n_cands : 0;
        rt_perf_model memo = r ? *r->model : *built, bare = memo;
        const rt_perf_model *m = &memo;
        RT_EXPECT(m->gemm_memo != NULL);
        bare.gemm_memo = NULL;
        int32_t checked = 0;
        rt_rprog p;
        for (int32_t i = 0; i < n_cands + 400; i++) {
            if (i < n_cands) {
                p = r->cands[i];
            } else if (i % 2) { // one tile entry of the previous changed: one seed differs
                int32_t l = (int32_t)rnd(rt_max64(1, m->top - 3), m->top);
                p.tile[l].shape[rnd(0, m->n_axes - 1)] *= 2;
            } else { // random tiles, nested from the registers down (seeds the memo has not seen)
                if ((i - n_cands) % 64 == 0)
                    memo.gemm_memo = rt_perf_gemm_memo_new(a);
                memset(&p, 0, sizeof p);
                random_shape(m, p.tile[m->top].shape);
                for (int32_t l = m->top - 1; l >= 1; l--)
                    for (int32_t x = 0; x < m->n_axes; x++)
                        p.tile[l].shape[x] = p.tile[l + 1].shape[x] * rnd(1, 3);
            }
            rt_perf_cpu_gemm g1, g2;
            int64_t s0 = *m->steps;
            bool ok1 = rt_perf_cpu_gemm_view(m, &p, &g1);
            int64_t s1 = *m->steps;
            bool ok2 = rt_perf_cpu_gemm_view(&bare, &p, &g2);
            int64_t s2 = *m->steps;
            RT_EXPECT_EQ(ok1, ok2);
            RT_EXPECT_EQ(s1 - s0, s2 - s1);
            if (ok1 && ok2) {
                RT_EXPECT(same_view(&g1, &g2));
                checked++;
            }
        }
        if (c % N_CASES < 3) // the GEMMs have views
            RT_EXPECT(checked > 0);
    }
}

// Footprint and traffic as the formulas read, from rt_perf_data_tile and rt_perf_tile_count.
static int64_t ref_footprint(const rt_perf_model *m, int32_t level, const int64_t *t) {
    bool with_out = level == m->top || m->dev->level[level].managed == RT_MEM_CACHE;
    int64_t total = 0;
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        if (acc->is_output && !with_out)
            continue;
        int64_t dt[RT_MAX_DIMS], elems = 1;
        rt_perf_data_tile(m, i, t, dt);
        for (int32_t d = 0; d < acc->n_dims; d++)
            elems *= dt[d];
        total += elems * acc->elem_bytes;
    }
    return total;
}

static double ref_traffic(const rt_perf_model *m, int32_t level, const int64_t *t,
                          const int64_t *red) {
    const rt_mem_level *src = &m->dev->level[level - 1];
    int32_t txn = level == m->top              ? 0
                  : src->transaction_bytes > 0 ? src->transaction_bytes
                                               : src->line_bytes;
    double n_all = rt_perf_tile_count(m, t, false), n_sp = rt_perf_tile_count(m, t, true);
    double in = 0, out = 0;
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        if (acc->local && level < m->top)
            continue;
        int64_t dt[RT_MAX_DIMS], rows = 1;
        rt_perf_data_tile(m, i, t, dt);
        for (int32_t d = 0; d + 1 < acc->n_dims; d++)
            rows *= dt[d];
        int64_t inner = dt[acc->n_dims - 1] * acc->elem_bytes;
        double b = txn <= 0 ? (double)rows * (double)inner
                   : dt[acc->n_dims - 1] >= acc->dim_extent[acc->n_dims - 1]
                       ? (double)rt_round_up(rows * inner, txn)
                       : (double)rows * (double)rt_round_up(inner, txn);
        if (!acc->is_output) {
            in += b;
            continue;
        }
        double passes = 1;
        if (!m->acc_persist) {
            double n_red =
                red ? rt_perf_tile_count(m, red, false) / rt_perf_tile_count(m, red, true)
                    : n_all / n_sp;
            if (n_red > 1)
                passes = 2 * n_red - 1;
        }
        if (m->assign == RT_ASSIGN_ADD)
            passes += 1;
        out += b * passes;
    }
    return n_all * in + n_sp * out + (level == 1 ? m->extra_dram_bytes : 0);
}

static bool dense_model(const rt_perf_model *m) {
    for (int32_t x = 0; x < m->n_axes; x++)
        if (m->axes[x].group >= 0 && m->axes[x].dist.n > 1)
            return false;
    return true;
}

// Data tiles grown from a neighbour's, footprint and traffic from data tiles, against the
// references, on random shapes at every level.
static void test_tiles(rt_arena *a, const rt_device *dev) {
    for (int32_t c = 0; c < N_CASES; c++) {
        rt_err err = {0};
        rt_perf_model *m;
        rt_op *op = case_op(a, c);
        if (!op || rt_perf_model_build(a, op, dev, NULL, &m, &err) != RT_OK) {
            RT_EXPECT(0);
            continue;
        }
        int64_t dt[RT_PERF_MAX_ACCESS][RT_MAX_DIMS], grown[RT_PERF_MAX_ACCESS][RT_MAX_DIMS];
        int64_t fresh[RT_PERF_MAX_ACCESS][RT_MAX_DIMS];
        for (int32_t iter = 0; iter < 300; iter++) {
            int64_t t[RT_PERF_MAX_AXES], u[RT_PERF_MAX_AXES], full[RT_PERF_MAX_AXES];
            random_shape(m, t);
            for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
                full[x] = x < m->n_axes ? m->axes[x].extent : 1;
            rt_perf_data_tiles(m, t, NULL, -1, dt);
            for (int32_t i = 0; i < m->n_access; i++) {
                int64_t one[RT_MAX_DIMS];
                rt_perf_data_tile(m, i, t, one);
                RT_EXPECT(memcmp(one, dt[i], sizeof(int64_t) * m->access[i].n_dims) == 0);
            }
            for (int32_t x = 0; x < m->n_axes; x++) {
                memcpy(u, t, sizeof u);
                u[x] = rnd(1, rt_max64(1, m->axes[x].extent + 2));
                rt_perf_data_tiles(m, u, (const int64_t(*)[RT_MAX_DIMS])dt, x, grown);
                rt_perf_data_tiles(m, u, NULL, -1, fresh);
                for (int32_t i = 0; i < m->n_access; i++)
                    RT_EXPECT(memcmp(grown[i], fresh[i], sizeof(int64_t) * m->access[i].n_dims) ==
                              0);
            }
            for (int32_t l = 1; l <= m->top; l++) {
                RT_EXPECT_EQ(rt_perf_footprint_bytes(m, l, t, NULL, NULL), ref_footprint(m, l, t));
                const int64_t *red = l == m->top && !m->acc_persist ? full : NULL;
                double q = rt_perf_traffic_bytes(m, l, t, red), want = ref_traffic(m, l, t, red);
                if (q != want)
                    fprintf(stderr, "case %d level %d: traffic %.17g, expected %.17g\n", (int)c,
                            (int)l, q, want);
                RT_EXPECT(q == want);
                if (!dense_model(m))
                    continue;
                // from per-axis tile counts, as the construction prices a grown tile
                double fac[RT_PERF_MAX_AXES], n_all, n_sp;
                for (int32_t x = 0; x < m->n_axes; x++)
                    fac[x] = rt_perf_axis_tiles(m, x, t[x]);
                rt_perf_tile_counts_of(m, fac, &n_all, &n_sp);
                RT_EXPECT(n_all == rt_perf_tile_count(m, t, false));
                RT_EXPECT(n_sp == rt_perf_tile_count(m, t, true));
                double n_red =
                    red ? rt_perf_tile_count(m, red, false) / rt_perf_tile_count(m, red, true) : -1;
                RT_EXPECT(rt_perf_traffic_counted(m, l, (const int64_t(*)[RT_MAX_DIMS])dt, n_all,
                                                  n_sp, n_red) == want);
            }
        }
    }
}

// Every candidate is what evaluating its tiles in a zeroed rProgram gives, byte for byte apart
// from what the construction adds (discovery order, time, epsilon, shrink).
static void test_slot(rt_arena *a, const rt_device *dev) {
    for (int32_t c = 0; c < N_CASES; c++) {
        rt_err err = {0};
        rt_perf_result *r;
        rt_perf_options opt = {.top_k = 10};
        rt_op *op = case_op(a, c);
        if (!op || rt_perf_construct(a, op, dev, &opt, &r, &err) != RT_OK) {
            RT_EXPECT(0);
            continue;
        }
        for (int32_t i = 0; i < r->n_cands; i++) {
            const rt_rprog *got = &r->cands[i];
            rt_rprog *p = rt_arena_calloc(a, 1, sizeof *p);
            for (int32_t l = 1; l <= r->model->top; l++)
                memcpy(p->tile[l].shape, got->tile[l].shape, sizeof p->tile[l].shape);
            const char *why;
            RT_EXPECT(rt_perf_evaluate(r->model, p, &why));
            p->construct_ns = got->construct_ns;
            p->epsilon = got->epsilon;
            p->shrunk = got->shrunk;
            p->order = got->order;
            RT_EXPECT(memcmp(p, got, sizeof *p) == 0);
        }
    }
}

int main(void) {
    rt_arena *a = rt_arena_new(1 << 22);
    rt_err err = {0};
    rt_device dev;
    if (rt_hal_load_device("devices/x86-avx512.ini", &dev, &err) != RT_OK) {
        fprintf(stderr, "devices/x86-avx512.ini: %s\n", err.msg);
        return 1;
    }
    test_gemm_memo(a, &dev);
    test_tiles(a, &dev);
    test_slot(a, &dev);
    rt_arena_free(a);
    return rt_test_finish("test-perfmodel-shared");
}
