/*
 * gpufeed verify: decodes every sample of a data set through the loader
 * (eval transform, tiny output size, on_error = skip) and lists each bad
 * sample with its reason. The list comes from settings.on_sample_error,
 * which the loader calls on one of its threads in sampler order; it is
 * collected under a mutex and printed only after the loader is closed, so
 * nothing is printed from a library thread.
 *
 * Tar shards: bad samples are named "DIR/train-000003.tar:key.jpg"; what
 * indexing left out (members that cannot be samples, keys without an image
 * or label) is not a sample, so it does not change the exit status, but it
 * is reported from the loader's stats.
 *
 * Damaged shards (cut short, zero bytes, not a tar, a bad header): verify
 * takes each in part (on_shard_error skip unless --on-shard-error says
 * otherwise), so one run lists every damaged shard ("DAMAGED shard.tar:
 * offset N: reason; K members kept, L lost", from gf_damaged_shards) with
 * every bad member of the rest, and sums them up: "shards: 998 good, 2
 * damaged (17 members lost)". A damaged shard makes the exit status 1.
 *
 * Strictness: GF_STRICT_WHOLE unless --strictness says otherwise, so a
 * libjpeg warning anywhere in a file (not only in the rows a crop needs)
 * makes the file bad; entries that are not regular files are bad in every
 * mode ("not a regular file: a FIFO"). Under lenient a sample decoded
 * despite a warning is not bad but is listed (settings.on_sample_warning)
 * as "WARN path: reason".
 *
 * Share: the whole data set, rank 0 of 1, unless --rank/--world say
 * otherwise: the loader's own default (the launcher's environment) would
 * check one share inside every sbatch or mpirun job and call the data set
 * clean. The summary names a share when one was checked.
 *
 * Exit: 0 every sample decoded, 1 some were bad or a shard damaged (also all of them: the
 * loader's "epoch delivered no batch" is then the end of the list, not an
 * error), 2 usage or open error.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"
#include "loader_options.h"
#include "gpufeed.h"

#define CMD "verify"
/* The shared loader options verify takes (loader_options.h). */
#define VERIFY_LOPTS                                                                       \
    (CLI_LOPT(THREADS) | CLI_LOPT(STRICTNESS) | CLI_LOPT(EXTENSIONS) | CLI_LOPT(RANK) |      \
     CLI_LOPT(WORLD) | CLI_LOPT(ON_SHARD_ERROR))
/* Settings verify decides itself (below the options): not options. */
static const char *const verify_fixed[] = {"shuffle", "height", "width", NULL};
/* Where verify's default is not the table's. */
static const char *const lopt_help[CLI_LOPT_COUNT] = {
    [CLI_LOPT_STRICTNESS] = "whole|strict|lenient (default whole: a decoder\n"
                            "warning anywhere in a file is a bad sample;\n"
                            "strict: only where the loader's crop reads;\n"
                            "lenient: a warning is counted, not bad)",
    [CLI_LOPT_RANK] = "check only share R of --world (default: the whole\n"
                      "data set, whatever a launcher's RANK, SLURM_PROCID\n"
                      "or OMPI_COMM_WORLD_RANK say)",
    [CLI_LOPT_WORLD] = "shares for --rank (default 1: everything)",
    [CLI_LOPT_ON_SHARD_ERROR] = "skip|fail|follow: a damaged tar shard is listed and\n"
                                "its members before the damage checked (skip, the\n"
                                "default), or stops verify (fail: exit 2)",
};

typedef struct bad_sample {
    int64_t sample;
    int code;
    char *path;
    char *reason;
} bad_sample;

typedef struct bad_list {
    pthread_mutex_t mu;
    bad_sample *v;
    size_t n, cap;
    int oom; /* a record could not be stored; the count is still right */
    uint64_t count;
} bad_list;

static void on_bad(void *user, int64_t sample, const char *path, int code,
                   const char *reason)
{
    bad_list *bl = user;
    pthread_mutex_lock(&bl->mu);
    bl->count++;
    if (bl->n == bl->cap) {
        size_t cap = bl->cap ? bl->cap * 2 : 16;
        bad_sample *p = realloc(bl->v, cap * sizeof *p);
        if (!p) {
            bl->oom = 1;
            goto out;
        }
        bl->v = p;
        bl->cap = cap;
    }
    {
        bad_sample *b = &bl->v[bl->n];
        b->sample = sample;
        b->code = code;
        b->path = strdup(path ? path : "");
        b->reason = strdup(reason && *reason ? reason : gf_strerror(code));
        if (!b->path || !b->reason) {
            free(b->path);
            free(b->reason);
            bl->oom = 1;
            goto out;
        }
        bl->n++;
    }
out:
    pthread_mutex_unlock(&bl->mu);
}

/* settings.on_sample_error: a bad sample, or (sample -1, from gf_open) a
 * damaged shard. gf_damaged_shards() lists those once the loader is open;
 * the list here is for an open that fails because no shard kept a sample. */
typedef struct error_lists {
    bad_list bad, damaged;
} error_lists;

static void on_error(void *user, int64_t sample, const char *path, int code,
                     const char *reason)
{
    error_lists *e = user;
    on_bad(sample < 0 ? &e->damaged : &e->bad, sample, path, code, reason);
}

/* gf_next's GF_EDATASET for an epoch that delivered no batch because
 * every sample failed: for verify that is the answer, not an error. Each
 * failure was reported (in sampler order) before gf_next saw the epoch end. */
static int every_sample_bad(gf_loader *l)
{
    gf_stats st;
    return gf_get_stats(l, &st) == 0 && st.samples == 0 && st.epoch_samples > 0 &&
           st.errors == st.epoch_samples;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed verify --data DIR [options]\n"
            "\n"
            "Decodes every sample of the data set (ImageFolder DIR, list file, or tar\n"
            "shards such as 'DIR/train-{000000..000127}.tar' or 'a.tar,b.tar') and\n"
            "prints 'BAD path: reason' for each one that cannot be used (for shards\n"
            "the path is 'shard.tar:member'; under --strictness lenient 'WARN path:\n"
            "reason' for each decoded despite a warning), then 'N samples, K bad'.\n"
            "The whole data set unless --rank and --world pick a share (a launcher's\n"
            "environment does not). Members and keys of shards that indexing skipped\n"
            "(links, a key without .cls, ...) are reported on a 'skipped while\n"
            "indexing' line but are not samples. A damaged shard is listed as\n"
            "'DAMAGED shard.tar: offset N: reason; K members kept, L lost' and its\n"
            "members before the damage are checked; a 'shards: G good, D damaged\n"
            "(L members lost)' line sums them up.\n"
            "Exit status: 0 none bad, 1 some bad or a shard damaged, 2 usage or\n"
            "open error.\n"
            "\n"
            "options:\n"
            "  --data DIR            data set (required; quote brace patterns)\n");
    cli_loader_help(f, VERIFY_LOPTS | CLI_LOPT_GENERIC, 0, 24, lopt_help, verify_fixed);
    fprintf(f,
            "  --json                print one JSON object instead:\n"
            "                        {\"samples\": N, \"bad\": K, \"bad_samples\": [{\"path\",\n"
            "                         \"reason\"}], \"skipped_members\", \"skipped_keys\",\n"
            "                         \"dataset_warnings\", \"dataset_warning\", \"extensions\",\n"
            "                         \"skipped_extensions\": {\".gif\": N, ..., \"other\"},\n"
            "                         \"folder_dirs_again\",\n"
            "                         \"strictness\", \"decode_warnings\", \"rank\", \"world\",\n"
            "                         \"warned_samples\": [{\"path\", \"reason\"}],\n"
            "                         \"shards\", \"shards_damaged\", \"shard_members_lost\",\n"
            "                         \"damaged_shards\": [{\"path\", \"offset\", \"reason\",\n"
            "                         \"error\", \"kept\", \"lost\"}]}\n"
            "  -h, --help            this text\n");
}

/* The path as the user can act on it: the loader reports paths relative to
 * the data set's root (the folder, or the list file's folder). */
static void print_path(FILE *f, cli_json *j, const char *root, const char *path)
{
    char *full = NULL;
    if (path[0] != '/' && root[0]) {
        size_t lr = strlen(root);
        int slash = root[lr - 1] != '/';
        full = malloc(lr + (size_t)slash + strlen(path) + 1);
        if (full)
            sprintf(full, "%s%s%s", root, slash ? "/" : "", path);
    }
    if (j)
        cli_json_str(j, full ? full : path);
    else
        fputs(full ? full : path, f);
    free(full);
}

static void json_list(cli_json *j, const char *key, const bad_list *bl, const char *root)
{
    cli_json_key(j, key);
    cli_json_array(j);
    for (size_t i = 0; i < bl->n; i++) {
        cli_json_object(j);
        cli_json_key(j, "path");
        print_path(stdout, j, root, bl->v[i].path);
        cli_json_kstr(j, "reason", bl->v[i].reason);
        cli_json_kstr(j, "error", gf_err_name(bl->v[i].code));
        cli_json_kint(j, "index", bl->v[i].sample);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

static void text_list(const char *tag, const bad_list *bl, const char *root)
{
    for (size_t i = 0; i < bl->n; i++) {
        printf("%s ", tag);
        print_path(stdout, NULL, root, bl->v[i].path);
        printf(": %s\n", bl->v[i].reason);
    }
}

/* stats.folder_skipped's entries, as verify names them. */
static const char *const skipped_names[GF_SKIPPED_OTHER + 1] = {
    [GF_SKIPPED_GIF] = ".gif", [GF_SKIPPED_TGA] = ".tga", [GF_SKIPPED_PSD] = ".psd",
    [GF_SKIPPED_PNM] = ".pnm", [GF_SKIPPED_PBM] = ".pbm", [GF_SKIPPED_OTHER] = "other",
};

/* "left out of the folder: 3 .gif, 1 .tga (...), 2 other files": what the
 * extension list did not take, so that a user sees an index smaller than
 * the tree and why. */
static void text_skipped(const gf_stats *st)
{
    const uint64_t *n = st->folder_skipped;
    const char *sep = "left out of the folder: ";
    for (int k = 0; k < GF_SKIPPED_OTHER; k++)
        if (n[k]) {
            printf("%s%llu %s", sep, (unsigned long long)n[k], skipped_names[k]);
            sep = ", ";
        }
    if (*sep == ',')
        printf(" (not in torchvision's list; --extensions all takes them)");
    if (n[GF_SKIPPED_OTHER]) {
        printf("%s%llu other files", sep, (unsigned long long)n[GF_SKIPPED_OTHER]);
        sep = ", ";
    }
    if (*sep == ',')
        putchar('\n');
    if (st->folder_dirs_again)
        printf("%llu directories reached again through links (walked once)\n",
               (unsigned long long)st->folder_dirs_again);
}

/* The damaged shards (gf_damaged_shards), all of them; NULL and 0 if none
 * (or no memory: the count in the stats stays right). */
static gf_sample_error *damaged_shards(gf_loader *l, int *n)
{
    *n = gf_damaged_shards(l, NULL, 0);
    gf_sample_error *v = *n > 0 ? malloc((size_t)*n * sizeof *v) : NULL;
    *n = v ? gf_damaged_shards(l, v, *n) : 0;
    return v;
}

/* The numbers in a damaged shard's reason, "offset N: ...; K members
 * kept, L lost" (gpufeed.h). */
static void damage_numbers(const char *reason, unsigned long long *off, unsigned long long *kept,
                           unsigned long long *lost)
{
    *off = *kept = *lost = 0;
    sscanf(reason, "offset %llu:", off);
    const char *t = strrchr(reason, ';');
    if (t)
        sscanf(t, "; %llu members kept, %llu lost", kept, lost);
}

static void json_damaged(cli_json *j, const gf_sample_error *v, int n)
{
    cli_json_key(j, "damaged_shards");
    cli_json_array(j);
    for (int i = 0; i < n; i++) {
        unsigned long long off, kept, lost;
        damage_numbers(v[i].reason, &off, &kept, &lost);
        cli_json_object(j);
        cli_json_kstr(j, "path", v[i].path);
        cli_json_kuint(j, "offset", off);
        cli_json_kstr(j, "reason", v[i].reason);
        cli_json_kstr(j, "error", gf_err_name(v[i].code));
        cli_json_kuint(j, "kept", kept);
        cli_json_kuint(j, "lost", lost);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

static void free_list(bad_list *bl)
{
    for (size_t i = 0; i < bl->n; i++) {
        free(bl->v[i].path);
        free(bl->v[i].reason);
    }
    free(bl->v);
    pthread_mutex_destroy(&bl->mu);
}

/* An open that failed because every shard was damaged (or kept no
 * sample): each damaged shard, as when some are good, and exit 1. */
static int all_damaged(int json, const bad_list *dl, const char *msg)
{
    unsigned long long lost = 0;
    gf_sample_error *v = calloc(dl->n, sizeof *v);
    int n = v ? (int)dl->n : 0;
    for (int i = 0; i < n; i++) {
        unsigned long long off, kept, l;
        damage_numbers(dl->v[i].reason, &off, &kept, &l);
        lost += l;
        v[i] = (gf_sample_error){.sample = -1, .code = dl->v[i].code};
        snprintf(v[i].path, sizeof v[i].path, "%s", dl->v[i].path);
        snprintf(v[i].reason, sizeof v[i].reason, "%s", dl->v[i].reason);
    }
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_object(&j);
        cli_json_kuint(&j, "samples", 0);
        cli_json_kuint(&j, "bad", 0);
        cli_json_kuint(&j, "shards_damaged", (uint64_t)n);
        cli_json_kuint(&j, "shard_members_lost", lost);
        json_damaged(&j, v, n);
        cli_json_kstr(&j, "error", msg);
        cli_json_object_end(&j);
        cli_json_end(&j);
    } else {
        for (int i = 0; i < n; i++)
            printf("DAMAGED %s: %s\n", v[i].path, v[i].reason);
        printf("shards: %d damaged (%llu members lost), none with a sample\n0 samples, 0 bad\n",
               n, lost);
    }
    free(v);
    return CLI_FAIL;
}

int cmd_verify(int argc, char **argv)
{
    static const struct option own[] = {
        {"data", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const struct option *longopts = cli_options(own, VERIFY_LOPTS, verify_fixed);
    const char *data = NULL;
    int json = 0, ch, rc, status = CLI_OK;
    gf_settings s;
    gf_loader *l = NULL;
    gf_stats st;
    error_lists el = {.bad = {.n = 0}, .damaged = {.n = 0}};
    bad_list wl = {.n = 0}; /* warned (lenient) */
    gf_sample_error *dmg = NULL;
    int n_dmg = 0;
    char *root = NULL;

    /* The table's options land in s; verify's own choices follow. */
    gf_default_settings(&s);
    s.strictness = GF_STRICT_WHOLE; /* the table's default is the loader's */
    s.on_shard_error = GF_SHARD_SKIP; /* every damaged shard in one run */
    cli_loader_args la = {.s = &s};
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'd': data = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default:
            if (cli_loader_parse_or_reject(CMD, ch, optarg, &la, argv[optind - 1]) < 0)
                return CLI_USAGE;
            break;
        }
    }
    if (optind < argc) {
        cli_error(CMD, "unexpected argument '%s' (the data set goes after --data)", argv[optind]);
        return CLI_USAGE;
    }
    if (!data) {
        cli_error(CMD, "--data DIR is required (try --help)");
        return CLI_USAGE;
    }
    if (!(la.given & CLI_LOPT(WORLD))) {
        if (la.given & CLI_LOPT(RANK)) {
            cli_error(CMD, "--rank needs --world");
            return CLI_USAGE;
        }
        s.world = 1; /* not the launcher's: verify checks everything */
    }
    if (s.rank >= s.world) {
        cli_error(CMD, "--rank %d must be below --world %d", s.rank, s.world);
        return CLI_USAGE;
    }

    s.data = data;
    s.transform = GF_TRANSFORM_EVAL;
    s.shuffle = 0;
    s.epochs = 1;
    s.on_error = GF_ON_ERROR_SKIP;
    s.height = s.width = 32; /* decoding is the check; keep the resize cheap */
    s.batch_size = 64;
    s.on_sample_error = on_error;
    s.on_sample_error_user = &el;
    s.on_sample_warning = on_bad;
    s.on_sample_warning_user = &wl;
    pthread_mutex_init(&el.bad.mu, NULL);
    pthread_mutex_init(&el.damaged.mu, NULL);
    pthread_mutex_init(&wl.mu, NULL);

    rc = gf_open(&l, &s);
    if (rc == GF_EDATASET && el.damaged.n > 0) {
        /* No shard kept a sample: the damage is the finding. */
        status = all_damaged(json, &el.damaged, gf_last_error(l));
        goto out;
    }
    if (rc < 0) {
        const char *msg = l ? gf_last_error(l) : "";
        if (*msg)
            cli_error(CMD, "%s", msg); /* the loader's message names the file */
        else
            cli_error(CMD, "%s: %s", data, gf_strerror(rc));
        status = CLI_USAGE;
        goto out;
    }
    dmg = damaged_shards(l, &n_dmg);
    for (;;) {
        gf_batch *b;
        rc = gf_next(l, &b);
        if (rc == GF_EOF)
            break;
        if (rc < 0 && !(rc == GF_EDATASET && every_sample_bad(l))) {
            cli_error_msg(CMD, gf_last_error(l), rc);
            status = CLI_USAGE;
            goto out;
        }
        if (rc < 0)
            break; /* the epoch is over: each of its samples was reported */
        gf_release(l, b);
    }
    if (gf_get_stats(l, &st) < 0) {
        cli_error(CMD, "could not read the loader's statistics");
        status = CLI_USAGE;
        goto out;
    }
    /* Every callback has run once gf_next() returned GF_EOF; closing joins
     * the loader threads, so the list is final and no longer shared. */
    gf_close(&l);

    /* Root for printing: DIR itself, or the list file's folder. Shard
     * samples are named by the shard's base name, so the root is the
     * folder of the pattern when there is one folder (no ',' and no brace
     * before the last '/'), else nothing. */
    root = strdup(data);
    if (root) {
        struct stat sb;
        char *slash = strrchr(root, '/');
        if (st.shards > 0) {
            if (slash && !strchr(data, ',') && !memchr(root, '{', (size_t)(slash - root)))
                slash[1] = '\0';
            else
                root[0] = '\0';
        } else if (stat(data, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            if (slash)
                slash[1] = '\0';
            else
                root[0] = '\0';
        }
    }

    uint64_t n_samples = st.epoch_samples ? st.epoch_samples : st.dataset_samples;
    uint64_t n_bad = el.bad.count > st.errors ? el.bad.count : st.errors;
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_object(&j);
        cli_json_kuint(&j, "samples", n_samples);
        cli_json_kuint(&j, "bad", n_bad);
        cli_json_kint(&j, "rank", st.rank);
        cli_json_kint(&j, "world", st.world);
        json_list(&j, "bad_samples", &el.bad, root ? root : "");
        cli_json_kuint(&j, "skipped_members", st.shard_members_skipped);
        cli_json_kuint(&j, "skipped_keys", st.shard_keys_skipped);
        cli_json_kuint(&j, "dataset_warnings", st.dataset_warnings);
        cli_json_kstr(&j, "dataset_warning", st.dataset_warning);
        cli_json_kstr(&j, "extensions", cli_extensions_names[s.extensions]);
        cli_json_key(&j, "skipped_extensions");
        cli_json_object(&j);
        for (int k = 0; k <= GF_SKIPPED_OTHER; k++)
            cli_json_kuint(&j, skipped_names[k], st.folder_skipped[k]);
        cli_json_object_end(&j);
        cli_json_kuint(&j, "folder_dirs_again", st.folder_dirs_again);
        cli_json_kstr(&j, "strictness", cli_strictness_names[s.strictness]);
        cli_json_kuint(&j, "decode_warnings", st.decode_warnings);
        json_list(&j, "warned_samples", &wl, root ? root : "");
        cli_json_kuint(&j, "shards", st.shards);
        cli_json_kuint(&j, "shards_damaged", st.shards_damaged);
        cli_json_kuint(&j, "shard_members_lost", st.shard_members_lost);
        json_damaged(&j, dmg, n_dmg);
        cli_json_object_end(&j);
        cli_json_end(&j);
    } else {
        for (int i = 0; i < n_dmg; i++) /* the shard path as given: not under root */
            printf("DAMAGED %s: %s\n", dmg[i].path, dmg[i].reason);
        text_list("BAD", &el.bad, root ? root : "");
        text_list("WARN", &wl, root ? root : "");
        if (st.shard_members_skipped || st.shard_keys_skipped || st.dataset_warnings)
            printf("skipped while indexing: %llu members, %llu keys (%llu warnings; first: %s)\n",
                   (unsigned long long)st.shard_members_skipped,
                   (unsigned long long)st.shard_keys_skipped,
                   (unsigned long long)st.dataset_warnings, st.dataset_warning);
        text_skipped(&st);
        if (st.decode_warnings)
            printf("%llu decoded with warnings (strictness %s: not bad)\n",
                   (unsigned long long)st.decode_warnings, cli_strictness_names[s.strictness]);
        if (st.shards)
            printf("shards: %llu good, %llu damaged (%llu members lost)\n",
                   (unsigned long long)(st.shards - st.shards_damaged),
                   (unsigned long long)st.shards_damaged,
                   (unsigned long long)st.shard_members_lost);
        printf("%llu samples, %llu bad", (unsigned long long)n_samples,
               (unsigned long long)n_bad);
        if (st.world > 1)
            printf(" (rank %d of %d: its share only)", st.rank, st.world);
        putchar('\n');
    }
    if (el.bad.oom || el.bad.n != n_bad) {
        cli_error(CMD, "%llu bad samples were counted but only %zu could be listed",
                  (unsigned long long)n_bad, el.bad.n);
    }
    status = n_bad || st.shards_damaged ? CLI_FAIL : CLI_OK;
out:
    free(dmg);
    gf_close(&l);
    free_list(&el.bad);
    free_list(&el.damaged);
    free_list(&wl);
    free(root);
    return status;
}
