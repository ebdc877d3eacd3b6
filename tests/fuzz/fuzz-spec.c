// fuzz-spec.c: libFuzzer target for the op-spec front end. Any input must either parse into a
// checked IR (which is then printed, to exercise the printer and JSON) or fail with an error
// that carries a location inside the input — never crash, hang, leak or trip a sanitizer.
#include "fuzz-text.h"
#include "rt.h"
#include "spec.h"

#include <jansson.h>
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
    rt_op *op = NULL;
    rt_size_binding set = {"M", 7};
    rt_status st = rt_spec_parse(a, text, "fuzz.spec", &set, size % 2, &op, &err);
    if (st == RT_OK) {
        rt_buf b;
        rt_buf_init(&b, a);
        rt_op_print(op, &b);
        json_t *j = rt_op_to_json(op);
        char *s = json_dumps(j, 0);
        free(s);
        json_decref(j);
    } else {
        char line[1024];
        rt_err_format(&err, "rtgen", true, line, sizeof line);
        if (err.where.file && (err.where.line < 0 || err.where.col < 0))
            abort(); // locations are 1-based or absent
    }
    rt_arena_free(a);
    return 0;
}
