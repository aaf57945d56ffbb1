/* A tar shard of any bytes, three ways: the raw scan (every member it
 * reports lies inside the file and can be read back; a damage record lies
 * inside it too and says why), and the data set index over it, with
 * damage failing the open or taken in part (every sample's bytes lie
 * inside the file, labels are in range, an error names the shard and says
 * why; in part: the damaged shard is recorded once, with what the scan
 * saw, and a shard that opens whole opens the same both ways).
 *
 * And the per-member check every read runs (gf__tar_member_check, on the
 * block before a member's data), held to its oracle on hostile headers
 * (pax records, GNU long names, names not in ASCII, base-256 sizes): each
 * member the scan takes as a sample candidate passes it at its own block
 * with its own name and size, and every sample the index holds passes it
 * as a read does (gf__dataset_member_check); it fails for a size off by
 * one, a name whose first byte the block nowhere holds, a byte of the
 * block changed outside its checksum field, and the previous member's
 * block where that one's size, or plain ASCII name, differs. */
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
    /* the previous sample candidate: its block, name and size */
    uint8_t prev[GF__TAR_BLOCK];
    char prev_name[256];
    size_t prev_len;
    uint64_t prev_size;
    int has_prev;
} scan;

static int check(const uint8_t *h, const char *name, size_t len, uint64_t size)
{
    char why[256];
    return gf__tar_member_check(h, name, len, size, why, sizeof why);
}

static int plain(const char *name, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] >= 0x80)
            return 0;
    return len <= 100;
}

/* The oracle of gf__tar_member_check for a sample candidate m whose
 * header block is h (see the top). */
static void check_member(scan *s, const gf__tar_member *m, uint8_t *h)
{
    FUZZ_CHECK(check(h, m->name, m->name_len, m->size) == 0);
    FUZZ_CHECK(check(h, m->name, m->name_len, m->size + 1) < 0);
    FUZZ_CHECK(m->size == 0 || check(h, m->name, m->name_len, m->size - 1) < 0);
    /* a first byte (a letter) the block's name and prefix fields lack */
    char other[256];
    if (m->name_len < sizeof other) {
        memcpy(other, m->name, m->name_len);
        for (int c = 'A'; c <= 'Z'; c++)
            if (!memchr(h, c, 100) && !memchr(h + 345, c, 155) && c != m->name[0]) {
                other[0] = (char)c;
                FUZZ_CHECK(check(h, other, m->name_len, m->size) < 0);
                break;
            }
    }
    /* one byte changed outside the checksum field breaks the checksum */
    size_t at = (size_t)(m->header_offset / GF__TAR_BLOCK * 37 + m->size) % GF__TAR_BLOCK;
    if (at < 148 || at >= 156) {
        h[at] ^= 0x5a;
        FUZZ_CHECK(check(h, m->name, m->name_len, m->size) < 0);
        h[at] ^= 0x5a;
    }
    /* the previous candidate's block, another member */
    if (s->has_prev && (s->prev_size != m->size ||
                        (plain(m->name, m->name_len) && plain(s->prev_name, s->prev_len) &&
                         (m->name_len != s->prev_len ||
                          memcmp(m->name, s->prev_name, m->name_len) != 0))))
        FUZZ_CHECK(check(s->prev, m->name, m->name_len, m->size) < 0);
    if (m->name_len < sizeof s->prev_name) {
        memcpy(s->prev, h, GF__TAR_BLOCK);
        memcpy(s->prev_name, m->name, m->name_len);
        s->prev_len = m->name_len;
        s->prev_size = m->size;
        s->has_prev = 1;
    }
}

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
    uint8_t h[GF__TAR_BLOCK];
    FUZZ_CHECK(m->offset >= GF__TAR_BLOCK &&
               gf__tar_read(t, m->offset - GF__TAR_BLOCK, h, sizeof h, why, sizeof why) == 0);
    if (m->skip == NULL)
        check_member(s, m, h);
    return 0;
}

static void check_index(const gf__dataset *ds, size_t size);

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
    if (rc) {
        FUZZ_CHECK(strncmp(why, "shard.tar: ", 11) == 0);
        FUZZ_CHECK(dmg.offset <= size && dmg.reason[0] && strstr(why, dmg.reason));
        FUZZ_CHECK(dmg.code == GF_EEMPTY || dmg.code == GF_ETRUNC || dmg.code == GF_EIO ||
                   dmg.code == GF_ECORRUPT);
    }

    gf__dataset ds;
    why[0] = '\0';
    int whole = gf__dataset_open(&ds, path, why, sizeof why);
    if (whole < 0)
        FUZZ_CHECK(whole == GF_EDATASET && strstr(why, "shard.tar") != NULL);
    else
        check_index(&ds, size);
    uint64_t n_whole = whole < 0 ? 0 : ds.n;
    gf__dataset_close(&ds);

    gf__dataset_opts o;
    gf__dataset_default_opts(&o);
    o.shard_skip = 1;
    rc = gf__dataset_open_with(&ds, path, &o, why, sizeof why);
    if (rc < 0) {
        FUZZ_CHECK(rc == GF_EDATASET && strstr(why, "shard.tar") != NULL);
        return 0;
    }
    check_index(&ds, size);
    if (whole == 0)
        FUZZ_CHECK(ds.n == n_whole && ds.n_damage == 0);
    else
        FUZZ_CHECK(ds.n_damage == 1);
    if (ds.n_damage) {
        const gf__shard_damage *d = &ds.damage[0];
        FUZZ_CHECK(d->shard == 0 && d->offset <= size && d->kept <= s.members);
        FUZZ_CHECK(ds.n * 2 <= d->kept && d->lost <= s.members - d->kept + 1);
        gf_sample_error e;
        FUZZ_CHECK(gf__dataset_damage(&ds, &e, 1) == 1 && e.sample == -1);
        FUZZ_CHECK(strstr(e.path, "shard.tar") && strstr(e.reason, " lost"));
    }
    gf__dataset_close(&ds);
    return 0;
}

static void check_index(const gf__dataset *dsp, size_t size)
{
    const gf__dataset ds = *dsp;
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
        FUZZ_CHECK(r == 0 && b.len == len); /* a member's header comes with it */
        /* as every read checks it: the index's member is the block's */
        FUZZ_CHECK(gf__dataset_member_check(dsp, i, b.data, b.len, reason, sizeof reason) == 0);
        gf__buf_free(&b);
    }
}

/* A member named by a pax path, its block naming it `block`. */
static void pax_member(tu_tar *w, const char *path, const char *block, const void *d, size_t n)
{
    char rec[300];
    size_t body = strlen(path) + 7; /* ' ', "path", '=', '\n' */
    size_t len = body + 2;
    while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
        len = body + (size_t)snprintf(NULL, 0, "%zu", len);
    int rn = snprintf(rec, sizeof rec, "%zu path=%s\n", len, path);
    tu_tar_header(w, "PaxHeaders/p", 'x', (uint64_t)rn, NULL);
    tu_tar_raw(w, rec, (size_t)rn);
    tu_tar_pad(w);
    tu_tar_file(w, block, d, n);
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
    /* Damaged: cut inside the second member's data, inside a header, and
     * an image where a tar should be. */
    emit("shard-cut-data", w.p, 512 * 3 + 100);
    emit("shard-cut-header", w.p, 512 * 4 + 200);
    uint8_t jpeg[600] = {0xff, 0xd8, 0xff, 0xe0};
    emit("shard-jpeg", jpeg, sizeof jpeg);

    /* pax path record, a GNU long name and a ustar prefix. */
    tu_tar p = {0};
    static const char pax[] = "29 path=long/pax/name/k4.png\n";
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
    free(p.p);

    /* Headers as writers write them, each block spelling its member as
     * the check reads it: tarfile's pax (a name not in ASCII, '?' in the
     * block; a long one, its first 100 bytes), GNU tar's long names from
     * "./", a base-256 size, pax size= as the block's, a signed checksum. */
    tu_tar q = {0};
    char name[200], block[101];
    pax_member(&q, "d/\xc3\xa9t\xc3\xa9.png", "d/?t?.png", png, len);
    pax_member(&q, "d/\xc3\xa9t\xc3\xa9.cls", "d/?t?.cls", "1", 1);
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "./%0120d/k7.%s", 7, k ? "cls" : "jpg");
        static const char L[] = "././@LongLink";
        tu_tar_header(&q, L, 'L', strlen(name) + 1, NULL);
        tu_tar_raw(&q, name, strlen(name) + 1);
        tu_tar_pad(&q);
        memcpy(block, name, 100);
        block[100] = '\0';
        tu_tar_file(&q, block, k ? "2" : (const char *)png, k ? 1 : len);
    }
    size_t at = q.len;
    tu_tar_file(&q, "k8.png", png, len);
    memset(q.p + at + 124, 0, 12);
    q.p[at + 124] = 0x80;
    q.p[at + 134] = (uint8_t)(len >> 8);
    q.p[at + 135] = (uint8_t)len;
    tu_tar_checksum(q.p + at);
    tu_tar_file(&q, "k8.cls", "4", 1);
    static const char size_rec[] = "12 size=%zu\n";
    char rec[32];
    int rn = snprintf(rec, sizeof rec, size_rec, len);
    tu_tar_header(&q, "PaxHeaders/k9", 'x', (uint64_t)rn, NULL);
    tu_tar_raw(&q, rec, (size_t)rn);
    tu_tar_pad(&q);
    tu_tar_file(&q, "k9.png", png, len);
    tu_tar_file(&q, "k9.cls", "6", 1);
    at = q.len;
    tu_tar_file(&q, "k9\xe9.cls", "5", 1); /* another key: the signed sum */
    uint8_t *h = q.p + at;
    memset(h + 148, ' ', 8);
    int sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (int8_t)h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    tu_tar_end(&q);
    emit("shard-writers", q.p, q.len);
    free(q.p);
    free(png);
    free(w.p);
}
