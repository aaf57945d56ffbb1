/* The data set source string: shard lists and brace patterns
 * ("dir/train-{000000..000127}.tar,b.tar"), under a directory that does
 * not exist, so nothing real is opened: it must fail with a message,
 * never crash or run away with memory. */
#include "fuzz.h"
#include "dataset.h"

#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char root[] = "/nonexistent-gpufeed-fuzz/";
    static int in_empty_dir;
    if (!in_empty_dir) /* other list elements are relative to "." */
        in_empty_dir = chdir(fuzz_dir()) == 0;
    char src[sizeof root + 1024];
    size_t n = size < 1024 ? size : 1024;
    const uint8_t *nul = memchr(data, '\0', n);
    if (nul)
        n = (size_t)(nul - data);
    memcpy(src, root, sizeof root - 1);
    memcpy(src + sizeof root - 1, data, n);
    src[sizeof root - 1 + n] = '\0';

    gf__dataset ds;
    char why[256] = "";
    int rc = gf__dataset_open(&ds, src, why, sizeof why);
    FUZZ_CHECK(rc == GF_EDATASET && why[0] != '\0');
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char *const seeds[] = {
        "train-{000000..000127}.tar",
        "a.tar,b/c-{1..3}.tar,d-{08..10}-{0..1}.tar",
        "x{0..9}y{00..99}.TAR",
        "bad-{3..1}.tar",
        "dir.tar",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "source-%zu", i);
        emit(name, seeds[i], strlen(seeds[i]));
    }
}
