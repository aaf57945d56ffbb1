/* A mix's text (settings.data "mix:W=SOURCE|..."): weights and sources
 * parsed, each source opened under a directory that does not exist (put
 * after each '='), so nothing real is opened: it must fail with a
 * message, never crash or run away with memory. */
#include "fuzz.h"
#include "dataset.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char root[] = "/nonexistent-gpufeed-fuzz/";
    char src[8 + 1024 * sizeof root];
    size_t at = 0;
    memcpy(src, "mix:", 4);
    at = 4;
    size_t n = size < 1024 ? size : 1024;
    bool in_source = false;
    for (size_t i = 0; i < n && data[i]; i++) {
        src[at++] = (char)data[i];
        if (data[i] == '|')
            in_source = false;
        else if (data[i] == '=' && !in_source) {
            in_source = true;
            memcpy(src + at, root, sizeof root - 1);
            at += sizeof root - 1;
        }
    }
    src[at] = '\0';
    gf__dataset ds;
    char why[256] = "";
    int rc = gf__dataset_open(&ds, src, why, sizeof why);
    FUZZ_CHECK((rc == GF_EDATASET || rc == GF_EINVAL) && why[0] != '\0');
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char *const seeds[] = {
        "0.7=train|0.3=extra-{000000..000015}.tar",
        "1=a|2=b|3=c.txt",
        "1e-9=a|1=b",
        "x=a",
        "1=mix:1=a",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "mix-%zu", i);
        emit(name, seeds[i], strlen(seeds[i]));
    }
}
