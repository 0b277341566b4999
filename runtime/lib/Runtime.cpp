//===- Runtime.cpp - Kiln's kernel runtime: the C API ----------------------===//
//
// Devices on their primary context, modules loaded from PTX or cubin (with the JIT log on failure), kernels
// launched with the dynamic shared-memory limit raised when they need more than the default. Every driver call
// is checked; the first failure's description is kept per thread for kiln_last_error().
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include "CudaDriver.h"
#include "Errors.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

using namespace kiln::runtime;

struct kiln_device {
  const CudaDriver *driver;
  CUdevice device;
  CUcontext context;
};

struct kiln_module {
  kiln_device *device;
  CUmodule module;
};

struct kiln_kernel {
  kiln_module *module;
  CUfunction function;
  /// Dynamic shared memory the kernel is currently allowed: read at every launch, raised under the mutex, since
  /// threads may launch one kernel at once.
  std::atomic<unsigned> sharedLimit;
  std::mutex raisingSharedLimit;
  /// The parameters a launch takes from its caller, and the tensor maps it appends (kiln_kernel_set_tensor_maps).
  int callerParams = 0;
  std::vector<kiln_tensor_map_spec> tensorMaps;
  /// Whether launches may overlap the previous kernel of the stream (kiln_kernel_set_dependent_launch).
  bool dependentLaunch = false;
};

namespace {
thread_local std::string lastError;
} // namespace

kiln_status kiln::runtime::fail(kiln_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

namespace {
/// Checks one driver call; on failure records "call: CUDA_ERROR_X (text)".
kiln_status check(const CudaDriver &driver, CUresult result, const char *call) {
  if (result == kCudaSuccess)
    return KILN_OK;
  return fail(KILN_ERROR_CUDA, std::string(call) + " failed: " + describeCudaError(driver, result));
}

#define KILN_CHECK(driver, call)                                                                               \
  do {                                                                                                         \
    if (kiln_status status_ = check(driver, driver.call, #call); status_ != KILN_OK)                           \
      return status_;                                                                                          \
  } while (false)

const CudaDriver *driverOrFail(kiln_status &status) {
  std::string error;
  const CudaDriver *driver = loadCudaDriver(error);
  status = driver ? KILN_OK : fail(KILN_ERROR_NO_DRIVER, error);
  return driver;
}

/// kiln_assemble_ptx's work, with the device's context current.
kiln_status assemblePtx(const CudaDriver &driver, const char *ptx, size_t size, void **cubin, size_t *cubin_size,
                        char **log) {
  std::string text(ptx, strnlen(ptx, size)); // the driver reads PTX up to its NUL
  std::vector<char> info(64 * 1024, '\0'), errors(16 * 1024, '\0');
  int options[] = {kJitInfoLogBuffer, kJitInfoLogBufferSize, kJitErrorLogBuffer, kJitErrorLogBufferSize,
                   kJitLogVerbose};
  void *values[] = {info.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(info.size() - 1)), errors.data(),
                    reinterpret_cast<void *>(static_cast<uintptr_t>(errors.size() - 1)),
                    reinterpret_cast<void *>(static_cast<uintptr_t>(1))};
  CUlinkState link = nullptr;
  KILN_CHECK(driver, cuLinkCreate(5, options, values, &link));
  void *image = nullptr;
  size_t imageSize = 0;
  CUresult result = driver.cuLinkAddData(link, kJitInputPtx, text.data(), text.size() + 1, "kernels.ptx", 0,
                                         nullptr, nullptr);
  if (result == kCudaSuccess)
    result = driver.cuLinkComplete(link, &image, &imageSize);
  kiln_status status = KILN_OK;
  if (result != kCudaSuccess) {
    status = fail(KILN_ERROR_CUDA, std::string("the driver's PTX JIT failed: ") + describeCudaError(driver, result) +
                                       (errors[0] ? std::string("; JIT log: ") + errors.data() : std::string()));
  } else if (!(*cubin = std::malloc(imageSize)) || !(*log = strdup(info.data()))) {
    std::free(*cubin);
    *cubin = nullptr;
    status = fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_assemble_ptx: out of host memory");
  } else {
    std::memcpy(*cubin, image, imageSize); // the image belongs to the link state
    *cubin_size = imageSize;
  }
  driver.cuLinkDestroy(link);
  return status;
}
} // namespace

extern "C" {

const char *kiln_last_error(void) { return lastError.c_str(); }

kiln_status kiln_device_count(int *count) {
  if (!count)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_device_count: count is null");
  *count = 0;
  kiln_status status;
  const CudaDriver *driver = driverOrFail(status);
  if (!driver)
    return status;
  KILN_CHECK((*driver), cuDeviceGetCount(count));
  return KILN_OK;
}

kiln_status kiln_device_open(int ordinal, kiln_device **device) {
  if (!device)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_device_open: device is null");
  *device = nullptr;
  int count = 0;
  if (kiln_status status = kiln_device_count(&count); status != KILN_OK)
    return status;
  if (ordinal < 0 || ordinal >= count)
    return fail(KILN_ERROR_NO_DEVICE, "no GPU " + std::to_string(ordinal) + ": the driver reports " +
                                          std::to_string(count) + " device(s)");
  kiln_status status;
  const CudaDriver &driver = *driverOrFail(status);
  auto opened = new kiln_device{&driver, 0, nullptr};
  if ((status = check(driver, driver.cuDeviceGet(&opened->device, ordinal), "cuDeviceGet")) != KILN_OK ||
      (status = check(driver, driver.cuDevicePrimaryCtxRetain(&opened->context, opened->device),
                      "cuDevicePrimaryCtxRetain")) != KILN_OK ||
      (status = check(driver, driver.cuCtxSetCurrent(opened->context), "cuCtxSetCurrent")) != KILN_OK) {
    delete opened;
    return status;
  }
  *device = opened;
  return KILN_OK;
}

void kiln_device_close(kiln_device *device) {
  if (!device)
    return;
  device->driver->cuDevicePrimaryCtxRelease(device->device);
  delete device;
}

kiln_status kiln_device_info(kiln_device *device, int *major, int *minor, int *multiprocessors) {
  if (!device || !major || !minor || !multiprocessors)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_device_info: a pointer argument is null");
  const CudaDriver &driver = *device->driver;
  KILN_CHECK(driver, cuDeviceGetAttribute(major, kAttributeComputeCapabilityMajor, device->device));
  KILN_CHECK(driver, cuDeviceGetAttribute(minor, kAttributeComputeCapabilityMinor, device->device));
  KILN_CHECK(driver, cuDeviceGetAttribute(multiprocessors, kAttributeMultiprocessorCount, device->device));
  return KILN_OK;
}

kiln_status kiln_module_load_data(kiln_device *device, const void *image, size_t size, kiln_module **module) {
  if (!device || !image || !size || !module)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_module_load_data: empty image or null pointer");
  *module = nullptr;
  const CudaDriver &driver = *device->driver;
  KILN_CHECK(driver, cuCtxSetCurrent(device->context));
  // PTX must be NUL-terminated for the driver; cubins are ELF and carry their size.
  std::string text;
  const void *data = image;
  const char *bytes = static_cast<const char *>(image);
  bool isElf = size >= 4 && std::memcmp(bytes, "\x7f" "ELF", 4) == 0;
  if (!isElf && bytes[size - 1] != '\0') {
    text.assign(bytes, size);
    data = text.c_str();
  }
  char log[8192] = {0};
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof(log)))};
  CUmodule loaded = nullptr;
  CUresult result = driver.cuModuleLoadDataEx(&loaded, data, 2, options, values);
  if (result != kCudaSuccess)
    return fail(KILN_ERROR_CUDA, std::string("cuModuleLoadDataEx failed: ") + describeCudaError(driver, result) +
                                     (log[0] ? std::string("; JIT log: ") + log : std::string()));
  *module = new kiln_module{device, loaded};
  return KILN_OK;
}

kiln_status kiln_assemble_ptx(kiln_device *device, const char *ptx, size_t size, void **cubin, size_t *cubin_size,
                              char **log) {
  if (!device || !ptx || !size || !cubin || !cubin_size || !log)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_assemble_ptx: empty PTX or null pointer");
  *cubin = nullptr;
  *cubin_size = 0;
  *log = nullptr;
  const CudaDriver &driver = *device->driver;
  // The caller's current context (a framework's, perhaps on another GPU) is current again on return.
  CUcontext previous = nullptr;
  KILN_CHECK(driver, cuCtxGetCurrent(&previous));
  KILN_CHECK(driver, cuCtxSetCurrent(device->context));
  kiln_status status = assemblePtx(driver, ptx, size, cubin, cubin_size, log);
  if (previous != device->context)
    driver.cuCtxSetCurrent(previous);
  return status;
}

void kiln_buffer_free(void *buffer) { std::free(buffer); }

kiln_status kiln_module_load_file(kiln_device *device, const char *path, kiln_module **module) {
  if (!path)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_module_load_file: path is null");
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return fail(KILN_ERROR_NOT_FOUND, std::string("cannot open kernel file ") + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.empty())
    return fail(KILN_ERROR_INVALID_ARGUMENT, std::string("kernel file ") + path + " is empty");
  kiln_status status = kiln_module_load_data(device, bytes.data(), bytes.size(), module);
  if (status != KILN_OK)
    lastError = std::string(path) + ": " + lastError;
  return status;
}

void kiln_module_unload(kiln_module *module) {
  if (!module)
    return;
  module->device->driver->cuModuleUnload(module->module);
  delete module;
}

kiln_status kiln_module_get_kernel(kiln_module *module, const char *name, kiln_kernel **kernel) {
  if (!module || !name || !kernel)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_module_get_kernel: null argument");
  *kernel = nullptr;
  CUfunction function = nullptr;
  CUresult result = module->device->driver->cuModuleGetFunction(&function, module->module, name);
  if (result != kCudaSuccess)
    return fail(KILN_ERROR_NOT_FOUND, std::string("no kernel named '") + name + "' in the module: " +
                                          describeCudaError(*module->device->driver, result));
  *kernel = new kiln_kernel{module, function, 48 * 1024};
  return KILN_OK;
}

void kiln_kernel_free(kiln_kernel *kernel) { delete kernel; }

namespace {
/// Builds the tensor map of `spec` for the array at `address` into `map`.
kiln_status encodeTensorMap(const CudaDriver &driver, const kiln_tensor_map_spec &spec, uint64_t address,
                            CUtensorMap &map) {
  const unsigned elementStrides[5] = {1, 1, 1, 1, 1};
  int swizzle = spec.swizzle_bytes == 128 ? 3 : spec.swizzle_bytes == 64 ? 2 : spec.swizzle_bytes == 32 ? 1 : 0;
  CUresult result = driver.cuTensorMapEncodeTiled(
      &map, spec.dtype == KILN_TENSOR_MAP_BF16 ? kTensorMapBfloat16 : kTensorMapFloat16,
      static_cast<unsigned>(spec.rank), reinterpret_cast<void *>(static_cast<uintptr_t>(address)), spec.dims,
      spec.strides, spec.box, elementStrides, kTensorMapInterleaveNone, swizzle, kTensorMapL2Promotion128B,
      kTensorMapOobFillZeros);
  if (result == kCudaSuccess)
    return KILN_OK;
  std::string dims;
  for (int d = 0; d < spec.rank; ++d)
    dims += (d ? " x " : "") + std::to_string(spec.dims[d]);
  char at[32];
  std::snprintf(at, sizeof(at), "0x%llx", static_cast<unsigned long long>(address));
  return fail(KILN_ERROR_CUDA, "the tensor map of kernel parameter " + std::to_string(spec.buffer) + " (" + dims +
                                   " elements, innermost first, at " + at +
                                   ") was refused (TMA needs 16-byte aligned addresses and row strides): "
                                   "cuTensorMapEncodeTiled failed: " + describeCudaError(driver, result));
}
} // namespace

kiln_status kiln_kernel_set_tensor_maps(kiln_kernel *kernel, int params, int count,
                                        const kiln_tensor_map_spec *specs) {
  if (!kernel || (count > 0 && !specs))
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_set_tensor_maps: null argument");
  if (params < 0 || count < 0 || count > KILN_MAX_TENSOR_MAPS)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_set_tensor_maps: " + std::to_string(count) +
                                                 " tensor maps after " + std::to_string(params) +
                                                 " parameters (at most " +
                                                 std::to_string(KILN_MAX_TENSOR_MAPS) + " maps)");
  const CudaDriver &driver = *kernel->module->device->driver;
  if (count > 0 && !driver.cuTensorMapEncodeTiled)
    return fail(KILN_ERROR_CUDA, "this kernel reads through tensor maps (TMA), which the CUDA driver does not "
                                 "provide (cuTensorMapEncodeTiled needs CUDA 12 or later)");
  for (int i = 0; i < count; ++i) {
    const kiln_tensor_map_spec &spec = specs[i];
    std::string which = "kiln_kernel_set_tensor_maps: tensor map " + std::to_string(i);
    if (spec.buffer < 0 || spec.buffer >= params)
      return fail(KILN_ERROR_INVALID_ARGUMENT, which + " reads parameter " + std::to_string(spec.buffer) +
                                                   ", not one of the " + std::to_string(params) + " before the maps");
    if (spec.rank < 1 || spec.rank > 5 || (spec.dtype != KILN_TENSOR_MAP_F16 && spec.dtype != KILN_TENSOR_MAP_BF16) ||
        (spec.swizzle_bytes != 0 && spec.swizzle_bytes != 32 && spec.swizzle_bytes != 64 && spec.swizzle_bytes != 128))
      return fail(KILN_ERROR_INVALID_ARGUMENT, which + ": rank must be 1 to 5, dtype f16 or bf16, swizzle 0, 32, "
                                                       "64 or 128 bytes");
    CUtensorMap probe;
    if (kiln_status status = encodeTensorMap(driver, spec, uint64_t(1) << 20, probe); status != KILN_OK)
      return status;
  }
  kernel->callerParams = params;
  kernel->tensorMaps.assign(specs, specs + count);
  return KILN_OK;
}

kiln_status kiln_kernel_launch(kiln_kernel *kernel, const unsigned grid[3], const unsigned block[3],
                               unsigned dynamic_shared_bytes, void *stream, void **args) {
  if (!kernel || !grid || !block)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_launch: null argument");
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || block[i] == 0)
      return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_launch: grid and block dimensions must be positive");
  const CudaDriver &driver = *kernel->module->device->driver;
  KILN_CHECK(driver, cuCtxSetCurrent(kernel->module->device->context));
  if (dynamic_shared_bytes > kernel->sharedLimit.load()) {
    std::lock_guard<std::mutex> raising(kernel->raisingSharedLimit);
    if (dynamic_shared_bytes > kernel->sharedLimit.load()) {
      KILN_CHECK(driver, cuFuncSetAttribute(kernel->function, kFuncAttributeMaxDynamicSharedBytes,
                                            static_cast<int>(dynamic_shared_bytes)));
      kernel->sharedLimit.store(dynamic_shared_bytes);
    }
  }
  // The tensor maps follow the caller's parameters, built from the addresses those hold.
  constexpr int kStackParams = 64;
  CUtensorMap maps[KILN_MAX_TENSOR_MAPS];
  void *withMaps[kStackParams];
  std::vector<void *> heapParams;
  if (!kernel->tensorMaps.empty()) {
    if (!args)
      return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_launch: null arguments for a kernel with tensor maps");
    int total = kernel->callerParams + static_cast<int>(kernel->tensorMaps.size());
    void **params = withMaps;
    if (total > kStackParams) {
      heapParams.resize(total);
      params = heapParams.data();
    }
    std::copy(args, args + kernel->callerParams, params);
    for (size_t i = 0; i < kernel->tensorMaps.size(); ++i) {
      const kiln_tensor_map_spec &spec = kernel->tensorMaps[i];
      uint64_t address = *static_cast<const uint64_t *>(args[spec.buffer]);
      if (kiln_status status = encodeTensorMap(driver, spec, address, maps[i]); status != KILN_OK)
        return status;
      params[kernel->callerParams + i] = &maps[i];
    }
    args = params;
  }
  if (kernel->dependentLaunch && driver.cuLaunchKernelEx) {
    // Programmatic dependent launch: the kernel's blocks may be scheduled once every block of the previous
    // kernel has signalled (griddepcontrol.launch_dependents) or exited; each waits (griddepcontrol.wait) until
    // that kernel has finished and its writes are visible, so the launch latency overlaps its tail.
    CUlaunchAttribute attribute{};
    attribute.id = kLaunchAttributeProgrammaticStreamSerialization;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{grid[0],  grid[1],  grid[2], block[0], block[1], block[2], dynamic_shared_bytes,
                          static_cast<CUstream>(stream), &attribute, 1};
    KILN_CHECK(driver, cuLaunchKernelEx(&config, kernel->function, args, nullptr));
    return KILN_OK;
  }
  KILN_CHECK(driver, cuLaunchKernel(kernel->function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                    dynamic_shared_bytes, static_cast<CUstream>(stream), args, nullptr));
  return KILN_OK;
}

kiln_status kiln_kernel_set_dependent_launch(kiln_kernel *kernel, int enabled) {
  if (!kernel)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_set_dependent_launch: null kernel");
  kernel->dependentLaunch = enabled != 0;
  return KILN_OK;
}

kiln_status kiln_malloc(kiln_device *device, size_t bytes, uint64_t *pointer) {
  if (!device || !pointer)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_malloc: null argument");
  CUdeviceptr allocated = 0;
  KILN_CHECK((*device->driver), cuMemAlloc(&allocated, bytes));
  *pointer = allocated;
  return KILN_OK;
}

kiln_status kiln_free(kiln_device *device, uint64_t pointer) {
  if (!device)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_free: null device");
  KILN_CHECK((*device->driver), cuMemFree(pointer));
  return KILN_OK;
}

kiln_status kiln_copy_to_device(kiln_device *device, uint64_t destination, const void *source, size_t bytes) {
  if (!device || !source)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_copy_to_device: null argument");
  KILN_CHECK((*device->driver), cuMemcpyHtoD(destination, source, bytes));
  return KILN_OK;
}

kiln_status kiln_copy_to_host(kiln_device *device, void *destination, uint64_t source, size_t bytes) {
  if (!device || !destination)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_copy_to_host: null argument");
  KILN_CHECK((*device->driver), cuMemcpyDtoH(destination, source, bytes));
  return KILN_OK;
}

kiln_status kiln_copy_on_device(kiln_device *device, uint64_t destination, uint64_t source, size_t bytes,
                                void *stream) {
  if (!device)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_copy_on_device: null device");
  KILN_CHECK((*device->driver), cuMemcpyDtoDAsync(destination, source, bytes, static_cast<CUstream>(stream)));
  return KILN_OK;
}

kiln_status kiln_synchronize(kiln_device *device) {
  if (!device)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_synchronize: null device");
  KILN_CHECK((*device->driver), cuCtxSynchronize());
  return KILN_OK;
}

} // extern "C"
