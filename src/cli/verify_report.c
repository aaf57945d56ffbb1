/*
 * gpufeed verify's output (verify_report.h): what gf_verify found, as
 * text lines or one JSON object. Text lines escape names (quote.h): a
 * data set's names must not write to the terminal; JSON keeps their
 * bytes. Bad samples and warnings by path under the data set's root;
 * damaged shards with their numbers parsed back from the reason; shards
 * that could not be read at all named once each; what indexing skipped;
 * a prepared set's findings against its manifest. Apart from verify.c,
 * which is the options and the run, because this is the one place that
 * decides what verify prints: the command's thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "loader_options.h"
#include "quote.h"
#include "verify_prepared.h"
#include "verify_report.h"
#include "gpufeed.h"

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
void verify_text_prepared(const cli_prepared *p)
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
int verify_no_members(int json, const cli_prepared *p)
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
int verify_all_damaged(int json, const gf_verify_result *r, const cli_prepared *p)
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

/* The JSON object of a run that opened. */
static void report_json(const gf_verify_result *r, const gf_settings *s, const char *root,
                        const cli_prepared *pp)
{
    const gf_stats st = r->stats;
    uint64_t n_samples = r->samples, n_bad = r->bad;
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
    cli_json_kstr(&j, "extensions", cli_extensions_names[s->extensions]);
    cli_json_key(&j, "skipped_extensions");
    cli_json_object(&j);
    for (int k = 0; k <= GF_SKIPPED_OTHER; k++)
        cli_json_kuint(&j, skipped_names[k], st.folder_skipped[k]);
    cli_json_object_end(&j);
    cli_json_kuint(&j, "folder_dirs_again", st.folder_dirs_again);
    cli_json_kstr(&j, "folder_walk", cli_folder_walk_names[s->folder_walk]);
    cli_json_kstr(&j, "strictness", cli_strictness_names[s->strictness]);
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
}

/* The text lines of a run that opened, the summary last. */
static void report_text(const gf_verify_result *r, const gf_settings *s, const char *root)
{
    const gf_stats st = r->stats;
    uint64_t n_samples = r->samples, n_bad = r->bad;
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
               s->folder_walk == GF_FOLDER_WALK_TORCHVISION
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
    text_skipped(&st, s);
    if (st.decode_warnings)
        printf("%llu decoded with warnings (strictness %s: not bad)\n",
               (unsigned long long)st.decode_warnings, cli_strictness_names[s->strictness]);
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

void verify_report(int json, const gf_verify_result *r, const gf_settings *s, const char *root,
                   const cli_prepared *pp)
{
    if (json)
        report_json(r, s, root, pp);
    else
        report_text(r, s, root);
}
