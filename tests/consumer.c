/* A trainer embedding gpufeed as README.md's "Embedding" shows, built by
 * tests/install.sh against the installed header, library and gpufeed.pc
 * (shared and static, as C and as C++). It checks what a trainer relies
 * on and prints a hash of the batches, which every build must agree on.
 *
 *   consumer DATA_DIR SAMPLES CLASSES */
#include <gpufeed.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = (const unsigned char *)p;
    while (n--)
        h = (h ^ *c++) * 0x100000001b3ull;
    return h;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: consumer DATA_DIR SAMPLES CLASSES\n");
        return 2;
    }
    const long samples = atol(argv[2]);
    const int classes = atoi(argv[3]);
    const uint64_t epochs = 2;

    gf_settings s;
    gf_default_settings(&s);
    s.data = argv[1];
    s.batch_size = 4;
    s.height = s.width = 24;
    s.epochs = epochs;
    s.seed = 1234;
    s.threads = 2;
    s.device = GF_DEVICE_CPU; /* host batches: b->pixels */

    gf_loader *l;
    if (gf_open(&l, &s) < 0) {
        fprintf(stderr, "consumer: %s\n", gf_last_error(l));
        gf_close(&l);
        return 1;
    }
    char *seen = (char *)calloc((size_t)samples * epochs, 1);
    uint64_t hash = 0xcbf29ce484222325ull;
    long delivered = 0;
    gf_batch *b;
    int rc;
    while ((rc = gf_next(l, &b)) == 0) {
        for (int i = 0; i < b->count; i++) {
            const int64_t at = (int64_t)b->epoch * samples + b->indices[i];
            if (b->labels[i] < 0 || b->labels[i] >= classes || b->indices[i] < 0 ||
                b->indices[i] >= samples || b->epoch >= epochs || seen[at]++) {
                fprintf(stderr, "consumer: bad sample %d of a batch (label %d, index %lld, epoch %llu)\n",
                        i, (int)b->labels[i], (long long)b->indices[i],
                        (unsigned long long)b->epoch);
                return 1;
            }
        }
        hash = fnv1a(hash, b->pixels, (size_t)b->count * 24 * 24 * 3);
        hash = fnv1a(hash, b->labels, (size_t)b->count * sizeof *b->labels);
        delivered += b->count;
        gf_release(l, b);
    }
    if (rc != GF_EOF) {
        fprintf(stderr, "consumer: %s\n", gf_last_error(l));
        return 1;
    }
    gf_stats st;
    gf_get_stats(l, &st);
    gf_close(&l);
    free(seen);
    if (delivered != samples * (long)epochs || l != NULL) {
        fprintf(stderr, "consumer: %ld samples delivered, %ld expected\n", delivered,
                samples * (long)epochs);
        return 1;
    }
    printf("gpufeed %s: %ld samples, %llu epochs, each sample once per epoch, %d classes, "
           "batches %016llx\n",
           gf_version(), delivered, (unsigned long long)epochs, st.classes,
           (unsigned long long)hash);
    return 0;
}
