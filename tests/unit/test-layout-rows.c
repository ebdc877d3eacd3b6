// test-layout-rows.c: the start arrays of a ragged layout (rt_layout_compute, which the layer's
// prelude calls) come from the rows of its ragged levels, not from its elements: a tensor
// (b:B, H, i:len(b), len(b)) of 3.6e9 elements is laid out in a few milliseconds, its start
// arrays exact. The elements of the last ragged level were once enumerated one by one (tens of
// ns each: minutes here, and 34 ms of an encoder layer's prelude at batch 32); alarm() fails
// the test when that comes back.
#include "interp.h"
#include "test.h"

#include <unistd.h>

static const char *spec = "size B = 2\nsize H = 1\n"
                          "def s(int32(B) len, float(b:B, H, i:len(b), len(b)) S) -> (T) {\n"
                          "    T(b, h, i, j) = S(b, h, i, j)\n}\n";

int main(void) {
    alarm(30); // the old enumeration took minutes on this tensor; the rows take milliseconds
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_bindings *b = NULL;
    const int32_t len[2] = {60000, 1};
    rt_layout lay;
    rt_status st = rt_spec_parse(a, spec, "rows.spec", NULL, 0, &op, &err);
    if (st == RT_OK)
        st = rt_bindings_new(a, op, 1, &b, &err);
    if (st == RT_OK)
        st = rt_bindings_set_lengths(b, "len", len, 2, &err);
    if (st == RT_OK)
        st = rt_layout_compute(b, rt_op_tensor_index(op, "S"), &lay, &err);
    if (st != RT_OK)
        fprintf(stderr, "%s\n", err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    if (st == RT_OK) {
        RT_EXPECT(lay.elems == 60000LL * 60000 + 1);
        // Level 2 (i): one row per (b, h); level 3 (j): one row per (b, h, i).
        RT_EXPECT(lay.start[2] && lay.start[2][0] == 0 && lay.start[2][1] == 60000 &&
                  lay.start[2][2] == 60001);
        RT_EXPECT(lay.n_rows[3] == 60001 && lay.start[3]);
        bool rows_ok = true;
        for (int64_t r = 0; lay.start[3] && r <= 60000; r++)
            rows_ok = rows_ok && lay.start[3][r] == r * 60000;
        RT_EXPECT(rows_ok);
        RT_EXPECT(lay.start[3] && lay.start[3][60001] == 60000LL * 60000 + 1);
        RT_EXPECT(!lay.start[0] && !lay.start[1]);
    }
    rt_arena_free(a);
    return rt_test_finish("test-layout-rows");
}
