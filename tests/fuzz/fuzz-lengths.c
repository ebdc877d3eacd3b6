// fuzz-lengths.c: libFuzzer target for the lengths-file parser (src/ref/lengths.c, --lengths
// NAME=FILE). Any input must either parse, after which a list or a histogram is taken for a
// tensor of a few entries (every taken length one the file holds, never negative), or fail with
// an error that names the file and carries a 1-based line (or none), and turns into the CLI's
// option-style message: never crash, hang, leak or trip a sanitizer. Seed the corpus with
// bench/data/ (histograms) and tests/err/cmd/ (malformed files).
#include "fuzz-text.h"
#include "lengths.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rt_arena *a;
    char *text = rt_fuzz_text(data, size, 1 << 16, &a);
    if (!text)
        return 0;
    rt_err err;
    rt_err_clear(&err);
    rt_lengths_file *f = NULL;
    rt_status st = rt_lengths_parse(a, text, "fuzz.len", &f, &err);
    if (st == RT_OK) {
        // A list must hold exactly the count asked for; a histogram is sampled.
        int32_t out[7];
        int64_t count = f->is_histogram ? 7 : (f->n <= 7 ? f->n : 7);
        rt_err_clear(&err);
        st = rt_lengths_take(f, "len", count, size, out, &err);
        if (st == RT_OK && !f->is_histogram && f->n <= 7 &&
            memcmp(out, f->values, (size_t)count * sizeof *out) != 0)
            abort(); // a list is taken as it is
        for (int64_t i = 0; st == RT_OK && i < count; i++) {
            bool held = false;
            for (int64_t b = 0; b < f->n && !held; b++)
                held = f->values[b] == out[i];
            if (out[i] < 0 || !held)
                abort();
        }
    }
    if (st != RT_OK && st != RT_ERR_NOMEM) {
        if (!err.msg[0] || (err.where.file && err.where.line < 0))
            abort();
        rt_file_error_to_option(&err, "--lengths", "len", "fuzz.len");
        if (!err.msg[0])
            abort();
    }
    rt_arena_free(a);
    return 0;
}
