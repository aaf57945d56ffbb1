/*
 * gpufeed-darknet's data set side (main thread only): the darknet list
 * files made from a gpufeed ImageFolder (labels, train and valid lists, a
 * .data file), the [net] overrides written into a copy of the cfg, and the
 * held-out set decoded once through darknet's own validation path, so that
 * both trained networks are scored on the very same floats.
 */
#include "dn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dn_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpufeed-darknet: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        dn_die("%s: %s", path, strerror(errno));
    return f;
}

/* Darknet labels a path by substring (fill_truth: strstr of every label):
 * "/class_03/" is each folder's name between slashes, so class_1 never
 * matches class_10. Every path must match exactly its own label. */
static void check_labels(const dn_split *sp, char **labels, int classes)
{
    for (int i = 0; i < sp->n; i++) {
        int hits = 0, hit = -1;
        for (int k = 0; k < classes; k++)
            if (strstr(sp->paths[i], labels[k]))
                hits++, hit = k;
        if (hits != 1 || hit != sp->labels[i])
            dn_die("%s: darknet would label it %s (%d labels match), gpufeed says class %d",
                   sp->paths[i], hits == 1 ? labels[hit] : "-", hits, sp->labels[i]);
    }
}

static void load_split(dn_split *sp, const char *dir, char **labels, int *classes)
{
    gf_settings s;
    gf_default_settings(&s);
    s.data = dir;
    gf_index *ix;
    if (gf_index_open(&ix, &s) < 0)
        dn_die("%s: %s", dir, gf_index_last_error(ix));
    char root[4096];
    if (!realpath(dir, root))
        dn_die("%s: %s", dir, strerror(errno));
    sp->n = (int)gf_index_count(ix);
    sp->paths = calloc((size_t)sp->n, sizeof *sp->paths);
    sp->labels = calloc((size_t)sp->n, sizeof *sp->labels);
    int k = gf_index_classes(ix);
    if (*classes == 0) {
        if (k > DN_MAX_CLASSES)
            dn_die("%s: %d classes, at most %d", dir, k, DN_MAX_CLASSES);
        *classes = k;
    } else if (k != *classes) {
        dn_die("%s: %d classes, the training set has %d", dir, k, *classes);
    }
    for (int i = 0; i < sp->n; i++) {
        const char *rel = gf_index_path(ix, (uint64_t)i);
        int label = gf_index_label(ix, (uint64_t)i);
        const char *slash = strchr(rel, '/');
        if (!slash)
            dn_die("%s: %s is not in a class folder", dir, rel);
        char name[300];
        snprintf(name, sizeof name, "/%.*s/", (int)(slash - rel), rel);
        if (!labels[label])
            labels[label] = strdup(name);
        else if (strcmp(labels[label], name) != 0)
            dn_die("%s: class %d is %s here and %s in the training set", dir, label, name,
                   labels[label]);
        size_t len = strlen(root) + strlen(rel) + 2;
        sp->paths[i] = malloc(len);
        snprintf(sp->paths[i], len, "%s/%s", root, rel);
        sp->labels[i] = label;
    }
    gf_index_close(&ix);
}

static void write_list(const char *dir, const char *name, const dn_split *sp, char *path,
                       size_t len)
{
    FILE *f = open_out(dir, name, path, len);
    for (int i = 0; i < sp->n; i++)
        fprintf(f, "%s\n", sp->paths[i]);
    fclose(f);
}

void dn_make_lists(dn_sets *ds, const char *train_dir, const char *val_dir, const char *work)
{
    char *names[DN_MAX_CLASSES] = {0};
    ds->classes = 0;
    load_split(&ds->train, train_dir, names, &ds->classes);
    load_split(&ds->val, val_dir, names, &ds->classes);

    char labels_path[4200], train_path[4200], valid_path[4200], data_path[4200];
    FILE *f = open_out(work, "labels.txt", labels_path, sizeof labels_path);
    for (int k = 0; k < ds->classes; k++) {
        if (!names[k])
            dn_die("class %d has no training image", k);
        fprintf(f, "%s\n", names[k]);
        free(names[k]);
    }
    fclose(f);
    write_list(work, "train.list", &ds->train, train_path, sizeof train_path);
    write_list(work, "valid.list", &ds->val, valid_path, sizeof valid_path);
    /* For `darknet classifier train WORK/set.data CFG` by hand, on the same files. */
    f = open_out(work, "set.data", data_path, sizeof data_path);
    fprintf(f, "classes=%d\ntrain=%s\nvalid=%s\nlabels=%s\nbackup=%s\ntop=1\n", ds->classes,
            train_path, valid_path, labels_path, work);
    fclose(f);

    /* Read back as darknet's classifier reads them. */
    ds->labels = get_labels(labels_path);
    list *plist = get_paths(train_path);
    ds->dn_paths = (char **)list_to_array(plist);
    if (plist->size != ds->train.n)
        dn_die("%s: darknet reads %d paths, %d written", train_path, plist->size, ds->train.n);
    free_list(plist);
    check_labels(&ds->train, ds->labels, ds->classes);
    check_labels(&ds->val, ds->labels, ds->classes);
}

static void free_split(dn_split *sp)
{
    for (int i = 0; i < sp->n; i++)
        free(sp->paths[i]);
    free(sp->paths);
    free(sp->labels);
}

void dn_free_sets(dn_sets *ds)
{
    free_ptrs((void **)ds->labels, ds->classes);
    free_ptrs((void **)ds->dn_paths, ds->train.n);
    free_split(&ds->train);
    free_split(&ds->val);
}

void dn_write_cfg(const char *in, const char *out, const dn_override *ov, int n)
{
    FILE *src = fopen(in, "r");
    if (!src)
        dn_die("%s: %s", in, strerror(errno));
    FILE *dst = fopen(out, "w");
    if (!dst)
        dn_die("%s: %s", out, strerror(errno));
    char line[1024];
    int in_net = 0;
    while (fgets(line, sizeof line, src)) {
        const char *p = line + strspn(line, " \t");
        if (*p == '[') {
            in_net = strncmp(p, "[net]", 5) == 0 || strncmp(p, "[network]", 9) == 0;
            fputs(line, dst);
            for (int i = 0; in_net && i < n; i++)
                if (ov[i].value > 0)
                    fprintf(dst, "%s=%d\n", ov[i].key, ov[i].value);
            continue;
        }
        int drop = 0;
        for (int i = 0; in_net && i < n; i++) {
            size_t kl = strlen(ov[i].key);
            if (ov[i].value > 0 && strncmp(p, ov[i].key, kl) == 0 &&
                strchr(" \t=", p[kl]))
                drop = 1;
        }
        if (!drop)
            fputs(line, dst);
    }
    fclose(src);
    if (fclose(dst) != 0)
        dn_die("%s: %s", out, strerror(errno));
}

/* validate_classifier_single's preprocessing: shorter side to the net's
 * width, centre crop. */
float *dn_load_val(const dn_split *val, int w, int h)
{
    size_t px = (size_t)w * h * 3;
    float *x = malloc(px * (size_t)val->n * sizeof *x);
    if (!x)
        dn_die("out of memory for %d held-out images", val->n);
    for (int i = 0; i < val->n; i++) {
        image im = load_image_color(val->paths[i], 0, 0);
        image r = resize_min(im, w);
        image c = crop_image(r, (r.w - w) / 2, (r.h - h) / 2, w, h);
        memcpy(x + px * (size_t)i, c.data, px * sizeof *x);
        free_image(c);
        free_image(r);
        free_image(im);
    }
    return x;
}

/* The same images through gpufeed's eval transform (shorter side to the
 * net's width, centre crop: crop_fraction 1), its resampler's filter
 * instead of darknet's bilinear: a second path, to see which way each
 * network leans. */
float *dn_load_val_gpufeed(const char *dir, const dn_split *val, int w, int h)
{
    size_t px = (size_t)w * h * 3;
    float *x = malloc(px * (size_t)val->n * sizeof *x);
    gf_settings s;
    gf_default_settings(&s);
    s.data = dir;
    s.height = h;
    s.width = w;
    s.transform = GF_TRANSFORM_EVAL;
    s.crop_fraction = 1;
    s.shuffle = 0;
    s.device = GF_DEVICE_CPU;
    s.dtype = GF_DTYPE_FLOAT32;
    s.layout = GF_LAYOUT_NCHW;
    for (int c = 0; c < 3; c++)
        s.std[c] = 255;
    gf_loader *l;
    if (!x || gf_open(&l, &s) < 0)
        dn_die("%s: %s", dir, x ? gf_last_error(l) : "out of memory");
    gf_batch *b;
    int rc, seen = 0;
    while ((rc = gf_next(l, &b)) == 0) {
        for (int i = 0; i < b->count; i++)
            memcpy(x + px * (size_t)b->indices[i], (float *)b->data + px * i, px * sizeof *x);
        seen += b->count;
        gf_release(l, b);
    }
    if (rc != GF_EOF || seen != val->n)
        dn_die("%s: %d of %d held-out images: %s", dir, seen, val->n, gf_last_error(l));
    gf_close(&l);
    return x;
}

double dn_top1(network *net, const float *x, const dn_split *val, int classes)
{
    size_t px = (size_t)net->w * net->h * net->c;
    int b = net->batch, right = 0;
    float *in = malloc(px * (size_t)b * sizeof *in);
    for (int i = 0; i < val->n; i += b) {
        for (int j = 0; j < b; j++) /* the last batch padded with its first image */
            memcpy(in + px * j, x + px * (size_t)(i + j < val->n ? i + j : i), px * sizeof *in);
        float *p = network_predict(net, in);
        for (int j = 0; j < b && i + j < val->n; j++) {
            int best = 0;
            for (int k = 1; k < classes; k++)
                if (p[j * classes + k] > p[j * classes + best])
                    best = k;
            right += best == val->labels[i + j];
        }
    }
    free(in);
    return val->n ? (double)right / val->n : 0;
}
