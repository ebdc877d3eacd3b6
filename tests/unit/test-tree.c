// test-tree.c: tree files (valid trees, DAGs, '-' slots, comments) with their exact
// file:line:col errors, the CORTEX linearization (heights, level order: every child before its
// parents), seeded random trees, and programmatic construction (cycles, deep chains).
#include "interp.h"
#include "test.h"

static rt_arena *arena;

static void expect_tree_error(const char *text, int32_t c, int line, int col, const char *msg) {
    rt_err err = {0};
    rt_tree_data *t = NULL;
    RT_EXPECT_EQ(rt_tree_parse(arena, text, "t.tree", c, &t, &err), RT_ERR_SYNTAX);
    RT_EXPECT_STR(err.where.file, "t.tree");
    RT_EXPECT_EQ(err.where.line, line);
    RT_EXPECT_EQ(err.where.col, col);
    RT_EXPECT_STR(err.msg, msg);
}

// Every child comes before its parent in the level order, heights are 1 + max child height,
// and levels hold exactly the nodes of their height in ascending id order.
static void check_linearization(const rt_tree_data *t) {
    int32_t *rank = calloc((size_t)t->n_nodes + 1, sizeof *rank);
    for (int32_t i = 0; i < t->n_nodes; i++)
        rank[t->order[i]] = i;
    int bad = 0;
    for (int32_t v = 0; v < t->n_nodes; v++) {
        int32_t h = 0, n = 0;
        for (int32_t c = 0; c < t->max_children; c++) {
            int32_t ch = t->child[v * t->max_children + c];
            if (ch < 0)
                continue;
            n++;
            bad += rank[ch] >= rank[v];
            h = t->height[ch] + 1 > h ? t->height[ch] + 1 : h;
        }
        bad += h != t->height[v];
        bad += n != t->n_children[v];
    }
    for (int32_t l = 0; l < t->n_levels; l++)
        for (int32_t i = t->level_begin[l]; i < t->level_begin[l + 1]; i++) {
            bad += t->height[t->order[i]] != l;
            bad += i > t->level_begin[l] && t->order[i] <= t->order[i - 1];
        }
    RT_EXPECT_EQ(t->level_begin[0], 0);
    RT_EXPECT_EQ(t->level_begin[t->n_levels], t->n_nodes);
    RT_EXPECT_EQ(bad, 0);
    free(rank);
}

static void test_parse(void) {
    rt_err err = {0};
    rt_tree_data *t = NULL;
    // Any order of lines, comments, a leaf written with '-' and one written bare.
    RT_EXPECT_EQ(rt_tree_parse(arena, "# tree\n2 - -\n\n0 1 2  # root\n1\n", "t.tree", 2, &t, &err),
                 RT_OK);
    RT_EXPECT_EQ(t->n_nodes, 3);
    RT_EXPECT_EQ(t->child[0], 1);
    RT_EXPECT_EQ(t->child[1], 2);
    RT_EXPECT_EQ(t->child[2], -1);
    RT_EXPECT_EQ(t->child[5], -1);
    RT_EXPECT_EQ(t->height[0], 1);
    RT_EXPECT_EQ(t->height[1], 0);
    RT_EXPECT_EQ(t->n_levels, 2);
    RT_EXPECT_EQ(t->order[0], 1);
    RT_EXPECT_EQ(t->order[1], 2);
    RT_EXPECT_EQ(t->order[2], 0);
    RT_EXPECT_EQ(t->level_begin[1], 2);
    check_linearization(t);

    // A DAG: node 2 has two parents; heights follow the longest path.
    RT_EXPECT_EQ(rt_tree_parse(arena, "0 1 2\n1 2\n2\n", "t.tree", 2, &t, &err), RT_OK);
    RT_EXPECT_EQ(t->height[0], 2);
    RT_EXPECT_EQ(t->height[1], 1);
    RT_EXPECT_EQ(t->order[0], 2);
    RT_EXPECT_EQ(t->order[2], 0);
    check_linearization(t);

    // '-' keeps a slot empty: child 1 without child 0 (not a leaf).
    RT_EXPECT_EQ(rt_tree_parse(arena, "0 - 1\n1\n", "t.tree", 2, &t, &err), RT_OK);
    RT_EXPECT_EQ(t->child[0], -1);
    RT_EXPECT_EQ(t->child[1], 1);
    RT_EXPECT_EQ(t->n_children[0], 1);
    RT_EXPECT_EQ(t->n_children[1], 0);

    // A file on disk.
    RT_EXPECT_EQ(rt_tree_read(arena, "tests/data/tree-small.tree", 2, &t, &err), RT_OK);
    RT_EXPECT_EQ(t->n_nodes, 3);
    RT_EXPECT_EQ(t->height[0], 1);
    RT_EXPECT_EQ(rt_tree_read(arena, "tests/data/no-such.tree", 2, &t, &err), RT_ERR_IO);
}

static void test_errors(void) {
    expect_tree_error("0 1\nx\n", 2, 2, 1, "expected a node id (got \"x\")");
    expect_tree_error("0 1\n5\n", 2, 2, 1, "node id out of range (expected 0..1, got 5)");
    expect_tree_error("0 1\n# c\n0\n", 2, 3, 1, "duplicate node id 0 (first at line 1)");
    expect_tree_error("0 1 1 1\n1\n", 2, 1, 7, "too many children for node 0 (expected at most 2)");
    expect_tree_error("0 q\n1\n", 2, 1, 3, "expected a child id or '-' (got \"q\")");
    expect_tree_error("0 7\n1\n", 2, 1, 3, "child id out of range (expected 0..1, got 7)");
    expect_tree_error("0 -1\n1\n", 2, 1, 3, "expected a child id or '-' (got \"-1\")");
    expect_tree_error("0 1\n1 2\n2 - 0\n", 2, 3, 5, "child 0 of node 2 closes a cycle");
    expect_tree_error("0 0\n", 2, 1, 3, "child 0 of node 0 closes a cycle");
    expect_tree_error("# nothing\n\n", 2, 0, 0, "tree file has no nodes");
    expect_tree_error("", 2, 0, 0, "tree file has no nodes");
}

static void test_random(void) {
    rt_err err = {0};
    rt_tree_data *a = NULL, *b = NULL, *c = NULL;
    RT_EXPECT_EQ(rt_tree_random(arena, 15, 2, 3, &a, &err), RT_OK);
    RT_EXPECT_EQ(rt_tree_random(arena, 15, 2, 3, &b, &err), RT_OK);
    RT_EXPECT_EQ(rt_tree_random(arena, 15, 2, 4, &c, &err), RT_OK);
    RT_EXPECT_EQ(a->n_nodes, 15);
    RT_EXPECT(memcmp(a->child, b->child, 30 * sizeof *a->child) == 0);
    RT_EXPECT(memcmp(a->child, c->child, 30 * sizeof *a->child) != 0);
    // A tree: every node but the root 0 has exactly one parent.
    int parents[15] = {0};
    for (int i = 0; i < 30; i++)
        if (a->child[i] >= 0)
            parents[a->child[i]]++;
    RT_EXPECT_EQ(parents[0], 0);
    for (int v = 1; v < 15; v++)
        RT_EXPECT_EQ(parents[v], 1);
    check_linearization(a);
    RT_EXPECT_EQ(a->height[0], a->n_levels - 1);

    // Larger and wider trees, and the degenerate shapes.
    RT_EXPECT_EQ(rt_tree_random(arena, 500, 3, 9, &a, &err), RT_OK);
    check_linearization(a);
    RT_EXPECT_EQ(rt_tree_random(arena, 1, 2, 9, &a, &err), RT_OK);
    RT_EXPECT_EQ(a->n_levels, 1);
    RT_EXPECT_EQ(rt_tree_random(arena, 4, 0, 9, &a, &err), RT_OK);
    RT_EXPECT_EQ(a->n_levels, 1);
    RT_EXPECT_EQ(a->level_begin[1], 4);
    RT_EXPECT_EQ(rt_tree_random(arena, 0, 2, 9, &a, &err), RT_OK);
    RT_EXPECT_EQ(a->n_levels, 0);
}

static void test_build(void) {
    rt_err err = {0};
    rt_tree_data *t = NULL;
    int32_t cyc[4] = {1, -1, 0, -1};
    RT_EXPECT_EQ(rt_tree_build(arena, 2, 2, cyc, &t, &err), RT_ERR_SPEC);
    RT_EXPECT_STR(err.msg, "child 0 of node 1 closes a cycle");
    rt_err_clear(&err);
    int32_t out_of_range[2] = {5, -1};
    RT_EXPECT_EQ(rt_tree_build(arena, 1, 2, out_of_range, &t, &err), RT_ERR_SPEC);
    rt_err_clear(&err);

    // A 100000-node chain: the search is iterative, so depth costs no stack.
    enum { n = 100000 };
    int32_t *chain = calloc(n, sizeof *chain);
    for (int i = 0; i < n; i++)
        chain[i] = i + 1 < n ? i + 1 : -1;
    RT_EXPECT_EQ(rt_tree_build(arena, n, 1, chain, &t, &err), RT_OK);
    RT_EXPECT_EQ(t->n_levels, n);
    RT_EXPECT_EQ(t->height[0], n - 1);
    RT_EXPECT_EQ(t->order[0], n - 1);
    RT_EXPECT_EQ(t->order[n - 1], 0);
    free(chain);
}

// Allocation failures while parsing and linearizing give RT_ERR_NOMEM, never a crash.
static void test_nomem(void) {
    bool ok_seen = false;
    int bad = 0;
    for (long n = 0; n < 200 && !ok_seen; n++) {
        rt_arena *a = rt_arena_new(1 << 10);
        rt_arena_fail_after(a, n);
        rt_err err = {0};
        rt_tree_data *t = NULL;
        rt_status st = rt_tree_parse(a, "0 1 2\n1 3\n2\n3\n", "t.tree", 2, &t, &err);
        if (st == RT_OK)
            st = rt_tree_random(a, 9, 3, 1, &t, &err);
        bad += st != RT_OK && st != RT_ERR_NOMEM;
        ok_seen = st == RT_OK;
        rt_arena_free(a);
    }
    RT_EXPECT_EQ(bad, 0);
    RT_EXPECT(ok_seen);
}

int main(void) {
    arena = rt_arena_new(1 << 16);
    test_parse();
    test_errors();
    test_random();
    test_build();
    test_nomem();
    rt_arena_free(arena);
    return rt_test_finish("test-tree");
}
