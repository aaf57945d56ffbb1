#include "fuzz.h"
#include "testutil.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

enum { MAX_TREES = 4 };
static char *trees[MAX_TREES];
static int n_trees;

static void remove_trees(void)
{
    while (n_trees > 0) {
        tu_rmrf(trees[--n_trees]);
        free(trees[n_trees]);
    }
}

void fuzz_remove_at_exit(char *path)
{
    FUZZ_CHECK(n_trees < MAX_TREES);
    if (n_trees == 0)
        atexit(remove_trees);
    trees[n_trees++] = path;
}

const char *fuzz_dir(void)
{
    static char *dir;
    if (!dir) {
        dir = tu_mkdtemp();
        fuzz_remove_at_exit(dir);
    }
    return dir;
}

const char *fuzz_file(const char *name, const void *data, size_t size)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    /* A new file, not the old one truncated: ext4 flushes a file truncated
     * to 0 to the disk when it is closed (auto_da_alloc), per input. */
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0);
    const uint8_t *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        FUZZ_CHECK(w > 0);
        p += w;
        size -= (size_t)w;
    }
    close(fd);
    return path;
}

#ifdef GF_LIBFUZZER
/* libFuzzer calls this before it reads the corpus: with
 * GPUFEED_FUZZ_SEEDS=DIR the target's seeds are written there first. */
static const char *seed_dir;

static void write_seed(const char *name, const void *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", seed_dir, name);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    seed_dir = getenv("GPUFEED_FUZZ_SEEDS");
    if (seed_dir && *seed_dir)
        fuzz_seeds(write_seed);
    return 0;
}
#endif
