/* Error names and texts, generated from the one table in gpufeed.h. */
#include "common.h"

#include "config.h"

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
