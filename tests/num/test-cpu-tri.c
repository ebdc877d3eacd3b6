// test-cpu-tri.c: triangular (affine-range) contractions on the packed micro-kernel
// (codegen/lower-cpu-tri.c, perfmodel/cpu-tri.c): trmm with L stored packed lower-triangular
// (k in 0:i + 1) and U packed upper-triangular read as X(i + k, p) (k in 0:N - i), a dense A
// with a where-range, a scale, '+=' onto an output, a fused epilogue; sizes 1, 2 and primes, not
// multiples of the blocks, over several row and k blocks (K above the largest kc). Every top-K
// candidate must run the packed GEMM with its triangular plan and come out "ok" against the
// reference interpreter in its child.
#include "cpu-case.h"
#include "num-host.h"

static void run_case(const rt_device *dev, const char *text, const char *sets, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    char spec[2048];
    snprintf(spec, sizeof spec, "%s%s", sets, text);
    cpu_case c = {.text = spec,
                  .file = "tri.spec",
                  .top_k = 4,
                  .seed = seed,
                  .interp_max_points = (int64_t)1 << 26};
    if (cpu_case_build(a, dev, &c))
        for (int32_t i = 0; i < c.rep->n; i++) {
            const rt_cpu_cand *cd = &c.rep->cands[i];
            // The kernel's header names the plan it executed: the triangular packed GEMM.
            const char *plan = cd->ll_source ? strstr(cd->ll_source, "; plan: gemm ") : NULL;
            const char *eol = plan ? strchr(plan, '\n') : NULL;
            const char *tri = plan ? strstr(plan, " triangular") : NULL;
            cpu_case_expect(&c, i, strstr(cd->summary, "packed GEMM") && tri && eol && tri < eol,
                            "interpreter");
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
    // N = 1500 and the prime 1031 are over the largest kc (1024): several k blocks, row blocks
    // that start past the first (upper) or end before the last (lower), and k blocks packed and
    // run only where a row block's range meets them (rt_gemm_tri_kclamp: from the upper's
    // diagonal, up to the lower's), at offsets that are no multiple of kc.
    static const char *const sizes[] = {
        "size N = 1\nsize P = 1\n",    "size N = 2\nsize P = 7\n",   "size N = 7\nsize P = 2\n",
        "size N = 31\nsize P = 257\n", "size N = 97\nsize P = 31\n", "size N = 257\nsize P = 97\n",
        "size N = 1500\nsize P = 5\n", "size N = 1031\nsize P = 3\n"};
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
        // A range whose start falls as i grows (below the anti-diagonal): a row panel's
        // first k step is its last row's, and its pack starts there.
        "def f(float(N, N) A, float(N, P) X) -> (Y) {\n"
        "    Y(i, p) +=! A(i, k) * X(k, p)   where k in N - 1 - i:N\n}\n",
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
