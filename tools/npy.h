/*
 * Writing NumPy .npy files (format version 1.0) for `sharc read --dump-dir`.
 *
 * The layout, from numpy/lib/format.py: the magic "\x93NUMPY", the version bytes 1 and 0,
 * a little-endian uint16 header length, then the header, an ASCII Python dict literal
 * `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces and
 * ended by '\n' so that magic + version + length + header is a multiple of 64 bytes, then
 * the raw C-order data. The header is built as numpy.save() builds it since numpy 1.23
 * (including the spare spaces it leaves so that the first extent can grow in place), so a
 * file from here is byte-identical to numpy.save() of the same array.
 */
#ifndef SHARC_TOOLS_NPY_H
#define SHARC_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sharc/sharc.h>

/** The preamble (magic, version, header length) plus header is a multiple of this. */
#define NPY_ALIGN 64

/** Dimensions a header can describe (version 1.0 caps the header at 65535 bytes). */
#define NPY_MAX_DIMS 8

/**
 * The NumPy descr of a sharc dtype in the host's byte order: "<f4" for F32, "<i4" for I32,
 * "<i8" for I64, "|u1" for U8 (one byte has no order; numpy writes "|"), "<f2" for F16,
 * "<f8" for F64 ('>' instead of '<' on a big-endian host). NULL for BF16, which NumPy
 * lacks, and for unknown values.
 */
const char *npy_descr(sharc_dtype dtype);

/**
 * Build the preamble and header of an array.
 * @param buf   receives the bytes; not NUL-terminated
 * @param cap   size of buf (NPY_ALIGN * 4 is always enough for NPY_MAX_DIMS dims)
 * @param descr a NumPy descr such as "<f4" (printable ASCII without quotes)
 * @param ndim  0..NPY_MAX_DIMS; shape holds ndim extents >= 0
 * @return the number of bytes written, a multiple of NPY_ALIGN; 0 when an argument is bad
 *         or cap is too small
 */
size_t npy_header(char *buf, size_t cap, const char *descr, int ndim, const int64_t *shape);

/**
 * Write an array to `f` (the caller opens and closes it, and checks that closing it worked).
 * @param data  nbytes of C-order elements; nbytes must equal product(shape) * itemsize,
 *              which the caller guarantees
 * @return 0, -EINVAL for a bad descr/ndim/shape, or -errno of the failed write
 */
int npy_write(FILE *f, const char *descr, int ndim, const int64_t *shape, const void *data,
              size_t nbytes);

/**
 * Write a tensor to `f` with its dtype and shape; a CUDA tensor is copied to the host first.
 * @return 0, -ENOTSUP for a dtype NumPy lacks or a device this build cannot read, -EINVAL
 *         when nbytes does not match the shape, -ENOMEM, -EIO when the copy from the device
 *         failed, or npy_write()'s error
 */
int npy_write_tensor(FILE *f, const sharc_tensor *t);

#endif /* SHARC_TOOLS_NPY_H */
