// test-cpu-ragged-gemm.c: ragged extents on the packed micro-kernel (codegen/lower-cpu-ragged.c):
// token-flattened contractions C(b, i, n) (+)= A(b, i, k) * W(k, n) over packed (b:B, len(b), D)
// tensors (CORA's proj, a ragged FFN with its bias + GELU epilogue fused into the micro-kernel's
// store), as one plain GEMM over the sum(len) rows read at run time. Lengths 0, 1, primes, all
// equal, all zero, one long plus many short; W transposed; '+=' onto an output; the temporary
// kept as an output beside the epilogue's; and lengths bound at run time that differ from the
// ones the model planned for (more and fewer rows than its row blocks). Every top-K candidate
// must run the token GEMM and come out "ok" against the reference interpreter in its child.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

#define MAX_B 32

typedef struct rcase {
    const char *text;
    int32_t n;              // batch (the length tensor's extent)
    int32_t lens[MAX_B];    // bound at run time
    int32_t planned[MAX_B]; // the model's distribution (all 0: the bound lengths)
} rcase;

static void run_case(const rt_device *dev, const rcase *c, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 3};
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 1, .threads = 2, .interp_max_points = (int64_t)1 << 26};
    int64_t samples[MAX_B];
    bool planned = false;
    for (int32_t i = 0; i < c->n; i++)
        planned = planned || c->planned[i] != 0;
    for (int32_t i = 0; i < c->n; i++)
        samples[i] = planned ? c->planned[i] : c->lens[i];
    rt_perf_length_dist d = {.tensor = "len"};
    if (rt_spec_parse(a, c->text, "ragged.spec", NULL, 0, &op, &err) != RT_OK ||
        rt_extent_dist_from_samples(a, samples, c->n, (rt_loc){0}, &d.dist, &err) != RT_OK ||
        (popt.lengths = &d, popt.n_lengths = 1,
         rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) ||
        rt_bindings_new(a, op, seed, &b, &err) != RT_OK ||
        rt_bindings_set_lengths(b, "len", c->lens, c->n, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "case %llu: %s\n%s\n", (unsigned long long)seed, msg, c->text);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        bool tokens = strstr(cd->summary, "GEMM of token rows") != NULL;
        if (cd->status != RT_CPU_CAND_OK || !tokens)
            fprintf(stderr, "case %llu candidate %d (%s): %s, max abs err %g\n%s\n",
                    (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), cd->max_abs_err, c->text);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
        RT_EXPECT(tokens);
    }
    rt_arena_free(a);
}

#define PROJ(K, N)                                                                                 \
    "def f(int32(B) len, float(b:B, len(b), " #K ") X, float(" #K ", " #N ") W) -> (Y) {\n"        \
    " Y(b, i, n) +=! X(b, i, k) * W(k, n)\n}"
#define FFN(K, N)                                                                                  \
    "def f(int32(B) len, float(b:B, len(b), " #K ") X, float(" #K ", " #N ") W, float(" #N         \
    ") bias) -> (Y) {\n"                                                                           \
    " t(b, i, n) +=! X(b, i, k) * W(k, n)\n"                                                       \
    " Y(b, i, n) = 0.5 * (t(b, i, n) + bias(n)) * (1 + erf((t(b, i, n) + bias(n)) * "              \
    "0.70710678))\n}"

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const rcase cases[] = {
        // Lengths 0, 1 and primes; prime K and N; a scale.
        {"size B = 8\ndef f(int32(B) len, float(b:B, len(b), 37) X, float(37, 29) W) -> (Y) {\n"
         " Y(b, i, n) +=! X(b, i, k) * W(k, n) * 0.5\n}",
         8,
         {5, 0, 1, 13, 7, 3, 0, 11},
         {0}},
        // All equal.
        {"size B = 4\n" PROJ(64, 48), 4, {16, 16, 16, 16}, {0}},
        // All zero: no rows at all.
        {"size B = 3\n" PROJ(16, 24), 3, {0, 0, 0}, {0}},
        // One long sequence and many short ones: several row blocks and k blocks.
        {"size B = 12\n" PROJ(1100, 40), 12, {700, 1, 2, 1, 3, 1, 1, 2, 5, 1, 1, 1}, {0}},
        // W read transposed, W(n, k).
        {"size B = 5\ndef f(int32(B) len, float(b:B, len(b), 19) X, float(23, 19) W) -> (Y) {\n"
         " Y(b, i, n) +=! X(b, i, k) * W(n, k)\n}",
         5,
         {2, 17, 0, 5, 1},
         {0}},
        // '+=' onto the caller's output.
        {"size B = 4\ndef f(int32(B) len, float(b:B, len(b), 31) X, float(31, 17) W"
         ") -> (float(b:B, len(b), 17) Y) {\n Y(b, i, n) += X(b, i, k) * W(k, n)\n}",
         4,
         {3, 0, 29, 1},
         {0}},
        // The FFN: bias + GELU fused into the store, primes.
        {"size B = 6\n" FFN(43, 53), 6, {7, 1, 0, 23, 2, 11}, {0}},
        // The temporary is an output too: the epilogue keeps it.
        {"size B = 3\ndef f(int32(B) len, float(b:B, len(b), 20) X, float(20, 30) W, float(30) "
         "bias) -> (t, Y) {\n t(b, i, n) +=! X(b, i, k) * W(k, n)\n"
         " Y(b, i, n) = max(t(b, i, n) + bias(n), 0)\n}",
         3,
         {5, 9, 2},
         {0}},
        // Bound lengths far longer than the planned ones: the row blocks past the plan's go
        // round the items again.
        {"size B = 4\n" FFN(24, 40), 4, {200, 150, 90, 3}, {1, 2, 1, 1}},
        // And far shorter: items without rows.
        {"size B = 4\n" PROJ(24, 40), 4, {1, 0, 2, 1}, {300, 200, 250, 100}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i);
    return rt_test_finish("test-cpu-ragged-gemm");
}
