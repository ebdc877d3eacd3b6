// lengths.h: length files of ragged tensors (--lengths NAME=FILE) and the option-style form
// of their errors. lengths.c.
#ifndef RT_LENGTHS_H
#define RT_LENGTHS_H

#include "rt.h"

// ---------------------------------------------------------------------------------------------
// Length files (--lengths NAME=FILE), lengths.c
//
// Two formats, told apart by the number of fields on the first non-empty line:
//   plain list  one non-negative integer per line (taken as is: exactly the tensor's extent
//               many entries are required);
//   histogram   'length count' per line (as /work/shared/data/seqlens/*.hist), count > 0;
//               sampled with replacement, weighted by count, into as many lengths as needed.
// '#' starts a comment anywhere on a line; blank lines are skipped. Lengths fit in int32.
// Errors (RT_ERR_SYNTAX) carry where = {path, line, col} of the offending field, e.g.
//   lens.txt:7:1  expected a non-negative integer (got "12a")
//   lens.hist:3:7 expected 'length count' (got 3 fields)
//   lens.hist:4:4 count must be positive (got 0)
//   lens.txt:2:1  length 99999999999 is too large (expected at most 2147483647)
//   lens.txt      lengths file has no entries              (line 0: no line)
//   lens.txt      expected 32 lengths for 'len' (got 7)     (from rt_lengths_take)
// ---------------------------------------------------------------------------------------------

typedef struct rt_lengths_file {
    const char *path;
    bool is_histogram;
    int64_t n;       // entries (list) or bins (histogram)
    int32_t *values; // list: the lengths in file order; histogram: the length of each bin
    int64_t *counts; // histogram only: count of each bin (> 0); NULL for a list
    int64_t total;   // histogram: sum of counts; list: n
} rt_lengths_file;

// Parses text (NUL-terminated) read from path (used in messages only).
rt_status rt_lengths_parse(rt_arena *a, const char *text, const char *path, rt_lengths_file **out,
                           rt_err *err);
// Reads path and calls rt_lengths_parse. Errors: RT_ERR_IO, or those of rt_lengths_parse.
rt_status rt_lengths_read(rt_arena *a, const char *path, rt_lengths_file **out, rt_err *err);
// Fills out_lengths[0..count) from f: a list must hold exactly count entries (name is the
// length tensor, for the message); a histogram is sampled count times with the seeded PRNG.
// Deterministic for a seed; every sampled length is a length present in the histogram.
rt_status rt_lengths_take(const rt_lengths_file *f, const char *name, int64_t count, uint64_t seed,
                          int32_t *out_lengths, rt_err *err);
// Turns an error of rt_lengths_parse/read/take on `OPTION NAME=PATH` into the option-style
// message the CLI prints (op-spec.md): where becomes no location, the message becomes
//   "--lengths len=lens.txt:7: expected a non-negative integer, got \"12a\""
// (":LINE" only when the error has a line; a trailing " (got X)" is written ", got X").
// Errors of other files (no path match) are left as they are. Also used for --tree.
void rt_file_error_to_option(rt_err *err, const char *option, const char *name, const char *path);

#endif
