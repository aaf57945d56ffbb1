/*
 * gpufeed verify: decodes every sample of a data set through the loader
 * (gf_verify: eval transform, tiny output size, on_error = skip, on the
 * CPU) and lists each bad sample with its reason. gf_verify is also what
 * gpufeed.verify() runs, so the two agree; this file is the options and
 * the output. Names in text lines are escaped (quote.h): a data set's
 * names must not write to the terminal; JSON keeps their bytes.
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
 * A prepared set (gpufeed prepare's OUT, as the folder or its shards'
 * pattern): first checked against its manifest.json (verify_prepared.h),
 * its "MISMATCH", "CHANGED" (the source) and "NOTE" lines and a
 * "manifest ..." summary printed before the members are decoded, since
 * that takes long; JSON has them under "manifest".
 *
 * Exit: 0 every sample decoded, 1 some were bad or a shard damaged (also all of them: the
 * loader's "epoch delivered no batch" is then the end of the list, not an
 * error) or the set does not match its manifest (a changed source does
 * not count: a warning), 2 usage or open error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"
#include "loader_options.h"
#include "quote.h"
#include "verify_prepared.h"
#include "gpufeed.h"

#define CMD "verify"
/* The shared loader options verify takes (loader_options.h). */
#define VERIFY_LOPTS                                                                       \
    (CLI_LOPT(THREADS) | CLI_LOPT(STRICTNESS) | CLI_LOPT(EXTENSIONS) | CLI_LOPT(RANK) |      \
     CLI_LOPT(WORLD) | CLI_LOPT(ON_SHARD_ERROR))
/* Settings verify decides itself (gf_verify forces an unshuffled eval
 * epoch at 32x32 on the CPU): not options, so none is taken and ignored. */
static const char *const verify_fixed[] = {
    "shuffle",   "height",    "width",     "drop_last", "scale_min",      "scale_max",
    "ratio_min", "ratio_max", "flip_prob", "device_id", "mean",           "std",
    "flip_on_device", "pinned_max_bytes", "device_max_bytes", "max_threads",
    "copy_stream_per_slot", NULL};
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
            "(L members lost)' line sums them up. A shard that could not be read at\n"
            "all (a remote shard answering 404) lists its members BAD and is named\n"
            "once as 'UNREAD shard: reason (N members)', counted as unread there.\n"
            "\n"
            "A set written by 'gpufeed prepare SRC OUT' is checked against its\n"
            "OUT/manifest.json first, given as --data OUT or as its shards\n"
            "'OUT/NAME-{000000..N}.tar': the manifest is prepare's; every shard it\n"
            "lists is there with its bytes, SHA-256 and (index sidecar) sample count,\n"
            "and no other of its name; classes.txt is its classes. Each difference is a\n"
            "'MISMATCH path: reason' line. Then the source it records: for shards or a\n"
            "list file their sizes and mtimes, for an ImageFolder its index (paths and\n"
            "labels; a file edited in place is not seen). A changed source is a\n"
            "'CHANGED path: reason' warning, one not reachable a 'NOTE' line; the set's\n"
            "members are decoded either way. A 'manifest OUT/manifest.json: ...' line\n"
            "sums it up. A folder is a prepared set when its manifest.json is\n"
            "prepare's, or cannot be read as JSON and NAME-NNNNNN.tar shards lie beside\n"
            "it (their members are then checked without it); else it is an\n"
            "ImageFolder, as before.\n"
            "Exit status: 0 none bad, 1 some bad, a shard damaged or the set not as its\n"
            "manifest lists it, 2 usage or open error.\n"
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
            "                         \"folder_dirs_again\", \"folder_walk\",\n"
            "                         \"strictness\", \"decode_warnings\", \"rank\", \"world\",\n"
            "                         \"warned_samples\": [{\"path\", \"reason\"}],\n"
            "                         \"shards\", \"shards_damaged\", \"shard_members_lost\",\n"
            "                         \"damaged_shards\": [{\"path\", \"offset\", \"reason\",\n"
            "                         \"error\", \"kept\", \"lost\"}],\n"
            "                         \"unread_shards\": [{\"path\", \"reason\", \"members\"}],\n"
            "                         \"manifest\": null, or for a prepared set {\"path\",\n"
            "                         \"readable\", \"matched\", \"shards\",\n"
            "                         \"shards_matched\", \"samples\", \"classes_matched\",\n"
            "                         \"mismatches\": [{\"path\", \"reason\"}], \"source\":\n"
            "                         unchanged|changed|unreachable|unchecked,\n"
            "                         \"source_data\", \"source_changes\", \"notes\"}}\n"
            "  -h, --help            this text\n");
}

/* The path as the user can act on it: the loader reports paths relative to
 * the data set's root (the folder, or the list file's folder). JSON gets
 * the bytes, text the escaped name. */
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
        cli_put_quoted(f, full ? full : path);
    free(full);
}

static void json_list(cli_json *j, const char *key, const gf_verify_entry *v, size_t n,
                      const char *root)
{
    cli_json_key(j, key);
    cli_json_array(j);
    for (size_t i = 0; i < n; i++) {
        cli_json_object(j);
        cli_json_key(j, "path");
        print_path(stdout, j, root, v[i].path);
        cli_json_kstr(j, "reason", v[i].reason);
        cli_json_kstr(j, "error", gf_err_name(v[i].code));
        cli_json_kint(j, "index", v[i].sample);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

/* "TAG path: reason" lines; a damaged shard's path is as given, not under
 * root (root ""). */
/* "skipped_entries": what the folder walk left out by name. */
static void json_skipped(cli_json *j, const gf_verify_result *r, const char *root)
{
    cli_json_kuint(j, "skipped_entries_total", r->skipped_entries_total);
    cli_json_key(j, "skipped_entries");
    cli_json_array(j);
    for (size_t i = 0; i < r->n_skipped_entries; i++) {
        cli_json_object(j);
        cli_json_key(j, "path");
        print_path(stdout, j, root, r->skipped_entries[i].path);
        cli_json_kstr(j, "reason", r->skipped_entries[i].reason);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

static void text_list(const char *tag, const gf_verify_entry *v, size_t n, const char *root)
{
    for (size_t i = 0; i < n; i++) {
        printf("%s ", tag);
        print_path(stdout, NULL, root, v[i].path);
        fputs(": ", stdout);
        cli_put_quoted(stdout, v[i].reason);
        putchar('\n');
    }
}

/* When a bad member's reason is its shard's own failure ("URL: HTTP 404
 * ...": the reason starts with the shard, as given, and ": "), the length
 * of that shard name in the reason; 0 when the reason is the member's.
 * The entry's path is "shard:member" relative to the data set's root, so
 * the reason's name ends with the path's shard part. */
static size_t unread_shard_len(const gf_verify_entry *e)
{
    const char *colon = strstr(e->reason, ": ");
    const char *sep = strrchr(e->path, ':');
    if (!colon || !sep)
        return 0;
    size_t r = (size_t)(colon - e->reason), q = (size_t)(sep - e->path);
    if (q == 0 || q > r || memcmp(e->reason + r - q, e->path, q) != 0 ||
        (r > q && e->reason[r - q - 1] != '/'))
        return 0;
    return r;
}

typedef struct unread_entry {
    const gf_verify_entry *e;
    size_t len;   /* the shard's name: e->reason's first len bytes */
} unread_entry;

/* By shard, then by list position (the first member's reason is shown). */
static int unread_cmp(const void *pa, const void *pb)
{
    const unread_entry *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->e->reason, b->e->reason, n);
    if (c == 0 && a->len != b->len)
        c = a->len < b->len ? -1 : 1;
    return c ? c : (a->e < b->e ? -1 : a->e > b->e);
}

/* "UNREAD shard: reason (N members)" once per shard whose members failed
 * for the shard's own reason (a remote shard answering 404, a read error),
 * text or JSON ("unread_shards"), sorted by shard; returns how many
 * shards. O(n log n) in the bad samples: a bucket that is gone fails
 * every member. */
static uint64_t list_unread(cli_json *j, const gf_verify_entry *v, size_t n)
{
    uint64_t shards = 0;
    size_t m = 0;
    unread_entry *u = n ? malloc(n * sizeof *u) : NULL;
    if (j) {
        cli_json_key(j, "unread_shards");
        cli_json_array(j);
    }
    for (size_t i = 0; u && i < n; i++)
        if ((u[m].len = unread_shard_len(&v[i])) > 0)
            u[m++].e = &v[i];
    if (m)
        qsort(u, m, sizeof *u, unread_cmp);
    for (size_t i = 0, k; i < m; i = k) {
        for (k = i + 1; k < m && u[k].len == u[i].len &&
                        memcmp(u[k].e->reason, u[i].e->reason, u[i].len) == 0;
             k++)
            ;
        size_t members = k - i;
        char *shard = strndup(u[i].e->reason, u[i].len);
        const char *why = u[i].e->reason + u[i].len + 2;
        shards++;
        if (!shard)
            continue;
        if (j) {
            cli_json_object(j);
            cli_json_kstr(j, "path", shard);
            cli_json_kstr(j, "reason", why);
            cli_json_kuint(j, "members", members);
            cli_json_object_end(j);
        } else {
            fputs("UNREAD ", stdout);
            cli_put_quoted(stdout, shard);
            fputs(": ", stdout);
            cli_put_quoted(stdout, why);
            printf(" (%zu member%s)\n", members, members == 1 ? "" : "s");
        }
        free(shard);
    }
    if (j)
        cli_json_array_end(j);
    free(u);
    return shards;
}

/* stats.folder_skipped's entries, as verify names them. */
static const char *const skipped_names[GF_SKIPPED_OTHER + 1] = {
    [GF_SKIPPED_GIF] = ".gif", [GF_SKIPPED_TGA] = ".tga", [GF_SKIPPED_PSD] = ".psd",
    [GF_SKIPPED_PNM] = ".pnm", [GF_SKIPPED_PBM] = ".pbm", [GF_SKIPPED_OTHER] = "other",
};

/* "left out of the folder: 3 .gif, 1 .tga (...), 2 other files": what the
 * extension list did not take, so that a user sees an index smaller than
 * the tree and why; then the directories not walked again (s->folder_walk
 * says which: gpufeed.h). */
static void text_skipped(const gf_stats *st, const gf_settings *s)
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
    if (st->folder_dirs_again && s->folder_walk == GF_FOLDER_WALK_TORCHVISION)
        printf("%llu links back into their own walk (loops) not followed\n",
               (unsigned long long)st->folder_dirs_again);
    else if (st->folder_dirs_again)
        printf("%llu directories reached again through links (walked once)\n",
               (unsigned long long)st->folder_dirs_again);
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

static void json_damaged(cli_json *j, const gf_verify_entry *v, size_t n)
{
    cli_json_key(j, "damaged_shards");
    cli_json_array(j);
    for (size_t i = 0; i < n; i++) {
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

/* ---- a prepared set against its manifest (verify_prepared.h) ---- */

static void text_findings(const char *tag, const cli_findings *f)
{
    for (size_t i = 0; i < f->n; i++) {
        printf("%s ", tag);
        cli_put_quoted(stdout, f->v[i].path);
        fputs(": ", stdout);
        cli_put_quoted(stdout, f->v[i].reason);
        putchar('\n');
    }
    if (f->total > f->n)
        printf("%s and %zu more (no memory to list them)\n", tag, f->total - f->n);
}

static const char *const source_text[] = {
    [CLI_SOURCE_UNCHECKED] = "source not checked",
    [CLI_SOURCE_UNCHANGED] = "source unchanged",
    [CLI_SOURCE_CHANGED] = "source changed (a warning: the set still matches its manifest)",
    [CLI_SOURCE_UNREACHABLE] = "source not reachable (not checked)",
};

/* Before the members are decoded: the user sees these at once. */
static void text_prepared(const cli_prepared *p)
{
    unsigned long long n = p->shards;
    text_findings("MISMATCH", &p->mismatches);
    text_findings("CHANGED", &p->changes);
    text_findings("NOTE", &p->notes);
    fputs("manifest ", stdout);
    cli_put_quoted(stdout, p->manifest);
    if (!p->readable)
        printf(": not readable as prepare's%s\n",
               p->data || !p->dir_form ? ": the shards are checked without it" : "");
    else if (!p->mismatches.total)
        printf(": matched: %llu shard%s (bytes, SHA-256, sample counts), %llu samples, "
               "classes.txt; %s\n", n, n == 1 ? "" : "s", (unsigned long long)p->samples,
               source_text[p->source]);
    else
        printf(": %zu mismatch%s (%llu of %llu shard%s matched, classes.txt %s); %s\n",
               p->mismatches.total, p->mismatches.total == 1 ? "" : "es",
               (unsigned long long)p->shards_ok, n, n == 1 ? "" : "s",
               p->classes_ok ? "matched" : "did not", source_text[p->source]);
    fflush(stdout);
}

static void json_findings(cli_json *j, const char *key, const cli_findings *f)
{
    cli_json_key(j, key);
    cli_json_array(j);
    for (size_t i = 0; i < f->n; i++) {
        cli_json_object(j);
        cli_json_kstr(j, "path", f->v[i].path);
        cli_json_kstr(j, "reason", f->v[i].reason);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

/* "manifest": null for a data set prepare did not write. */
static void json_prepared(cli_json *j, const cli_prepared *p)
{
    cli_json_key(j, "manifest");
    if (!p) {
        cli_json_null(j);
        return;
    }
    cli_json_object(j);
    cli_json_kstr(j, "path", p->manifest);
    cli_json_kbool(j, "readable", p->readable);
    cli_json_kbool(j, "matched", p->readable && !p->mismatches.total);
    cli_json_kuint(j, "shards", p->shards);
    cli_json_kuint(j, "shards_matched", p->shards_ok);
    cli_json_kuint(j, "samples", p->samples);
    cli_json_kbool(j, "classes_matched", p->classes_ok);
    json_findings(j, "mismatches", &p->mismatches);
    cli_json_kstr(j, "source", cli_source_names[p->source]);
    cli_json_kstr_or_null(j, "source_data", p->source_data);
    json_findings(j, "source_changes", &p->changes);
    json_findings(j, "notes", &p->notes);
    cli_json_object_end(j);
}

/* A prepared folder with no listed shard there to decode: the manifest's
 * findings are the answer. */
static int no_members(int json, const cli_prepared *p)
{
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_object(&j);
        cli_json_kuint(&j, "samples", 0);
        cli_json_kuint(&j, "bad", 0);
        json_prepared(&j, p);
        cli_json_object_end(&j);
        cli_json_end(&j);
    } else {
        printf("0 samples, 0 bad (no shard of the set to decode)\n");
    }
    return p->mismatches.total ? CLI_FAIL : CLI_OK;
}

/* An open that failed because every shard was damaged (or kept no
 * sample): each damaged shard, as when some are good, and exit 1. */
static int all_damaged(int json, const gf_verify_result *r, const cli_prepared *p)
{
    unsigned long long lost = 0;
    for (size_t i = 0; i < r->n_damaged_shards; i++) {
        unsigned long long off, kept, l;
        damage_numbers(r->damaged_shards[i].reason, &off, &kept, &l);
        lost += l;
    }
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_object(&j);
        cli_json_kuint(&j, "samples", 0);
        cli_json_kuint(&j, "bad", 0);
        cli_json_kuint(&j, "shards_damaged", r->n_damaged_shards);
        cli_json_kuint(&j, "shard_members_lost", lost);
        json_damaged(&j, r->damaged_shards, r->n_damaged_shards);
        cli_json_kstr(&j, "error", r->error);
        json_prepared(&j, p);
        cli_json_object_end(&j);
        cli_json_end(&j);
    } else {
        text_list("DAMAGED", r->damaged_shards, r->n_damaged_shards, "");
        printf("shards: %zu damaged (%llu members lost), none with a sample\n0 samples, 0 bad\n",
               r->n_damaged_shards, lost);
    }
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
    gf_verify_result *r = NULL;
    char *root = NULL;
    cli_prepared prep;
    const cli_prepared *pp = NULL;

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

    switch (cli_prepared_find(CMD, data, &prep)) {
    case -1: return CLI_USAGE;
    case 1: pp = &prep; break;
    default: break;
    }
    if (pp) {
        cli_prepared_check(&prep);
        if (prep.readable)
            cli_prepared_check_source(&prep); /* the source's, last */
        if (!json)
            text_prepared(pp);
        if (prep.dir_form) {
            if (!prep.data) {
                status = no_members(json, pp);
                goto out;
            }
            data = prep.data; /* its shards, not an ImageFolder */
        }
    }

    s.data = data;
    rc = gf_verify(&s, &r);
    if (rc == 0 && !r->opened) {
        /* No shard kept a sample: the damage is the finding. */
        status = all_damaged(json, r, pp);
        goto out;
    }
    if (rc < 0) {
        if (r && r->error[0])
            cli_error(CMD, "%s", r->error); /* the loader's message names the file */
        else
            cli_error(CMD, "%s: %s", data, gf_strerror(rc));
        status = CLI_USAGE;
        goto out;
    }
    const gf_stats st = r->stats;

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
    if (root && pp && pp->dir_form) { /* a comma list of its shards has no folder */
        free(root);
        root = malloc(strlen(pp->dir) + 2);
        if (root)
            sprintf(root, "%s%s", pp->dir, strcmp(pp->dir, "/") ? "/" : "");
    }

    uint64_t n_samples = r->samples, n_bad = r->bad;
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout);
        cli_json_object(&j);
        cli_json_kuint(&j, "samples", n_samples);
        cli_json_kuint(&j, "bad", n_bad);
        cli_json_kint(&j, "rank", st.rank);
        cli_json_kint(&j, "world", st.world);
        json_list(&j, "bad_samples", r->bad_samples, r->n_bad_samples, root ? root : "");
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
        cli_json_kstr(&j, "folder_walk", cli_folder_walk_names[s.folder_walk]);
        cli_json_kstr(&j, "strictness", cli_strictness_names[s.strictness]);
        cli_json_kuint(&j, "decode_warnings", st.decode_warnings);
        json_list(&j, "warned_samples", r->warned_samples, r->n_warned_samples,
                  root ? root : "");
        cli_json_kuint(&j, "shards", st.shards);
        cli_json_kuint(&j, "shards_damaged", st.shards_damaged);
        cli_json_kuint(&j, "shard_members_lost", st.shard_members_lost);
        json_damaged(&j, r->damaged_shards, r->n_damaged_shards);
        list_unread(&j, r->bad_samples, r->n_bad_samples);
        json_skipped(&j, r, root ? root : "");
        json_prepared(&j, pp);
        cli_json_object_end(&j);
        cli_json_end(&j);
    } else {
        text_list("SKIPPED", r->skipped_entries, r->n_skipped_entries, root ? root : "");
        if (r->skipped_entries_total > r->n_skipped_entries)
            printf("SKIPPED and %llu more\n",
                   (unsigned long long)(r->skipped_entries_total - r->n_skipped_entries));
        text_list("DAMAGED", r->damaged_shards, r->n_damaged_shards, "");
        text_list("BAD", r->bad_samples, r->n_bad_samples, root ? root : "");
        uint64_t unread = list_unread(NULL, r->bad_samples, r->n_bad_samples);
        text_list("WARN", r->warned_samples, r->n_warned_samples, root ? root : "");
        if (!st.shards && r->skipped_entries_total)
            printf("%llu entries left out of the folder where torchvision's ImageFolder would "
                   "take them (SKIPPED%s)\n", (unsigned long long)r->skipped_entries_total,
                   s.folder_walk == GF_FOLDER_WALK_TORCHVISION
                       ? ""
                       : "; --folder-walk torchvision takes them, loops aside");
        else if (st.shard_members_skipped || st.shard_keys_skipped || st.dataset_warnings) {
            /* the warning names a member */
            printf("skipped while indexing: %llu members, %llu keys (%llu warnings; first: ",
                   (unsigned long long)st.shard_members_skipped,
                   (unsigned long long)st.shard_keys_skipped,
                   (unsigned long long)st.dataset_warnings);
            cli_put_quoted(stdout, st.dataset_warning);
            fputs(")\n", stdout);
        }
        text_skipped(&st, &s);
        if (st.decode_warnings)
            printf("%llu decoded with warnings (strictness %s: not bad)\n",
                   (unsigned long long)st.decode_warnings, cli_strictness_names[s.strictness]);
        if (st.shards && unread)
            printf("shards: %llu good, %llu unread, %llu damaged (%llu members lost)\n",
                   (unsigned long long)(st.shards - st.shards_damaged - unread),
                   (unsigned long long)unread, (unsigned long long)st.shards_damaged,
                   (unsigned long long)st.shard_members_lost);
        else if (st.shards)
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
    if (r->incomplete) {
        cli_error(CMD, "%llu bad samples were counted but only %zu could be listed",
                  (unsigned long long)n_bad, r->n_bad_samples);
    }
    status = n_bad || st.shards_damaged || (pp && pp->mismatches.total) ? CLI_FAIL : CLI_OK;
out:
    gf_verify_free(&r);
    free(root);
    if (pp)
        cli_prepared_free(&prep);
    return status;
}
