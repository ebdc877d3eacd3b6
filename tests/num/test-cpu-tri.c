// test-cpu-tri.c: triangular (affine-range) contractions on the packed micro-kernel
// (codegen/lower-cpu-tri.c, perfmodel/cpu-tri.c): trmm with L stored packed lower-triangular
// (k in 0:i + 1) and U packed upper-triangular read as X(i + k, p) (k in 0:N - i), a dense A
// with a where-range, a scale, '+=' onto an output, a fused epilogue; sizes 1, 2 and primes, not
// multiples of the blocks, over several row and k blocks (K above the largest kc). Every top-K
// candidate must run the packed GEMM with its triangular plan and come out "ok" against the
// reference interpreter in its child.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

static void run_case(const rt_device *dev, const char *text, const char *sets, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 4};
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 1, .threads = 2, .interp_max_points = (int64_t)1 << 26};
    char spec[2048];
    snprintf(spec, sizeof spec, "%s%s", sets, text);
    if (rt_spec_parse(a, spec, "tri.spec", NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, seed, &b, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "case %llu: %s\n%s\n", (unsigned long long)seed, msg, spec);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        // The kernel's header names the plan it executed: the triangular packed GEMM.
        const char *plan = cd->ll_source ? strstr(cd->ll_source, "; plan: gemm ") : NULL;
        const char *eol = plan ? strchr(plan, '\n') : NULL;
        const char *tri = plan ? strstr(plan, " triangular") : NULL;
        bool ok = cd->status == RT_CPU_CAND_OK && strstr(cd->summary, "packed GEMM") && tri &&
                  eol && tri < eol;
        if (!ok)
            fprintf(stderr, "case %llu candidate %d (%s): %s, max abs err %g\n%s\n",
                    (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), cd->max_abs_err, spec);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
        RT_EXPECT(ok);
    }
    rt_arena_free(a);
}

static const char lower[] = "def trmm(float(i:N, i + 1) L, float(N, P) X) -> (Y) {\n"
                            "    Y(i, p) +=! L(i, k) * X(k, p)\n}\n";
static const char upper[] = "def trmm_upper(float(i:N, N - i) U, float(N, P) X) -> (Y) {\n"
                            "    Y(i, p) +=! U(i, k) * X(i + k, p)\n}\n";

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    // N = 1500 is over the largest kc (1024): several k blocks, and row blocks that start
    // past the first (upper) or end before the last (lower).
    static const char *const sizes[] = {"size N = 1\nsize P = 1\n",   "size N = 2\nsize P = 7\n",
                                        "size N = 7\nsize P = 2\n",   "size N = 31\nsize P = 257\n",
                                        "size N = 97\nsize P = 31\n", "size N = 257\nsize P = 97\n",
                                        "size N = 1500\nsize P = 5\n"};
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        run_case(&dev, lower, sizes[i], seed++);
        run_case(&dev, upper, sizes[i], seed++);
    }
    static const char *const cases[] = {
        // A dense A read only on and above the diagonal (a where-range), scaled.
        "def f(float(N, N) A, float(N, P) X) -> (Y) {\n"
        "    Y(i, p) +=! A(i, k) * X(k, p) * 0.5   where k in i:N\n}\n",
        // A band of four diagonals: both ends of k's range move with i.
        "def f(float(N, N + 3) A, float(N + 3, P) X) -> (Y) {\n"
        "    Y(i, p) +=! A(i, k) * X(k, p)   where k in i:i + 4\n}\n",
        // '+=' onto an output over several k blocks.
        "def f(float(i:N, i + 1) L, float(N, P) X) -> (float(N, P) Y) {\n"
        "    Y(i, p) += L(i, k) * X(k, p) / 4\n}\n",
        // An elementwise epilogue fused at the micro-kernel's store on each row's last k block.
        "def f(float(i:N, i + 1) L, float(N, P) X, float(P) bias) -> (Z) {\n"
        "    Y(i, p) +=! L(i, k) * X(k, p)\n"
        "    Z(i, p) = Y(i, p) * 2 + bias(p)\n}\n",
    };
    static const char *const case_sizes[] = {"size N = 1500\nsize P = 9\n",
                                             "size N = 61\nsize P = 17\n"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t j = 0; j < sizeof case_sizes / sizeof *case_sizes; j++)
            run_case(&dev, cases[i], case_sizes[j], seed++);
    return rt_test_finish("test-cpu-tri");
}
