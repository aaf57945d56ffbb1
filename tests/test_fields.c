/* The sample schema (settings.fields): the parser's kinds and refusals,
 * and text and bytes members delivered beside their images, byte-exact,
 * in sampler order, whatever the threads, holes or resume point. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"
#include "mix.h"
#include "testutil.h"

/* ---- the parser ---- */

static gf__schema parse_ok(const char *spec)
{
    gf__schema s;
    char why[256] = "";
    ck_assert_msg(gf__schema_parse(spec, &s, why, sizeof why) == 0, "%s: %s", spec, why);
    return s;
}

static void parse_refused(const char *spec, const char *want)
{
    gf__schema s;
    char why[256] = "";
    ck_assert_int_eq(gf__schema_parse(spec, &s, why, sizeof why), GF_EINVAL);
    ck_assert_msg(strstr(why, want), "%s: '%s' lacks '%s'", spec, why, want);
}

START_TEST(kinds_follow_the_extension_or_the_name)
{
    gf__schema s = parse_ok(NULL);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.field[0].kind, GF_FIELD_IMAGE);
    ck_assert_int_eq(s.field[1].kind, GF_FIELD_LABEL);
    ck_assert(s.image == 0 && s.label == 1);
    int alt;
    ck_assert_int_eq(gf__schema_match(&s, "JPEG", 4, &alt), 0); /* any image, any case */
    ck_assert_int_eq(gf__schema_match(&s, "cls", 3, &alt), 1);
    ck_assert_int_eq(gf__schema_match(&s, "txt", 3, &alt), -1);

    s = parse_ok(" jpg ; .PNG , cls,txt , json, seg.png:bytes");
    ck_assert_int_eq(s.n, 5);
    ck_assert_int_eq(s.field[0].kind, GF_FIELD_IMAGE);
    ck_assert_str_eq(s.name[0], "jpg;png");
    ck_assert_int_eq(s.field[1].kind, GF_FIELD_LABEL);
    ck_assert_int_eq(s.field[2].kind, GF_FIELD_TEXT);
    ck_assert_int_eq(s.field[3].kind, GF_FIELD_BYTES);
    ck_assert_int_eq(s.field[4].kind, GF_FIELD_BYTES);
    ck_assert_str_eq(s.name[4], "seg.png");
    ck_assert_int_eq(s.image, 0);
    ck_assert_int_eq(s.label, 1);
    ck_assert_int_eq(gf__schema_match(&s, "png", 3, &alt), 0);
    ck_assert_int_eq(alt, 1);
    ck_assert_int_eq(gf__schema_match(&s, "Seg.PNG", 7, &alt), 4);
    ck_assert_int_eq(gf__schema_match(&s, "webp", 4, &alt), -1); /* only the alternatives */
    char out[128];
    gf__schema_format(&s, out, sizeof out);
    ck_assert_str_eq(out, "jpg;png:image,cls:label,txt:text,json:bytes,seg.png:bytes");
    s = parse_ok("latent.npy, jpg, seg.png:mask,b.npy:boxes");
    ck_assert_int_eq(s.field[0].kind, GF_FIELD_ARRAY);
    ck_assert_int_eq(s.field[2].kind, GF_FIELD_MASK);
    ck_assert_int_eq(s.field[3].kind, GF_FIELD_BOXES);
    ck_assert_int_eq(s.image, 1);
    s = parse_ok("caption:text,jpg");
    ck_assert_int_eq(s.field[0].kind, GF_FIELD_TEXT);
    ck_assert_int_eq(s.label, -1);
}
END_TEST

START_TEST(bad_specs_are_named)
{
    parse_refused("jpg,,cls", "an empty field");
    parse_refused("jpg;,cls", "an empty extension");
    parse_refused("jpg:picture", "no kind 'picture'");
    parse_refused("jpg;txt", "its alternatives are a image and a text");
    parse_refused("jpg,png;jpg", "extension 'jpg' is in two fields");
    parse_refused("jpg,cls,idx:label", "two label fields");
    parse_refused("a,b,c,d,e,f,g,h,i", "more than 8 fields");
    parse_refused("a;b;c;d;e", "more than 4 alternatives");
    parse_refused("jpg,a/b", "'/' in an extension");
    char long_ext[64];
    memset(long_ext, 'x', 40);
    long_ext[40] = '\0';
    parse_refused(long_ext, "extension over 31 bytes");
}
END_TEST

/* ---- the loader ---- */

enum { W = 8, H = 8, N = 23 };
static char *dir;

static void teardown(void)
{
    if (dir) {
        tu_rmrf(dir);
        free(dir);
        dir = NULL;
    }
}

/* Sample i's caption: UTF-8 beyond ASCII, of a length that varies. */
static void caption_of(int i, char *out, size_t len)
{
    snprintf(out, len, "caf\xc3\xa9 n\xc2\xb0%d%.*s", i, i % 5 * 7, "..............................");
}

/* Two shards of N samples: key k%03d with png, cls (k % 3), txt and
 * json members; every third key lists its txt before its image, every
 * fifth has an unrelated member between. bad_key: that key's txt is not
 * UTF-8 (-1: none). missing_key: that key has no txt. */
static char *make_shards(int bad_key, int missing_key)
{
    dir = tu_mkdtemp();
    tu_tar w[2] = {{0}, {0}};
    uint8_t px[W * H * 3];
    for (int i = 0; i < N; i++) {
        tu_tar *t = &w[i < N / 2 ? 0 : 1];
        char name[64], cap[128], cls[16], json[64];
        tu_fill(px, W, H, 3, (uint32_t)i);
        size_t png_len;
        uint8_t *png = tu_png_mem(px, W, H, 3, &png_len);
        caption_of(i, cap, sizeof cap);
        if (i == bad_key)
            cap[3] = (char)0xff;
        snprintf(cls, sizeof cls, "%d", i % 3);
        snprintf(json, sizeof json, "{\"i\": %d}", i);
        int txt_first = i % 3 == 0;
        if (txt_first && i != missing_key) {
            snprintf(name, sizeof name, "k%03d.txt", i);
            tu_tar_file(t, name, cap, strlen(cap));
        }
        snprintf(name, sizeof name, "k%03d.png", i);
        tu_tar_file(t, name, png, png_len);
        if (i % 5 == 0) {
            snprintf(name, sizeof name, "k%03d.other", i);
            tu_tar_file(t, name, "zz", 2);
        }
        snprintf(name, sizeof name, "k%03d.cls", i);
        tu_tar_file(t, name, cls, strlen(cls));
        snprintf(name, sizeof name, "k%03d.json", i);
        tu_tar_file(t, name, json, strlen(json));
        if (!txt_first && i != missing_key) {
            snprintf(name, sizeof name, "k%03d.txt", i);
            tu_tar_file(t, name, cap, strlen(cap));
        }
        free(png);
    }
    static char pattern[4096];
    for (int k = 0; k < 2; k++) {
        char path[4096];
        tu_tar_end(&w[k]);
        snprintf(path, sizeof path, "%s/s-%d.tar", dir, k);
        tu_write_file(path, w[k].p, w[k].len);
        free(w[k].p);
    }
    snprintf(pattern, sizeof pattern, "%s/s-{0..1}.tar", dir);
    return pattern;
}

/* The key's number from a display path "s-0.tar:k007.png". */
static int key_of(gf_loader *l, int64_t index)
{
    const char *path = gf_sample_path(l, (uint64_t)index);
    ck_assert_ptr_nonnull(path);
    const char *k = strstr(path, ":k");
    ck_assert_ptr_nonnull(k);
    return atoi(k + 2);
}

/* Batch b's fields checked against its samples (and on the CPU its
 * pixels); h takes their bytes. */
static uint64_t check_batch(gf_loader *l, const gf_batch *b, uint64_t h)
{
    ck_assert_int_eq(b->n_fields, 4);
    ck_assert_str_eq(b->fields[0].name, "png");
    ck_assert_int_eq(b->fields[0].kind, GF_FIELD_IMAGE);
    ck_assert_ptr_null(b->fields[0].data);
    ck_assert_int_eq(b->fields[1].kind, GF_FIELD_LABEL);
    ck_assert_int_eq(b->fields[2].kind, GF_FIELD_TEXT);
    ck_assert_int_eq(b->fields[3].kind, GF_FIELD_BYTES);
    const gf_field *txt = &b->fields[2], *json = &b->fields[3];
    for (int i = 0; i < b->count; i++) {
        int k = key_of(l, b->indices[i]);
        char cap[128], js[64];
        caption_of(k, cap, sizeof cap);
        snprintf(js, sizeof js, "{\"i\": %d}", k);
        ck_assert_uint_eq(txt->lengths[i], strlen(cap));
        ck_assert_msg(memcmp(txt->data + txt->offsets[i], cap, strlen(cap)) == 0,
                      "sample %d: caption %.*s", k, (int)txt->lengths[i],
                      txt->data + txt->offsets[i]);
        ck_assert_uint_eq(json->lengths[i], strlen(js));
        ck_assert(memcmp(json->data + json->offsets[i], js, strlen(js)) == 0);
        ck_assert_int_eq(b->labels[i], k % 3);
        uint8_t want[W * H * 3];
        tu_fill(want, W, H, 3, (uint32_t)k);
        ck_assert_msg(!b->pixels ||
                          memcmp(b->pixels + (size_t)i * W * H * 3, want, sizeof want) == 0,
                      "sample %d: pixels", k);
        h = gf__fnv1a64(h, txt->data + txt->offsets[i], txt->lengths[i]);
        h = gf__fnv1a64(h, json->data + json->offsets[i], json->lengths[i]);
    }
    if (b->pixels)
        h = gf__fnv1a64(h, b->pixels, (size_t)b->count * W * H * 3);
    h = gf__fnv1a64(h, b->labels, (size_t)b->count * sizeof *b->labels);
    return h;
}

/* Every batch's fields checked against its samples; returns a hash of
 * pixels, labels and every field's bytes over `batches` batches. */
static uint64_t read_checked(gf_loader *l, int batches)
{
    uint64_t h = GF__FNV1A64_BASIS;
    for (int n = 0; n < batches; n++) {
        gf_batch *b = NULL;
        int rc = gf_next(l, &b);
        if (rc == GF_EOF)
            break;
        ck_assert_msg(rc == 0, "%s", gf_last_error(l));
        h = check_batch(l, b, h);
        gf_release(l, b);
    }
    return h;
}

static gf_loader *open_fields(const char *data, int threads, int shuffle, int on_error)
{
    gf_settings s;
    tu_exact_settings(&s, data, W, H);
    s.fields = "png,cls,txt,json";
    s.threads = threads;
    s.shuffle = shuffle;
    s.batch_size = 5;
    s.on_error = on_error;
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    return l;
}

START_TEST(captions_and_bytes_come_with_their_images_whatever_the_threads)
{
    const char *data = make_shards(-1, -1);
    uint64_t first = 0;
    for (int threads = 1; threads <= 4; threads *= 2) {
        gf_loader *l = open_fields(data, threads, 1, GF_ON_ERROR_FAIL);
        gf_stats st;
        ck_assert_int_eq(gf_get_stats(l, &st), 0);
        ck_assert_uint_eq(st.epoch_samples, N);
        uint64_t h = read_checked(l, 100);
        if (threads == 1)
            first = h;
        ck_assert_msg(h == first, "%d threads: other bytes", threads);
        gf_close(&l);
    }
}
END_TEST

/* On CUDA (the emulated runtime in CI) a batch's fields are its own copy:
 * the host slot is refilled while the batch is held. */
START_TEST(held_batches_keep_their_fields_on_the_device_path)
{
    const char *data = make_shards(-1, -1);
    gf_settings s;
    tu_exact_settings(&s, data, W, H);
    s.fields = "png,cls,txt,json";
    s.batch_size = 3;
    s.prefetch_depth = 2;
    s.device = GF_DEVICE_CUDA;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    if (rc == GF_ENODEV) { /* no device: the CPU cases cover the rest */
        gf_close(&l);
        return;
    }
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    gf_batch *held[4];
    int n = 0;
    for (; n < 4; n++)
        ck_assert_msg(gf_next(l, &held[n]) == 0, "%s", gf_last_error(l));
    for (int i = 0; i < n; i++) { /* checked after the ring moved on */
        ck_assert_ptr_null(held[i]->pixels);
        check_batch(l, held[i], 0);
        gf_release(l, held[i]);
    }
    read_checked(l, 100);
    gf_close(&l);
}
END_TEST

START_TEST(a_bad_caption_is_a_bad_sample_and_the_others_stay_with_theirs)
{
    /* In order, key 21 is in the last batch: its hole is packed away. */
    const char *data = make_shards(21, -1);
    gf_loader *l = open_fields(data, 2, 0, GF_ON_ERROR_SKIP);
    read_checked(l, 100);
    gf_close(&l);
    teardown();
    data = make_shards(7, -1);
    l = open_fields(data, 2, 1, GF_ON_ERROR_SKIP);
    read_checked(l, 100); /* every delivered caption its sample's */
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.errors, 1);
    /* named by the member that is bad, not the image */
    ck_assert_msg(strstr(st.recent[0].path, "s-0.tar:k007.txt") &&
                      strstr(st.recent[0].reason, "field 'txt': not UTF-8 at byte 3"),
                  "%s: %s", st.recent[0].path, st.recent[0].reason);
    gf_close(&l);

    l = open_fields(data, 2, 0, GF_ON_ERROR_FAIL);
    gf_batch *b = NULL;
    int rc = 0;
    while ((rc = gf_next(l, &b)) == 0)
        gf_release(l, b);
    ck_assert_int_eq(rc, GF_ECORRUPT);
    ck_assert_msg(strstr(gf_last_error(l), "k007.txt): field 'txt': not UTF-8"), "%s",
                  gf_last_error(l));
    gf_close(&l);
}
END_TEST

START_TEST(a_key_without_a_field_is_no_sample)
{
    const char *data = make_shards(-1, 4);
    gf_loader *l = open_fields(data, 2, 0, GF_ON_ERROR_FAIL);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.epoch_samples, N - 1);
    ck_assert_uint_eq(st.shard_keys_skipped, 1);
    ck_assert_msg(strstr(st.dataset_warning, "key 'k004' skipped: no .txt member"), "%s",
                  st.dataset_warning);
    /* named as the member that is not there, with its field */
    const char *path = NULL, *reason = NULL;
    ck_assert_uint_eq(gf_skipped_entry(l, 0, &path, &reason), 1);
    ck_assert_msg(strstr(path, "s-0.tar:k004.txt") &&
                      strstr(reason, "field 'txt': no .txt member"),
                  "%s: %s", path, reason);
    read_checked(l, 100);
    gf_close(&l);
}
END_TEST

START_TEST(resumed_batches_carry_the_same_fields)
{
    const char *data = make_shards(-1, -1);
    gf_loader *l = open_fields(data, 2, 1, GF_ON_ERROR_FAIL);
    read_checked(l, 2);
    uint64_t rest = read_checked(l, 100);
    gf_close(&l);
    l = open_fields(data, 3, 1, GF_ON_ERROR_FAIL);
    ck_assert_int_eq(gf_seek(l, 0, 10), 0);
    ck_assert_uint_eq(read_checked(l, 100), rest);
    gf_close(&l);
}
END_TEST

START_TEST(an_oversized_member_is_refused_by_name)
{
    dir = tu_mkdtemp();
    tu_tar w = {0};
    uint8_t px[W * H * 3];
    tu_fill(px, W, H, 3, 1);
    size_t png_len;
    uint8_t *png = tu_png_mem(px, W, H, 3, &png_len);
    size_t big = GF_FIELD_BYTES_MAX + 1;
    char *text = malloc(big);
    memset(text, 'a', big);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%d.png", i);
        tu_tar_file(&w, name, png, png_len);
        snprintf(name, sizeof name, "k%d.cls", i);
        tu_tar_file(&w, name, "1", 1);
        snprintf(name, sizeof name, "k%d.txt", i);
        tu_tar_file(&w, name, text, i == 0 ? big : 10);
    }
    tu_tar_end(&w);
    char path[4096];
    snprintf(path, sizeof path, "%s/big.tar", dir);
    tu_write_file(path, w.p, w.len);
    free(w.p);
    free(png);
    free(text);

    gf_settings s;
    tu_exact_settings(&s, path, W, H);
    s.fields = "png,cls,txt";
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.epoch_samples, 1);
    gf_close(&l);
    s.on_error = GF_ON_ERROR_FAIL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    ck_assert_msg(strstr(gf_last_error(l), "member 'k0.txt': over 65536 bytes"), "%s",
                  gf_last_error(l));
    gf_close(&l);
}
END_TEST

START_TEST(fields_need_local_tar_shards)
{
    dir = tu_image_folder(2, 2, W, H, "png");
    gf_settings s;
    tu_exact_settings(&s, dir, W, H);
    s.fields = "png,cls,txt";
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "fields name the members of a tar shard"), "%s",
                  gf_last_error(l));
    gf_close(&l);
    s.fields = "png,cls";
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL); /* any fields: a folder has no members */
    gf_close(&l);
    s.fields = "txt,seg.png:mask";
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "'seg.png' is a mask, moved with its image, and no "
                                           "field is an image"),
                  "%s", gf_last_error(l));
    gf_close(&l);
    s.fields = "cls";
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "a label alone"), "%s", gf_last_error(l));
    gf_close(&l);
    s.fields = "png,jpg";
    ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "more than one image field"), "%s", gf_last_error(l));
    gf_close(&l);
    s.fields = "";
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l)); /* "" is the default */
    gf_batch *b = NULL;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->n_fields, 2);
    ck_assert_str_eq(b->fields[0].name, "image");
    ck_assert_str_eq(b->fields[1].name, "cls");
    gf_release(l, b);
    gf_close(&l);
}
END_TEST

static Suite *fields_suite(void)
{
    Suite *su = suite_create("fields");
    TCase *tc = tcase_create("fields");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, kinds_follow_the_extension_or_the_name);
    tcase_add_test(tc, bad_specs_are_named);
    tcase_add_test(tc, captions_and_bytes_come_with_their_images_whatever_the_threads);
    tcase_add_test(tc, a_bad_caption_is_a_bad_sample_and_the_others_stay_with_theirs);
    tcase_add_test(tc, held_batches_keep_their_fields_on_the_device_path);
    tcase_add_test(tc, a_key_without_a_field_is_no_sample);
    tcase_add_test(tc, resumed_batches_carry_the_same_fields);
    tcase_add_test(tc, an_oversized_member_is_refused_by_name);
    tcase_add_test(tc, fields_need_local_tar_shards);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(fields_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
