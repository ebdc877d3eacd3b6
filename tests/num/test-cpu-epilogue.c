// test-cpu-epilogue.c: elementwise statements fused into the packed GEMM's micro-kernel store
// (codegen/lower-cpu.c rt_gemm_epi_*, the ukernel epilogue of kir.h): linear + bias + GELU on
// random, prime and size-1 shapes, one and several k blocks, a row-broadcast scale with ReLU, a
// transposed store, the GEMM's C also an output or read by a later statement (C kept), a '+='
// GEMM, and a statement that reads C at two index orders (not fused, still right). Every top-K
// candidate is checked against the reference interpreter in its child; the fused ones must have
// no phase of their own for the fused statement.
#include "cpu-case.h"
#include "num-host.h"

typedef struct epi_case {
    const char *text;
    bool fused; // the statement after the GEMM runs in the micro-kernel's store
} epi_case;

static void run_case(const rt_device *dev, const epi_case *c, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    cpu_case cc = {.text = c->text, .file = "epi.spec", .top_k = 3, .seed = seed};
    if (cpu_case_build(a, dev, &cc))
        for (int32_t i = 0; i < cc.rep->n; i++) {
            const rt_cpu_cand *cd = &cc.rep->cands[i];
            bool gemm = strstr(cd->summary, "packed GEMM") != NULL;
            // The fused statement (the second one) has no phase: the kernel is one phase per
            // statement other than it.
            bool fused = gemm && cd->c_source && !strstr(cd->c_source, "statement 1,");
            cpu_case_expect(&cc, i, gemm && fused == c->fused, "interpreter");
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
