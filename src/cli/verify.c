/*
 * gpufeed verify: decodes every sample of a data set through the loader
 * (gf_verify: eval transform, tiny output size, on_error = skip, on the
 * CPU) and lists each bad sample with its reason. gf_verify is also what
 * gpufeed.verify() runs, so the two agree; this file is the options and
 * the run, verify_report.c the output. Names in text lines are escaped
 * (quote.h): a data set's names must not write to the terminal; JSON
 * keeps their bytes.
 *
 * Tar shards: bad samples are named "DIR/train-000003.tar:key.jpg"; what
 * indexing left out (members that cannot be samples, keys without an image
 * or label) is not a sample, so it does not change the exit status, but it
 * is reported from the loader's stats. Under --fields each declared field
 * is checked too: a bad member is BAD by its own name ("shard.tar:
 * key.latent.npy"), and so is a key without a field's member (beyond
 * image and label), counted as bad.
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
#include "data_option.h"
#include "loader_options.h"
#include "verify_prepared.h"
#include "verify_report.h"
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
            "indexing' line but are not samples. With --fields every declared field\n"
            "of every sample is checked: a bad member, or a key without one, is BAD\n"
            "as 'shard.tar:KEY.ext: field 'EXT': reason'. A damaged shard is listed as\n"
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
            "  --data DIR            data set (required; quote brace patterns); more\n"
            "                        than once: a mix of them, every sample of each\n"
            "                        checked\n"
            CLI_DATA_WEIGHTS_HELP);
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

/* Root for printing: DIR itself, or the list file's folder. Shard
 * samples are named by the shard's base name, so the root is the
 * folder of the pattern when there is one folder (no ',' and no brace
 * before the last '/'), else nothing. A prepared set's folder for its
 * shards. malloc'd, or NULL out of memory. */
static char *print_root(const char *data, const gf_stats *st, const cli_prepared *pp)
{
    char *root = strdup(data);
    if (root) {
        struct stat sb;
        char *slash = strrchr(root, '/');
        if (st->shards > 0) {
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
    return root;
}

int cmd_verify(int argc, char **argv)
{
    static const struct option own[] = {
        {"data", required_argument, NULL, 'd'},
        {"weights", required_argument, NULL, 'w'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const struct option *longopts = cli_options(own, VERIFY_LOPTS, verify_fixed);
    const char *data = NULL;
    /* Static: what an early return leaves is still reachable, not lost. */
    static cli_data given;
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
        case 'd': if (cli_data_add(CMD, "data", &given, optarg)) return CLI_USAGE; break;
        case 'w': given.weights = optarg; break;
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
    if (cli_data_text(CMD, "data", &given, &data) < 0)
        return CLI_USAGE;
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

    /* A mix's sources are checked as the loader reads them: its paths are
     * the library's own (no one root), and no source's manifest is read. */
    int mix = strncmp(data, "mix:", 4) == 0;
    switch (mix ? 0 : cli_prepared_find(CMD, data, &prep)) {
    case -1: return CLI_USAGE;
    case 1: pp = &prep; break;
    default: break;
    }
    if (pp) {
        cli_prepared_check(&prep);
        if (prep.readable)
            cli_prepared_check_source(&prep); /* the source's, last */
        if (!json)
            verify_text_prepared(pp);
        if (prep.dir_form) {
            if (!prep.data) {
                status = verify_no_members(json, pp);
                goto out;
            }
            data = prep.data; /* its shards, not an ImageFolder */
        }
    }

    s.data = data;
    rc = gf_verify(&s, &r);
    if (rc == 0 && !r->opened) {
        /* No shard kept a sample: the damage is the finding. */
        status = verify_all_damaged(json, r, pp);
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

    root = mix ? strdup("") : print_root(data, &st, pp);

    uint64_t n_bad = r->bad;
    verify_report(json, r, &s, root, pp);
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
    cli_data_free(&given);
    return status;
}
