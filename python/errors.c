/*
 * gpufeed._gpufeed's exceptions: one class per GF_E* code under
 * gpufeed.Error (sample errors under gpufeed.SampleError, some also a
 * builtin), and gfp_raise, which every file of the module raises them
 * with. A leaf: it calls no other file of the module.
 */
#include <string.h>

#include "gpufeed_py.h"

PyObject *gfp_error_base;

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

PyObject *gfp_error_class(int code)
{
    for (size_t i = 0; i < N_ERRORS; i++)
        if (error_table[i].code == code)
            return error_class[i];
    return gfp_error_base;
}

PyObject *gfp_raise(int code, const char *msg, gf_loader *l)
{
    PyObject *cls = gfp_error_class(code);
    /* A message names a file: its bytes survive, whatever they are. */
    PyObject *text = PyUnicode_DecodeFSDefault(msg && msg[0] ? msg : gf_strerror(code));
    PyObject *exc = text ? PyObject_CallFunctionObjArgs(cls, text, NULL) : NULL;
    Py_XDECREF(text);
    if (!exc)
        return NULL;
    PyObject *path = Py_None, *reason = Py_None;
    gf_stats st;
    if (l && gf_sample_error_kind(code) >= 0 && gf_get_stats(l, &st) == 0 && st.n_recent > 0 &&
        st.recent[0].code == code) {
        path = PyUnicode_DecodeFSDefault(st.recent[0].path);
        reason = PyUnicode_DecodeFSDefault(st.recent[0].reason);
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

int gfp_errors_init(PyObject *m)
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
