/*
 * gpufeed-darknet: a darknet classifier trained through libdarknet's
 * public API (parse_network_cfg, train_network, network_predict), fed by
 * darknet's own loader (load_data with get_base_args, as `darknet
 * classifier train` sets it up: 32 threads, a batch prefetched while one
 * trains) or by gpufeed (float32 NCHW / 255 into its ring; data.X's rows
 * point into the delivered slot: zero copies before darknet's own
 * get_next_batch memcpy into net->input, which both loaders pay). Same cfg,
 * images, number of images and weight seed for each; the held-out top-1 of
 * each network through one path (dn_data.c). Main thread; darknet's
 * loader threads and gpufeed's run beside it.
 *
 *   gpufeed-darknet --train DIR --val DIR [--cfg small.cfg] [--loader both]
 */
#include "dn.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { LOADER_DARKNET, LOADER_GPUFEED, LOADERS };
static const char *loader_name[LOADERS] = {"darknet", "gpufeed"};

typedef struct options {
    const char *train, *val, *cfg, *work;
    int loaders[LOADERS], size, batch, images, interval, dn_threads, gf_threads, alone;
    int json, check, rates_only;
    uint64_t seed;
} options;

typedef struct feed {
    int kind;
    load_args args; /* darknet */
    data buffer;
    pthread_t thread;
    gf_loader *gl; /* gpufeed */
    gf_batch *held;
    float **rows;
    matrix y;
} feed;

#define MAX_INTERVALS 1000

typedef struct result {
    double seconds, wait_s, cpu_s, loader_alone_ips, top1, top1_gf;
    uint64_t images;
    int n_loss;
    double loss[MAX_INTERVALS];
} result;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void feed_open(feed *f, int kind, network *net, const dn_sets *ds, const options *o)
{
    memset(f, 0, sizeof *f);
    f->kind = kind;
    int batch = net->batch * net->subdivisions;
    if (kind == LOADER_DARKNET) {
        f->args = get_base_args(net);
        f->args.threads = o->dn_threads;
        f->args.paths = ds->dn_paths;
        f->args.n = batch;
        f->args.m = ds->train.n;
        f->args.labels = ds->labels;
        f->args.classes = ds->classes;
        f->args.type = CLASSIFICATION_DATA;
        f->args.d = &f->buffer;
        f->thread = load_data(f->args);
        return;
    }
    gf_settings s;
    gf_default_settings(&s);
    s.data = o->train;
    s.seed = o->seed;
    s.epochs = 0;
    s.batch_size = batch;
    s.height = net->h;
    s.width = net->w;
    s.threads = o->gf_threads;
    s.drop_last = 1; /* train_network wants whole batches */
    /* darknet scales the shorter side to [min_crop, max_crop] and cuts a
     * w x w square: on square images that is this area range, aspect 1. */
    double lo = (double)net->w / net->max_crop, hi = (double)net->w / net->min_crop;
    s.scale_min = (float)(lo * lo);
    s.scale_max = (float)fmin(1.0, hi * hi);
    s.ratio_min = s.ratio_max = net->aspect > 0 ? net->aspect : 1;
    s.device = GF_DEVICE_CPU;
    s.dtype = GF_DTYPE_FLOAT32;
    s.layout = GF_LAYOUT_NCHW;
    for (int c = 0; c < 3; c++)
        s.std[c] = 255;
    if (gf_open(&f->gl, &s) < 0)
        dn_die("gpufeed: %s", gf_last_error(f->gl));
    f->rows = calloc((size_t)batch, sizeof *f->rows);
    f->y = make_matrix(batch, ds->classes);
}

static void feed_next(feed *f, data *d)
{
    if (f->kind == LOADER_DARKNET) {
        pthread_join(f->thread, 0);
        *d = f->buffer;
        f->thread = load_data(f->args);
        return;
    }
    int rc = gf_next(f->gl, &f->held);
    if (rc < 0)
        dn_die("gpufeed: %s: %s", gf_err_name(rc), gf_last_error(f->gl));
    const gf_batch *b = f->held;
    size_t px = (size_t)b->channels * b->height * b->width;
    for (int i = 0; i < b->count; i++) {
        f->rows[i] = (float *)b->data + px * i; /* zero-copy: rows into the slot */
        memset(f->y.vals[i], 0, (size_t)f->y.cols * sizeof(float));
        f->y.vals[i][b->labels[i]] = 1;
    }
    memset(d, 0, sizeof *d);
    d->w = b->width;
    d->h = b->height;
    d->X = (matrix){.rows = b->count, .cols = (int)px, .vals = f->rows};
    d->y = f->y;
    d->y.rows = b->count;
    d->shallow = 1;
}

static void feed_done(feed *f, data *d)
{
    if (f->kind == LOADER_DARKNET)
        free_data(*d);
    else
        gf_release(f->gl, f->held);
}

static void feed_close(feed *f)
{
    if (f->kind == LOADER_DARKNET) {
        pthread_join(f->thread, 0);
        free_data(f->buffer);
        return;
    }
    gf_close(&f->gl);
    free(f->rows);
    free_matrix(f->y);
}

static network *make_net(const char *cfg, uint64_t seed, int classes)
{
    srand((unsigned)seed); /* the weights' seed: both loaders start alike */
    network *net = parse_network_cfg((char *)cfg);
    if (net->outputs != classes)
        dn_die("%s: the net has %d outputs, the data %d classes", cfg, net->outputs, classes);
    if (net->w != net->h)
        dn_die("%s: %dx%d: darknet's loader cuts squares (size = width)", cfg, net->w, net->h);
    return net;
}

static double loader_alone(int kind, network *net, const dn_sets *ds, const options *o)
{
    feed f;
    data d;
    double t = now();
    feed_open(&f, kind, net, ds, o);
    for (int i = 0; i < o->alone; i++) {
        feed_next(&f, &d);
        feed_done(&f, &d);
    }
    feed_close(&f);
    return (double)o->alone * net->batch * net->subdivisions / (now() - t);
}

static double compute_alone(const char *cfg, const dn_sets *ds, const options *o)
{
    network *net = make_net(cfg, o->seed, ds->classes);
    feed f;
    data d;
    feed_open(&f, LOADER_GPUFEED, net, ds, o);
    feed_next(&f, &d);
    train_network(net, d); /* warm */
    double t = now();
    for (int i = 0; i < o->alone; i++)
        train_network(net, d);
    double ips = (double)o->alone * d.X.rows / (now() - t);
    feed_done(&f, &d);
    feed_close(&f);
    free_network(net);
    return ips;
}

static void train(int kind, const char *cfg, const dn_sets *ds, const float *const val_x[2],
                  const options *o, result *r)
{
    network *net = make_net(cfg, o->seed, ds->classes);
    int per_batch = net->batch * net->subdivisions, batches = o->images / per_batch;
    int interval = o->interval > 0 ? o->interval : (batches >= 10 ? batches / 10 : 1);
    memset(r, 0, sizeof *r);
    if (o->alone > 0)
        r->loader_alone_ips = loader_alone(kind, net, ds, o);

    srand((unsigned)(o->seed ^ 0x5eed)); /* dropout and darknet's sampling */
    feed f;
    data d;
    double sum = 0, t0 = now(), cpu0 = cpu_seconds();
    feed_open(&f, kind, net, ds, o);
    for (int i = 1; i <= batches; i++) {
        double w = now();
        feed_next(&f, &d);
        r->wait_s += now() - w;
        sum += train_network(net, d);
        feed_done(&f, &d);
        if (i % interval == 0 && r->n_loss < MAX_INTERVALS) {
            r->loss[r->n_loss++] = sum / interval;
            if (!o->json)
                printf("%-8s batch %5d  images %8zu  loss %.4f  rate %g\n", loader_name[kind], i,
                       *net->seen, sum / interval, get_current_rate(net));
            sum = 0;
        }
    }
    feed_close(&f);
    r->seconds = now() - t0;
    r->cpu_s = cpu_seconds() - cpu0;
    r->images = *net->seen;
    r->top1 = dn_top1(net, val_x[0], &ds->val, ds->classes);
    r->top1_gf = dn_top1(net, val_x[1], &ds->val, ds->classes);
    free_network(net);
}

static void usage(FILE *to)
{
    fputs("usage: gpufeed-darknet --train DIR --val DIR [options]\n"
          "  --cfg FILE        darknet network cfg (default: bench/darknet/small.cfg)\n"
          "  --loader L        darknet, gpufeed or both (default both, in that order)\n"
          "  --images N        images each loader trains on (default 6400)\n"
          "  --size PX         override the cfg's width/height (min_crop = PX,\n"
          "                    max_crop = 1.5 PX)\n"
          "  --batch B         override the cfg's batch\n"
          "  --seed S          weights, sampling and augmentation seed (default 1)\n"
          "  --interval K      loss reported every K batches (default: 10 reports)\n"
          "  --darknet-threads T  darknet loader threads (default 32, as classifier.c)\n"
          "  --gpufeed-threads T  gpufeed decode threads (default 0: cores - 1)\n"
          "  --alone K         also time K batches of compute alone (one cached batch)\n"
          "                    and of each loader alone\n"
          "  --work DIR        keep the darknet list files there (default: a temp dir)\n"
          "  --json            one JSON object on stdout\n"
          "  --check           exit 1 unless each loss fell and both saw the same images\n"
          "  --rates-only      only the --alone rates (compute, each loader): no training,\n"
          "                    no scoring\n",
          to);
}

static void parse(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"train", 1, 0, 't'}, {"val", 1, 0, 'v'},   {"cfg", 1, 0, 'c'},
        {"loader", 1, 0, 'l'}, {"images", 1, 0, 'n'}, {"size", 1, 0, 's'},
        {"batch", 1, 0, 'b'}, {"seed", 1, 0, 'S'},   {"interval", 1, 0, 'i'},
        {"darknet-threads", 1, 0, 'D'}, {"gpufeed-threads", 1, 0, 'G'},
        {"alone", 1, 0, 'a'}, {"work", 1, 0, 'w'},   {"json", 0, 0, 'j'},
        {"check", 0, 0, 'k'}, {"rates-only", 0, 0, 'r'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (options){.cfg = DN_DEFAULT_CFG, .images = 6400, .dn_threads = 32, .seed = 1,
                   .loaders = {1, 1}};
    for (int c; (c = getopt_long(argc, argv, "h", longs, 0)) != -1;) {
        switch (c) {
        case 't': o->train = optarg; break;
        case 'v': o->val = optarg; break;
        case 'c': o->cfg = optarg; break;
        case 'l':
            o->loaders[LOADER_DARKNET] = !strcmp(optarg, "darknet") || !strcmp(optarg, "both");
            o->loaders[LOADER_GPUFEED] = !strcmp(optarg, "gpufeed") || !strcmp(optarg, "both");
            if (!o->loaders[0] && !o->loaders[1])
                dn_die("--loader %s: darknet, gpufeed or both", optarg);
            break;
        case 'n': o->images = atoi(optarg); break;
        case 's': o->size = atoi(optarg); break;
        case 'b': o->batch = atoi(optarg); break;
        case 'S': o->seed = strtoull(optarg, 0, 10); break;
        case 'i': o->interval = atoi(optarg); break;
        case 'D': o->dn_threads = atoi(optarg); break;
        case 'G': o->gf_threads = atoi(optarg); break;
        case 'a': o->alone = atoi(optarg); break;
        case 'w': o->work = optarg; break;
        case 'j': o->json = 1; break;
        case 'k': o->check = 1; break;
        case 'r': o->rates_only = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (!o->train || !o->val || optind != argc) {
        usage(stderr);
        exit(2);
    }
    if (o->images <= 0 || o->dn_threads <= 0 || o->gf_threads < 0 || o->alone < 0 ||
        o->size < 0 || o->batch < 0)
        dn_die("--images, --darknet-threads must be > 0; the other counts >= 0");
    if (o->rates_only && o->alone == 0)
        dn_die("--rates-only needs --alone K");
}

/* The loop's time not spent at compute-alone speed: waiting for a batch,
 * or training slowed by loader threads on the same cores (on 2 cores
 * darknet's 32 loader threads mostly cost the latter, so its join waits
 * stay short). 0 without --alone. */
static double input_share(const result *x, double compute_ips)
{
    return compute_ips > 0 ? 1 - x->images / x->seconds / compute_ips : 0;
}

static void print_json(const options *o, network *shape, double compute_ips, const result *r)
{
    printf("{\"cfg\":\"%s\",\"size\":%d,\"batch\":%d,\"images\":%d,\"seed\":%llu,"
           "\"compute_alone_ips\":%.1f,\"loaders\":[",
           o->cfg, shape->w, shape->batch * shape->subdivisions, o->images,
           (unsigned long long)o->seed, compute_ips);
    const char *sep = "";
    for (int k = 0; k < LOADERS; k++) {
        if (!o->loaders[k])
            continue;
        const result *x = &r[k];
        printf("%s{\"loader\":\"%s\",\"images\":%llu,\"seconds\":%.3f,\"images_per_s\":%.1f,"
               "\"wait_s\":%.3f,\"wait_frac\":%.4f,\"cpu_s\":%.3f,\"cpu_per_wall\":%.3f,"
               "\"loader_alone_ips\":%.1f,\"input_share\":%.4f,\"top1\":%.4f,\"top1_gpufeed_eval\":%.4f,"
               "\"loss\":[",
               sep, loader_name[k], (unsigned long long)x->images, x->seconds,
               x->images / x->seconds, x->wait_s, x->wait_s / x->seconds, x->cpu_s,
               x->cpu_s / x->seconds, x->loader_alone_ips, input_share(x, compute_ips),
               x->top1, x->top1_gf);
        for (int i = 0; i < x->n_loss; i++)
            printf("%s%.5f", i ? "," : "", x->loss[i]);
        printf("]}");
        sep = ",";
    }
    printf("]}\n");
}

/* The work directory's files, unless --work asked to keep them. */
static void remove_work(const char *work, const char *kept)
{
    if (kept)
        return;
    const char *names[] = {"labels.txt", "train.list", "valid.list", "set.data", "net.cfg"};
    char p[4300];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", work, names[i]);
        unlink(p);
    }
    rmdir(work);
}

/* --rates-only: compute alone and each loader alone, nothing trained. */
static void print_rates(const options *o, const network *shape, const dn_sets *ds, const char *cfg)
{
    double compute_ips = compute_alone(cfg, ds, o), loader_ips[LOADERS] = {0};
    for (int k = 0; k < LOADERS; k++) {
        if (!o->loaders[k])
            continue;
        network *net = make_net(cfg, o->seed, ds->classes);
        loader_ips[k] = loader_alone(k, net, ds, o);
        free_network(net);
    }
    if (!o->json) {
        printf("compute alone %.1f images/s", compute_ips);
        for (int k = 0; k < LOADERS; k++)
            if (o->loaders[k])
                printf(", %s loader alone %.1f images/s", loader_name[k], loader_ips[k]);
        printf(" (%s, %d px, batch %d)\n", o->cfg, shape->w, shape->batch * shape->subdivisions);
        return;
    }
    printf("{\"cfg\":\"%s\",\"size\":%d,\"batch\":%d,\"compute_alone_ips\":%.2f,\"loaders\":[",
           o->cfg, shape->w, shape->batch * shape->subdivisions, compute_ips);
    const char *sep = "";
    for (int k = 0; k < LOADERS; k++)
        if (o->loaders[k]) {
            printf("%s{\"loader\":\"%s\",\"loader_alone_ips\":%.2f}", sep, loader_name[k],
                   loader_ips[k]);
            sep = ",";
        }
    printf("]}\n");
}

int main(int argc, char **argv)
{
    options o;
    parse(argc, argv, &o);
    char tmp[] = "/tmp/gpufeed-darknet-XXXXXX";
    const char *work = o.work;
    if (!work && !(work = mkdtemp(tmp)))
        dn_die("mkdtemp: cannot make a work directory");
    dn_sets ds;
    dn_make_lists(&ds, o.train, o.val, work);

    /* The cfg as run: the overrides, and max_batches = this run's batches
     * so that the learning-rate policy ends where the run does. */
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/net.cfg", work);
    dn_override ov[] = {{"batch", o.batch}, {"width", o.size}, {"height", o.size},
                        {"min_crop", o.size}, {"max_crop", o.size * 3 / 2},
                        {"max_batches", 0}};
    dn_write_cfg(o.cfg, cfg, ov, 5);
    network *shape = make_net(cfg, o.seed, ds.classes);
    int per_batch = shape->batch * shape->subdivisions;
    o.images -= o.images % per_batch;
    if (o.images == 0)
        dn_die("--images: fewer than one batch (%d)", per_batch);
    ov[5].value = o.images / per_batch;
    dn_write_cfg(o.cfg, cfg, ov, 6);

    if (o.rates_only) {
        print_rates(&o, shape, &ds, cfg);
        free_network(shape);
        dn_free_sets(&ds);
        remove_work(work, o.work);
        return 0;
    }
    const float *val_x[2] = {dn_load_val(&ds.val, shape->w, shape->h),
                             dn_load_val_gpufeed(o.val, &ds.val, shape->w, shape->h)};
    double compute_ips = o.alone > 0 ? compute_alone(cfg, &ds, &o) : 0;
    if (!o.json && o.alone > 0)
        printf("compute alone (one cached batch): %.1f images/s\n", compute_ips);

    result r[LOADERS];
    for (int k = 0; k < LOADERS; k++)
        if (o.loaders[k])
            train(k, cfg, &ds, val_x, &o, &r[k]);

    int ok = 1;
    if (o.json)
        print_json(&o, shape, compute_ips, r);
    for (int k = 0; k < LOADERS; k++) {
        if (!o.loaders[k])
            continue;
        const result *x = &r[k];
        char alone[96] = "";
        if (o.alone)
            snprintf(alone, sizeof alone, "  loader alone %.0f images/s  input share %.0f%%",
                     x->loader_alone_ips, 100 * input_share(x, compute_ips));
        if (!o.json)
            printf("%-8s %llu images  %.1f images/s  waited %.2f s (%.1f%%)  cpu %.2f s "
                   "(%.2f cores)%s  top-1 %.3f (gpufeed eval %.3f) on %d held-out\n",
                   loader_name[k], (unsigned long long)x->images, x->images / x->seconds,
                   x->wait_s, 100 * x->wait_s / x->seconds, x->cpu_s, x->cpu_s / x->seconds,
                   alone, x->top1, x->top1_gf, ds.val.n);
        if (o.check && !(x->n_loss >= 2 && x->loss[x->n_loss - 1] < x->loss[0])) {
            fprintf(stderr, "check: %s's loss did not fall\n", loader_name[k]);
            ok = 0;
        }
    }
    if (o.check && o.loaders[0] && o.loaders[1] && r[0].images != r[1].images) {
        fprintf(stderr, "check: darknet saw %llu images, gpufeed %llu\n",
                (unsigned long long)r[0].images, (unsigned long long)r[1].images);
        ok = 0;
    }
    free((void *)val_x[0]);
    free((void *)val_x[1]);
    free_network(shape);
    dn_free_sets(&ds);
    remove_work(work, o.work);
    return ok ? 0 : 1;
}
