// test-cpu-rows.c: row-wise groups of several statements on the CPU's general path
// (codegen/lower-cpu.c rt_lower_general, perfmodel/plan-cpu.c rt_perf_cpu_row_depth): a residual
// + layer norm over ragged token rows (mean, centre, variance, normalise with gain and shift)
// and a softmax over each row of S(b, h, i, j) run every statement on one row before the next
// (rows of 2 and 3 loops), their row temporaries in per-thread scratch and the loads of a value
// the fused loop just stored replaced by the value (rt_kir_fuse_loops). Lengths 0, 1, primes
// and ragged, each sequence's rows split in one part per core; row lengths 1, prime and 512. A ragged softmax (ragged rows) and a group whose
// statement reads another row of a temporary keep depth 1 and stay right. The model leaves the
// scratch rows out of the caches' traffic. Every top-K candidate is checked against
// the reference interpreter in its child, and must show the lowering asked for.
#include "cpu-case.h"
#include "num-host.h"

typedef struct rows_case {
    const char *text;
    const char *phase;     // in the kernel's source: the group's phase as asked for
    const char *absent;    // not in the kernel's source (NULL: nothing)
    const char *forwarded; // in the kernel's source: a fused loop's forwarded store (NULL: none)
    int32_t rows0;         // rows of depth above 1: the range of row var 0 (0: not asked)
} rows_case;

static const int32_t lens[] = {0, 1, 7, 13, 2, 0, 29, 5, 3, 11, 1};
#define N_LENS ((int32_t)(sizeof lens / sizeof lens[0]))

static void run_case(const rt_device *dev, const rows_case *c, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    cpu_case cc = {.text = c->text,
                   .file = "rows.spec",
                   .top_k = 2,
                   .seed = seed,
                   .lens = strstr(c->text, "len") ? lens : NULL,
                   .n_lens = N_LENS};
    if (cpu_case_build(a, dev, &cc))
        for (int32_t i = 0; i < cc.rep->n; i++) {
            const char *src = cc.rep->cands[i].c_source;
            bool path = src && strstr(src, c->phase) && (!c->absent || !strstr(src, c->absent)) &&
                        (!c->forwarded || strstr(src, c->forwarded));
            // Each row var 0 split in one part per core (rt_lower_rows).
            char items[64];
            snprintf(items, sizeof items, "(%d work items)",
                     (int)(c->rows0 * (dev->units > 1 ? dev->units : 1)));
            path = path && (c->rows0 == 0 || strstr(src, items));
            cpu_case_expect(&cc, i, path, "interpreter");
        }
    rt_arena_free(a);
}

#define LN(M)                                                                                      \
    "def ln(int32(11) len, float(b:11, len(b), " #M ") O, float(b:11, len(b), " #M ") X,\n"        \
    "       float(" #M ") g, float(" #M ") be) -> (Y) {\n"                                         \
    " r(b, i, n) = O(b, i, n) + X(b, i, n)\n"                                                      \
    " mu(b, i) +=! r(b, i, n) / " #M "\n"                                                          \
    " c(b, i, n) = r(b, i, n) - mu(b, i)\n"                                                        \
    " var(b, i) +=! c(b, i, n) * c(b, i, n) / " #M "\n"                                            \
    " Y(b, i, n) = c(b, i, n) * rsqrt(var(b, i) + 1e-5) * g(n) + be(n)\n}"

// The model prices what is built: the layer norm's main statement (the mean) reads r, a row in
// L1 scratch, so r moves into the registers (the top level) but never into the caches.
static void model_case(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_model *m = NULL;
    const char *text = "def ln(float(4, 16, 512) O, float(4, 16, 512) X, float(512) g,\n"
                       "       float(512) be) -> (Y) {\n"
                       " r(b, i, n) = O(b, i, n) + X(b, i, n)\n"
                       " mu(b, i) +=! r(b, i, n) / 512\n"
                       " c(b, i, n) = r(b, i, n) - mu(b, i)\n"
                       " var(b, i) +=! c(b, i, n) * c(b, i, n) / 512\n"
                       " Y(b, i, n) = c(b, i, n) * rsqrt(var(b, i) + 1e-5) * g(n) + be(n)\n}";
    RT_EXPECT_EQ(rt_spec_parse(a, text, "ln.spec", NULL, 0, &op, &err), RT_OK);
    RT_EXPECT(op && rt_perf_model_build(a, op, dev, NULL, &m, &err) == RT_OK);
    if (m) {
        int32_t r = -1;
        for (int32_t i = 0; i < m->n_access; i++)
            if (strcmp(op->tensors[m->access[i].tensor].name, "r") == 0)
                r = i;
        RT_EXPECT(r >= 0 && m->access[r].local);
        int64_t shape[RT_PERF_MAX_AXES];
        for (int32_t x = 0; x < m->n_axes; x++)
            shape[x] = m->axes[x].extent;
        double r_bytes = 4.0 * 16 * 512 * 4;
        // Into the last-level cache: O, X, g, be, Y (the fused statements') and mu, not r.
        RT_EXPECT(rt_perf_traffic_bytes(m, 1, shape, NULL) < m->extra_dram_bytes + r_bytes / 2);
        RT_EXPECT(rt_perf_traffic_bytes(m, m->top, shape, NULL) >= r_bytes);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    // r and c live in scratch (no t_r[ or t_c[ access), mu's loop reads the r it just stored.
    static const rows_case cases[] = {
        {LN(37), "statements 0-4 fused row-wise, rows of 2 loops", "t_c[", "fwd = ", 11},
        {LN(1), "statements 0-4 fused row-wise, rows of 2 loops", "t_r[", "fwd = ", 11},
        {LN(512), "statements 0-4 fused row-wise, rows of 2 loops", "t_c[", "fwd = ", 11},
        // A softmax over dense rows of 37: rows of j under (b, h, i); e's loop feeds z's sum
        // and e lives in scratch.
        {"def sm(float(3, 2, 5, 37) S) -> (P) {\n"
         " mx(b, h, i) max=! S(b, h, i, j)\n"
         " e(b, h, i, j) = exp((S(b, h, i, j) - mx(b, h, i)) * 0.125)\n"
         " z(b, h, i) +=! e(b, h, i, j)\n"
         " P(b, h, i, j) = e(b, h, i, j) / z(b, h, i)\n}",
         "statements 0-3 fused row-wise, rows of 3 loops", "t_e[", "fwd = ", 3},
        // A ragged softmax: its rows (j < len(b)) are ragged, the group keeps depth 1.
        {"def sm(int32(11) len, float(b:11, 3, i:len(b), len(b)) S) -> (P) {\n"
         " mx(b, h, i) max=! S(b, h, i, j)\n"
         " e(b, h, i, j) = exp((S(b, h, i, j) - mx(b, h, i)) * 0.125)\n"
         " z(b, h, i) +=! e(b, h, i, j)\n"
         " P(b, h, i, j) = e(b, h, i, j) / z(b, h, i)\n}",
         "statements 0-3 fused row-wise (", "rows of", NULL, 0},
        // Y's row i reads r's row 5 - i, not written yet at row i: the group keeps depth 1 (each
        // statement over all rows of b in turn), and r stays an array (its rows are not one).
        {"def rev(float(3, 6, 8) X) -> (Y) {\n"
         " r(b, i, n) = X(b, i, n) * 2\n"
         " Y(b, i, n) = r(b, 5 - i, n) + 1   where i in 0:6\n}",
         "statements 0-1 fused row-wise (", "rows of", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&dev, &cases[i], 100 + i);
    model_case(&dev);
    return rt_test_finish("test-cpu-rows");
}
