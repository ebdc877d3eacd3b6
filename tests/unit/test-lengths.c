// test-lengths.c: length files (plain lists and 'length count' histograms) with their exact
// file:line:col errors, the option-style message the CLI prints, the seeded histogram sampler
// (deterministic, only lengths present in the histogram, frequencies as weighted), and the
// splitmix64 PRNG they use.
#include "interp.h"
#include "rng.h"
#include "test.h"

static rt_arena *arena;

// Parses text and expects an error at line:col with msg (status RT_ERR_SYNTAX).
static void expect_parse_error(const char *text, int line, int col, const char *msg) {
    rt_err err = {0};
    rt_lengths_file *f = NULL;
    rt_status st = rt_lengths_parse(arena, text, "lens.txt", &f, &err);
    RT_EXPECT_EQ(st, RT_ERR_SYNTAX);
    RT_EXPECT_STR(err.where.file, "lens.txt");
    RT_EXPECT_EQ(err.where.line, line);
    RT_EXPECT_EQ(err.where.col, col);
    RT_EXPECT_STR(err.msg, msg);
}

static void test_rng(void) {
    rt_rng r;
    rt_rng_seed(&r, 0);
    // Reference value of splitmix64 seeded with 0 (Vigna's splitmix64.c).
    RT_EXPECT(rt_rng_next(&r) == 0xe220a8397b1dcdafULL);
    rt_rng_seed(&r, 42);
    bool seen[7] = {false};
    for (int i = 0; i < 2000; i++) {
        uint64_t v = rt_rng_below(&r, 7);
        RT_EXPECT(v < 7);
        if (v < 7)
            seen[v] = true;
        double u = rt_rng_uniform(&r);
        RT_EXPECT(u >= 0.0 && u < 1.0);
    }
    for (int i = 0; i < 7; i++)
        RT_EXPECT(seen[i]);
    RT_EXPECT_EQ(rt_rng_below(&r, 0), 0);
    RT_EXPECT_EQ(rt_rng_below(&r, 1), 0);
}

static void test_list(void) {
    rt_err err = {0};
    rt_lengths_file *f = NULL;
    RT_EXPECT_EQ(rt_lengths_parse(arena, "# lengths\n3\n0\r\n\n  7   # last\n", "l.txt", &f, &err),
                 RT_OK);
    RT_EXPECT(!f->is_histogram);
    RT_EXPECT_EQ(f->n, 3);
    RT_EXPECT_EQ(f->values[0], 3);
    RT_EXPECT_EQ(f->values[1], 0);
    RT_EXPECT_EQ(f->values[2], 7);
    int32_t out[3];
    RT_EXPECT_EQ(rt_lengths_take(f, "len", 3, 1, out, &err), RT_OK);
    RT_EXPECT_EQ(out[0], 3);
    RT_EXPECT_EQ(out[2], 7);

    // A list must match the tensor's extent exactly.
    int32_t many[32];
    RT_EXPECT_EQ(rt_lengths_take(f, "len", 32, 1, many, &err), RT_ERR_SPEC);
    RT_EXPECT_STR(err.msg, "expected 32 lengths for 'len' (got 3)");
    RT_EXPECT_STR(err.where.file, "l.txt");
    RT_EXPECT_EQ(err.where.line, 0);

    // The file on disk, via rt_lengths_read (tests run from the source root).
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_lengths_read(arena, "tests/data/lens-203.txt", &f, &err), RT_OK);
    RT_EXPECT_EQ(f->n, 3);
    RT_EXPECT_EQ(f->values[1], 0);
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_lengths_read(arena, "tests/data/no-such-file.txt", &f, &err), RT_ERR_IO);
}

static void test_errors(void) {
    expect_parse_error("3\n12a\n", 2, 1, "expected a non-negative integer (got \"12a\")");
    expect_parse_error("  -3\n", 1, 3, "expected a non-negative integer (got \"-3\")");
    expect_parse_error("1\n2 3\n", 2, 3, "expected one length per line (got 2 fields)");
    expect_parse_error("1 2 3\n", 1, 5, "expected a length or 'length count' (got 3 fields)");
    expect_parse_error("4 3\n5 2 1\n", 2, 5, "expected 'length count' (got 3 fields)");
    expect_parse_error("4 3\n5\n", 2, 2, "expected 'length count' (got 1 field)");
    expect_parse_error("4 3\n\n# c\n4 0\n", 4, 3, "count must be positive (got 0)");
    expect_parse_error("4 x3\n", 1, 3, "expected a non-negative integer (got \"x3\")");
    expect_parse_error("99999999999\n", 1, 1,
                       "length 99999999999 is too large (expected at most 2147483647)");
    expect_parse_error("2147483648\n", 1, 1,
                       "length 2147483648 is too large (expected at most 2147483647)");
    expect_parse_error("1 99999999999999999999\n", 1, 3,
                       "count 99999999999999999999 is too large (expected at most "
                       "9223372036854775807)");
    expect_parse_error("", 0, 0, "lengths file has no entries");
    expect_parse_error("# only a comment\n\n   \n", 0, 0, "lengths file has no entries");
    // The largest int32 is a valid length.
    rt_err err = {0};
    rt_lengths_file *f = NULL;
    RT_EXPECT_EQ(rt_lengths_parse(arena, "2147483647\n", "l.txt", &f, &err), RT_OK);
    RT_EXPECT_EQ(f->values[0], 2147483647);
}

static void test_option_message(void) {
    rt_err err = {0};
    rt_lengths_file *f = NULL;
    RT_EXPECT_EQ(rt_lengths_read(arena, "tests/data/lens-bad.txt", &f, &err), RT_ERR_SYNTAX);
    RT_EXPECT_EQ(err.where.line, 7);
    RT_EXPECT_EQ(err.where.col, 1);
    rt_file_error_to_option(&err, "--lengths", "len", "tests/data/lens-bad.txt");
    char line[1024];
    rt_err_format(&err, "rtgen", false, line, sizeof line);
    RT_EXPECT_STR(line, "rtgen: error: --lengths len=tests/data/lens-bad.txt:7: expected a "
                        "non-negative integer, got \"12a\"");
    RT_EXPECT_EQ(rt_status_exit_code(err.status), 1);

    // Errors without a line keep no ":LINE".
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_lengths_parse(arena, "1\n2\n", "l.txt", &f, &err), RT_OK);
    int32_t out[4];
    RT_EXPECT_EQ(rt_lengths_take(f, "len", 4, 1, out, &err), RT_ERR_SPEC);
    rt_file_error_to_option(&err, "--lengths", "len", "l.txt");
    RT_EXPECT_STR(err.msg, "--lengths len=l.txt: expected 4 lengths for 'len', got 2");
    RT_EXPECT(err.where.file == NULL);

    // An error about another file is left alone.
    rt_err_clear(&err);
    rt_fail(&err, RT_ERR_SPEC, rt_loc_make("op.spec", 3, 4), "something (got 1)");
    rt_file_error_to_option(&err, "--lengths", "len", "l.txt");
    RT_EXPECT_STR(err.msg, "something (got 1)");
    RT_EXPECT_STR(err.where.file, "op.spec");
}

static bool in_histogram(const rt_lengths_file *f, int32_t v) {
    for (int64_t i = 0; i < f->n; i++)
        if (f->values[i] == v)
            return true;
    return false;
}

static void test_histogram(void) {
    rt_err err = {0};
    rt_lengths_file *f = NULL;
    RT_EXPECT_EQ(rt_lengths_read(arena, "tests/data/cola.hist", &f, &err), RT_OK);
    RT_EXPECT(f->is_histogram);
    RT_EXPECT_EQ(f->n, 39);
    RT_EXPECT_EQ(f->total, 8551);
    RT_EXPECT_EQ(f->values[0], 4);
    RT_EXPECT_EQ(f->counts[0], 3);

    enum { n = 4000 };
    static int32_t a[n], b[n], c[n];
    RT_EXPECT_EQ(rt_lengths_take(f, "len", n, 7, a, &err), RT_OK);
    RT_EXPECT_EQ(rt_lengths_take(f, "len", n, 7, b, &err), RT_OK);
    RT_EXPECT_EQ(rt_lengths_take(f, "len", n, 8, c, &err), RT_OK);
    RT_EXPECT(memcmp(a, b, sizeof a) == 0);
    RT_EXPECT(memcmp(a, c, sizeof a) != 0);
    int bad = 0;
    double mean = 0.0;
    for (int i = 0; i < n; i++) {
        bad += !in_histogram(f, a[i]);
        mean += a[i];
    }
    RT_EXPECT_EQ(bad, 0);
    // Histogram mean 12.82 (sum length*count / 8551); sample sd ~4.5, so the mean of 4000
    // samples lies within 0.5 with overwhelming probability (and for this seed, always).
    RT_EXPECT_NEAR(mean / n, 109644.0 / 8551.0, 0.5);

    // Weighted frequencies: 1 of weight 1, 2 of weight 3.
    RT_EXPECT_EQ(rt_lengths_parse(arena, "1 1\n2 3\n", "h.hist", &f, &err), RT_OK);
    RT_EXPECT_EQ(rt_lengths_take(f, "len", n, 3, a, &err), RT_OK);
    int twos = 0;
    for (int i = 0; i < n; i++)
        twos += a[i] == 2;
    RT_EXPECT_NEAR((double)twos / n, 0.75, 0.03);

    // One bin: every sample is its length; zero samples is fine.
    RT_EXPECT_EQ(rt_lengths_parse(arena, "5 1  # only\n", "h.hist", &f, &err), RT_OK);
    RT_EXPECT_EQ(rt_lengths_take(f, "len", 16, 3, a, &err), RT_OK);
    for (int i = 0; i < 16; i++)
        RT_EXPECT_EQ(a[i], 5);
    RT_EXPECT_EQ(rt_lengths_take(f, "len", 0, 3, a, &err), RT_OK);
}

// Allocation failures while parsing give RT_ERR_NOMEM, never a crash.
static void test_nomem(void) {
    bool ok_seen = false;
    int bad = 0;
    for (long n = 0; n < 100 && !ok_seen; n++) {
        rt_arena *a = rt_arena_new(1 << 10);
        rt_arena_fail_after(a, n);
        rt_err err = {0};
        rt_lengths_file *f = NULL;
        rt_status st = rt_lengths_parse(a, "4 3\n5 1\n", "h.hist", &f, &err);
        bad += st != RT_OK && st != RT_ERR_NOMEM;
        ok_seen = st == RT_OK;
        rt_arena_free(a);
    }
    RT_EXPECT_EQ(bad, 0);
    RT_EXPECT(ok_seen);
}

int main(void) {
    arena = rt_arena_new(1 << 16);
    test_rng();
    test_list();
    test_errors();
    test_option_message();
    test_histogram();
    test_nomem();
    rt_arena_free(arena);
    return rt_test_finish("test-lengths");
}
