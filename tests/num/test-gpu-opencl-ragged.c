// test-gpu-opencl-ragged.c: ragged operators through the GPU code generator on PoCL — vgemm,
// triangular trmm, qkt and causal masked_qkt, ragged softmax, attn_v, proj — with random lengths
// (including 0 and 1), bounds from the length tensors, offsets from rt_layout's start arrays and
// grid y / z sized from the bound lengths, for the v100 and mi50 tile programs
// (test-gpu-opencl-run.h).
#include "test-gpu-opencl-run.h"

int main(void) {
    static const gcase cases[] = {
        {"vgemm", "B=3"},
        {"trmm", "N=19,P=23"},
        {"qkt", "B=3,H=2,D=5"},
        {"masked_qkt", "B=3,H=2,D=5"},
        {"ragged_softmax", "B=3,H=2"},
        {"attn_v", "B=3,H=2,D=7"},
        {"proj", "B=3"},
    };
    return run_cases("test-gpu-opencl-ragged", cases, sizeof cases / sizeof *cases);
}
