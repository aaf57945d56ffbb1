/* main() for the fuzz targets without libFuzzer:
 *
 *   fuzz_X [--mutate N] [--seed S] [FILE|DIR ...]   run the inputs
 *   fuzz_X --write-seeds DIR                        save the seeds
 *
 * The inputs are the target's seeds and the files named (a directory: its
 * files), each run as is and then N times mutated (1 to 4 random edits:
 * bit flips, boundary bytes, digits, truncation, cut, duplicated or
 * inserted spans), deterministically in S. A failed check aborts with the
 * input saved as fuzz-crash-input in the current directory. */
#include "fuzz.h"
#include "mix.h" /* gf__splitmix64 */

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct input {
    char *name;
    uint8_t *data;
    size_t size;
} input;

static input *inputs;
static size_t n_inputs, cap_inputs;
static const char *seed_dir; /* --write-seeds */

static void add_input(const char *name, const void *data, size_t size)
{
    if (n_inputs == cap_inputs) {
        cap_inputs = cap_inputs ? 2 * cap_inputs : 16;
        inputs = realloc(inputs, cap_inputs * sizeof *inputs);
        FUZZ_CHECK(inputs);
    }
    input *in = &inputs[n_inputs++];
    in->name = strdup(name);
    in->data = malloc(size ? size : 1);
    FUZZ_CHECK(in->name && in->data);
    if (size)
        memcpy(in->data, data, size);
    in->size = size;
}

static void emit(const char *name, const void *data, size_t size)
{
    if (!seed_dir) {
        add_input(name, data, size);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", seed_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void add_file(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(1);
    }
    if (S_ISDIR(st.st_mode)) {
        struct dirent **names;
        int n = scandir(path, &names, NULL, alphasort);
        for (int i = 0; i < n; i++) {
            if (names[i]->d_name[0] != '.') {
                char sub[4096];
                snprintf(sub, sizeof sub, "%s/%s", path, names[i]->d_name);
                add_file(sub);
            }
            free(names[i]);
        }
        free(names);
        return;
    }
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    size_t got = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    add_input(path, buf, got);
    free(buf);
}

#define MIN_(a, b) ((a) < (b) ? (a) : (b))

static uint64_t rng;

static uint64_t next(void)
{
    return gf__splitmix64(&rng);
}

static size_t below(size_t n)
{
    return n ? (size_t)(next() % n) : 0;
}

/* One random edit of buf[0, *len) (capacity cap). */
static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    static const uint8_t boundary[] = {0, 1, 0x7f, 0x80, 0xff, ' ', '/', '.', '\n'};
    size_t n = *len;
    switch (below(7)) {
    case 0: /* flip a bit */
        if (n)
            buf[below(n)] ^= (uint8_t)(1u << below(8));
        break;
    case 1: /* a boundary byte */
        if (n)
            buf[below(n)] = boundary[below(sizeof boundary)];
        break;
    case 2: /* a digit (octal fields, labels, sizes) */
        if (n)
            buf[below(n)] = (uint8_t)('0' + below(10));
        break;
    case 3: /* truncate */
        *len = below(n + 1);
        break;
    case 4: { /* cut a span */
        size_t at = below(n + 1), k = below(n - at + 1);
        memmove(buf + at, buf + at + k, n - at - k);
        *len = n - k;
        break;
    }
    case 5: { /* duplicate a span (a repeated header, a longer member) */
        size_t at = below(n + 1), k = below(MIN_(n - at, cap - n) + 1);
        memmove(buf + at + k, buf + at, n - at);
        *len = n + k;
        break;
    }
    default: { /* insert random bytes */
        size_t at = below(n + 1), k = below(MIN_((size_t)64, cap - n) + 1);
        memmove(buf + at + k, buf + at, n - at);
        for (size_t i = 0; i < k; i++)
            buf[at + i] = (uint8_t)next();
        *len = n + k;
        break;
    }
    }
}

static void run(const uint8_t *data, size_t size)
{
    /* Saved first: if the target crashes, the input is in the file. One
     * descriptor, rewritten in place: a file truncated to 0 and closed is
     * flushed to the disk by ext4 (auto_da_alloc), and at tens of
     * thousands of inputs those flushes were most of a target's time. */
    static int fd = -2;
    if (fd == -2)
        fd = open("fuzz-crash-input", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && ((size && pwrite(fd, data, size, 0) != (ssize_t)size) ||
                    ftruncate(fd, (off_t)size) != 0)) {
        close(fd);
        fd = -1;
    }
    LLVMFuzzerTestOneInput(data, size);
}

int main(int argc, char **argv)
{
    long mutations = 0;
    unsigned long long seed = 1;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--mutate") && i + 1 < argc)
            mutations = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--write-seeds") && i + 1 < argc)
            seed_dir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--mutate N] [--seed S] [FILE|DIR ...]\n"
                            "       %s --write-seeds DIR\n", argv[0], argv[0]);
            return 2;
        }
    }
    fuzz_seeds(emit);
    if (seed_dir)
        return 0;
    for (; i < argc; i++)
        add_file(argv[i]);

    rng = seed;
    unsigned long runs = 0;
    for (size_t k = 0; k < n_inputs; k++) {
        input *in = &inputs[k];
        run(in->data, in->size);
        runs++;
        size_t cap = in->size * 2 + 64;
        uint8_t *buf = malloc(cap);
        FUZZ_CHECK(buf);
        for (long m = 0; m < mutations; m++) {
            size_t len = in->size;
            memcpy(buf, in->data, len);
            for (size_t e = 1 + below(4); e > 0; e--)
                mutate(buf, &len, cap);
            run(buf, len);
            runs++;
        }
        free(buf);
        free(in->data);
        free(in->name);
    }
    free(inputs);
    remove("fuzz-crash-input");
    printf("%s: %lu inputs from %zu seeds and files, no failed check\n", argv[0], runs,
           n_inputs);
    return 0;
}
