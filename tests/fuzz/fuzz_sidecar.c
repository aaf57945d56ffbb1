/* A shard's index sidecar (SHARD.idx) of any bytes beside a good shard:
 * the open never fails for it (a sidecar that does not match is ignored,
 * with one warning naming it, and the headers are read), every sample it
 * gives lies inside the shard with a label in range and a name a scan
 * would take. (The format has no checksum: a well-formed sidecar that
 * lists other members than the headers do is taken as it says, as a list
 * file is; test_tar checks that the one prepare writes is taken and gives
 * the scan's index.) The text parser alone, as the remote reader calls it
 * (the shard's size unknown), keeps every entry aligned, in order and
 * inside a recorded size, a label only from labels=, and member CRCs
 * only from member_crc32c=, one for every entry or none. */
#include "fuzz.h"
#include "dataset.h"
#include "dataset_indexers.h"
#include "crc32c.h"
#include "testutil.h"

#include <string.h>
#include <unistd.h>

static size_t off[3][2];

/* The shard: three keys, k0..k2, of an image, a label and a text member. */
static const char *shard(size_t *size)
{
    static char *path;
    static size_t len;
    if (!path) {
        tu_tar w = {0};
        for (int k = 0; k < 3; k++) {
            char name[16], data[300], cls[4];
            memset(data, 'a' + k, sizeof data);
            snprintf(name, sizeof name, "k%d.jpg", k);
            off[k][0] = tu_tar_file(&w, name, data, 100 + 100 * (size_t)k);
            snprintf(name, sizeof name, "k%d.cls", k);
            snprintf(cls, sizeof cls, "%d", k + 1);
            off[k][1] = tu_tar_file(&w, name, cls, 1);
            snprintf(name, sizeof name, "k%d.key", k);
            tu_tar_file(&w, name, "src/x.jpg", 9);
        }
        tu_tar_end(&w);
        len = w.len;
        path = strdup(fuzz_file("s.tar", w.p, w.len));
        free(w.p);
    }
    *size = len;
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t shard_size;
    const char *path = shard(&shard_size);
    gf__dataset scan, side;
    char why[256];
    char idx[4096];
    snprintf(idx, sizeof idx, "%s/s.idx", fuzz_dir());
    unlink(idx);
    FUZZ_CHECK(gf__dataset_open(&scan, path, why, sizeof why) == 0 && scan.n == 3);
    fuzz_file("s.idx", data, size);
    FUZZ_CHECK(gf__dataset_open(&side, path, why, sizeof why) == 0);
    FUZZ_CHECK(side.n_shards == 1 && side.n_classes > 0);
    if (side.warnings) { /* ignored: the scan's index, and why */
        FUZZ_CHECK(side.warnings == 1 && strstr(side.warning, "index sidecar ignored") &&
                   strstr(side.warning, "s.idx"));
        FUZZ_CHECK(side.n == scan.n);
    }
    for (uint64_t i = 0; i < side.n; i++) {
        FUZZ_CHECK(side.labels[i] >= 0 && side.labels[i] < side.n_classes);
        FUZZ_CHECK(side.data_off[i] <= shard_size &&
                   side.data_len[i] <= shard_size - side.data_off[i]);
        FUZZ_CHECK(side.data_crc[i] >= -1 && side.data_crc[i] <= (int64_t)UINT32_MAX);
        FUZZ_CHECK(!side.warnings || side.data_crc[i] == -1); /* a scan has none */
        const char *p = gf__dataset_path(&side, i);
        FUZZ_CHECK(strncmp(p, "s.tar:", 6) == 0 && p[6] != '/' && !strstr(p, ".."));
        if (side.warnings) {
            FUZZ_CHECK(strcmp(p, gf__dataset_path(&scan, i)) == 0);
            FUZZ_CHECK(side.labels[i] == scan.labels[i] && side.data_off[i] == scan.data_off[i]);
        }
    }
    gf__dataset_close(&scan);
    gf__dataset_close(&side);
    gf__sidecar sc;
    int rc = gf__sidecar_parse((const char *)data, size, GF__SIDECAR_SIZE_UNKNOWN, "s.idx", &sc,
                               why, sizeof why);
    FUZZ_CHECK(rc == 0 || rc == 2);
    FUZZ_CHECK(rc == 0 || (sc.n == 0 && strncmp(why, "s.idx: ", 7) == 0));
    uint64_t end = 0;
    for (size_t i = 0; i < sc.n; i++) {
        const gf__sidecar_entry *e = &sc.e[i];
        FUZZ_CHECK(e->img_off % 512 == 0 && e->cls_off % 512 == 0 && e->cls_size <= 64);
        FUZZ_CHECK(e->label == -1 ? !sc.labelled : sc.labelled && e->label >= 0);
        FUZZ_CHECK(e->img_off >= end && e->cls_off >= end);
        uint64_t a = e->img_off + e->img_size, b = e->cls_off + e->cls_size;
        end = a > b ? a : b;
        FUZZ_CHECK(sc.shard_bytes < 0 || end <= (uint64_t)sc.shard_bytes);
        FUZZ_CHECK(e->img_crc32c >= -1 && e->img_crc32c <= (int64_t)UINT32_MAX);
        FUZZ_CHECK((e->img_crc32c < 0) == (sc.e[0].img_crc32c < 0)); /* all or none */
        FUZZ_CHECK(e->img_crc32c < 0 || memmem(data, size, "member_crc32c=", 14));
    }
    FUZZ_CHECK(sc.n <= size / 24);
    /* a digest only as 8 hex digits after shard_crc32c=, and only on a taken sidecar */
    FUZZ_CHECK(sc.shard_crc32c >= -1 && sc.shard_crc32c <= (int64_t)UINT32_MAX);
    FUZZ_CHECK(sc.shard_crc32c < 0 || (rc == 0 && memmem(data, size, "shard_crc32c=", 13)));
    gf__sidecar_free(&sc);
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    size_t size;
    shard(&size);
    char text[1024];
    int n = snprintf(text, sizeof text, "v1.2 3 shard_bytes=%zu\n", size);
    for (int k = 0; k < 3; k++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "jpg %zu %d k%d.jpg cls %zu 1 k%d.cls key %zu 9 k%d.key\n", off[k][0],
                      100 + 100 * k, k, off[k][1], k, off[k][1] + 512, k);
    emit("sidecar", text, (size_t)n);
    /* DALI's own, without the size: judged by mtime */
    const char *nl = strchr(text, '\n');
    char plain[1024];
    int m = snprintf(plain, sizeof plain, "v1.2 3\n%s", nl + 1);
    emit("sidecar-dali", plain, (size_t)m);
    /* gpufeed index's: every label on the first line */
    m = snprintf(plain, sizeof plain, "v1.2 3 shard_bytes=%zu labels=1,2,3\n%s", size, nl + 1);
    emit("sidecar-labels", plain, (size_t)m);
    /* and its digest of the shard (the CRC's value is not checked locally) */
    m = snprintf(plain, sizeof plain, "v1.2 3 shard_bytes=%zu shard_crc32c=0a1B2c3D labels=1,2,3\n%s",
                 size, nl + 1);
    emit("sidecar-crc", plain, (size_t)m);
    /* and each image's digest, as gpufeed index writes it */
    uint32_t crc[3];
    for (int k = 0; k < 3; k++) {
        uint8_t img[300];
        memset(img, 'a' + k, sizeof img);
        crc[k] = gf__crc32c(img, 100 + 100 * (size_t)k);
    }
    m = snprintf(plain, sizeof plain,
                 "v1.2 3 shard_bytes=%zu labels=1,2,3 member_crc32c=%08x,%08x,%08x\n%s", size,
                 (unsigned)crc[0], (unsigned)crc[1], (unsigned)crc[2], nl + 1);
    emit("sidecar-member-crc", plain, (size_t)m);
}
