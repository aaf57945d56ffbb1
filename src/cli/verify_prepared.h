/*
 * verify on a set gpufeed prepare wrote: the set checked against its
 * manifest.json before its members are decoded.
 *
 *   verify_prepared.c  which data sets are prepared sets, the manifest
 *                      read, the shards (present, bytes, SHA-256, sample
 *                      counts of their index sidecars, none extra) and
 *                      classes.txt
 *   verify_source.c    the source's identity: is what prepare read still
 *                      there and the same
 *
 * Findings are lines for verify to print (verify.c): a mismatch with the
 * manifest fails verify; a changed source is a warning (the prepared set
 * still matches itself), an unreachable one a note. Main thread.
 */
#ifndef GF_CLI_VERIFY_PREPARED_H
#define GF_CLI_VERIFY_PREPARED_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "json_read.h"

typedef struct cli_finding {
    char *path;   /* what it is about, as a user names it */
    char *reason;
} cli_finding;

typedef struct cli_findings {
    cli_finding *v;
    size_t n, cap;
    size_t total; /* also those not stored for want of memory */
} cli_findings;

/* What verify_source.c found of the source. */
enum { CLI_SOURCE_UNCHECKED, CLI_SOURCE_UNCHANGED, CLI_SOURCE_CHANGED, CLI_SOURCE_UNREACHABLE };
extern const char *const cli_source_names[]; /* "unchecked", "unchanged", ... */

typedef struct cli_prepared {
    char *dir;        /* the set's folder, as given ("." for none) */
    char *manifest;   /* dir/manifest.json */
    char *data;       /* the members to decode when verify was given the
                         folder: the listed shards present (a brace pattern,
                         or a comma list when some are missing); NULL:
                         verify's data as given, or nothing to decode */
    int dir_form;     /* verify was given the folder */
    cli_jv *root;     /* the manifest, when it parsed */
    int readable;     /* it parsed and is prepare's (format, version) */
    const char *name; /* settings.name (root's), when readable */
    uint64_t shards, samples; /* as listed, when readable */
    uint64_t shards_ok;       /* listed shards that matched in every check */
    int classes_ok;           /* classes.txt matched */
    int source;               /* CLI_SOURCE_* */
    const char *source_data;  /* source.data (root's), when readable */
    cli_findings mismatches, changes, notes;
} cli_prepared;

/* Whether data names a prepared set: a folder holding a manifest.json
 * that is prepare's (or cannot be read as JSON, and shards named
 * NAME-NNNNNN.tar lie beside it), or tar shards whose folder holds one
 * (a pattern or one shard; a manifest there that is valid JSON of another
 * kind is not prepare's, and the shards are checked as any). Returns 1 (p
 * filled, the manifest read), 0 (not one: p is zeroed), or -1 with the
 * message printed. */
int cli_prepared_find(const char *cmd, const char *data, cli_prepared *p);
/* Every check of the set against its manifest but the source's
 * (cli_prepared_check_source, which the caller runs next where
 * p->readable: verify_source.c calls into this file, never back). */
void cli_prepared_check(cli_prepared *p);
void cli_prepared_free(cli_prepared *p);

/* verify_prepared.c's list helper, shared with verify_source.c. */
void cli_finding_add(cli_findings *f, const char *path, const char *fmt, ...)
    CLI_PRINTF(3, 4);
/* verify_source.c: sets p->source, adding changes and notes. */
void cli_prepared_check_source(cli_prepared *p);

#endif /* GF_CLI_VERIFY_PREPARED_H */
