/*
 * gf_settings from Python: each field from its text through the
 * library's table (gf_settings_set), so the module checks nothing the
 * table does not. A leaf of the module.
 */
#include <string.h>

#include "gpufeed_py.h"

/* One field from its text through the library's table (gf_settings_set):
 * gpufeed/__init__.py checks the Python types and makes the text. */
int gfp_setting_set(gf_settings *s, PyObject *key, PyObject *value)
{
    const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
    if (!name)
        return -1;
    const gf_setting_info *row = gf_setting_find(name);
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s: the setting's text (a str)", name);
        return -1;
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(value, &len);
    char why[320];
    if (!text)
        return -1;
    /* C would read only up to the NUL. A PATH (kept as the text itself,
     * alive in the caller's dict until gf_open returns) has always been
     * taken so, up to its NUL. */
    if (strlen(text) != (size_t)len && !(row && row->type == GF_SETTING_PATH)) {
        PyErr_Format(PyExc_ValueError, "%s: %R holds a NUL character", name, value);
        return -1;
    }
    if (gf_settings_set(s, name, text, why, sizeof why) < 0) {
        PyErr_SetString(row ? PyExc_ValueError : PyExc_TypeError, why);
        return -1;
    }
    return 0;
}

/* s from (data, {field: value}); data is kept alive by the caller's tuple:
 * bytes (a path as os.fsencode gives it), or a str for an empty one. */
int gfp_settings_from(gf_settings *s, PyObject *data, PyObject *fields)
{
    gf_default_settings(s);
    Py_ssize_t len = 0;
    if (PyBytes_Check(data)) {
        s->data = PyBytes_AsString(data);
        len = PyBytes_Size(data);
    } else if (PyUnicode_Check(data))
        s->data = PyUnicode_AsUTF8AndSize(data, &len);
    else {
        PyErr_Format(PyExc_TypeError, "data: a path's bytes, not %R", data);
        return -1;
    }
    if (!s->data)
        return -1;
    if (strlen(s->data) != (size_t)len) {
        PyErr_SetString(PyExc_ValueError, "data: the path holds a NUL byte, which no file "
                                          "name can");
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(fields, &pos, &key, &value))
        if (gfp_setting_set(s, key, value) < 0)
            return -1;
    return 0;
}
