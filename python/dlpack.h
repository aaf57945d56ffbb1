/*
 * The DLPack v1.0 definitions the Python module exports batches with,
 * written after upstream's include/dlpack/dlpack.h (v1.0):
 *   https://github.com/dmlc/dlpack
 *   Copyright 2017 by Contributors; Apache License, Version 2.0
 *   (http://www.apache.org/licenses/LICENSE-2.0).
 * Only what gpufeed uses; names, values and layouts are upstream's, so the
 * structs are ABI-identical to what every consumer expects. Debian's
 * libdlpack-dev (0.6) lacks DLManagedTensorVersioned, hence this copy.
 */
#ifndef GPUFEED_PY_DLPACK_H
#define GPUFEED_PY_DLPACK_H

#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLBfloat = 4U,
} DLDataTypeCode;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;

/* The legacy struct: capsule name "dltensor", "used_dltensor" once taken. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

/* v1.0: capsule name "dltensor_versioned", "used_dltensor_versioned". */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif
