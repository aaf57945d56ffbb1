/* Growing a heap array by doubling: the one copy of that loop, for the
 * scratch buffers and tables of every stage. Any thread; the array is
 * the caller's. */
#ifndef GF_GROW_H
#define GF_GROW_H

#include "gpufeed.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The capacity, in elements of elem bytes, reached by doubling cap (or
 * min_cap when cap is 0) until it holds need; need itself where one more
 * doubling would pass SIZE_MAX / elem bytes. 0 if need elements do not
 * fit in a size_t of bytes. */
static inline size_t gf__grow_cap(size_t cap, size_t need, size_t min_cap, size_t elem)
{
    if (need > SIZE_MAX / elem)
        return 0;
    size_t c = cap ? cap : min_cap;
    if (c == 0)
        c = 1;
    while (c < need)
        c = c > SIZE_MAX / 2 / elem ? need : c * 2;
    return c;
}

/* Makes *p (realloc'ed, contents kept) hold at least need elements of elem
 * bytes; *cap is its capacity in elements. Grow-only. Returns 0, or
 * GF_ENOMEM with *p and *cap unchanged. */
static inline int gf__grow(void **p, size_t *cap, size_t need, size_t elem, size_t min_cap)
{
    if (need <= *cap)
        return 0;
    size_t c = gf__grow_cap(*cap, need, min_cap, elem);
    void *q = c ? realloc(*p, c * elem) : NULL;
    if (!q)
        return GF_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* gf__grow for a typed array: GF__GROW(&arr, &cap, need, min_cap). */
#define GF__GROW(pp, capp, need, min_cap) \
    gf__grow((void **)(pp), (capp), (need), sizeof **(pp), (min_cap))

#endif
