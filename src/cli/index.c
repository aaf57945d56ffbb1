/*
 * `gpufeed index SHARDS`: writes each tar shard's index sidecar
 * (SHARD.idx: DALI wds2idx's v1.2 text with gpufeed's shard_bytes= and
 * labels= tokens, from gf_shard_index) beside it or into --out DIR, so a
 * remote open needs no read of the shard to index it, and a local one
 * (which reads the headers all the same) takes its member CRCs. Remote
 * shards (http(s)://, s3://) are fetched whole, one at a time, by
 * gf_shard_index_with, each request within the loader's stall, retries
 * and deadline (their --remote-* options); their sidecars can only go
 * into --out DIR, to be uploaded beside them. Main thread.
 *
 * Each sidecar is written to a temporary name in its directory, synced,
 * renamed into place and the directory synced: a killed run leaves either
 * the old sidecar or the new one, and a leftover temporary file, which no
 * open looks at (it reads SHARD.idx only).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gpufeed.h"
#include "sysinfo.h"

#define CMD "index"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed index SHARDS... [--force] [--out DIR] [--fields SPEC]\n"
            "       gpufeed index URL... --out DIR [--ca-file PEM] [--remote-stall-s N]\n"
            "                     [--remote-retries N] [--remote-deadline-s N]\n"
            "\n"
            "Writes each tar shard's index sidecar, SHARD.idx beside SHARD.tar, from\n"
            "the shard's headers: DALI wds2idx's v1.2 text (DALI's readers.webdataset\n"
            "reads it as index_paths), with the shard's size and every sample's label\n"
            "on its first line. gf_open then indexes the shard from it without\n"
            "reading the headers. SHARDS takes --data's forms: brace ranges\n"
            "(train-{000000..000127}.tar) and comma lists. A sidecar is written only\n"
            "for the samples the loader takes; a shard that cannot be indexed\n"
            "(damaged, no sample, a name the format cannot hold) is named with the\n"
            "reason and the others are still written.\n"
            "\n"
            "Remote shards (http://, https://, s3://; the same forms) are fetched\n"
            "whole, one at a time, and indexed as local ones are (the same text);\n"
            "their sidecars go into --out DIR, which a URL needs, for you to upload\n"
            "beside the shards (the last line says how). s3:// signs with the AWS_*\n"
            "variables or ~/.aws, as the loader does (AWS_ENDPOINT_URL_S3 for\n"
            "another server than AWS).\n"
            "\n"
            "options:\n"
            "  --force      rewrite sidecars that are up to date (same shard size,\n"
            "               labels recorded, not older than the shard); a remote\n"
            "               shard's is always written\n"
            "  --fields SPEC  the sample schema, as the loader's --fields / settings\n"
            "               fields (\"latent.npy,cls\": samples without an image): the\n"
            "               keys it takes get a line (default: an image and its .cls).\n"
            "               Index with the fields the set is opened with; without a\n"
            "               label field every label recorded is 0. A sidecar records no\n"
            "               schema, so with --fields every sidecar is rewritten (as --force)\n"
            "  --out DIR    write the sidecars into DIR (made if missing), named as\n"
            "               the shards; the loader reads them only beside a shard.\n"
            "               Required for URLs\n"
            "  --ca-file PEM  https: trust this CA bundle instead of the system's\n"
            "  --remote-stall-s N  URLs: seconds in which a request must bring 1 KiB,\n"
            "               else it is retried (default 30)\n"
            "  --remote-retries N  URLs: times a request cut short is resumed (default 5)\n"
            "  --remote-deadline-s N  URLs: seconds one request, its retries and resumes\n"
            "               together, may take (default 0: 20 x stall x (retries + 1))\n"
            "  -h, --help   this text\n"
            "\n"
            "exit status: 0 all indexed, 1 a shard could not be, 2 usage or setup\n");
}

/* The sidecar's path: the shard's with .idx for .tar, in out if given. */
static char *idx_path(const char *shard, const char *out)
{
    const char *base = out ? strrchr(shard, '/') : NULL;
    base = base ? base + 1 : shard;
    size_t n = strlen(base), o = out ? strlen(out) : 0;
    char *p = malloc(o + 1 + n + 1);
    if (!p)
        return NULL;
    if (out)
        snprintf(p, o + 1 + n + 1, "%s/%s", out, base);
    else
        memcpy(p, shard, n + 1);
    memcpy(p + strlen(p) - 4, ".idx", 4); /* gf_shard_paths: every name ends in .tar */
    return p;
}

/* 1 if path is a sidecar this command would write unchanged: not older
 * than the shard, its first line recording the shard's size, digests and
 * labels (one without a digest is rewritten, so an older set gains it).
 * Neither the body nor the digest's value is compared: that would cost
 * the read this skips. */
static int up_to_date(const char *path, const struct stat *shard)
{
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int ok = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
             (st.st_mtim.tv_sec > shard->st_mtim.tv_sec ||
              (st.st_mtim.tv_sec == shard->st_mtim.tv_sec &&
               st.st_mtim.tv_nsec >= shard->st_mtim.tv_nsec));
    char *line = NULL;
    size_t cap = 0;
    if (ok && getline(&line, &cap, f) > 0) {
        char want[64];
        snprintf(want, sizeof want, " shard_bytes=%llu ", (unsigned long long)shard->st_size);
        ok = strncmp(line, "v1.2 ", 5) == 0 && strstr(line, want) &&
             strstr(line, " shard_crc32c=") && strstr(line, " labels=") &&
             strstr(line, " member_crc32c=");
    } else {
        ok = 0;
    }
    free(line);
    fclose(f);
    return ok;
}

/* text into path atomically: a temporary file beside it, synced, renamed,
 * the directory synced. Returns 0 or -1 with the reason printed. */
static int write_atomic(const char *path, const char *text, size_t len)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) {
        cli_error(CMD, "out of memory");
        return -1;
    }
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    int e = fd < 0 ? errno : 0;
    size_t done = 0;
    while (!e && done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            e = w < 0 ? errno : EIO;
        else
            done += (size_t)w;
    }
    mode_t um = umask(0); /* mkstemp's 0600 to what a plain create makes */
    umask(um);
    if (!e && (fchmod(fd, 0666 & ~um) != 0 || fsync(fd) != 0))
        e = errno;
    if (fd >= 0 && close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e) {
        cli_error(CMD, "%s: %s", fd < 0 ? tmp : path, strerror(e));
        if (fd >= 0)
            unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    /* the rename itself, durable */
    char *dir = strdup(path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash)
            slash[slash == dir ? 1 : 0] = '\0';
        int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return 0;
}

static int is_remote(const char *src)
{
    return strstr(src, "://") != NULL;
}

/* Sidecar paths written this run: two shards of one name (other
 * prefixes, other servers) into one --out DIR would overwrite each other
 * silently. */
typedef struct written {
    char **p;
    size_t n, cap;
} written;

static int seen_before(const written *w, const char *idx)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->p[i], idx) == 0)
            return 1;
    return 0;
}

static int remember(written *w, char *idx)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        char **p = realloc(w->p, cap * sizeof *p);
        if (!p)
            return -1;
        w->p = p;
        w->cap = cap;
    }
    w->p[w->n++] = idx;
    return 0;
}

/* After the summary: how the sidecars written into out get beside the
 * remote shards, first_url the first of them (its prefix is named). */
static void upload_hint(const char *out, const char *first_url)
{
    const char *slash = strrchr(first_url, '/');
    int prefix = slash ? (int)(slash - first_url + 1) : 0;
    if (strncasecmp(first_url, "s3://", 5) == 0)
        printf("gpufeed index: upload the sidecars beside the shards, e.g. aws s3 cp %s/ %.*s "
               "--recursive --exclude '*' --include '*.idx'\n",
               out, prefix, first_url);
    else
        printf("gpufeed index: upload the sidecars beside the shards: copy %s/*.idx to where "
               "the server serves %.*s from\n",
               out, prefix, first_url);
}

/* --remote-stall-s and the like (ch: its getopt val) into s through the
 * settings table, so its bounds hold; -1 with "--opt: reason" printed. */
static int set_limit(gf_settings *s, int ch, const char *arg)
{
    const char *name = ch == 's' ? "remote_stall_s"
                       : ch == 'r' ? "remote_retries"
                                   : "remote_deadline_s";
    char why[320], opt[32];
    if (gf_settings_set(s, name, arg, why, sizeof why) == 0)
        return 0;
    size_t n = strlen(name);
    for (size_t i = 0; i <= n; i++)
        opt[i] = name[i] == '_' ? '-' : name[i];
    const char *reason = strncmp(why, name, n) == 0 && why[n] == ':' ? why + n + 2 : why;
    cli_error(CMD, "--%s: %s", opt, reason);
    return -1;
}

/* The arguments after the options: shards given, --out and --ca-file
 * usable, an --out for remote shards; --out made. Returns 0, or
 * CLI_USAGE with the message printed. */
static int check_args(int argc, char **argv, const char *out, const gf_shard_index_opts *opts)
{
    if (optind >= argc) {
        cli_error(CMD, "no shards given (try --help)");
        return CLI_USAGE;
    }
    if (out && *out == '\0') {
        cli_error(CMD, "--out needs a directory");
        return CLI_USAGE;
    }
    if (opts->ca_file && *opts->ca_file == '\0') {
        cli_error(CMD, "--ca-file needs a PEM file");
        return CLI_USAGE;
    }
    for (int a = optind; a < argc && !out; a++)
        if (is_remote(argv[a])) {
            /* the argument as given is shown only without userinfo */
            cli_error(CMD,
                      "%s: a remote shard's sidecar cannot be written beside it: give --out "
                      "DIR, then upload DIR's .idx files beside the shards",
                      strchr(argv[a], '@') ? "a URL" : argv[a]);
            return CLI_USAGE;
        }
    if (opts->ca_file && access(opts->ca_file, R_OK) != 0) {
        cli_error(CMD, "--ca-file %s: %s", opts->ca_file, strerror(errno));
        return CLI_USAGE;
    }
    if (out) {
        int rc = cli_mkdir_p(out);
        if (rc < 0) {
            cli_error(CMD, "--out %s: %s", out, strerror(-rc));
            return CLI_USAGE;
        }
    }
    return 0;
}

int cmd_index(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"force", no_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},
        {"ca-file", required_argument, NULL, 'c'},
        {"fields", required_argument, NULL, 'F'},
        {"remote-stall-s", required_argument, NULL, 's'},
        {"remote-retries", required_argument, NULL, 'r'},
        {"remote-deadline-s", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int force = 0, ch;
    const char *out = NULL;
    gf_shard_index_opts opts = {0};
    /* A remote shard's requests obey the loader's settings of the same
     * names (gf_shard_index_opts.remote_settings). */
    gf_settings limits;
    gf_default_settings(&limits);
    opts.remote_settings = &limits;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'f': force = 1; break;
        case 'o': out = optarg; break;
        case 'c': opts.ca_file = optarg; break;
        case 'F': opts.fields = optarg; break;
        case 's':
        case 'r':
        case 'd':
            if (set_limit(&limits, ch, optarg) < 0)
                return CLI_USAGE;
            break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (check_args(argc, argv, out, &opts) != 0)
        return CLI_USAGE;
    double t0 = cli_now();
    unsigned long long indexed = 0, current = 0, failed = 0, samples = 0, members = 0;
    written done = {0};
    char *first_url = NULL; /* of the remote shards indexed, for the hint */
    int status = CLI_OK;
    for (int a = optind; a < argc; a++) {
        char *paths = NULL, why[512];
        size_t n = 0;
        int rc = gf_shard_paths(argv[a], &paths, &n, why, sizeof why);
        if (rc != 0) {
            cli_error(CMD, "%s", why);
            status = CLI_USAGE;
            goto end;
        }
        const char *p = paths;
        for (size_t k = 0; k < n; k++, p += strlen(p) + 1) {
            char *idx = idx_path(p, out);
            struct stat st;
            int remote = is_remote(p);
            if (!idx) {
                cli_error(CMD, "out of memory");
                gf_free(paths);
                status = CLI_FAIL;
                goto end;
            }
            if (seen_before(&done, idx)) {
                cli_error(CMD,
                          "%s: not indexed: %s was written for another shard of this name in "
                          "this run (index them into different --out directories)",
                          p, idx);
                failed++;
                free(idx);
                continue;
            }
            if (!remote && !force && !opts.fields && stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
                up_to_date(idx, &st)) {
                current++;
                free(idx);
                continue;
            }
            char *text = NULL;
            size_t len = 0;
            gf_shard_index_info info;
            rc = gf_shard_index_with(p, &opts, &text, &len, &info, why, sizeof why);
            if (rc == GF_ENOMEM) {
                cli_error(CMD, "%s: out of memory", p);
                free(idx);
                gf_free(paths);
                status = CLI_FAIL;
                goto end;
            }
            if (rc == GF_EINVAL && opts.fields && strncmp(why, "fields: ", 8) == 0) {
                cli_error(CMD, "--%s", why); /* the same for every shard */
                free(idx);
                gf_free(paths);
                status = CLI_USAGE;
                goto end;
            }
            if (rc != 0) {
                cli_error(CMD, "%s (%s; no sidecar written)", why, gf_err_name(rc));
                failed++;
            } else if (write_atomic(idx, text, len) != 0) {
                failed++;
            } else {
                indexed++;
                samples += info.samples;
                members += info.members;
                if (remote && !first_url)
                    first_url = strdup(p);
                if (info.skipped_keys || info.skipped_members)
                    cli_error(CMD,
                              "%s: %llu keys and %llu members skipped, as a scan skips them "
                              "(the sidecar lists the %llu samples only)",
                              p, (unsigned long long)info.skipped_keys,
                              (unsigned long long)info.skipped_members,
                              (unsigned long long)info.samples);
            }
            gf_free(text);
            if (remember(&done, idx) < 0)
                free(idx);
        }
        gf_free(paths);
    }
    printf("gpufeed index: %llu shards indexed (%llu samples, %llu members), %llu up to date, "
           "%llu failed, in %.2f s\n",
           indexed, samples, members, current, failed, cli_now() - t0);
    if (first_url)
        upload_hint(out, first_url);
    if (failed)
        status = CLI_FAIL;
end:
    for (size_t i = 0; i < done.n; i++)
        free(done.p[i]);
    free(done.p);
    free(first_url);
    return status;
}
