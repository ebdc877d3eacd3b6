// tree.c: tree and DAG parameters of recursive operators (CORTEX). Reads tree files
// (--tree T=FILE, one node per line `id child0 child1 ...`) with file:line:col errors, builds
// random seeded trees when none is bound, and linearizes every structure on the host: node
// heights (leaves 0) and the level-by-level order (nodes grouped by height) that both the
// reference interpreter and the generated level-by-level kernels follow.
#include "tree.h"

#include "rng.h"

#include <string.h>

// Per-node source positions, for messages about a parsed file (NULL for built trees).
typedef struct rt_tree_src {
    const char *path;
    int32_t *line;      // [n_nodes]
    int32_t *child_col; // [n_nodes * C]
} rt_tree_src;

// Checks the edges, rejects cycles, computes heights and the level order. t->child and
// t->n_nodes/max_children are set; everything else is filled here.
static rt_status rt_tree_linearize(rt_arena *a, rt_tree_data *t, const rt_tree_src *src,
                                   rt_err *err) {
    int32_t n = t->n_nodes, c_max = t->max_children;
    RT_ALLOC(a, t->n_children, n, err);
    RT_ALLOC(a, t->height, n, err);
    RT_ALLOC(a, t->order, n, err);
    for (int32_t v = 0; v < n; v++) {
        for (int32_t c = 0; c < c_max; c++) {
            int32_t ch = t->child[(int64_t)v * c_max + c];
            if (ch < -1 || ch >= n)
                return rt_fail(err, RT_ERR_SPEC, RT_NOLOC,
                               "child %d of node %d out of range (expected -1..%d)", (int)c, (int)v,
                               (int)n - 1);
            t->n_children[v] += ch >= 0;
        }
    }
    // Iterative depth-first search: color 0 unvisited, 1 on the stack, 2 done. The stack holds
    // (node, next child slot); a node's height is final when it is popped.
    int8_t *color;
    int32_t *stack_node, *stack_slot;
    RT_ALLOC(a, color, n, err);
    RT_ALLOC(a, stack_node, n, err);
    RT_ALLOC(a, stack_slot, n, err);
    for (int32_t root = 0; root < n; root++) {
        if (color[root])
            continue;
        int32_t sp = 0;
        stack_node[0] = root;
        stack_slot[0] = 0;
        color[root] = 1;
        while (sp >= 0) {
            int32_t v = stack_node[sp];
            if (stack_slot[sp] == c_max) {
                color[v] = 2;
                sp--;
                if (sp >= 0) {
                    int32_t parent = stack_node[sp];
                    if (t->height[v] + 1 > t->height[parent])
                        t->height[parent] = t->height[v] + 1;
                }
                continue;
            }
            int32_t slot = stack_slot[sp]++;
            int32_t ch = t->child[(int64_t)v * c_max + slot];
            if (ch < 0)
                continue;
            if (color[ch] == 1) {
                if (src)
                    return rt_fail(err, RT_ERR_SYNTAX,
                                   rt_loc_make(src->path, src->line[v],
                                               src->child_col[(int64_t)v * c_max + slot]),
                                   "child %d of node %d closes a cycle", (int)ch, (int)v);
                return rt_fail(err, RT_ERR_SPEC, RT_NOLOC, "child %d of node %d closes a cycle",
                               (int)ch, (int)v);
            }
            if (color[ch] == 2) {
                if (t->height[ch] + 1 > t->height[v])
                    t->height[v] = t->height[ch] + 1;
                continue;
            }
            color[ch] = 1;
            sp++;
            stack_node[sp] = ch;
            stack_slot[sp] = 0;
        }
    }
    // Counting sort by height; ids ascend inside a level because v runs in order.
    int32_t max_h = -1;
    for (int32_t v = 0; v < n; v++)
        max_h = t->height[v] > max_h ? t->height[v] : max_h;
    t->n_levels = max_h + 1;
    RT_ALLOC(a, t->level_begin, t->n_levels + 1, err);
    for (int32_t v = 0; v < n; v++)
        t->level_begin[t->height[v] + 1]++;
    for (int32_t h = 0; h < t->n_levels; h++)
        t->level_begin[h + 1] += t->level_begin[h];
    int32_t *fill;
    RT_ALLOC(a, fill, t->n_levels + 1, err);
    memcpy(fill, t->level_begin, sizeof *fill * (size_t)(t->n_levels + 1));
    for (int32_t v = 0; v < n; v++)
        t->order[fill[t->height[v]]++] = v;
    return RT_OK;
}

rt_status rt_tree_build(rt_arena *a, int32_t n_nodes, int32_t max_children, const int32_t *child,
                        rt_tree_data **out, rt_err *err) {
    if (n_nodes < 0 || max_children < 0)
        return rt_fail(err, RT_ERR_SPEC, RT_NOLOC,
                       "tree must have non-negative sizes (got %d nodes, %d children)",
                       (int)n_nodes, (int)max_children);
    rt_tree_data *t;
    RT_ALLOC(a, t, 1, err);
    t->n_nodes = n_nodes;
    t->max_children = max_children;
    RT_ALLOC(a, t->child, (int64_t)n_nodes * max_children, err);
    if ((int64_t)n_nodes * max_children > 0)
        memcpy(t->child, child, sizeof *t->child * (size_t)n_nodes * (size_t)max_children);
    RT_TRY(rt_tree_linearize(a, t, NULL, err));
    *out = t;
    return RT_OK;
}

rt_status rt_tree_random(rt_arena *a, int32_t n_nodes, int32_t max_children, uint64_t seed,
                         rt_tree_data **out, rt_err *err) {
    if (n_nodes < 0 || max_children < 0)
        return rt_fail(err, RT_ERR_SPEC, RT_NOLOC,
                       "tree must have non-negative sizes (got %d nodes, %d children)",
                       (int)n_nodes, (int)max_children);
    int32_t *child, *open;
    RT_ALLOC(a, child, (int64_t)n_nodes * max_children, err);
    RT_ALLOC(a, open, n_nodes, err);
    for (int64_t i = 0; i < (int64_t)n_nodes * max_children; i++)
        child[i] = -1;
    // open[0..n_open): nodes with a free child slot. With no open node (C = 0) a node starts a
    // new root, so any (N, C) gives a valid forest.
    rt_rng rng;
    rt_rng_seed(&rng, seed);
    int32_t n_open = 0;
    for (int32_t v = 0; v < n_nodes; v++) {
        if (n_open > 0) {
            int32_t k = (int32_t)rt_rng_below(&rng, (uint64_t)n_open);
            int32_t parent = open[k];
            int32_t slot = 0;
            while (child[(int64_t)parent * max_children + slot] >= 0)
                slot++;
            child[(int64_t)parent * max_children + slot] = v;
            if (slot + 1 == max_children)
                open[k] = open[--n_open];
        }
        if (max_children > 0)
            open[n_open++] = v;
    }
    return rt_tree_build(a, n_nodes, max_children, child, out, err);
}

// ---------------------------------------------------------------------------------------------
// Tree files
// ---------------------------------------------------------------------------------------------

// Next whitespace-separated field of the line at *p (stops at '\n', NUL and '#'). Returns false
// at the end of the line's fields; *p then points just past the line.
static bool rt_tree_field(const char **p, int32_t *col, const char **out_text, int32_t *out_len,
                          int32_t *out_col) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\f' || *s == '\v') {
        s++;
        (*col)++;
    }
    if (*s == '#')
        while (*s && *s != '\n')
            s++;
    if (!*s || *s == '\n') {
        *p = *s ? s + 1 : s;
        return false;
    }
    *out_text = s;
    *out_col = *col;
    while (*s && *s != '\n' && *s != '#' && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\f' &&
           *s != '\v') {
        s++;
        (*col)++;
    }
    *out_len = (int32_t)(s - *out_text);
    *p = s;
    return true;
}

// A node id (or, is_child, a child id) in [0, n): digits only.
static rt_status rt_tree_id(const char *text, int32_t len, bool is_child, int32_t n, rt_loc loc,
                            int32_t *out, rt_err *err) {
    int64_t v = 0;
    for (int32_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return rt_fail(err, RT_ERR_SYNTAX, loc, "expected a %s (got \"%.*s\")",
                           is_child ? "child id or '-'" : "node id", (int)len, text);
        if (v < INT32_MAX)
            v = v * 10 + (text[i] - '0');
    }
    if (v >= n)
        return rt_fail(err, RT_ERR_SYNTAX, loc, "%s out of range (expected 0..%d, got %.*s)",
                       is_child ? "child id" : "node id", (int)n - 1, (int)len, text);
    *out = (int32_t)v;
    return RT_OK;
}

rt_status rt_tree_parse(rt_arena *a, const char *text, const char *path, int32_t max_children,
                        rt_tree_data **out, rt_err *err) {
    // Pass 1: N = number of lines with a field.
    int32_t n = 0;
    for (const char *p = text; *p;) {
        int32_t col = 1, len, fcol;
        const char *f;
        bool any = false;
        while (rt_tree_field(&p, &col, &f, &len, &fcol))
            any = true;
        if (any) {
            if (n == INT32_MAX)
                return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, 0, 0), "too many nodes");
            n++;
        }
    }
    if (n == 0)
        return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, 0, 0), "tree file has no nodes");

    rt_tree_data *t;
    rt_tree_src src = {path, NULL, NULL};
    int64_t slots = (int64_t)n * max_children;
    RT_ALLOC(a, t, 1, err);
    RT_ALLOC(a, t->child, slots, err);
    RT_ALLOC(a, src.line, n, err);
    RT_ALLOC(a, src.child_col, slots, err);
    t->n_nodes = n;
    t->max_children = max_children;
    for (int64_t i = 0; i < slots; i++)
        t->child[i] = -1;

    // Pass 2: the nodes.
    int32_t line = 0;
    for (const char *p = text; *p;) {
        line++;
        int32_t col = 1, len, fcol;
        const char *f;
        if (!rt_tree_field(&p, &col, &f, &len, &fcol))
            continue;
        int32_t id;
        RT_TRY(rt_tree_id(f, len, false, n, rt_loc_make(path, line, fcol), &id, err));
        if (src.line[id] != 0)
            return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, fcol),
                           "duplicate node id %d (first at line %d)", (int)id, (int)src.line[id]);
        src.line[id] = line;
        int32_t slot = 0;
        while (rt_tree_field(&p, &col, &f, &len, &fcol)) {
            rt_loc loc = rt_loc_make(path, line, fcol);
            if (slot == max_children)
                return rt_fail(err, RT_ERR_SYNTAX, loc,
                               "too many children for node %d (expected at most %d)", (int)id,
                               (int)max_children);
            int64_t k = (int64_t)id * max_children + slot;
            src.child_col[k] = fcol;
            if (!(len == 1 && f[0] == '-'))
                RT_TRY(rt_tree_id(f, len, true, n, loc, &t->child[k], err));
            slot++;
        }
    }
    RT_TRY(rt_tree_linearize(a, t, &src, err));
    *out = t;
    return RT_OK;
}

rt_status rt_tree_read(rt_arena *a, const char *path, int32_t max_children, rt_tree_data **out,
                       rt_err *err) {
    char *text;
    size_t len;
    RT_TRY(rt_read_file(a, path, &text, &len, err));
    if (strlen(text) != len)
        return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, 0, 0),
                       "tree file contains a NUL byte");
    return rt_tree_parse(a, text, path, max_children, out, err);
}
