//===- CudaDriver.cpp - The CUDA driver API, loaded at run time ------------===//
//
// dlopen("libcuda.so.1") once per process (KILN_LIBCUDA overrides the path), resolve every entry point the
// runtime needs, and initialise the driver. Any failure is remembered and reported the same way every time.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace kiln::runtime {

namespace {
struct LoadedDriver {
  CudaDriver driver{};
  bool ok = false;
  std::string error;
};

/// Resolves `name` into `slot`; false (with `error`) when the symbol is missing.
template <typename Fn>
bool resolve(void *library, const char *name, Fn &slot, std::string &error) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (!slot)
    error = std::string("libcuda has no symbol ") + name + " (driver too old?)";
  return slot != nullptr;
}

LoadedDriver load() {
  LoadedDriver loaded;
  const char *path = std::getenv("KILN_LIBCUDA");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *reason = dlerror();
    loaded.error = std::string("no CUDA driver: cannot load ") + path + " (" + (reason ? reason : "unknown") +
                   "); Kiln needs an NVIDIA GPU with its driver installed to run kernels";
    return loaded;
  }
  CudaDriver &d = loaded.driver;
  std::string &e = loaded.error;
  bool ok = resolve(library, "cuInit", d.cuInit, e) && resolve(library, "cuDeviceGetCount", d.cuDeviceGetCount, e) &&
            resolve(library, "cuDeviceGet", d.cuDeviceGet, e) &&
            resolve(library, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, e) &&
            resolve(library, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, e) &&
            resolve(library, "cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease, e) &&
            resolve(library, "cuCtxSetCurrent", d.cuCtxSetCurrent, e) &&
            resolve(library, "cuCtxGetCurrent", d.cuCtxGetCurrent, e) &&
            resolve(library, "cuCtxSynchronize", d.cuCtxSynchronize, e) &&
            resolve(library, "cuModuleLoadDataEx", d.cuModuleLoadDataEx, e) &&
            resolve(library, "cuModuleUnload", d.cuModuleUnload, e) &&
            resolve(library, "cuLinkCreate_v2", d.cuLinkCreate, e) &&
            resolve(library, "cuLinkAddData_v2", d.cuLinkAddData, e) &&
            resolve(library, "cuLinkComplete", d.cuLinkComplete, e) &&
            resolve(library, "cuLinkDestroy", d.cuLinkDestroy, e) &&
            resolve(library, "cuModuleGetFunction", d.cuModuleGetFunction, e) &&
            resolve(library, "cuFuncSetAttribute", d.cuFuncSetAttribute, e) &&
            resolve(library, "cuLaunchKernel", d.cuLaunchKernel, e) &&
            resolve(library, "cuMemAlloc_v2", d.cuMemAlloc, e) && resolve(library, "cuMemFree_v2", d.cuMemFree, e) &&
            resolve(library, "cuMemcpyHtoD_v2", d.cuMemcpyHtoD, e) &&
            resolve(library, "cuMemcpyDtoH_v2", d.cuMemcpyDtoH, e) &&
            resolve(library, "cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync, e) &&
            resolve(library, "cuGetErrorName", d.cuGetErrorName, e) &&
            resolve(library, "cuGetErrorString", d.cuGetErrorString, e);
  if (!ok)
    return loaded;
  d.cuTensorMapEncodeTiled = reinterpret_cast<decltype(d.cuTensorMapEncodeTiled)>(
      dlsym(library, "cuTensorMapEncodeTiled"));
  d.cuLaunchKernelEx = reinterpret_cast<decltype(d.cuLaunchKernelEx)>(dlsym(library, "cuLaunchKernelEx"));
  if (CUresult result = d.cuInit(0); result != kCudaSuccess) {
    loaded.error = "cuInit failed: " + describeCudaError(d, result);
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}
} // namespace

const CudaDriver *loadCudaDriver(std::string &error) {
  static LoadedDriver loaded = load();
  if (!loaded.ok) {
    error = loaded.error;
    return nullptr;
  }
  return &loaded.driver;
}

std::string describeCudaError(const CudaDriver &driver, CUresult result) {
  const char *name = nullptr, *text = nullptr;
  driver.cuGetErrorName(result, &name);
  driver.cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA_ERROR_UNKNOWN") + " (" + (text ? text : "no description") + ")";
}

} // namespace kiln::runtime
