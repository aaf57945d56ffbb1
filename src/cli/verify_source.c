/*
 * A prepared set's source, against the identity its manifest records
 * (prepare_manifest.c): for tar shards and list files each file's bytes
 * and mtime, compared with stat; for an ImageFolder the index (its
 * samples' paths and labels, FNV-1a 64, with the same settings), so a
 * file added, removed or moved between classes shows, but one edited in
 * place does not: the manifest records no more. A change is a warning:
 * the prepared set still matches itself, only no longer its source. A
 * source verify cannot reach (another machine, a relative path from
 * another folder) is a note. Neither stops the member check.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gpufeed.h"
#include "prepare.h"
#include "verify_prepared.h"

static const char *relative_hint(const char *path)
{
    return path[0] == '/' ? "" : " (recorded relative to where prepare ran: looked up from here)";
}

/* ns since the epoch as "2025-01-31 12:00:00.123456789 UTC". */
static void put_time(char *buf, size_t n, int64_t ns)
{
    int64_t sec = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) { /* before 1970: floor, so the fraction counts up from the second */
        frac += 1000000000;
        sec--;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    size_t k = gmtime_r(&t, &tm) ? strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm) : 0;
    snprintf(buf + k, n - k, ".%09lld UTC", (long long)frac);
}

/* Shards or a list file: each recorded file as stat sees it now. */
static void check_files(cli_prepared *p, const cli_jv *files)
{
    size_t missing = 0, changed = 0, n = files && files->type == CLI_JV_ARRAY ? files->n : 0;
    int first_errno = 0;
    if (!n) {
        cli_finding_add(&p->notes, p->manifest, "no source files recorded: not checked");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const cli_jv *f = &files->items[k];
        const char *path = cli_jv_str(cli_jv_get(f, "path"));
        int64_t bytes, mtime;
        struct stat st;
        if (!path || cli_jv_i64(cli_jv_get(f, "bytes"), &bytes) ||
            cli_jv_i64(cli_jv_get(f, "mtime_ns"), &mtime)) {
            cli_finding_add(&p->notes, p->manifest, "source file %zu is recorded without its "
                            "path, bytes and mtime_ns: not checked", k);
            continue;
        }
        if (stat(path, &st) != 0) {
            first_errno = first_errno ? first_errno : errno;
            missing++;
            continue;
        }
        int64_t now = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        if ((int64_t)st.st_size != bytes) {
            cli_finding_add(&p->changes, path, "source changed since prepare: %lld bytes, "
                            "prepare read %lld", (long long)st.st_size, (long long)bytes);
            changed++;
        } else if (now != mtime) {
            char a[64], b[64];
            put_time(a, sizeof a, now);
            put_time(b, sizeof b, mtime);
            cli_finding_add(&p->changes, path, "source changed since prepare: modified %s, "
                            "prepare read it as of %s (the same %lld bytes)", a, b,
                            (long long)bytes);
            changed++;
        }
    }
    if (missing == n) {
        cli_finding_add(&p->notes, p->source_data, "source not reachable (%s)%s: its identity "
                        "is not checked", strerror(first_errno), relative_hint(p->source_data));
        p->source = CLI_SOURCE_UNREACHABLE;
        return;
    }
    for (size_t k = 0; missing && k < n; k++) {
        const char *path = cli_jv_str(cli_jv_get(&files->items[k], "path"));
        struct stat st;
        if (path && stat(path, &st) != 0)
            cli_finding_add(&p->changes, path, "source changed since prepare: missing (%s)",
                            strerror(errno));
    }
    p->source = missing || changed ? CLI_SOURCE_CHANGED : CLI_SOURCE_UNCHANGED;
}

/* An ImageFolder: its index again, under the manifest's settings. */
static void check_folder(cli_prepared *p, const cli_jv *src)
{
    const cli_jv *set = cli_jv_get(p->root, "settings");
    const char *hex = cli_jv_str(cli_jv_get(src, "index_fnv1a64"));
    uint64_t samples;
    int64_t classes;
    struct stat st;
    errno = 0;
    if (stat(p->source_data, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_finding_add(&p->notes, p->source_data, "source not reachable (%s)%s: its identity "
                        "is not checked", errno ? strerror(errno) : "not a folder",
                        relative_hint(p->source_data));
        p->source = CLI_SOURCE_UNREACHABLE;
        return;
    }
    if (!hex || cli_jv_u64(cli_jv_get(src, "samples"), &samples) ||
        cli_jv_i64(cli_jv_get(src, "classes"), &classes)) {
        cli_finding_add(&p->notes, p->manifest, "the source's index is not recorded: not "
                        "checked");
        return;
    }
    gf_settings s;
    gf_index *ix = NULL;
    char why[256];
    gf_default_settings(&s);
    for (int i = 0; prep_settings_kept[i]; i++) {
        const char *v = cli_jv_str(cli_jv_get(set, prep_settings_kept[i]));
        if (!v || gf_settings_set(&s, prep_settings_kept[i], v, why, sizeof why) != 0) {
            cli_finding_add(&p->notes, p->manifest, "settings.%s is not one this gpufeed "
                            "takes: the source is not checked", prep_settings_kept[i]);
            return;
        }
    }
    s.data = p->source_data;
    if (gf_index_open(&ix, &s) < 0) {
        cli_finding_add(&p->changes, p->source_data, "source changed since prepare: it no "
                        "longer opens (%s)", gf_index_last_error(ix));
        gf_index_close(&ix);
        p->source = CLI_SOURCE_CHANGED;
        return;
    }
    char now[20];
    uint64_t n = gf_index_count(ix);
    int k = gf_index_classes(ix);
    snprintf(now, sizeof now, "%016llx", (unsigned long long)prep_index_digest(ix));
    gf_index_close(&ix);
    if (n != samples || k != classes)
        cli_finding_add(&p->changes, p->source_data, "source changed since prepare: %llu "
                        "samples in %d classes now, %llu in %lld when prepared",
                        (unsigned long long)n, k, (unsigned long long)samples,
                        (long long)classes);
    else if (strcmp(now, hex) != 0)
        cli_finding_add(&p->changes, p->source_data, "source changed since prepare: the same "
                        "counts, but a sample's path or label differs (index FNV-1a 64 %s, "
                        "recorded %s)", now, hex);
    else {
        p->source = CLI_SOURCE_UNCHANGED;
        return;
    }
    p->source = CLI_SOURCE_CHANGED;
}

void cli_prepared_check_source(cli_prepared *p)
{
    const cli_jv *src = cli_jv_get(p->root, "source");
    const char *kind = cli_jv_str(cli_jv_get(src, "kind"));
    p->source_data = cli_jv_str(cli_jv_get(src, "data"));
    p->source = CLI_SOURCE_UNCHECKED;
    if (!p->source_data || !kind) {
        cli_finding_add(&p->notes, p->manifest, "no source recorded: not checked");
        return;
    }
    if (strcmp(kind, "folder") == 0)
        check_folder(p, src);
    else
        check_files(p, cli_jv_get(src, "files"));
}
