/* A list file ("path label" lines) of any bytes: an index whose paths are
 * non-empty strings and whose labels are in range, no more classes than
 * its samples can mean (max(n, GF__CLASSES_MIN)), or an error that names
 * the file and the line. */
#include "fuzz.h"
#include "dataset.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("list.txt", data, size);
    gf__dataset ds;
    char why[256] = "";
    int rc = gf__dataset_open(&ds, path, why, sizeof why);
    if (rc < 0) {
        FUZZ_CHECK(rc == GF_EDATASET && strstr(why, "list.txt") != NULL);
        return 0;
    }
    FUZZ_CHECK(ds.n > 0 && ds.n_classes > 0 && ds.shard == NULL);
    FUZZ_CHECK((uint64_t)ds.n_classes <= (ds.n > GF__CLASSES_MIN ? ds.n : GF__CLASSES_MIN));
    for (uint64_t i = 0; i < ds.n; i++) {
        const char *p = gf__dataset_path(&ds, i);
        FUZZ_CHECK(p[0] != '\0' && ds.labels[i] >= 0 && ds.labels[i] < ds.n_classes);
    }
    gf__dataset_close(&ds);
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char list[] = "# images\n"
                               "a/x.jpg 0\n"
                               "b/with space.png\t12\r\n"
                               "\n"
                               "  c/y.png   3  \n"
                               "last.png 1048575";
    emit("list", list, sizeof list - 1);
    /* a label that parses but names more classes than the set can mean */
    static const char past[] = "a.jpg 1\nb.jpg 2147483646\n";
    emit("list-label-past-the-classes", past, sizeof past - 1);
    static const char bad[] = "a.jpg 1\nb.jpg -1\n";
    emit("list-bad-label", bad, sizeof bad - 1);
}
