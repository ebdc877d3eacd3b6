// test-gpu-opencl-dense.c: dense contractions through the GPU code generator on PoCL — matmul
// at aligned, prime, 1x1x1, ragged-tail and odd (1000x1000x99, primes) shapes, with and without
// the plan's 128-bit loads, '+=' accumulation, linear + bias + GELU with
// the fused epilogue, attention scores — for the v100 and mi50 tile programs
// (test-gpu-opencl-run.h). The contractions must go through shared memory (staged kernels).
#include "test-gpu-opencl-run.h"

int main(void) {
    static const gcase cases[] = {
        {"matmul", "M=64,N=64,K=64"},
        {"matmul", "M=37,N=53,K=29"}, // primes: edge tiles everywhere
        {"matmul", "M=1,N=1,K=1"},
        {"matmul", "M=131,N=257,K=19"}, // ragged tails of the 128-wide block tiles
        // 128-bit loads (chunked register tiles, transposed A): full aligned tiles (128-bit
        // copies), odd sizes with tails in every dim (scalar guarded copies, 128-bit fragments)
        {"matmul", "M=128,N=256,K=64"},
        {"matmul", "M=1000,N=1000,K=99"},
        {"matmul", "M=1009,N=1013,K=7"},
        {"size M = 23\nsize N = 19\nsize K = 31\n"
         "def acc(float(M, K) A, float(K, N) B) -> (float(M, N) C) {\n"
         " C(m, n) += A(m, k) * B(k, n)\n}",
         ""},
        {"size M = 19\ndef linear_gelu(float(M, 40) X, float(40, 70) Wt, float(70) bias) -> (Y) {\n"
         " t(m, n) +=! X(m, k) * Wt(k, n)\n"
         " Y(m, n) = 0.5 * (t(m, n) + bias(n)) * (1 + erf((t(m, n) + bias(n)) * 0.70710678))\n}",
         ""},
        {"def qk(float(3, 37, 16) Q, float(3, 37, 16) K) -> (S) {\n"
         " S(h, i, j) +=! Q(h, i, d) * K(h, j, d)\n}",
         ""},
    };
    int rc = run_cases("test-gpu-opencl-dense", cases, sizeof cases / sizeof *cases);
    if (rc == 0 && n_staged < 10) {
        fprintf(stderr, "expected the contractions to be staged (got %d staged kernels)\n",
                n_staged);
        return 1;
    }
    if (rc == 0 && (n_vec_shared < 4 || n_vec_global < 2)) {
        fprintf(stderr,
                "expected 128-bit loads in the staged kernels (got %d with shared, %d "
                "with global ones)\n",
                n_vec_shared, n_vec_global);
        return 1;
    }
    return rc;
}
