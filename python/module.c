/*
 * gpufeed._gpufeed: the module, the settings table, verify, decode_image
 * and the augment ops' test hooks (the exceptions are errors.c's, settings from a dict
 * settings.c's, the _Loader type loader.c's). Python type
 * checks and composite keywords live in gpufeed/__init__.py.
 * Runs on the Python threads that call it; blocking calls drop the GIL.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "gpufeed_py.h"

#include "augment_ops.h"

/* ---- Settings --------------------------------------------------------- */

static PyObject *list_of(const char *const *names)
{
    PyObject *l = PyList_New(0);
    for (int i = 0; l && names && names[i]; i++) {
        PyObject *v = PyUnicode_FromString(names[i]);
        if (!v || PyList_Append(l, v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(l);
        }
        Py_XDECREF(v);
    }
    return l;
}

/* settings_table(): the library's table, a dict per row (gpufeed.h's
 * gf_setting_info): name, type ("int", "u64", "float", "float4",
 * "choice", "flag", "path"), default (None for a path), min, max,
 * zero_picks, zero, choices, aliases, help. */
static PyObject *settings_table(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
    static const char *const types[] = {[GF_SETTING_INT] = "int",       [GF_SETTING_U64] = "u64",
                                        [GF_SETTING_FLOAT] = "float",   [GF_SETTING_FLOAT4] = "float4",
                                        [GF_SETTING_CHOICE] = "choice", [GF_SETTING_FLAG] = "flag",
                                        [GF_SETTING_PATH] = "path", [GF_SETTING_TEXT] = "text"};
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < gf_setting_count(); i++) {
        const gf_setting_info *r = gf_setting_at(i);
        int is_float = r->type == GF_SETTING_FLOAT || r->type == GF_SETTING_FLOAT4;
        PyObject *lo = is_float ? PyFloat_FromDouble(r->min_float) : PyLong_FromLongLong(r->min_int);
        PyObject *hi = is_float ? PyFloat_FromDouble(r->max_float)
                                : PyLong_FromUnsignedLongLong(r->max_int);
        PyObject *choices = list_of(r->choices), *aliases = list_of(r->aliases);
        PyObject *row = lo && hi && choices && aliases
            ? Py_BuildValue("{s:s,s:s,s:z,s:O,s:O,s:O,s:O,s:z,s:O,s:O,s:s}", "name", r->name,
                            "type", types[r->type], "default", r->default_text, "min", lo, "max",
                            hi, "zero_picks",
                            (r->flags & GF_SETTING_ZERO_PICKS) ? Py_True : Py_False,
                            "min_exclusive",
                            (r->flags & GF_SETTING_MIN_EXCLUSIVE) ? Py_True : Py_False, "zero",
                            r->zero, "choices", choices, "aliases", aliases, "help", r->help)
            : NULL;
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        Py_XDECREF(choices);
        Py_XDECREF(aliases);
        if (!row || PyList_Append(out, row) < 0)
            Py_CLEAR(out);
        Py_XDECREF(row);
    }
    return out;
}

/* check_setting(name, text): None, or ValueError with the library's reason
 * ("dtype: 'float64' is not one of ..."), as gf_settings_set says it. */
static PyObject *check_setting(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *name, *text;
    if (!PyArg_ParseTuple(args, "UU:check_setting", &name, &text))
        return NULL;
    gf_settings s;
    gf_default_settings(&s);
    return gfp_setting_set(&s, name, text) < 0 ? NULL : Py_NewRef(Py_None);
}

/* get_setting(name, {field: text}): the text of setting name after those
 * fields are set on the defaults (the value a loader would be given). */
static PyObject *get_setting(PyObject *m, PyObject *args)
{
    (void)m;
    const char *name;
    PyObject *fields, *empty = PyUnicode_FromString("");
    gf_settings s;
    char buf[160];
    if (!empty || !PyArg_ParseTuple(args, "sO!:get_setting", &name, &PyDict_Type, &fields) ||
        gfp_settings_from(&s, empty, fields) < 0) {
        Py_XDECREF(empty);
        return NULL;
    }
    Py_DECREF(empty);
    if (gf_settings_get(&s, name, buf, sizeof buf) < 0) {
        PyErr_Format(PyExc_TypeError, "unknown setting '%s'", name);
        return NULL;
    }
    return PyUnicode_FromString(buf);
}

/* ---- verify ------------------------------------------------------------- */

/* One gf_verify on a thread of its own, so that the caller's thread can
 * take Ctrl-C (signal handlers run on Python's main thread only). Owned
 * by both threads (refs, under mu): the last one frees it. */
typedef struct {
    gf_settings s;
    char *data;       /* s.data's copy: the worker may outlive the call */
    char **paths;     /* the PATH settings' copies, by row, likewise */
    gf_verify_result *r;
    int rc, done, refs, cancel;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} verify_job;

static void verify_job_unref(verify_job *j)
{
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    gf_verify_free(&j->r);
    free(j->data);
    for (int i = 0; j->paths && i < gf_setting_count(); i++)
        free(j->paths[i]);
    free(j->paths);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *verify_main(void *arg)
{
    verify_job *j = arg;
    int rc = gf_verify_cancellable(&j->s, &j->r, &j->cancel);
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    verify_job_unref(j);
    return NULL;
}

/* Waits up to ns for the worker: 1 once it is done. Without the GIL. */
static int verify_wait(verify_job *j, long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ns / 1000000000;
    t.tv_nsec += ns % 1000000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done && pthread_cond_timedwait(&j->cv, &j->mu, &t) != ETIMEDOUT)
        ;
    int done = j->done;
    pthread_mutex_unlock(&j->mu);
    return done;
}

/* Runs j on its thread: 0 and j->rc, j->r; -1 with the exception set (a
 * signal handler's, after which the run is cancelled: the library lets go
 * within a slice, and a close slower than half a second finishes on the
 * worker, which frees j; no thread: ThreadError). Consumes the caller's
 * reference on error. */
static int verify_run(verify_job *j)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&j->mu, NULL);
    j->refs = 2;
    pthread_t th;
    if (pthread_create(&th, NULL, verify_main, j) != 0) {
        j->refs = 1;
        verify_job_unref(j);
        gfp_raise(GF_ETHREAD, "verify: no thread could be started", NULL);
        return -1;
    }
    int done = 0;
    while (!done) {
        Py_BEGIN_ALLOW_THREADS
        done = verify_wait(j, 50 * 1000 * 1000);
        Py_END_ALLOW_THREADS
        if (!done && PyErr_CheckSignals() < 0) {
            __atomic_store_n(&j->cancel, 1, __ATOMIC_RELEASE);
            Py_BEGIN_ALLOW_THREADS
            done = verify_wait(j, 500 * 1000 * 1000);
            Py_END_ALLOW_THREADS
            if (done)
                pthread_join(th, NULL);
            else
                pthread_detach(th);
            verify_job_unref(j);
            return -1;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
    return 0;
}

/* The job's own copy of each PATH setting (the caller's dict may go
 * first). 0, or -1 out of memory with nothing left allocated. */
static int copy_paths(verify_job *j)
{
    int n = gf_setting_count();
    if (!(j->paths = calloc((size_t)n, sizeof *j->paths)))
        return -1;
    for (int i = 0; i < n; i++) {
        const gf_setting_info *r = gf_setting_at(i);
        const char **at = (const char **)((char *)&j->s + r->offset);
        if ((r->type != GF_SETTING_PATH && r->type != GF_SETTING_TEXT) || !*at)
            continue;
        if (!(j->paths[i] = strdup(*at))) {
            for (int k = 0; k < i; k++)
                free(j->paths[k]);
            free(j->paths);
            j->paths = NULL;
            return -1;
        }
        *at = j->paths[i];
    }
    return 0;
}

/* verify(data, settings): gf_verify, the one `gpufeed verify` runs: each
 * damaged shard (index -1) then each bad sample, as a dict. Ctrl-C
 * cancels it: KeyboardInterrupt within a 50 ms slice and half a second. */
static PyObject *verify(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *data, *fields;
    if (!PyArg_ParseTuple(args, "OO!:verify", &data, &PyDict_Type, &fields))
        return NULL;
    verify_job *j = calloc(1, sizeof *j);
    if (!j)
        return PyErr_NoMemory();
    if (gfp_settings_from(&j->s, data, fields) < 0 || !(j->data = strdup(j->s.data))) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        free(j);
        return NULL;
    }
    j->s.data = j->data;
    if (copy_paths(j) < 0) {
        free(j->data);
        free(j);
        return PyErr_NoMemory();
    }
    if (verify_run(j) < 0)
        return NULL;
    int rc = j->rc;
    gf_verify_result *r = j->r;
    PyObject *out = NULL;
    if (rc < 0)
        gfp_raise(rc, r ? r->error : "", NULL);
    else if (r->incomplete)
        PyErr_NoMemory();
    else if ((out = PyList_New(0))) {
        const gf_verify_entry *lists[2] = {r->damaged_shards, r->bad_samples};
        size_t ns[2] = {r->n_damaged_shards, r->n_bad_samples};
        for (int k = 0; k < 2 && out; k++)
            for (size_t i = 0; i < ns[k]; i++) {
                const gf_verify_entry *v = &lists[k][i];
                PyObject *e = gfp_error_dict(v->sample, v->code, v->path, v->reason);
                if (!e || PyList_Append(out, e) < 0) {
                    Py_XDECREF(e);
                    Py_CLEAR(out);
                    break;
                }
                Py_DECREF(e);
            }
    }
    verify_job_unref(j); /* the worker's is gone: frees r */
    return out;
}

static PyObject *error_class_py(PyObject *m, PyObject *arg)
{
    (void)m;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return Py_NewRef(gfp_error_class((int)code));
}

/* decode_image(encoded, settings, epoch, index): the uint8 pixels the
 * loader makes of that file for that sample (height x width x channels). */
static PyObject *decode_image(PyObject *m, PyObject *args)
{
    (void)m;
    Py_buffer in;
    PyObject *fields;
    unsigned long long epoch, index;
    if (!PyArg_ParseTuple(args, "y*O!KK:decode_image", &in, &PyDict_Type, &fields, &epoch, &index))
        return NULL;
    gf_settings s;
    PyObject *empty = PyUnicode_FromString(""), *out = NULL;
    if (empty && gfp_settings_from(&s, empty, fields) == 0) {
        size_t n = (size_t)s.height * (size_t)s.width * (size_t)s.channels;
        out = s.height > 0 && s.width > 0 && s.channels > 0 && s.channels <= 4
                  ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n)
                  : (PyErr_SetString(PyExc_ValueError, "decode_image: bad size"), NULL);
        if (out) {
            char why[512] = "";
            uint8_t *px = (uint8_t *)PyBytes_AsString(out);
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = gf_decode_image(&s, in.buf, (size_t)in.len, epoch, index, px, why, sizeof why);
            Py_END_ALLOW_THREADS
            if (rc < 0) {
                Py_CLEAR(out);
                gfp_raise(rc, why, NULL);
            }
        }
    }
    Py_XDECREF(empty);
    PyBuffer_Release(&in);
    return out;
}

/* ---- Augment ops, for the tests against torchvision -------------------- */

/* The image's size checked against its bytes: 0, or -1 with ValueError
 * naming the bad argument. */
static int check_image(const char *fn, const Py_buffer *img, int w, int h, int c)
{
    if (w < 1 || h < 1 || w > (1 << 15) || h > (1 << 15)) {
        PyErr_Format(PyExc_ValueError, "%s: w and h must be in 1..32768 (%d x %d)", fn, w, h);
        return -1;
    }
    if (c != 1 && c != 3) {
        PyErr_Format(PyExc_ValueError, "%s: c must be 1 or 3 (%d)", fn, c);
        return -1;
    }
    if (img->len != (Py_ssize_t)w * h * c) {
        PyErr_Format(PyExc_ValueError, "%s: image has %zd bytes, w*h*c is %zd", fn, img->len,
                     (Py_ssize_t)w * h * c);
        return -1;
    }
    return 0;
}

/* fill: None, a number or c numbers in 0..255, each taken as int() takes
 * it (torchvision's _parse_fill). 1 with fill[] set, 0 for None, -1. */
static int parse_fill(PyObject *obj, int c, uint8_t fill[3])
{
    if (obj == Py_None)
        return 0;
    int seq = PySequence_Check(obj) && !PyUnicode_Check(obj) && !PyBytes_Check(obj);
    if (seq && PySequence_Size(obj) != c) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "_augment_op: fill must have c = %d values", c);
        return -1;
    }
    for (int b = 0; b < c; b++) {
        PyObject *item = seq ? PySequence_GetItem(obj, b) : Py_NewRef(obj);
        PyObject *as_int = item ? PyNumber_Long(item) : NULL;
        long v = as_int ? PyLong_AsLong(as_int) : -1;
        Py_XDECREF(item);
        Py_XDECREF(as_int);
        if (PyErr_Occurred() || v < 0 || v > 255) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "_augment_op: fill must be None, a number or c numbers in 0..255");
            return -1;
        }
        fill[b] = (uint8_t)v;
    }
    return 1;
}

/* _augment_op(op_name, magnitude, image, w, h, c, interpolation="nearest",
 * fill=None): the bytes torchvision's autoaugment._apply_op gives. */
static PyObject *augment_op(PyObject *m, PyObject *args)
{
    (void)m;
    const char *name, *interp_name = "nearest";
    double magnitude;
    Py_buffer img;
    int w, h, c;
    PyObject *fill_obj = Py_None, *out = NULL;
    if (!PyArg_ParseTuple(args, "sdy*iii|sO:_augment_op", &name, &magnitude, &img, &w, &h, &c,
                          &interp_name, &fill_obj))
        return NULL;
    gf__aug_op op = gf__aug_op_from_name(name);
    gf_interpolation interp = !strcmp(interp_name, "bilinear")  ? GF_INTERP_BILINEAR
                              : !strcmp(interp_name, "bicubic") ? GF_INTERP_BICUBIC
                                                                : GF_INTERP_NEAREST;
    uint8_t fill[3];
    int has_fill;
    if (op == GF__OP_COUNT)
        PyErr_Format(PyExc_ValueError, "_augment_op: op_name: no op '%s'", name);
    else if (strcmp(interp_name, "nearest") && strcmp(interp_name, "bilinear") &&
             strcmp(interp_name, "bicubic"))
        PyErr_Format(PyExc_ValueError,
                     "_augment_op: interpolation must be 'nearest', 'bilinear' or 'bicubic' ('%s')",
                     interp_name);
    else if (check_image("_augment_op", &img, w, h, c) == 0 &&
             (has_fill = parse_fill(fill_obj, c, fill)) >= 0) {
        uint8_t *scratch = malloc((size_t)img.len);
        out = scratch ? PyBytes_FromStringAndSize(img.buf, img.len) : PyErr_NoMemory();
        if (out) {
            uint8_t *px = (uint8_t *)PyBytes_AsString(out);
            Py_BEGIN_ALLOW_THREADS
            gf__aug_apply(op, magnitude, px, w, h, c, interp, has_fill ? fill : NULL, scratch);
            Py_END_ALLOW_THREADS
        }
        free(scratch);
    }
    PyBuffer_Release(&img);
    return out;
}

/* _adjust(kind, factor, image, w, h, c): ColorJitter's step kind
 * ("brightness", "contrast", "saturation", "hue") as torchvision's
 * adjust_* gives it. */
static PyObject *adjust(PyObject *m, PyObject *args)
{
    (void)m;
    static const struct {
        const char *kind;
        void (*fn)(uint8_t *, int, int, int, double);
    } kinds[] = {{"brightness", gf__adjust_brightness}, {"contrast", gf__adjust_contrast},
                 {"saturation", gf__adjust_saturation}, {"hue", gf__adjust_hue}};
    const char *kind;
    double factor;
    Py_buffer img;
    int w, h, c;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "sdy*iii:_adjust", &kind, &factor, &img, &w, &h, &c))
        return NULL;
    void (*fn)(uint8_t *, int, int, int, double) = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kind, kinds[i].kind) == 0)
            fn = kinds[i].fn;
    if (!fn)
        PyErr_Format(PyExc_ValueError, "_adjust: kind: no adjustment '%s'", kind);
    else if (fn == gf__adjust_hue && !(factor >= -0.5 && factor <= 0.5))
        PyErr_Format(PyExc_ValueError, "_adjust: factor: hue_factor must be in [-0.5, 0.5] (%g)", factor);
    else if (check_image("_adjust", &img, w, h, c) == 0 &&
             (out = PyBytes_FromStringAndSize(img.buf, img.len))) {
        uint8_t *px = (uint8_t *)PyBytes_AsString(out);
        Py_BEGIN_ALLOW_THREADS
        fn(px, w, h, c, factor);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&img);
    return out;
}

static PyMethodDef module_methods[] = {
    {"decode_image", decode_image, METH_VARARGS, NULL},
    {"verify", verify, METH_VARARGS, NULL},
    {"error_class", error_class_py, METH_O, "the gpufeed.Error subclass of a GF_E* code"},
    {"settings_table", settings_table, METH_NOARGS, "the library's settings, a dict per row"},
    {"check_setting", check_setting, METH_VARARGS, "ValueError unless gf_settings_set takes it"},
    {"get_setting", get_setting, METH_VARARGS, "a setting's text after fields are set"},
    {"_augment_draws", gfp_augment_draws, METH_VARARGS, "test hook: augment's draws per key"},
    {"_erase_rects", gfp_erase_rects, METH_VARARGS, "test hook: erase's rectangles per key"},
    {"_augment_op", augment_op, METH_VARARGS, "torchvision's autoaugment._apply_op over PIL, in C"},
    {"_adjust", adjust, METH_VARARGS, "torchvision's adjust_brightness/contrast/saturation/hue over PIL, in C"},
    {"_mix_draw", gfp_mix_draw, METH_VARARGS, "test hook: mix's draw for a batch"},
    {"_beta_draws", gfp_beta_draws, METH_VARARGS, "test hook: Beta draws per key"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "gpufeed._gpufeed",
                                        "gpufeed's C library, for gpufeed/__init__.py", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__gpufeed(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (gfp_loader_type_init(m) < 0 || gfp_errors_init(m) < 0 || gfp_batch_types_init(m) < 0 ||
        PyModule_AddStringConstant(m, "version", gf_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
