// test-spec-lex.c: the op-spec lexer — token kinds, spellings, 1-based lines and columns
// (tabs count as one column), integer and real literals, comments, and lexical errors.
#include "spec-int.h"
#include "test.h"

static rt_token *lex(rt_arena *a, const char *text, int32_t *n) {
    rt_token *toks = NULL;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_spec_lex(a, text, "t.spec", &toks, n, &err), RT_OK);
    return toks;
}

static bool spelled(const rt_token *t, const char *s) {
    return (size_t)t->len == strlen(s) && !memcmp(t->text, s, strlen(s));
}

static void test_tokens_and_columns(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    int32_t n;
    rt_token *t = lex(a, "C(m, n) +=! A(m, k)\n\tx max=! y  # comment ( ) $\n  -> @ T.child", &n);
    const char *want[] = {"C", "(", "m", ",",     "n", ")",  "+=!", "A", "(", "m",    ",",
                          "k", ")", "x", "max=!", "y", "->", "@",   "T", ".", "child"};
    int32_t nw = (int32_t)(sizeof want / sizeof want[0]);
    RT_EXPECT_EQ(n, nw + 1);
    for (int32_t i = 0; i < nw && i < n; i++)
        RT_EXPECT(spelled(&t[i], want[i]));
    RT_EXPECT_EQ(t[0].kind, RT_TOK_IDENT);
    RT_EXPECT_EQ(t[1].kind, RT_TOK_PUNCT);
    RT_EXPECT_EQ(t[6].kind, RT_TOK_PUNCT);
    RT_EXPECT_EQ(t[6].loc.col, 9);
    RT_EXPECT_EQ(t[7].loc.col, 13);
    RT_EXPECT_EQ(t[13].loc.line, 2); // x after a tab: column 2
    RT_EXPECT_EQ(t[13].loc.col, 2);
    RT_EXPECT_EQ(t[14].kind, RT_TOK_PUNCT);
    RT_EXPECT(rt_tok_is(&t[14], "max=!"));
    RT_EXPECT_EQ(t[16].loc.line, 3);
    RT_EXPECT_EQ(t[16].loc.col, 3);
    RT_EXPECT_EQ(t[n - 1].kind, RT_TOK_EOF);
    RT_EXPECT_STR(t[0].loc.file, "t.spec");
    rt_arena_free(a);
}

static void test_operators(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    int32_t n;
    rt_token *t = lex(a, "+= *=! min=! == != <= >= < > && || ! ? : = %", &n);
    const char *want[] = {"+=", "*=!", "min=!", "==", "!=", "<=", ">=", "<",
                          ">",  "&&",  "||",    "!",  "?",  ":",  "=",  "%"};
    RT_EXPECT_EQ(n, 17);
    for (int32_t i = 0; i < 16 && i < n; i++) {
        RT_EXPECT(spelled(&t[i], want[i]));
        RT_EXPECT_EQ(t[i].kind, RT_TOK_PUNCT);
    }
    // 'max' alone is an identifier (the function), 'max =' is not the operator
    t = lex(a, "max(a, b) max = 1", &n);
    RT_EXPECT_EQ(t[0].kind, RT_TOK_IDENT);
    RT_EXPECT_EQ(t[6].kind, RT_TOK_IDENT);
    RT_EXPECT(rt_tok_is(&t[7], "="));
    rt_arena_free(a);
}

static void test_numbers(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    int32_t n;
    rt_token *t = lex(a, "0 42 0.5 1e-3 .5 2.5E+2 9223372036854775807 2*y", &n);
    RT_EXPECT_EQ(n, 11);
    RT_EXPECT_EQ(t[0].kind, RT_TOK_INT);
    RT_EXPECT_EQ(t[1].ival, 42);
    RT_EXPECT_EQ(t[2].kind, RT_TOK_REAL);
    RT_EXPECT_NEAR(t[2].rval, 0.5, 0);
    RT_EXPECT_NEAR(t[3].rval, 1e-3, 0);
    RT_EXPECT_EQ(t[4].kind, RT_TOK_REAL);
    RT_EXPECT_NEAR(t[4].rval, 0.5, 0);
    RT_EXPECT_NEAR(t[5].rval, 250, 0);
    RT_EXPECT_EQ(t[6].kind, RT_TOK_INT);
    RT_EXPECT(t[6].ival == INT64_MAX);
    RT_EXPECT_EQ(t[7].ival, 2);
    RT_EXPECT(rt_tok_is(&t[8], "*"));
    RT_EXPECT(rt_tok_is(&t[9], "y"));
    rt_arena_free(a);
}

static void test_errors(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    int32_t n;
    rt_token *t = lex(a, "a b\n  9223372036854775808 c", &n);
    RT_EXPECT_EQ(n, 3);
    RT_EXPECT_EQ(t[2].kind, RT_TOK_ERROR);
    RT_EXPECT_EQ(t[2].loc.line, 2);
    RT_EXPECT_EQ(t[2].loc.col, 3);
    RT_EXPECT_STR(t[2].msg, "integer literal 9223372036854775808 is out of range (expected at "
                            "most 9223372036854775807)");
    t = lex(a, "x $", &n);
    RT_EXPECT_EQ(t[n - 1].kind, RT_TOK_ERROR);
    RT_EXPECT_STR(t[n - 1].msg, "unexpected character '$'");
    RT_EXPECT_EQ(t[n - 1].loc.col, 3);
    t = lex(a, "3x", &n);
    RT_EXPECT_STR(t[0].msg, "invalid number '3x'");
    t = lex(a, "\x01", &n);
    RT_EXPECT_STR(t[0].msg, "unexpected byte 0x01");
    t = lex(a, "1e999", &n);
    RT_EXPECT_EQ(t[0].kind, RT_TOK_ERROR);
    t = lex(a, "# only a comment", &n);
    RT_EXPECT_EQ(n, 1);
    RT_EXPECT_EQ(t[0].kind, RT_TOK_EOF);
    RT_EXPECT_STR(rt_tok_describe(a, &t[0]), "end of file");
    rt_arena_free(a);
}

int main(void) {
    test_tokens_and_columns();
    test_operators();
    test_numbers();
    test_errors();
    return rt_test_finish("test-spec-lex");
}
