// fuzz-text.h: the input of a text fuzz target (fuzz-spec, fuzz-lengths, fuzz-gen) as a
// NUL-terminated string in a fresh arena, or NULL (the input skipped) when it is longer than max
// bytes or memory runs out. The caller frees *a.
#ifndef RT_FUZZ_TEXT_H
#define RT_FUZZ_TEXT_H
#include "rt.h"

#include <stddef.h>
#include <stdint.h>

static inline char *rt_fuzz_text(const uint8_t *data, size_t size, size_t max, rt_arena **a) {
    *a = size <= max ? rt_arena_new(1 << 16) : NULL;
    char *text = *a ? rt_arena_strndup(*a, (const char *)data, size) : NULL;
    if (*a && !text)
        rt_arena_free(*a);
    return text;
}
#endif
