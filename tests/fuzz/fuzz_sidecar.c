/* A shard's index sidecar (SHARD.idx) of any bytes beside a good shard,
 * each input tried beside two: s.tar, three plain keys, and h.tar, whose
 * members a scan treats specially (pax and GNU long names, a non-ASCII
 * name, "./" and ustar prefixes, a base-256 size, a link, a directory, a
 * key without a label, a second image and a second .cls of a key, a key
 * split by another's member). The open never fails for it. A sidecar that
 * does not match is ignored, with one warning naming it, and the headers
 * are read; one that is taken gives exactly the index a header scan of
 * the same shard gives (members, offsets, sizes, labels): a sidecar is a
 * shortcut, never a second truth. The sidecar gpufeed index writes is
 * among the seeds, and taken. The text parser alone, as the remote reader
 * calls it (the shard's size unknown), keeps every entry aligned, in
 * order and inside a recorded size, a label only from labels=, and member
 * CRCs only from member_crc32c=, one for every entry or none. */
#include "fuzz.h"
#include "dataset.h"
#include "dataset_indexers.h"
#include "crc32c.h"
#include "testutil.h"

#include <string.h>
#include <unistd.h>

/* A member of a fixture shard: where its data lies, for the seeds. */
typedef struct member {
    char name[160];
    size_t off, size;
} member;

typedef struct fixture {
    const char *tar, *idx; /* file names in fuzz_dir() */
    char *path;            /* the shard's path */
    size_t size;
    member m[40];
    int n_m;
    gf__dataset scan; /* its index from its headers */
} fixture;

static fixture fx[2] = {{.tar = "s.tar", .idx = "s.idx"}, {.tar = "h.tar", .idx = "h.idx"}};

/* A regular member of n bytes of `fill` (or data), recorded as name. */
static void put(fixture *f, tu_tar *w, const char *name, const void *data, size_t n, char fill)
{
    char buf[400];
    if (!data) {
        memset(buf, fill, sizeof buf);
        data = buf;
    }
    member *m = &f->m[f->n_m++];
    snprintf(m->name, sizeof m->name, "%s", name + (strncmp(name, "./", 2) == 0 ? 2 : 0));
    m->size = n;
    m->off = tu_tar_file(w, name, data, n);
}

/* A pax 'x' header of one record "key=value". */
static void pax(tu_tar *w, const char *key, const char *value)
{
    char rec[300];
    size_t body = strlen(key) + strlen(value) + 3; /* ' ', '=', '\n' */
    size_t len = body + 1;
    while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
        len = body + (size_t)snprintf(NULL, 0, "%zu", len);
    int n = snprintf(rec, sizeof rec, "%zu %s=%s\n", len, key, value);
    tu_tar_header(w, "PaxHeaders/x", 'x', (uint64_t)n, NULL);
    tu_tar_raw(w, rec, (size_t)n);
    tu_tar_pad(w);
}

/* A GNU 'L' long name for the next member. */
static void gnu_long(tu_tar *w, const char *name)
{
    tu_tar_header(w, "././@LongLink", 'L', strlen(name) + 1, NULL);
    tu_tar_raw(w, name, strlen(name) + 1);
    tu_tar_pad(w);
}

static const char LONG_KEY[] = "long/nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
                               "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn/k1";

static void build_h(fixture *f, tu_tar *w)
{
    char name[160], block[101];
    /* a non-ASCII name from pax; the block spells it as tarfile does */
    pax(w, "path", "d/\xc3\xa9" "0.jpg");
    put(f, w, "d/?0.jpg", NULL, 100, 'a');
    snprintf(f->m[f->n_m - 1].name, sizeof f->m[0].name, "d/\xc3\xa9" "0.jpg");
    pax(w, "path", "d/\xc3\xa9" "0.cls");
    put(f, w, "d/?0.cls", "4", 1, 0);
    snprintf(f->m[f->n_m - 1].name, sizeof f->m[0].name, "d/\xc3\xa9" "0.cls");
    /* GNU long names; the block holds their first 100 bytes */
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "%s.%s", LONG_KEY, k ? "cls" : "jpg");
        gnu_long(w, name);
        snprintf(block, sizeof block, "%s", name);
        put(f, w, block, k ? "1" : NULL, k ? 1 : 120, 'b');
        snprintf(f->m[f->n_m - 1].name, sizeof f->m[0].name, "%s", name);
    }
    put(f, w, "./k2.jpg", NULL, 130, 'c');
    put(f, w, "./k2.cls", "0\n", 2, 0);
    /* the ustar prefix */
    for (int k = 0; k < 2; k++) {
        member *m = &f->m[f->n_m++];
        snprintf(m->name, sizeof m->name, "pre/fix/k3.%s", k ? "cls" : "png");
        m->size = k ? 1 : 140;
        tu_tar_header(w, k ? "k3.cls" : "k3.png", '0', m->size, "pre/fix");
        m->off = w->len;
        tu_tar_raw(w, k ? "3" : "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
                               "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
                   m->size);
        tu_tar_pad(w);
    }
    tu_tar_header(w, "k4.jpg", '2', 0, NULL); /* a link: no image */
    put(f, w, "k4.cls", "1", 1, 0);
    put(f, w, "k5.jpg", NULL, 50, 'e'); /* no label */
    put(f, w, "k5.json", "{}", 2, 0);
    tu_tar_header(w, "dir/", '5', 0, NULL);
    pax(w, "size", "50"); /* as the header says */
    put(f, w, "k6.jpg", NULL, 50, 'f');
    put(f, w, "k6.cls", "6", 1, 0);
    /* a base-256 size field */
    size_t at = w->len;
    put(f, w, "k7.jpg", NULL, 60, 'g');
    uint8_t *h = (uint8_t *)w->p + at;
    memset(h + 124, 0, 12);
    h[124] = 0x80;
    h[135] = 60;
    tu_tar_checksum(h);
    put(f, w, "k7.cls", "7", 1, 0);
    put(f, w, "k8.jpg", NULL, 70, 'h'); /* the scan's image of k8 */
    put(f, w, "k8.png", NULL, 80, 'i'); /* a second one: skipped */
    put(f, w, "k8.cls", "8", 1, 0);
    put(f, w, "k9.jpg", NULL, 90, 'j');
    put(f, w, "k9.cls", "9", 1, 0); /* the scan's label of k9 */
    put(f, w, "k9.cls", "3", 1, 0); /* a second one: skipped */
    put(f, w, "ka.jpg", NULL, 40, 'k'); /* ka split by x: no sample */
    put(f, w, "x.txt", "x", 1, 0);
    put(f, w, "ka.cls", "2", 1, 0);
}

static void build_s(fixture *f, tu_tar *w)
{
    for (int k = 0; k < 3; k++) {
        char name[16], cls[4];
        snprintf(name, sizeof name, "k%d.jpg", k);
        put(f, w, name, NULL, 100 + 100 * (size_t)k, (char)('a' + k));
        snprintf(name, sizeof name, "k%d.cls", k);
        snprintf(cls, sizeof cls, "%d", k + 1);
        put(f, w, name, cls, 1, 0);
        snprintf(name, sizeof name, "k%d.key", k);
        put(f, w, name, "src/x.jpg", 9, 0);
    }
}

/* The shards, written once, and their indexes from their headers. */
static void fixtures(void)
{
    if (fx[0].path)
        return;
    for (int i = 0; i < 2; i++) {
        fixture *f = &fx[i];
        tu_tar w = {0};
        (i ? build_h : build_s)(f, &w);
        tu_tar_end(&w);
        f->size = w.len;
        f->path = strdup(fuzz_file(f->tar, w.p, w.len));
        free(w.p);
        char why[256];
        FUZZ_CHECK(gf__dataset_open(&f->scan, f->path, why, sizeof why) == 0);
        FUZZ_CHECK(f->scan.n == (i ? 8u : 3u));
    }
}

/* The sidecar's index is the scan's: the same samples in the same order,
 * each the same member (name, data offset, size) with the same label. */
static void same_index(const gf__dataset *a, const gf__dataset *b)
{
    FUZZ_CHECK(a->n == b->n && a->n_classes == b->n_classes);
    for (uint64_t i = 0; i < a->n; i++) {
        FUZZ_CHECK(strcmp(gf__dataset_path(a, i), gf__dataset_path(b, i)) == 0);
        FUZZ_CHECK(a->labels[i] == b->labels[i]);
        FUZZ_CHECK(a->data_off[i] == b->data_off[i] && a->data_len[i] == b->data_len[i]);
    }
}

static void beside(const fixture *f, const uint8_t *data, size_t size)
{
    gf__dataset side;
    char why[256];
    fuzz_file(f->idx, data, size);
    FUZZ_CHECK(gf__dataset_open(&side, f->path, why, sizeof why) == 0);
    FUZZ_CHECK(side.n_shards == 1 && side.n_classes > 0);
    /* The headers are scanned either way; ignored, the sidecar is one
     * warning more, naming it (the first where the scan has none). */
    int ignored = side.warnings == f->scan.warnings + 1;
    FUZZ_CHECK(ignored || side.warnings == f->scan.warnings);
    FUZZ_CHECK(!ignored || f->scan.warnings ||
               (strstr(side.warning, "index sidecar ignored") && strstr(side.warning, f->idx)));
    same_index(&side, &f->scan);
    size_t prefix = strlen(f->tar);
    for (uint64_t i = 0; i < side.n; i++) {
        FUZZ_CHECK(side.data_off[i] <= f->size && side.data_len[i] <= f->size - side.data_off[i]);
        FUZZ_CHECK(side.data_crc[i] >= -1 && side.data_crc[i] <= (int64_t)UINT32_MAX);
        FUZZ_CHECK(!ignored || side.data_crc[i] == -1); /* a scan has none */
        const char *p = gf__dataset_path(&side, i);
        FUZZ_CHECK(strncmp(p, f->tar, prefix) == 0 && p[prefix] == ':' && p[prefix + 1] != '/');
    }
    gf__dataset_close(&side);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fixtures();
    beside(&fx[0], data, size);
    beside(&fx[1], data, size);

    char why[256];
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
        /* a line may lack a .cls (index --fields without a label):
         * cls_off 0, no member's data starts there */
        FUZZ_CHECK(e->img_off >= end && (e->cls_off == 0 || e->cls_off >= end));
        FUZZ_CHECK(e->cls_off != 0 || e->cls_size == 0);
        uint64_t a = e->img_off + e->img_size, b = e->cls_off ? e->cls_off + e->cls_size : 0;
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

/* Member `name` of h.tar (its nth of that name) as "EXT OFF SIZE NAME ". */
static int component(char *out, size_t cap, const char *name, int nth)
{
    const fixture *f = &fx[1];
    for (int i = 0; i < f->n_m; i++)
        if (strcmp(f->m[i].name, name) == 0 && nth-- == 0)
            return snprintf(out, cap, "%s %zu %zu %s ", strrchr(name, '.') + 1, f->m[i].off,
                            f->m[i].size, name);
    FUZZ_CHECK(!"a member of h.tar");
    return 0;
}

/* A DALI sidecar of h.tar listing the scan's samples, but for key `swap`,
 * whose line is `line` instead (lines of them): one a scan would not give. */
static void h_sidecar(fuzz_emit emit, const char *seed, const char *swap, const char *line,
                      int lines)
{
    static const char *const keys[][2] = {
        {"d/\xc3\xa9" "0.jpg", "d/\xc3\xa9" "0.cls"}, {NULL, NULL}, {"k2.jpg", "k2.cls"},
        {"pre/fix/k3.png", "pre/fix/k3.cls"}, {"k6.jpg", "k6.cls"}, {"k7.jpg", "k7.cls"},
        {"k8.jpg", "k8.cls"}, {"k9.jpg", "k9.cls"}};
    char text[4096], img[160], cls[160];
    int n = snprintf(text, sizeof text, "v1.2 %d\n", 7 + lines);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        snprintf(img, sizeof img, "%s.jpg", LONG_KEY);
        snprintf(cls, sizeof cls, "%s.cls", LONG_KEY);
        const char *a = keys[k][0] ? keys[k][0] : img, *b = keys[k][1] ? keys[k][1] : cls;
        if (swap && strncmp(a, swap, strlen(swap)) == 0 && a[strlen(swap)] == '.') {
            n += snprintf(text + n, sizeof text - (size_t)n, "%s\n", line);
            continue;
        }
        n += component(text + n, sizeof text - (size_t)n, a, 0);
        n += component(text + n, sizeof text - (size_t)n, b, 0);
        text[n - 1] = '\n';
    }
    emit(seed, text, (size_t)n);
}

void fuzz_seeds(fuzz_emit emit)
{
    fixtures();
    size_t size = fx[0].size;
    const member *m = fx[0].m; /* k0.jpg, k0.cls, k0.key, k1.jpg, ... */
    char text[1024];
    int n = snprintf(text, sizeof text, "v1.2 3 shard_bytes=%zu\n", size);
    for (int k = 0; k < 3; k++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "jpg %zu %zu k%d.jpg cls %zu 1 k%d.cls key %zu 9 k%d.key\n", m[3 * k].off,
                      m[3 * k].size, k, m[3 * k + 1].off, k, m[3 * k + 2].off, k);
    emit("sidecar", text, (size_t)n);
    /* DALI's own, without the size: judged by mtime */
    const char *nl = strchr(text, '\n');
    char plain[1024];
    int p = snprintf(plain, sizeof plain, "v1.2 3\n%s", nl + 1);
    emit("sidecar-dali", plain, (size_t)p);
    /* gpufeed index's: every label on the first line */
    p = snprintf(plain, sizeof plain, "v1.2 3 shard_bytes=%zu labels=1,2,3\n%s", size, nl + 1);
    emit("sidecar-labels", plain, (size_t)p);
    /* and its digest of the shard (the CRC's value is not checked locally) */
    p = snprintf(plain, sizeof plain, "v1.2 3 shard_bytes=%zu shard_crc32c=0a1B2c3D labels=1,2,3\n%s",
                 size, nl + 1);
    emit("sidecar-crc", plain, (size_t)p);
    /* and each image's digest, as gpufeed index writes it */
    uint32_t crc[3];
    for (int k = 0; k < 3; k++) {
        uint8_t img[300];
        memset(img, 'a' + k, sizeof img);
        crc[k] = gf__crc32c(img, 100 + 100 * (size_t)k);
    }
    p = snprintf(plain, sizeof plain,
                 "v1.2 3 shard_bytes=%zu labels=1,2,3 member_crc32c=%08x,%08x,%08x\n%s", size,
                 (unsigned)crc[0], (unsigned)crc[1], (unsigned)crc[2], nl + 1);
    emit("sidecar-member-crc", plain, (size_t)p);

    /* h.tar's: what gpufeed index writes for it, ... */
    char *idx = NULL, why[256];
    size_t len = 0;
    FUZZ_CHECK(gf_shard_index(fx[1].path, &idx, &len, NULL, why, sizeof why) == 0);
    emit("sidecar-h-index", idx, len);
    free(idx);
    /* ... and lines a scan would not give: k8's second image, k9's second
     * label, ka's members split by x.txt's */
    char line[512];
    int l = component(line, sizeof line, "k8.png", 0);
    component(line + l, sizeof line - (size_t)l, "k8.cls", 0);
    h_sidecar(emit, "sidecar-h-second-image", "k8", line, 1);
    l = component(line, sizeof line, "k9.jpg", 0);
    component(line + l, sizeof line - (size_t)l, "k9.cls", 1);
    h_sidecar(emit, "sidecar-h-second-label", "k9", line, 1);
    l = component(line, sizeof line, "ka.jpg", 0);
    component(line + l, sizeof line - (size_t)l, "ka.cls", 0);
    char text2[512];
    l = component(text2, sizeof text2, "k9.jpg", 0);
    l += component(text2 + l, sizeof text2 - (size_t)l, "k9.cls", 0);
    snprintf(text2 + l - 1, sizeof text2 - (size_t)l + 1, "\n%s", line);
    h_sidecar(emit, "sidecar-h-split-key", "k9", text2, 2);
}
