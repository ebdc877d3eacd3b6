// rt.h: base types shared by every layer of rtgen — status codes, the one error type
// carrying the input location, the per-compilation arena, growable text buffers and data types.
// Everything else includes this header; it includes nothing of rtgen's.
#ifndef RT_H
#define RT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define RT_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define RT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define RT_NORETURN          __attribute__((noreturn))
#else
#define RT_PRINTF(fmt, args)
#define RT_NORETURN
#endif

// ---------------------------------------------------------------------------------------------
// Status and errors
// ---------------------------------------------------------------------------------------------

// ORDER RT_STATUS: keep rt_status_name() in rt-err.c in step.
typedef enum rt_status {
    RT_OK = 0,
    RT_ERR_SYNTAX,  // malformed text (spec, INI, lengths, tree file)
    RT_ERR_SPEC,    // well-formed but meaningless (shapes, ranges, dtypes)
    RT_ERR_DEVICE,  // bad device value or class; no candidate fits the device
    RT_ERR_BACKEND, // compiler/driver failure (log attached)
    RT_ERR_USAGE,   // bad command-line option
    RT_ERR_NOMEM,
    RT_ERR_IO,
    RT_ERR_NOFIT, // no candidate fits the device (CLI exit 4)
    RT_STATUS_COUNT
} rt_status;

// A position in an input file. file == NULL: no location (e.g. a command-line option).
// line and col are 1-based; col == 0 means "whole line".
typedef struct rt_loc {
    const char *file;
    int32_t line, col;
} rt_loc;

typedef struct rt_err {
    rt_status status;
    rt_loc where;            // what users see: FILE:LINE:COL
    const char *raised_file; // rtgen source that raised it, printed with --verbose
    int32_t raised_line;
    char msg[512];
    char note[256];  // context added by callers ("while loading device ...")
    const char *log; // backend log, arena-owned, may be NULL
} rt_err;

// Sets *err unless an error is already recorded (the first error wins). Returns st.
rt_status rt_err_set(rt_err *err, rt_status st, rt_loc where, const char *raised_file,
                     int32_t raised_line, const char *fmt, ...) RT_PRINTF(6, 7);
rt_status rt_err_vset(rt_err *err, rt_status st, rt_loc where, const char *raised_file,
                      int32_t raised_line, const char *fmt, va_list ap);
// Appends context to an already-set error; never overwrites the message.
void rt_err_note(rt_err *err, const char *fmt, ...) RT_PRINTF(2, 3);
void rt_err_clear(rt_err *err);
const char *rt_status_name(rt_status st);
// Formats the error the GNU way into buf: "file:line:col: error: msg" or "rtgen: error: msg".
// prog is the program name used when the error has no file. verbose appends "[raised at ...]".
void rt_err_format(const rt_err *err, const char *prog, bool verbose, char *buf, size_t size);
// Exit code of the CLIs for a status (overview: 1 bad input, 2 usage, 3 backend, 4 no fit).
int rt_status_exit_code(rt_status st);

#define rt_fail(err, st, loc, ...) rt_err_set((err), (st), (loc), __FILE__, __LINE__, __VA_ARGS__)
#define RT_TRY(x)                                                                                  \
    do {                                                                                           \
        rt_status rt_st_ = (x);                                                                    \
        if (rt_st_ != RT_OK)                                                                       \
            return rt_st_;                                                                         \
    } while (0)

static inline rt_loc rt_loc_make(const char *file, int32_t line, int32_t col) {
    rt_loc l = {file, line, col};
    return l;
}
#define RT_NOLOC (rt_loc_make(NULL, 0, 0))

// For rtgen bugs only: input must never be able to trigger it.
RT_NORETURN void rt_assert_fail(const char *expr, const char *file, int line);
#define rt_assert(cond)                                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            rt_assert_fail(#cond, __FILE__, __LINE__);                                             \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Arena: one per compilation. Allocations are zeroed and live until rt_arena_free.
// ---------------------------------------------------------------------------------------------

typedef struct rt_arena rt_arena;

rt_arena *rt_arena_new(size_t chunk_bytes); // NULL on out of memory
void rt_arena_free(rt_arena *a);            // runs deferred releases in reverse order, then frees
// Returns NULL (and records nothing) when out of memory or on size overflow.
void *rt_arena_alloc(rt_arena *a, size_t bytes);
void *rt_arena_calloc(rt_arena *a, size_t n, size_t elem_bytes); // overflow-checked n * elem
char *rt_arena_strdup(rt_arena *a, const char *s); // NULL for NULL (a failed printf passes on)
char *rt_arena_strndup(rt_arena *a, const char *s, size_t n);
char *rt_arena_printf(rt_arena *a, const char *fmt, ...) RT_PRINTF(2, 3);
// Registers fn(handle) to run at rt_arena_free, in reverse registration order.
rt_status rt_arena_defer(rt_arena *a, void (*fn)(void *), void *handle);
// Debug aid: the n-th allocation from now fails (n < 0: never). Reaches every NOMEM path in tests.
void rt_arena_fail_after(rt_arena *a, long n);
size_t rt_arena_used_bytes(const rt_arena *a);
// Whether an allocation of a has failed (returned NULL) since rt_arena_new.
bool rt_arena_failed(const rt_arena *a);
// st, except that a failure after an allocation of a failed is RT_ERR_NOMEM "out of memory": the
// NULL may have reached a check that blamed something else (an unbound index, an unprintable
// node). For the entry points of a pass whose every allocation is in a.
rt_status rt_arena_status(rt_arena *a, rt_status st, rt_err *err);

// Allocation helpers that turn NULL into RT_ERR_NOMEM. n == 0 allocates one element.
static inline size_t rt_at_least_one(size_t n) {
    return n > 0 ? n : 1;
}
#define RT_ALLOC(a, ptr, n, err)                                                                   \
    do {                                                                                           \
        (ptr) = rt_arena_calloc((a), rt_at_least_one((size_t)(n)), sizeof *(ptr));                 \
        if (!(ptr))                                                                                \
            return rt_fail((err), RT_ERR_NOMEM, RT_NOLOC, "out of memory");                        \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Growable text buffer (arena-backed). All text output (reports, kernels) goes through it.
// ---------------------------------------------------------------------------------------------

typedef struct rt_buf {
    rt_arena *arena;
    char *data; // NUL-terminated
    size_t len, cap;
    bool oom; // set once an append failed; later appends are no-ops
} rt_buf;

void rt_buf_init(rt_buf *b, rt_arena *a);
void rt_buf_puts(rt_buf *b, const char *s);
void rt_buf_putn(rt_buf *b, const char *s, size_t n);
void rt_buf_printf(rt_buf *b, const char *fmt, ...) RT_PRINTF(2, 3);
void rt_buf_vprintf(rt_buf *b, const char *fmt, va_list ap);
// Prints indent*4 spaces, the formatted text and a newline.
void rt_buf_linef(rt_buf *b, int indent, const char *fmt, ...) RT_PRINTF(3, 4);

// ---------------------------------------------------------------------------------------------
// Data types
// ---------------------------------------------------------------------------------------------

// ORDER RT_DTYPE: keep rt_dtype_table in rt-err.c in step.
typedef enum rt_dtype {
    RT_DTYPE_F32 = 0, // "float"
    RT_DTYPE_F16,     // "half"
    RT_DTYPE_BF16,    // "bfloat16"
    RT_DTYPE_F64,     // "double"
    RT_DTYPE_I32,     // "int32"
    RT_DTYPE_I8,      // "int8"
    RT_DTYPE_COUNT
} rt_dtype;

const char *rt_dtype_name(rt_dtype t);  // spelling in op-spec ("float")
const char *rt_dtype_ctype(rt_dtype t); // C spelling of the storage type ("float", "uint16_t")
int32_t rt_dtype_bytes(rt_dtype t);
bool rt_dtype_is_int(rt_dtype t);
bool rt_dtype_from_name(const char *name, size_t len, rt_dtype *out);
// Rounds a double to the precision of t (round-to-nearest-even for f16/bf16; truncation
// toward zero and wrap for integers, as C conversion does).
double rt_dtype_round(rt_dtype t, double v);

// Small numeric helpers.
static inline int64_t rt_ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}
static inline int64_t rt_round_up(int64_t a, int64_t b) {
    return rt_ceil_div(a, b) * b;
}
static inline int64_t rt_min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t rt_max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}
// Floor division and modulo for possibly negative a, b > 0 (op-spec '/' and '%' on indices).
static inline int64_t rt_floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t rt_floor_mod(int64_t a, int64_t b) {
    return a - rt_floor_div(a, b) * b;
}

// Reads a whole file into the arena (NUL-terminated). Errors: RT_ERR_IO with the path.
rt_status rt_read_file(rt_arena *a, const char *path, char **out_text, size_t *out_len,
                       rt_err *err);

#endif
