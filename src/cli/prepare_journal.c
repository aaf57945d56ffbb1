/*
 * prepare's journal (prepare.h): OUT/.prepare-journal, the record that
 * makes a killed run resumable. Each finished shard is a line (its source
 * range, counts, size and SHA-256), after the bad samples of its range;
 * "done N" ends a whole run. prep_journal_load reads it back, refusing
 * one with another fingerprint or a record this code did not write, and
 * cuts what a kill left after the last record; prep_write appends to it.
 * Apart from prepare_write.c because it is the resume's format and its
 * checks, not the writing of shards: the command's thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "prepare.h"

/* A completed shard's journal line. */
void prep_shard_line(char *line, size_t n, const prep_shard *sh)
{
    snprintf(line, n, "shard %llu %llu %llu %llu %llu %llu %llu %s\n",
             (unsigned long long)sh->first, (unsigned long long)sh->next,
             (unsigned long long)sh->samples, (unsigned long long)sh->bytes,
             (unsigned long long)sh->kinds[0], (unsigned long long)sh->kinds[1],
             (unsigned long long)sh->kinds[2], sh->sha256);
}

static char *unescape(const char *s)
{
    char *out = malloc(strlen(s) + 1), *p = out;
    if (!out)
        return NULL;
    for (; *s; s++) {
        unsigned v;
        if (*s == '%' && sscanf(s + 1, "%2X", &v) == 1) {
            *p++ = (char)v;
            s += 2;
        } else {
            *p++ = *s;
        }
    }
    *p = '\0';
    return out;
}

int prep_add_bad(prep_result *r, uint64_t index, int code, const char *why)
{
    prep_bad *b = realloc(r->bad, (r->n_bad + 1) * sizeof *b);
    if (!b)
        return -1;
    r->bad = b;
    b[r->n_bad] = (prep_bad){index, code, strdup(why)};
    if (!b[r->n_bad].reason)
        return -1;
    r->n_bad++;
    return 0;
}

int prep_add_shard(prep_result *r, const prep_shard *s)
{
    prep_shard *v = realloc(r->shards, (r->n_shards + 1) * sizeof *v);
    if (!v)
        return -1;
    r->shards = v;
    v[r->n_shards++] = *s;
    return 0;
}

/* OUT's journal at jpath opened for appending, never through a link
 * planted at its name; a new (or empty) one gets its magic line and the
 * fingerprint, synced. NULL with the message printed. */
FILE *prep_journal_open(const char *jpath, const char *fingerprint)
{
    struct stat jst;
    int fresh = stat(jpath, &jst) != 0 || jst.st_size == 0;
    int jfd = open(jpath, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *j = jfd >= 0 ? fdopen(jfd, "a") : NULL;
    if (!j) {
        if (jfd >= 0)
            close(jfd);
        cli_error("prepare", "%s: %s", jpath, strerror(errno));
        return NULL;
    }
    if (fresh && (fprintf(j, "%s\nfingerprint %s\n", PREP_JOURNAL_MAGIC, fingerprint) < 0 ||
                  prep_sync(j) != 0)) {
        cli_error("prepare", "%s: %s", jpath, strerror(errno));
        fclose(j);
        return NULL;
    }
    return j;
}

/* Appends the bad samples from `from` on, then `line`, and syncs. */
int prep_journal_record(FILE *j, const prep_result *r, size_t from, const char *line)
{
    for (size_t i = from; i < r->n_bad; i++) {
        fprintf(j, "bad %llu %d ", (unsigned long long)r->bad[i].index, r->bad[i].code);
        prep_put_escaped(j, r->bad[i].reason);
        fputc('\n', j);
    }
    fputs(line, j);
    return prep_sync(j);
}

/* Reads OUT's journal into r (its shards, and the bad samples before the
 * last record), checking the fingerprint and each shard's size, and cuts
 * the file after that record: what a killed run wrote after it (bad
 * samples it will find again, a line cut short) goes. Returns 1 if it
 * says the run is done, 0 if none or not done, -1 with the message
 * printed. */
int prep_journal_load(const prep_opts *o, const char *path, const char *fingerprint,
                      uint64_t total, prep_result *r, uint64_t *start)
{
    /* read and cut in place, never through a link planted at its name */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    FILE *j = fd >= 0 ? fdopen(fd, "r") : NULL;
    *start = 0;
    if (!j) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return e == ENOENT ? 0 : (cli_error("prepare", "%s: %s", path, strerror(e)), -1);
    }
    char *line = NULL;
    size_t cap = 0, kept_bad = 0;
    int done = 0, rc = 0, n = 0;
    const char *bad_record = NULL; /* rc -6: why a record cannot be this run's */
    long kept_end = 0; /* where the last record (or the fingerprint) ends */
    ssize_t got;
    while (rc == 0 && (got = getline(&line, &cap, j)) > 0) {
        if (line[got - 1] != '\n')
            break; /* cut short by a kill: not written */
        line[got - 1] = '\0';
        n++;
        prep_shard s = {0};
        unsigned long long idx;
        int code, used = 0;
        if (n == 1 && strcmp(line, PREP_JOURNAL_MAGIC) != 0)
            rc = -2;
        else if (n == 2 && (strncmp(line, "fingerprint ", 12) || strcmp(line + 12, fingerprint)))
            rc = -3;
        else if (n <= 2) {
            kept_end = ftell(j);
            continue;
        }
        else if (done)
            rc = -6, bad_record = "a record after 'done'";
        else if (sscanf(line, "bad %llu %d %n", &idx, &code, &used) == 2 && used) {
            if (idx < *start || idx >= total || code >= 0) {
                rc = -6, bad_record = idx < *start ? "a bad sample before its shard's range"
                                      : idx >= total ? "a bad sample past the source's count"
                                                     : "a bad sample without an error code";
                continue;
            }
            char *why = unescape(line + used);
            if (!why || prep_add_bad(r, idx, code, why) < 0)
                rc = -4;
            free(why);
        } else if (sscanf(line, "shard %llu %llu %llu %llu %llu %llu %llu %64s",
                          (unsigned long long *)&s.first, (unsigned long long *)&s.next,
                          (unsigned long long *)&s.samples, (unsigned long long *)&s.bytes,
                          (unsigned long long *)&s.kinds[0], (unsigned long long *)&s.kinds[1],
                          (unsigned long long *)&s.kinds[2], s.sha256) == 8) {
            /* shards are contiguous from 0, in the source, and count what
             * their range holds: anything else is not a record this code
             * wrote (and a range past the source would index past it) */
            const char *odd = s.first != *start ? "a shard not starting where the last one ended"
                              : s.next <= s.first || s.next > total
                                  ? "a shard's range empty or past the source's count"
                              : s.samples == 0 || s.samples > s.next - s.first ||
                                      s.kinds[0] + s.kinds[1] + s.kinds[2] != s.samples
                                  ? "a shard's counts not its range's"
                                  : NULL;
            if (odd) {
                rc = -6, bad_record = odd;
                continue;
            }
            char tar[4096];
            struct stat st;
            prep_shard_path(o, r->n_shards, "tar", tar, sizeof tar);
            if (stat(tar, &st) != 0 || (uint64_t)st.st_size != s.bytes) {
                cli_error("prepare", "%s: the journal %s records it as %llu bytes, but it is %s "
                          "(changed since? remove %s to start over)", tar, path,
                          (unsigned long long)s.bytes,
                          stat(tar, &st) != 0 ? strerror(errno) : "another size", o->out);
                rc = -1;
            } else if (prep_add_shard(r, &s) < 0) {
                rc = -4;
            }
            kept_bad = r->n_bad;
            kept_end = ftell(j);
            *start = s.next;
        } else if (sscanf(line, "done %llu", &idx) == 1) {
            if (idx != total || idx < *start) {
                rc = -6, bad_record = "'done' at another count than the source's";
                continue;
            }
            kept_bad = r->n_bad;
            kept_end = ftell(j);
            *start = idx;
            done = 1;
        } else {
            rc = -5;
        }
    }
    free(line);
    /* killed before its fingerprint was whole: a fresh start (kept_end 0) */
    if (rc == 0 && ftruncate(fileno(j), kept_end) != 0) {
        cli_error("prepare", "%s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(j);
    /* bad samples after the last record are found again */
    for (size_t i = kept_bad; i < r->n_bad; i++)
        free(r->bad[i].reason);
    r->n_bad = kept_bad;
    if (rc == -2 || rc == -5)
        cli_error("prepare", "%s: line %d: not a prepare journal's", path, n);
    else if (rc == -6)
        cli_error("prepare", "%s: line %d: damaged: %s (remove %s to start over)", path, n,
                  bad_record, o->out);
    else if (rc == -3)
        cli_error("prepare", "%s holds a run with other settings or another source "
                  "(its journal's fingerprint differs): use another OUT, or remove it to "
                  "start over", o->out);
    else if (rc == -4)
        cli_error("prepare", "out of memory");
    return rc < 0 ? -1 : done;
}

void prep_result_free(prep_result *r)
{
    for (size_t i = 0; i < r->n_bad; i++)
        free(r->bad[i].reason);
    free(r->bad);
    free(r->shards);
    memset(r, 0, sizeof *r);
}
