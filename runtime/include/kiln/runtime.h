/*===- runtime.h - Kiln's kernel runtime: C API -------------------*- C -*-===*
 *
 * Loads Kiln-generated kernels (PTX or cubin) and launches them through the CUDA driver API. libcuda is opened
 * with dlopen at first use, so this library builds and links on machines without CUDA; on such a machine every
 * call fails with KILN_ERROR_NO_DRIVER and a message that says so. It depends on nothing but libc and libdl:
 * it is what ships next to the kernels.
 *
 * Every function returns a kiln_status; on failure kiln_last_error() describes it (the CUDA error name and
 * text, and the call that failed). Handles are opaque.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define KILN_RUNTIME_API __attribute__((visibility("default")))
#else
#define KILN_RUNTIME_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// Outcome of a runtime call.
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_NO_DRIVER = 1,      /* libcuda could not be loaded */
  KILN_ERROR_NO_DEVICE = 2,      /* the driver reports no (such) GPU */
  KILN_ERROR_CUDA = 3,           /* a driver call failed; the message names it */
  KILN_ERROR_INVALID_ARGUMENT = 4,
  KILN_ERROR_NOT_FOUND = 5,      /* a file or a kernel name */
  KILN_ERROR_IO = 6,             /* a file or folder could not be read or written; the message names it */
} kiln_status;

typedef struct kiln_device kiln_device;
typedef struct kiln_module kiln_module;
typedef struct kiln_kernel kiln_kernel;

/// The message of the last failed call on this thread ("" if none).
KILN_RUNTIME_API const char *kiln_last_error(void);

/// Number of CUDA devices (0 with an error when there is no driver).
KILN_RUNTIME_API kiln_status kiln_device_count(int *count);

/// Opens device `ordinal` on its primary context and makes that context current on this thread.
KILN_RUNTIME_API kiln_status kiln_device_open(int ordinal, kiln_device **device);
KILN_RUNTIME_API void kiln_device_close(kiln_device *device);

/// Compute capability and multiprocessor count of an open device.
KILN_RUNTIME_API kiln_status kiln_device_info(kiln_device *device, int *major, int *minor, int *multiprocessors);

/// Loads a module from PTX text (NUL-terminated) or a cubin image; the driver JIT-compiles PTX and its log is
/// part of the error message when that fails.
KILN_RUNTIME_API kiln_status kiln_module_load_data(kiln_device *device, const void *image, size_t size, kiln_module **module);
/// Assembles PTX text into a cubin for the device's architecture with the driver's JIT, in process (what ptxas
/// does, without starting it). On success `*cubin` (`*cubin_size` bytes) and `*log`, the JIT's verbose report
/// (registers and spills per kernel, as ptxas -v prints them), are allocated for the caller to release with
/// kiln_buffer_free; on failure the JIT's error log is part of the message.
KILN_RUNTIME_API kiln_status kiln_assemble_ptx(kiln_device *device, const char *ptx, size_t size, void **cubin,
                                               size_t *cubin_size, char **log);
/// Releases a buffer the runtime allocated for the caller.
KILN_RUNTIME_API void kiln_buffer_free(void *buffer);
/// Loads a .ptx or .cubin file.
KILN_RUNTIME_API kiln_status kiln_module_load_file(kiln_device *device, const char *path, kiln_module **module);
KILN_RUNTIME_API void kiln_module_unload(kiln_module *module);

/// Looks a kernel up by name.
KILN_RUNTIME_API kiln_status kiln_module_get_kernel(kiln_module *module, const char *name, kiln_kernel **kernel);
/// Releases a kernel handle (the module keeps the code).
KILN_RUNTIME_API void kiln_kernel_free(kiln_kernel *kernel);

/// Launches a kernel on `stream` (a CUstream; NULL for the default stream). `args` holds one pointer per kernel
/// parameter, pointing at its value (for a kernel with tensor maps, one per parameter before the maps). Dynamic
/// shared memory above the default 48 KiB limit is allowed by raising the kernel's limit first.
KILN_RUNTIME_API kiln_status kiln_kernel_launch(kiln_kernel *kernel, const unsigned grid[3], const unsigned block[3],
                               unsigned dynamic_shared_bytes, void *stream, void **args);

/// Tensor-core kernels on sm_90a read their tiles through TMA, which takes a tensor map (a 128-byte descriptor of
/// a global array) by value as a kernel parameter. The map holds the array's address, so it is built at each
/// launch: the kernel's spec says which parameter holds the address and the array's layout, which are fixed
/// once the kernel is loaded for a program.
typedef enum kiln_tensor_map_dtype {
  KILN_TENSOR_MAP_F16 = 0,
  KILN_TENSOR_MAP_BF16 = 1,
} kiln_tensor_map_dtype;

/// One tensor-map parameter: the array at the device address in parameter `buffer` (a pointer parameter among
/// those the caller passes), `rank` dims of `dims` elements (innermost first), `strides` bytes between the
/// indices of dims 1..rank-1, copied in boxes of `box` elements, with a 0, 32, 64 or 128 byte swizzle. Reads
/// past the array's edges give zeros.
typedef struct kiln_tensor_map_spec {
  int buffer;
  int dtype;
  int rank;
  int swizzle_bytes;
  uint64_t dims[5];
  uint64_t strides[4];
  uint32_t box[5];
} kiln_tensor_map_spec;

/// The most tensor-map parameters a kernel may have.
#define KILN_MAX_TENSOR_MAPS 8

/// Gives `kernel` `count` tensor-map parameters after its first `params` parameters: every later
/// kiln_kernel_launch passes `params` argument pointers, and the launch appends one map per spec, built from
/// the address its `buffer` argument holds. Call it once, before the kernel's first launch (not while another
/// thread launches it). Fails on a spec the driver would reject (checked with a 1 MiB-aligned address), or when
/// the driver has no tensor maps (before CUDA 12).
KILN_RUNTIME_API kiln_status kiln_kernel_set_tensor_maps(kiln_kernel *kernel, int params, int count,
                                                         const kiln_tensor_map_spec *specs);

/// Lets launches of `kernel` overlap the previous kernel of their stream (programmatic dependent launch, sm_90
/// and CUDA 12 or later; elsewhere launches stay ordinary): only for a kernel whose every thread waits for its
/// predecessor (griddepcontrol.wait) before it reads or writes memory, as the compiler's sm_90a kernels do
/// (their manifest entries say "dependent_launch"). Call it once, before the kernel's first launch.
KILN_RUNTIME_API kiln_status kiln_kernel_set_dependent_launch(kiln_kernel *kernel, int enabled);

/// Device memory, for tests and tools that have no framework to allocate with.
KILN_RUNTIME_API kiln_status kiln_malloc(kiln_device *device, size_t bytes, uint64_t *pointer);
KILN_RUNTIME_API kiln_status kiln_free(kiln_device *device, uint64_t pointer);
KILN_RUNTIME_API kiln_status kiln_copy_to_device(kiln_device *device, uint64_t destination, const void *source, size_t bytes);
KILN_RUNTIME_API kiln_status kiln_copy_to_host(kiln_device *device, void *destination, uint64_t source, size_t bytes);
/// Copies `bytes` between device buffers, ordered on `stream` (NULL: the default stream).
KILN_RUNTIME_API kiln_status kiln_copy_on_device(kiln_device *device, uint64_t destination, uint64_t source,
                                                 size_t bytes, void *stream);
KILN_RUNTIME_API kiln_status kiln_synchronize(kiln_device *device);

/* Disk caches (the Python package's program cache, the compiler's kernel cache): an entry is a folder named by its
 * key under a cache root, written into a private staging folder, sealed with checksums.json (the SHA-256 of every
 * other file) and renamed into place in one step, so that a reader never takes half an entry, a damaged one or a
 * hand-edited one. */

/// Whether entry `key` of `root` is a valid one (`*found` = 1); anything else at its path (a damaged entry, a file,
/// a symlink) is removed, and `*found` = 0.
KILN_RUNTIME_API kiln_status kiln_cache_lookup(const char *root, const char *key, int *found);
/// A private staging folder for entry `key` in `root` (created when missing) to write the entry's files into;
/// `*staging` is released with kiln_buffer_free. Staging folders that killed processes left in `root` over an
/// hour ago are removed first (once per root and process). KILN_ERROR_IO when `root` cannot be written.
KILN_RUNTIME_API kiln_status kiln_cache_stage(const char *root, const char *key, char **staging);
/// Seals `staging` and renames it into place as entry `key` of `root`; when another process published a valid
/// entry first, that one stays. `staging` is gone afterwards, whatever the outcome. KILN_ERROR_IO names a file
/// that could not be written (a full disk), or the entry when it could not be put in place.
KILN_RUNTIME_API kiln_status kiln_cache_publish(const char *root, const char *key, const char *staging);
/// Removes what is at `path`: a folder with all it holds (moved aside first), or a file or symlink (not what it
/// points at).
KILN_RUNTIME_API void kiln_cache_discard(const char *path);

/// The GPU target Kiln compiles for on a device of compute capability major.minor ("sm_90a" on 9.0, "sm_80" on
/// any other 8.0 or later), or NULL for an older device.
KILN_RUNTIME_API const char *kiln_target_for_capability(int major, int minor);
/// The compute capability a GPU target's cubins are built for (sm_80: 8.0, sm_90a: 9.0); KILN_ERROR_NOT_FOUND
/// for a name that is no GPU target.
KILN_RUNTIME_API kiln_status kiln_target_capability(const char *target, int *major, int *minor);

/* Run plans: a compiled folder (manifest.json, kernels, constant files) executed without Python or MLIR. This is
 * where every caller runs one: kiln-plan-run, C and C++ programs, and the Python package. */
typedef struct kiln_plan kiln_plan;

/// Loads the plan of `function` (NULL: the manifest's only plan) from `folder`: each kernel's module (its cubin
/// when it was built for the GPU, sm_90a on exactly 9.0 and sm_80 on an 8.x device, else its PTX for the driver
/// to compile) and the constants copied to the GPU. A step launches its kernel's `function` with the step's
/// buffers, then the kernel's `sizes` (size-generic kernels) as 64-bit integers. Fails with
/// KILN_ERROR_NOT_FOUND when the folder has no manifest or no such function, KILN_ERROR_INVALID_ARGUMENT with
/// the file and the field when the manifest is one this runtime cannot run, and names a kernel file the driver
/// refuses.
KILN_RUNTIME_API kiln_status kiln_plan_load(kiln_device *device, const char *folder, const char *function,
                                            kiln_plan **plan);
/// Reads the plan of `function` (NULL: the manifest's only plan) from `folder` without a GPU: the manifest is
/// checked and every kernel and constant file it names must be in the folder. The plan answers every query
/// below, so that a tool can check its inputs before it opens a GPU; running it is refused.
KILN_RUNTIME_API kiln_status kiln_plan_read(const char *folder, const char *function, kiln_plan **plan);
KILN_RUNTIME_API void kiln_plan_free(kiln_plan *plan);
/// The manifest's target ("sm_80" or "sm_90a") and the plan's function name.
KILN_RUNTIME_API const char *kiln_plan_target(const kiln_plan *plan);
KILN_RUNTIME_API const char *kiln_plan_function(const kiln_plan *plan);
/// Whether a GPU of compute capability major.minor runs the plan (kiln_plan_load checks it too); else
/// KILN_ERROR_INVALID_ARGUMENT with a message naming both chips.
KILN_RUNTIME_API kiln_status kiln_plan_check_chip(const kiln_plan *plan, int major, int minor);
/// How many inputs (device pointers, in order), outputs and scratch buffers the plan has.
KILN_RUNTIME_API int kiln_plan_num_inputs(const kiln_plan *plan);
KILN_RUNTIME_API int kiln_plan_num_outputs(const kiln_plan *plan);
KILN_RUNTIME_API int kiln_plan_num_buffers(const kiln_plan *plan);
/// The dtype name ("f32", "f16", "bf16", "i64", "i32", "i1"), rank and shape (up to 8 dims) of input or output
/// `index`.
KILN_RUNTIME_API kiln_status kiln_plan_tensor_info(const kiln_plan *plan, int is_output, int index,
                                                   const char **dtype, int *rank, int64_t shape[8]);
/// 1 when a kernel of the plan writes input `index` in place (a KV cache that kiln.append_kv fills), else 0;
/// such an input must not share memory with another.
KILN_RUNTIME_API int kiln_plan_input_updated_in_place(const kiln_plan *plan, int index);
/// The bytes of scratch buffer `index` (intermediates and outputs; a caller may allocate at least 1 for 0).
KILN_RUNTIME_API kiln_status kiln_plan_buffer_bytes(const kiln_plan *plan, int index, uint64_t *bytes);
/// Where output `index` lives after a run: in input `*source` (`*is_input` = 1: an input the plan updates in
/// place, returned updated) or in scratch buffer `*source` (`*is_input` = 0), under the output's shape. An
/// output is never an input the plan only reads, nor a constant: those are copied into a buffer of their own.
KILN_RUNTIME_API kiln_status kiln_plan_output_source(const kiln_plan *plan, int index, int *is_input, int *source);
/// Runs the plan on `stream` over row-major device buffers `inputs` with the caller's scratch `buffers`
/// (kiln_plan_num_buffers of them, each at least kiln_plan_buffer_bytes, 16-byte aligned): launches and
/// device-to-device copies only, nothing allocated or synchronised, so a run can be captured into a CUDA graph.
/// Threads may run one plan at once on different buffers.
KILN_RUNTIME_API kiln_status kiln_plan_run_with_buffers(kiln_plan *plan, const uint64_t *inputs,
                                                        const uint64_t *buffers, void *stream);
/// Runs the plan on `stream` with scratch buffers of its own (allocated at the first call); `outputs` receives
/// the device pointers of the results, which stay valid until the next run or kiln_plan_free. A plan runs this
/// way on one thread at a time.
KILN_RUNTIME_API kiln_status kiln_plan_run(kiln_plan *plan, const uint64_t *inputs, uint64_t *outputs,
                                           void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_H */
