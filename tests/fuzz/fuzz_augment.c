/* settings.augment's spec (src/augment.c): refused with a message naming
 * the stage, or parsed into stages whose draws stay within their tables
 * and whose rectangles and ops stay within the image. The first two bytes
 * choose the output's size (1..32 a side); the rest is the spec. */
#include "augment.h"
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int w = 1 + data[0] % 32, h = 1 + data[1] % 32, c = 3;
    char *spec = malloc(size - 1);
    FUZZ_CHECK(spec);
    memcpy(spec, data + 2, size - 2);
    spec[size - 2] = '\0';
    gf__augment a;
    char why[256] = "";
    int rc = gf__augment_parse(spec, w, h, c, &a, why, sizeof why);
    free(spec);
    if (rc != 0) {
        FUZZ_CHECK(rc == GF_EINVAL && strncmp(why, "augment: ", 9) == 0);
        return 0;
    }
    FUZZ_CHECK(a.n_stages >= 0 && a.n_stages <= GF__AUG_STAGES_MAX);
    uint8_t px[32 * 32 * 3], scratch[32 * 32 * 3];
    for (uint64_t key = 0; key < 4; key++) {
        gf__aug_draw d[GF__AUG_DRAWS_MAX];
        int n = gf__augment_draws(&a, key * 0x9e3779b97f4a7c15ull, d, GF__AUG_DRAWS_MAX);
        FUZZ_CHECK(n >= 0 && n <= GF__AUG_DRAWS_MAX);
        for (int i = 0; i < n; i++)
            FUZZ_CHECK(d[i].op >= GF__JITTER_BRIGHTNESS ? d[i].op <= GF__JITTER_HUE
                                                        : d[i].op >= 0 && d[i].op < GF__OP_COUNT);
        for (size_t i = 0; i < sizeof px; i++)
            px[i] = (uint8_t)(i * 31 + key);
        gf__augment_cell(&a, key, px, scratch); /* the sanitizers watch the ops' reads */
        int ei, ej, eh, ew;
        if (gf__erase_rect(&a, key, &ei, &ej, &eh, &ew))
            FUZZ_CHECK(ei >= 0 && ej >= 0 && eh >= 0 && ew >= 0 && ei + eh <= h && ej + ew <= w);
        gf__erase_cell(&a, key, px);
    }
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char *const specs[] = {
        "\x17\x11ta_wide",
        "\x1f\x1fta_wide bins=31 interpolation=bilinear fill=1,2,3; erase p=1 value=0",
        "\x05\x09" "randaugment num_ops=3 magnitude=30; jitter brightness=0.4 hue=0.1",
        "\x10\x10" "autoaugment policy=imagenet fill=128",
        "\x01\x01" "jitter brightness=0,2 contrast=0.5,1.5 saturation=0.3 hue=-0.5,0.5",
        "\x1f\x01" "erase p=0.5 scale=0.02,0.33 ratio=0.3,3.3 value=1,2,3",
        "\x08\x08;; ta_wide ;",
    };
    char name[32];
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        snprintf(name, sizeof name, "augment-%zu", i);
        emit(name, specs[i], strlen(specs[i]));
    }
}
