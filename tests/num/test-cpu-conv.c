// test-cpu-conv.c: convolutions on the CPU backend's implicit-GEMM path (codegen/lower-cpu.c):
// stride 1 and 2, padding (zero and non-zero pad values), 1x1 and 3x3 filters, prime spatial
// sizes, batch 1 and 3, a single input channel, a scaled and an accumulating statement, and K
// spanning several kc blocks; packs by row segments crossing panels, x along a non-innermost dim,
// an in-bounds padded read; masked contiguous packs (stride 1 'same', 2-D and 3-D) with a folded
// batch, a 1x1 image, NHWC (masked A rows for one channel). Every case is built for the host,
// each top-K candidate checked against the reference interpreter in its child, and the lowering
// must be the implicit GEMM; depthwise convolution (no channel reduction) must stay on the
// general path. Last, the packed GEMM's blocking must be the perfmodel's own view of it
// (rt_perf_cpu_gemm_view: one rule).
#include "test.h"
#include "cpu-case.h"
#include "num-host.h"

#include "emit.h"
#include "compare.h"
#include "perfmodel.h"
#include "rtgen.h"

#include <stdio.h>
#include <string.h>

typedef struct conv_case {
    const char *text;
    bool implicit; // the winner must lower to the implicit GEMM
    bool large;    // too large to interpret: checked with two random vectors instead (vcheck.h)
} conv_case;

static void run_case(const rt_device *dev, const conv_case *cc, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_bindings *b2 = NULL;
    cpu_case c = {.text = cc->text, .file = "conv.spec", .top_k = 2, .seed = seed};
    if (!cpu_case_build(a, dev, &c)) {
        rt_arena_free(a);
        return;
    }
    rt_cpu_report *rep = c.rep;
    const rt_op *op = c.op;
    const rt_bindings *b = c.b;
    for (int32_t i = 0; i < rep->n; i++)
        cpu_case_expect(&c, i,
                        (strstr(rep->cands[i].summary, "implicit GEMM") != NULL) == cc->implicit,
                        cc->large ? "random-vector" : "interpreter");
    // The winner in-process on a second set of the same inputs gives the same outputs.
    RT_EXPECT(rep->winner >= 0);
    if (rep->winner >= 0 && rt_bindings_new(a, op, seed, &b2, &err) == RT_OK &&
        rt_cpu_run_winner(rep, b2, &err) == RT_OK) {
        for (int32_t t = 0; t < op->n_tensors; t++) {
            if (op->tensors[t].role != RT_ROLE_OUTPUT || cc->large)
                continue;
            rt_compare_result cr;
            rt_compare_data(b->tensors[t].data, b2->tensors[t].data, b->tensors[t].layout.elems,
                            &cr);
            if (!rt_compare_accept(&cr, op->tensors[t].dtype))
                fprintf(stderr, "case %llu: winner output nmse %g, max err %g\n",
                        (unsigned long long)seed, cr.nmse, cr.max_abs_err);
            RT_EXPECT(rt_compare_accept(&cr, op->tensors[t].dtype));
        }
    } else {
        fprintf(stderr, "case %llu: run winner: %s\n", (unsigned long long)seed, err.msg);
        RT_EXPECT(0);
    }
    rt_arena_free(a);
}

// The backend compiles exactly the blocking the model predicts for a plain GEMM.
static void blocking_case(const rt_device *dev, const char *sets) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_size_binding bind[3] = {{"M", 0}, {"N", 0}, {"K", 0}};
    RT_EXPECT_EQ(sscanf(sets, "%lld %lld %lld", (long long *)&bind[0].value,
                        (long long *)&bind[1].value, (long long *)&bind[2].value),
                 3);
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 3};
    if (rt_spec_load(a, "examples/matmul.spec", bind, 3, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) {
        fprintf(stderr, "blocking %s: %s\n", sets, err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    for (int32_t i = 0; i < perf->n_cands; i++) {
        rt_perf_cpu_gemm g;
        RT_EXPECT(rt_perf_cpu_gemm_view(perf->model, &perf->cands[i], &g));
        rt_kir_kernel *k = NULL;
        rt_lower_options lopt = {.rank = i};
        RT_EXPECT_EQ(rt_lower_cpu(a, op, dev, perf->model, &perf->cands[i], &lopt, &k, &err),
                     RT_OK);
        if (!k)
            continue;
        const char *want = rt_arena_printf(a,
                                           "blocks mc=%lld nc=%lld kc=%lld, micro-kernel "
                                           "%lldx%lld",
                                           (long long)g.mc, (long long)g.nc, (long long)g.kc,
                                           (long long)g.mr, (long long)g.nr);
        bool found = false;
        for (int32_t ph = 0; ph < k->n_phases; ph++)
            found = found || strstr(k->phases[ph].what, want) != NULL;
        if (!found)
            fprintf(stderr, "blocking %s candidate %d: want '%s' in '%s'\n", sets, (int)i, want,
                    k->n_phases > 0 ? k->phases[0].what : "");
        RT_EXPECT(found);
        RT_EXPECT(g.items >= 1);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const conv_case cases[] = {
        // 3x3, stride 1, padding 1, batch 1, prime spatial sizes.
        {"def c(float(1, 3, 11, 13) I pad 0, float(5, 3, 3, 3) Wt) -> (float(1, 5, 11, 13) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // 3x3, stride 2, padding 1, batch 3 (reads past the bottom/right edge too).
        {"def c(float(3, 4, 13, 11) I pad 0, float(7, 4, 3, 3) Wt) -> (float(3, 7, 7, 6) O) {\n"
         " O(n, f, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // 1x1, no padding, a single input channel, batch 3.
        {"def c(float(3, 1, 7, 5) I, float(17, 1) Wt) -> (float(3, 17, 7, 5) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y, x) * Wt(f, c)\n}",
         true, false},
        // 1x1 with many channels and a prime output size.
        {"def c(float(1, 37, 7, 11) I, float(41, 37) Wt) -> (float(1, 41, 7, 11) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y, x) * Wt(f, c)\n}",
         true, false},
        // c = 1, 3x3, a non-zero pad value, scaled by a constant.
        {"def c(float(1, 1, 5, 17) I pad 0.5, float(3, 1, 3, 3) Wt) -> (float(1, 3, 5, 17) O) {\n"
         " O(n, f, y, x) +=! 0.25 * I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // '+=': accumulates onto O's values; 5x5 padding 2, stride 2 along y only.
        {"def c(float(2, 2, 9, 7) I pad 0, float(3, 2, 5, 5) Wt) -> (float(2, 3, 5, 7) O) {\n"
         " O(n, f, y, x) += I(n, c, 2*y + r - 2, x + s - 2) * Wt(f, c, r, s)\n}",
         true, false},
        // K = 64 x 9 spans several kc blocks; N = 17 x 19 several nr panels.
        {"def c(float(2, 64, 17, 19) I pad 0, float(37, 64, 3, 3) Wt) -> (float(2, 37, 17, 19) O) "
         "{\n O(n, f, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}",
         true, true},
        // Row segments crossing nr panels: width 37, stride 2 along x only, pad value 1.5.
        {"def c(float(1, 2, 6, 75) I pad 1.5, float(4, 2, 3, 3) Wt) -> (float(1, 4, 6, 37) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y + r - 1, 2*x + s - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // x indexes a non-innermost dim of I (strided segment copies), batch 3, scaled.
        {"def c(float(3, 2, 9, 6) I pad 0, float(5, 2, 3, 3) Wt) -> (float(3, 5, 6, 9) O) {\n"
         " O(n, f, y, x) +=! 0.5 * I(n, c, x + s - 1, y + r - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // A padded tensor read in bounds only (1x1): segments without a halo.
        {"def c(float(2, 3, 5, 7) I pad 2, float(6, 3) Wt) -> (float(2, 6, 5, 7) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y, x) * Wt(f, c)\n}",
         true, false},
        // Stride 1, 'same' padding: masked contiguous packs; batch 5 folded into the work
        // items over several kc blocks (K = 37 x 9), prime sizes.
        {"def c(float(5, 37, 7, 5) I pad 0, float(11, 37, 3, 3) Wt) -> (float(5, 11, 7, 5) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // Size 1: a 1x1 image under a 3x3 filter (every lane but the centre is padding).
        {"def c(float(1, 1, 1, 1) I pad 0, float(1, 1, 3, 3) Wt) -> (float(1, 1, 1, 1) O) {\n"
         " O(n, f, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}",
         true, false},
        // 3-D convolution: three padded dims move with the rows, a non-zero pad value, scaled.
        {"def c(float(2, 2, 5, 4, 7) I pad 0.25, float(3, 2, 3, 3, 3) Wt) -> "
         "(float(2, 3, 5, 4, 7) O) {\n"
         " O(n, f, z, y, x) +=! 0.5 * I(n, c, z + t - 1, y + r - 1, x + s - 1) * "
         "Wt(f, c, t, r, s)\n}",
         true, false},
        // NHWC: the input is the A operand (its rows are pixels, strided by the channels).
        {"def c(float(2, 6, 5, 7) I pad 0, float(3, 3, 7, 19) Wt) -> (float(2, 6, 5, 19) O) {\n"
         " O(n, y, x, f) +=! I(n, y + r - 1, x + s - 1, c) * Wt(r, s, c, f)\n}",
         true, false},
        // NHWC with one channel: the A operand's rows (n, y, x) are contiguous in the input, so
        // A is the masked pack (across image boundaries), with a non-zero pad value.
        {"def c(float(2, 6, 5, 1) I pad 0.5, float(3, 3, 1, 19) Wt) -> (float(2, 6, 5, 19) O) {\n"
         " O(n, y, x, f) +=! I(n, y + r - 1, x + s - 1, c) * Wt(r, s, c, f)\n}",
         true, false},
        // Depthwise: no channel reduction, so the general path.
        {"def c(float(2, 3, 11, 9) I pad 0, float(3, 3, 3) Wt) -> (float(2, 3, 11, 9) O) {\n"
         " O(n, c, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(c, r, s)\n}",
         false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i);
    blocking_case(&dev, "64 64 64");
    blocking_case(&dev, "37 53 29");
    blocking_case(&dev, "300 517 260");
    return rt_test_finish("test-cpu-conv");
}
