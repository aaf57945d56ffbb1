/* A tar shard of any bytes, two ways: the raw scan (every member it
 * reports lies inside the file and can be read back), and the data set
 * index over it (every sample's bytes lie inside the file, labels are in
 * range, an error names the shard and says why). */
#include "fuzz.h"
#include "dataset.h"
#include "reader.h"
#include "tar.h"
#include "testutil.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* No absolute path, no ".." component. */
static int safe_name(const char *name)
{
    if (name[0] == '/')
        return 0;
    for (const char *p = name; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += n + (p[n] == '/');
    }
    return 1;
}

typedef struct scan {
    uint64_t file_size, members;
} scan;

static int on_member(void *ctx, gf__tar *t, const gf__tar_member *m)
{
    scan *s = ctx;
    s->members++;
    /* a skipped member keeps its raw name, which may hold a NUL byte */
    FUZZ_CHECK(m->name && (m->skip || strlen(m->name) == m->name_len));
    FUZZ_CHECK(m->header_offset % 512 == 0 && m->header_offset < s->file_size);
    FUZZ_CHECK(m->offset <= s->file_size && m->size <= s->file_size - m->offset);
    if (m->skip == NULL) /* a sample candidate: a safe, relative name */
        FUZZ_CHECK(safe_name(m->name));
    uint8_t head[64];
    size_t n = m->size < sizeof head ? (size_t)m->size : sizeof head;
    char why[256];
    FUZZ_CHECK(gf__tar_read(t, m->offset, head, n, why, sizeof why) == 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("shard.tar", data, size);
    char why[256] = "", warning[128] = "";
    uint64_t warnings = 0;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    scan s = {.file_size = size};
    gf__tar_damage dmg;
    int rc = gf__tar_scan(fd, size, "shard.tar", on_member, &s, &warnings, warning,
                          sizeof warning, &dmg, why, sizeof why);
    close(fd);
    FUZZ_CHECK(rc == 0 || rc == GF_EDATASET);
    if (rc)
        FUZZ_CHECK(strncmp(why, "shard.tar: ", 11) == 0);

    gf__dataset ds;
    why[0] = '\0';
    rc = gf__dataset_open(&ds, path, why, sizeof why);
    if (rc < 0) {
        FUZZ_CHECK(rc == GF_EDATASET && strstr(why, "shard.tar") != NULL);
        return 0;
    }
    FUZZ_CHECK(ds.n > 0 && ds.n_classes > 0 && ds.n_shards == 1);
    for (uint64_t i = 0; i < ds.n; i++) {
        FUZZ_CHECK(ds.labels[i] >= 0 && ds.labels[i] < ds.n_classes);
        FUZZ_CHECK(ds.data_off[i] <= size && ds.data_len[i] <= size - ds.data_off[i]);
        const char *rel;
        uint64_t off, len;
        gf__dataset_extent(&ds, i, &rel, &off, &len);
        gf__buf b = {0};
        char reason[192];
        int r = gf__read_range(ds.root_fd, rel, off, len, &b, 1u << 20, reason, sizeof reason);
        FUZZ_CHECK(r == 0 ? b.len == len : len == 0 && r == GF_EEMPTY);
        gf__buf_free(&b);
    }
    gf__dataset_close(&ds);
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    tu_tar w = {0};
    uint8_t px[8 * 6 * 3];
    size_t len;
    tu_fill(px, 8, 6, 3, 7);
    uint8_t *png = tu_png_mem(px, 8, 6, 3, &len);
    tu_tar_file(&w, "a/k1.png", png, len);
    tu_tar_file(&w, "a/k1.cls", "3", 1);
    tu_tar_file(&w, "a/k1.json", "{}", 2);
    tu_tar_file(&w, "./k2.jpg", png, len);
    tu_tar_file(&w, "./k2.cls", "0\n", 2);
    tu_tar_header(&w, "k3.png", '2', 0, NULL); /* a symlink: skipped */
    tu_tar_file(&w, "k3.cls", "1", 1);
    tu_tar_end(&w);
    emit("shard", w.p, w.len);

    /* pax path record, a GNU long name and a ustar prefix. */
    tu_tar p = {0};
    static const char pax[] = "30 path=long/pax/name/k4.png\n";
    tu_tar_header(&p, "PaxHeaders/x", 'x', sizeof pax - 1, NULL);
    tu_tar_raw(&p, pax, sizeof pax - 1);
    tu_tar_pad(&p);
    tu_tar_file(&p, "ignored.png", png, len);
    tu_tar_file(&p, "long/pax/name/k4.cls", "2", 1);
    static const char gnu[] = "gnu/long/name/k5.cls";
    tu_tar_header(&p, "././@LongLink", 'L', sizeof gnu, NULL);
    tu_tar_raw(&p, gnu, sizeof gnu);
    tu_tar_pad(&p);
    tu_tar_file(&p, "short.cls", "4", 1);
    tu_tar_header(&p, "k6.png", '0', len, "pre/fix");
    tu_tar_raw(&p, png, len);
    tu_tar_pad(&p);
    tu_tar_end(&p);
    emit("shard-long-names", p.p, p.len);
    free(png);
    free(w.p);
    free(p.p);
}
