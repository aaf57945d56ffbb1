/*
 * gpufeed prepare SRC OUT: turns any data set gpufeed reads (ImageFolder,
 * list file, tar shards) into a WebDataset-style tar set made for fast
 * loading: OUT/<name>-000000.tar ... (per sample KEY.jpg, .ppm or .pgm,
 * KEY.cls and KEY.key, the source's path), an index sidecar per shard
 * (OUT/<name>-NNNNNN.idx, DALI wds2idx's v1.2 text, which gpufeed's
 * remote reader indexes from, with the members' CRCs), OUT/classes.txt (class
 * names in label order: labels are the source's, so the class indices
 * are torchvision ImageFolder's) and OUT/manifest.json (the source and
 * each source file's identity, the settings, counts, each shard's
 * SHA-256, the bad samples, gpufeed's version).
 *
 * Samples go in the source's index order, each decoded whole and, with
 * --max-side, downscaled by the library (gf_decoder_decode_fit), then
 * stored as JPEG, raw PPM/PGM, or their original bytes (prepare_encode.c).
 * The output is the same bytes whatever --threads; a killed run resumes
 * where it stopped when run again (prepare_write.c).
 *
 * This file: options, usage, and the run's steps. Main thread.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"
#include "loader_options.h"
#include "prepare.h"
#include "quote.h"

#define CMD "prepare"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed prepare SRC OUT [options]\n"
            "       gpufeed prepare --plan SRC [plan options]\n"
            "\n"
            "Writes SRC (an ImageFolder, a list file, or tar shards such as\n"
            "'DIR/train-{000000..000127}.tar') as WebDataset tar shards made for fast\n"
            "loading: OUT/NAME-000000.tar ..., each sample KEY.jpg (or .ppm/.pgm, raw\n"
            "pixels), KEY.cls (its label) and KEY.key (its path in SRC), in SRC's\n"
            "index order; OUT/NAME-NNNNNN.idx beside each shard (DALI wds2idx's index,\n"
            "from which gpufeed indexes remote shards, with the members' CRCs);\n"
            "OUT/classes.txt (class names in label order: the labels are SRC's, as\n"
            "torchvision's ImageFolder numbers them); OUT/manifest.json (source,\n"
            "settings, counts, each shard's SHA-256, bad samples). The same bytes\n"
            "whatever --threads. Run it again after a kill and it resumes where it\n"
            "stopped. Read the set back with\n"
            "--data 'OUT/NAME-{000000..NNNNNN}.tar'; 'gpufeed verify --data OUT'\n"
            "checks it against its manifest and decodes every sample.\n"
            "\n"
            "options:\n"
            "  --name NAME           shard name prefix (default train)\n"
            "  --max-side N          downscale so the longer side is at most N, aspect\n"
            "                        kept (the shorter side rounded half up), never\n"
            "                        enlarged; the library's antialiased triangle filter\n"
            "                        (PIL's and torchvision's bilinear, antialias=True)\n"
            "                        on a full-size decode (default 0: sizes kept)\n"
            "  --format F            jpeg|raw|auto (default jpeg): raw stores binary PPM\n"
            "                        (PGM for --channels 1); auto stores raw when the\n"
            "                        image is small (FFCV's smart mode), else JPEG\n"
            "  --raw-max-bytes B     auto: raw when W x H x channels <= B (default 49152,\n"
            "                        128x128 RGB)\n"
            "  --raw-max-pixels P    auto: raw when W x H <= P instead\n"
            "  --quality Q           JPEG quality 1..100 (default 90)\n"
            "  --subsampling S       JPEG chroma subsampling 444|422|420 (default 420)\n"
            "  --keep-original       where a JPEG would be stored, a JPEG source that needs\n"
            "                        no downscale is stored as it is, bit for bit (it is\n"
            "                        still decoded, to check it)\n"
            "  --shard-bytes B       start a new shard before one would pass B bytes\n"
            "                        (K, M, G suffixes: KiB..; default 256M)\n"
            "  --shard-samples N     N samples per shard instead\n"
            "  --threads N           decode and encode threads (default: all cores)\n"
            "  --channels C          3 (RGB, default) or 1 (grey)\n"
            "  --on-error E          skip|fail: a bad source sample is left out and\n"
            "                        listed (default), or stops the run (exit 1); a\n"
            "                        shard key whose .cls is no label is left out\n"
            "                        with a warning, or refused at the start (exit 2)\n"
            "  --on-shard-error P    follow|fail|skip: a damaged source shard\n"
            "  --strictness M        strict|lenient|whole: a decoder warning is a bad\n"
            "                        sample (strict: the default) or not (lenient)\n"
            "  --decoder D           auto|stb|turbo (default auto)\n"
            "  --extensions X        torchvision|all: an ImageFolder's files\n"
            "  --fields SPEC         tar shards: the sample's fields, as the loader's\n"
            "                        fields setting names them ('jpg,cls,txt,seg.png:mask,\n"
            "                        boxes.npy:boxes'); each field's member is kept under\n"
            "                        its extension: masks resized with the image (nearest\n"
            "                        neighbour, 8-bit PNG), boxes scaled (.npy, rows of no\n"
            "                        area dropped), arrays, text and bytes copied; a key\n"
            "                        without a field is left out. Name the image field\n"
            "                        so it admits what is stored (jpg, or ppm/pgm)\n"
            "  --json                print a JSON summary (samples, bad, shards, bytes,\n"
            "                        samples_per_s, bad_samples...) instead of text\n"
            "  -h, --help            this text\n"
            "\n"
            "--plan SRC: which setting to use, measured on a sample of SRC instead of\n"
            "writing OUT. The originals and, for max side 512, 384, 256 and 160, JPEG\n"
            "(--quality, --subsampling) and raw: bytes for the whole set, images/s of\n"
            "the loader over the prepared sample (--threads, --image-size, train\n"
            "transform), and the PSNR of the eval centre crop against the original's;\n"
            "then the setting to use. --channels, --decoder, --strictness, --extensions,\n"
            "--on-shard-error and --json apply too.\n"
            "  --plan-samples N      samples tried, spread evenly over SRC (default 200)\n"
            "  --seed N              where the evenly spread sample starts (default 0)\n"
            "  --image-size S|WxH    the loader's output (default 224)\n"
            "  --need-rate R         images/s the training needs (`gpufeed bench`: the\n"
            "                        compute's images/s): the recommendation is the\n"
            "                        smallest set that reaches it; without it, the\n"
            "                        fastest within 35 dB PSNR\n"
            "\n"
            "A progress bar (samples/s, ETA) goes to stderr when it is a terminal\n"
            "(GF_NO_PROGRESS=1: none).\n"
            "Exit status: 0 the set is complete (bad samples skipped and listed), 1 a\n"
            "bad sample under --on-error fail, 2 usage or setup error.\n");
}

/* "256M" -> bytes: K, M, G are binary. */
static int parse_bytes(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
              : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > (~0ull >> shift)) {
        cli_error(CMD, "--%s: '%s' is not a positive byte count (e.g. 256M)", opt, s);
        return -1;
    }
    *out = (uint64_t)v << shift;
    return 0;
}

static int set_choice(const char *opt, const char *setting, const char *arg, gf_settings *s)
{
    char why[256];
    if (gf_settings_set(s, setting, arg, why, sizeof why) == 0)
        return 0;
    cli_error(CMD, "--%s: %s", opt, why);
    return -1;
}

/* 1 if dir has entries but no prepare journal, 0 if it may be written
 * into (empty, missing, or a run of prepare's), -1 on error. */
static int foreign_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int entries = 0, journal = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        entries++;
        journal |= strcmp(e->d_name, ".prepare-journal") == 0;
    }
    closedir(d);
    return entries && !journal;
}

/* path made absolute with every link resolved, as far as it exists (OUT
 * may not yet): the missing tail is appended as written. 0, or -1. */
static int resolve(const char *path, char *out, size_t n)
{
    if (realpath(path, out))
        return 0;
    if (errno != ENOENT)
        return -1;
    const char *slash = strrchr(path, '/');
    while (slash && slash > path && slash[1] == '\0') /* "dir/" */
        slash = memrchr(path, '/', (size_t)(slash - path));
    char parent[4096];
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == path)
        snprintf(parent, sizeof parent, "/");
    else
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    if (strcmp(parent, path) == 0 || resolve(parent, out, n) != 0)
        return -1;
    size_t len = strlen(out);
    const char *tail = slash ? slash + 1 : path;
    int w = snprintf(out + len, n - len, "%s%.*s", len && out[len - 1] == '/' ? "" : "/",
                     (int)strcspn(tail, "/"), tail);
    return w < 0 || (size_t)w >= n - len ? -1 : 0;
}

/* Whether the resolved path a is b or under it. */
static int within(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n && b[n - 1] == '/'));
}

/* OUT inside a folder SRC: the walk would find the shards written (and
 * every one written before the check that the folder is unchanged fails);
 * SRC inside OUT: OUT holds a prepare run's files alone, and "remove OUT
 * to start over" would remove the source. Refused, naming both. 0 or -1. */
static int check_nesting(const prep_opts *o)
{
    struct stat st;
    char src[4096], out[4096];
    if (stat(o->src, &st) != 0 || resolve(o->src, src, sizeof src) != 0 ||
        resolve(o->out, out, sizeof out) != 0)
        return 0; /* a pattern or a URL: nothing on disk to nest */
    if (S_ISDIR(st.st_mode) && within(out, src)) {
        cli_error(CMD, "OUT %s is inside SRC %s: its shards would be read as the source's "
                  "files; use an OUT outside it", o->out, o->src);
        return -1;
    }
    if (within(src, out)) {
        cli_error(CMD, "SRC %s is inside OUT %s: OUT holds prepare's files alone (and removing "
                  "it to start over would remove the source); use an OUT outside it",
                  o->src, o->out);
        return -1;
    }
    return 0;
}

static void summary_json(const prep_opts *o, gf_index *ix, const prep_result *r,
                         uint64_t bytes, const uint64_t kinds[PREP_OUT_KINDS])
{
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object(&j);
    cli_json_kstr(&j, "source", o->src);
    cli_json_kstr(&j, "out", o->out);
    cli_json_kstr(&j, "name", o->name);
    cli_json_kuint(&j, "samples", r->samples);
    cli_json_kuint(&j, "bad", r->n_bad);
    cli_json_kuint(&j, "shards", r->n_shards);
    cli_json_kuint(&j, "bytes", bytes);
    cli_json_knum(&j, "bytes_per_sample", r->samples ? (double)bytes / (double)r->samples : 0);
    for (int t = 0; t < PREP_OUT_KINDS; t++)
        cli_json_kuint(&j, prep_out_names[t], kinds[t]);
    cli_json_kuint(&j, "resumed_shards", r->resumed_shards);
    cli_json_kuint(&j, "resumed_at", r->resumed_at);
    cli_json_kuint(&j, "samples_this_run", r->samples_this_run);
    cli_json_kint(&j, "threads", r->threads);
    cli_json_knum(&j, "seconds", r->seconds);
    cli_json_knum(&j, "samples_per_s",
                  r->seconds > 0 ? (double)r->samples_this_run / r->seconds : 0);
    prep_put_bad_samples(&j, ix, r);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

static void summary_text(const prep_opts *o, const prep_result *r, uint64_t bytes,
                         const uint64_t kinds[PREP_OUT_KINDS])
{
    for (size_t i = 0; i < r->n_bad; i++) {
        fputs("BAD ", stdout);
        cli_put_quoted(stdout, r->bad[i].reason);
        printf(" (%s)\n", gf_err_name(r->bad[i].code));
    }
    printf("prepare: %llu samples (%zu bad, %s) into %zu shard%s %s/%s-%06d.tar..%s-%06zu.tar "
           "(%llu jpeg, %llu raw, %llu original; mean %.1f KB a sample)",
           (unsigned long long)r->samples, r->n_bad, r->failed ? "stopped" : "left out",
           r->n_shards, r->n_shards == 1 ? "" : "s", o->out, o->name, 0, o->name,
           r->n_shards ? r->n_shards - 1 : 0, (unsigned long long)kinds[PREP_OUT_JPEG],
           (unsigned long long)kinds[PREP_OUT_RAW], (unsigned long long)kinds[PREP_OUT_ORIGINAL],
           r->samples ? (double)bytes / (double)r->samples / 1000.0 : 0.0);
    if (r->resumed_shards)
        printf("; resumed after %llu shards (source index %llu)",
               (unsigned long long)r->resumed_shards, (unsigned long long)r->resumed_at);
    printf(": %llu this run in %.2f s, %.1f samples/s, %d threads\n",
           (unsigned long long)r->samples_this_run, r->seconds,
           r->seconds > 0 ? (double)r->samples_this_run / r->seconds : 0.0, r->threads);
}

/* A shard key the index left out for its .cls (no label): said, as a
 * damaged shard is (under --on-error fail the index refuses it instead). */
static void on_index_warning(void *user, int64_t sample, const char *path, int code,
                             const char *reason)
{
    (void)user, (void)sample, (void)code;
    fprintf(stderr, "gpufeed prepare: warning: left out ");
    cli_put_quoted(stderr, path);
    fprintf(stderr, ": %s\n", reason);
}

static int run(prep_opts *o)
{
    if (strncmp(o->src, "mix:", 4) == 0) { /* its files are each source's */
        cli_error(CMD, "SRC %s is a mix: prepare each of its data sets on its own (a mix draws "
                  "from them by weight as it loads; prepared sets mix as any do)", o->src);
        return CLI_USAGE;
    }
    if (check_nesting(o) != 0)
        return CLI_USAGE;
    gf_index *ix = NULL;
    gf_settings is = o->s;
    is.on_sample_warning = on_index_warning;
    int rc = gf_index_open(&ix, &is);
    if (rc < 0) {
        cli_error_msg(CMD, gf_index_last_error(ix), rc);
        gf_index_close(&ix);
        return CLI_USAGE;
    }
    gf_sample_error dmg[8];
    int nd = gf_index_damaged_shards(ix, dmg, 8);
    for (int i = 0; i < nd && i < 8; i++) {
        fprintf(stderr, "gpufeed prepare: warning: damaged shard ");
        cli_put_quoted(stderr, dmg[i].path);
        fprintf(stderr, ": %s\n", dmg[i].reason);
    }
    /* Left out where torchvision's ImageFolder would take them: said. */
    uint64_t n_left = gf_index_skipped_entry(ix, 0, NULL, NULL);
    for (uint64_t i = 0; i < n_left && i < GF_SKIPPED_NAMED_MAX; i++) {
        const char *path = "", *reason = "";
        gf_index_skipped_entry(ix, i, &path, &reason);
        fprintf(stderr, "gpufeed prepare: warning: left out ");
        cli_put_quoted(stderr, path);
        fprintf(stderr, ": %s\n", reason);
    }
    if (n_left > GF_SKIPPED_NAMED_MAX)
        fprintf(stderr, "gpufeed prepare: warning: and %llu more left out\n",
                (unsigned long long)(n_left - GF_SKIPPED_NAMED_MAX));
    for (int k = 0; k < gf_index_fields(ix); k++) {
        const char *f = gf_index_field_name(ix, k, NULL);
        for (const char *a = f; *a; a += strcspn(a, ";"), a += *a == ';') {
            if (strncasecmp(a, "key", 3) == 0 && (a[3] == ';' || !a[3])) {
                cli_error(CMD, "--fields: field '%s': KEY.key is the member prepare writes "
                          "(the sample's source path); leave it out of --fields", f);
                gf_index_close(&ix);
                return CLI_USAGE;
            }
        }
    }
    int foreign = foreign_dir(o->out);
    rc = foreign == 0 ? cli_mkdir_p(o->out) : 0;
    if (foreign || rc < 0) {
        if (foreign > 0)
            cli_error(CMD, "%s is not empty and holds no prepare run: use an empty or new OUT",
                      o->out);
        else
            cli_error(CMD, "%s: %s", o->out, strerror(rc < 0 ? -rc : errno));
        gf_index_close(&ix);
        return CLI_USAGE;
    }
    char *fp = prep_fingerprint(o, ix);
    prep_result r = {0};
    if (!fp || prep_write(o, ix, fp, &r) < 0) {
        prep_result_free(&r); /* what it read and wrote before it failed */
        free(fp);
        gf_index_close(&ix);
        return CLI_USAGE;
    }
    free(fp);
    int status = CLI_OK;
    if (r.failed) {
        cli_error(CMD, "%s: %s (on-error fail: the run stops here; the shards before it are "
                  "kept, and a rerun resumes from them)", o->src, r.bad[r.n_bad - 1].reason);
        status = CLI_FAIL;
    } else if (prep_write_classes(o, ix) < 0 || prep_write_manifest(o, ix, &r) < 0) {
        status = CLI_USAGE;
    }
    uint64_t bytes = 0, kinds[PREP_OUT_KINDS] = {0};
    for (size_t k = 0; k < r.n_shards; k++) {
        bytes += r.shards[k].bytes;
        for (int t = 0; t < PREP_OUT_KINDS; t++)
            kinds[t] += r.shards[k].kinds[t];
    }
    if (status != CLI_USAGE) {
        if (o->json)
            summary_json(o, ix, &r, bytes, kinds);
        else
            summary_text(o, &r, bytes, kinds);
    }
    prep_result_free(&r);
    gf_index_close(&ix);
    return status;
}

int cmd_prepare(int argc, char **argv)
{
    enum { O_NAME = 1, O_MAX_SIDE, O_FORMAT, O_RAW_BYTES, O_RAW_PIXELS, O_QUALITY, O_SUBSAMPLING,
           O_KEEP, O_SHARD_BYTES, O_SHARD_SAMPLES, O_THREADS, O_CHANNELS, O_ON_ERROR,
           O_ON_SHARD_ERROR, O_STRICTNESS, O_DECODER, O_EXTENSIONS, O_JSON, O_PLAN,
           O_PLAN_SAMPLES, O_NEED_RATE, O_IMAGE_SIZE, O_SEED, O_FIELDS };
    static const struct option longopts[] = {
        {"name", required_argument, NULL, O_NAME},
        {"max-side", required_argument, NULL, O_MAX_SIDE},
        {"format", required_argument, NULL, O_FORMAT},
        {"raw-max-bytes", required_argument, NULL, O_RAW_BYTES},
        {"raw-max-pixels", required_argument, NULL, O_RAW_PIXELS},
        {"quality", required_argument, NULL, O_QUALITY},
        {"subsampling", required_argument, NULL, O_SUBSAMPLING},
        {"keep-original", no_argument, NULL, O_KEEP},
        {"shard-bytes", required_argument, NULL, O_SHARD_BYTES},
        {"shard-samples", required_argument, NULL, O_SHARD_SAMPLES},
        {"threads", required_argument, NULL, O_THREADS},
        {"channels", required_argument, NULL, O_CHANNELS},
        {"on-error", required_argument, NULL, O_ON_ERROR},
        {"on-shard-error", required_argument, NULL, O_ON_SHARD_ERROR},
        {"strictness", required_argument, NULL, O_STRICTNESS},
        {"decoder", required_argument, NULL, O_DECODER},
        {"extensions", required_argument, NULL, O_EXTENSIONS},
        {"fields", required_argument, NULL, O_FIELDS},
        {"json", no_argument, NULL, O_JSON},
        {"plan", no_argument, NULL, O_PLAN},
        {"plan-samples", required_argument, NULL, O_PLAN_SAMPLES},
        {"need-rate", required_argument, NULL, O_NEED_RATE},
        {"image-size", required_argument, NULL, O_IMAGE_SIZE},
        {"seed", required_argument, NULL, O_SEED},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    prep_opts o = {.name = "train", .quality = 90, .subsampling = 2, .format = PREP_JPEG,
                   .raw_max_bytes = 49152, .shard_bytes = 256ull << 20, .plan_samples = 200};
    gf_default_settings(&o.s);
    int ch, by_samples = 0;
    const char *plan_only = NULL; /* a --plan option given: refused without --plan */
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_NAME: o.name = optarg; break;
        case O_MAX_SIDE: if (cli_parse_int(CMD, "max-side", optarg, 0, 65535, &o.max_side)) return CLI_USAGE; break;
        case O_FORMAT: if ((o.format = cli_parse_choice(CMD, "format", optarg, prep_format_names)) < 0) return CLI_USAGE; break;
        case O_RAW_BYTES: if (parse_bytes("raw-max-bytes", optarg, &o.raw_max_bytes)) return CLI_USAGE; break;
        case O_RAW_PIXELS: if (cli_parse_u64(CMD, "raw-max-pixels", optarg, &o.raw_max_pixels)) return CLI_USAGE; break;
        case O_QUALITY: if (cli_parse_int(CMD, "quality", optarg, 1, 100, &o.quality)) return CLI_USAGE; break;
        case O_SUBSAMPLING: if ((o.subsampling = cli_parse_choice(CMD, "subsampling", optarg, prep_subsampling_names)) < 0) return CLI_USAGE; break;
        case O_KEEP: o.keep_original = 1; break;
        case O_SHARD_BYTES: if (parse_bytes("shard-bytes", optarg, &o.shard_bytes)) return CLI_USAGE; by_samples = 0; o.shard_samples = 0; break;
        case O_SHARD_SAMPLES: if (cli_parse_u64(CMD, "shard-samples", optarg, &o.shard_samples) || !o.shard_samples) { if (!o.shard_samples) cli_error(CMD, "--shard-samples: at least 1"); return CLI_USAGE; } by_samples = 1; break;
        case O_THREADS: if (cli_parse_int(CMD, "threads", optarg, 1, 1024, &o.threads)) return CLI_USAGE; break;
        case O_CHANNELS: if (cli_parse_int(CMD, "channels", optarg, 1, 3, &o.s.channels) || o.s.channels == 2) { if (o.s.channels == 2) cli_error(CMD, "--channels: 1 or 3"); return CLI_USAGE; } break;
        case O_ON_ERROR: if (set_choice("on-error", "on_error", optarg, &o.s)) return CLI_USAGE; break;
        case O_ON_SHARD_ERROR: if (set_choice("on-shard-error", "on_shard_error", optarg, &o.s)) return CLI_USAGE; break;
        case O_STRICTNESS: if (set_choice("strictness", "strictness", optarg, &o.s)) return CLI_USAGE; break;
        case O_DECODER: if (set_choice("decoder", "decoder", optarg, &o.s)) return CLI_USAGE; break;
        case O_EXTENSIONS: if (set_choice("extensions", "extensions", optarg, &o.s)) return CLI_USAGE; break;
        case O_FIELDS: if (set_choice("fields", "fields", optarg, &o.s)) return CLI_USAGE; break;
        case O_JSON: o.json = 1; break;
        case O_PLAN: o.plan = 1; break;
        case O_PLAN_SAMPLES: plan_only = "plan-samples"; if (cli_parse_u64(CMD, "plan-samples", optarg, &o.plan_samples) || !o.plan_samples) { if (!o.plan_samples) cli_error(CMD, "--plan-samples: at least 1"); return CLI_USAGE; } break;
        case O_NEED_RATE: plan_only = "need-rate"; if (cli_parse_double(CMD, "need-rate", optarg, 1e-3, 1e9, &o.need_rate)) return CLI_USAGE; break;
        case O_IMAGE_SIZE: plan_only = "image-size"; if (cli_parse_size(CMD, "image-size", optarg, 16384, &o.s.width, &o.s.height)) return CLI_USAGE; break;
        case O_SEED: plan_only = "seed"; if (cli_parse_u64(CMD, "seed", optarg, &o.s.seed)) return CLI_USAGE; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (by_samples)
        o.shard_bytes = 0;
    if (o.plan && o.s.fields) {
        cli_error(CMD, "--fields is not a --plan option");
        return CLI_USAGE;
    }
    if (o.plan) {
        if (argc - optind != 1) {
            cli_error(CMD, "--plan takes SRC alone (it writes nothing)");
            return CLI_USAGE;
        }
        o.src = o.s.data = argv[optind];
        if (!GF_CLI_HAVE_TJ) {
            cli_error(CMD, "--plan: this build has no TurboJPEG encoder (libturbojpeg), "
                      "which the JPEG settings need");
            return CLI_USAGE;
        }
        return prep_plan(&o);
    }
    if (plan_only) {
        cli_error(CMD, "--%s is a --plan option", plan_only);
        return CLI_USAGE;
    }
    if (argc - optind != 2) {
        cli_error(CMD, argc - optind < 2 ? "missing SRC or OUT (try --help)"
                                         : "two arguments expected: SRC OUT");
        return CLI_USAGE;
    }
    o.src = argv[optind];
    o.out = argv[optind + 1];
    o.s.data = o.src;
    if (!o.name[0] || strspn(o.name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789_-") != strlen(o.name) || strlen(o.name) > 64) {
        cli_error(CMD, "--name: '%s' must be 1-64 of [A-Za-z0-9_-] (it starts each shard's "
                  "file name)", o.name);
        return CLI_USAGE;
    }
    if (o.format != PREP_RAW && !GF_CLI_HAVE_TJ) {
        cli_error(CMD, "--format %s: this build has no TurboJPEG encoder (libturbojpeg); "
                  "--format raw needs none", prep_format_names[o.format]);
        return CLI_USAGE;
    }
    return run(&o);
}
