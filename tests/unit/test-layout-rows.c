// test-layout-rows.c: the start arrays of a ragged layout (rt_layout_compute, which the layer's
// prelude calls) come from the rows of its ragged levels, not from its elements: a tensor
// (b:B, H, i:len(b), len(b)) of 3.6e9 elements is laid out in a few milliseconds, its start
// arrays exact. The elements of the last ragged level were once enumerated one by one (tens of
// ns each: minutes here, and 34 ms of an encoder layer's prelude at batch 32); alarm() fails
// the test when that comes back.
#include "interp.h"
#include "test.h"

#include <string.h>
#include <unistd.h>

static const char *spec = "size B = 2\nsize H = 1\n"
                          "def s(int32(B) len, float(b:B, H, i:len(b), len(b)) S) -> (T) {\n"
                          "    T(b, h, i, j) = S(b, h, i, j)\n}\n";

// A last ragged level whose extent is the index above it plus or minus a term of the outer
// indices (a causal row's i + 1, an upper triangle's len(b) - i) is laid out from two
// evaluations per prefix (rt_layout_fill_affine): its start arrays equal the row-by-row sums,
// and a row that would be negative is still reported where it lies.
static void test_affine_rows(void) {
    static const char *const ext[] = {"i + 1", "1 + i", "len(b) - i", "i - 1"};
    const int32_t len[3] = {5, 0, 3};
    for (int32_t e = 0; e < 4; e++) {
        rt_arena *a = rt_arena_new(1 << 16);
        rt_err err = {0};
        rt_op *op = NULL;
        rt_bindings *b = NULL;
        char text[256];
        snprintf(text, sizeof text,
                 "size B = 3\ndef c(int32(B) len, float(b:B, i:len(b), %s) L) -> (T) {\n"
                 "    T(b, i) +=! L(b, i, j)\n}\n",
                 ext[e]);
        rt_layout lay;
        rt_status st = rt_spec_parse(a, text, "affine.spec", NULL, 0, &op, &err);
        if (st == RT_OK)
            st = rt_bindings_new(a, op, 1, &b, &err);
        if (st == RT_OK)
            st = rt_bindings_set_lengths(b, "len", len, 3, &err);
        if (st == RT_OK)
            st = rt_layout_compute(b, rt_op_tensor_index(op, "L"), &lay, &err);
        if (e == 3) { // row 0 of sequence 0 has -1 elements
            RT_EXPECT_EQ(st, RT_ERR_SPEC);
            RT_EXPECT(strstr(err.msg, "extent of dim 2 of L is negative (got -1)") != NULL);
            rt_arena_free(a);
            continue;
        }
        RT_EXPECT_EQ(st, RT_OK);
        int64_t at = 0, row = 0;
        bool ok = st == RT_OK && lay.start[2] != NULL;
        for (int32_t q = 0; q < 3 && ok; q++)
            for (int32_t i = 0; i < len[q]; i++, row++) {
                ok = ok && lay.start[2][row] == at;
                at += e == 2 ? len[q] - i : i + 1;
            }
        RT_EXPECT(ok && lay.n_rows[2] == row && lay.start[2][row] == at && lay.elems == at);
        rt_arena_free(a);
    }
}

int main(void) {
    test_affine_rows();
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
