/*
 * The DLPack structs sharc exports, written from the DLPack specification (dlpack.h,
 * v0.8, Apache-2.0; https://dmlc.github.io/dlpack/latest/c_api.html). Only the unversioned
 * ("legacy") ABI is defined: a DLManagedTensor in a PyCapsule named "dltensor", which the
 * consumer renames "used_dltensor" once it owns the tensor. numpy >= 1.22 and torch >= 1.10
 * accept it, and DLPack v1.0 keeps it as the answer to a consumer that asks for no version
 * or for one the producer does not offer.
 */
#ifndef SHARC_PY_DLPACK_H
#define SHARC_PY_DLPACK_H

#include <stdint.h>

/* The values are fixed by the specification; only those sharc produces are listed. */
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLBfloat = 4,
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;   /* bits per lane */
    uint16_t lanes; /* 1 for scalars */
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

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif /* SHARC_PY_DLPACK_H */
