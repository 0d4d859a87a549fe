/* The subset of the CUDA driver API types this library needs, declared here
 * because the build machine has no CUDA headers. These mirror cuda.h; the
 * driver ABI for them has been stable since CUDA 3.2 (the _v2 entry points)
 * and CUDA 10.2 / 11.2 / 12.0 for VMM, stream-ordered allocation and
 * cuGetProcAddress_v2. Only fields this library reads are relied upon. */
#ifndef TESSERA_CUDA_TYPES_H
#define TESSERA_CUDA_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef uint64_t cuuint64_t;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 */
typedef unsigned int CUdeviceptr_v1;    /* pre-3.2 ABI (cuMemAlloc, ...) */
typedef int CUdevice;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUfunc_st *CUfunction;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraphExec_st *CUgraphExec;
/* Passed through untouched; the library never reads its fields. */
typedef struct CUlaunchConfig_st CUlaunchConfig;

typedef enum CUarray_format_enum {
    CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    CU_AD_FORMAT_SIGNED_INT8 = 0x08,
    CU_AD_FORMAT_SIGNED_INT16 = 0x09,
    CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
    CU_AD_FORMAT_HALF = 0x10,
    CU_AD_FORMAT_FLOAT = 0x20
} CUarray_format;

typedef struct CUDA_ARRAY_DESCRIPTOR_st { /* CUDA_ARRAY_DESCRIPTOR_v2 */
    size_t Width;
    size_t Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st { /* CUDA_ARRAY3D_DESCRIPTOR_v2 */
    size_t Width;
    size_t Height;
    size_t Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0,
    CU_MEM_LOCATION_TYPE_DEVICE = 1
    /* HOST (2), HOST_NUMA (3), HOST_NUMA_CURRENT (4): not GPU memory */
} CUmemLocationType;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st { /* CUmemAllocationProp_v1 */
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

enum {
    CU_MEM_ATTACH_GLOBAL = 0x1
};

/* cuGetProcAddress flags and the _v2 query result. */
enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2
};
typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

#endif
