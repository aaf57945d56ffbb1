/*
 * gpufeed.Batch and gpufeed.Array: one delivered batch and its arrays
 * (data, labels, indices; targets with augment's mix; sources with data
 * sets mixed), exported without a copy through DLPack (legacy
 * and versioned) and the buffer protocol. Every export holds the batch's
 * slot (gfp_slot); its deleter or buffer release drops it, on any thread.
 * Python calls run with the GIL; the DLPack deleters may run without it.
 */
#include <string.h>

#include "dlpack.h"
#include "gpufeed_py.h"

PyObject *gfp_batch_type, *gfp_array_type;

typedef struct {
    PyObject_HEAD
    gfp_slot *slot;   /* NULL once released */
    int touched;      /* Python used it: delivered (see gfp_slot_take_back) */
    int count, device, device_id;
    int n_fields;     /* settings.fields': the items it unpacks to */
    uint64_t epoch, position;
} BatchObject;

enum { ARR_DATA, ARR_LABELS, ARR_INDICES, ARR_TARGETS, ARR_SOURCES };

typedef struct {
    PyObject_HEAD
    BatchObject *batch; /* a reference */
    gfp_slot *slot;     /* one of its own: torch.frombuffer keeps the Array, not the view */
    void *ptr;
    int ndim, itemsize, cuda;
    DLDataType dt;
    const char *format, *dtype_name;
    Py_ssize_t shape[GF_FIELD_DIMS_MAX], strides[GF_FIELD_DIMS_MAX];
} ArrayObject;

static void *type_free(PyObject *self)
{
    return PyType_GetSlot(Py_TYPE(self), Py_tp_free);
}

/* ---- Batch ------------------------------------------------------------ */

PyObject *gfp_batch_new(gfp_core *c, gf_batch *b)
{
    gfp_slot *slot = gfp_slot_new(c, b);
    if (!slot) {
        gf_release(c->l, b);
        return PyErr_NoMemory();
    }
    BatchObject *self = PyObject_New(BatchObject, (PyTypeObject *)gfp_batch_type);
    if (!self) {
        gfp_slot_unref(slot);
        return NULL;
    }
    self->slot = slot;
    self->touched = 0;
    self->count = b->count;
    self->device = b->device;
    self->device_id = c->device_id;
    self->epoch = b->epoch;
    self->position = b->position;
    self->n_fields = b->n_fields;
    return (PyObject *)self;
}

static void batch_drop(BatchObject *self)
{
    gfp_slot *s = self->slot;
    self->slot = NULL;
    if (s)
        gfp_slot_unref(s);
}

static void batch_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    BatchObject *self = (BatchObject *)op;
    /* Freed untouched while an exception unwinds (a KeyboardInterrupt
     * raised before the caller ever saw it): not delivered; the loader
     * keeps it for the next next(). */
    if (self->slot && !self->touched && PyErr_Occurred() && gfp_slot_take_back(self->slot))
        self->slot = NULL;
    batch_drop(self);
    ((freefunc)type_free(op))(op);
    Py_DECREF(tp);
}

static BatchObject *touch(PyObject *op)
{
    BatchObject *self = (BatchObject *)op;
    self->touched = 1;
    return self;
}

static PyObject *batch_release(PyObject *op, PyObject *unused)
{
    (void)unused;
    batch_drop(touch(op));
    Py_RETURN_NONE;
}

static PyObject *batch_exit(PyObject *op, PyObject *args)
{
    (void)args;
    return batch_release(op, NULL);
}

static PyObject *batch_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    touch(op);
    return Py_NewRef(op);
}

static const struct {
    DLDataType dt;
    const char *format, *name;
} array_types[] = {
    [GF_DTYPE_UINT8] = {{kDLUInt, 8, 1}, "B", "uint8"},
    [GF_DTYPE_FLOAT32] = {{kDLFloat, 32, 1}, "f", "float32"},
    [GF_DTYPE_FLOAT16] = {{kDLFloat, 16, 1}, "e", "float16"},
    /* No buffer-protocol letter for bfloat16: its bits, as uint16. */
    [GF_DTYPE_BFLOAT16] = {{kDLBfloat, 16, 1}, "H", "bfloat16"},
    [GF_DTYPE_INT32] = {{kDLInt, 32, 1}, "i", "int32"},
    [GF_DTYPE_INT64] = {{kDLInt, 64, 1}, "q", "int64"},
    [GF_DTYPE_FLOAT64] = {{kDLFloat, 64, 1}, "d", "float64"},
};

/* An Array over ptr: ndim dimensions of shape, C order, of dtype. */
static PyObject *new_array(BatchObject *self, void *ptr, int ndim, const int64_t *shape,
                           gf_dtype dtype, int cuda)
{
    self->touched = 1;
    if (!self->slot) {
        PyErr_SetString(PyExc_ValueError, "the batch was released: its arrays are gone "
                                          "(.clone() or np.array() what you keep)");
        return NULL;
    }
    if (gfp_refuse_inherited(self->slot->core, "Batch"))
        return NULL;
    ArrayObject *a = PyObject_New(ArrayObject, (PyTypeObject *)gfp_array_type);
    if (!a)
        return NULL;
    a->batch = (BatchObject *)Py_NewRef((PyObject *)self);
    a->slot = self->slot;
    gfp_slot_ref(a->slot);
    a->ptr = ptr;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a->shape[i] = (Py_ssize_t)shape[i];
    a->dt = array_types[dtype].dt;
    a->format = array_types[dtype].format;
    a->dtype_name = array_types[dtype].name;
    a->itemsize = a->dt.bits / 8;
    a->cuda = cuda;
    Py_ssize_t stride = a->itemsize;
    for (int i = a->ndim - 1; i >= 0; i--) {
        a->strides[i] = stride;
        stride *= a->shape[i];
    }
    return (PyObject *)a;
}

static PyObject *batch_array(BatchObject *self, int which)
{
    if (!self->slot)
        return new_array(self, NULL, 0, NULL, GF_DTYPE_UINT8, 0); /* its error */
    const gf_batch *b = self->slot->b;
    if (which == ARR_DATA) {
        bool nchw = b->layout == GF_LAYOUT_NCHW;
        int64_t shape[4] = {b->count, nchw ? b->channels : b->height,
                            nchw ? b->height : b->width, nchw ? b->width : b->channels};
        return new_array(self, b->data, 4, shape, b->dtype, b->device == GF_DEVICE_CUDA);
    }
    if (which == ARR_TARGETS) {
        if (!b->targets)
            Py_RETURN_NONE;
        int64_t shape[2] = {b->count, b->n_classes};
        return new_array(self, (void *)b->targets, 2, shape, GF_DTYPE_FLOAT32,
                         b->device == GF_DEVICE_CUDA);
    }
    int64_t n = b->count;
    if (which == ARR_SOURCES) /* host memory, as the labels */
        return b->sources ? new_array(self, (void *)b->sources, 1, &n, GF_DTYPE_INT32, 0)
                          : Py_NewRef(Py_None);
    return new_array(self, which == ARR_LABELS ? (void *)self->slot->labels64 : (void *)b->indices,
                     1, &n, GF_DTYPE_INT64, 0);
}

static PyObject *batch_get_data(PyObject *op, void *c) { (void)c; return batch_array((BatchObject *)op, ARR_DATA); }
static PyObject *batch_get_labels(PyObject *op, void *c) { (void)c; return batch_array((BatchObject *)op, ARR_LABELS); }
static PyObject *batch_get_indices(PyObject *op, void *c) { (void)c; return batch_array((BatchObject *)op, ARR_INDICES); }
static PyObject *batch_get_targets(PyObject *op, void *c) { (void)c; return batch_array((BatchObject *)op, ARR_TARGETS); }
static PyObject *batch_get_sources(PyObject *op, void *c) { (void)c; return batch_array((BatchObject *)op, ARR_SOURCES); }
static PyObject *batch_get_count(PyObject *op, void *c) { (void)c; return PyLong_FromLong(touch(op)->count); }
static PyObject *batch_get_epoch(PyObject *op, void *c) { (void)c; return PyLong_FromUnsignedLongLong(touch(op)->epoch); }
static PyObject *batch_get_position(PyObject *op, void *c) { (void)c; return PyLong_FromUnsignedLongLong(touch(op)->position); }
static PyObject *batch_get_released(PyObject *op, void *c) { (void)c; return PyBool_FromLong(!touch(op)->slot); }
static PyObject *batch_get_device(PyObject *op, void *c)
{
    (void)c;
    return PyUnicode_FromString(touch(op)->device == GF_DEVICE_CUDA ? "cuda" : "cpu");
}

/* A text or bytes field's samples: a list of str or bytes, copied (a
 * caption outlives the step more often than pixels do); boxes: a list of
 * (N_i, 4|5) float32 Arrays, views of the slot as the pixels are. */
static PyObject *field_list(BatchObject *self, const gf_field *f)
{
    if (!self->slot) {
        PyErr_SetString(PyExc_ValueError, "the batch was released: its fields are gone");
        return NULL;
    }
    PyObject *list = PyList_New(self->count);
    for (int i = 0; list && f->kind == GF_FIELD_BOXES && i < self->count; i++) {
        int64_t shape[2] = {f->lengths[i] / (f->shape[1] * (int64_t)sizeof(float)), f->shape[1]};
        PyObject *item = new_array(self, (uint8_t *)f->data + f->offsets[i], 2, shape,
                                   GF_DTYPE_FLOAT32, 0);
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SetItem(list, i, item); /* steals item */
    }
    for (int i = 0; list && f->kind != GF_FIELD_BOXES && i < self->count; i++) {
        const char *p = (const char *)f->data + f->offsets[i];
        /* The library checked the text: "strict" cannot fail on it. */
        PyObject *item = f->kind == GF_FIELD_TEXT
                             ? PyUnicode_DecodeUTF8(p, (Py_ssize_t)f->lengths[i], "strict")
                             : PyBytes_FromStringAndSize(p, (Py_ssize_t)f->lengths[i]);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SetItem(list, i, item); /* steals item */
    }
    return list;
}

/* The tuple face, as a DataLoader's batch: `x, y = batch`, or with
 * fields one item a field in their order (`images, labels, captions`).
 * len(batch) is the tuple's; .count is the samples. */
static Py_ssize_t batch_len(PyObject *op)
{
    return touch(op)->n_fields;
}

static PyObject *batch_item(PyObject *op, Py_ssize_t i)
{
    BatchObject *self = touch(op);
    if (i < 0 || i >= self->n_fields) {
        PyErr_Format(PyExc_IndexError, "a Batch is a tuple of its %d fields: index 0 to %d",
                     self->n_fields, self->n_fields - 1);
        return NULL;
    }
    if (!self->slot)
        return batch_array(self, ARR_DATA); /* its error */
    const gf_field *f = &self->slot->b->fields[i];
    if (f->kind == GF_FIELD_IMAGE || f->kind == GF_FIELD_LABEL)
        return batch_array(self, f->kind == GF_FIELD_IMAGE ? ARR_DATA : ARR_LABELS);
    if (f->kind == GF_FIELD_ARRAY || f->kind == GF_FIELD_MASK)
        return new_array(self, (void *)f->data, f->ndim, f->shape, f->dtype,
                         f->device == GF_DEVICE_CUDA);
    return field_list(self, f);
}

static PyObject *batch_repr(PyObject *op)
{
    BatchObject *self = touch(op);
    return PyUnicode_FromFormat("<gpufeed.Batch count=%d epoch=%llu position=%llu%s>", self->count,
                                (unsigned long long)self->epoch,
                                (unsigned long long)self->position,
                                self->slot ? "" : " released");
}

static PyGetSetDef batch_getset[] = {
    {"data", batch_get_data, NULL, "the pixels: an Array (N,H,W,C) or (N,C,H,W)", NULL},
    {"labels", batch_get_labels, NULL, "int64 labels (torch's losses take them as they are): "
                                       "an Array (N,), a copy of the C batch's int32", NULL},
    {"indices", batch_get_indices, NULL, "int64 data set indices: an Array (N,)", NULL},
    {"targets", batch_get_targets, NULL, "augment's mix: the soft targets, a float32 Array "
                                         "(N, classes) where data is; None without mix", NULL},
    {"sources", batch_get_sources, NULL, "data sets mixed (data=[(source, weight), ...]): each "
                                         "sample's source, 0.. in data's order, an int32 Array "
                                         "(N,); None when data is not a mix", NULL},
    {"count", batch_get_count, NULL, "samples in the batch", NULL},
    {"epoch", batch_get_epoch, NULL, "the epoch of these samples", NULL},
    {"position", batch_get_position, NULL, "where the epoch resumes after this batch", NULL},
    {"device", batch_get_device, NULL, "'cpu' or 'cuda'", NULL},
    {"released", batch_get_released, NULL, "True after release()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef batch_methods[] = {
    {"release", batch_release, METH_NOARGS,
     "Gives up this Batch's claim on its ring slot now: the slot returns once the arrays "
     "and tensors already exported are gone too; exporting after this raises."},
    {"__enter__", batch_enter, METH_NOARGS, NULL},
    {"__exit__", batch_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot batch_slots[] = {
    {Py_tp_dealloc, batch_dealloc},
    {Py_tp_repr, batch_repr},
    {Py_tp_getset, batch_getset},
    {Py_tp_methods, batch_methods},
    {Py_sq_length, batch_len},
    {Py_sq_item, batch_item},
    {Py_tp_doc, "One batch in its ring slot. Its arrays are zero-copy views: the slot returns "
                "to the ring when the Batch and every exported tensor are gone, so .clone() "
                "what you keep past the step. It unpacks as a DataLoader's (data, labels): "
                "`x, y = batch`, and len(batch) is 2; with fields=, one item a field in "
                "their order (text a list of str, bytes of bytes); batch.count is the "
                "samples."},
    {0, NULL},
};

static PyType_Spec batch_spec = {"gpufeed.Batch", sizeof(BatchObject), 0, Py_TPFLAGS_DEFAULT,
                                 batch_slots};

/* ---- Array: DLPack ---------------------------------------------------- */

typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    int64_t shape[GF_FIELD_DIMS_MAX];
    gfp_slot *slot;
} export_ctx;

static void deleter_legacy(DLManagedTensor *t)
{
    export_ctx *x = t->manager_ctx;
    gfp_slot_unref(x->slot);
    free(x);
}

static void deleter_versioned(DLManagedTensorVersioned *t)
{
    export_ctx *x = t->manager_ctx;
    gfp_slot_unref(x->slot);
    free(x);
}

/* A capsule no consumer took still owns its tensor. */
static void capsule_legacy_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
        t->deleter(t);
    }
}

static void capsule_versioned_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, "dltensor_versioned");
        t->deleter(t);
    }
}

static gfp_slot *array_slot(ArrayObject *a, const char *what)
{
    if (!a->batch->slot) {
        PyErr_Format(PyExc_BufferError, "%s: the batch was released", what);
        return NULL;
    }
    return gfp_refuse_inherited(a->slot->core, what) ? NULL : a->slot;
}

static int array_dl_device(ArrayObject *a, DLDevice *d)
{
    d->device_type = a->cuda ? kDLCUDA : kDLCPU;
    d->device_id = a->cuda ? a->batch->device_id : 0;
    return a->cuda;
}

/* DLPack's stream numbers for CUDA: None and 1 the legacy default stream,
 * 2 the per-thread default, -1 no synchronisation, else a cudaStream_t. */
static int parse_stream(PyObject *obj, int *skip, uintptr_t *stream)
{
    *skip = 0;
    *stream = 0;
    if (obj == Py_None)
        return 0;
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v == -1)
        *skip = 1;
    else if (v == 0 || v < -1) {
        PyErr_Format(PyExc_ValueError, "stream %lld is not a CUDA stream for DLPack "
                                       "(1: legacy default, 2: per-thread, or a handle)", v);
        return -1;
    } else
        *stream = v == 1 ? 0 : (uintptr_t)v;
    return 0;
}

static PyObject *array_dlpack(PyObject *op, PyObject *args, PyObject *kw)
{
    ArrayObject *a = (ArrayObject *)op;
    static char *names[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream_obj = Py_None, *max_version = Py_None, *dl_device = Py_None,
             *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", names, &stream_obj,
                                     &max_version, &dl_device, &copy))
        return NULL;
    gfp_slot *slot = array_slot(a, "__dlpack__");
    if (!slot)
        return NULL;
    if (copy != Py_None && !PyBool_Check(copy)) {
        PyErr_Format(PyExc_TypeError, "__dlpack__: copy: a bool or None, not %R",
                     copy);
        return NULL;
    }
    if (stream_obj != Py_None && (!PyLong_Check(stream_obj) || PyBool_Check(stream_obj))) {
        PyErr_Format(PyExc_TypeError, "__dlpack__: stream: an int or None, not %R",
                     stream_obj);
        return NULL;
    }
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__(copy=True): gpufeed exports its ring "
                                           "slot without a copy; clone the tensor instead");
        return NULL;
    }
    DLDevice dev;
    int cuda = array_dl_device(a, &dev);
    if (dl_device != Py_None) {
        int type, id;
        if (!PyTuple_Check(dl_device) || PyTuple_Size(dl_device) != 2 ||
            !PyLong_Check(PyTuple_GetItem(dl_device, 0)) ||
            !PyLong_Check(PyTuple_GetItem(dl_device, 1))) {
            PyErr_Format(PyExc_TypeError, "__dlpack__: dl_device: a (device_type, device_id) "
                         "tuple, not %R", dl_device);
            return NULL;
        }
        if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &type, &id))
            return NULL;
        if (type != (int)dev.device_type || id != dev.device_id) {
            PyErr_Format(PyExc_BufferError, "dl_device (%d, %d): the batch is on (%d, %d) and "
                         "is not copied", type, id, (int)dev.device_type, dev.device_id);
            return NULL;
        }
    }
    int versioned = 0;
    if (max_version != Py_None) {
        unsigned major, minor;
        if (!PyTuple_Check(max_version) || PyTuple_Size(max_version) != 2 ||
            !PyLong_Check(PyTuple_GetItem(max_version, 0)) ||
            !PyLong_Check(PyTuple_GetItem(max_version, 1))) {
            PyErr_Format(PyExc_TypeError, "__dlpack__: max_version: a (major, minor) tuple, "
                         "not %R", max_version);
            return NULL;
        }
        if (!PyArg_ParseTuple(max_version, "II:max_version", &major, &minor))
            return NULL;
        versioned = major >= 1;
    }
    if (cuda) {
        int skip;
        uintptr_t stream;
        if (parse_stream(stream_obj, &skip, &stream) < 0)
            return NULL;
        if (!skip) {
            int rc = gf_batch_wait(slot->b, (void *)stream);
            if (rc < 0)
                return gfp_raise(rc, "__dlpack__: the consumer stream cannot wait for the batch",
                                 slot->core->l);
            atomic_store(&slot->stream, stream); /* the release waits for it */
        }
    }
    export_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return PyErr_NoMemory();
    DLTensor *t = versioned ? &x->m.versioned.dl_tensor : &x->m.legacy.dl_tensor;
    for (int i = 0; i < a->ndim; i++)
        x->shape[i] = a->shape[i];
    *t = (DLTensor){.data = a->ptr, .device = dev, .ndim = a->ndim, .dtype = a->dt,
                    .shape = x->shape, .strides = NULL, .byte_offset = 0};
    x->slot = slot;
    gfp_slot_ref(slot);
    PyObject *cap;
    if (versioned) {
        x->m.versioned.version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        x->m.versioned.manager_ctx = x;
        x->m.versioned.deleter = deleter_versioned;
        cap = PyCapsule_New(&x->m.versioned, "dltensor_versioned", capsule_versioned_destructor);
    } else {
        x->m.legacy.manager_ctx = x;
        x->m.legacy.deleter = deleter_legacy;
        cap = PyCapsule_New(&x->m.legacy, "dltensor", capsule_legacy_destructor);
    }
    if (!cap) {
        gfp_slot_unref(slot);
        free(x);
    }
    return cap;
}

static PyObject *array_dlpack_device(PyObject *op, PyObject *unused)
{
    (void)unused;
    ArrayObject *a = (ArrayObject *)op;
    if (!array_slot(a, "__dlpack_device__"))
        return NULL;
    DLDevice dev;
    array_dl_device(a, &dev);
    return Py_BuildValue("(ii)", (int)dev.device_type, dev.device_id);
}

/* ---- Array: the buffer protocol (host memory only) --------------------- */

static int array_getbuffer(PyObject *op, Py_buffer *view, int flags)
{
    ArrayObject *a = (ArrayObject *)op;
    gfp_slot *slot = array_slot(a, "buffer");
    if (!slot)
        return -1;
    DLDevice dev;
    if (array_dl_device(a, &dev)) {
        PyErr_SetString(PyExc_BufferError, "the batch is in CUDA memory: use DLPack "
                                           "(torch.from_dlpack), not the buffer protocol");
        return -1;
    }
    (void)flags; /* C-contiguous, writable: every request can be met */
    gfp_slot_ref(slot);
    view->buf = a->ptr;
    view->obj = Py_NewRef(op);
    view->itemsize = a->itemsize;
    view->len = a->itemsize;
    for (int i = 0; i < a->ndim; i++)
        view->len *= a->shape[i];
    view->readonly = 0;
    view->ndim = a->ndim;
    view->format = (flags & PyBUF_FORMAT) ? (char *)a->format : NULL;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? a->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? a->strides : NULL;
    view->suboffsets = NULL;
    view->internal = slot;
    return 0;
}

static void array_releasebuffer(PyObject *op, Py_buffer *view)
{
    (void)op;
    gfp_slot_unref(view->internal);
}

static void array_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    gfp_slot_unref(((ArrayObject *)op)->slot);
    Py_DECREF((PyObject *)((ArrayObject *)op)->batch);
    ((freefunc)type_free(op))(op);
    Py_DECREF(tp);
}

static PyObject *array_get_shape(PyObject *op, void *c)
{
    (void)c;
    ArrayObject *a = (ArrayObject *)op;
    PyObject *t = PyTuple_New(a->ndim);
    for (int i = 0; t && i < a->ndim; i++)
        PyTuple_SetItem(t, i, PyLong_FromSsize_t(a->shape[i]));
    return t;
}

static PyObject *array_get_dtype(PyObject *op, void *c)
{
    (void)c;
    return PyUnicode_FromString(((ArrayObject *)op)->dtype_name);
}

static PyObject *array_get_device(PyObject *op, void *c)
{
    (void)c;
    ArrayObject *a = (ArrayObject *)op;
    return PyUnicode_FromString(a->cuda ? "cuda" : "cpu");
}

static PyGetSetDef array_getset[] = {
    {"shape", array_get_shape, NULL, "a tuple", NULL},
    {"dtype", array_get_dtype, NULL, "'uint8', 'float32', 'float16', 'bfloat16', 'int32', 'int64'", NULL},
    {"device", array_get_device, NULL, "'cpu' or 'cuda'", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack export: the versioned struct when max_version >= (1, 0), else the legacy one."},
    {"__dlpack_device__", array_dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot array_slots[] = {
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_getset, array_getset},
    {Py_tp_methods, array_methods},
    {Py_bf_getbuffer, array_getbuffer},
    {Py_bf_releasebuffer, array_releasebuffer},
    {Py_tp_doc, "One of a batch's arrays, in its ring slot: torch.from_dlpack, np.from_dlpack, "
                "memoryview and np.asarray take it without a copy."},
    {0, NULL},
};

static PyType_Spec array_spec = {"gpufeed.Array", sizeof(ArrayObject), 0, Py_TPFLAGS_DEFAULT,
                                 array_slots};

int gfp_batch_types_init(PyObject *module)
{
    gfp_batch_type = PyType_FromSpec(&batch_spec);
    gfp_array_type = PyType_FromSpec(&array_spec);
    if (!gfp_batch_type || !gfp_array_type)
        return -1;
    if (PyModule_AddObject(module, "Batch", Py_NewRef(gfp_batch_type)) < 0 ||
        PyModule_AddObject(module, "Array", Py_NewRef(gfp_array_type)) < 0)
        return -1;
    return 0;
}
