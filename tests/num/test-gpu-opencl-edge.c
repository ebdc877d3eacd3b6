// test-gpu-opencl-edge.c: the interior/edge split of staged GPU kernels (the plan's "edge
// split", perfmodel/gpu-plan.c rt_gp_edge_split) checked on PoCL against the interpreter: matmul
// at shapes whose extents are not multiples of the tiles — in every dim (1000 x 1000 x 999
// scaled down), in the spatial dims only, in the reduction only, primes, 1 and 7 (no interior
// block: the guarded code alone), rows of 16-byte-aligned length in A, B, both or neither (the
// interior's 128-bit copies, decided per read) — and a padded strided conv with odd extents, for
// the h100, a100 and mi50 tile programs (top-2 each, printed as OpenCL, outputs poisoned:
// test-gpu-opencl-run.h). At least one candidate per split kind must be split, or the test
// would not test the split.
#include "test-gpu-opencl-run.h"

int main(void) {
    static const gcase cases[] = {
        {"matmul", "M=1,N=1,K=1"},
        {"matmul", "M=7,N=7,K=7"},
        {"matmul", "M=37,N=41,K=29"},
        {"matmul", "M=200,N=200,K=199"}, // 1000 x 1000 x 999 scaled: B's rows aligned, A's not
        {"matmul", "M=200,N=200,K=196"}, // a partial k step, both operands' rows aligned
        {"matmul", "M=131,N=197,K=67"},  // neither aligned, tails everywhere
        {"matmul", "M=200,N=136,K=256"}, // spatial edges only: exact k steps
        {"matmul", "M=256,N=128,K=203"}, // a partial k step only: no spatial edge
        {"size N = 2\nsize C = 5\nsize H = 19\nsize W = 17\nsize F = 37\nsize OH = 10\n"
         "size OW = 9\n"
         "def conv2d(float(N, C, H, W) I pad 0, float(F, C, 3, 3) Wt) -> (float(N, F, OH, OW) O) "
         "{\n O(n, f, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) * Wt(f, c, r, s)\n}",
         ""},
    };
    static const char *const devs[] = {"devices/h100.ini", "devices/a100.ini", "devices/mi50.ini"};
    rt_device ocl, dev;
    rt_err err = {0};
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_runtime *rt = NULL;
    if (rt_hal_load_device("devices/pocl-cpu.ini", &ocl, &err) != RT_OK) {
        fprintf(stderr, "devices: %s\n", err.msg);
        return 1;
    }
    if (rt_gpu_runtime_open(a, &ocl, &rt, &err) != RT_OK) {
        printf("skip: %s\n", err.msg);
        rt_arena_free(a);
        return rt_gpu_err_is_absent(&err) ? 77 : 1;
    }
    int split_before = 0;
    for (size_t d = 0; d < sizeof devs / sizeof *devs; d++) {
        if (rt_hal_load_device(devs[d], &dev, &err) != RT_OK) {
            fprintf(stderr, "devices: %s\n", err.msg);
            return 1;
        }
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            run_case(rt, &ocl, &dev, &cases[i], 1 + i);
        printf("%s: %d split kernels\n", devs[d], n_split - split_before);
        RT_EXPECT(n_split - split_before >= 4);
        split_before = n_split;
    }
    printf("%d runs, %d staged kernels, %d split, %d with 128-bit copies\n", n_runs, n_staged,
           n_split, n_vec_global);
    RT_EXPECT(n_vec_global >= 3);
    rt_arena_free(a);
    return rt_test_finish("test-gpu-opencl-edge");
}
