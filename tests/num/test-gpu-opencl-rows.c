// test-gpu-opencl-rows.c: row-wise groups in the GPU plan's rows mode (gpu-plan.h: the threads
// of a row element fold their shares of the row, combine them through shared memory in a tree,
// a barrier after every statement) on PoCL against the reference interpreter, for the v100 and
// mi50 tile programs (test-gpu-opencl-run.h): softmax at prime, 1 x 1 and long-row shapes,
// layer normalization (two reductions and their elementwise statements), and ragged softmax on
// a work list with generated lengths (0 and 1 among them), where a block past the list takes
// part in every barrier.
#include "test-gpu-opencl-run.h"

#define SOFTMAX                                                                                    \
    "def softmax(float(N, D) X) -> (Y) {\n"                                                        \
    " mx(n) max=! X(n, d)\n e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n"                   \
    " Y(n, d) = e(n, d) / s(n)\n}\n"

int main(void) {
    static const gcase cases[] = {
        {"size N = 37\nsize D = 131\n" SOFTMAX, ""},
        {"size N = 1\nsize D = 1\n" SOFTMAX, ""},
        {"size N = 5\nsize D = 1000\n" SOFTMAX, ""},
        {"size N = 23\nsize D = 257\n"
         "def layernorm(float(N, D) X, float(D) g, float(D) b) -> (Y) {\n"
         " mu(n) +=! X(n, d) / 257\n"
         " c(n, d) = X(n, d) - mu(n)\n"
         " var(n) +=! c(n, d) * c(n, d) / 257\n"
         " r(n) = 1 / sqrt(var(n) + 0.00001)\n"
         " Y(n, d) = c(n, d) * r(n) * g(d) + b(d)\n}\n",
         ""},
        {"ragged_softmax", "B=5,H=3"},
    };
    int rc = run_cases("test-gpu-opencl-rows", cases, sizeof cases / sizeof *cases);
    if (rc == 0 && n_rows < 12) {
        fprintf(stderr, "expected the row groups in rows mode (got %d rows phases)\n", n_rows);
        return 1;
    }
    printf("%d rows phases\n", n_rows);
    return rc;
}
