// test-cpu-epilogue.c: elementwise statements fused into the packed GEMM's micro-kernel store
// (codegen/lower-cpu.c rt_gemm_epi_*, the ukernel epilogue of kir.h): linear + bias + GELU on
// random, prime and size-1 shapes, one and several k blocks, a row-broadcast scale with ReLU, a
// transposed store, the GEMM's C also an output or read by a later statement (C kept), a '+='
// GEMM, and a statement that reads C at two index orders (not fused, still right). Every top-K
// candidate is checked against the reference interpreter in its child; the fused ones must have
// no phase of their own for the fused statement.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

typedef struct epi_case {
    const char *text;
    bool fused; // the statement after the GEMM runs in the micro-kernel's store
} epi_case;

static void run_case(const rt_device *dev, const epi_case *c, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 3};
    rt_cpu_options copt = {.profile = true, .budget_ms = 1, .threads = 2};
    if (rt_spec_parse(a, c->text, "epi.spec", NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, seed, &b, &err) != RT_OK ||
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
        bool gemm = strstr(cd->summary, "packed GEMM") != NULL;
        // The fused statement (the second one) has no phase: the kernel is one phase per
        // statement other than it.
        bool fused = gemm && cd->c_source && !strstr(cd->c_source, "statement 1,");
        if (cd->status != RT_CPU_CAND_OK || fused != c->fused)
            fprintf(stderr, "case %llu candidate %d (%s): %s, fused %d, max abs err %g\n",
                    (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), (int)fused, cd->max_abs_err);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
        RT_EXPECT(gemm);
        RT_EXPECT_EQ(fused, c->fused);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
#define GELU "0.5 * (t(m, n) + bias(n)) * (1 + erf((t(m, n) + bias(n)) * 0.70710678))"
    static const epi_case cases[] = {
        // Linear + bias + GELU, one k block, edge tiles along m and n.
        {"def f(float(19, 40) X, float(40, 70) Wt, float(70) bias) -> (Y) {\n"
         " t(m, n) +=! X(m, k) * Wt(k, n)\n Y(m, n) = " GELU "\n}",
         true},
        // Prime shapes, K over several kc blocks (the epilogue on the last one only).
        {"def f(float(37, 601) X, float(601, 53) Wt, float(53) bias) -> (Y) {\n"
         " t(m, n) +=! X(m, k) * Wt(k, n)\n Y(m, n) = " GELU "\n}",
         true},
        // Size 1 everywhere.
        {"def f(float(1, 1) X, float(1, 1) Wt, float(1) bias) -> (Y) {\n"
         " t(m, n) +=! X(m, k) * Wt(k, n)\n Y(m, n) = " GELU "\n}",
         true},
        // C is an output too: it is stored with its final values as well.
        {"def f(float(23, 300) X, float(300, 41) Wt, float(41) bias) -> (t, Y) {\n"
         " t(m, n) +=! X(m, k) * Wt(k, n)\n Y(m, n) = " GELU "\n}",
         true},
        // A row-broadcast scale and ReLU, scaled GEMM.
        {"def f(float(29, 31) A, float(31, 67) B, float(29) s) -> (Y) {\n"
         " t(m, n) +=! 2 * A(m, k) * B(k, n)\n Y(m, n) = max(t(m, n) * s(m), 0)\n}",
         true},
        // Transposed store of the epilogue.
        {"def f(float(21, 17) A, float(17, 35) B, float(35) bias) -> (float(35, 21) Y) {\n"
         " t(m, n) +=! A(m, k) * B(k, n)\n Y(n, m) = tanh(t(m, n) + bias(n))\n}",
         true},
        // A later statement reads C: C is kept, the statement after the GEMM still fused.
        {"def f(float(13, 290) A, float(290, 33) B, float(33) bias) -> (Y, Z) {\n"
         " t(m, n) +=! A(m, k) * B(k, n)\n Y(m, n) = exp(t(m, n) - bias(n))\n"
         " Z(m, n) = t(m, n) * 3\n}",
         true},
        // '+=' onto an output C over several k blocks, then a sigmoid of it.
        {"def f(float(11, 280) A, float(280, 47) B) -> (float(11, 47) C, Y) {\n"
         " C(m, n) += A(m, k) * B(k, n)\n Y(m, n) = sigmoid(C(m, n))\n}",
         true},
        // Reads C at two index orders: not an elementwise epilogue of the tile.
        {"def f(float(13, 20) A, float(20, 13) B) -> (Y) {\n"
         " t(m, n) +=! A(m, k) * B(k, n)\n Y(m, n) = t(m, n) + t(n, m)\n}",
         false},
    };
#undef GELU
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i);
    return rt_test_finish("test-cpu-epilogue");
}
