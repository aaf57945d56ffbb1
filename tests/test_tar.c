/* Tar shards: the scanner on good and hostile archives, shard source
 * syntax, range reads, and the loader on shards against the same images as
 * an ImageFolder. Archives are made here by a tiny tar writer. */
#include "gpufeed.h"
#include "dataset.h"
#include "dataset_indexers.h"
#include "crc32c.h"
#include "reader.h"
#include "tar.h"
#include "testutil.h"
#include "tu_engine.h"
#include "run_suite.h"

#include <check.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* A tar writer */

/* The writer is tests/testutil's tu_tar; tar-specific extras follow. */
typedef tu_tar tw;

static size_t tw_text(tw *w, const char *name, const char *text)
{
    return tu_tar_file(w, name, text, strlen(text));
}

static void pax_record(char *out, size_t *len, const char *key, const char *val)
{
    size_t body = strlen(key) + strlen(val) + 3; /* ' ' '=' '\n' */
    size_t n = body + 1;
    while (snprintf(NULL, 0, "%zu", n) + body != n)
        n++;
    *len += (size_t)sprintf(out + *len, "%zu %s=%s\n", n, key, val);
}

/* A pax 'x' header for the next member: path (may be NULL), size (< 0: none). */
static void tw_pax(tw *w, const char *path, long long size)
{
    char rec[8192];
    size_t n = 0;
    pax_record(rec, &n, "mtime", "1700000000.5");
    if (path)
        pax_record(rec, &n, "path", path);
    if (size >= 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", size);
        pax_record(rec, &n, "size", v);
    }
    tu_tar_header(w, "PaxHeaders/x", 'x', n, NULL);
    tu_tar_raw(w, rec, n);
    tu_tar_pad(w);
}

static void tw_gnu_long(tw *w, char type, const char *name)
{
    size_t n = strlen(name) + 1;
    tu_tar_header(w, "././@LongLink", type, n, NULL);
    tu_tar_raw(w, name, n);
    tu_tar_pad(w);
}


static char *dir;

static void setup(void)
{
    dir = tu_mkdtemp();
}

static void teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

static char *path_in(const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Writes w to dir/name and frees it; returns the path (caller frees). */
static char *tw_save(tw *w, const char *name)
{
    char *p = path_in(name);
    tu_write_file(p, w->p, w->len);
    free(w->p);
    memset(w, 0, sizeof *w);
    return p;
}

static int open_ds(gf__dataset *ds, const char *src, char *why, size_t why_len)
{
    return gf__dataset_open(ds, src, why, why_len);
}

/* ------------------------------------------------------------------------ */

/* Loop tests with a reader: _i == URING_CASE (the uring test case, run
 * alone: skipped where io_uring is refused) takes io_uring, 0 pread. */
#define URING_CASE 1

/* An io_uring read on a busy machine may wait for a kernel worker: 10 s. */
static int reap_one(gf__uring *u, gf__read_done *d)
{
    for (int i = 0; i < 10000; i++) {
        if (gf__uring_reap(u, d, 1))
            return 1;
        usleep(1000);
    }
    return 0;
}

START_TEST(members_are_found_with_offsets_sizes_and_labels)
{
    tw w = {0};
    const char img_a[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    uint8_t img_b[1300];
    for (size_t i = 0; i < sizeof img_b; i++)
        img_b[i] = (uint8_t)(i * 7);
    tw_text(&w, "a.cls", "3");
    size_t oa = tu_tar_file(&w, "a.jpg", img_a, sizeof img_a);
    tw_text(&w, "a.json", "{}");
    size_t ob = tu_tar_file(&w, "./sub/b.png", img_b, sizeof img_b);
    tw_text(&w, "./sub/b.cls", " 1\n");
    size_t oc = tu_tar_file(&w, "c.JPEG", "CC", 2);
    tw_text(&w, "c.cls", "0");
    tu_tar_end(&w);
    char *p = tw_save(&w, "x.tar");

    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 3);
    ck_assert_uint_eq(ds.n_shards, 1);
    ck_assert_str_eq(ds.shard_paths[0], p);
    ck_assert_int_eq(ds.n_classes, 4);
    ck_assert_int_eq(ds.labels[0], 3);
    ck_assert_int_eq(ds.labels[1], 1);
    ck_assert_int_eq(ds.labels[2], 0);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), "x.tar:a.jpg");
    ck_assert_str_eq(gf__dataset_path(&ds, 1), "x.tar:sub/b.png");
    ck_assert_str_eq(gf__dataset_path(&ds, 2), "x.tar:c.JPEG");
    ck_assert_uint_eq(ds.data_off[0], oa);
    ck_assert_uint_eq(ds.data_len[0], sizeof img_a);
    ck_assert_uint_eq(ds.data_off[1], ob);
    ck_assert_uint_eq(ds.data_len[1], sizeof img_b);
    ck_assert_uint_eq(ds.data_off[2], oc);
    ck_assert_uint_eq(ds.skipped_members + ds.skipped_keys + ds.warnings, 0);

    /* The extents read back each member's header and bytes, by pread and
     * by io_uring; the header is the member's. */
    gf__buf b = {0};
    const char *rel;
    uint64_t off, len;
    gf__dataset_extent(&ds, 1, &rel, &off, &len);
    ck_assert_int_eq(gf__read_range(ds.root_fd, rel, off, len, &b, 0, why, sizeof why), 0);
    ck_assert_uint_eq(b.len, GF__TAR_BLOCK + sizeof img_b);
    ck_assert(memcmp(b.data + GF__TAR_BLOCK, img_b, sizeof img_b) == 0);
    ck_assert_msg(gf__dataset_member_check(&ds, 1, b.data, b.len, why, sizeof why) == 0, "%s",
                  why);
    /* Another member's header is refused, naming the shard and the names. */
    ck_assert_int_eq(gf__dataset_member_check(&ds, 0, b.data, b.len, why, sizeof why),
                     GF_ETRUNC);
    gf__dataset_extent(&ds, 0, &rel, &off, &len);
    gf__buf a = {0};
    ck_assert_int_eq(gf__read_range(ds.root_fd, rel, off, len, &a, 0, why, sizeof why), 0);
    memcpy(a.data, b.data, GF__TAR_BLOCK);
    ck_assert_int_eq(gf__dataset_member_check(&ds, 0, a.data, a.len, why, sizeof why),
                     GF_ECORRUPT);
    ck_assert_msg(strstr(why, p) && strstr(why, "'sub/b.png', not 'a.jpg'"), "%s", why);
    gf__buf_free(&a);
    if (_i == URING_CASE) {
        gf__uring *u = NULL;
        ck_assert_int_eq(gf__uring_create(&u, 4, 1 << 20, why, sizeof why), 0);
        gf__buf ub = {0};
        gf__dataset_extent(&ds, 0, &rel, &off, &len);
        ck_assert_int_eq(gf__uring_submit_range(u, ds.root_fd, rel, off, len, &ub, 5), 0);
        gf__read_done d;
        ck_assert_msg(reap_one(u, &d), "no completion after 10 s");
        ck_assert_int_eq(d.err, 0);
        ck_assert_uint_eq(ub.len, GF__TAR_BLOCK + sizeof img_a);
        ck_assert(memcmp(ub.data + GF__TAR_BLOCK, img_a, sizeof img_a) == 0);
        gf__uring_destroy(u);
        gf__buf_free(&ub);
    }
    gf__buf_free(&b);
    gf__dataset_close(&ds);
    free(p);
}
END_TEST

START_TEST(range_reads_check_the_range_against_the_file)
{
    char *p = path_in("f.bin");
    tu_write_text(p, "0123456789");
    gf__buf b = {0};
    char why[256];
    ck_assert_int_eq(gf__read_range(AT_FDCWD, p, 2, 5, &b, 0, why, sizeof why), 0);
    ck_assert_uint_eq(b.len, 5);
    ck_assert(memcmp(b.data, "23456", 5) == 0);
    ck_assert_int_eq(gf__read_range(AT_FDCWD, p, 8, 5, &b, 0, why, sizeof why), GF_ETRUNC);
    ck_assert_msg(strstr(why, "shard ended inside member"), "%s", why);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(gf__read_range(AT_FDCWD, p, 11, 1, &b, 0, why, sizeof why), GF_ETRUNC);
    ck_assert_int_eq(gf__read_range(AT_FDCWD, p, 0, 0, &b, 0, why, sizeof why), GF_EEMPTY);
    ck_assert_int_eq(gf__read_range(AT_FDCWD, p, 0, 6, &b, 5, why, sizeof why), GF_ETOOBIG);
    ck_assert_int_eq(gf__read_range(AT_FDCWD, p, 0, GF__WHOLE_FILE, &b, 0, why, sizeof why),
                     0);
    ck_assert_uint_eq(b.len, 10);
    if (_i == URING_CASE) {
        gf__uring *u = NULL;
        ck_assert_int_eq(gf__uring_create(&u, 4, 1 << 20, why, sizeof why), 0);
        gf__buf ub = {0};
        ck_assert_int_eq(gf__uring_submit_range(u, AT_FDCWD, p, 9, 4, &ub, 1), 0);
        gf__read_done d;
        ck_assert_msg(reap_one(u, &d), "no completion after 10 s");
        ck_assert_int_eq(d.err, GF_ETRUNC);
        ck_assert_msg(strstr(d.why, "shard ended inside member"), "%s", d.why);
        gf__uring_destroy(u);
        gf__buf_free(&ub);
    }
    gf__buf_free(&b);
    free(p);
}
END_TEST

/* A long name's first 100 bytes, as a header block holds them. */
static void block_name(char out[101], const char *name)
{
    size_t n = strlen(name) < 100 ? strlen(name) : 100;
    memcpy(out, name, n);
    out[n] = '\0';
}

START_TEST(long_names_come_from_pax_gnu_and_the_ustar_prefix)
{
    char longdir[300];
    memset(longdir, 'd', 150);
    longdir[150] = '\0';
    char pax_img[400], pax_cls[400], gnu_img[400], gnu_cls[400];
    snprintf(pax_img, sizeof pax_img, "%s/pax-key.jpg", longdir);
    snprintf(pax_cls, sizeof pax_cls, "%s/pax-key.cls", longdir);
    snprintf(gnu_img, sizeof gnu_img, "%s/gnu-key.png", longdir);
    snprintf(gnu_cls, sizeof gnu_cls, "%s/gnu-key.cls", longdir);
    /* each block holds the first 100 bytes of its long name, as Python's
     * tarfile and GNU tar write them (a reader checks the block) */
    char b_pax_img[101], b_pax_cls[101], b_gnu_img[101], b_gnu_cls[101];
    block_name(b_pax_img, pax_img);
    block_name(b_pax_cls, pax_cls);
    block_name(b_gnu_img, gnu_img);
    block_name(b_gnu_cls, gnu_cls);
    tw w = {0};
    tw_pax(&w, pax_img, -1);
    size_t o1 = tu_tar_file(&w, b_pax_img, "P", 1);
    tw_pax(&w, pax_cls, -1);
    tw_text(&w, b_pax_cls, "2");
    tw_gnu_long(&w, 'L', gnu_img);
    size_t o2 = tu_tar_file(&w, b_gnu_img, "G", 1);
    tw_gnu_long(&w, 'L', gnu_cls);
    tw_gnu_long(&w, 'K', "a long link target that is ignored");
    tw_text(&w, b_gnu_cls, "5");
    /* ustar prefix + name */
    tu_tar_header(&w, "pre-key.jpg", '0', 1, "some/prefix/dir");
    tu_tar_raw(&w, "U", 1);
    tu_tar_pad(&w);
    tu_tar_header(&w, "pre-key.cls", '0', 1, "some/prefix/dir");
    tu_tar_raw(&w, "7", 1);
    tu_tar_pad(&w);
    /* a global pax header is skipped */
    tu_tar_header(&w, "pax_global_header", 'g', 20, NULL);
    tu_tar_raw(&w, "20 comment=hello12\n", 20);
    tu_tar_pad(&w);
    tu_tar_end(&w);
    char *p = tw_save(&w, "long.tar");

    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 3);
    char want[512];
    snprintf(want, sizeof want, "long.tar:%s", pax_img);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), want);
    snprintf(want, sizeof want, "long.tar:%s", gnu_img);
    ck_assert_str_eq(gf__dataset_path(&ds, 1), want);
    ck_assert_str_eq(gf__dataset_path(&ds, 2), "long.tar:some/prefix/dir/pre-key.jpg");
    ck_assert_int_eq(ds.labels[0], 2);
    ck_assert_int_eq(ds.labels[1], 5);
    ck_assert_int_eq(ds.labels[2], 7);
    ck_assert_uint_eq(ds.data_off[0], o1);
    ck_assert_uint_eq(ds.data_off[1], o2);
    ck_assert_uint_eq(ds.warnings, 0);
    for (uint64_t i = 0; i < ds.n; i++) {
        void *data = NULL;
        size_t len = 0;
        ck_assert_msg(gf__dataset_read_sample(&ds, i, 0, &data, &len, why, sizeof why) == 0,
                      "%s", why);
        free(data);
    }
    gf__dataset_close(&ds);
    free(p);

    /* A long name whose block names something else: a reader could never
     * check it, so it is no sample, and said; so is a GNU long name
     * written "./" first, the block too, as GNU tar writes "tar cf x ./":
     * that one is a sample. */
    char dot_img[400], dot_cls[400], b_dot[101];
    snprintf(dot_img, sizeof dot_img, "./%s/dot-key.jpg", longdir);
    snprintf(dot_cls, sizeof dot_cls, "./%s/dot-key.cls", longdir);
    tw_pax(&w, pax_img, -1);
    tu_tar_file(&w, "other-name.jpg", "P", 1);
    tw_text(&w, b_pax_cls, "2");
    tw_gnu_long(&w, 'L', dot_img);
    block_name(b_dot, dot_img);
    tu_tar_file(&w, b_dot, "D", 1);
    tw_gnu_long(&w, 'L', dot_cls);
    block_name(b_dot, dot_cls);
    tw_text(&w, b_dot, "3");
    tu_tar_end(&w);
    p = tw_save(&w, "other.tar");
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    snprintf(want, sizeof want, "other.tar:%s", dot_img + 2);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), want);
    ck_assert_int_eq(ds.labels[0], 3);
    ck_assert_msg(strstr(ds.warning, "offset 1024: member 'ddd") &&
                      strstr(ds.warning, "' skipped: its header block does not spell the name or "
                                         "size its pax or GNU header gives"),
                  "%s", ds.warning);
    void *data = NULL;
    size_t len = 0;
    ck_assert_msg(gf__dataset_read_sample(&ds, 0, 0, &data, &len, why, sizeof why) == 0, "%s",
                  why);
    free(data);
    gf__dataset_close(&ds);
    free(p);
}
END_TEST

START_TEST(pax_size_base256_size_and_archive_ends_are_honoured)
{
    tw w = {0};
    /* pax size= (here as the header's) */
    tw_pax(&w, NULL, 3);
    tu_tar_header(&w, "a.jpg", '0', 3, NULL);
    size_t oa = w.len;
    tu_tar_raw(&w, "abc", 3);
    tu_tar_pad(&w);
    tw_text(&w, "a.cls", "1");
    /* GNU base-256 size */
    size_t h = tu_tar_header(&w, "b.jpg", '0', 0, NULL);
    memset(w.p + h + 124, 0, 12);
    w.p[h + 124] = 0x80;
    w.p[h + 135] = 5;
    tu_tar_checksum(w.p + h);
    tu_tar_raw(&w, "bbbbb", 5);
    tu_tar_pad(&w);
    tw_text(&w, "b.cls", "0");
    /* a lone zero block, then more members */
    tu_tar_raw(&w, NULL, 512);
    tw_text(&w, "c.jpg", "c");
    tw_text(&w, "c.cls", "0");
    /* no end blocks: end of file on a block boundary ends it */
    char *p = tw_save(&w, "ends.tar");

    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 3);
    ck_assert_uint_eq(ds.data_off[0], oa);
    ck_assert_uint_eq(ds.data_len[0], 3);
    ck_assert_uint_eq(ds.data_len[1], 5);
    ck_assert_uint_eq(ds.warnings, 1);
    ck_assert_msg(strstr(ds.warning, "lone zero block"), "%s", ds.warning);
    gf__dataset_close(&ds);
    free(p);

    /* pax size= over a header's other size: the walk takes pax's (the
     * next member is where it says), but the member, whose block a
     * reader checks, is no sample */
    tw_pax(&w, NULL, 3);
    tu_tar_header(&w, "a.jpg", '0', 0, NULL);
    tu_tar_raw(&w, "abc", 3);
    tu_tar_pad(&w);
    tw_text(&w, "a.cls", "1");
    size_t oc = tw_text(&w, "c.jpg", "c");
    tw_text(&w, "c.cls", "0");
    tu_tar_end(&w);
    p = tw_save(&w, "paxsize.tar");
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_uint_eq(ds.data_off[0], oc);
    ck_assert_msg(strstr(ds.warning, "member 'a.jpg' skipped: its header block does not spell"),
                  "%s", ds.warning);
    gf__dataset_close(&ds);

    /* Signed checksum variant (a byte >= 0x80 in the name) is accepted. */
    tu_tar_header(&w, "d\xe9.jpg", '0', 1, NULL);
    {
        uint8_t *hd = w.p;
        memset(hd + 148, ' ', 8);
        int sum = 0;
        for (int i = 0; i < 512; i++)
            sum += (int8_t)hd[i];
        snprintf((char *)hd + 148, 8, "%06o", sum);
        hd[155] = ' ';
    }
    tu_tar_raw(&w, "d", 1);
    tu_tar_pad(&w);
    tw_text(&w, "d\xe9.cls", "4");
    tu_tar_end(&w);
    free(p);
    p = tw_save(&w, "signed.tar");
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_int_eq(ds.labels[0], 4);
    gf__dataset_close(&ds);
    free(p);
}
END_TEST

/* Opens src expecting GF_EDATASET with every string of `want` in why. */
static void expect_error(const char *src, const char *want1, const char *want2)
{
    gf__dataset ds;
    char why[512] = "";
    int rc = open_ds(&ds, src, why, sizeof why);
    ck_assert_msg(rc == GF_EDATASET, "%s: rc %d, why '%s'", src, rc, why);
    ck_assert_msg(strstr(why, want1), "'%s' lacks '%s'", why, want1);
    if (want2)
        ck_assert_msg(strstr(why, want2), "'%s' lacks '%s'", why, want2);
    ck_assert_int_eq(ds.root_fd, -1);
    ck_assert_ptr_null(ds.shard_paths);
}

static tw two_samples(void)
{
    tw w = {0};
    tw_text(&w, "a.jpg", "a");
    tw_text(&w, "a.cls", "0");
    tw_text(&w, "b.jpg", "b");
    tw_text(&w, "b.cls", "1");
    return w;
}

START_TEST(a_bad_checksum_names_the_shard_and_offset)
{
    tw w = two_samples();
    w.p[2048 + 10] ^= 1; /* header of b.jpg, after a.jpg and a.cls */
    tu_tar_end(&w);
    char *p = tw_save(&w, "badsum.tar");
    expect_error(p, "badsum.tar: offset 2048: header checksum mismatch", NULL);
    free(p);
}
END_TEST

START_TEST(a_non_octal_size_is_an_error)
{
    tw w = two_samples();
    memcpy(w.p + 1024 + 124, "0000000009x", 11);
    tu_tar_checksum(w.p + 1024);
    tu_tar_end(&w);
    char *p = tw_save(&w, "octal.tar");
    expect_error(p, "octal.tar: offset 1024", "not an octal");
    free(p);

    w = two_samples();
    memcpy(w.p + 148, "12x456\0 ", 8); /* checksum field itself */
    tu_tar_end(&w);
    p = tw_save(&w, "octal2.tar");
    expect_error(p, "octal2.tar: offset 0", "checksum field is not octal");
    free(p);
}
END_TEST

START_TEST(a_size_past_the_end_of_the_file_is_an_error)
{
    tw w = two_samples();
    snprintf((char *)w.p + 2048 + 124, 12, "%011llo", 1ull << 30);
    tu_tar_checksum(w.p + 2048);
    tu_tar_end(&w);
    char *p = tw_save(&w, "past.tar");
    expect_error(p, "past.tar: offset 2048", "runs past the end of the file");
    free(p);
}
END_TEST

START_TEST(a_truncated_archive_is_an_error)
{
    tw w = two_samples();
    w.len = 2048 + 512 + 300; /* inside b.jpg's data block */
    char *p = tw_save(&w, "cut1.tar");
    expect_error(p, "cut1.tar: offset 2048", "truncated archive");
    free(p);

    w = two_samples();
    w.len = 2048 + 100; /* inside b.jpg's header */
    p = tw_save(&w, "cut2.tar");
    expect_error(p, "cut2.tar: offset 2048", "truncated header");
    free(p);

    /* an oversized pax header and GNU long name are refused before allocation */
    w = (tw){0};
    tu_tar_header(&w, "PaxHeaders/big", 'x', (2u << 20), NULL);
    tu_tar_raw(&w, NULL, 2u << 20);
    tu_tar_end(&w);
    p = tw_save(&w, "bigpax.tar");
    expect_error(p, "bigpax.tar: offset 0", "over the 1048576-byte limit");
    free(p);
    w = (tw){0};
    tu_tar_header(&w, "././@LongLink", 'L', 100000, NULL);
    tu_tar_raw(&w, NULL, 100352);
    tu_tar_end(&w);
    p = tw_save(&w, "biglong.tar");
    expect_error(p, "biglong.tar: offset 0", "over the 65536-byte limit");
    free(p);
    /* a malformed pax record */
    w = (tw){0};
    tu_tar_header(&w, "PaxHeaders/bad", 'x', 12, NULL);
    tu_tar_raw(&w, "99 path=x.j\n", 12);
    tu_tar_pad(&w);
    tw_text(&w, "x.jpg", "x");
    tu_tar_end(&w);
    p = tw_save(&w, "badpax.tar");
    expect_error(p, "badpax.tar: offset 0", "malformed pax");
    free(p);
    /* a pax path with a NUL inside: that member is skipped and named */
    w = (tw){0};
    tu_tar_header(&w, "PaxHeaders/nul", 'x', 16, NULL);
    tu_tar_raw(&w, "16 path=a.j\0g/b\n", 16);
    tu_tar_pad(&w);
    tw_text(&w, "x.jpg", "x");
    tu_tar_end(&w);
    p = tw_save(&w, "nulpax.tar");
    expect_error(p, "nulpax.tar: offset 1024: member 'a.j' skipped", "NUL byte in name");
    free(p);
    /* not a tar at all */
    p = path_in("text.tar");
    tu_write_text(p, "hello, this is not a tar file\n");
    expect_error(p, "text.tar: offset 0", "truncated header");
    free(p);
}
END_TEST

START_TEST(links_devices_fifos_and_directories_are_skipped_and_counted)
{
    tw w = {0};
    const char types[] = "123456";
    for (int i = 0; types[i]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%c.jpg", types[i]);
        tu_tar_header(&w, name, types[i], 0, NULL);
        snprintf(name, sizeof name, "t%c.cls", types[i]);
        tw_text(&w, name, "0");
    }
    /* a symlink whose size field lies: no data blocks follow it anyway */
    tu_tar_header(&w, "lie.jpg", '2', 5000, NULL);
    tw_text(&w, "good.jpg", "g");
    tw_text(&w, "good.cls", "0");
    tu_tar_end(&w);
    char *p = tw_save(&w, "types.tar");
    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), "types.tar:good.jpg");
    ck_assert_uint_eq(ds.skipped_members, 7);
    ck_assert_uint_eq(ds.skipped_keys, 6); /* t1..t6: a .cls without an image */
    ck_assert_uint_eq(ds.warnings, 13);
    ck_assert_msg(strstr(ds.warning, "types.tar: offset 0: member 't1.jpg' skipped: a hard link"),
                  "%s", ds.warning);
    gf__dataset_close(&ds);
    free(p);
}
END_TEST

START_TEST(unsafe_names_are_skipped_and_never_opened)
{
    /* A real file where "../evil.jpg" would land relative to the shard. */
    char *evil = path_in("evil.jpg");
    tu_write_text(evil, "not to be read");
    tw w = {0};
    tw_text(&w, "../evil.jpg", "E");
    tw_text(&w, "../evil.cls", "0");
    tw_text(&w, "/abs.jpg", "A");
    tw_text(&w, "/abs.cls", "0");
    tw_pax(&w, "a/../../evil.jpg", -1);
    tw_text(&w, "x.jpg", "X");
    tw_gnu_long(&w, 'L', "..");
    tw_text(&w, "y.jpg", "Y");
    tw_text(&w, "ok.jpg", "O");
    tw_text(&w, "ok.cls", "1");
    tu_tar_end(&w);
    char *p = tw_save(&w, "sub/evil.tar");
    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), "evil.tar:ok.jpg");
    ck_assert_uint_eq(ds.skipped_members, 6);
    ck_assert_msg(strstr(ds.warning, "'../evil.jpg' skipped: '..' in name"), "%s", ds.warning);
    /* The only file a read can reach is the shard itself. */
    const char *rel;
    uint64_t off, len;
    gf__dataset_extent(&ds, 0, &rel, &off, &len);
    ck_assert_str_eq(rel, p);
    gf__dataset_close(&ds);
    free(p);
    free(evil);
}
END_TEST

START_TEST(keys_without_an_image_or_a_label_are_skipped)
{
    tw w = {0};
    tw_text(&w, "noimg.cls", "1");
    tw_text(&w, "nocls.jpg", "j");
    tw_text(&w, "nocls.txt", "caption");
    tw_text(&w, "badcls.jpg", "j");
    tw_text(&w, "badcls.cls", "12a");
    tw_text(&w, "bigcls.jpg", "j");
    char zeros[69];
    memset(zeros, '0', sizeof zeros);
    tu_tar_file(&w, "bigcls.cls", zeros, sizeof zeros);
    tw_text(&w, "good.jpg", "g");
    tw_text(&w, "good.cls", "2");
    tw_text(&w, "good.png", "second image");
    tw_text(&w, "good.cls", "3");
    tu_tar_end(&w);
    char *p = tw_save(&w, "keys.tar");
    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_int_eq(ds.labels[0], 2);
    ck_assert_int_eq(ds.n_classes, 3);
    ck_assert_uint_eq(ds.skipped_keys, 4);
    ck_assert_uint_eq(ds.skipped_members, 2);
    ck_assert_msg(strstr(ds.warning, "key 'noimg' skipped: no image member"), "%s", ds.warning);
    gf__dataset_close(&ds);

    /* Nothing usable at all is an error that says why. */
    w = (tw){0};
    tw_text(&w, "only.cls", "1");
    tu_tar_end(&w);
    free(p);
    p = tw_save(&w, "none.tar");
    expect_error(p, "no samples in 1 shard", "key 'only' skipped: no image member");
    free(p);
}
END_TEST

static char *one_sample_shard(const char *name, int label)
{
    tw w = {0};
    char t[16];
    snprintf(t, sizeof t, "%d", label);
    tw_text(&w, "k.jpg", "k");
    tw_text(&w, "k.cls", t);
    tu_tar_end(&w);
    return tw_save(&w, name);
}

START_TEST(brace_ranges_and_comma_lists_expand_in_order)
{
    for (int k = 0; k < 3; k++) {
        char n[32];
        snprintf(n, sizeof n, "s-%03d.tar", k);
        free(one_sample_shard(n, k));
    }
    for (int k = 8; k <= 10; k++) {
        char n[32];
        snprintf(n, sizeof n, "u-%d.tar", k);
        free(one_sample_shard(n, k));
    }
    gf__dataset ds;
    char why[512], src[4096];
    snprintf(src, sizeof src, "%s/s-{000..002}.tar", dir);
    ck_assert_msg(open_ds(&ds, src, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 3);
    ck_assert_uint_eq(ds.n_shards, 3);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(ds.labels[k], k);
        ck_assert_uint_eq(ds.shard[k], (uint32_t)k);
        char want[32];
        snprintf(want, sizeof want, "s-%03d.tar:k.jpg", k);
        ck_assert_str_eq(gf__dataset_path(&ds, (uint64_t)k), want);
    }
    gf__dataset_close(&ds);

    snprintf(src, sizeof src, "%s/u-{8..10}.tar,%s/s-002.tar,%s/s-{0..0}0{0..1}.tar", dir, dir,
             dir);
    ck_assert_msg(open_ds(&ds, src, why, sizeof why) == 0, "%s", why);
    int want_labels[] = {8, 9, 10, 2, 0, 1};
    ck_assert_uint_eq(ds.n, 6);
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(ds.labels[k], want_labels[k]);
    ck_assert_int_eq(ds.n_classes, 11);
    gf__dataset_close(&ds);

    /* Relative shard paths are relative to the current directory. */
    char cwd[4096];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(dir), 0);
    int rc = open_ds(&ds, "s-{001..002}.tar", why, sizeof why);
    ck_assert_int_eq(chdir(cwd), 0); /* a later chdir does not matter */
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 2);
    gf__buf b = {0};
    const char *rel;
    uint64_t off, len;
    gf__dataset_extent(&ds, 1, &rel, &off, &len);
    ck_assert_str_eq(rel, "s-002.tar");
    ck_assert_int_eq(gf__read_range(ds.root_fd, rel, off, len, &b, 0, why, sizeof why), 0);
    ck_assert_uint_eq(b.len, GF__TAR_BLOCK + 1); /* header and member */
    gf__buf_free(&b);
    gf__dataset_close(&ds);

    snprintf(src, sizeof src, "%s/s-{002..000}.tar", dir);
    expect_error(src, "descending", NULL);
    snprintf(src, sizeof src, "%s/s-{a,b}.tar", dir);
    expect_error(src, "bad brace pattern", NULL);
    snprintf(src, sizeof src, "%s/s-{000..003}.tar", dir);
    expect_error(src, "s-003.tar: No such file", NULL);
    /* What a pattern may expand to is bounded before anything is opened:
     * a billion names, or a million long ones, fail with a message. */
    snprintf(src, sizeof src, "%s/s-{0..999}{0..999}{0..999}.tar", dir);
    expect_error(src, "more than 1048576 shards", NULL);
    snprintf(src, sizeof src, "%s/a-{0..999999}.tar,%s/b-{0..99999}.tar", dir, dir);
    expect_error(src, "more than 1048576 shards", NULL); /* counted over the elements */
    snprintf(src, sizeof src, "%s/s-%0100d-{0..999}{0..999}.tar", dir, 0);
    expect_error(src, "shard names take more than 64 MiB", NULL);

    /* A directory named like a shard is still an ImageFolder. */
    char *d = path_in("folder.tar");
    tu_write_png(strcat(strcpy(src, d), "/c/i.png"), 4, 4, 3, 1);
    ck_assert_msg(open_ds(&ds, d, why, sizeof why) == 0, "%s", why);
    ck_assert_ptr_null(ds.shard);
    ck_assert_uint_eq(ds.n, 1);
    gf__dataset_close(&ds);
    free(d);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The loader on shards vs the same images as an ImageFolder */

enum { W = 16, H = 12, CLASSES = 3, PER_CLASS = 7, N = CLASSES * PER_CLASS };

/* Writes root's samples, in its index order, into 3 shards; returns the
 * brace source (caller frees). */
static char *folder_to_shards(const char *root)
{
    gf__dataset ds;
    char why[512];
    ck_assert_msg(gf__dataset_open(&ds, root, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, N);
    for (int s = 0; s < 3; s++) {
        tw w = {0};
        for (uint64_t i = (uint64_t)s * N / 3; i < (uint64_t)(s + 1) * N / 3; i++) {
            const char *rel = gf__dataset_path(&ds, i);
            char full[4096], name[512], cls[16];
            snprintf(full, sizeof full, "%s/%s", root, rel);
            size_t n;
            uint8_t *data = tu_read_file(full, &n);
            ck_assert_ptr_nonnull(data);
            snprintf(name, sizeof name, "%s", rel);
            tu_tar_file(&w, name, data, n);
            *strrchr(name, '.') = '\0';
            strcat(name, ".cls");
            snprintf(cls, sizeof cls, "%d\n", ds.labels[i]);
            tw_text(&w, name, cls);
            free(data);
        }
        tu_tar_end(&w);
        char sn[32];
        snprintf(sn, sizeof sn, "train-%06d.tar", s);
        free(tw_save(&w, sn));
    }
    gf__dataset_close(&ds);
    char *src = malloc(4096);
    snprintf(src, 4096, "%s/train-{000000..000002}.tar", dir);
    return src;
}

typedef struct batches {
    uint8_t *bytes;
    size_t len, cap;
    uint64_t epoch[64], position[64];
    int n;
} batches;

static void take(batches *r, const gf_batch *b)
{
    size_t px = (size_t)b->count * b->height * b->width * b->channels;
    size_t need = px + (size_t)b->count * (sizeof(int32_t) + sizeof(int64_t));
    if (r->len + need > r->cap) {
        r->cap = (r->len + need) * 2;
        r->bytes = realloc(r->bytes, r->cap);
    }
    memcpy(r->bytes + r->len, b->pixels, px);
    r->len += px;
    memcpy(r->bytes + r->len, b->labels, (size_t)b->count * sizeof(int32_t));
    r->len += (size_t)b->count * sizeof(int32_t);
    memcpy(r->bytes + r->len, b->indices, (size_t)b->count * sizeof(int64_t));
    r->len += (size_t)b->count * sizeof(int64_t);
    ck_assert_int_lt(r->n, 64);
    r->epoch[r->n] = b->epoch;
    r->position[r->n] = b->position;
    r->n++;
}

static void settings(gf_settings *s, const char *data, gf_io io)
{
    tu_cpu_settings(s);
    s->data = data;
    s->width = 10;
    s->height = 9; /* train: random-resized-crop + flip */
    s->batch_size = 4;
    s->seed = 11;
    s->epochs = 2;
    s->shuffle = 1;
    s->threads = 2;
    s->io = io;
}

/* Runs to the end (or `stop` batches); returns the loader's reader. */
static gf_io run(const gf_settings *s, batches *r, int stop, uint64_t seek_epoch,
                 uint64_t seek_pos, int do_seek)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, s);
    ck_assert_msg(rc == 0, "gf_open: %s: %s", gf_err_name(rc), gf_last_error(l));
    if (do_seek)
        ck_assert_int_eq(gf_seek(l, seek_epoch, seek_pos), 0);
    gf_batch *b;
    int k = 0;
    while ((stop < 0 || k < stop) && (rc = gf_next(l, &b)) == 0) {
        take(r, b);
        gf_release(l, b);
        k++;
    }
    if (stop < 0)
        ck_assert_msg(rc == GF_EOF, "gf_next: %s: %s", gf_err_name(rc), gf_last_error(l));
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.errors, 0);
    gf_close(&l);
    return st.reader;
}

START_TEST(shards_give_the_batches_of_the_same_images_as_a_folder)
{
    char *root = tu_image_folder(CLASSES, PER_CLASS, W, H, "png");
    char *src = folder_to_shards(root);
    gf_settings s;
    batches want = {0};
    settings(&s, root, GF_IO_POSIX);
    run(&s, &want, -1, 0, 0, 0);
    ck_assert_int_eq(want.n, 2 * ((N + 3) / 4));
    for (int io = GF_IO_URING; io <= GF_IO_POSIX; io++) {
        if ((io == GF_IO_URING) != (_i == URING_CASE))
            continue;
        batches got = {0};
        settings(&s, src, (gf_io)io);
        ck_assert_int_eq(run(&s, &got, -1, 0, 0, 0), io);
        ck_assert_int_eq(got.n, want.n);
        ck_assert_uint_eq(got.len, want.len);
        ck_assert_msg(memcmp(got.bytes, want.bytes, want.len) == 0, "io=%d: batches differ", io);
        free(got.bytes);

        /* Resume after batch 3 (mid-epoch) and after batch 6 (into epoch 1)
         * in a new loader: the rest is byte for byte the uninterrupted run. */
        int cuts[] = {3, 6};
        for (int c = 0; c < 2; c++) {
            batches head = {0}, tail = {0};
            run(&s, &head, cuts[c], 0, 0, 0);
            ck_assert_int_eq(head.n, cuts[c]);
            run(&s, &tail, -1, head.epoch[cuts[c] - 1], head.position[cuts[c] - 1], 1);
            ck_assert_int_eq(head.n + tail.n, want.n);
            ck_assert_uint_eq(head.len + tail.len, want.len);
            ck_assert(memcmp(head.bytes, want.bytes, head.len) == 0);
            ck_assert_msg(memcmp(tail.bytes, want.bytes + head.len, tail.len) == 0,
                          "io=%d: resume after %d differs", io, cuts[c]);
            free(head.bytes);
            free(tail.bytes);
        }
    }
    free(want.bytes);
    free(src);
    tu_rmrf(root);
    free(root);
}
END_TEST

/* A pixel byte of a member flipped after `gpufeed index` wrote its
 * sidecar (PPM: no checksum of its own, it would decode): the headers
 * still match, so the sidecar is taken, but that sample's read (loader,
 * gf_read_sample) is an error naming the shard, the member and both CRCs;
 * the others are delivered. */
START_TEST(a_member_changed_after_indexing_is_an_error_naming_it)
{
    tw w = {0};
    size_t at[3], n[3];
    for (int k = 0; k < 3; k++) {
        char name[16];
        uint8_t ppm[64 + W * H * 3];
        int hn = snprintf((char *)ppm, 64, "P6\n%d %d\n255\n", W, H);
        memset(ppm + hn, 60 + 50 * k, W * H * 3);
        n[k] = (size_t)hn + W * H * 3;
        snprintf(name, sizeof name, "k%d.ppm", k);
        at[k] = tu_tar_file(&w, name, ppm, n[k]);
        snprintf(name, sizeof name, "k%d.cls", k);
        tw_text(&w, name, "0");
    }
    tu_tar_end(&w);
    char *p = tw_save(&w, "flip.tar");
    char why[512], *text = NULL;
    size_t len = 0;
    ck_assert_msg(gf_shard_index(p, &text, &len, NULL, why, sizeof why) == 0, "%s", why);
    char *idx = path_in("flip.idx");
    tu_write_file(idx, text, len);
    free(text);
    int fd = open(p, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t c;
    off_t mid = (off_t)(at[1] + n[1] / 2);
    ck_assert_int_eq(pread(fd, &c, 1, mid), 1);
    c ^= 0x01;
    ck_assert_int_eq(pwrite(fd, &c, 1, mid), 1);
    close(fd);
    gf__dataset ds;
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.warnings, 0); /* the sidecar was taken */
    gf__dataset_close(&ds);
    for (int io = GF_IO_URING; io <= GF_IO_POSIX; io++) {
        if ((io == GF_IO_URING) != (_i == URING_CASE))
            continue;
        gf_settings s;
        settings(&s, p, (gf_io)io);
        s.shuffle = 0;
        s.epochs = 1;
        s.on_error = GF_ON_ERROR_SKIP;
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), 0);
        gf_batch *b;
        int got = 0, rc;
        while ((rc = gf_next(l, &b)) == 0) {
            for (int i = 0; i < b->count; i++)
                ck_assert_int_ne(b->indices[i], 1);
            got += b->count;
            gf_release(l, b);
        }
        ck_assert_int_eq(rc, GF_EOF);
        ck_assert_int_eq(got, 2);
        gf_stats st;
        gf_get_stats(l, &st);
        ck_assert_uint_eq(st.errors, 1);
        ck_assert_str_eq(st.recent[0].path, "flip.tar:k1.ppm");
        ck_assert_int_eq(st.recent[0].code, GF_ECORRUPT);
        ck_assert_msg(strstr(st.recent[0].reason, "flip.tar: member 'k1.ppm': its index sidecar "
                                                  "records member_crc32c ") &&
                          strstr(st.recent[0].reason, "the sidecar is another shard's"),
                      "%s", st.recent[0].reason);
        void *data = NULL;
        size_t dlen = 0;
        ck_assert_int_eq(gf_read_sample(l, 1, &data, &dlen, why, sizeof why), GF_ECORRUPT);
        ck_assert_msg(strstr(why, "flip.tar:k1.ppm") && strstr(why, "member_crc32c"), "%s", why);
        ck_assert_msg(gf_read_sample(l, 2, &data, &dlen, why, sizeof why) == 0, "%s", why);
        ck_assert_uint_eq(dlen, n[2]);
        gf_free(data);
        gf_close(&l);
    }
    free(idx);
    free(p);
}
END_TEST

START_TEST(a_bad_member_is_reported_with_shard_and_member_name)
{
    char *root = tu_image_folder(1, 1, W, H, "png");
    char full[4096];
    snprintf(full, sizeof full, "%s/class_0/img_000.png", root);
    size_t n;
    uint8_t *png = tu_read_file(full, &n);
    tw w = {0};
    tu_tar_file(&w, "good.png", png, n);
    tw_text(&w, "good.cls", "0");
    tw_text(&w, "bad.png", "this is not a png");
    tw_text(&w, "bad.cls", "0");
    tu_tar_end(&w);
    char *p = tw_save(&w, "mixed.tar");
    for (int io = GF_IO_URING; io <= GF_IO_POSIX; io++) {
        if ((io == GF_IO_URING) != (_i == URING_CASE))
            continue;
        gf_settings s;
        settings(&s, p, (gf_io)io);
        s.shuffle = 0;
        s.epochs = 1;
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), 0);
        gf_batch *b;
        int got = 0, rc;
        while ((rc = gf_next(l, &b)) == 0) {
            got += b->count;
            gf_release(l, b);
        }
        ck_assert_int_eq(rc, GF_EOF);
        ck_assert_int_eq(got, 1);
        gf_stats st;
        gf_get_stats(l, &st);
        ck_assert_uint_eq(st.errors, 1);
        ck_assert_str_eq(st.recent[0].path, "mixed.tar:bad.png");
        gf_close(&l);
    }
    free(png);
    free(p);
    tu_rmrf(root);
    free(root);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Index sidecars (SHARD.idx, DALI wds2idx's v1.2 text) */

/* x.tar of three samples (k0..k2: .jpg, .cls, .key), its members' data
 * offsets in off[sample][member], its size in *size. */
static char *sidecar_shard(size_t off[3][3], size_t *size)
{
    tw w = {0};
    for (int k = 0; k < 3; k++) {
        char name[32], data[600], cls[8];
        memset(data, 'a' + k, sizeof data);
        snprintf(name, sizeof name, "k%d.jpg", k);
        off[k][0] = tu_tar_file(&w, name, data, 100 + 200 * (size_t)k);
        snprintf(name, sizeof name, "k%d.cls", k);
        snprintf(cls, sizeof cls, "%d", 7 - k);
        off[k][1] = tw_text(&w, name, cls);
        snprintf(name, sizeof name, "k%d.key", k);
        off[k][2] = tw_text(&w, name, "src/k.jpg");
    }
    tu_tar_end(&w);
    *size = w.len;
    return tw_save(&w, "x.tar");
}

/* The sidecar prepare writes for it; `how` spoils it one way (0: none). */
static void write_sidecar(size_t off[3][3], size_t size, int how)
{
    char text[2048];
    int n = snprintf(text, sizeof text, "v1.2 %d", how == 4 ? 2 : 3);
    if (how != 5)
        n += snprintf(text + n, sizeof text - (size_t)n, " shard_bytes=%zu",
                      how == 1 ? size + 512 : size);
    n += snprintf(text + n, sizeof text - (size_t)n, "\n");
    for (int k = 0; k < 3; k++) {
        size_t img = off[k][0] + (how == 2 && k == 1 ? 1 : 0);
        size_t cls = off[k][1];
        n += snprintf(text + n, sizeof text - (size_t)n, "jpg %zu %d k%d.jpg", img,
                      100 + 200 * k, k);
        if (!(how == 3 && k == 0))
            n += snprintf(text + n, sizeof text - (size_t)n, " cls %zu 1 k%d.cls", cls, k);
        n += snprintf(text + n, sizeof text - (size_t)n, " key %zu 9 k%d.key\n", off[k][2], k);
    }
    char *p = path_in("x.idx");
    tu_write_file(p, text, (size_t)n);
    if (how == 5) { /* no recorded size: judged by mtime, older than the shard */
        struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
        ck_assert_int_eq(utimensat(AT_FDCWD, p, old, 0), 0);
    }
    free(p);
}

/* A matching sidecar (gf_shard_index's) is taken: the index is the
 * scan's, with the sidecar's member CRCs. The headers are read either
 * way, so a header spoiled after the sidecar was written is seen: the
 * shard is damaged, sidecar or not. */
START_TEST(a_matching_sidecar_gives_the_scans_index_and_spoiled_headers_are_seen)
{
    size_t off[3][3], size;
    char *p = sidecar_shard(off, &size);
    gf__dataset scan, side;
    char why[512], *text = NULL;
    size_t len = 0;
    ck_assert_msg(open_ds(&scan, p, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(gf_shard_index(p, &text, &len, NULL, why, sizeof why) == 0, "%s", why);
    char *idx = path_in("x.idx");
    tu_write_file(idx, text, len);
    gf_free(text);
    ck_assert_msg(open_ds(&side, p, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(side.warnings == 0, "%s", side.warning);
    ck_assert_uint_eq(side.n, scan.n);
    ck_assert_uint_eq(side.n, 3);
    ck_assert_int_eq(side.n_classes, scan.n_classes);
    for (uint64_t i = 0; i < side.n; i++) {
        ck_assert_str_eq(gf__dataset_path(&side, i), gf__dataset_path(&scan, i));
        ck_assert_int_eq(side.labels[i], scan.labels[i]);
        ck_assert_uint_eq(side.data_off[i], scan.data_off[i]);
        ck_assert_uint_eq(side.data_len[i], scan.data_len[i]);
        ck_assert_int_eq(scan.data_crc[i], -1);
        ck_assert_int_ge(side.data_crc[i], 0); /* taken */
    }
    ck_assert_int_eq(side.labels[2], 5);
    gf__dataset_close(&scan);
    gf__dataset_close(&side);
    /* the second sample's header checksum, no longer octal */
    int fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "X", 1, (off_t)off[1][0] - 512 + 148), 1);
    close(fd);
    ck_assert_int_eq(open_ds(&side, p, why, sizeof why), GF_EDATASET);
    ck_assert_msg(strstr(why, "checksum"), "%s", why);
    free(idx);
    free(p);
}
END_TEST

/* A sidecar that does not match (another shard size, a shifted member, a
 * key without .cls, a wrong count, older than the shard and without a
 * size, a .cls that is no label) is ignored with a warning naming it and
 * the reason, and the headers give the index (which in the last case
 * skips that key, with a warning of its own: the scan's, first). */
START_TEST(a_sidecar_that_does_not_match_is_ignored_with_a_warning)
{
    static const char *const reason[] = {
        NULL, "another size", "out of order or not 512-aligned",
        "its sample's member is not the one the headers give", /* k0 skipped: no .cls */
        "more lines than its sample count", "older than its shard", "not a non-negative decimal"};
    size_t off[3][3], size;
    char *p = sidecar_shard(off, &size);
    gf__dataset scan, side;
    char why[512];
    if (_i == 6) { /* k2's label */
        int fd = open(p, O_WRONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "x", 1, (off_t)off[2][1]), 1);
        close(fd);
    }
    ck_assert_msg(open_ds(&scan, p, why, sizeof why) == 0, "%s", why);
    write_sidecar(off, size, _i);
    ck_assert_msg(open_ds(&side, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(side.warnings, scan.warnings + 1);
    int named = _i == 6 ? strcmp(side.warning, scan.warning) == 0
                        : strstr(side.warning, "index sidecar ignored") &&
                              strstr(side.warning, "x.idx");
    ck_assert_msg(named && strstr(side.warning, reason[_i]), "case %d: %s", _i, side.warning);
    ck_assert_uint_eq(side.n, scan.n);
    for (uint64_t i = 0; i < side.n; i++) {
        ck_assert_str_eq(gf__dataset_path(&side, i), gf__dataset_path(&scan, i));
        ck_assert_int_eq(side.labels[i], scan.labels[i]);
        ck_assert_uint_eq(side.data_off[i], scan.data_off[i]);
    }
    gf__dataset_close(&scan);
    gf__dataset_close(&side);
    free(p);
}
END_TEST

/* A sidecar's text alone, no file: the parser the remote reader shares.
 * Two samples in a shard of 5120 bytes, each member after room for its
 * header; each case spoils it one way and must be refused for its reason. */
#define SC_OK_LINES "jpg 512 100 a.jpg cls 1536 1 a.cls\njpg 2560 100 b.jpg cls 3584 1 b.cls\n"
static const struct {
    const char *text;
    uint64_t shard_bytes;
    const char *reason; /* NULL: taken */
} sidecar_texts[] = {
    {"v1.2 2 shard_bytes=5120 labels=3,4\n" SC_OK_LINES, 5120, NULL},
    {"v1.2 2\n" SC_OK_LINES, 5120, NULL}, /* as DALI's wds2idx writes it */
    {"v1.2 2 shard_bytes=5120\n" SC_OK_LINES, GF__SIDECAR_SIZE_UNKNOWN, NULL},
    {"v1.1 2 shard_bytes=5120\n" SC_OK_LINES, 5120, "line 1: not a v1.2 index"},
    {"1.2 2\n" SC_OK_LINES, 5120, "line 1: not a v1.2 index"},
    {"v1.2 2 shard_bytes=5120\n"
     "jpg 2560 100 a.jpg cls 3584 1 a.cls\njpg 512 100 b.jpg cls 1536 1 b.cls\n",
     5120, "line 3: member offsets out of order"},
    {"v1.2 2\njpg 512 100 a.jpg cls 1536 1 a.cls\njpg 2560 100 b.jpg cls 3584 2000 b.cls\n",
     5120, "line 3: a member runs past the end of the shard"},
    /* the recorded size bounds the members when the shard's is unknown */
    {"v1.2 2 shard_bytes=3584\n" SC_OK_LINES, GF__SIDECAR_SIZE_UNKNOWN,
     "line 3: a member runs past the end"},
    {"v1.2 2 shard_bytes=5120\n" SC_OK_LINES, 6144, "line 1: written for a shard of another size"},
    {"v1.2 2\njpg 513 100 a.jpg cls 1536 1 a.cls\njpg 2560 100 b.jpg cls 3584 1 b.cls\n", 5120,
     "line 2: member offsets out of order or not 512-aligned"},
    {"v1.2 2\njpg 512 100 a.jpg cls 1536 1 a.cls\njpg 2560 100 b.jpg cls 3584 1 b.cls cls 4608 1 "
     "b.cls\n",
     5120, "line 3: a key with two images or two .cls"},
    {"v1.2 99999999999999\n" SC_OK_LINES, 5120, "line 1: no plausible sample count"},
    {"v1.2 5\n" SC_OK_LINES, UINT64_MAX - 1, "line 1: no plausible sample count"}, /* > len/24 */
    {"v1.2 0\n" SC_OK_LINES, 5120, "no plausible sample count"},
    {"v1.2 1\n" SC_OK_LINES, 5120, "line 3: more lines than its sample count"},
    {"v1.2 2 labels=3\n" SC_OK_LINES, 5120, "line 1: labels= is not one label"},
    {"v1.2 2 labels=3,4,5\n" SC_OK_LINES, 5120, "line 1: labels= is not one label"},
    {"v1.2 2 labels=3,2147483647\n" SC_OK_LINES, 5120, "line 1: labels= is not one label"},
    {"v1.2 2 labels=3,-1\n" SC_OK_LINES, 5120, "line 1: labels= is not one label"},
    {"v1.2 2\njpg 512 100 a.jpg cls 1536 1 a.cls\npng 2560 100 a.png cls 3584 1 a.cls\n", 5120,
     "line 3: one key on two lines"},
    {"v1.2 2\njpg 512 100 a.jpg cls 1536 1 a.cls 7\njpg 2560 100 b.jpg cls 3584 1 b.cls\n",
     5120, "line 2: a component is not 'EXT OFFSET SIZE NAME'"},
    {"v1.2 2\njpg 512 100 ../a.jpg cls 1536 1 ../a.cls\njpg 2560 100 b.jpg cls 3584 1 b.cls\n",
     5120, "line 2: a member name a scan would not take"},
    {"v1.2 2\njpg 512 100 a.jpg cls 1536 65 a.cls\njpg 2560 100 b.jpg cls 3584 1 b.cls\n",
     5120, "a .cls over 64 bytes"},
    {"v1.2 3\n" SC_OK_LINES, 5120, "fewer lines than its sample count"},
    {"v1.2 2\njpg 512 100 a.jpg png 1536 100 a.png\njpg 2560 100 b.jpg cls 3584 1 b.cls\n", 5120,
     "line 2: a key with two images or two .cls"},
    {"v1.2 2\ncls 512 1 a.cls\njpg 2560 100 b.jpg cls 3584 1 b.cls\n", 5120,
     "line 2: a key of a .cls alone"},
};

/* Lines without an image (gpufeed index --fields latent.npy,cls): taken,
 * the scan rule under the loader's schema says which are samples; the
 * line's sample member (whose member_crc32c= value it is) is its first
 * member other than the .cls, wherever the .cls lies. A line without a
 * .cls is taken too (a label-less schema's). */
START_TEST(a_sidecar_line_without_an_image_is_taken)
{
    static const char t[] =
        "v1.2 3 labels=0,7,0 member_crc32c=00000001,00000002,00000003\n"
        "latent.npy 512 100 a.latent.npy cls 1536 1 a.cls\n"
        "cls 2560 1 b.cls latent.npy 3584 100 b.latent.npy txt 4608 5 b.txt\n"
        "txt 5632 5 c.txt latent.npy 6656 100 c.latent.npy\n";
    gf__sidecar sc;
    char why[256] = "";
    int rc = gf__sidecar_parse(t, strlen(t), 8192, "s.idx", &sc, why, sizeof why);
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_uint_eq(sc.n, 3);
    ck_assert_uint_eq(sc.e[0].img_off, 512);
    ck_assert_uint_eq(sc.e[1].img_off, 3584);
    ck_assert_uint_eq(sc.e[1].img_size, 100);
    ck_assert_uint_eq(sc.e[1].cls_off, 2560);
    ck_assert_int_eq(sc.e[1].label, 7);
    ck_assert_int_eq((int)sc.e[1].img_crc32c, 2);
    ck_assert_int_eq((int)sc.e[1].name_len, 12);
    ck_assert(memcmp(sc.e[1].name, "b.latent.npy", 12) == 0);
    ck_assert_uint_eq(sc.e[2].img_off, 5632); /* the first member: the .txt */
    gf__sidecar_free(&sc);
}
END_TEST

START_TEST(a_sidecar_text_is_checked_without_the_file_system)
{
    gf__sidecar sc;
    char why[256] = "";
    const char *t = sidecar_texts[_i].text;
    int rc = gf__sidecar_parse(t, strlen(t), sidecar_texts[_i].shard_bytes, "s.idx", &sc, why,
                               sizeof why);
    if (!sidecar_texts[_i].reason) {
        ck_assert_msg(rc == 0, "case %d: %s", _i, why);
        ck_assert_uint_eq(sc.n, 2);
        ck_assert_int_eq(sc.labelled, _i == 0);
        ck_assert_int_eq(sc.shard_bytes, _i == 1 ? -1 : 5120);
        ck_assert_int_eq(sc.e[0].label, _i == 0 ? 3 : -1);
        ck_assert_int_eq(sc.e[1].label, _i == 0 ? 4 : -1);
        ck_assert_uint_eq(sc.e[1].img_off, 2560);
        ck_assert_uint_eq(sc.e[1].img_size, 100);
        ck_assert_uint_eq(sc.e[1].cls_off, 3584);
        ck_assert_uint_eq(sc.e[1].cls_size, 1);
        ck_assert_int_eq((int)sc.e[1].name_len, 5);
        ck_assert(memcmp(sc.e[1].name, "b.jpg", 5) == 0);
    } else {
        ck_assert_msg(rc == 2, "case %d: rc %d", _i, rc);
        ck_assert_msg(strncmp(why, "s.idx: ", 7) == 0 && strstr(why, sidecar_texts[_i].reason),
                      "case %d: %s", _i, why);
        ck_assert_ptr_null(sc.e);
        ck_assert_uint_eq(sc.n, 0);
    }
    gf__sidecar_free(&sc);
}
END_TEST

/* shard_crc32c= (8 hex digits, either case) is kept; a malformed one is
 * ignored as any unknown token, so the sidecar is still taken (checked
 * member by member). The CRC is CRC32C: its check value, and the same
 * whether built whole, in pieces, or over the 3-stream path. */
START_TEST(a_sidecar_keeps_its_shard_crc32c)
{
    static const struct {
        const char *token;
        int64_t crc;
    } cases[] = {{"shard_crc32c=0a1B2c3D", 0x0a1b2c3d}, {"shard_crc32c=ffffffff", 0xffffffff},
                 {"shard_crc32c=0a1b2c3", -1},          {"shard_crc32c=0a1b2c3d0", -1},
                 {"shard_crc32c=0a1b2c3g", -1},         {"shard_crc32c=", -1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256], why[256] = "";
        snprintf(text, sizeof text, "v1.2 2 shard_bytes=5120 %s labels=3,4\n" SC_OK_LINES,
                 cases[i].token);
        gf__sidecar sc;
        ck_assert_msg(gf__sidecar_parse(text, strlen(text), 5120, "s.idx", &sc, why, sizeof why) == 0,
                      "%s: %s", cases[i].token, why);
        ck_assert_msg(sc.shard_crc32c == cases[i].crc, "%s: %lld", cases[i].token,
                      (long long)sc.shard_crc32c);
        ck_assert_int_eq(sc.e[1].label, 4);
        gf__sidecar_free(&sc);
    }
    ck_assert_uint_eq(gf__crc32c((const uint8_t *)"123456789", 9), 0xe3069283u);
    enum { N = 3 * (1 << 20) + 7 }; /* past X3_MIN: three streams, against one in pieces */
    uint8_t *b = malloc(N);
    for (size_t i = 0; i < N; i++)
        b[i] = (uint8_t)(i * 131 + (i >> 7));
    uint32_t whole = gf__crc32c(b, N), parts = 0;
    for (size_t at = 0, step = 1; at < N; at += step, step = step * 3 + 1)
        parts = gf__crc32c_extend(parts, b + at, at + step > N ? N - at : step);
    ck_assert_uint_eq(parts, whole);
    ck_assert_uint_eq(gf__crc32c_extend(whole, b, 0), whole);
    free(b);
}
END_TEST

/* member_crc32c= is kept only as exactly one 8-digit value a line; any
 * other list is ignored (the sidecar still loads, as an older one). */
START_TEST(a_sidecar_keeps_its_member_crc32c_only_when_whole)
{
    static const struct {
        const char *token;
        int64_t a, b;
    } cases[] = {{"member_crc32c=0a1B2c3D,ffffffff", 0x0a1b2c3d, 0xffffffff},
                 {"member_crc32c=0a1b2c3d", -1, -1},
                 {"member_crc32c=0a1b2c3d,ffffffff,00000000", -1, -1},
                 {"member_crc32c=0a1b2c3d,fffffff", -1, -1},
                 {"member_crc32c=0a1b2c3d;ffffffff", -1, -1},
                 {"member_crc32c=0a1b2c3d,fffffffg", -1, -1},
                 {"member_crc32c=0a1b2c3d,ffffffff,", -1, -1},
                 {"member_crc32c=", -1, -1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256], why[256] = "";
        snprintf(text, sizeof text, "v1.2 2 shard_bytes=5120 labels=3,4 %s\n" SC_OK_LINES,
                 cases[i].token);
        gf__sidecar sc;
        ck_assert_msg(gf__sidecar_parse(text, strlen(text), 5120, "s.idx", &sc, why, sizeof why) == 0,
                      "%s: %s", cases[i].token, why);
        ck_assert_msg(sc.e[0].img_crc32c == cases[i].a && sc.e[1].img_crc32c == cases[i].b,
                      "%s: %lld %lld", cases[i].token, (long long)sc.e[0].img_crc32c,
                      (long long)sc.e[1].img_crc32c);
        ck_assert_int_eq(sc.e[1].label, 4);
        gf__sidecar_free(&sc);
    }
}
END_TEST

/* A sidecar as DALI's wds2idx writes it (no gpufeed token, every member
 * of a key, newer than the shard) is taken for a local shard, the labels
 * read from its .cls members; one whose labels= disagrees with a .cls is
 * ignored with a warning. */
START_TEST(a_dali_sidecar_is_taken_and_labels_must_match_the_cls)
{
    size_t off[3][3], size;
    char *p = sidecar_shard(off, &size);
    gf__dataset scan, side;
    char why[512], text[2048];
    ck_assert_msg(open_ds(&scan, p, why, sizeof why) == 0, "%s", why);
    int n = snprintf(text, sizeof text, "v1.2 3%s\n", _i ? " labels=7,6,4" : "");
    for (int k = 0; k < 3; k++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "jpg %zu %d k%d.jpg cls %zu 1 k%d.cls key %zu 9 k%d.key\n", off[k][0],
                      100 + 200 * k, k, off[k][1], k, off[k][2], k);
    char *idx = path_in("x.idx");
    tu_write_file(idx, text, (size_t)n);
    ck_assert_msg(open_ds(&side, p, why, sizeof why) == 0, "%s", why);
    if (_i) {
        ck_assert_uint_eq(side.warnings, scan.warnings + 1);
        ck_assert_msg(strstr(side.warning, "x.idx: line 4: labels= differs from the .cls"), "%s",
                      side.warning);
    } else {
        ck_assert_msg(side.warnings == 0, "%s", side.warning);
    }
    ck_assert_uint_eq(side.n, 3);
    for (uint64_t i = 0; i < side.n; i++) {
        ck_assert_str_eq(gf__dataset_path(&side, i), gf__dataset_path(&scan, i));
        ck_assert_int_eq(side.labels[i], scan.labels[i]);
        ck_assert_uint_eq(side.data_off[i], scan.data_off[i]);
    }
    gf__dataset_close(&scan);
    gf__dataset_close(&side);
    free(idx);
    free(p);
}
END_TEST

/* gf_shard_index's text (gpufeed index) is what a scan indexes: written
 * beside the shard, it is taken and gives the same samples, labels and
 * places; it names every member of a key and each label. A header
 * spoiled afterwards is seen: the sidecar is not used, and the scan
 * fails there. A damaged shard gives no text. */
START_TEST(gf_shard_index_writes_the_sidecar_a_scan_would_match)
{
    size_t off[3][3], size;
    char *p = sidecar_shard(off, &size);
    gf__dataset scan, side;
    char why[512];
    ck_assert_msg(open_ds(&scan, p, why, sizeof why) == 0, "%s", why);
    char *text = NULL;
    size_t len = 0;
    gf_shard_index_info info;
    ck_assert_msg(gf_shard_index(p, &text, &len, &info, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(info.samples, 3);
    ck_assert_uint_eq(info.members, 9);
    ck_assert_uint_eq(info.shard_bytes, size);
    /* DALI reads "v1.2 3" (the first two tokens); shard_crc32c= is the
     * whole shard's, which ties the sidecar to these bytes, and
     * member_crc32c= each line's image's, checked at each read */
    size_t shard_len;
    uint8_t *shard = tu_read_file(p, &shard_len);
    ck_assert_uint_eq(shard_len, size);
    uint32_t crc = gf__crc32c(shard, shard_len), img_crc[3];
    static const size_t img_size[3] = {100, 300, 500};
    for (int i = 0; i < 3; i++)
        img_crc[i] = gf__crc32c(shard + off[i][0], img_size[i]);
    free(shard);
    char head[192];
    snprintf(head, sizeof head,
             "v1.2 3 shard_bytes=%zu shard_crc32c=%08x labels=7,6,5 "
             "member_crc32c=%08x,%08x,%08x\n",
             size, (unsigned)crc, (unsigned)img_crc[0], (unsigned)img_crc[1],
             (unsigned)img_crc[2]);
    ck_assert_msg(strncmp(text, head, strlen(head)) == 0, "%s", text);
    gf__sidecar parsed;
    ck_assert_int_eq(gf__sidecar_parse(text, len, size, "x.idx", &parsed, why, sizeof why), 0);
    ck_assert_int_eq(parsed.shard_crc32c, (int64_t)crc);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(parsed.e[i].img_crc32c, (int64_t)img_crc[i]);
    gf__sidecar_free(&parsed);
    char line[128];
    snprintf(line, sizeof line, "\njpg %zu 300 k1.jpg cls %zu 1 k1.cls key %zu 9 k1.key\n",
             off[1][0], off[1][1], off[1][2]);
    ck_assert_msg(strstr(text, line), "%s", text);
    char *idx = path_in("x.idx");
    tu_write_file(idx, text, len);
    gf_free(text);
    ck_assert_msg(open_ds(&side, p, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(side.warnings == 0, "%s", side.warning);
    ck_assert_uint_eq(side.n, scan.n);
    for (uint64_t i = 0; i < side.n; i++) {
        ck_assert_str_eq(gf__dataset_path(&side, i), gf__dataset_path(&scan, i));
        ck_assert_int_eq(side.labels[i], scan.labels[i]);
        ck_assert_uint_eq(side.data_off[i], scan.data_off[i]);
        ck_assert_uint_eq(side.data_len[i], scan.data_len[i]);
    }
    gf__dataset_close(&side);
    int fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "X", 1, (off_t)off[1][0] - 512 + 148), 1);
    close(fd);
    ck_assert_int_eq(open_ds(&side, p, why, sizeof why), GF_EDATASET);
    ck_assert_msg(strstr(why, "x.tar: offset") && strstr(why, "checksum"), "%s", why);
    /* the spoiled header: damaged, named, nothing to write */
    text = (char *)1;
    ck_assert_int_eq(gf_shard_index(p, &text, &len, &info, why, sizeof why), GF_EDATASET);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(why, "x.tar") && strstr(why, "offset"), "%s", why);
    gf__dataset_close(&scan);
    gf__dataset_close(&side);
    free(idx);
    free(p);
}
END_TEST

/* gf_shard_index_with: zero options are gf_shard_index (the same text);
 * a reserved byte set is refused, naming it, and so is a remote limit
 * out of its setting's range (remote_settings); a URL pattern of more than
 * one shard is refused (gf_shard_paths expands it), and so is userinfo
 * in gf_shard_paths, without quoting it. */
START_TEST(gf_shard_index_with_takes_zero_options_and_refuses_reserved_bytes)
{
    size_t off[3][3], size;
    char *p = sidecar_shard(off, &size);
    char why[512];
    char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    ck_assert_msg(gf_shard_index(p, &a, &alen, NULL, why, sizeof why) == 0, "%s", why);
    gf_shard_index_opts o;
    memset(&o, 0, sizeof o);
    ck_assert_msg(gf_shard_index_with(p, &o, &b, &blen, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(alen, blen);
    ck_assert(memcmp(a, b, alen) == 0);
    gf_free(a);
    gf_free(b);
    o.reserved[39] = 1;
    b = (char *)1;
    ck_assert_int_eq(gf_shard_index_with(p, &o, &b, &blen, NULL, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(why, "reserved byte 39"), "%s", why);
    /* a remote shard's limits are the settings table's, checked before
     * any request (none could be made to port 1 anyway) */
    memset(&o, 0, sizeof o);
    gf_settings lim;
    gf_default_settings(&lim);
    lim.remote_deadline_s = -1;
    o.remote_settings = &lim;
    ck_assert_int_eq(gf_shard_index_with("http://127.0.0.1:1/t.tar", &o, &b, &blen, NULL, why,
                                         sizeof why),
                     GF_EINVAL);
    ck_assert_msg(strstr(why, "remote_deadline_s: -1 is out of range"), "%s", why);
    ck_assert_int_eq(gf_shard_index_with("http://127.0.0.1:1/t-{0..1}.tar", NULL, &b, &blen,
                                         NULL, why, sizeof why),
                     GF_EINVAL);
    ck_assert_ptr_null(b);
    char *paths = NULL;
    size_t n = 0;
    ck_assert_int_eq(gf_shard_paths("http://h/a.tar,https://u:s3cr3t@h/{0..1}.tar", &paths, &n,
                                    why, sizeof why),
                     GF_EINVAL);
    ck_assert_msg(!strstr(why, "s3cr3t") && strstr(why, "user name or password"), "%s", why);
    ck_assert_int_eq(gf_shard_paths("http://h/a-{0..1}.tar", &paths, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(paths, "http://h/a-0.tar");
    ck_assert_str_eq(paths + strlen(paths) + 1, "http://h/a-1.tar");
    gf_free(paths);
    free(p);
}
END_TEST

/* classes.txt beside the first shard (gpufeed prepare's) names the
 * classes when it names every label, CRLF or not, and may name more
 * (a source class left without samples); one that names too few, holds
 * an empty line or is no file is ignored with a warning, and the labels
 * are the classes. No file: no names, no warning. */
START_TEST(classes_txt_beside_the_shards_names_the_classes)
{
    static const struct {
        const char *text; /* NULL: no classes.txt */
        int classes;      /* 0: ignored */
        const char *warning;
    } cases[] = {
        {NULL, 0, NULL},
        {"cat\ndog\nemu\n", 3, NULL},
        {"cat\r\ndog\r\nemu\r\nfox", 4, NULL},
        {"cat\ndog\n", 0, "fewer names than the shards' labels"},
        {"cat\n\nemu\n", 0, "an empty line"},
        {"", 0, "fewer names"},
    };
    for (int k = 0; k < 3; k++) {
        char n[32];
        snprintf(n, sizeof n, "c-%d.tar", k);
        free(one_sample_shard(n, k));
    }
    char src[4096], cls[4096], why[512];
    snprintf(src, sizeof src, "%s/c-{0..2}.tar", dir);
    snprintf(cls, sizeof cls, "%s/classes.txt", dir);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        unlink(cls);
        if (cases[c].text)
            tu_write_file(cls, cases[c].text, strlen(cases[c].text));
        gf__dataset ds;
        ck_assert_msg(open_ds(&ds, src, why, sizeof why) == 0, "%s", why);
        ck_assert_uint_eq(ds.n, 3);
        if (cases[c].classes) {
            static const char *const names[] = {"cat", "dog", "emu", "fox"};
            ck_assert_int_eq(ds.n_classes, cases[c].classes);
            ck_assert_ptr_nonnull(ds.class_names);
            for (int i = 0; i < ds.n_classes; i++)
                ck_assert_str_eq(ds.class_names[i], names[i]);
            ck_assert_uint_eq(ds.warnings, 0);
        } else {
            ck_assert_int_eq(ds.n_classes, 3);
            ck_assert_ptr_null(ds.class_names);
            if (cases[c].warning)
                ck_assert_msg(strstr(ds.warning, "class names ignored") &&
                                  strstr(ds.warning, "classes.txt") &&
                                  strstr(ds.warning, cases[c].warning),
                              "case %zu: %s", c, ds.warning);
            else
                ck_assert_uint_eq(ds.warnings, 0);
        }
        gf__dataset_close(&ds);
    }
}
END_TEST

/* GNU tar's sparse members (--sparse: type 'S' in its own format, pax
 * GNU.sparse.* records in posix's) are skipped with a warning that says
 * "sparse" and names them; the shard's other samples load. */
START_TEST(sparse_members_are_skipped_as_sparse)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && printf J > a.jpg && truncate -s 1048576 a.jpg && printf K >> a.jpg && "
             "printf 1 > a.cls && printf b > b.jpg && printf 0 > b.cls && "
             "tar --format=%s --sparse -cf s.tar a.jpg a.cls b.jpg b.cls",
             dir, _i == 0 ? "gnu" : "posix");
    ck_assert_int_eq(system(cmd), 0);
    char *p = path_in("s.tar");
    gf__dataset ds;
    char why[512];
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), "s.tar:b.jpg");
    ck_assert_int_eq(ds.labels[0], 0);
    ck_assert_uint_eq(ds.skipped_members, 1);
    ck_assert_msg(strstr(ds.warning, "member 'a.jpg' skipped: a GNU sparse file"), "%s",
                  ds.warning);
    gf__dataset_close(&ds);
    free(p);
}
END_TEST

/* gzip'd shards (webdataset reads them) are refused by name, saying how
 * to decompress them, never read as a list file: by their suffix
 * (.tar.gz, .tgz, in a pattern too) and, named .tar, by their magic. */
START_TEST(gzip_compressed_shards_are_refused_by_name)
{
    uint8_t gz[1024] = {0x1f, 0x8b, 0x08, 0x00};
    for (size_t i = 4; i < sizeof gz; i++)
        gz[i] = (uint8_t)(i * 37 + 11);
    static const char *const names[] = {"s.tar.gz", "s.tgz", "s-{0..1}.tar.gz", "s.tar"};
    char *p = path_in(_i == 2 ? "s-0.tar.gz" : names[_i]);
    tu_write_file(p, gz, sizeof gz);
    char *src = path_in(names[_i]);
    expect_error(src, "gzip-compressed", _i == 3 ? "s.tar: offset 0" : "decompress it");
    if (_i < 3)
        expect_error(src, p, "gunzip");
    free(src);
    free(p);
}
END_TEST

/* gf_shard_index leaves out the members of keys a scan skips (an image
 * without .cls, a stray file): its sidecar is still taken, as it lists
 * the scan's samples; the scan's warning for the key is given as without
 * a sidecar. */
START_TEST(a_sidecar_is_taken_beside_keys_that_are_no_sample)
{
    tw w = {0};
    tw_text(&w, "a.jpg", "j");
    tw_text(&w, "a.cls", "1");
    tw_text(&w, "nocls.jpg", "j");
    tw_text(&w, "README", "stray");
    tw_text(&w, "b.jpg", "j");
    tw_text(&w, "b.cls", "0");
    tw_text(&w, "tail.json", "{}");
    tu_tar_end(&w);
    char *p = tw_save(&w, "k.tar");
    char *text = NULL, why[512];
    size_t len = 0;
    gf_shard_index_info info;
    ck_assert_msg(gf_shard_index(p, &text, &len, &info, why, sizeof why) == 0, "%s", why);
    char *idx = path_in("k.idx");
    tu_write_file(idx, text, len);
    gf_free(text);
    gf__dataset ds;
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(ds.warnings == 3 && strstr(ds.warning, "key 'nocls' skipped: no .cls member"),
                  "%llu: %s", (unsigned long long)ds.warnings, ds.warning); /* and the other two */
    ck_assert_uint_eq(ds.n, 2);
    ck_assert_int_eq(ds.labels[1], 0);
    ck_assert_int_ge(ds.data_crc[0], 0); /* taken */
    gf__dataset_close(&ds);
    free(idx);
    free(p);
}
END_TEST

/* A sidecar is taken only where it lists the scan's samples: one naming
 * a key's second image (a scan takes the first), or pairing an image and
 * a .cls split by another key's member (no sample to a scan), is ignored
 * with a warning, and the scan's index stands: never a second truth. */
START_TEST(a_sidecar_listing_what_a_scan_would_not_take_is_ignored)
{
    tw w = {0};
    size_t a_jpg = tw_text(&w, "a.jpg", "first");
    size_t a_png = tw_text(&w, "a.png", "second");
    size_t a_cls = tw_text(&w, "a.cls", "1");
    size_t b_jpg = tw_text(&w, "b.jpg", "bb");
    tw_text(&w, "x.txt", "x");
    size_t b_cls = tw_text(&w, "b.cls", "2");
    tu_tar_end(&w);
    char *p = tw_save(&w, "two.tar"), why[512], text[512];
    gf__dataset scan, side;
    ck_assert_msg(open_ds(&scan, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(scan.n, 1);
    int n = _i == 0 ? snprintf(text, sizeof text, "v1.2 1\npng %zu 6 a.png cls %zu 1 a.cls\n",
                               a_png, a_cls)
                    : snprintf(text, sizeof text,
                               "v1.2 2\njpg %zu 5 a.jpg cls %zu 1 a.cls\n"
                               "jpg %zu 2 b.jpg cls %zu 1 b.cls\n",
                               a_jpg, a_cls, b_jpg, b_cls);
    char *idx = path_in("two.idx");
    tu_write_file(idx, text, (size_t)n);
    ck_assert_msg(open_ds(&side, p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(side.warnings, scan.warnings + 1);
    ck_assert_uint_eq(side.n, 1);
    ck_assert_str_eq(gf__dataset_path(&side, 0), "two.tar:a.jpg");
    ck_assert_uint_eq(side.data_off[0], a_jpg);
    ck_assert_int_eq(side.labels[0], 1);
    gf__dataset_close(&scan);
    gf__dataset_close(&side);
    free(idx);
    free(p);
}
END_TEST

/* A label names a class: one past what the set's samples can mean (here
 * 2147483646, which would make 2^31 class names) fails the open naming
 * the shard, the member and the label, from a .cls and from labels=; a
 * high label within the bound (a subset of a large set) is taken. */
START_TEST(a_label_past_what_the_set_can_mean_is_refused_by_name)
{
    tw w = {0};
    tw_text(&w, "a.jpg", "j");
    tw_text(&w, "a.cls", "1");
    tw_text(&w, "b.jpg", "j");
    tw_text(&w, "b.cls", _i == 0 ? "2147483646" : "1048575");
    tu_tar_end(&w);
    char *p = tw_save(&w, "labels.tar");
    gf__dataset ds;
    char why[512];
    int rc = open_ds(&ds, p, why, sizeof why);
    if (_i == 1) {
        ck_assert_msg(rc == 0, "%s", why);
        ck_assert_int_eq(ds.n_classes, 1048576);
    } else {
        ck_assert_int_eq(rc, GF_EDATASET);
        ck_assert_msg(strstr(why, p) && strstr(why, "member 'b.jpg'") &&
                          strstr(why, "label 2147483646"),
                      "%s", why);
    }
    gf__dataset_close(&ds);
    free(p);
}
END_TEST

/* Shards and sidecars as others write them (tests/wds_fixtures.py):
 * webdataset's PAX shards and GNU long-name shards, DALI wds2idx's
 * sidecars of 2021 (PAX: every offset 1,024 bytes too far) and of 2023
 * (GNU long names: every offset at the long name), one that leaves a
 * sample out, one whose images are the next key's. A right sidecar is
 * taken; a wrong one is ignored with a warning naming it, and every
 * sample gets its own label and bytes from the headers. */
static const struct {
    const char *name;
    int right;
} wds_cases[] = {
    {"pax-right", 1}, {"gnu-right", 1}, {"gnu-2021", 1}, {"pax-2023", 1},
    {"pax-2021", 0},  {"gnu-2023", 0},  {"pax-omit", 0}, {"pax-next", 0},
};

START_TEST(sidecars_others_write_are_taken_only_when_the_headers_agree)
{
    const char *script = getenv("GF_WDS_FIXTURES");
    ck_assert_msg(script, "GF_WDS_FIXTURES (tests/wds_fixtures.py) is not set");
    char cmd[8192], p[4200], why[512];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", script, dir);
    ck_assert_int_eq(system(cmd), 0);
    const char *name = wds_cases[_i].name;
    snprintf(p, sizeof p, "%s/%s/expect", dir, name);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    snprintf(p, sizeof p, "%s/%s/s.tar", dir, name);
    gf__dataset ds;
    ck_assert_msg(open_ds(&ds, p, why, sizeof why) == 0, "%s: %s", name, why);
    if (wds_cases[_i].right)
        ck_assert_msg(ds.warnings == 0, "%s: %s", name, ds.warning);
    else
        ck_assert_msg(ds.warnings == 1 && strstr(ds.warning, "s.idx") &&
                          strstr(ds.warning, "index sidecar ignored"),
                      "%s: %llu warnings: %s", name, (unsigned long long)ds.warnings,
                      ds.warning);
    ck_assert_uint_eq(ds.n, 8);
    for (uint64_t i = 0; i < ds.n; i++) {
        int label;
        char hex[512];
        ck_assert_int_eq(fscanf(f, "%d %511s", &label, hex), 2);
        ck_assert_msg(ds.labels[i] == label, "%s: sample %llu: label %d, not %d", name,
                      (unsigned long long)i, ds.labels[i], label);
        void *data = NULL;
        size_t len = 0;
        ck_assert_msg(gf__dataset_read_sample(&ds, i, 0, &data, &len, why, sizeof why) == 0,
                      "%s: %s", name, why);
        ck_assert_uint_eq(len * 2, strlen(hex));
        for (size_t k = 0; k < len; k++) {
            unsigned byte;
            ck_assert_int_eq(sscanf(hex + 2 * k, "%2x", &byte), 1);
            ck_assert_uint_eq(((uint8_t *)data)[k], byte);
        }
        gf_free(data);
    }
    fclose(f);
    gf__dataset_close(&ds);
}
END_TEST

/* A shard key skipped for a .cls that is no label ("-1") is a warning
 * naming it (on_sample_warning, gf_recent_warnings), not only a count;
 * under on_error = fail it fails gf_open, naming the shard and the key. */
static int label_warnings;
static void on_label_warning(void *user, int64_t sample, const char *path, int code,
                             const char *reason)
{
    (void)user;
    if (sample == -1 && code == GF_ECORRUPT && strcmp(path, "keys.tar:neg") == 0 &&
        strstr(reason, "not a non-negative decimal integer"))
        label_warnings++;
}

START_TEST(a_key_skipped_for_its_label_is_a_warning_or_under_fail_an_error)
{
    tw w = {0};
    tw_text(&w, "good.jpg", "j");
    tw_text(&w, "good.cls", "1");
    tw_text(&w, "neg.jpg", "j");
    tw_text(&w, "neg.cls", "-1");
    tu_tar_end(&w);
    char *p = tw_save(&w, "keys.tar");
    gf_settings s;
    settings(&s, p, GF_IO_POSIX);
    s.on_sample_warning = on_label_warning;
    label_warnings = 0;
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    ck_assert_int_eq(label_warnings, 1);
    gf_sample_error e[GF_RECENT_WARNINGS];
    ck_assert_int_eq(gf_recent_warnings(l, e, GF_RECENT_WARNINGS), 1);
    ck_assert_str_eq(e[0].path, "keys.tar:neg");
    ck_assert_msg(strstr(e[0].reason, "key skipped: .cls is not"), "%s", e[0].reason);
    gf_close(&l);
    s.on_error = GF_ON_ERROR_FAIL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    ck_assert_msg(strstr(gf_last_error(l), p) && strstr(gf_last_error(l), "key 'neg'") &&
                      strstr(gf_last_error(l), "on_error = fail"),
                  "%s", gf_last_error(l));
    gf_close(&l);
    free(p);
}
END_TEST

static Suite *tar_suite(void)
{
    Suite *su = suite_create("tar");
    TCase *tc = tcase_create("index");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, members_are_found_with_offsets_sizes_and_labels, 0, 1);
    tcase_add_loop_test(tc, range_reads_check_the_range_against_the_file, 0, 1);
    tcase_add_test(tc, long_names_come_from_pax_gnu_and_the_ustar_prefix);
    tcase_add_test(tc, pax_size_base256_size_and_archive_ends_are_honoured);
    tcase_add_test(tc, keys_without_an_image_or_a_label_are_skipped);
    tcase_add_loop_test(tc, a_label_past_what_the_set_can_mean_is_refused_by_name, 0, 2);
    tcase_add_test(tc, brace_ranges_and_comma_lists_expand_in_order);
    tcase_add_test(tc, classes_txt_beside_the_shards_names_the_classes);
    suite_add_tcase(su, tc);

    tc = tcase_create("sidecar");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_matching_sidecar_gives_the_scans_index_and_spoiled_headers_are_seen);
    tcase_add_loop_test(tc, a_sidecar_listing_what_a_scan_would_not_take_is_ignored, 0, 2);
    tcase_add_loop_test(tc, a_sidecar_that_does_not_match_is_ignored_with_a_warning, 1, 7);
    tcase_add_test(tc, a_sidecar_keeps_its_shard_crc32c);
    tcase_add_test(tc, a_sidecar_keeps_its_member_crc32c_only_when_whole);
    tcase_add_loop_test(tc, a_sidecar_text_is_checked_without_the_file_system, 0,
                        (int)(sizeof sidecar_texts / sizeof sidecar_texts[0]));
    tcase_add_test(tc, a_sidecar_line_without_an_image_is_taken);
    tcase_add_loop_test(tc, a_dali_sidecar_is_taken_and_labels_must_match_the_cls, 0, 2);
    tcase_add_test(tc, gf_shard_index_writes_the_sidecar_a_scan_would_match);
    tcase_add_test(tc, gf_shard_index_with_takes_zero_options_and_refuses_reserved_bytes);
    tcase_add_test(tc, a_sidecar_is_taken_beside_keys_that_are_no_sample);
    tcase_add_loop_test(tc, sidecars_others_write_are_taken_only_when_the_headers_agree, 0,
                        (int)(sizeof wds_cases / sizeof wds_cases[0]));
    suite_add_tcase(su, tc);

    tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_bad_checksum_names_the_shard_and_offset);
    tcase_add_test(tc, a_non_octal_size_is_an_error);
    tcase_add_loop_test(tc, gzip_compressed_shards_are_refused_by_name, 0, 4);
    tcase_add_loop_test(tc, sparse_members_are_skipped_as_sparse, 0, 2);
    tcase_add_test(tc, a_size_past_the_end_of_the_file_is_an_error);
    tcase_add_test(tc, a_truncated_archive_is_an_error);
    tcase_add_test(tc, links_devices_fifos_and_directories_are_skipped_and_counted);
    tcase_add_test(tc, unsafe_names_are_skipped_and_never_opened);
    suite_add_tcase(su, tc);

    tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, shards_give_the_batches_of_the_same_images_as_a_folder, 0, 1);
    tcase_add_loop_test(tc, a_bad_member_is_reported_with_shard_and_member_name, 0, 1);
    tcase_add_loop_test(tc, a_member_changed_after_indexing_is_an_error_naming_it, 0, 1);
    tcase_add_test(tc, a_key_skipped_for_its_label_is_a_warning_or_under_fail_an_error);
    suite_add_tcase(su, tc);

    tc = tu_uring_tcase("uring");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, members_are_found_with_offsets_sizes_and_labels, URING_CASE,
                        URING_CASE + 1);
    tcase_add_loop_test(tc, range_reads_check_the_range_against_the_file, URING_CASE,
                        URING_CASE + 1);
    tcase_add_loop_test(tc, shards_give_the_batches_of_the_same_images_as_a_folder, URING_CASE,
                        URING_CASE + 1);
    tcase_add_loop_test(tc, a_bad_member_is_reported_with_shard_and_member_name, URING_CASE,
                        URING_CASE + 1);
    tcase_add_loop_test(tc, a_member_changed_after_indexing_is_an_error_naming_it, URING_CASE,
                        URING_CASE + 1);
    suite_add_tcase(su, tc);
    return su;
}

int main(int argc, char **argv)
{
    return tu_run_suite_split(tar_suite(), argc, argv);
}
