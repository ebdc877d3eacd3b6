// test-cpu-ragged-gemm.c: ragged extents on the packed micro-kernel (codegen/lower-cpu-ragged.c):
// token-flattened contractions C(b, i, n) (+)= A(b, i, k) * W(k, n) over packed (b:B, len(b), D)
// tensors (CORA's proj, a ragged FFN with its bias + GELU epilogue fused into the micro-kernel's
// store), as one plain GEMM over the sum(len) rows read at run time. Lengths 0, 1, primes, all
// equal, all zero, one long plus many short; W transposed; '+=' onto an output; the temporary
// kept as an output beside the epilogue's; and lengths bound at run time that differ from the
// ones the model planned for (more and fewer rows than its row blocks). Every top-K candidate
// must run the token GEMM and come out "ok" against the reference interpreter in its child.
// Projections to and from heads: runs of adjacent dense n dims (Q(b, i, h, d) from W(m, h, d)
// or W(h, d, m)) and k dims (out-proj over (h, d), W(h, d, n)) flatten into one N or K; orders
// that do not flatten (W(h, m, d), W(m, d, h)) need only come out right, by any path.
#include "cpu-case.h"
#include "num-host.h"

#define MAX_B 32

typedef struct rcase {
    const char *text;
    int32_t n;              // batch (the length tensor's extent)
    int32_t lens[MAX_B];    // bound at run time
    int32_t planned[MAX_B]; // the model's distribution (all 0: the bound lengths)
    bool any_path;          // not a token GEMM's form: checked against the interpreter only
} rcase;

static void run_case(const rt_device *dev, const rcase *r, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    bool planned = false;
    for (int32_t i = 0; i < r->n; i++)
        planned = planned || r->planned[i] != 0;
    cpu_case c = {.text = r->text,
                  .file = "ragged.spec",
                  .top_k = 3,
                  .seed = seed,
                  .interp_max_points = (int64_t)1 << 26,
                  .lens = r->lens,
                  .planned = planned ? r->planned : NULL,
                  .n_lens = r->n};
    if (cpu_case_build(a, dev, &c))
        for (int32_t i = 0; i < c.rep->n; i++)
            cpu_case_expect(
                &c, i, r->any_path || strstr(c.rep->cands[i].summary, "GEMM of token rows") != NULL,
                "interpreter");
    rt_arena_free(a);
}

#define PROJ(K, N)                                                                                 \
    "def f(int32(B) len, float(b:B, len(b), " #K ") X, float(" #K ", " #N ") W) -> (Y) {\n"        \
    " Y(b, i, n) +=! X(b, i, k) * W(k, n)\n}"
#define FFN(K, N)                                                                                  \
    "def f(int32(B) len, float(b:B, len(b), " #K ") X, float(" #K ", " #N ") W, float(" #N         \
    ") bias) -> (Y) {\n"                                                                           \
    " t(b, i, n) +=! X(b, i, k) * W(k, n)\n"                                                       \
    " Y(b, i, n) = 0.5 * (t(b, i, n) + bias(n)) * (1 + erf((t(b, i, n) + bias(n)) * "              \
    "0.70710678))\n}"
// Q(b, i, h, d) (+)= X(b, i, m) * W(WDIMS) over H = 3 heads of D = 5, M = 7.
#define HEADS(WDIMS, WREAD)                                                                        \
    "size B = 8\nsize H = 3\nsize D = 5\nsize M = 7\n"                                             \
    "def f(int32(B) len, float(b:B, len(b), M) X, float(" WDIMS ") W) -> (Q) {\n"                  \
    " Q(b, i, h, d) +=! X(b, i, m) * W(" WREAD ")\n}"
#define HEAD_LENS                                                                                  \
    { 0, 1, 2, 3, 5, 7, 11, 13 }

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const rcase cases[] = {
        // Lengths 0, 1 and primes; prime K and N; a scale.
        {"size B = 8\ndef f(int32(B) len, float(b:B, len(b), 37) X, float(37, 29) W) -> (Y) {\n"
         " Y(b, i, n) +=! X(b, i, k) * W(k, n) * 0.5\n}",
         8,
         {5, 0, 1, 13, 7, 3, 0, 11},
         {0},
         false},
        // All equal.
        {"size B = 4\n" PROJ(64, 48), 4, {16, 16, 16, 16}, {0}, false},
        // All zero: no rows at all.
        {"size B = 3\n" PROJ(16, 24), 3, {0, 0, 0}, {0}, false},
        // One long sequence and many short ones: several row blocks and k blocks.
        {"size B = 12\n" PROJ(1100, 40), 12, {700, 1, 2, 1, 3, 1, 1, 2, 5, 1, 1, 1}, {0}, false},
        // W read transposed, W(n, k).
        {"size B = 5\ndef f(int32(B) len, float(b:B, len(b), 19) X, float(23, 19) W) -> (Y) {\n"
         " Y(b, i, n) +=! X(b, i, k) * W(n, k)\n}",
         5,
         {2, 17, 0, 5, 1},
         {0},
         false},
        // '+=' onto the caller's output.
        {"size B = 4\ndef f(int32(B) len, float(b:B, len(b), 31) X, float(31, 17) W"
         ") -> (float(b:B, len(b), 17) Y) {\n Y(b, i, n) += X(b, i, k) * W(k, n)\n}",
         4,
         {3, 0, 29, 1},
         {0},
         false},
        // The FFN: bias + GELU fused into the store, primes.
        {"size B = 6\n" FFN(43, 53), 6, {7, 1, 0, 23, 2, 11}, {0}, false},
        // The temporary is an output too: the epilogue keeps it.
        {"size B = 3\ndef f(int32(B) len, float(b:B, len(b), 20) X, float(20, 30) W, float(30) "
         "bias) -> (t, Y) {\n t(b, i, n) +=! X(b, i, k) * W(k, n)\n"
         " Y(b, i, n) = max(t(b, i, n) + bias(n), 0)\n}",
         3,
         {5, 9, 2},
         {0},
         false},
        // Bound lengths far longer than the planned ones: the row blocks past the plan's go
        // round the items again.
        {"size B = 4\n" FFN(24, 40), 4, {200, 150, 90, 3}, {1, 2, 1, 1}, false},
        // And far shorter: items without rows.
        {"size B = 4\n" PROJ(24, 40), 4, {1, 0, 2, 1}, {300, 200, 250, 100}, false},
        // To heads: N = H * D from W(m, h, d), and from W(h, d, m) (W read transposed).
        {HEADS("M, H, D", "m, h, d"), 8, HEAD_LENS, {0}, false},
        {HEADS("H, D, M", "h, d, m"), 8, HEAD_LENS, {0}, false},
        // Orders that do not flatten: m between h and d, (d, h) against C's (h, d).
        {HEADS("H, M, D", "h, m, d"), 8, HEAD_LENS, {0}, true},
        {HEADS("M, D, H", "m, d, h"), 8, HEAD_LENS, {0}, true},
        // From heads: the out-proj's K = H * D, primes.
        {"size B = 6\ndef f(int32(B) len, float(b:B, len(b), 3, 5) A, float(3, 5, 7) W) -> (Y) {\n"
         " Y(b, i, n) +=! A(b, i, h, d) * W(h, d, n)\n}",
         6,
         {13, 0, 1, 7, 2, 11},
         {0},
         false},
        // From heads to heads; the k run in the other order than A's (square heads: only the order
        // tells it apart) does not flatten.
        {"size B = 5\ndef f(int32(B) len, float(b:B, len(b), 3, 5) A, float(3, 5, 2, 7) W) -> (Y) "
         "{\n Y(b, i, g, n) +=! A(b, i, h, d) * W(h, d, g, n)\n}",
         5,
         {3, 1, 0, 17, 5},
         {0},
         false},
        {"size B = 5\ndef f(int32(B) len, float(b:B, len(b), 4, 4) A, float(4, 4, 7) W) -> (Y) {\n"
         " Y(b, i, n) +=! A(b, i, h, d) * W(d, h, n)\n}",
         5,
         {3, 1, 0, 17, 5},
         {0},
         true},
        // The out-proj with the layer's bias + residual after it.
        {"size B = 4\ndef f(int32(B) len, float(b:B, len(b), 3, 5) A, float(3, 5, 7) W, float(7) "
         "bias, float(b:B, len(b), 7) R) -> (Y) {\n t(b, i, n) +=! A(b, i, h, d) * W(h, d, n)\n"
         " Y(b, i, n) = t(b, i, n) + bias(n) + R(b, i, n)\n}",
         4,
         {11, 0, 1, 5},
         {0},
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i);
    return rt_test_finish("test-cpu-ragged-gemm");
}
