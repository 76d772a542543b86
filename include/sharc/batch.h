/*
 * sharc: batches of named tensors.
 */
#ifndef SHARC_BATCH_H
#define SHARC_BATCH_H

#include "sharc/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element types. Values are stable: they travel in frames. */
typedef enum sharc_dtype {
    SHARC_DTYPE_F32 = 1,
    SHARC_DTYPE_I32 = 2,
    SHARC_DTYPE_I64 = 3,
    SHARC_DTYPE_U8 = 4,
    SHARC_DTYPE_F16 = 5,
    SHARC_DTYPE_BF16 = 6,
    SHARC_DTYPE_F64 = 7,
} sharc_dtype;

/** Where a tensor's memory lives. Values are stable: they travel in frames. */
typedef enum sharc_device {
    SHARC_DEVICE_HOST = 1,
    SHARC_DEVICE_CUDA = 2,
} sharc_device;

#define SHARC_TENSOR_NAME_MAX 32 ///< names are at most 31 bytes plus NUL
#define SHARC_TENSOR_MAX_DIMS 4

/**
 * A plain row-major tensor. It carries what a DLPack export needs: dtype code and bits
 * (sharc_dtype_size), device type and ordinal.
 */
typedef struct sharc_tensor {
    char name[SHARC_TENSOR_NAME_MAX];     ///< "audio", "audio_lens", "cut_id_offsets", ...
    sharc_dtype dtype;                    ///< element type
    sharc_device device;                  ///< host or CUDA
    int device_ordinal;                   ///< CUDA device index (0 for host)
    int ndim;                             ///< 0..SHARC_TENSOR_MAX_DIMS
    int64_t shape[SHARC_TENSOR_MAX_DIMS]; ///< extent per dimension
    void *data;                           ///< first element; owned by the batch
    size_t nbytes;                        ///< product(shape) * sharc_dtype_size(dtype)
} sharc_tensor;

/**
 * A batch: named tensors plus where it came from. Owned by the library until
 * sharc_batch_release(); the caller may read (and write) the tensors meanwhile.
 *
 * Standard tensors: `audio` f32 [B,T] zero-padded, its rows at one sampling rate, `audio_lens` i32
 * [B], `duration` f32 [B], and string columns `cut_id`, `text`, `speaker`, `language`, each as
 * `<name>_offsets` i32 [B+1] plus `<name>_bytes` u8 [N] (Arrow style: string i is
 * bytes[offsets[i]..offsets[i+1]), not NUL-terminated). A cut without a text, speaker or
 * language has an empty string there (length 0), not a missing row. A mixture's batches
 * (sharc_reader_settings.input_cfg) have one more string column per tag name of its sources
 * besides `lang` (which sets `language`), such as `task`: empty for the cuts of a source
 * without that tag. A reader with conditioning (sharc_reader_settings.augment) adds `speed`,
 * `gain` and `snr_db` f32 [B]: each cut's speed factor and linear gain (1 = none) and the SNR
 * in dB of the noise mixed in (NAN where none was), the values sharc_cut has for the cut in
 * the same epoch. A batch whose row lengths
 * or a column's string bytes would pass INT32_MAX is not made: sharc_reader_next_batch() fails
 * with SHARC_ERR_TOO_LARGE naming the step and the tensor.
 */
typedef struct sharc_batch {
    uint64_t step;         ///< 0-based step number since the start of the run
    uint64_t epoch;        ///< epoch of the batch's first cut
    size_t n_tensors;      ///< number of tensors
    sharc_tensor *tensors; ///< the tensors
    void *owner_;          ///< private: the pool this batch returns to
} sharc_batch;

/** Size in bytes of one element of `dtype`; 0 for an unknown value. */
SHARC_API size_t sharc_dtype_size(sharc_dtype dtype);

/** Name of a dtype ("f32", "i32", ...); "unknown" otherwise. */
SHARC_API const char *sharc_dtype_name(sharc_dtype dtype);

/** The tensor called `name`, or NULL. Any thread may call it while the batch is held. */
SHARC_API const sharc_tensor *sharc_batch_tensor(const sharc_batch *b, const char *name);

/**
 * Read string `i` of the string column `column` ("cut_id", "text", ...).
 * @param len receives the string's length in bytes
 * @return a pointer into the batch (not NUL-terminated), or NULL if the column or row is absent
 */
SHARC_API const char *sharc_batch_string(const sharc_batch *b, const char *column, size_t i,
                                         size_t *len);

/**
 * Copy tensor `t`'s bytes into host memory `dst` (at least t->nbytes), from the host or from
 * a CUDA device (sharc_reader_settings.device): the copy a program without CUDA headers
 * needs to look at a device tensor. The caller's current CUDA device is unchanged.
 * @return 0, SHARC_ERR(EINVAL) (NULL, or `cap` below t->nbytes), SHARC_ERR_UNSUPPORTED (a
 *         device tensor in a build without CUDA) or SHARC_ERR_CUDA (the copy failed)
 */
SHARC_API int sharc_tensor_copy_to_host(const sharc_tensor *t, void *dst, size_t cap);

/**
 * Give a batch back to its pool. NULL-safe. After this call `b` must not be used. Any
 * thread may call it.
 */
SHARC_API void sharc_batch_release(sharc_batch *b);

#ifdef __cplusplus
}
#endif

#endif /* SHARC_BATCH_H */
