/*
 * The library's stateless entry points: its version, the names and texts
 * of its error codes (generated from the one table in gpufeed.h, as are
 * the sample error kinds), and gf_free. Any thread.
 */
#include "common.h"

#include <stdlib.h>

/* The table's sample errors run down from GF_ENOENT without a gap, so the
 * documented errors_by_kind[GF_ENOENT - code] is the kind, and fit it. */
#define GF_KIND_IS_OFFSET_(name, value, text)                                  \
    _Static_assert(GF_KIND_##name == GF_ENOENT - (value),                      \
                   "GF_" #name " breaks the run of sample error values");
GF_SAMPLE_ERRNO_MAP(GF_KIND_IS_OFFSET_)
#undef GF_KIND_IS_OFFSET_
_Static_assert(GF_SAMPLE_ERROR_KINDS <= GF_SAMPLE_ERROR_KINDS_MAX,
               "more sample error kinds than stats.errors_by_kind holds");

const char *gf_version(void)
{
    return GF_VERSION;
}

const char *gf_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define GF_STRERROR_CASE_(name, value, text)                                   \
    case value:                                                                \
        return text;
        GF_ERRNO_MAP(GF_STRERROR_CASE_)
#undef GF_STRERROR_CASE_
    }
    return "unknown error";
}

const char *gf_err_name(int code)
{
    switch (code) {
    case 0:
        return "GF_OK";
#define GF_ERR_NAME_CASE_(name, value, text)                                   \
    case value:                                                                \
        return "GF_" #name;
        GF_ERRNO_MAP(GF_ERR_NAME_CASE_)
#undef GF_ERR_NAME_CASE_
    }
    return "GF_E?";
}

int gf_sample_error_kind(int code)
{
    switch (code) {
#define GF_KIND_CASE_(name, value, text)                                       \
    case value:                                                                \
        return GF_KIND_##name;
        GF_SAMPLE_ERRNO_MAP(GF_KIND_CASE_)
#undef GF_KIND_CASE_
    }
    return -1;
}

void gf_free(void *p)
{
    free(p);
}
