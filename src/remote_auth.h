/* AWS credentials, region and S3 endpoint, found as the AWS CLI finds
 * them, for s3:// shards. No libcurl here: always built. On gf_open's
 * thread; read-only once loaded.
 *
 * Only static keys are read (environment, shared files). Roles
 * (role_arn), credential_process, SSO, web identity, the container and
 * instance metadata services are not, nor anonymous access to public
 * buckets: later options. */
#ifndef GF_REMOTE_AUTH_H
#define GF_REMOTE_AUTH_H

#include "common.h"

/* Every string in one block, zeroed (explicit_bzero) when freed. */
typedef struct gf__remote_auth {
    const char *access_key;    /* NULL: none found (need_credentials 0) */
    const char *secret_key;    /* with access_key; never in a message */
    const char *session_token; /* NULL: none; never in a message */
    const char *region;        /* always set: [a-z0-9-], us-east-1 at the least */
    const char *endpoint;      /* the S3 endpoint, "http(s)://host[:port][/path]"
                                  without a trailing '/', or NULL: AWS's */
    const char *creds_from;    /* where the keys came from, for messages:
                                  "environment" or "FILE [section]"; NULL: none */
    char *block;
    size_t block_len;
} gf__remote_auth;

/* Fills *a from, in the AWS CLI's order:
 *  - credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
 *    AWS_SESSION_TOKEN); else the profile AWS_PROFILE (default "default")
 *    in AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials ([NAME]), then
 *    in AWS_CONFIG_FILE or ~/.aws/config ([profile NAME], or [default] /
 *    [profile default]): aws_access_key_id, aws_secret_access_key,
 *    aws_session_token, the pair from one file; an AWS_PROFILE that
 *    neither file has is an error, as in the CLI (even with keys in the
 *    environment);
 *  - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`
 *    (the credentials file's, then the config file's), else us-east-1;
 *  - endpoint: unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true,
 *    AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `services`
 *    section's `s3 =` / `  endpoint_url =`, the profile's `endpoint_url`.
 * Files: at most 1 MiB; full-line comments ('#', ';'), `[section]`,
 * `key = value` (whitespace around both trimmed; no inline comments, as
 * the CLI's parser), indented `key = value` under a key with no value
 * (a sub-section). A file that cannot be read is skipped, unless an
 * environment variable named it; a malformed one is an error (file and
 * line, never the line's text).
 * need_credentials: no keys found is GF_EINVAL naming where it looked.
 * Returns 0, GF_EINVAL (why says which variable, file or line; never a
 * secret) or GF_ENOMEM. On failure *a holds nothing. */
int gf__remote_auth_load(gf__remote_auth *a, int need_credentials, char *why, size_t why_len);

/* Zeroes and frees what load made; NULL-safe, twice-safe. */
void gf__remote_auth_free(gf__remote_auth *a);

/* Rewrites msg in place so that it carries no credential: a's secret and
 * session token (when a is not NULL) become "<redacted>", and so does
 * (whole, or its first bytes ending a message cut short) and
 * the value after any "Authorization:", "X-Amz-Security-Token" /
 * "x-amz-security-token:" or "X-Amz-Signature=" (any case). For messages
 * built from curl's error buffer or a server's reply; msg stays
 * NUL-terminated within len. */
void gf__remote_redact(char *msg, size_t len, const gf__remote_auth *a);

#endif
