// test-cpu-batched.c: batched contractions on the packed micro-kernel (codegen/lower-cpu-gemm.c
// rt_gemm_detect_implicit with batch vars both operands read, a_batch): attention-score shapes
// with K read transposed, batch axes in every position of A, B and C, every stride order of the
// operands (k inner or outer in each, C with m or n innermost), a batch var only B reads next to
// the shared ones, '+=' onto an output, size 1, primes, several k blocks and several row and
// column blocks per entry; B read along k into wide panels, the top 6 of each; A read in place
// (unscaled scores of one k block), the next entry prefetched. Every top-K
// candidate must run the batched GEMM path and come out "ok" against the reference interpreter
// in its child.
#include "cpu-case.h"
#include "num-host.h"

// Candidates whose micro-kernel reads A in place (kir.h a_ld; the C source's clamped row
// bound "uma"), which prefetch the next entry's operands ("pf_line") and which pack B by 16 x 16
// transposes (kir.h rt_kir_tpack).
static int32_t n_in_place, n_next_pf, n_t16;

// Runs the top_k of text: every candidate on the path named path and "ok" by the interpreter.
static void run_case_k(const rt_device *dev, const char *text, uint64_t seed, int32_t top_k,
                       const char *path) {
    rt_arena *a = rt_arena_new(1 << 20);
    cpu_case c = {.text = text,
                  .file = "batched.spec",
                  .top_k = top_k,
                  .seed = seed,
                  .interp_max_points = (int64_t)1 << 26};
    if (cpu_case_build(a, dev, &c))
        for (int32_t i = 0; i < c.rep->n; i++) {
            const rt_cpu_cand *cd = &c.rep->cands[i];
            cpu_case_expect(&c, i, strstr(cd->summary, path) != NULL, "interpreter");
            n_in_place += cd->c_source && strstr(cd->c_source, "const int64_t uma =") != NULL;
            n_next_pf += cd->c_source && strstr(cd->c_source, "pf_line") != NULL;
            n_t16 += cd->c_source && strstr(cd->c_source, "16 x 16 transposes") != NULL;
        }
    rt_arena_free(a);
}

static void run_case(const rt_device *dev, const char *text, uint64_t seed) {
    run_case_k(dev, text, seed, 2, "implicit GEMM");
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
    // B read along k (K of the scores, B^T of a dense GEMM) into the top 6's panels of 16-64
    // columns (gathered per k step on AVX-512): partial panels (primes), several panels per
    // block, k remainders and several k blocks; the batch axes first, between i and d, after
    // the token axis in C.
    static const char *const wide[] = {
        "def f(float(2, 3, 37, 13) Q, float(2, 3, 71, 13) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(b, h, i, d) * K(b, h, j, d)\n}",
        "def f(float(29, 3, 2, 17) Q, float(101, 3, 2, 17) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(i, b, h, d) * K(j, b, h, d) * 0.5\n}",
        "def f(float(2, 23, 11) A, float(2, 131, 11) B) -> (C) {\n"
        " C(i, b, j) +=! A(b, i, k) * B(b, j, k)\n}",
        "def f(float(3, 7, 1031) A, float(3, 53, 1031) B) -> (float(3, 7, 53) C) {\n"
        " C(b, i, j) += A(b, i, k) * B(b, j, k)\n}",
    };
    // On 16-lane vectors their panels go by 16 x 16 transposes (rt_perf_cpu_b_t16).
    int32_t t16_before = n_t16;
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
        run_case_k(&dev, wide[i], 20 + i, 6, "implicit GEMM");
    RT_EXPECT(dev.lanes != 16 || n_t16 - t16_before >= 12);
    run_case_k(&dev,
               "def f(float(67, 41) A, float(97, 41) B) -> (C) {\n"
               " C(i, j) +=! A(i, k) * B(j, k)\n}",
               30, 6, "packed GEMM");
    // The scores without a scale, one k block: A (Q) read in place by every candidate of prime
    // rows (the last row panel's rows clamped), the batch axes first or inside the tokens.
    int32_t before = n_in_place;
    run_case_k(&dev,
               "def f(float(2, 3, 53, 29) Q, float(2, 3, 47, 29) K) -> (S) {\n"
               " S(b, h, i, j) +=! Q(b, h, i, d) * K(b, h, j, d)\n}",
               40, 6, "implicit GEMM");
    run_case_k(&dev,
               "def f(float(2, 41, 3, 16) Q, float(2, 19, 3, 16) K) -> (S) {\n"
               " S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d)\n}",
               41, 6, "implicit GEMM");
    RT_EXPECT(n_in_place - before >= 8);
    RT_EXPECT(n_next_pf >= 8);
    return rt_test_finish("test-cpu-batched");
}
