/* arrays.h: device-memory estimates for CUDA arrays from their descriptors. */
#ifndef TESSERA_ARRAYS_H
#define TESSERA_ARRAYS_H

#include <stdint.h>

#include "cuda_types.h"

#define TESSERA_CUDA_ARRAY3D_LAYERED 0x01u
#define TESSERA_CUDA_ARRAY3D_CUBEMAP 0x04u

/* Bytes for a w x h x d array (0 extents count as 1); saturates at
 * UINT64_MAX so an absurd descriptor fails the limit check. Unknown
 * formats count 16 bytes per element (the largest classic element). */
uint64_t tessera_array_bytes(size_t w, size_t h, size_t d, CUarray_format fmt, unsigned int channels);

/* Sum over mip levels; layered and cubemap arrays keep their depth. */
uint64_t tessera_mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels);

#endif
