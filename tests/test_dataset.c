/* Dataset index: ImageFolder trees (torchvision order) and list files. */
#include "dataset.h"
#include "testutil.h"
#include "run_suite.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char *root;

static void setup(void)
{
    root = tu_mkdtemp();
}

static void teardown(void)
{
    tu_rmrf(root);
    free(root);
    root = NULL;
}

/* Writes a small file at root/rel (parents created). */
static void touch(const char *rel)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    tu_write_text(p, "x");
}

static void mkdir_rel(const char *rel)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

static char *at_root(const char *rel)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    return p;
}

static void open_ok(gf__dataset *ds, const char *src)
{
    char why[512];
    int rc = gf__dataset_open(ds, src, why, sizeof why);
    ck_assert_msg(rc == 0, "open %s: %d %s", src, rc, why);
}

/* Opens src, expects GF_EDATASET, returns the why. */
static const char *open_fails(const char *src)
{
    static char why[512];
    gf__dataset ds;
    int rc = gf__dataset_open(&ds, src, why, sizeof why);
    ck_assert_msg(rc == GF_EDATASET, "open %s: %d, expected GF_EDATASET", src, rc);
    ck_assert_ptr_null(ds.arena);
    ck_assert_int_eq(ds.root_fd, -1);
    gf__dataset_close(&ds);
    return why;
}

static void assert_sample(const gf__dataset *ds, uint64_t i, const char *path, int label)
{
    ck_assert_uint_lt(i, ds->n);
    ck_assert_str_eq(gf__dataset_path(ds, i), path);
    ck_assert_int_eq(ds->labels[i], label);
}

/* ---- ImageFolder ---- */

START_TEST(folder_classes_are_sub_directories_in_sorted_order)
{
    touch("b/1.jpg");
    touch("a/1.jpg");
    touch("c10/1.jpg");
    touch("c9/1.jpg");
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_int_eq(ds.n_classes, 4);
    ck_assert_str_eq(ds.class_names[0], "a");
    ck_assert_str_eq(ds.class_names[1], "b");
    ck_assert_str_eq(ds.class_names[2], "c10");
    ck_assert_str_eq(ds.class_names[3], "c9");
    ck_assert_uint_eq(ds.n, 4);
    assert_sample(&ds, 0, "a/1.jpg", 0);
    assert_sample(&ds, 1, "b/1.jpg", 1);
    assert_sample(&ds, 2, "c10/1.jpg", 2);
    assert_sample(&ds, 3, "c9/1.jpg", 3);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_class_order_is_byte_order)
{
    touch("a/1.png");
    touch("B/1.png"); /* 'B' < 'a' */
    touch("_x/1.png"); /* 'B' < '_' < 'a' */
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_str_eq(ds.class_names[0], "B");
    ck_assert_str_eq(ds.class_names[1], "_x");
    ck_assert_str_eq(ds.class_names[2], "a");
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_files_are_sorted_within_a_class)
{
    touch("cat/img10.jpg");
    touch("cat/img2.jpg");
    touch("cat/img1.jpg");
    touch("cat/Zebra.jpg");
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 4);
    assert_sample(&ds, 0, "cat/Zebra.jpg", 0);
    assert_sample(&ds, 1, "cat/img1.jpg", 0);
    assert_sample(&ds, 2, "cat/img10.jpg", 0);
    assert_sample(&ds, 3, "cat/img2.jpg", 0);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_nested_files_follow_torchvision_walk_order)
{
    /* sorted(os.walk()) orders by directory path string, then file name:
     * "a/sub" < "a/sub-x" < "a/sub/deeper" because '-' < '/'. */
    touch("a/z.jpg");
    touch("a/sub/b.png");
    touch("a/sub-x/c.jpg");
    touch("a/sub/deeper/d.jpg");
    touch("a/sub/deeper/e/f.jpg");
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 5);
    assert_sample(&ds, 0, "a/z.jpg", 0);
    assert_sample(&ds, 1, "a/sub/b.png", 0);
    assert_sample(&ds, 2, "a/sub-x/c.jpg", 0);
    assert_sample(&ds, 3, "a/sub/deeper/d.jpg", 0);
    assert_sample(&ds, 4, "a/sub/deeper/e/f.jpg", 0);
    gf__dataset_close(&ds);
}
END_TEST

/* Hidden entries are taken as torchvision takes them: a hidden directory
 * beside the classes is a class (".git" sorts first: label 0), hidden files
 * and directories in a class are samples and walked. */
START_TEST(folder_takes_hidden_entries_and_skips_non_image_files)
{
    touch("a/keep.jpg");
    touch("a/UPPER.JPEG");
    touch("a/mixed.PnG");
    touch("a/.hidden.jpg");
    touch("a/.hiddendir/x.jpg");
    touch("a/notes.txt");
    touch("a/archive.jpg.bak");
    touch("a/jpg");
    touch("a/x.webp");
    touch("a/y.tiff");
    touch(".git/z.jpg"); /* hidden class */
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_int_eq(ds.n_classes, 2);
    ck_assert_str_eq(ds.class_names[0], ".git");
    ck_assert_str_eq(ds.class_names[1], "a");
    ck_assert_uint_eq(ds.n, 8);
    assert_sample(&ds, 0, ".git/z.jpg", 0);
    assert_sample(&ds, 1, "a/.hidden.jpg", 1);
    assert_sample(&ds, 2, "a/UPPER.JPEG", 1);
    assert_sample(&ds, 3, "a/keep.jpg", 1);
    assert_sample(&ds, 4, "a/mixed.PnG", 1);
    assert_sample(&ds, 5, "a/x.webp", 1);
    assert_sample(&ds, 6, "a/y.tiff", 1);
    assert_sample(&ds, 7, "a/.hiddendir/x.jpg", 1);
    ck_assert_uint_eq(ds.warnings, 0);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_ignores_files_in_the_root)
{
    touch("stray.jpg");
    touch("dog/1.jpg");
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 1);
    assert_sample(&ds, 0, "dog/1.jpg", 0);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_keeps_an_empty_class_so_labels_match_its_position)
{
    touch("a/1.jpg");
    mkdir_rel("b");
    touch("c/1.jpg");
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_int_eq(ds.n_classes, 3);
    assert_sample(&ds, 1, "c/1.jpg", 2);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_follows_symlinks_but_not_loops)
{
    touch("a/1.jpg");
    touch("a/z/real/2.jpg");
    ck_assert_int_eq(symlink("..", at_root("a/loop")), 0);            /* to the root */
    ck_assert_int_eq(symlink(".", at_root("a/self")), 0);             /* to itself */
    ck_assert_int_eq(symlink("z/real", at_root("a/linked")), 0);
    ck_assert_int_eq(symlink("1.jpg", at_root("a/alias.jpg")), 0);
    ck_assert_int_eq(symlink("missing.jpg", at_root("a/dangling.jpg")), 0);
    gf__dataset ds;
    open_ok(&ds, root);
    /* a/loop reaches the root: not walked. */
    ck_assert_int_eq(ds.n_classes, 1);
    int found_linked = 0, found_alias = 0, found_dangling = 0;
    for (uint64_t i = 0; i < ds.n; i++) {
        const char *p = gf__dataset_path(&ds, i);
        ck_assert_msg(strncmp(p, "a/self/", 7) != 0, "walked a self link: %s", p);
        ck_assert_msg(strncmp(p, "a/loop/", 7) != 0, "walked a loop: %s", p);
        ck_assert_msg(strncmp(p, "a/z/real/", 9) != 0, "walked a directory twice: %s", p);
        found_linked += strcmp(p, "a/linked/2.jpg") == 0;
        found_alias += strcmp(p, "a/alias.jpg") == 0;
        found_dangling += strcmp(p, "a/dangling.jpg") == 0;
    }
    ck_assert_int_eq(found_linked, 1);
    ck_assert_int_eq(found_alias, 1);
    ck_assert_int_eq(found_dangling, 1);
    gf__dataset_close(&ds);
}
END_TEST

/* 30 levels of two links each to the next level: os.walk would list the
 * last level's file 2^30 times. Each directory is walked once: every file
 * is indexed once, and the second link of each level is counted. */
START_TEST(folder_walks_each_directory_once_through_a_link_graph)
{
    enum { LEVELS = 30 };
    char rel[64], to[64];
    for (int k = 1; k <= LEVELS; k++) {
        snprintf(rel, sizeof rel, "c/z/L%d/%d.jpg", k, k); /* z: walked after a and b */
        touch(rel);
    }
    for (int k = 0; k < LEVELS; k++)
        for (int link = 0; link < 2; link++) {
            if (k)
                snprintf(rel, sizeof rel, "c/z/L%d/%c", k, "ab"[link]);
            else
                snprintf(rel, sizeof rel, "c/%c", "ab"[link]);
            snprintf(to, sizeof to, "%sL%d", k ? "../" : "z/", k + 1);
            ck_assert_int_eq(symlink(to, at_root(rel)), 0);
        }
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, LEVELS);
    ck_assert_uint_eq(ds.dirs, 2 + LEVELS);       /* c, each level once, z */
    ck_assert_uint_eq(ds.dirs_again, 2 * LEVELS); /* each second link, each z/Lk */
    for (uint64_t i = 0; i < ds.n; i++) {
        /* Reached through the first link of each level: c/a/a/.../k.jpg. */
        const char *p = gf__dataset_path(&ds, i), *q = p + 1;
        int depth = 0;
        while (strncmp(q, "/a", 2) == 0)
            q += 2, depth++;
        ck_assert_msg(p[0] == 'c' && depth >= 1 && depth <= LEVELS, "path %s", p);
        snprintf(rel, sizeof rel, "/%d.jpg", depth);
        ck_assert_str_eq(q, rel);
        ck_assert_int_eq(ds.labels[i], 0);
    }
    gf__dataset_close(&ds);
}
END_TEST

/* Sub-directories beyond GF_FOLDER_MAX_DEPTH levels below a class: the
 * walk stops, and gf_open's message names the directory where it did. */
START_TEST(folder_deeper_than_the_cap_is_a_dataset_error_naming_where)
{
    char rel[4096] = "c", deepest[4096] = "";
    touch("c/1.jpg");
    for (int k = 1; k <= GF_FOLDER_MAX_DEPTH + 1; k++) {
        if (k == GF_FOLDER_MAX_DEPTH)
            snprintf(deepest, sizeof deepest, "%s/%s/d", root, rel);
        strcat(rel, "/d");
        mkdir_rel(rel);
    }
    const char *why = open_fails(root);
    ck_assert_msg(strstr(why, deepest) && strstr(why, "64 levels below the class"), "%s", why);

    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_EDATASET);
    ck_assert_msg(strstr(gf_last_error(l), deepest), "%s", gf_last_error(l));
    gf_close(&l);

    /* One level less is a data set. */
    ck_assert_int_eq(rmdir(at_root(rel)), 0);
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_uint_eq(ds.dirs, 1 + GF_FOLDER_MAX_DEPTH);
    gf__dataset_close(&ds);
}
END_TEST

/* The entry cap (GF_FOLDER_MAX_ENTRIES; lowered here) stops the walk
 * where it is reached, naming the directory. */
START_TEST(folder_over_the_entry_cap_is_a_dataset_error_naming_where)
{
    touch("a/1.jpg");
    touch("b/1.jpg");
    touch("b/2.jpg");
    touch("b/x/3.jpg");
    gf__dataset_opts o;
    gf__dataset_default_opts(&o);
    ck_assert_uint_eq(o.max_entries, GF_FOLDER_MAX_ENTRIES);
    o.max_entries = 5; /* a/1.jpg, b/1.jpg, b/2.jpg, b/x, b/x/3.jpg */
    gf__dataset ds;
    char why[512];
    ck_assert_int_eq(gf__dataset_open_with(&ds, root, &o, why, sizeof why), 0);
    ck_assert_uint_eq(ds.n, 4);
    gf__dataset_close(&ds);
    o.max_entries = 4;
    ck_assert_int_eq(gf__dataset_open_with(&ds, root, &o, why, sizeof why), GF_EDATASET);
    char want[4200];
    snprintf(want, sizeof want, "%s/b/x: the tree has over 4 entries", root);
    ck_assert_msg(strstr(why, want), "%s", why);
    ck_assert_ptr_null(ds.arena);
}
END_TEST

/* Default extensions are torchvision's: .gif .tga .psd .pnm .pbm files are
 * left out (and counted), so indices and labels match a PyTorch run; a
 * class of only such files stays, empty, at its place. GF_EXT_ALL takes
 * them. */
START_TEST(folder_extensions_default_to_torchvisions_list)
{
    static const char *const files[] = {"a/1.jpg", "a/2.gif", "a/3.tga", "a/4.PSD", "a/5.pnm",
                                        "a/6.pbm", "a/7.tif", "a/notes.txt", "b/1.GIF",
                                        "c/1.Png", "c/2.ppm"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        touch(files[i]);
    gf__dataset ds;
    open_ok(&ds, root); /* gf__dataset_open: the defaults */
    ck_assert_int_eq(ds.n_classes, 3);
    ck_assert_uint_eq(ds.n, 4);
    assert_sample(&ds, 0, "a/1.jpg", 0);
    assert_sample(&ds, 1, "a/7.tif", 0);
    assert_sample(&ds, 2, "c/1.Png", 2);
    assert_sample(&ds, 3, "c/2.ppm", 2);
    static const uint64_t skipped[GF_SKIPPED_MAX] = {
        [GF_SKIPPED_GIF] = 2, [GF_SKIPPED_TGA] = 1, [GF_SKIPPED_PSD] = 1,
        [GF_SKIPPED_PNM] = 1, [GF_SKIPPED_PBM] = 1, [GF_SKIPPED_OTHER] = 1};
    for (int k = 0; k < GF_SKIPPED_MAX; k++)
        ck_assert_msg(ds.skipped_ext[k] == skipped[k], "skipped[%d] = %llu", k,
                      (unsigned long long)ds.skipped_ext[k]);
    gf__dataset_close(&ds);

    gf__dataset_opts o;
    gf__dataset_default_opts(&o);
    o.extensions = GF_EXT_ALL;
    char why[512];
    ck_assert_int_eq(gf__dataset_open_with(&ds, root, &o, why, sizeof why), 0);
    ck_assert_uint_eq(ds.n, 10);
    static const char *const all[] = {"a/1.jpg", "a/2.gif", "a/3.tga", "a/4.PSD", "a/5.pnm",
                                      "a/6.pbm", "a/7.tif", "b/1.GIF", "c/1.Png", "c/2.ppm"};
    static const int labels[] = {0, 0, 0, 0, 0, 0, 0, 1, 2, 2};
    for (uint64_t i = 0; i < ds.n; i++)
        assert_sample(&ds, i, all[i], labels[i]);
    for (int k = 0; k < GF_SKIPPED_MAX; k++)
        ck_assert_uint_eq(ds.skipped_ext[k], k == GF_SKIPPED_OTHER);
    gf__dataset_close(&ds);
}
END_TEST

/* Real-file misses (issue 26): a macOS AppleDouble file named like an
 * image ("._x.jpg") and a directory link to itself were left out without
 * a word. Both are counted and named, in walk order, also through the
 * loader (gf_skipped_entry, what verify prints). */
START_TEST(folder_appledouble_files_and_link_loops_are_counted_and_named)
{
    touch("a/x.jpg");
    touch("a/._x.jpg");
    touch("a/.hidden.jpg"); /* other hidden files are samples, as in torchvision */
    char p[4200];
    snprintf(p, sizeof p, "%s/a/loop", root);
    ck_assert_int_eq(symlink(".", p), 0);
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 2);
    ck_assert_uint_eq(ds.skipped_ext[GF_SKIPPED_APPLEDOUBLE], 1);
    ck_assert_uint_eq(ds.dirs_again, 1);
    ck_assert_uint_eq(ds.n_named_skips, 2);
    ck_assert_str_eq(ds.named_skips[0].path, "a/._x.jpg");
    ck_assert_int_eq(ds.named_skips[0].kind, GF__SKIP_APPLEDOUBLE);
    ck_assert_str_eq(ds.named_skips[1].path, "a/loop");
    ck_assert_int_eq(ds.named_skips[1].kind, GF__SKIP_DIR_AGAIN);
    ck_assert_uint_eq(ds.warnings, 2);
    ck_assert_msg(strncmp(ds.warning, "a/._x.jpg: a macOS AppleDouble", 30) == 0, "%s",
                  ds.warning);
    gf__dataset_close(&ds);

    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.width = s.height = 4;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    const char *path = NULL, *reason = NULL;
    ck_assert_uint_eq(gf_skipped_entry(l, 0, &path, &reason), 2);
    ck_assert_str_eq(path, "a/._x.jpg");
    ck_assert_ptr_nonnull(strstr(reason, "AppleDouble"));
    ck_assert_uint_eq(gf_skipped_entry(l, 1, &path, &reason), 2);
    ck_assert_str_eq(path, "a/loop");
    ck_assert_ptr_nonnull(strstr(reason, "reached again through a link"));
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.folder_skipped[GF_SKIPPED_APPLEDOUBLE], 1);
    ck_assert_uint_eq(st.folder_dirs_again, 1);
    ck_assert_uint_eq(st.dataset_warnings, 2);
    ck_assert_msg(strncmp(st.dataset_warning, "a/._x.jpg: ", 11) == 0, "%s", st.dataset_warning);
    gf_close(&l);
}
END_TEST

/* Finds the named skip at path, returns its kind (-1: not named). */
static int skip_kind_of(const gf__dataset *ds, const char *path)
{
    for (uint64_t i = 0; i < ds->n_named_skips && i < GF_SKIPPED_NAMED_MAX; i++)
        if (!strcmp(ds->named_skips[i].path, path))
            return ds->named_skips[i].kind;
    return -1;
}

/* One link "class_00/up -> .." made every sample label 0 (the root walked
 * as part of class_00, each class then a directory seen). A link in a class
 * to a directory outside that class folder (the root, another class, a
 * folder outside the tree) is not walked, and is named; a link within the
 * class, and a link to a file anywhere, are followed. */
START_TEST(folder_link_out_of_its_class_is_left_out_and_named)
{
    char *outside = tu_mkdtemp();
    char p[4200];
    snprintf(p, sizeof p, "%s/far.jpg", outside);
    tu_write_text(p, "x");
    touch("class_00/0.jpg");
    touch("class_00/sub/s.jpg");
    touch("class_01/1.jpg");
    touch("class_01/deep/d.jpg");
    touch("class_02/2.jpg");
    ck_assert_int_eq(symlink("..", at_root("class_00/up")), 0);
    ck_assert_int_eq(symlink("../../class_01", at_root("class_00/sub/other")), 0);
    ck_assert_int_eq(symlink("../class_01/deep", at_root("class_00/part")), 0);
    ck_assert_int_eq(symlink(outside, at_root("class_00/far")), 0);
    ck_assert_int_eq(symlink("sub", at_root("class_00/in")), 0);
    ck_assert_int_eq(symlink("../class_02/2.jpg", at_root("class_00/alias.jpg")), 0);
    ck_assert_int_eq(symlink("../../class_02", at_root("class_01/deep/x")), 0);
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_int_eq(ds.n_classes, 3);
    ck_assert_uint_eq(ds.n, 6);
    assert_sample(&ds, 0, "class_00/0.jpg", 0);
    assert_sample(&ds, 1, "class_00/alias.jpg", 0);
    assert_sample(&ds, 2, "class_00/in/s.jpg", 0); /* "in" before "sub" */
    assert_sample(&ds, 3, "class_01/1.jpg", 1);
    assert_sample(&ds, 4, "class_01/deep/d.jpg", 1);
    assert_sample(&ds, 5, "class_02/2.jpg", 2);
    ck_assert_int_eq(skip_kind_of(&ds, "class_00/up"), GF__SKIP_LINK_OUT);
    ck_assert_int_eq(skip_kind_of(&ds, "class_00/part"), GF__SKIP_LINK_OUT);
    ck_assert_int_eq(skip_kind_of(&ds, "class_00/far"), GF__SKIP_LINK_OUT);
    ck_assert_int_eq(skip_kind_of(&ds, "class_00/in/other"), GF__SKIP_LINK_OUT);
    ck_assert_int_eq(skip_kind_of(&ds, "class_00/sub"), GF__SKIP_DIR_AGAIN);
    ck_assert_int_eq(skip_kind_of(&ds, "class_01/deep/x"), GF__SKIP_LINK_OUT);
    ck_assert_uint_eq(ds.n_named_skips, 6);
    ck_assert_uint_eq(ds.warnings, 6);
    /* in name order: far, in/other, part, sub, up, then class_01's */
    ck_assert_str_eq(ds.named_skips[0].path, "class_00/far");
    ck_assert_str_eq(ds.named_skips[1].path, "class_00/in/other");
    ck_assert_msg(strncmp(ds.warning, "class_00/far: a link to a directory outside its class",
                          53) == 0, "%s", ds.warning);
    gf__dataset_close(&ds);
    tu_rmrf(outside);
    free(outside);
}
END_TEST

/* A class folder that links to another class is that class's files again
 * under its own label (torchvision's ImageFolder does the same; before, it
 * had no samples, the directory being walked already); one that is the
 * root or above it keeps its label, has no samples, and is named. */
START_TEST(folder_class_links_are_walked_unless_they_reach_the_root)
{
    touch("a/1.jpg");
    touch("a/sub/2.jpg");
    ck_assert_int_eq(symlink("a", at_root("b")), 0);
    ck_assert_int_eq(symlink("a/sub", at_root("c")), 0);
    ck_assert_int_eq(symlink(".", at_root("d")), 0);
    ck_assert_int_eq(symlink("..", at_root("e")), 0);
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_int_eq(ds.n_classes, 5);
    ck_assert_uint_eq(ds.n, 5);
    assert_sample(&ds, 0, "a/1.jpg", 0);
    assert_sample(&ds, 1, "a/sub/2.jpg", 0);
    assert_sample(&ds, 2, "b/1.jpg", 1);
    assert_sample(&ds, 3, "b/sub/2.jpg", 1);
    assert_sample(&ds, 4, "c/2.jpg", 2);
    ck_assert_uint_eq(ds.n_named_skips, 2);
    ck_assert_str_eq(ds.named_skips[0].path, "d");
    ck_assert_int_eq(ds.named_skips[0].kind, GF__SKIP_CLASS_ROOT);
    ck_assert_str_eq(ds.named_skips[1].path, "e");
    ck_assert_int_eq(ds.named_skips[1].kind, GF__SKIP_CLASS_ROOT);
    gf__dataset_close(&ds);
}
END_TEST

/* The tree of issue 37 item 5: an AppleDouble file, a second link to one
 * directory (again -> sub), a link out of a class to another class, a
 * directory named like an image, and loops (class_00/up -> .., which
 * reaches the root, and sub/back -> .., the class folder). */
static void make_relabel_tree(void)
{
    touch("class_00/0.jpg");
    touch("class_00/._0.jpg");
    touch("class_00/sub/s.jpg");
    touch("class_01/1.jpg");
    touch("class_01/d.jpg/x.jpg");
    ck_assert_int_eq(symlink("sub", at_root("class_00/again")), 0);
    ck_assert_int_eq(symlink("../class_01", at_root("class_00/other")), 0);
    ck_assert_int_eq(symlink("..", at_root("class_00/up")), 0);
    ck_assert_int_eq(symlink("..", at_root("class_00/sub/back")), 0);
}

static void open_walk_ok(gf__dataset *ds, gf_folder_walk walk)
{
    gf__dataset_opts o;
    gf__dataset_default_opts(&o);
    ck_assert_int_eq(o.folder_walk, GF_FOLDER_WALK_GPUFEED);
    o.folder_walk = walk;
    char why[512];
    int rc = gf__dataset_open_with(ds, root, &o, why, sizeof why);
    ck_assert_msg(rc == 0, "open %s: %d %s", root, rc, why);
}

/* The default walk leaves out, and names, what would relabel or repeat
 * samples: the AppleDouble file, the links out (to the root, to another
 * class), the directory reached again; a directory named like an image is
 * a (bad) sample too. */
START_TEST(folder_walk_gpufeed_leaves_out_and_names_what_relabels)
{
    make_relabel_tree();
    gf__dataset ds;
    open_walk_ok(&ds, GF_FOLDER_WALK_GPUFEED);
    ck_assert_int_eq(ds.n_classes, 2);
    ck_assert_uint_eq(ds.n, 5);
    assert_sample(&ds, 0, "class_00/0.jpg", 0);
    assert_sample(&ds, 1, "class_00/again/s.jpg", 0); /* "again" before "sub" */
    assert_sample(&ds, 2, "class_01/1.jpg", 1);
    assert_sample(&ds, 3, "class_01/d.jpg", 1);
    assert_sample(&ds, 4, "class_01/d.jpg/x.jpg", 1);
    ck_assert_uint_eq(ds.skipped_ext[GF_SKIPPED_APPLEDOUBLE], 1);
    ck_assert_uint_eq(ds.dirs_again, 2); /* again/back (the class), sub */
    static const char *const paths[] = {"class_00/._0.jpg", "class_00/again/back",
                                        "class_00/other", "class_00/sub", "class_00/up"};
    static const int kinds[] = {GF__SKIP_APPLEDOUBLE, GF__SKIP_DIR_AGAIN, GF__SKIP_LINK_OUT,
                                GF__SKIP_DIR_AGAIN, GF__SKIP_LINK_OUT};
    ck_assert_uint_eq(ds.n_named_skips, 5);
    ck_assert_uint_eq(ds.warnings, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_str_eq(ds.named_skips[i].path, paths[i]);
        ck_assert_int_eq(ds.named_skips[i].kind, kinds[i]);
    }
    gf__dataset_close(&ds);
}
END_TEST

/* folder_walk TORCHVISION: sorted(os.walk(class, followlinks=True)),
 * exactly: the AppleDouble file a sample, the link to class_01 walked
 * under class_00's label, the second link's directory walked again, the
 * directory named like an image no sample. Only the loops (class_00/up
 * reaches the root, above class_00; back the class folder itself, through
 * each of its two paths) are not followed, and each is named: os.walk
 * would go round them until ELOOP. */
START_TEST(folder_walk_torchvision_gives_os_walks_samples_but_loops)
{
    make_relabel_tree();
    gf__dataset ds;
    open_walk_ok(&ds, GF_FOLDER_WALK_TORCHVISION);
    ck_assert_int_eq(ds.n_classes, 2);
    static const char *const want[] = {
        "class_00/._0.jpg",         "class_00/0.jpg",     "class_00/again/s.jpg",
        "class_00/other/1.jpg",     "class_00/other/d.jpg/x.jpg",
        "class_00/sub/s.jpg",       "class_01/1.jpg",     "class_01/d.jpg/x.jpg"};
    static const int labels[] = {0, 0, 0, 0, 0, 0, 1, 1};
    ck_assert_uint_eq(ds.n, 8);
    for (uint64_t i = 0; i < ds.n; i++)
        assert_sample(&ds, i, want[i], labels[i]);
    ck_assert_uint_eq(ds.skipped_ext[GF_SKIPPED_APPLEDOUBLE], 0);
    ck_assert_uint_eq(ds.dirs_again, 3);
    static const char *const loops[] = {"class_00/again/back", "class_00/sub/back",
                                        "class_00/up"};
    ck_assert_uint_eq(ds.n_named_skips, 3);
    ck_assert_uint_eq(ds.warnings, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(ds.named_skips[i].path, loops[i]);
        ck_assert_int_eq(ds.named_skips[i].kind, GF__SKIP_LOOP);
    }
    ck_assert_msg(strncmp(ds.warning, "class_00/again/back: a link back into its own walk (a "
                          "loop): not walked; torchvision follows it round until ELOOP", 105) == 0,
                  "%s", ds.warning);
    gf__dataset_close(&ds);

    /* Through the loader, by the setting's name: the loop is named. */
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    char why[256];
    ck_assert_int_eq(gf_settings_set(&s, "folder_walk", "torchvision", why, sizeof why), 0);
    ck_assert_int_eq(s.folder_walk, GF_FOLDER_WALK_TORCHVISION);
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    const char *path = NULL, *reason = NULL;
    ck_assert_uint_eq(gf_skipped_entry(l, 2, &path, &reason), 3);
    ck_assert_str_eq(path, "class_00/up");
    ck_assert_ptr_nonnull(strstr(reason, "which no setting matches"));
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.dataset_samples, 8);
    ck_assert_uint_eq(st.folder_dirs_again, 3);
    ck_assert_uint_eq(st.dataset_warnings, 3);
    gf_close(&l);
}
END_TEST

/* TORCHVISION walks a directory again through each link to it, so links
 * multiply samples as os.walk does: level k's file once per path to it
 * (through c/a and c/b 2 + 4 + 8, through c/z/L1, L2, L3 7 + 3 + 1); the
 * entry cap still stops a graph that multiplies past it, naming where. */
START_TEST(folder_walk_torchvision_repeats_second_links_within_the_caps)
{
    enum { LEVELS = 3 };
    char rel[64], to[64];
    for (int k = 1; k <= LEVELS; k++) {
        snprintf(rel, sizeof rel, "c/z/L%d/%d.jpg", k, k);
        touch(rel);
    }
    for (int k = 0; k < LEVELS; k++)
        for (int link = 0; link < 2; link++) {
            if (k)
                snprintf(rel, sizeof rel, "c/z/L%d/%c", k, "ab"[link]);
            else
                snprintf(rel, sizeof rel, "c/%c", "ab"[link]);
            snprintf(to, sizeof to, "%sL%d", k ? "../" : "z/", k + 1);
            ck_assert_int_eq(symlink(to, at_root(rel)), 0);
        }
    gf__dataset ds;
    open_walk_ok(&ds, GF_FOLDER_WALK_TORCHVISION);
    ck_assert_uint_eq(ds.n, 2 + 4 + 8 + 7 + 3 + 1);
    assert_sample(&ds, 0, "c/a/1.jpg", 0);
    assert_sample(&ds, 1, "c/a/a/2.jpg", 0);
    assert_sample(&ds, 2, "c/a/a/a/3.jpg", 0);
    assert_sample(&ds, 3, "c/a/a/b/3.jpg", 0);
    assert_sample(&ds, 4, "c/a/b/2.jpg", 0);
    assert_sample(&ds, ds.n - 1, "c/z/L3/3.jpg", 0);
    ck_assert_uint_eq(ds.dirs_again, 0);
    ck_assert_uint_eq(ds.n_named_skips, 0);
    gf__dataset_close(&ds);

    gf__dataset_opts o;
    gf__dataset_default_opts(&o);
    o.folder_walk = GF_FOLDER_WALK_TORCHVISION;
    o.max_entries = 20;
    char why[512];
    ck_assert_int_eq(gf__dataset_open_with(&ds, root, &o, why, sizeof why), GF_EDATASET);
    ck_assert_msg(strstr(why, "the tree has over 20 entries"), "%s", why);
    ck_assert_ptr_null(ds.arena);
}
END_TEST

/* Through the loader: the skipped counts reach the stats, and a .tif (in
 * torchvision's list) is a sample that fails as an unsupported format,
 * counted, with the reason; both byte orders. */
START_TEST(folder_tiff_is_a_counted_unsupported_format)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/a/1.jpg", root);
    tu_write_jpg(p, 16, 16, 3, 1, 90);
    touch("a/2.gif");
    snprintf(p, sizeof p, "%s/a/3.tif", root);
    tu_write_file(p, "II*\0\10\0\0\0junkjunk", 16);
    snprintf(p, sizeof p, "%s/a/4.TIFF", root);
    tu_write_file(p, "MM\0*\0\0\0\10junkjunk", 16);
    gf_settings s;
    tu_cpu_settings(&s);
    s.data = root;
    s.batch_size = 4;
    s.height = s.width = 8;
    s.threads = 1;
    s.shuffle = 0;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->count, 1);
    gf_release(l, b);
    ck_assert_int_eq(gf_next(l, &b), GF_EOF);
    gf_stats st;
    ck_assert_int_eq(gf_get_stats(l, &st), 0);
    ck_assert_uint_eq(st.dataset_samples, 3);
    ck_assert_uint_eq(st.folder_skipped[GF_SKIPPED_GIF], 1);
    ck_assert_uint_eq(st.errors, 2);
    ck_assert_uint_eq(st.errors_by_kind[GF_KIND_EFORMAT], 2);
    ck_assert_int_eq(st.n_recent, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(st.recent[i].code, GF_EFORMAT);
        ck_assert_str_eq(st.recent[i].reason, "TIFF: not a supported format");
    }
    gf_close(&l);
}
END_TEST

/* Entries that are not regular files but are named like images stay in the
 * index, in walk order: the reader fails each with its reason, so none
 * vanishes from the count (test_loader reads them). */
START_TEST(folder_keeps_non_regular_entries_named_like_images)
{
    touch("a/1.jpg");
    touch("a/dir.jpg/inner.jpg");
    ck_assert_int_eq(mkfifo(at_root("a/fifo.jpg"), 0644), 0);
    ck_assert_int_eq(mkfifo(at_root("a/fifo.txt"), 0644), 0); /* not an image name */
    int sk = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *sp = at_root("a/sock.jpg");
    ck_assert_uint_lt(strlen(sp), sizeof sa.sun_path);
    memcpy(sa.sun_path, sp, strlen(sp) + 1);
    ck_assert_int_eq(bind(sk, (struct sockaddr *)&sa, sizeof sa), 0);
    close(sk);
    ck_assert_int_eq(symlink("/dev/zero", at_root("a/zero.jpg")), 0);
    ck_assert_int_eq(symlink("loop.jpg", at_root("a/loop.jpg")), 0);
    gf__dataset ds;
    open_ok(&ds, root);
    static const char *want[] = {"a/1.jpg",    "a/dir.jpg",  "a/fifo.jpg",         "a/loop.jpg",
                                 "a/sock.jpg", "a/zero.jpg", "a/dir.jpg/inner.jpg"};
    ck_assert_uint_eq(ds.n, 7);
    for (uint64_t i = 0; i < 7; i++)
        assert_sample(&ds, i, want[i], 0);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_paths_open_relative_to_root_fd)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/k/sub dir/pic one.png", root);
    tu_write_png(p, 4, 3, 3, 1);
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 1);
    ck_assert_str_eq(gf__dataset_path(&ds, 0), "k/sub dir/pic one.png");
    int fd = openat(ds.root_fd, gf__dataset_path(&ds, 0), O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    unsigned char sig[4];
    ck_assert_int_eq(read(fd, sig, 4), 4);
    ck_assert_int_eq(sig[1], 'P');
    close(fd);
    ck_assert_uint_ge(ds.bytes, strlen("k/sub dir/pic one.png") + 1 + 8 + 4);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_with_a_trailing_slash_opens)
{
    touch("a/1.jpg");
    char src[4096];
    snprintf(src, sizeof src, "%s/", root);
    gf__dataset ds;
    open_ok(&ds, src);
    assert_sample(&ds, 0, "a/1.jpg", 0);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(folder_of_many_files_is_indexed_in_order)
{
    /* Enough entries to grow every table several times. */
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 700; i++) {
            char rel[64];
            snprintf(rel, sizeof rel, "c%d/%04d.jpg", k, (i * 337) % 700);
            touch(rel);
        }
    gf__dataset ds;
    open_ok(&ds, root);
    ck_assert_uint_eq(ds.n, 2100);
    for (uint64_t i = 0; i < ds.n; i++) {
        char want[64];
        snprintf(want, sizeof want, "c%d/%04d.jpg", (int)(i / 700), (int)(i % 700));
        assert_sample(&ds, i, want, (int)(i / 700));
    }
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(empty_folder_is_a_dataset_error)
{
    const char *why = open_fails(root);
    ck_assert_ptr_nonnull(strstr(why, root));
}
END_TEST

START_TEST(folder_with_classes_but_no_images_is_a_dataset_error)
{
    touch("a/readme.txt");
    mkdir_rel("b");
    const char *why = open_fails(root);
    ck_assert_ptr_nonnull(strstr(why, root));
    ck_assert_ptr_nonnull(strstr(why, "no image"));
}
END_TEST

START_TEST(unreadable_class_directory_is_a_dataset_error)
{
    if (geteuid() == 0)
        return; /* root reads everything */
    touch("a/1.jpg");
    touch("b/1.jpg");
    ck_assert_int_eq(chmod(at_root("b"), 0), 0);
    const char *why = open_fails(root);
    chmod(at_root("b"), 0755);
    ck_assert_ptr_nonnull(strstr(why, "/b"));
    ck_assert_ptr_nonnull(strstr(why, "ermission"));
}
END_TEST

START_TEST(missing_path_is_a_dataset_error_naming_it)
{
    const char *why = open_fails(at_root("nope/none"));
    ck_assert_ptr_nonnull(strstr(why, "nope/none"));
    ck_assert_ptr_nonnull(strstr(why, "No such file"));
}
END_TEST

START_TEST(a_device_is_not_a_data_set)
{
    const char *why = open_fails("/dev/null");
    ck_assert_ptr_nonnull(strstr(why, "/dev/null"));
    ck_assert_ptr_nonnull(strstr(why, "not a directory or a regular file"));
}
END_TEST

START_TEST(null_or_empty_source_is_a_dataset_error)
{
    open_fails("");
    gf__dataset ds;
    ck_assert_int_eq(gf__dataset_open(&ds, NULL, NULL, 0), GF_EDATASET);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(close_is_safe_on_zeroed_failed_and_closed_structs)
{
    gf__dataset ds;
    memset(&ds, 0, sizeof ds);
    gf__dataset_close(&ds);
    ck_assert_int_eq(ds.root_fd, -1);
    ck_assert_int_eq(gf__dataset_open(&ds, at_root("missing"), NULL, 0), GF_EDATASET);
    gf__dataset_close(&ds);
    gf__dataset_close(&ds);
    gf__dataset_close(NULL);
    /* fd 0 must not be closed by a zeroed struct */
    ck_assert_int_ne(fcntl(0, F_GETFD), -1);
}
END_TEST

/* ---- list files ---- */

static void write_list(const char *name, const char *text)
{
    tu_write_text(at_root(name), text);
}

START_TEST(list_lines_give_paths_and_labels)
{
    write_list("list.txt", "# header comment\n"
                           "a/1.jpg 3\n"
                           "\n"
                           "   \t \n"
                           "b/with space/2 3.png\t7\n"
                           "c/3.jpg   0   \n"
                           "  # indented comment\n"
                           "  d/4.jpg 1\n"
                           "e/5.jpg 2"); /* no final newline */
    gf__dataset ds;
    open_ok(&ds, at_root("list.txt"));
    ck_assert_uint_eq(ds.n, 5);
    assert_sample(&ds, 0, "a/1.jpg", 3);
    assert_sample(&ds, 1, "b/with space/2 3.png", 7);
    assert_sample(&ds, 2, "c/3.jpg", 0);
    assert_sample(&ds, 3, "d/4.jpg", 1);
    assert_sample(&ds, 4, "e/5.jpg", 2);
    ck_assert_int_eq(ds.n_classes, 8);
    ck_assert_ptr_null(ds.class_names);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(list_tolerates_crlf_line_ends)
{
    write_list("win.txt", "x y/1.jpg 1\r\n\r\n# c\r\nz.jpg  2\r\n");
    gf__dataset ds;
    open_ok(&ds, at_root("win.txt"));
    ck_assert_uint_eq(ds.n, 2);
    assert_sample(&ds, 0, "x y/1.jpg", 1);
    assert_sample(&ds, 1, "z.jpg", 2);
    gf__dataset_close(&ds);
}
END_TEST

/* A UTF-8 byte-order mark opens the file, not the first path; elsewhere
 * those bytes are a path's own. A BOM before a comment or on a list of
 * only a BOM is skipped the same way. */
START_TEST(list_skips_a_utf8_byte_order_mark)
{
    write_list("bom.txt", "\xef\xbb\xbf" "a/1.jpg 3\n\xef\xbb\xbf" "b.jpg 1\n");
    gf__dataset ds;
    open_ok(&ds, at_root("bom.txt"));
    ck_assert_uint_eq(ds.n, 2);
    assert_sample(&ds, 0, "a/1.jpg", 3);
    assert_sample(&ds, 1, "\xef\xbb\xbf" "b.jpg", 1);
    gf__dataset_close(&ds);
    write_list("bom-comment.txt", "\xef\xbb\xbf# made on Windows\r\nc.jpg 0\r\n");
    open_ok(&ds, at_root("bom-comment.txt"));
    ck_assert_uint_eq(ds.n, 1);
    assert_sample(&ds, 0, "c.jpg", 0);
    gf__dataset_close(&ds);
    write_list("bom-only.txt", "\xef\xbb\xbf");
    ck_assert_ptr_nonnull(strstr(open_fails(at_root("bom-only.txt")), "bom-only.txt"));
}
END_TEST

START_TEST(list_paths_open_relative_to_the_list_directory)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/data/imgs/one.png", root);
    tu_write_png(p, 2, 2, 3, 7);
    write_list("data/train list.txt", "imgs/one.png 0\n");
    gf__dataset ds;
    open_ok(&ds, at_root("data/train list.txt"));
    int fd = openat(ds.root_fd, gf__dataset_path(&ds, 0), O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    close(fd);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(list_named_without_a_directory_is_relative_to_the_cwd)
{
    char old[4096];
    ck_assert_ptr_nonnull(getcwd(old, sizeof old));
    touch("img.jpg");
    write_list("l.txt", "img.jpg 0\n");
    ck_assert_int_eq(chdir(root), 0);
    gf__dataset ds;
    open_ok(&ds, "l.txt");
    ck_assert_int_eq(chdir("/"), 0); /* root_fd holds the directory, not the name */
    int fd = openat(ds.root_fd, gf__dataset_path(&ds, 0), O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    close(fd);
    gf__dataset_close(&ds);
    ck_assert_int_eq(chdir(old), 0);
}
END_TEST

START_TEST(list_of_many_lines_is_compact)
{
    enum { N = 100000 };
    size_t cap = (size_t)N * 40, len = 0;
    char *text = malloc(cap);
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, cap - len, "train/c%03d/img_%07d.jpg %d\n", i % 1000,
                                i, i % 1000);
    tu_write_file(at_root("big.txt"), text, len);
    free(text);
    gf__dataset ds;
    open_ok(&ds, at_root("big.txt"));
    ck_assert_uint_eq(ds.n, N);
    ck_assert_int_eq(ds.n_classes, 1000);
    assert_sample(&ds, 0, "train/c000/img_0000000.jpg", 0);
    assert_sample(&ds, 12345, "train/c345/img_0012345.jpg", 345);
    assert_sample(&ds, N - 1, "train/c999/img_0099999.jpg", 999);
    /* 26-byte paths: path + NUL + 8-byte offset + 4-byte label + the
     * 16-byte identity the first read records (gf__file_seen). */
    ck_assert_uint_eq(ds.bytes, (size_t)N * (27 + 8 + 4 + 16));
    gf__dataset_close(&ds);
}
END_TEST

static void assert_bad_list(const char *text, const char *want1, const char *want2)
{
    write_list("list.txt", text);
    const char *why = open_fails(at_root("list.txt"));
    ck_assert_msg(strstr(why, want1), "why '%s' lacks '%s'", why, want1);
    if (want2)
        ck_assert_msg(strstr(why, want2), "why '%s' lacks '%s'", why, want2);
}

START_TEST(bad_list_lines_are_dataset_errors_naming_file_and_line)
{
    assert_bad_list("a.jpg 1\n# c\nb.jpg x\n", "list.txt:3: ",
                    "label 'x' is not a non-negative integer");
    assert_bad_list("a.jpg -1\n", "list.txt:1: ", "label '-1' is not a non-negative integer");
    assert_bad_list("a.jpg +1\n", "list.txt:1: ", "'+1'");
    assert_bad_list("a.jpg 1.5\n", "list.txt:1: ", "'1.5'");
    assert_bad_list("\n\na.jpg 1\nonlyonetoken\n", "list.txt:4: ", "expected 'path label'");
    assert_bad_list("a.jpg 2147483647\n", "list.txt:1: ", "too large");
    assert_bad_list("a.jpg 99999999999999999999999\n", "list.txt:1: ", "too large");
    assert_bad_list("a.jpg 1\r\nb.jpg 1x\r\n", "list.txt:2: ", "'1x'");
    /* the shown token is cut, the message stays short */
    char longtok[600];
    memset(longtok, 'q', sizeof longtok - 1);
    longtok[sizeof longtok - 1] = 0;
    char text[700];
    snprintf(text, sizeof text, "a.jpg %s\n", longtok);
    assert_bad_list(text, "list.txt:1: ", "...");
}
END_TEST

START_TEST(list_with_a_nul_byte_is_a_dataset_error)
{
    tu_write_file(at_root("list.txt"), "a.jpg 1\nb\0c.jpg 2\n", 18);
    const char *why = open_fails(at_root("list.txt"));
    ck_assert_ptr_nonnull(strstr(why, "list.txt:2: "));
}
END_TEST

/* A label names a class, and classes = the largest label + 1: a list of
 * n samples may name up to max(n, 2^20) classes (a subset of a large set
 * keeps its labels), not 2^31 (2147483646 parses, but would make that
 * many class names). The error names the file and the line of the first
 * sample holding the largest label. */
START_TEST(list_label_past_what_the_set_can_mean_is_refused_naming_the_line)
{
    write_list("list.txt", "a.jpg 1\n# c\nb.jpg 2147483646\nc.jpg 7\nd.jpg 2147483646\n");
    const char *why = open_fails(at_root("list.txt"));
    ck_assert_msg(strstr(why, "list.txt:3: label 2147483646 is past any class of a set of 4 "
                              "samples (labels are class numbers; at most 1048576 classes)"),
                  "%s", why);
    assert_bad_list("a.jpg 1\nb.jpg 1048576\n", "list.txt:2: ", "label 1048576 is past");
    write_list("list.txt", "a.jpg 1048575\n");
    gf__dataset ds;
    open_ok(&ds, at_root("list.txt"));
    ck_assert_int_eq(ds.labels[0], 1048575);
    ck_assert_int_eq(ds.n_classes, 1048576);
    gf__dataset_close(&ds);
}
END_TEST

START_TEST(list_of_only_comments_and_blanks_is_a_dataset_error)
{
    write_list("list.txt", "# nothing\n\n  \n");
    ck_assert_ptr_nonnull(strstr(open_fails(at_root("list.txt")), "list.txt"));
    write_list("empty.txt", "");
    ck_assert_ptr_nonnull(strstr(open_fails(at_root("empty.txt")), "empty.txt"));
}
END_TEST

START_TEST(unreadable_list_is_a_dataset_error)
{
    if (geteuid() == 0)
        return;
    write_list("list.txt", "a.jpg 1\n");
    ck_assert_int_eq(chmod(at_root("list.txt"), 0), 0);
    const char *why = open_fails(at_root("list.txt"));
    ck_assert_ptr_nonnull(strstr(why, "list.txt"));
    ck_assert_ptr_nonnull(strstr(why, "ermission"));
}
END_TEST

static Suite *dataset_suite(void)
{
    Suite *su = suite_create("dataset");
    TCase *tc = tcase_create("folder");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, folder_classes_are_sub_directories_in_sorted_order);
    tcase_add_test(tc, folder_class_order_is_byte_order);
    tcase_add_test(tc, folder_files_are_sorted_within_a_class);
    tcase_add_test(tc, folder_nested_files_follow_torchvision_walk_order);
    tcase_add_test(tc, folder_takes_hidden_entries_and_skips_non_image_files);
    tcase_add_test(tc, folder_link_out_of_its_class_is_left_out_and_named);
    tcase_add_test(tc, folder_class_links_are_walked_unless_they_reach_the_root);
    tcase_add_test(tc, folder_appledouble_files_and_link_loops_are_counted_and_named);
    tcase_add_test(tc, folder_walk_gpufeed_leaves_out_and_names_what_relabels);
    tcase_add_test(tc, folder_walk_torchvision_gives_os_walks_samples_but_loops);
    tcase_add_test(tc, folder_walk_torchvision_repeats_second_links_within_the_caps);
    tcase_add_test(tc, folder_ignores_files_in_the_root);
    tcase_add_test(tc, folder_keeps_an_empty_class_so_labels_match_its_position);
    tcase_add_test(tc, folder_follows_symlinks_but_not_loops);
    tcase_add_test(tc, folder_walks_each_directory_once_through_a_link_graph);
    tcase_add_test(tc, folder_deeper_than_the_cap_is_a_dataset_error_naming_where);
    tcase_add_test(tc, folder_over_the_entry_cap_is_a_dataset_error_naming_where);
    tcase_add_test(tc, folder_extensions_default_to_torchvisions_list);
    tcase_add_test(tc, folder_tiff_is_a_counted_unsupported_format);
    tcase_add_test(tc, folder_keeps_non_regular_entries_named_like_images);
    tcase_add_test(tc, folder_paths_open_relative_to_root_fd);
    tcase_add_test(tc, folder_with_a_trailing_slash_opens);
    tcase_add_test(tc, folder_of_many_files_is_indexed_in_order);
    suite_add_tcase(su, tc);

    tc = tcase_create("list");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, list_lines_give_paths_and_labels);
    tcase_add_test(tc, list_tolerates_crlf_line_ends);
    tcase_add_test(tc, list_skips_a_utf8_byte_order_mark);
    tcase_add_test(tc, list_paths_open_relative_to_the_list_directory);
    tcase_add_test(tc, list_named_without_a_directory_is_relative_to_the_cwd);
    tcase_add_test(tc, list_of_many_lines_is_compact);
    tcase_add_test(tc, list_label_past_what_the_set_can_mean_is_refused_naming_the_line);
    suite_add_tcase(su, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, empty_folder_is_a_dataset_error);
    tcase_add_test(tc, folder_with_classes_but_no_images_is_a_dataset_error);
    tcase_add_test(tc, unreadable_class_directory_is_a_dataset_error);
    tcase_add_test(tc, missing_path_is_a_dataset_error_naming_it);
    tcase_add_test(tc, a_device_is_not_a_data_set);
    tcase_add_test(tc, null_or_empty_source_is_a_dataset_error);
    tcase_add_test(tc, close_is_safe_on_zeroed_failed_and_closed_structs);
    tcase_add_test(tc, bad_list_lines_are_dataset_errors_naming_file_and_line);
    tcase_add_test(tc, list_with_a_nul_byte_is_a_dataset_error);
    tcase_add_test(tc, list_of_only_comments_and_blanks_is_a_dataset_error);
    tcase_add_test(tc, unreadable_list_is_a_dataset_error);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    return tu_run_suite(dataset_suite());
}
