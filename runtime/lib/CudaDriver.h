//===- CudaDriver.h - The CUDA driver API, loaded at run time ----*- C++ -*-===//
//
// The handful of driver entry points Kiln's runtime calls, declared here (no CUDA headers needed to build) and
// resolved from libcuda.so.1 with dlopen/dlsym on first use.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDADRIVER_H
#define KILN_RUNTIME_CUDADRIVER_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::runtime {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUlinkState = struct CUlinkState_st *;

/// The driver's CUlaunchAttribute (an id, padding, a 64-byte value union) and CUlaunchConfig, for
/// cuLaunchKernelEx.
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};

/// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) CUtensorMap {
  uint64_t opaque[16];
};

/// Values of the driver enums that the runtime uses.
constexpr CUresult kCudaSuccess = 0;
constexpr int kAttributeComputeCapabilityMajor = 75;
constexpr int kAttributeComputeCapabilityMinor = 76;
constexpr int kAttributeMultiprocessorCount = 16;
constexpr int kFuncAttributeMaxDynamicSharedBytes = 8;
constexpr int kJitInfoLogBuffer = 3;
constexpr int kJitInfoLogBufferSize = 4;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSize = 6;
constexpr int kJitLogVerbose = 12;
constexpr int kJitInputPtx = 1;
constexpr int kTensorMapFloat16 = 6, kTensorMapBfloat16 = 9;
constexpr int kTensorMapInterleaveNone = 0, kTensorMapL2Promotion128B = 2, kTensorMapOobFillZeros = 0;
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;

/// Entry points of libcuda, resolved once.
struct CudaDriver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuLinkCreate)(unsigned, int *, void **, CUlinkState *);
  CUresult (*cuLinkAddData)(CUlinkState, int, void *, size_t, const char *, unsigned, int *, void **);
  CUresult (*cuLinkComplete)(CUlinkState, void **, size_t *);
  CUresult (*cuLinkDestroy)(CUlinkState);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  /// Null on drivers before CUDA 12, which have no programmatic dependent launch.
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  /// Null on drivers before CUDA 12, which have no tensor maps.
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *, int, unsigned, void *, const uint64_t *, const uint64_t *,
                                     const unsigned *, const unsigned *, int, int, int, int);
};

/// The loaded driver, or null with `error` set to why it could not be loaded (no libcuda, a missing symbol,
/// cuInit failing).
const CudaDriver *loadCudaDriver(std::string &error);

/// "CUDA_ERROR_X (text)" for a driver result.
std::string describeCudaError(const CudaDriver &driver, CUresult result);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_CUDADRIVER_H
