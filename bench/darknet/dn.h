/*
 * gpufeed-darknet: trains a darknet classifier through libdarknet's public
 * API, fed by darknet's own loader or by gpufeed (bench/darknet/README in
 * gpufeed_darknet.c's opening comment). Shared declarations.
 */
#ifndef GF_DN_H
#define GF_DN_H

#include <darknet.h>
#include <gpufeed.h>

#define DN_MAX_CLASSES 4096

typedef struct dn_split {
    int n;
    char **paths;  /* absolute, as written to the darknet list */
    int *labels;   /* gpufeed's label of each */
} dn_split;

typedef struct dn_sets {
    dn_split train, val;
    int classes;
    char **labels;   /* darknet's labels file, read back by get_labels */
    char **dn_paths; /* the train list, read back by get_paths */
} dn_sets;

typedef struct dn_override {
    const char *key;
    int value; /* <= 0: keep the cfg's */
} dn_override;

void dn_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Writes WORK/labels.txt, train.list, valid.list and set.data from the two
 * ImageFolders and reads them back the way `darknet classifier` does. */
void dn_make_lists(dn_sets *ds, const char *train_dir, const char *val_dir, const char *work);
void dn_free_sets(dn_sets *ds);
/* Copies cfg `in` to `out` with the [net] keys of ov replaced. */
void dn_write_cfg(const char *in, const char *out, const dn_override *ov, int n);
/* The held-out set as float CHW rows: through darknet's validation path,
 * or gpufeed's eval transform. */
float *dn_load_val(const dn_split *val, int w, int h);
float *dn_load_val_gpufeed(const char *dir, const dn_split *val, int w, int h);
double dn_top1(network *net, const float *x, const dn_split *val, int classes);

#endif
