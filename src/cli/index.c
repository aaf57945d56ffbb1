/*
 * `gpufeed index SHARDS`: writes each tar shard's index sidecar
 * (SHARD.idx: DALI wds2idx's v1.2 text with gpufeed's shard_bytes= and
 * labels= tokens, from gf_shard_index) beside it or into --out DIR, so a
 * later open reads the sidecar instead of every header, and a remote
 * open will need no read of the shard to index it. Main thread.
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
            "usage: gpufeed index SHARDS... [--force] [--out DIR]\n"
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
            "options:\n"
            "  --force      rewrite sidecars that are up to date (same shard size,\n"
            "               labels recorded, not older than the shard)\n"
            "  --out DIR    write the sidecars into DIR (made if missing), named as\n"
            "               the shards; the loader reads them only beside a shard\n"
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
 * than the shard, its first line recording the shard's size and labels.
 * The body is not compared: that would cost the scan this skips. */
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
        ok = strncmp(line, "v1.2 ", 5) == 0 && strstr(line, want) && strstr(line, " labels=");
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

int cmd_index(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"force", no_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int force = 0, ch;
    const char *out = NULL;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'f': force = 1; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        cli_error(CMD, "no shards given (try --help)");
        return CLI_USAGE;
    }
    for (int a = optind; a < argc; a++)
        if (is_remote(argv[a])) {
            cli_error(CMD,
                      "%s: remote shards cannot be indexed yet: remote indexing arrives with "
                      "the remote reader (index a local copy, then place SHARD.idx beside "
                      "SHARD.tar)",
                      argv[a]);
            return CLI_USAGE;
        }
    if (out && *out == '\0') {
        cli_error(CMD, "--out needs a directory");
        return CLI_USAGE;
    }
    if (out) {
        int rc = cli_mkdir_p(out);
        if (rc < 0) {
            cli_error(CMD, "--out %s: %s", out, strerror(-rc));
            return CLI_USAGE;
        }
    }
    double t0 = cli_now();
    unsigned long long indexed = 0, current = 0, failed = 0, samples = 0, members = 0;
    for (int a = optind; a < argc; a++) {
        char *paths = NULL, why[512];
        size_t n = 0;
        int rc = gf_shard_paths(argv[a], &paths, &n, why, sizeof why);
        if (rc != 0) {
            cli_error(CMD, "%s", why);
            return CLI_USAGE;
        }
        const char *p = paths;
        for (size_t k = 0; k < n; k++, p += strlen(p) + 1) {
            char *idx = idx_path(p, out);
            struct stat st;
            if (!idx) {
                cli_error(CMD, "out of memory");
                gf_free(paths);
                return CLI_FAIL;
            }
            if (!force && stat(p, &st) == 0 && S_ISREG(st.st_mode) && up_to_date(idx, &st)) {
                current++;
                free(idx);
                continue;
            }
            char *text = NULL;
            size_t len = 0;
            gf_shard_index_info info;
            rc = gf_shard_index(p, &text, &len, &info, why, sizeof why);
            if (rc == GF_ENOMEM) {
                cli_error(CMD, "%s: out of memory", p);
                free(idx);
                gf_free(paths);
                return CLI_FAIL;
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
                if (info.skipped_keys || info.skipped_members)
                    cli_error(CMD,
                              "%s: %llu keys and %llu members skipped, as a scan skips them "
                              "(the sidecar lists the %llu samples only)",
                              p, (unsigned long long)info.skipped_keys,
                              (unsigned long long)info.skipped_members,
                              (unsigned long long)info.samples);
            }
            gf_free(text);
            free(idx);
        }
        gf_free(paths);
    }
    printf("gpufeed index: %llu shards indexed (%llu samples, %llu members), %llu up to date, "
           "%llu failed, in %.2f s\n",
           indexed, samples, members, current, failed, cli_now() - t0);
    return failed ? CLI_FAIL : CLI_OK;
}
