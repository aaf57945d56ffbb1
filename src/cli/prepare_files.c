/* prepare's files and names: where each shard and sidecar goes, how a
 * file is made afresh without writing through a planted link, and the
 * escaped tokens of its one-line records, a file synced. A leaf:
 * prepare_write.c, prepare_journal.c and prepare_manifest.c call it,
 * none the others for these. */
#include "prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

void prep_shard_path(const prep_opts *o, uint64_t k, const char *ext, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s-%06llu.%s", o->out, o->name, (unsigned long long)k, ext);
}

FILE *prep_create(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return NULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

/* A value without spaces or newlines: %XX outside printable ASCII, and
 * '%' (the fingerprint's tokens, the journal's reasons). */
void prep_put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= ' ' || c > '~' || c == '%')
            fprintf(f, "%%%02X", c);
        else
            fputc(c, f);
    }
}

int prep_sync(FILE *f)
{
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        return -1;
    return 0;
}
