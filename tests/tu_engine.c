#include "tu_engine.h"

#include "reader.h"
#include "run_suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gf__transform transform(int w, int h, int channels, gf_transform kind, float crop_fraction)
{
    gf_settings s;
    gf_default_settings(&s);
    s.width = w;
    s.height = h;
    s.channels = channels;
    s.transform = kind;
    if (kind == GF_TRANSFORM_EVAL)
        s.crop_fraction = crop_fraction;
    gf__transform t;
    gf__transform_from_settings(&t, &s);
    return t;
}

gf__transform tu_eval_transform(int w, int h, int channels, float crop_fraction)
{
    return transform(w, h, channels, GF_TRANSFORM_EVAL, crop_fraction);
}

gf__transform tu_train_transform(int w, int h, int channels)
{
    return transform(w, h, channels, GF_TRANSFORM_TRAIN, 0);
}

int tu_uring_works(void)
{
    const char *refused = getenv("TU_URING_REFUSED");
    if (refused && strcmp(refused, "1") == 0)
        return 0;
    gf__uring *u = NULL;
    char why[160];
    if (gf__uring_create(&u, 4, 1 << 20, why, sizeof why) < 0)
        return 0;
    gf__uring_destroy(u);
    return 1;
}

TCase *tu_uring_tcase(const char *name)
{
    TCase *t = tcase_create(name);
    tcase_set_tags(t, "uring");
    return t;
}

int tu_run_suite_split(Suite *s, int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "uring") == 0) {
        if (!tu_uring_works()) {
            printf("SKIP: io_uring unavailable here\n");
            srunner_free(srunner_create(s)); /* frees the suite */
            return 77;
        }
        setenv("CK_INCLUDE_TAGS", "uring", 1);
    } else {
        setenv("CK_EXCLUDE_TAGS", "uring", 1);
    }
    return tu_run_suite(s);
}
