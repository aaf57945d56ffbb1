#include "tu_engine.h"

#include "reader.h"

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
    gf__uring *u = NULL;
    char why[160];
    if (gf__uring_create(&u, 4, 1 << 20, why, sizeof why) < 0)
        return 0;
    gf__uring_destroy(u);
    return 1;
}
