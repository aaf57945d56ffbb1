/*
 * gpufeed._gpufeed: the module, its exceptions (one per GF_E* code), the
 * settings a dict of gf_settings field names fills, verify and
 * decode_image (the _Loader type is loader.c's). Python argument checking
 * and names live in gpufeed/__init__.py; this file takes C field names.
 * Runs on the Python threads that call it; blocking calls drop the GIL.
 */
#include <stddef.h>
#include <string.h>

#include "gpufeed_py.h"

PyObject *gfp_error_base;

/* ---- Exceptions ------------------------------------------------------- */

static const struct {
    int code;
    const char *name; /* gpufeed.NAME */
    PyObject **also;  /* a builtin it also is */
} error_table[] = {
    {GF_EOF, "EndOfData", NULL},
    {GF_EINVAL, "InvalidArgument", &PyExc_ValueError},
    {GF_ENOMEM, "OutOfMemory", &PyExc_MemoryError},
    {GF_ENOENT, "SampleNotFound", NULL},
    {GF_EIO, "ReadError", NULL},
    {GF_EEMPTY, "EmptyFile", NULL},
    {GF_ETRUNC, "TruncatedImage", NULL},
    {GF_ECORRUPT, "CorruptImage", NULL},
    {GF_EFORMAT, "UnsupportedFormat", NULL},
    {GF_ETOOBIG, "TooBig", NULL},
    {GF_EDATASET, "DatasetError", NULL},
    {GF_EBUSY, "RingStarved", NULL},
    {GF_ENODEV, "NoDevice", NULL},
    {GF_ETHREAD, "ThreadError", NULL},
    {GF_EAGAIN, "NotReady", NULL},
    {GF_EMFILE, "TooManyOpenFiles", &PyExc_OSError},
};
#define N_ERRORS (sizeof error_table / sizeof error_table[0])
static PyObject *error_class[N_ERRORS], *sample_error_base;

static PyObject *error_class_of(int code)
{
    for (size_t i = 0; i < N_ERRORS; i++)
        if (error_table[i].code == code)
            return error_class[i];
    return gfp_error_base;
}

PyObject *gfp_raise(int code, const char *msg, gf_loader *l)
{
    PyObject *cls = error_class_of(code);
    PyObject *exc = PyObject_CallFunction(cls, "s", msg && msg[0] ? msg : gf_strerror(code));
    if (!exc)
        return NULL;
    PyObject *path = Py_None, *reason = Py_None;
    gf_stats st;
    if (l && gf_sample_error_kind(code) >= 0 && gf_get_stats(l, &st) == 0 && st.n_recent > 0 &&
        st.recent[0].code == code) {
        path = PyUnicode_DecodeFSDefault(st.recent[0].path);
        reason = PyUnicode_FromString(st.recent[0].reason);
    } else {
        Py_INCREF(path);
        Py_INCREF(reason);
    }
    PyObject *codeobj = PyLong_FromLong(code), *name = PyUnicode_FromString(gf_err_name(code));
    if (path && reason && codeobj && name) {
        PyObject_SetAttrString(exc, "code", codeobj);
        PyObject_SetAttrString(exc, "name", name);
        PyObject_SetAttrString(exc, "path", path);
        PyObject_SetAttrString(exc, "reason", reason);
        PyErr_SetObject(cls, exc);
    }
    Py_XDECREF(path);
    Py_XDECREF(reason);
    Py_XDECREF(codeobj);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

static int errors_init(PyObject *m)
{
    gfp_error_base = PyErr_NewException("gpufeed.Error", PyExc_RuntimeError, NULL);
    sample_error_base = PyErr_NewException("gpufeed.SampleError", gfp_error_base, NULL);
    if (!gfp_error_base || !sample_error_base ||
        PyModule_AddObject(m, "Error", Py_NewRef(gfp_error_base)) < 0 ||
        PyModule_AddObject(m, "SampleError", Py_NewRef(sample_error_base)) < 0)
        return -1;
    for (size_t i = 0; i < N_ERRORS; i++) {
        char qual[64];
        snprintf(qual, sizeof qual, "gpufeed.%s", error_table[i].name);
        PyObject *base = gf_sample_error_kind(error_table[i].code) >= 0 ? sample_error_base
                                                                       : gfp_error_base;
        PyObject *bases = error_table[i].also ? PyTuple_Pack(2, base, *error_table[i].also)
                                              : PyTuple_Pack(1, base);
        if (!bases)
            return -1;
        error_class[i] = PyErr_NewException(qual, bases, NULL);
        Py_DECREF(bases);
        if (!error_class[i] ||
            PyModule_AddObject(m, error_table[i].name, Py_NewRef(error_class[i])) < 0)
            return -1;
        PyObject *code = PyLong_FromLong(error_table[i].code);
        if (!code || PyObject_SetAttrString(error_class[i], "code", code) < 0)
            return -1;
        Py_DECREF(code);
    }
    return 0;
}

/* ---- Settings --------------------------------------------------------- */

enum { K_U64, K_INT, K_FLOAT, K_FLOAT4 };
static const struct {
    const char *name;
    size_t offset;
    int kind;
} setting_table[] = {
#define S_(field, kind) {#field, offsetof(gf_settings, field), kind}
    S_(seed, K_U64), S_(epochs, K_U64), S_(batch_size, K_INT), S_(height, K_INT),
    S_(width, K_INT), S_(channels, K_INT), S_(threads, K_INT), S_(prefetch_depth, K_INT),
    S_(queue_depth, K_INT), S_(io, K_INT), S_(decoder, K_INT), S_(transform, K_INT),
    S_(on_error, K_INT), S_(shuffle, K_INT), S_(drop_last, K_INT), S_(rank, K_INT),
    S_(world, K_INT), S_(max_pixels, K_U64), S_(max_file_bytes, K_U64),
    S_(scale_min, K_FLOAT), S_(scale_max, K_FLOAT), S_(ratio_min, K_FLOAT),
    S_(ratio_max, K_FLOAT), S_(flip_prob, K_FLOAT), S_(crop_fraction, K_FLOAT),
    S_(device, K_INT), S_(device_id, K_INT), S_(dtype, K_INT), S_(layout, K_INT),
    S_(mean, K_FLOAT4), S_(std, K_FLOAT4), S_(flip_on_device, K_INT),
    S_(pinned_max_bytes, K_U64), S_(device_max_bytes, K_U64), S_(autotune, K_INT),
    S_(max_threads, K_INT), S_(copy_stream_per_slot, K_INT), S_(strictness, K_INT),
    S_(extensions, K_INT), S_(read_budget_bytes, K_U64), S_(on_shard_error, K_INT),
#undef S_
};
/* The enum fields are read and written as int. */
_Static_assert(sizeof(gf_device) == sizeof(int) && sizeof(gf_io) == sizeof(int),
               "enum fields are int-sized");

static int set_one(gf_settings *s, PyObject *key, PyObject *value)
{
    const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof setting_table / sizeof setting_table[0]; i++) {
        if (strcmp(name, setting_table[i].name))
            continue;
        char *at = (char *)s + setting_table[i].offset;
        switch (setting_table[i].kind) {
        case K_U64: {
            unsigned long long v = PyLong_AsUnsignedLongLong(value);
            if (v == (unsigned long long)-1 && PyErr_Occurred())
                return -1;
            *(uint64_t *)at = v;
            return 0;
        }
        case K_INT: {
            int overflow;
            long v = PyLong_AsLongAndOverflow(value, &overflow);
            if (v == -1 && PyErr_Occurred())
                return -1;
            if (overflow || v < INT32_MIN || v > INT32_MAX) {
                PyErr_Format(PyExc_ValueError, "%s: out of range", name);
                return -1;
            }
            *(int *)at = (int)v;
            return 0;
        }
        case K_FLOAT: {
            double v = PyFloat_AsDouble(value);
            if (v == -1.0 && PyErr_Occurred())
                return -1;
            *(float *)at = (float)v;
            return 0;
        }
        default: { /* K_FLOAT4: a sequence of up to 4 */
            Py_ssize_t n = PySequence_Size(value);
            if (n < 0)
                return -1;
            if (n > 4) {
                PyErr_Format(PyExc_ValueError, "%s: at most 4 values (one per channel)", name);
                return -1;
            }
            for (Py_ssize_t c = 0; c < n; c++) {
                PyObject *item = PySequence_GetItem(value, c);
                double v = item ? PyFloat_AsDouble(item) : -1.0;
                Py_XDECREF(item);
                if (v == -1.0 && PyErr_Occurred())
                    return -1;
                ((float *)at)[c] = (float)v;
            }
            return 0;
        }
        }
    }
    PyErr_Format(PyExc_TypeError, "unknown setting '%s'", name);
    return -1;
}

/* s from (data, {field: value}); data is kept alive by the caller's tuple. */
int gfp_settings_from(gf_settings *s, PyObject *data, PyObject *fields)
{
    gf_default_settings(s);
    s->data = PyUnicode_AsUTF8AndSize(data, NULL);
    if (!s->data)
        return -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(fields, &pos, &key, &value))
        if (set_one(s, key, value) < 0)
            return -1;
    return 0;
}


/* ---- verify ------------------------------------------------------------- */

/* verify(data, settings): gf_verify, the one `gpufeed verify` runs: each
 * damaged shard (index -1) then each bad sample, as a dict. */
static PyObject *verify(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *data, *fields;
    if (!PyArg_ParseTuple(args, "UO!:verify", &data, &PyDict_Type, &fields))
        return NULL;
    gf_settings s;
    if (gfp_settings_from(&s, data, fields) < 0)
        return NULL;
    gf_verify_result *r = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gf_verify(&s, &r);
    Py_END_ALLOW_THREADS
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
    gf_verify_free(&r);
    return out;
}

static PyObject *error_class_py(PyObject *m, PyObject *arg)
{
    (void)m;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return Py_NewRef(error_class_of((int)code));
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

static PyMethodDef module_methods[] = {
    {"decode_image", decode_image, METH_VARARGS, NULL},
    {"verify", verify, METH_VARARGS, NULL},
    {"error_class", error_class_py, METH_O, "the gpufeed.Error subclass of a GF_E* code"},
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
    if (gfp_loader_type_init(m) < 0 || errors_init(m) < 0 || gfp_batch_types_init(m) < 0 ||
        PyModule_AddStringConstant(m, "version", gf_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
