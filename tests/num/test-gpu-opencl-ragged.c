// test-gpu-opencl-ragged.c: ragged operators through the GPU code generator on PoCL — vgemm,
// triangular trmm, qkt and causal masked_qkt, ragged softmax, attn_v, proj — with random lengths
// (including 0 and 1), bounds from the length tensors, offsets from rt_layout's start arrays and
// grid y / z sized from the bound lengths, for the v100 and mi50 tile programs
// (test-gpu-opencl-run.h). qkt, masked_qkt, attn_v and vgemm are staged (16 kernels: 4 ops, 2
// devices, top-2): their ragged tiles copied to shared memory by copies guarded by the lengths,
// ragged reductions (attn_v's j, vgemm's k) in a run-time number of steps, blocks past a
// sequence's length skipping them.
#include "test-gpu-opencl-run.h"

int main(void) {
    static const gcase cases[] = {
        {"vgemm", "B=3"},
        {"trmm", "N=19,P=23"},
        // several row blocks with the diagonal inside them: the rows of one thread have
        // different k ranges
        {"trmm", "N=131,P=37"},
        {"size N = 8\nsize P = 8\n"
         "def trmm_upper(float(i:N, N - i) U, float(N, P) X) -> (Y) {\n"
         "    Y(i, p) +=! U(i, k) * X(i + k, p)\n}\n",
         "N=131,P=37"},
        {"qkt", "B=3,H=2,D=5"},
        {"masked_qkt", "B=3,H=2,D=5"},
        {"ragged_softmax", "B=3,H=2"},
        {"attn_v", "B=3,H=2,D=7"},
        {"proj", "B=3"},
    };
    min_staged = 16;
    return run_cases("test-gpu-opencl-ragged", cases, sizeof cases / sizeof *cases);
}
