// test-gpu-opencl-conv.c: convolutions, pooling, reductions and elementwise ops through the GPU
// code generator on PoCL — conv2d with stride and halo (pad reads in the shared-memory copies),
// depthwise conv, average pooling with and without padding, reduce_mean, softmax's statement
// chain, relu — for the v100 and mi50 tile programs (test-gpu-opencl-run.h).
#include "test-gpu-opencl-run.h"

int main(void) {
    static const gcase cases[] = {
        {"conv2d", "N=2,C=3,H=9,W=7,F=5,OH=4,OW=3"},
        {"def C0(float(2, 5, 7, 7) I pad 0, float(6, 5, 3, 3) Wt) -> (float(2, 6, 7, 7) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}",
         ""},
        {"def dwconv(float(2, 3, 11, 9) I pad 0, float(3, 5, 5) Wt) -> (float(2, 3, 6, 5) O) {\n"
         " O(n, c, y, x) +=! I(n, c, 2*y + r - 2, 2*x + s - 2) * Wt(c, r, s)\n}",
         ""},
        {"def avgpool(float(2, 3, 11, 9) I) -> (float(2, 3, 5, 4) O) {\n"
         " O(n, c, y, x) +=! I(n, c, 2*y + r, 2*x + s) / 9   where r in 0:3, s in 0:3\n}",
         ""},
        {"def P1(float(2, 5, 9, 9) I pad 0) -> (float(2, 5, 5, 5) O) {\n"
         " O(n, c, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) / 9   where r in 0:3, s in 0:3\n}",
         ""},
        {"def D2(float(2, 5, 7, 7) I, float(5, 4) Wt) -> (float(2, 5, 4, 7, 7) O) {\n"
         " O(n, c, q, y, x) = I(n, c, y, x) * Wt(c, q)\n}",
         ""},
        {"def reduce_mean(float(3, 5, 67) I) -> (O) {\n O(b, r) +=! I(b, r, l) / 67\n}", ""},
        {"def R2(float(3, 7, 11, 11) I) -> (O) {\n O(n, c) +=! I(n, c, h, w) / 121\n}", ""},
        {"def softmax(float(13, 37) X) -> (Y) {\n mx(n) max=! X(n, d)\n"
         " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n}",
         ""},
        {"def softmax1(float(1, 1) X) -> (Y) {\n mx(n) max=! X(n, d)\n"
         " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n}",
         ""},
        {"def relu(float(3, 7, 5, 19) I) -> (O) {\n O(n, c, h, w) = max(I(n, c, h, w), 0)\n}", ""},
    };
    return run_cases("test-gpu-opencl-conv", cases, sizeof cases / sizeof *cases);
}
