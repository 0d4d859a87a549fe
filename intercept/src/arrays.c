/* arrays.c: see arrays.h. The driver pads rows and tiles arrays; these are
 * lower-bound estimates of the payload, documented as such. */
#include "arrays.h"

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

static uint64_t format_bytes(CUarray_format fmt)
{
    switch (fmt) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    }
    return 0;
}

uint64_t tessera_array_bytes(size_t w, size_t h, size_t d, CUarray_format fmt, unsigned int channels)
{
    uint64_t elem = format_bytes(fmt);
    elem = elem == 0 || channels > 4 ? 16 : elem * (channels == 0 ? 1 : channels);
    uint64_t n = mul_sat(w ? w : 1, h ? h : 1);
    n = mul_sat(n, d ? d : 1);
    return mul_sat(n, elem);
}

uint64_t tessera_mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels)
{
    int keep_depth = (desc->Flags & (TESSERA_CUDA_ARRAY3D_LAYERED | TESSERA_CUDA_ARRAY3D_CUBEMAP)) != 0;
    uint64_t sum = 0;
    size_t w = desc->Width, h = desc->Height, d = desc->Depth;

    if (levels == 0)
        levels = 1;
    for (unsigned int l = 0; l < levels && l < 64; l++) {
        uint64_t b = tessera_array_bytes(w, h, d, desc->Format, desc->NumChannels);
        sum = sum + b < sum ? UINT64_MAX : sum + b;
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        if (!keep_depth)
            d = d > 1 ? d / 2 : d;
    }
    return sum;
}
