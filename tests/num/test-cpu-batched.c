// test-cpu-batched.c: batched contractions on the packed micro-kernel (codegen/lower-cpu-gemm.c
// rt_gemm_detect_implicit with batch vars both operands read, a_batch): attention-score shapes
// with K read transposed, batch axes in every position of A, B and C, every stride order of the
// operands (k inner or outer in each, C with m or n innermost), a batch var only B reads next to
// the shared ones, '+=' onto an output, size 1, primes, several k blocks and several row and
// column blocks per entry. Every top-K candidate must run the batched GEMM path and come out
// "ok" against the reference interpreter in its child.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

static void run_case(const rt_device *dev, const char *text, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 2};
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 1, .threads = 2, .interp_max_points = (int64_t)1 << 26};
    if (rt_spec_parse(a, text, "batched.spec", NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, seed, &b, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "case %llu: %s\n%s\n", (unsigned long long)seed, msg, text);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        bool gemm = strstr(cd->summary, "implicit GEMM") != NULL;
        if (cd->status != RT_CPU_CAND_OK || !gemm)
            fprintf(stderr, "case %llu candidate %d (%s): %s, max abs err %g\n%s\n",
                    (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), cd->max_abs_err, text);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
        RT_EXPECT(gemm);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const char *const cases[] = {
        // Attention scores, K read as (b, h, j, d): B's panels transposed, primes.
        "def f(float(2, 3, 7, 5) Q, float(2, 3, 11, 5) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(b, h, i, d) * K(b, h, j, d) * 0.125\n}",
        // Heads inside the token axis of both inputs (BERT's (b, i, h, d) layout).
        "def f(float(3, 13, 2, 7) Q, float(3, 5, 2, 7) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d)\n}",
        // A batch axis between C's m and n axes.
        "def f(float(2, 9, 17) A, float(2, 17, 23) B) -> (C) {\n"
        " C(i, b, j) +=! A(b, i, k) * B(b, k, j)\n}",
        // Both operands k-major (A transposed), the batch axis last in the inputs.
        "def f(float(19, 11, 3) A, float(19, 29, 3) B) -> (C) {\n"
        " C(h, i, j) +=! A(k, i, h) * B(k, j, h)\n}",
        // C with m innermost (C^T = B^T A^T), batch first.
        "def f(float(4, 13, 9) A, float(4, 9, 31) B) -> (float(4, 31, 13) C) {\n"
        " C(b, j, i) +=! A(b, i, k) * B(b, k, j)\n}",
        // A shared batch axis and one only B reads (the heads of K alone).
        "def f(float(2, 11, 6) A, float(2, 3, 17, 6) B) -> (C) {\n"
        " C(b, h, i, j) +=! A(b, i, d) * B(b, h, j, d)\n}",
        // Two m axes and two n axes flattening, batch in the middle of A.
        "def f(float(2, 3, 5, 7) A, float(3, 7, 4, 6) B) -> (C) {\n"
        " C(h, p, q, s, t) +=! A(p, h, q, k) * B(h, k, s, t) / 3\n}",
        // '+=' onto an output over several k blocks.
        "def f(float(3, 5, 1500) A, float(3, 7, 1500) B) -> (float(3, 5, 7) C) {\n"
        " C(b, i, j) += A(b, i, k) * B(b, j, k)\n}",
        // Size 1 everywhere.
        "def f(float(1, 1, 1, 1) Q, float(1, 1, 1, 1) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(b, h, i, d) * K(b, h, j, d)\n}",
        // Several row and column blocks in each entry (M over 1024 rows, N over 4096 columns).
        "def f(float(2, 1100, 4) A, float(2, 4, 4200) B) -> (C) {\n"
        " C(b, i, j) +=! A(b, i, k) * B(b, k, j)\n}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, cases[i], 1 + i);
    return rt_test_finish("test-cpu-batched");
}
