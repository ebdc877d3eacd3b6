// rt-err.c: the one error type (first error wins, location first), status names and exit codes,
// the data-type table, and file reading. Only the drivers print errors; this file formats them.
#include "rt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rt_status rt_err_vset(rt_err *err, rt_status st, rt_loc where, const char *raised_file,
                      int32_t raised_line, const char *fmt, va_list ap) {
    if (!err || err->status != RT_OK)
        return st;
    err->status = st;
    err->where = where;
    err->raised_file = raised_file;
    err->raised_line = raised_line;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    err->note[0] = '\0';
    err->log = NULL;
    return st;
}

rt_status rt_err_set(rt_err *err, rt_status st, rt_loc where, const char *raised_file,
                     int32_t raised_line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rt_err_vset(err, st, where, raised_file, raised_line, fmt, ap);
    va_end(ap);
    return st;
}

void rt_err_note(rt_err *err, const char *fmt, ...) {
    if (!err || err->status == RT_OK || err->note[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->note, sizeof err->note, fmt, ap);
    va_end(ap);
}

void rt_err_clear(rt_err *err) {
    memset(err, 0, sizeof *err);
}

const char *rt_status_name(rt_status st) {
    // clang-format off
    static const char *const names[] = {
        [RT_OK]          = "ok",
        [RT_ERR_SYNTAX]  = "syntax error",
        [RT_ERR_SPEC]    = "invalid operator",
        [RT_ERR_DEVICE]  = "device error",
        [RT_ERR_BACKEND] = "backend failure",
        [RT_ERR_USAGE]   = "usage error",
        [RT_ERR_NOMEM]   = "out of memory",
        [RT_ERR_IO]      = "i/o error",
        [RT_ERR_NOFIT]   = "no candidate fits",
    };
    // clang-format on
    _Static_assert(sizeof names / sizeof names[0] == RT_STATUS_COUNT, "ORDER RT_STATUS");
    return (unsigned)st < RT_STATUS_COUNT ? names[st] : "unknown status";
}

int rt_status_exit_code(rt_status st) {
    switch (st) {
    case RT_OK:
        return 0;
    case RT_ERR_USAGE:
        return 2;
    case RT_ERR_BACKEND:
        return 3;
    case RT_ERR_NOFIT:
        return 4;
    default:
        return 1;
    }
}

void rt_err_format(const rt_err *err, const char *prog, bool verbose, char *buf, size_t size) {
    size_t n;
    if (err->where.file && err->where.line > 0 && err->where.col > 0)
        n = (size_t)snprintf(buf, size, "%s:%d:%d: error: %s", err->where.file,
                             (int)err->where.line, (int)err->where.col, err->msg);
    else if (err->where.file && err->where.line > 0)
        n = (size_t)snprintf(buf, size, "%s:%d: error: %s", err->where.file, (int)err->where.line,
                             err->msg);
    else if (err->where.file)
        n = (size_t)snprintf(buf, size, "%s: error: %s", err->where.file, err->msg);
    else
        n = (size_t)snprintf(buf, size, "%s: error: %s", prog, err->msg);
    if (n < size && err->note[0])
        n += (size_t)snprintf(buf + n, size - n, " (%s)", err->note);
    if (n < size && verbose && err->raised_file)
        snprintf(buf + n, size - n, " [raised at %s:%d]", err->raised_file, (int)err->raised_line);
}

void rt_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "rtgen: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}

// ---------------------------------------------------------------------------------------------
// Data types. ORDER RT_DTYPE
// ---------------------------------------------------------------------------------------------

typedef struct rt_dtype_info {
    const char *name, *ctype;
    int32_t bytes;
    bool is_int;
} rt_dtype_info;

// clang-format off
static const rt_dtype_info rt_dtype_table[] = {
    [RT_DTYPE_F32]  = {"float",    "float",    4, false},
    [RT_DTYPE_F16]  = {"half",     "uint16_t", 2, false},
    [RT_DTYPE_BF16] = {"bfloat16", "uint16_t", 2, false},
    [RT_DTYPE_F64]  = {"double",   "double",   8, false},
    [RT_DTYPE_I32]  = {"int32",    "int32_t",  4, true},
    [RT_DTYPE_I8]   = {"int8",     "int8_t",   1, true},
};
// clang-format on
_Static_assert(sizeof rt_dtype_table / sizeof rt_dtype_table[0] == RT_DTYPE_COUNT,
               "ORDER RT_DTYPE");

const char *rt_dtype_name(rt_dtype t) {
    return rt_dtype_table[t].name;
}
const char *rt_dtype_ctype(rt_dtype t) {
    return rt_dtype_table[t].ctype;
}
int32_t rt_dtype_bytes(rt_dtype t) {
    return rt_dtype_table[t].bytes;
}
bool rt_dtype_is_int(rt_dtype t) {
    return rt_dtype_table[t].is_int;
}

bool rt_dtype_from_name(const char *name, size_t len, rt_dtype *out) {
    for (int i = 0; i < RT_DTYPE_COUNT; i++) {
        if (strlen(rt_dtype_table[i].name) == len &&
            memcmp(rt_dtype_table[i].name, name, len) == 0) {
            *out = (rt_dtype)i;
            return true;
        }
    }
    return false;
}

// Rounds v to a float with `mant` explicit mantissa bits and exponent range of `min_exp` ..
// `max_exp` (IEEE binary16 / bfloat16), round-to-nearest-even, saturating to infinity.
static double rt_round_small_float(double v, int mant, int min_exp, int max_exp) {
    if (v == 0.0 || isnan(v) || isinf(v))
        return v;
    int e;
    frexp(v, &e); // v = f * 2^e, 0.5 <= |f| < 1
    e -= 1;       // v = g * 2^e, 1 <= |g| < 2
    if (e < min_exp)
        e = min_exp; // subnormal: fixed quantum
    double quantum = ldexp(1.0, e - mant);
    double r = nearbyint(v / quantum) * quantum;
    if (fabs(r) >= ldexp(2.0 - ldexp(1.0, -mant), max_exp) * (1.0 + ldexp(1.0, -mant - 1)))
        return v > 0 ? HUGE_VAL : -HUGE_VAL;
    return r;
}

double rt_dtype_round(rt_dtype t, double v) {
    switch (t) {
    case RT_DTYPE_F32:
        return (double)(float)v;
    case RT_DTYPE_F16:
        return rt_round_small_float(v, 10, -14, 15);
    case RT_DTYPE_BF16:
        return rt_round_small_float(v, 7, -126, 127);
    case RT_DTYPE_F64:
        return v;
    case RT_DTYPE_I32:
        if (isnan(v) || v >= 2147483648.0 || v < -2147483648.0)
            return 0.0;
        return (double)(int32_t)v;
    case RT_DTYPE_I8:
        if (isnan(v) || v >= 2147483648.0 || v < -2147483648.0)
            return 0.0;
        return (double)(int8_t)(int32_t)v;
    default:
        rt_assert(!"bad dtype");
    }
}

rt_status rt_read_file(rt_arena *a, const char *path, char **out_text, size_t *out_len,
                       rt_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return rt_fail(err, RT_ERR_IO, rt_loc_make(path, 0, 0), "cannot open: %s", strerror(errno));
    rt_buf b;
    rt_buf_init(&b, a);
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rt_buf_putn(&b, chunk, n);
    bool bad = ferror(f);
    fclose(f);
    if (bad)
        return rt_fail(err, RT_ERR_IO, rt_loc_make(path, 0, 0), "read failed");
    if (b.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory reading %s", path);
    if (!b.data)
        rt_buf_puts(&b, "");
    if (b.oom || !b.data)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory reading %s", path);
    *out_text = b.data;
    if (out_len)
        *out_len = b.len;
    return RT_OK;
}
