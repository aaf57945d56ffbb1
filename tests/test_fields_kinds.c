/* Arrays, masks and boxes beside their images through the loader: .npy
 * latents byte-exact in one (B, *shape) tensor, a shape of its own
 * refused naming both; masks cropped and flipped as their image, values
 * only the input's and equal to a nearest-neighbour reference of the
 * image's own crop; boxes moved by that crop; the same bytes whatever
 * the threads or the resume point. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "boxes.h"
#include "config.h"
#include "decode.h"
#include "mix.h"
#include "settings.h"
#include "testutil.h"

#if GF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Masks need libspng (a build without it refuses them at open, checked
 * below); the other kinds are checked without them there. */
#define MASKS GF_HAVE_SPNG
#define FIELDS (MASKS ? "png,cls,latent.npy,seg.png:mask,boxes.npy:boxes" \
                      : "png,cls,latent.npy,boxes.npy:boxes")

/* Stored images SW x SH, delivered OW x OH: the crop is real. */
enum { SW = 16, SH = 12, OW = 8, OH = 6, N = 21, LAT = 2 * 3 * 4 };
static char *dir;

static void teardown(void)
{
    if (dir) {
        tu_rmrf(dir);
        free(dir);
        dir = NULL;
    }
}

/* A .npy (format 1.0) of descr and shape text over data[0, n). */
static uint8_t *npy(const char *descr, const char *shape, const void *data, size_t n,
                    size_t *len)
{
    char head[256];
    int h = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    int total = (10 + h + 1 + 63) / 64 * 64; /* padded to 64 with spaces, then '\n' */
    uint8_t *p = malloc((size_t)total + n);
    memcpy(p, "\x93NUMPY\x01\x00", 8);
    p[8] = (uint8_t)((total - 10) & 0xff);
    p[9] = (uint8_t)((total - 10) >> 8);
    memset(p + 10, ' ', (size_t)total - 10);
    memcpy(p + 10, head, (size_t)h);
    p[total - 1] = '\n';
    memcpy(p + total, data, n);
    *len = (size_t)total + n;
    return p;
}

/* Sample i's latent: LAT float16s, distinct per sample (their bits). */
static void latent_of(int i, uint16_t *out)
{
    for (int j = 0; j < LAT; j++)
        out[j] = (uint16_t)(0x3c00 + i * 64 + j);
}

/* Sample i's mask: each pixel its own coordinates, x + 16 y (< 192). */
static void mask_of(int i, uint8_t *out)
{
    (void)i;
    for (int y = 0; y < SH; y++)
        for (int x = 0; x < SW; x++)
            out[y * SW + x] = (uint8_t)(x + 16 * y);
}

/* Sample i's boxes: three (x1 y1 x2 y2 class) rows, one of them often
 * outside the crop. */
static void boxes_of(int i, float *out)
{
    const float b[3][5] = {
        {1.5f + (float)(i % 4), 2, 9.25f, 7, (float)i},
        {0, 0, (float)SW, (float)SH, 100.f + (float)i},
        {14.5f, 0.5f, 15.75f, 1.5f, 200.f + (float)i},
    };
    memcpy(out, b, sizeof b);
}

/* N keys over two shards: png, cls, latent.npy, seg.png, boxes.npy.
 * odd_key's latent has another shape (-1: none); bad_mask_key's mask is
 * RGB. */
static char *make_shards(int odd_key, int bad_mask_key)
{
    dir = tu_mkdtemp();
    tu_tar w[2] = {{0}, {0}};
    for (int i = 0; i < N; i++) {
        tu_tar *t = &w[i < N / 2 ? 0 : 1];
        char name[64], cls[16];
        uint8_t px[SW * SH * 3], m[SW * SH];
        tu_fill(px, SW, SH, 3, (uint32_t)i);
        size_t len;
        uint8_t *png = tu_png_mem(px, SW, SH, 3, &len);
        snprintf(name, sizeof name, "k%03d.png", i);
        tu_tar_file(t, name, png, len);
        free(png);
        snprintf(cls, sizeof cls, "%d", i % 4);
        snprintf(name, sizeof name, "k%03d.cls", i);
        tu_tar_file(t, name, cls, strlen(cls));
        uint16_t lat[LAT];
        latent_of(i, lat);
        uint8_t *a = npy("<f2", i == odd_key ? "(4, 6)" : "(2, 3, 4)", lat, sizeof lat, &len);
        snprintf(name, sizeof name, "k%03d.latent.npy", i);
        tu_tar_file(t, name, a, len);
        free(a);
        mask_of(i, m);
        png = i == bad_mask_key ? tu_png_mem(px, SW, SH, 3, &len) : tu_png_mem(m, SW, SH, 1, &len);
        snprintf(name, sizeof name, "k%03d.seg.png", i);
        tu_tar_file(t, name, png, len);
        free(png);
        float bx[15];
        boxes_of(i, bx);
        a = npy("<f4", "(3, 5)", bx, sizeof bx, &len);
        snprintf(name, sizeof name, "k%03d.boxes.npy", i);
        tu_tar_file(t, name, a, len);
        free(a);
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

/* The same samples as files beside a list (fields' order: png, cls,
 * latent.npy, seg.png, boxes.npy, tab-separated); missing_key's .npy is
 * not written (-1: none). Returns the list's path. */
static char *make_list(int missing_key)
{
    static char list[4096];
    char path[4096];
    snprintf(path, sizeof path, "%s/files", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    for (int i = 0; i < N; i++) {
        uint8_t px[SW * SH * 3], m[SW * SH];
        size_t n;
        tu_fill(px, SW, SH, 3, (uint32_t)i);
        uint8_t *png = tu_png_mem(px, SW, SH, 3, &n);
        snprintf(path, sizeof path, "%s/files/k%03d.png", dir, i);
        tu_write_file(path, png, n);
        free(png);
        uint16_t lat[LAT];
        latent_of(i, lat);
        uint8_t *a = npy("<f2", "(2, 3, 4)", lat, sizeof lat, &n);
        snprintf(path, sizeof path, "%s/files/k%03d.latent.npy", dir, i);
        if (i != missing_key)
            tu_write_file(path, a, n);
        free(a);
        mask_of(i, m);
        png = tu_png_mem(m, SW, SH, 1, &n);
        snprintf(path, sizeof path, "%s/files/k%03d seg.png", dir, i); /* a space: tabs part */
        tu_write_file(path, png, n);
        free(png);
        float bx[15];
        boxes_of(i, bx);
        a = npy("<f4", "(3, 5)", bx, sizeof bx, &n);
        snprintf(path, sizeof path, "%s/files/k%03d.boxes.npy", dir, i);
        tu_write_file(path, a, n);
        free(a);
        if (len + 256 > cap)
            text = realloc(text, cap *= 2);
        len += (size_t)snprintf(text + len, cap - len,
                                MASKS ? "files/k%03d.png\t%d\tfiles/k%03d.latent.npy\t files/k%03d "
                                        "seg.png\tfiles/k%03d.boxes.npy\n"
                                      : "files/k%03d.png\t%d\tfiles/k%03d.latent.npy\t"
                                        "files/k%03d.boxes.npy\n",
                                i, i % 4, i, i, i);
    }
    snprintf(list, sizeof list, "%s/list.txt", dir);
    tu_write_file(list, text, len);
    free(text);
    return list;
}

static gf_settings settings_of(const char *data, int threads)
{
    gf_settings s;
    tu_exact_settings(&s, data, OW, OH);
    s.fields = FIELDS;
    s.transform = GF_TRANSFORM_TRAIN; /* random crops and flips */
    s.shuffle = 1;
    s.seed = 7;
    s.threads = threads;
    s.batch_size = 4;
    return s;
}

/* The key's number: "s-0.tar:k007.png" in shards, "files/k007.png" in a
 * list. */
static int key_of(gf_loader *l, int64_t index)
{
    const char *path = gf_sample_path(l, (uint64_t)index);
    const char *k = strstr(path, ":k") ? strstr(path, ":k") + 1 : strrchr(path, '/') + 1;
    ck_assert_msg(k[0] == 'k', "%s", path);
    return atoi(k + 1);
}

/* The crop the loader's decode planned for sample `index` of `epoch`. */
static gf__crop crop_of(const gf_settings *s, uint64_t epoch, int64_t index)
{
    gf_settings r = *s;
    gf__resolve_settings(&r);
    gf__transform t;
    gf__transform_from_settings(&t, &r);
    gf__crop c;
    gf__crop_plan(&t, SW, SH, gf__sample_key(s->seed, epoch, (uint64_t)index), &c);
    return c;
}

/* An array's or mask's tensor where the test can read it: on CUDA a host
 * copy (freed by the caller), else its own memory. */
static const uint8_t *host_tensor(const gf_batch *b, const gf_field *f, uint8_t **copy)
{
    *copy = NULL;
    if (f->device != GF_DEVICE_CUDA)
        return f->data;
    size_t bytes = gf_dtype_size(f->dtype);
    for (int d = 0; d < f->ndim; d++)
        bytes *= (size_t)f->shape[d];
    *copy = malloc(bytes ? bytes : 1);
#if GF_HAVE_CUDA
    ck_assert_int_eq(gf_batch_wait(b, NULL), 0);
    ck_assert_int_eq(cudaMemcpy(*copy, f->data, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
#else
    (void)b;
    ck_abort_msg("a CUDA field in a build without CUDA");
#endif
    return *copy;
}

/* Batch b checked field by field against its samples; h takes its bytes. */
static uint64_t check_batch(gf_loader *l, const gf_settings *s, const gf_batch *b, uint64_t h)
{
    ck_assert_int_eq(b->n_fields, MASKS ? 5 : 4);
    const gf_field *lat = &b->fields[2], *mask = MASKS ? &b->fields[3] : NULL,
                   *box = &b->fields[b->n_fields - 1];
    ck_assert_int_eq(lat->device, b->device);
    ck_assert_int_eq(box->device, GF_DEVICE_CPU);
    uint8_t *lat_copy, *mask_copy = NULL;
    const uint8_t *lat_data = host_tensor(b, lat, &lat_copy);
    const uint8_t *mask_data = mask ? host_tensor(b, mask, &mask_copy) : NULL;
    ck_assert_int_eq(lat->kind, GF_FIELD_ARRAY);
    ck_assert_int_eq(lat->dtype, GF_DTYPE_FLOAT16);
    ck_assert_int_eq(lat->ndim, 4);
    ck_assert(lat->shape[0] == b->count && lat->shape[1] == 2 && lat->shape[2] == 3 &&
              lat->shape[3] == 4);
    ck_assert(!mask || (mask->kind == GF_FIELD_MASK && mask->dtype == GF_DTYPE_UINT8 &&
                        mask->device == b->device && mask->ndim == 3 &&
                        mask->shape[0] == b->count && mask->shape[1] == OH &&
                        mask->shape[2] == OW));
    ck_assert_int_eq(box->kind, GF_FIELD_BOXES);
    ck_assert(box->dtype == GF_DTYPE_FLOAT32 && box->ndim == 2 && box->shape[1] == 5);
    for (int i = 0; i < b->count; i++) {
        int k = key_of(l, b->indices[i]);
        ck_assert_int_eq(b->labels[i], k % 4);
        uint16_t want[LAT];
        latent_of(k, want);
        ck_assert_msg(memcmp(lat_data + (size_t)i * sizeof want, want, sizeof want) == 0,
                      "sample %d: latent", k);
        /* The mask: the image's crop, nearest neighbour by PIL's rule (a
         * running sum from the first pixel's centre, truncated). */
        gf__crop c = crop_of(s, b->epoch, b->indices[i]);
        const uint8_t *m = mask ? mask_data + (size_t)i * OW * OH : NULL;
        int xs[OW], ys[OH];
        double o = c.x + c.w / OW * 0.5;
        for (int x = 0; x < OW; x++, o += c.w / OW)
            xs[x] = (int)o;
        o = c.y + c.h / OH * 0.5;
        for (int y = 0; y < OH; y++, o += c.h / OH)
            ys[y] = (int)o;
        for (int y = 0; mask && y < OH; y++)
            for (int x = 0; x < OW; x++) {
                int sx = xs[c.flip ? OW - 1 - x : x], sy = ys[y];
                ck_assert_msg(m[y * OW + x] == sx + 16 * sy,
                              "sample %d (%d, %d): mask %d, want %d (crop %g %g %g %g%s)", k, x,
                              y, m[y * OW + x], sx + 16 * sy, c.x, c.y, c.w, c.h,
                              c.flip ? " flipped" : "");
            }
        /* The boxes: as boxes.c moves them by the same crop. */
        float in[15], want_boxes[15];
        boxes_of(k, in);
        double d[15];
        for (int j = 0; j < 15; j++)
            d[j] = in[j];
        char why[128];
        long kept = gf__boxes_apply(&c, OW, OH, d, 3, 5, want_boxes, why, sizeof why);
        ck_assert_int_ge(kept, 1); /* the whole image's box always stays */
        ck_assert_uint_eq(box->lengths[i], (size_t)kept * 5 * sizeof(float));
        ck_assert(memcmp(box->data + box->offsets[i], want_boxes, box->lengths[i]) == 0);
        h = gf__fnv1a64(h, box->data + box->offsets[i], box->lengths[i]);
    }
    h = gf__fnv1a64(h, lat_data, (size_t)b->count * LAT * 2);
    if (mask)
        h = gf__fnv1a64(h, mask_data, (size_t)b->count * OW * OH);
    free(lat_copy);
    free(mask_copy);
    if (b->pixels)
        h = gf__fnv1a64(h, b->pixels, (size_t)b->count * OW * OH * 3);
    return gf__fnv1a64(h, b->labels, (size_t)b->count * sizeof *b->labels);
}

static uint64_t read_checked(gf_loader *l, const gf_settings *s, int batches)
{
    uint64_t h = GF__FNV1A64_BASIS;
    for (int n = 0; n < batches; n++) {
        gf_batch *b = NULL;
        int rc = gf_next(l, &b);
        if (rc == GF_EOF)
            break;
        ck_assert_msg(rc == 0, "%s", gf_last_error(l));
        h = check_batch(l, s, b, h);
        gf_release(l, b);
    }
    return h;
}

START_TEST(arrays_masks_and_boxes_come_with_their_images_whatever_the_threads)
{
    const char *data = make_shards(-1, -1);
    uint64_t first = 0;
    for (int threads = 1; threads <= 4; threads *= 2) {
        gf_settings s = settings_of(data, threads);
        s.epochs = 2;
        gf_loader *l = NULL;
        ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
        uint64_t h = read_checked(l, &s, 100);
        if (threads == 1)
            first = h;
        ck_assert_msg(h == first, "%d threads: other bytes", threads);
        gf_close(&l);
    }
    /* On CUDA (emulated in CI) the fields are the delivered batch's own
     * copies: held batches keep theirs while the ring moves on. */
    gf_settings s = settings_of(data, 2);
    s.device = GF_DEVICE_CUDA;
    s.prefetch_depth = 2;
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    if (rc == GF_ENODEV) {
        gf_close(&l);
        return;
    }
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    gf_batch *held[3];
    for (int n = 0; n < 3; n++)
        ck_assert_msg(gf_next(l, &held[n]) == 0, "%s", gf_last_error(l));
    for (int n = 0; n < 3; n++) {
        check_batch(l, &s, held[n], 0);
        gf_release(l, held[n]);
    }
    read_checked(l, &s, 100);
    gf_close(&l);
}
END_TEST

START_TEST(a_resumed_run_carries_the_same_fields)
{
    const char *data = make_shards(-1, -1);
    gf_settings s = settings_of(data, 2);
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    read_checked(l, &s, 2);
    uint64_t rest = read_checked(l, &s, 100);
    gf_close(&l);
    s.threads = 3;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    ck_assert_int_eq(gf_seek(l, 0, 8), 0);
    ck_assert_uint_eq(read_checked(l, &s, 100), rest);
    gf_close(&l);
}
END_TEST

START_TEST(an_array_of_another_shape_and_a_bad_mask_are_bad_samples_by_name)
{
    const char *data = make_shards(5, 9);
    gf_settings s = settings_of(data, 2);
    s.on_error = GF_ON_ERROR_SKIP;
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    read_checked(l, &s, 100); /* every delivered field its own sample's */
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.errors, MASKS ? 2 : 1);
    int seen = MASKS ? 0 : 2;
    for (int e = 0; e < st.n_recent; e++) {
        const gf_sample_error *r = &st.recent[e];
        if (strstr(r->path, "k005")) {
            seen |= 1;
            ck_assert_msg(strstr(r->reason, "field 'latent.npy': float16 (4, 6), the field's is "
                                            "float16 (2, 3, 4)"),
                          "%s", r->reason);
        } else if (strstr(r->path, "k009")) {
            seen |= 2;
            ck_assert_msg(strstr(r->reason, "field 'seg.png': mask: RGB"), "%s", r->reason);
        }
    }
    ck_assert_int_eq(seen, 3);
    gf_close(&l);
}
END_TEST

/* No image field: a latent loader. Nothing is decoded; the batch has no
 * pixels, and its latents and labels are each sample's, in sampler order
 * (the same seed's as with the image). */
START_TEST(latents_alone_need_no_image)
{
    const char *data = make_shards(-1, -1);
    for (int device = 0; device < 2; device++) {
        gf_settings s = settings_of(data, 2);
        s.fields = "latent.npy,cls";
        s.device = device ? GF_DEVICE_CUDA : GF_DEVICE_CPU;
        gf_loader *l = NULL;
        int rc = gf_open(&l, &s);
        if (rc == GF_ENODEV) { /* no device, emulated or real */
            gf_close(&l);
            continue;
        }
        ck_assert_msg(rc == 0, "%s", gf_last_error(l));
        gf_batch *b;
        int seen = 0;
        int64_t order[N];
        while ((rc = gf_next(l, &b)) == 0) {
            ck_assert_int_eq(b->n_fields, 2);
            ck_assert(b->height == 0 && b->width == 0 && b->channels == 0);
            const gf_field *lat = &b->fields[0];
            ck_assert(lat->kind == GF_FIELD_ARRAY && lat->ndim == 4 && lat->shape[0] == b->count);
            uint8_t *copy;
            const uint8_t *lat_data = host_tensor(b, lat, &copy);
            for (int i = 0; i < b->count; i++) {
                int k = key_of(l, b->indices[i]);
                ck_assert_int_eq(b->labels[i], k % 4);
                uint16_t want[LAT];
                latent_of(k, want);
                ck_assert(memcmp(lat_data + (size_t)i * sizeof want, want, sizeof want) == 0);
                order[seen + i] = b->indices[i];
            }
            free(copy);
            seen += b->count;
            gf_release(l, b);
        }
        ck_assert_int_eq(rc, GF_EOF);
        ck_assert_int_eq(seen, N);
        gf_close(&l);
        /* the same order as the loader with images */
        s.fields = "png,cls";
        ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
        seen = 0;
        while (gf_next(l, &b) == 0) {
            for (int i = 0; i < b->count; i++)
                ck_assert_int_eq(b->indices[i], order[seen + i]);
            seen += b->count;
            gf_release(l, b);
        }
        ck_assert_int_eq(seen, N);
        gf_close(&l);
    }
}
END_TEST

/* Latents alone, one of another shape: every latent delivered its own
 * sample's, the odd one reported by its member's name, and the batches
 * the same whatever the threads (a worker reads the members of the jobs
 * it takes at once, each array's data straight into its tensor). */
START_TEST(latents_alone_with_a_bad_one_are_the_same_whatever_the_threads)
{
    const char *data = make_shards(7, -1);
    uint64_t first = 0;
    for (int threads = 1; threads <= 4; threads *= 2) {
        gf_settings s = settings_of(data, threads);
        s.fields = "latent.npy,cls";
        s.on_error = GF_ON_ERROR_SKIP;
        s.epochs = 2;
        gf_loader *l = NULL;
        ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
        gf_batch *b;
        int rc, seen = 0;
        uint64_t h = 1469598103934665603ull;
        while ((rc = gf_next(l, &b)) == 0) {
            const gf_field *lat = &b->fields[0];
            for (int i = 0; i < b->count; i++) {
                int k = key_of(l, b->indices[i]);
                ck_assert_int_ne(k, 7);
                uint16_t want[LAT];
                latent_of(k, want);
                ck_assert(memcmp((const uint8_t *)lat->data + (size_t)i * sizeof want, want,
                                 sizeof want) == 0);
                h = (h ^ (uint64_t)b->indices[i]) * 1099511628211ull;
            }
            seen += b->count;
            gf_release(l, b);
        }
        ck_assert_int_eq(rc, GF_EOF);
        ck_assert_int_eq(seen, 2 * (N - 1));
        gf_stats st;
        ck_assert_int_eq(gf_get_stats(l, &st), 0);
        ck_assert_uint_eq(st.errors, 2);
        ck_assert_msg(strstr(st.recent[0].path, "k007.latent.npy") &&
                          strstr(st.recent[0].reason, "float16 (4, 6), the field's is float16 "
                                                      "(2, 3, 4)"),
                      "%s: %s", st.recent[0].path, st.recent[0].reason);
        gf_close(&l);
        if (threads == 1)
            first = h;
        ck_assert_uint_eq(h, first);
    }
}
END_TEST

/* s-1.tar cut inside k016's latent under on_shard_error SKIP: the keys
 * before the damage are delivered with every field their own, k016 and
 * those after it in that shard are lost whole (no sample without a
 * declared member), the damage reported once, with or without images. */
START_TEST(a_shard_cut_inside_a_field_member_loses_its_key_whole)
{
    const char *data = make_shards(-1, -1);
    char shard[4200];
    snprintf(shard, sizeof shard, "%s/s-1.tar", dir);
    size_t n;
    uint8_t *bytes = tu_read_file(shard, &n);
    const uint8_t *h = memmem(bytes, n, "k016.latent.npy", 15);
    ck_assert_ptr_nonnull(h);
    tu_write_file(shard, bytes, (size_t)(h - bytes) + 512 + 60);
    free(bytes);
    for (int alone = 0; alone < 2; alone++) {
        gf_settings s = settings_of(data, 2);
        s.on_shard_error = GF_SHARD_SKIP;
        if (alone)
            s.fields = "latent.npy,cls";
        gf_loader *l = NULL;
        ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
        int seen = 0;
        gf_batch *b;
        while (gf_next(l, &b) == 0) {
            if (!alone)
                check_batch(l, &s, b, 0); /* every field its own sample's */
            for (int i = 0; i < b->count; i++) {
                int k = key_of(l, b->indices[i]);
                ck_assert_int_lt(k, 16);
                uint16_t want[LAT];
                latent_of(k, want);
                const gf_field *lat = &b->fields[alone ? 0 : 2];
                ck_assert(memcmp((const uint8_t *)lat->data + (size_t)i * sizeof want, want,
                                 sizeof want) == 0);
            }
            seen += b->count;
            gf_release(l, b);
        }
        ck_assert_int_eq(seen, 16); /* k000..k015 */
        gf_stats st;
        ck_assert_int_eq(gf_get_stats(l, &st), 0);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.shards_damaged, 1);
        gf_sample_error d;
        ck_assert_int_eq(gf_damaged_shards(l, &d, 1), 1);
        ck_assert_msg(strstr(d.path, "s-1.tar") && d.code == GF_ETRUNC, "%s: %s", d.path, d.reason);
        gf_close(&l);
    }
}
END_TEST

/* A list of files a field each: the same samples as the shards give the
 * same batches, byte for byte; a missing file is its sample's error,
 * naming the field and the file. */
START_TEST(a_list_names_a_file_a_field)
{
    const char *shards = make_shards(-1, -1);
    gf_settings s = settings_of(shards, 2);
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    uint64_t want = read_checked(l, &s, 100);
    gf_close(&l);
    s.data = make_list(-1);
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    ck_assert_uint_eq(read_checked(l, &s, 100), want);
    gf_close(&l);

    teardown();
    make_shards(-1, -1);
    s.data = make_list(6);
    s.on_error = GF_ON_ERROR_SKIP;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    read_checked(l, &s, 100);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.errors, 1);
    ck_assert_msg(strstr(st.recent[0].reason, "field 'latent.npy': files/k006.latent.npy:"),
                  "%s", st.recent[0].reason);
    gf_close(&l);

    /* Without an image the sample's own file is its first field's: read
     * with the loader's cap, then held to the field's. */
    char big[4096], small[4096];
    snprintf(big, sizeof big, "%s/files/big.txt", dir);
    snprintf(small, sizeof small, "%s/files/small.txt", dir);
    char *text = malloc(GF_FIELD_BYTES_MAX + 100);
    memset(text, 'a', GF_FIELD_BYTES_MAX + 100);
    tu_write_file(big, text, GF_FIELD_BYTES_MAX + 100);
    tu_write_file(small, text, 10);
    free(text);
    char path[4096];
    snprintf(path, sizeof path, "%s/texts.txt", dir);
    const char *lines = "files/big.txt\t1\nfiles/small.txt\t2\n";
    tu_write_file(path, lines, strlen(lines));
    s.data = path;
    s.fields = "txt,cls";
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    gf_batch *b;
    int delivered = 0;
    while (gf_next(l, &b) == 0) {
        for (int i = 0; i < b->count; i++) {
            ck_assert_int_eq(b->labels[i], 2);
            ck_assert_uint_eq(b->fields[0].lengths[i], 10);
        }
        delivered += b->count;
        gf_release(l, b);
    }
    ck_assert_int_eq(delivered, 1);
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_msg(st.n_recent == 1 && strstr(st.recent[0].reason, "field 'txt'") &&
                      strstr(st.recent[0].reason, "over the field's 65536"),
                  "%s", st.recent[0].reason);
    gf_close(&l);
    s.fields = FIELDS;

    /* a line short of a field */
    snprintf(path, sizeof path, "%s/short.txt", dir);
    const char *line = "files/k000.png\t0\tfiles/k000.latent.npy\n";
    tu_write_file(path, line, strlen(line));
    s.data = path;
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    char expected[64];
    snprintf(expected, sizeof expected, "short.txt:1: expected %d tab-separated fields",
             MASKS ? 5 : 4);
    ck_assert_msg(strstr(gf_last_error(l), expected), "%s", gf_last_error(l));
    gf_close(&l);
}
END_TEST

/* Without libspng a mask is refused at open, by name, rather than every
 * sample failing (stb_image would give a palette's colours). */
START_TEST(a_mask_needs_libspng)
{
    const char *data = make_shards(-1, -1);
    gf_settings s = settings_of(data, 2);
    s.fields = "png,cls,seg.png:mask";
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    if (MASKS) {
        ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    } else {
        ck_assert_int_eq(rc, GF_EINVAL);
        ck_assert_msg(strstr(gf_last_error(l), "field 'seg.png': a mask needs libspng"), "%s",
                      gf_last_error(l));
    }
    gf_close(&l);
}
END_TEST

START_TEST(an_oversized_or_hostile_member_is_refused)
{
    dir = tu_mkdtemp();
    tu_tar w = {0};
    uint8_t px[SW * SH * 3];
    tu_fill(px, SW, SH, 3, 1);
    size_t png_len, len;
    uint8_t *png = tu_png_mem(px, SW, SH, 3, &png_len);
    float zero[15] = {0};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%d.png", i);
        tu_tar_file(&w, name, png, png_len);
        snprintf(name, sizeof name, "k%d.cls", i);
        tu_tar_file(&w, name, "1", 1);
        /* k1's claims 10^12 elements; k2's is fine */
        uint8_t *a = npy("<f4", i == 1 ? "(1000000, 1000000)" : "(3, 5)", zero, sizeof zero, &len);
        snprintf(name, sizeof name, "k%d.latent.npy", i);
        tu_tar_file(&w, name, a, len);
        free(a);
    }
    tu_tar_end(&w);
    char path[4096];
    snprintf(path, sizeof path, "%s/h.tar", dir);
    tu_write_file(path, w.p, w.len);
    free(w.p);
    free(png);
    gf_settings s;
    tu_exact_settings(&s, path, OW, OH);
    s.fields = "png,cls,latent.npy";
    s.on_error = GF_ON_ERROR_SKIP;
    s.batch_size = 1;
    gf_loader *l = NULL;
    ck_assert_msg(gf_open(&l, &s) == 0, "%s", gf_last_error(l));
    gf_batch *b;
    int delivered = 0;
    while (gf_next(l, &b) == 0) {
        delivered += b->count;
        ck_assert_int_eq(b->fields[2].shape[1], 3);
        gf_release(l, b);
    }
    ck_assert_int_eq(delivered, 2);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_msg(st.n_recent == 1 && strstr(st.recent[0].path, "k1") &&
                      strstr(st.recent[0].reason, "field 'latent.npy'"),
                  "%s", st.n_recent ? st.recent[0].reason : "");
    gf_close(&l);
}
END_TEST

static Suite *kinds_suite(void)
{
    Suite *s = suite_create("fields_kinds");
    TCase *tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, arrays_masks_and_boxes_come_with_their_images_whatever_the_threads);
    tcase_add_test(tc, a_resumed_run_carries_the_same_fields);
    tcase_add_test(tc, an_array_of_another_shape_and_a_bad_mask_are_bad_samples_by_name);
    tcase_add_test(tc, an_oversized_or_hostile_member_is_refused);
    tcase_add_test(tc, latents_alone_need_no_image);
    tcase_add_test(tc, latents_alone_with_a_bad_one_are_the_same_whatever_the_threads);
    tcase_add_test(tc, a_shard_cut_inside_a_field_member_loses_its_key_whole);
    tcase_add_test(tc, a_list_names_a_file_a_field);
    tcase_add_test(tc, a_mask_needs_libspng);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kinds_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
