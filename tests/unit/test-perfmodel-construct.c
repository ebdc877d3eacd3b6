// test-perfmodel-construct.c: construction end to end on every shipped device (devices/*.ini):
// invariants of every candidate (capacity, nesting, alignment rules, thread and register limits,
// ranking order, exact coverage of the iteration space), the GEMM sanity shapes on v100 and on
// the AVX-512 CPU, the explain trace, the JSON report, determinism and the no-fit error.
#include "test.h"
#include "test-perfmodel-ops.h"

#include <dirent.h>
#include <jansson.h>

// Each point of the padded iteration space is reached exactly once by the nested tiles.
static bool covers_once(const rt_perf_model *m, const rt_rprog *p) {
    int64_t total = 1, ext[RT_PERF_MAX_AXES];
    for (int32_t x = 0; x < m->n_axes; x++) {
        ext[x] = m->axes[x].extent;
        total *= ext[x];
    }
    if (total > 200000)
        return true; // only small cases are enumerated
    uint8_t *hits = calloc((size_t)total, 1);
    int32_t top = m->top;
    // Walk level-1 tile origins, then nested origins down to the top tile, then its points.
    int64_t org[RT_MAX_MEM_LEVELS][RT_PERF_MAX_AXES] = {{0}};
    int64_t pt[RT_PERF_MAX_AXES] = {0};
    int32_t lvl = 1;
    bool ok = true;
    // Iterative odometer over (level origins, points) to avoid recursion limits.
    for (;;) {
        // point = origin at top + pt
        bool inside = true;
        int64_t idx = 0;
        for (int32_t x = 0; x < m->n_axes; x++) {
            int64_t c = org[top][x] + pt[x];
            if (c >= ext[x])
                inside = false;
            idx = idx * ext[x] + c;
        }
        if (inside && hits[idx]++ > 0)
            ok = false;
        // advance pt within the top tile
        int32_t x = m->n_axes - 1;
        for (; x >= 0; x--) {
            if (++pt[x] < p->tile[top].shape[x])
                break;
            pt[x] = 0;
        }
        if (x >= 0)
            continue;
        // advance origins from the top level down to level 1
        for (lvl = top; lvl >= 1; lvl--) {
            int64_t lim[RT_PERF_MAX_AXES];
            for (int32_t y = 0; y < m->n_axes; y++)
                lim[y] = lvl == 1 ? rt_round_up(ext[y], p->tile[1].shape[y])
                                  : org[lvl - 1][y] + p->tile[lvl - 1].shape[y];
            int32_t y = m->n_axes - 1;
            for (; y >= 0; y--) {
                org[lvl][y] += p->tile[lvl].shape[y];
                if (org[lvl][y] < lim[y])
                    break;
                org[lvl][y] = lvl == 1 ? 0 : org[lvl - 1][y];
            }
            if (y >= 0)
                break;
        }
        if (lvl < 1)
            break;
        for (int32_t l = lvl + 1; l <= top; l++)
            memcpy(org[l], org[l - 1], sizeof org[l]);
    }
    for (int64_t i = 0; i < total; i++)
        if (hits[i] != 1)
            ok = false;
    free(hits);
    return ok;
}

static int n_checked;

// Names the broken invariant (its number in check_result) and fails.
static bool fail_at(int where) {
    fprintf(stderr, "invariant %d broken\n", where);
    return false;
}

static void check_result(const rt_device *dev, const rt_perf_result *r, const char *what) {
    const rt_perf_model *m = r->model;
    RT_EXPECT(r->n_cands >= 1);
    for (int32_t i = 0; i < r->n_cands; i++) {
        const rt_rprog *p = &r->cands[i];
        bool good = true;
        if (i > 0 && p->predicted_ns < r->cands[i - 1].predicted_ns)
            good = fail_at(1);
        if (!(p->predicted_ns > 0) || !(p->predicted_ns < 1e18))
            good = fail_at(2);
        for (int32_t l = 1; l <= m->top; l++) {
            const rt_rtile *t = &p->tile[l];
            if (t->footprint_bytes > rt_perf_capacity_bytes(m, l))
                good = fail_at(3);
            for (int32_t x = 0; x < m->n_axes; x++) {
                if (t->shape[x] < 1)
                    good = fail_at(4);
                if (l < m->top && t->shape[x] % p->tile[l + 1].shape[x] != 0)
                    good = fail_at(5);
            }
            // Alignment rules hold for every constructed (not shrunk) tile.
            if (!p->shrunk) {
                rt_perf_model *mm = (rt_perf_model *)m;
                double saved = mm->epsilon;
                mm->epsilon = p->epsilon;
                for (int32_t x = 0; x < m->n_axes; x++) {
                    const int64_t *up = l < m->top ? p->tile[l + 1].shape : NULL;
                    const char *rule = rt_perf_align_check(m, t->shape, x, l, up, t->shape[x]);
                    // The transaction rule is relaxed only where no size could satisfy it.
                    if (rule && strcmp(rule, "transaction") != 0) {
                        fprintf(stderr, "%s on %s: rank %d level %d axis %s breaks %s\n", what,
                                dev->name, i + 1, l, m->axes[x].name, rule);
                        good = fail_at(6);
                    }
                }
                mm->epsilon = saved;
            }
        }
        if (m->thread_level >= 0) {
            if (dev->max_threads_per_block > 0 && p->threads_per_block > dev->max_threads_per_block)
                good = fail_at(7);
            if (dev->regs_per_unit > 0 &&
                p->threads_per_block * p->regs_per_thread > dev->regs_per_unit)
                good = fail_at(8);
            if ((int64_t)p->regs_per_thread * 4 > rt_perf_capacity_bytes(m, m->thread_level))
                good = fail_at(9);
            // Whole warps, except for operators too small to fill one warp per TEU.
            double small = (double)dev->units * dev->lanes * dev->teus_per_unit * 64;
            // (and except devices whose register file cannot hold a full TEU group of them)
            bool room =
                dev->regs_per_unit <= 0 ||
                (int64_t)dev->lanes * dev->teus_per_unit * p->regs_per_thread <= dev->regs_per_unit;
            if (p->threads_per_block % dev->lanes != 0 && m->real_points >= small && room)
                good = fail_at(10);
        } else if (p->threads_per_block != 1) {
            good = fail_at(11);
        }
        if (!covers_once(m, p)) {
            fprintf(stderr, "%s on %s: candidate %d does not cover the space once\n", what,
                    dev->name, i + 1);
            good = fail_at(12);
        }
        if (!good)
            fprintf(stderr, "%s on %s: candidate %d breaks an invariant\n", what, dev->name, i + 1);
        RT_EXPECT(good);
        n_checked++;
    }
}

static bool load_dev(const char *path, rt_device *dev) {
    rt_err err = {0};
    if (rt_hal_load_device(path, dev, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return false;
    }
    return true;
}

static void test_all_devices(void) {
    DIR *d = opendir("devices");
    RT_EXPECT(d != NULL);
    if (!d)
        return;
    char names[32][300];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 32) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".ini") == 0 && strcmp(e->d_name, "host.ini"))
            snprintf(names[n++], sizeof names[0], "devices/%s", e->d_name);
    }
    closedir(d);
    RT_EXPECT(n >= 10);
    for (int i = 0; i < n; i++) {
        rt_device dev;
        RT_EXPECT(load_dev(names[i], &dev));
        if (dev.n_levels < 2)
            continue;
        rt_arena *a = rt_arena_new(1 << 20);
        rt_op *ops[] = {
            tp_matmul(a, 512, 256, 128, RT_DTYPE_F32),
            tp_matmul(a, 48, 40, 24, RT_DTYPE_F32),  // small: enumerated coverage
            tp_matmul(a, 100, 37, 13, RT_DTYPE_F32), // irregular: epsilon padding
            tp_matmul(a, 1024, 1024, 1024, RT_DTYPE_F16),
            tp_conv(a, 8, 16, 14, 16, 3, 1, 1),
            tp_conv(a, 128, 128, 58, 128, 3, 2, 1),
            tp_relu(a, (int64_t[]){128, 256, 14, 14}),
            tp_relu(a, (int64_t[]){2, 3, 5, 7}),
            tp_reduce_mean(a, 128, 512, 1024),
            tp_reduce_mean(a, 4, 6, 10),
            tp_ragged_proj(a, 32, 512),
        };
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            rt_err err = {0};
            rt_perf_result *r = NULL;
            rt_perf_options opt = {0};
            opt.top_k = 10;
            rt_status st = rt_perf_construct(a, ops[k], &dev, &opt, &r, &err);
            if (st != RT_OK)
                fprintf(stderr, "%s op %zu: %s\n", dev.name, k, err.msg);
            RT_EXPECT_EQ(st, RT_OK);
            if (st == RT_OK)
                check_result(&dev, r, ops[k]->name);
        }
        rt_arena_free(a);
    }
}

static void test_v100_gemm(void) {
    rt_device dev;
    if (!load_dev("devices/v100.ini", &dev)) {
        RT_EXPECT(false);
        return;
    }
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_perf_result *r;
    rt_buf ex;
    rt_buf_init(&ex, a);
    rt_perf_options opt = {0};
    opt.top_k = 10;
    opt.explain = &ex;
    rt_op *op = tp_matmul(a, 4096, 4096, 4096, RT_DTYPE_F32);
    RT_EXPECT_EQ(rt_perf_construct(a, op, &dev, &opt, &r, &err), RT_OK);
    const rt_rprog *p = &r->cands[0];
    int64_t bm = p->tile[1].shape[0], bn = p->tile[1].shape[1], bk = p->tile[1].shape[2];
    int64_t tm = p->tile[2].shape[0], tn = p->tile[2].shape[1];
    printf("v100 gemm 4096^3 top-1: block %lldx%lldx%lld thread %lldx%lld threads %lld\n",
           (long long)bm, (long long)bn, (long long)bk, (long long)tm, (long long)tn,
           (long long)p->threads_per_block);
    RT_EXPECT((bm == 128 && bn == 128) || (bm == 128 && bn == 64) || (bm == 64 && bn == 128));
    RT_EXPECT(bk >= 8 && bk <= 32);
    RT_EXPECT(tm >= 4 && tm <= 8 && tn >= 4 && tn <= 8 && tm * tn >= 32);
    RT_EXPECT(p->threads_per_block % 128 == 0);
    RT_EXPECT_EQ(r->n_cands, 10);
    // The explain trace names every level and what happened to the tiles.
    RT_EXPECT(ex.data && strstr(ex.data, "L2 reg") && strstr(ex.data, "L1 shared"));
    RT_EXPECT(ex.data && strstr(ex.data, "kept (compute bound)"));
    RT_EXPECT(ex.data && strstr(ex.data, "enlarged (memory bound)"));
    // JSON report.
    json_t *j = rt_perf_result_to_json(r);
    RT_EXPECT(j != NULL);
    if (j) {
        json_t *c = json_object_get(j, "candidates");
        RT_EXPECT(json_is_array(c) && json_array_size(c) == 10);
        json_t *c0 = json_array_get(c, 0);
        RT_EXPECT(json_is_array(json_object_get(c0, "levels")));
        RT_EXPECT_EQ(json_array_size(json_object_get(c0, "levels")), 3);
        RT_EXPECT_STR(json_string_value(json_object_get(c0, "bottleneck")), "compute");
        RT_EXPECT(json_real_value(json_object_get(c0, "predicted_ns")) > 0);
        json_t *l1 = json_array_get(json_object_get(c0, "levels"), 1);
        RT_EXPECT_EQ(json_integer_value(json_object_get(json_object_get(l1, "tile"), "m")), bm);
        char *s = json_dumps(j, 0);
        RT_EXPECT(s && strstr(s, "\"threads_per_block\""));
        free(s);
        json_decref(j);
    }
    // Table.
    rt_buf tb;
    rt_buf_init(&tb, a);
    rt_perf_print_table(r, &tb);
    RT_EXPECT(tb.data && strstr(tb.data, "predicted_us"));
    // Determinism.
    rt_perf_result *r2;
    rt_perf_options o2 = {0};
    o2.top_k = 10;
    RT_EXPECT_EQ(rt_perf_construct(a, op, &dev, &o2, &r2, &err), RT_OK);
    for (int32_t i = 0; i < r->n_cands && i < r2->n_cands; i++) {
        RT_EXPECT(memcmp(r->cands[i].tile[1].shape, r2->cands[i].tile[1].shape,
                         sizeof r->cands[i].tile[1].shape) == 0);
        RT_EXPECT_NEAR(r->cands[i].predicted_ns, r2->cands[i].predicted_ns, 0);
    }
    // A small operator is shrunk until the units have work: 128 x 1000 x 4032 (Roller M1).
    rt_op *m1 = tp_matmul(a, 128, 1000, 4032, RT_DTYPE_F32);
    RT_EXPECT_EQ(rt_perf_construct(a, m1, &dev, &o2, &r2, &err), RT_OK);
    RT_EXPECT(r2->cands[0].blocks >= dev.units);
    rt_arena_free(a);
}

static void test_cpu_gemm(void) {
    rt_device dev;
    if (!load_dev("devices/x86-avx512.ini", &dev)) {
        RT_EXPECT(false);
        return;
    }
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_perf_result *r;
    rt_perf_options opt = {0};
    opt.top_k = 10;
    rt_op *op = tp_matmul(a, 4096, 4096, 4096, RT_DTYPE_F32);
    RT_EXPECT_EQ(rt_perf_construct(a, op, &dev, &opt, &r, &err), RT_OK);
    const rt_perf_model *m = r->model;
    for (int32_t i = 0; i < r->n_cands; i++) {
        const rt_rprog *p = &r->cands[i];
        int64_t mr = p->tile[m->top].shape[0], nr = p->tile[m->top].shape[1];
        if (i == 0)
            printf("x86-avx512 gemm top-1 register block %lldx%lld\n", (long long)mr,
                   (long long)nr);
        RT_EXPECT_EQ(nr % dev.lanes, 0);
        RT_EXPECT(mr * nr / dev.lanes >= dev.fma_latency_cycles * dev.teus_per_unit);
        for (int32_t l = 1; l < m->top; l++)
            RT_EXPECT(p->tile[l].footprint_bytes <= dev.level[l].capacity_bytes);
    }
    rt_arena_free(a);
}

static void test_no_fit(void) {
    rt_device dev;
    if (!load_dev("devices/v100.ini", &dev)) {
        RT_EXPECT(false);
        return;
    }
    dev.level[1].tile_capacity_bytes = 16;
    dev.level[2].tile_capacity_bytes = 8;
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_perf_result *r = NULL;
    rt_op *op = tp_matmul(a, 256, 256, 256, RT_DTYPE_F32);
    RT_EXPECT_EQ(rt_perf_construct(a, op, &dev, NULL, &r, &err), RT_ERR_NOFIT);
    RT_EXPECT(strstr(err.msg, "no candidate") != NULL);
    RT_EXPECT(err.msg[strlen(err.msg) - 1] != '.');
    // A device with only level 0 cannot be tiled.
    rt_err_clear(&err);
    dev.n_levels = 1;
    RT_EXPECT_EQ(rt_perf_construct(a, op, &dev, NULL, &r, &err), RT_ERR_DEVICE);
    // Out of memory is reported, never a crash.
    rt_device v;
    RT_EXPECT(load_dev("devices/v100.ini", &v));
    for (long n = 0; n < 200; n += 7) {
        rt_arena *b = rt_arena_new(4096);
        rt_op *o = tp_matmul(b, 256, 256, 256, RT_DTYPE_F32);
        rt_err_clear(&err);
        rt_arena_fail_after(b, n);
        rt_status st = rt_perf_construct(b, o, &v, NULL, &r, &err);
        RT_EXPECT(st == RT_OK || st == RT_ERR_NOMEM);
        rt_arena_free(b);
    }
    rt_arena_free(a);
}

int main(void) {
    test_all_devices();
    test_v100_gemm();
    test_cpu_gemm();
    test_no_fit();
    printf("%d candidates checked\n", n_checked);
    return rt_test_finish("test-perfmodel-construct");
}
