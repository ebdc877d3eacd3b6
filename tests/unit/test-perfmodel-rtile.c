// test-perfmodel-rtile.c: the model's formulas one by one — extent distributions, data tiles
// (convolution halos and strides), bank padding, footprint and traffic with transaction
// rounding, expected tile counts over ragged extents — and every alignment rule.
#include "test.h"
#include "test-perfmodel-ops.h"

static rt_device dev_gpu(void) {
    // A V100-like device written out here so the formulas are checked against known numbers.
    rt_device d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "test-gpu");
    d.units = 80;
    d.lanes = 32;
    d.teus_per_unit = 4;
    d.max_threads_per_block = 1024;
    d.max_threads_per_unit = 2048;
    d.max_blocks_per_unit = 32;
    d.regs_per_unit = 65536;
    d.peak_gflops[RT_DTYPE_F32] = 15700;
    d.n_levels = 3;
    rt_mem_level *g = &d.level[0], *s = &d.level[1], *r = &d.level[2];
    snprintf(g->name, sizeof g->name, "global");
    g->scope = RT_MEM_SCOPE_DEVICE;
    g->capacity_bytes = g->tile_capacity_bytes = 1ll << 34;
    g->bandwidth_gbps = 750;
    g->transaction_bytes = 32;
    snprintf(s->name, sizeof s->name, "shared");
    s->level = 1;
    s->scope = RT_MEM_SCOPE_UNIT;
    s->capacity_bytes = 98304;
    s->tile_capacity_bytes = 49152;
    s->bandwidth_gbps = 12080;
    s->banks = 32;
    s->bank_bytes = 4;
    snprintf(r->name, sizeof r->name, "reg");
    r->level = 2;
    r->scope = RT_MEM_SCOPE_THREAD;
    r->capacity_bytes = 1020;
    r->tile_capacity_bytes = 384;
    return d;
}

// More distinct samples than RT_EXTENT_DIST_MAX_POINTS: buckets of about equal weight, each at
// its largest value, ascending, the maximum kept and the mean above the samples' by less than
// a bucket's span. 10^5 samples 1..10^5 (every 7th value twice, value 7 ten times): 64 buckets.
static void test_dist_merged(rt_arena *a) {
    rt_err err = {0};
    rt_extent_dist d;
    int32_t n = 100000 + 100000 / 7 + 8;
    int64_t *s = rt_arena_calloc(a, (size_t)n, sizeof *s);
    double sum = 0;
    int32_t k = 0;
    for (int64_t v = 100000; v >= 1; v--)
        for (int32_t r = 0; r < (v == 7 ? 10 : v % 7 == 0 ? 2 : 1); r++) {
            s[k++] = v;
            sum += (double)v;
        }
    RT_EXPECT_EQ(k, n);
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, s, n, RT_NOLOC, &d, &err), RT_OK);
    RT_EXPECT_EQ(d.n, RT_EXTENT_DIST_MAX_POINTS);
    RT_EXPECT_EQ(rt_extent_dist_max(&d), 100000);
    double w = 0, wmax = 0;
    for (int32_t i = 0; i < d.n; i++) {
        w += d.weights[i];
        wmax = d.weights[i] > wmax ? d.weights[i] : wmax;
        RT_EXPECT(i == 0 || d.values[i] > d.values[i - 1]);
    }
    RT_EXPECT_NEAR(w, 1, 1e-9);
    RT_EXPECT(wmax <= 1.0 / RT_EXTENT_DIST_MAX_POINTS + 2.0 / n);
    double mean = sum / n;
    RT_EXPECT(rt_extent_dist_mean(&d) >= mean);
    RT_EXPECT(rt_extent_dist_mean(&d) <= mean + 100000.0 / RT_EXTENT_DIST_MAX_POINTS);
    // Tile counts stay within a bucket's share of the exact expectation.
    double exact = 0;
    for (int32_t i = 0; i < n; i++)
        exact += (double)rt_ceil_div(s[i], 4096) / n;
    RT_EXPECT(rt_extent_dist_tiles(&d, 4096) >= exact);
    RT_EXPECT(rt_extent_dist_tiles(&d, 4096) <= exact + 1.0 / RT_EXTENT_DIST_MAX_POINTS * 25);
}

static void test_dist(rt_arena *a) {
    rt_err err = {0};
    rt_extent_dist d;
    RT_EXPECT_EQ(rt_extent_dist_dense(a, 100, &d, &err), RT_OK);
    RT_EXPECT_NEAR(rt_extent_dist_tiles(&d, 32), 4, 1e-12);
    RT_EXPECT_NEAR(rt_extent_dist_padded(&d, 32), 128, 1e-12);
    RT_EXPECT_NEAR(rt_extent_dist_mean(&d), 100, 1e-12);
    int64_t s[] = {10, 30, 30, 64};
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, s, 4, RT_NOLOC, &d, &err), RT_OK);
    RT_EXPECT_EQ(d.n, 3);
    RT_EXPECT_NEAR(rt_extent_dist_mean(&d), 33.5, 1e-12);
    // E[ceil(len/32)] = (1 + 1 + 1 + 2) / 4
    RT_EXPECT_NEAR(rt_extent_dist_tiles(&d, 32), 1.25, 1e-12);
    RT_EXPECT_EQ(rt_extent_dist_max(&d), 64);
    RT_EXPECT_EQ(rt_extent_dist_uniform(a, 1, 512, 64, &d, &err), RT_OK);
    RT_EXPECT_EQ(d.n, 64);
    RT_EXPECT_EQ(rt_extent_dist_max(&d), 512);
    double w = 0;
    for (int i = 0; i < d.n; i++)
        w += d.weights[i];
    RT_EXPECT_NEAR(w, 1, 1e-9);
    RT_EXPECT_EQ(rt_extent_dist_uniform(a, 1, 5, 64, &d, &err), RT_OK);
    RT_EXPECT_EQ(d.n, 5);
    RT_EXPECT_NEAR(rt_extent_dist_mean(&d), 3, 1e-12);
    int64_t bad[] = {3, -1};
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, bad, 2, rt_loc_make("l.txt", 2, 1), &d, &err),
                 RT_ERR_SPEC);
    RT_EXPECT(strstr(err.msg, "got -1") != NULL);
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, bad, 0, RT_NOLOC, &d, &err), RT_ERR_SPEC);
    test_dist_merged(a);
}

// rt_extent_dist_coarsen: at most max_points buckets of consecutive points, ascending, the
// weight and the mean kept (each bucket is its weighted mean, rounded); a small d unchanged.
static void test_dist_coarsen(rt_arena *a) {
    rt_err err = {0};
    rt_extent_dist d, c;
    int64_t v[8];
    double w[8];
    RT_EXPECT_EQ(rt_extent_dist_uniform(a, 1, 512, 64, &d, &err), RT_OK);
    for (int32_t max = 1; max <= 8; max++) {
        rt_extent_dist_coarsen(&d, max, v, w, &c);
        RT_EXPECT_EQ(c.n, max);
        double sw = 0;
        for (int32_t i = 0; i < c.n; i++) {
            sw += c.weights[i];
            RT_EXPECT(i == 0 || c.values[i] > c.values[i - 1]);
            RT_EXPECT(c.weights[i] > 0.5 / max && c.weights[i] < 2.0 / max);
        }
        RT_EXPECT_NEAR(sw, 1, 1e-9);
        RT_EXPECT_NEAR(rt_extent_dist_mean(&c), rt_extent_dist_mean(&d), 0.5);
    }
    // Skewed weights: one heavy point makes a bucket alone; every point left still gets one.
    int64_t s[] = {1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5};
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, s, 14, RT_NOLOC, &d, &err), RT_OK);
    RT_EXPECT_EQ(d.n, 5);
    rt_extent_dist_coarsen(&d, 4, v, w, &c);
    RT_EXPECT_EQ(c.n, 4);
    RT_EXPECT_NEAR(rt_extent_dist_mean(&c), rt_extent_dist_mean(&d), 0.5);
    RT_EXPECT_EQ(c.values[c.n - 1], 5);
    rt_extent_dist_coarsen(&d, 5, v, w, &c);
    RT_EXPECT(c.values == d.values && c.n == 5);
}

static void test_bank_pad(void) {
    // Roller Fig. 5b: N = 4 elements (16 B) over 4 banks of 4 B read by n = 1: pad 1.
    RT_EXPECT_EQ(rt_perf_bank_pad_elems(4, 4, 4, 4, 1), 1);
    // 32 banks x 4 B, a row of 8 floats read one at a time: stride 33 words.
    RT_EXPECT_EQ(rt_perf_bank_pad_elems(32, 4, 4, 8, 1), 25);
    RT_EXPECT_EQ(rt_perf_bank_pad_elems(32, 4, 4, 128, 8), 8);
    RT_EXPECT_EQ(rt_perf_bank_pad_elems(32, 4, 4, 32, 1), 1);
    RT_EXPECT_EQ(rt_perf_bank_pad_elems(0, 4, 4, 32, 1), 0);
    // (N + pad) mod B*L == L*ceil(n/L) for a range of shapes
    for (int64_t n = 1; n < 300; n += 7)
        for (int64_t r = 1; r < 20; r += 3) {
            int64_t p = rt_perf_bank_pad_elems(32, 4, 4, n, r);
            RT_EXPECT_EQ(((n + p) * 4) % 128, (4 * rt_ceil_div(r * 4, 4)) % 128);
        }
}

static void test_matmul_model(rt_arena *a) {
    rt_err err = {0};
    rt_device dev = dev_gpu();
    rt_op *op = tp_matmul(a, 4096, 4096, 1024, RT_DTYPE_F32);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, &dev, NULL, &m, &err), RT_OK);
    RT_EXPECT_EQ(m->n_axes, 3);
    RT_EXPECT_EQ(m->n_access, 3);
    RT_EXPECT_EQ(m->top, 2);
    RT_EXPECT_EQ(m->thread_level, 2);
    RT_EXPECT_EQ(m->block_level, 1);
    RT_EXPECT(m->acc_persist);
    RT_EXPECT_NEAR(m->flops_per_point, 2, 0);
    int64_t t[RT_PERF_MAX_AXES] = {128, 64, 8};
    int64_t dt[RT_MAX_DIMS];
    rt_perf_data_tile(m, 0, t, dt); // A(m, k)
    RT_EXPECT_EQ(dt[0], 128);
    RT_EXPECT_EQ(dt[1], 8);
    rt_perf_data_tile(m, 1, t, dt); // B(k, n)
    RT_EXPECT_EQ(dt[0], 8);
    RT_EXPECT_EQ(dt[1], 64);
    rt_perf_data_tile(m, 2, t, dt); // C(m, n)
    RT_EXPECT_EQ(dt[0], 128);
    RT_EXPECT_EQ(dt[1], 64);
    RT_EXPECT_NEAR(rt_perf_tile_count(m, t, false), 32.0 * 64 * 128, 0);
    RT_EXPECT_NEAR(rt_perf_tile_count(m, t, true), 32.0 * 64, 0);
    // Shared level: A rows of 8 floats read by a 1-wide thread tile: 33-word stride.
    int64_t reader[RT_PERF_MAX_AXES] = {8, 8, 1};
    int64_t pads[RT_PERF_MAX_ACCESS];
    int64_t fp = rt_perf_footprint_bytes(m, 1, t, reader, pads);
    RT_EXPECT_EQ(pads[0], 25);
    RT_EXPECT_EQ(pads[1], rt_perf_bank_pad_elems(32, 4, 4, 64, 8));
    RT_EXPECT_EQ(fp, 128 * 33 * 4 + 8 * (64 + pads[1]) * 4);
    // Register level: inputs and the output, no padding.
    RT_EXPECT_EQ(rt_perf_footprint_bytes(m, 2, reader, NULL, NULL), (8 + 8 + 64) * 4);
    // Traffic into shared: every (m, n, k) tile loads A and B; C is stored once per block.
    double q = rt_perf_traffic_bytes(m, 1, t, NULL);
    double want = 32.0 * 64 * 128 * (128 * 8 * 4 + 8 * 64 * 4) + 32.0 * 64 * 128 * 64 * 4;
    RT_EXPECT_NEAR(q, want, 1);
    // Transaction rounding: k = 2 moves 8 B rows in 32 B transactions.
    int64_t t2[RT_PERF_MAX_AXES] = {128, 64, 2};
    double q2 = rt_perf_traffic_bytes(m, 1, t2, NULL);
    double want2 = 32.0 * 64 * 512 * (128 * 32 + 2 * 64 * 4) + 32.0 * 64 * 128 * 64 * 4;
    RT_EXPECT_NEAR(q2, want2, 1);
    // Alignment: k at the shared level must fill 32 B transactions of A's rows.
    int64_t up[RT_PERF_MAX_AXES] = {8, 8, 1};
    int64_t base[RT_PERF_MAX_AXES] = {8, 8, 1};
    m->epsilon = 0;
    RT_EXPECT_EQ(rt_perf_next_aligned_size(m, base, 2, 1, up, true), 8);
    RT_EXPECT_STR(rt_perf_align_check(m, base, 2, 1, up, 4), "transaction");
    RT_EXPECT(rt_perf_align_check(m, base, 2, 1, up, 8) == NULL);
    // Shape rule: 4096 % 24 != 0 is rejected at epsilon 0, accepted at 0.01.
    RT_EXPECT_STR(rt_perf_align_check(m, base, 0, 1, up, 24), "shape");
    m->epsilon = 0.01;
    RT_EXPECT(rt_perf_align_check(m, base, 0, 1, up, 24) == NULL);
    m->epsilon = 0;
    // Sizes are multiples of the tile above: 8, 16, 32, 64, ...
    RT_EXPECT_EQ(rt_perf_next_aligned_size(m, base, 0, 1, up, false), 16);
    int64_t b2[RT_PERF_MAX_AXES] = {16, 8, 1};
    RT_EXPECT_EQ(rt_perf_next_aligned_size(m, b2, 0, 1, up, false), 32);
    // The whole extent is always a candidate.
    int64_t big[RT_PERF_MAX_AXES] = {2048, 8, 8};
    RT_EXPECT_EQ(rt_perf_next_aligned_size(m, big, 0, 1, up, false), 4096);
    big[0] = 4096;
    RT_EXPECT_EQ(rt_perf_next_aligned_size(m, big, 0, 1, up, false), 0);
    // The rule table is reachable by name.
    int32_t nr;
    const rt_align_rule *rules = rt_perf_align_rules(&nr);
    RT_EXPECT(nr >= 5);
    bool has_txn = false;
    for (int32_t i = 0; i < nr; i++)
        has_txn = has_txn || strcmp(rules[i].name, "transaction") == 0;
    RT_EXPECT(has_txn);
}

static void test_conv_halo(rt_arena *a) {
    rt_err err = {0};
    rt_device dev = dev_gpu();
    rt_op *op = tp_conv(a, 128, 128, 58, 128, 3, 2, 1);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, &dev, NULL, &m, &err), RT_OK);
    RT_EXPECT_EQ(m->n_axes, 7);
    // axes n f y x c r s; I(n, c, 2y + r - 1, 2x + s - 1)
    int64_t t[RT_PERF_MAX_AXES] = {2, 16, 4, 5, 8, 3, 3};
    int64_t dt[RT_MAX_DIMS];
    rt_perf_data_tile(m, 0, t, dt);
    RT_EXPECT_EQ(dt[0], 2);
    RT_EXPECT_EQ(dt[1], 8);
    RT_EXPECT_EQ(dt[2], 2 * (4 - 1) + 3);
    RT_EXPECT_EQ(dt[3], 2 * (5 - 1) + 3);
    rt_perf_data_tile(m, 1, t, dt); // Wt(f, c, r, s)
    RT_EXPECT_EQ(dt[0], 16);
    RT_EXPECT_EQ(dt[2], 3);
    rt_perf_data_tile(m, 2, t, dt); // O(n, f, y, x)
    RT_EXPECT_EQ(dt[2], 4);
    RT_EXPECT_EQ(dt[3], 5);
    // A halo never exceeds the tensor: capped at H = 58.
    int64_t whole[RT_PERF_MAX_AXES] = {1, 1, 29, 29, 1, 3, 3};
    rt_perf_data_tile(m, 0, whole, dt);
    RT_EXPECT_EQ(dt[2], 58);
}

static void test_ragged(rt_arena *a) {
    rt_err err = {0};
    rt_device dev = dev_gpu();
    rt_op *op = tp_ragged_proj(a, 32, 512);
    int64_t lens[] = {10, 30, 70, 128};
    rt_extent_dist d;
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, lens, 4, RT_NOLOC, &d, &err), RT_OK);
    rt_perf_length_dist ld = {"len", d, NULL};
    rt_perf_options opt = {0};
    opt.lengths = &ld;
    opt.n_lengths = 1;
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, &dev, &opt, &m, &err), RT_OK);
    RT_EXPECT(m->axes[0].pinned); // b
    RT_EXPECT(m->axes[1].ragged); // i
    RT_EXPECT(m->default_dist_note == NULL);
    int64_t t[RT_PERF_MAX_AXES] = {1, 32, 64, 8};
    // tiles = 32 batches x E[ceil(len/32)] x (512/64) x (512/8)
    RT_EXPECT_NEAR(rt_perf_tile_count(m, t, false), 32 * (1 + 1 + 3 + 4) / 4.0 * 8 * 64, 1e-9);
    RT_EXPECT_NEAR(m->real_points, 32 * 59.5 * 512 * 512, 1e-3);
    int64_t pin[RT_PERF_MAX_AXES] = {1, 1, 1, 1};
    m->epsilon = 0;
    RT_EXPECT_STR(rt_perf_align_check(m, pin, 0, 1, NULL, 2), "pinned");
    // Without bound lengths: the documented default.
    rt_perf_model *m2;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, &dev, NULL, &m2, &err), RT_OK);
    RT_EXPECT(m2->default_dist_note != NULL);
    RT_EXPECT_EQ(m2->axes[1].extent, RT_PERF_DEFAULT_MAX_LEN);
}

static void test_cpu_rules(rt_arena *a) {
    rt_err err = {0};
    rt_device dev;
    if (rt_hal_load_device("devices/x86-avx512.ini", &dev, &err) != RT_OK) {
        fprintf(stderr, "devices/x86-avx512.ini: %s\n", err.msg);
        RT_EXPECT(0);
        return;
    }
    rt_op *op = tp_matmul(a, 512, 512, 512, RT_DTYPE_F32);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, &dev, NULL, &m, &err), RT_OK);
    RT_EXPECT_EQ(m->thread_level, -1);
    RT_EXPECT(!m->acc_persist);
    int64_t t[RT_PERF_MAX_AXES] = {1, 1, 1};
    m->epsilon = 0;
    // The register block's output row is a multiple of the 16 lanes.
    RT_EXPECT_EQ(rt_perf_next_aligned_size(m, t, 1, m->top, NULL, true), 16);
    RT_EXPECT_STR(rt_perf_align_check(m, t, 1, m->top, NULL, 8), "lanes");
    RT_EXPECT(rt_perf_align_check(m, t, 0, m->top, NULL, 6) == NULL || 512 % 6 != 0);
    // Output accumulators do not persist across cache-level reduction steps: a deeper k tile
    // moves less output traffic.
    int64_t k1[RT_PERF_MAX_AXES] = {64, 64, 16}, k2[RT_PERF_MAX_AXES] = {64, 64, 256};
    double o1 = rt_perf_traffic_bytes(m, 2, k1, NULL), o2 = rt_perf_traffic_bytes(m, 2, k2, NULL);
    RT_EXPECT(o2 < o1);
}

int main(void) {
    rt_arena *a = rt_arena_new(1 << 20);
    test_dist(a);
    test_dist_coarsen(a);
    test_bank_pad();
    test_matmul_model(a);
    test_conv_halo(a);
    test_ragged(a);
    test_cpu_rules(a);
    rt_arena_free(a);
    return rt_test_finish("test-perfmodel-rtile");
}
