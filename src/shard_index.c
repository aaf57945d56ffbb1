/* The public shard-index door: gf_shard_paths (a pattern into shard
 * names) and gf_shard_index* (one shard's index sidecar text), on the
 * caller's thread (gpufeed index, the Python binding). Above both
 * indexers: a local shard goes to dataset_shards.c's gf__shard_index_fd,
 * a remote one to dataset_remote.c's gf__remote_shard_index; neither
 * calls back here. */
#include "dataset_indexers.h"

#include "config.h"
#include "fields.h"
#include "remote_url.h"
#include "settings.h"
#include "shard_pattern.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gf_shard_paths(const char *src, char **paths, size_t *n, char *why, size_t why_len)
{
    if (!src || !paths || !n)
        return GF_EINVAL;
    *paths = NULL;
    *n = 0;
    /* Remote sources expand as local ones; userinfo is refused before any
     * message could quote it (gf__remote_targets refuses it too). */
    int userinfo = 0;
    for (const char *e = src; gf__data_is_remote(src) && !userinfo; e++) {
        size_t el = strcspn(e, ",");
        userinfo = gf__url_has_userinfo(e, el);
        if (!e[el])
            break;
        e += el;
    }
    if (userinfo) {
        gf__why(why, why_len,
                "a URL with a user name or password: not taken (s3:// signs with AWS_* "
                "credentials)");
        return GF_EINVAL;
    }
    if (!gf__dataset_is_shards(src)) {
        gf__why_path(why, why_len, src, "not tar shards (each comma-separated element ends in .tar)");
        return GF_EINVAL;
    }
    gf__names names = {0};
    int rc = gf__shards_expand(src, &names, why, why_len);
    if (rc == 0) {
        *paths = names.buf; /* the names, NUL-terminated, one after another */
        *n = names.n;
        names.buf = NULL;
    }
    gf__names_free(&names);
    return rc;
}

#if GF_HAVE_REMOTE
/* The settings a remote shard index's requests read (opts.remote_settings),
 * each within its row's bounds: GF_EINVAL naming the one that is not. */
static int remote_limits_check(const gf_settings *s, char *why, size_t why_len)
{
    static const char *const names[] = {"remote_stall_s", "remote_retries", "remote_deadline_s"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int rc = gf__setting_check(gf_setting_find(names[i]), s, why, why_len);
        if (rc < 0)
            return rc;
    }
    return 0;
}
#endif

int gf_shard_index_with(const char *shard, const gf_shard_index_opts *opts, char **text,
                        size_t *len, gf_shard_index_info *info, char *why, size_t why_len)
{
    if (!shard || !text || !len)
        return GF_EINVAL;
    *text = NULL;
    *len = 0;
    if (info)
        memset(info, 0, sizeof *info);
    if (why && why_len)
        why[0] = '\0';
    for (size_t i = 0; opts && i < sizeof opts->reserved; i++)
        if (opts->reserved[i]) {
            gf__why(why, why_len,
                    "gf_shard_index_opts: reserved byte %zu is not zero (a field of a newer "
                    "gpufeed, or the struct was not zeroed)",
                    i);
            return GF_EINVAL;
        }
    /* The scan's schema, judged as the loader judges settings.fields. */
    gf__schema schema;
    const gf__schema *use = NULL;
    if (opts && opts->fields) {
        gf_settings fs;
        gf_default_settings(&fs);
        fs.fields = opts->fields;
        int rc = gf__schema_of_settings(&fs, &schema, &use, why, why_len);
        if (rc < 0)
            return rc;
    }
    if (gf__data_is_remote(shard)) {
#if GF_HAVE_REMOTE
        const gf_settings *rs = opts ? opts->remote_settings : NULL;
        int rc = rs ? remote_limits_check(rs, why, why_len) : 0;
        return rc < 0 ? rc
                      : gf__remote_shard_index(shard, opts ? opts->ca_file : NULL, rs, use, text,
                                               len, info, why, why_len);
#else
        /* Not the URL itself when it may hold a password. */
        gf__why(why, why_len,
                "%s: remote shards need libcurl: this build has the `remote` feature off "
                "(meson -Dremote=enabled)",
                strchr(shard, '@') ? "(a URL)" : shard);
        return GF_EINVAL;
#endif
    }
    int fd = open(shard, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        gf__why_path(why, why_len, shard, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return GF_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        gf__why_path(why, why_len, shard, "not a regular file");
        close(fd);
        return GF_EIO;
    }
    int rc = gf__shard_index_fd(fd, (uint64_t)st.st_size, shard, use, text, len, info, why,
                                why_len);
    close(fd);
    return rc;
}

int gf_shard_index(const char *shard, char **text, size_t *len, gf_shard_index_info *info,
                   char *why, size_t why_len)
{
    return gf_shard_index_with(shard, NULL, text, len, info, why, why_len);
}
