//===- Plan.cpp - Run plans executed by the runtime ------------------------===//
//
// A compiled module's public function is a plan (written by kilnc into manifest.json): inputs, buffers, views
// (the same bytes under another shape), constants in files, and kernel launches in order. Loading a plan loads
// its kernels and allocates every buffer and constant once; a run only binds the inputs' addresses and issues
// the launches on a stream, so whole graphs run from C or C++ with no Python and no MLIR. Reading a plan (the
// manifest and the files it names) needs no GPU, so that a tool can check a folder and its inputs first.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include "Errors.h"
#include "Json.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/stat.h>

using namespace kiln::runtime;

namespace {
/// One tensor of the plan: where its bytes are, and what they hold.
struct Slot {
  std::string kind, dtype;
  std::string file;    // a constant's data, in the folder
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  int index = -1;      // argument position of an input
  int of = -1;         // slot a view aliases
  uint64_t pointer = 0;
  bool owned = false;  // allocated by the plan (buffers and constants)
};

/// One kernel launch: what the manifest says of it, and its kernel handle once the plan is on a GPU.
struct Step {
  std::string name, function;
  std::string cubin, ptx;      ///< the kernel's files in the folder ("" when the manifest names none)
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared = 0;
  std::vector<int> args;
  std::vector<uint64_t> sizes; ///< a size-generic kernel's sizes, passed after its buffers
  std::vector<kiln_tensor_map_spec> maps;
  bool dependentLaunch = false; ///< the manifest's "dependent_launch": launched to overlap its predecessor
  kiln_kernel *kernel = nullptr;
};

int64_t elementBytes(const std::string &dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "f16" || dtype == "bf16")
    return 2;
  if (dtype == "i64")
    return 8;
  if (dtype == "i1")
    return 1;
  return 0;
}

/// Whether `value` is a whole number from 0 to `limit`, stored in `result`.
bool wholeNumber(const Json *value, double limit, uint64_t &result) {
  if (!value || value->kind != Json::Kind::Number || value->number < 0 || value->number > limit ||
      value->number != static_cast<double>(static_cast<uint64_t>(value->number)))
    return false;
  result = static_cast<uint64_t>(value->number);
  return true;
}

/// The tensor-map specs of a kernel's manifest entry ("tensor_maps": buffer, dtype, dims, strides, box, swizzle
/// per map); false with `why` on a malformed entry.
bool parseTensorMaps(const Json *maps, std::vector<kiln_tensor_map_spec> &specs, std::string &why) {
  if (!maps)
    return true;
  why = "\"tensor_maps\" must list maps of a buffer index, dtype (f16 or bf16), 1 to 5 dims, as many box sizes, "
        "one stride fewer and a swizzle, all whole numbers";
  if (maps->kind != Json::Kind::Array)
    return false;
  for (const Json &map : maps->array) {
    kiln_tensor_map_spec spec{};
    const Json *dtype = map.find("dtype"), *dims = map.find("dims"), *strides = map.find("strides"),
               *box = map.find("box");
    uint64_t buffer = 0, swizzle = 0;
    if (!wholeNumber(map.find("buffer"), 1 << 20, buffer) || !wholeNumber(map.find("swizzle"), 128, swizzle) ||
        !dtype || dtype->kind != Json::Kind::String || (dtype->string != "f16" && dtype->string != "bf16") ||
        !dims || !strides || !box || dims->kind != Json::Kind::Array || strides->kind != Json::Kind::Array ||
        box->kind != Json::Kind::Array || dims->array.empty() || dims->array.size() > 5 ||
        box->array.size() != dims->array.size() || strides->array.size() + 1 != dims->array.size())
      return false;
    spec.buffer = static_cast<int>(buffer);
    spec.dtype = dtype->string == "bf16" ? KILN_TENSOR_MAP_BF16 : KILN_TENSOR_MAP_F16;
    spec.rank = static_cast<int>(dims->array.size());
    spec.swizzle_bytes = static_cast<int>(swizzle);
    for (size_t d = 0; d < dims->array.size(); ++d) {
      uint64_t boxSize = 0;
      if (!wholeNumber(&dims->array[d], 1e15, spec.dims[d]) || !wholeNumber(&box->array[d], 256, boxSize))
        return false;
      spec.box[d] = static_cast<uint32_t>(boxSize);
    }
    for (size_t d = 0; d < strides->array.size(); ++d)
      if (!wholeNumber(&strides->array[d], 1e15, spec.strides[d]))
        return false;
    specs.push_back(spec);
  }
  return true;
}

bool readFile(const std::string &path, std::string &contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  contents.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

/// Whether `path` is a regular file (of `size` bytes, when given).
bool isFile(const std::string &path, int64_t size = -1) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && (size < 0 || info.st_size == size);
}

/// The shape and byte count of a plan value; false when the shape is not a list of sizes or its bytes overflow.
bool shapeOf(const Json *value, int64_t elementSize, std::vector<int64_t> &shape, int64_t &bytes) {
  if (!value || value->kind != Json::Kind::Array)
    return false;
  bytes = elementSize;
  for (const Json &dim : value->array) {
    uint64_t size = 0;
    if (!wholeNumber(&dim, 9007199254740992.0, size))
      return false;
    shape.push_back(static_cast<int64_t>(size));
    if (__builtin_mul_overflow(bytes, static_cast<int64_t>(size), &bytes))
      return false;
  }
  return true;
}

/// A launch's grid or block into `dims`: three whole numbers from 1 to `limits`, which also keeps them
/// in the 32 bits of a launch; false on anything else.
bool launchDims(const Json *array, const double limits[3], unsigned dims[3]) {
  if (!array || array->kind != Json::Kind::Array || array->array.size() != 3)
    return false;
  for (size_t d = 0; d < 3; ++d) {
    uint64_t size = 0;
    if (!wholeNumber(&array->array[d], limits[d], size) || size < 1)
      return false;
    dims[d] = static_cast<unsigned>(size);
  }
  return true;
}
} // namespace

struct kiln_plan {
  std::string folder, manifest, target;
  kiln_device *device = nullptr; ///< null for a plan read without a GPU
  std::map<std::string, kiln_module *> modules; ///< by file: one per kernel
  std::vector<Slot> slots;
  std::vector<int> inputs, outputs;
  std::vector<Step> steps;
  std::vector<uint64_t> argumentCells;
  std::vector<void *> argumentPointers;

  /// Frees what the plan holds, also when loading stopped half way.
  ~kiln_plan() {
    for (Step &step : steps)
      kiln_kernel_free(step.kernel);
    for (Slot &slot : slots)
      if (slot.owned && slot.pointer)
        kiln_free(device, slot.pointer);
    for (auto &[file, module] : modules)
      kiln_module_unload(module);
  }
};

namespace {
kiln_status invalid(const std::string &manifest, const std::string &what) {
  return fail(KILN_ERROR_INVALID_ARGUMENT, manifest + ": " + what);
}

/// Reads the plan of `function` (null: the only one) from `plan.folder` into `plan`, checking the manifest and
/// that every file it names is in the folder; touches no GPU.
kiln_status readPlan(const char *function, kiln_plan &plan) {
  const std::string &root = plan.folder, &manifestPath = plan.manifest;
  std::string text, error;
  if (!readFile(manifestPath, text))
    return fail(KILN_ERROR_NOT_FOUND, manifestPath + ": cannot read it (not a compiled Kiln folder?)");
  Json manifest;
  if (!parseJson(text, manifest, error))
    return invalid(manifestPath, "not valid JSON (" + error + ")");
  const Json *plans = manifest.find("plans"), *kernels = manifest.find("kernels");
  if (!plans || plans->kind != Json::Kind::Array || plans->array.empty() || !kernels ||
      kernels->kind != Json::Kind::Array)
    return invalid(manifestPath, "no run plan (compile with kilnc)");
  const Json *chosen = nullptr;
  std::string names;
  for (const Json &candidate : plans->array) {
    const Json *name = candidate.find("function");
    std::string n = name ? name->string : "";
    names += (names.empty() ? "" : ", ") + n;
    if ((function && n == function) || (!function && plans->array.size() == 1))
      chosen = &candidate;
  }
  if (!chosen)
    return invalid(manifestPath, function ? "no function '" + std::string(function) + "' (it has " + names + ")"
                                          : "several functions (" + names + "); name one");
  if (const Json *target = manifest.find("target"))
    plan.target = target->string;
  std::map<std::string, const Json *> launches;
  for (const Json &kernel : kernels->array)
    if (const Json *name = kernel.find("name"))
      launches[name->string] = &kernel;

  std::map<int64_t, int> slotOf;
  const Json *values = chosen->find("values");
  for (const Json &value : values ? values->array : std::vector<Json>()) {
    Slot slot;
    const Json *kind = value.find("kind"), *id = value.find("id"), *dtype = value.find("dtype");
    if (!kind || !id || !dtype || !elementBytes(dtype->string))
      return invalid(manifestPath, "a plan value lacks kind, id, shape or a known dtype");
    slot.kind = kind->string, slot.dtype = dtype->string;
    if (!shapeOf(value.find("shape"), elementBytes(slot.dtype), slot.shape, slot.bytes))
      return invalid(manifestPath, "plan value " + std::to_string(static_cast<int64_t>(id->number)) +
                                       " has no shape of whole sizes, or more bytes than int64 can count");
    if (slot.kind == "input") {
      const Json *index = value.find("index");
      slot.index = index ? static_cast<int>(index->number) : -1;
      // Written in place by a kernel (its outputs then share the input's device buffer, as they do here anyway).
      if (const Json *updated = value.find("updated_in_place"); updated && updated->kind != Json::Kind::Bool)
        return invalid(manifestPath, "plan value " + std::to_string(static_cast<int64_t>(id->number)) +
                                         ": \"updated_in_place\" must be true or false");
    } else if (slot.kind == "view") {
      const Json *of = value.find("of");
      if (!of || !slotOf.count(static_cast<int64_t>(of->number)))
        return invalid(manifestPath, "a view of an unknown value");
      slot.of = slotOf[static_cast<int64_t>(of->number)];
    } else if (slot.kind == "buffer" || slot.kind == "constant") {
      slot.owned = true;
      if (slot.kind == "constant") {
        const Json *file = value.find("file");
        if (!file || file->kind != Json::Kind::String || !isFile(root + "/" + file->string, slot.bytes))
          return invalid(manifestPath, "constant file " + (file ? file->string : "?") + " is missing or has the "
                                       "wrong size (expected " + std::to_string(slot.bytes) + " bytes)");
        slot.file = file->string;
      }
    } else {
      return invalid(manifestPath, "unknown plan value kind '" + slot.kind + "'");
    }
    slotOf[static_cast<int64_t>(id->number)] = static_cast<int>(plan.slots.size());
    plan.slots.push_back(std::move(slot));
  }
  for (size_t i = 0; i < plan.slots.size(); ++i)
    if (plan.slots[i].kind == "input") {
      int index = plan.slots[i].index;
      if (index < 0 || index >= static_cast<int>(plan.slots.size()))
        return invalid(manifestPath, "an input without a valid index");
      if (plan.inputs.size() <= static_cast<size_t>(index))
        plan.inputs.resize(index + 1, -1);
      if (plan.inputs[index] != -1)
        return invalid(manifestPath, "two inputs with index " + std::to_string(index));
      plan.inputs[index] = static_cast<int>(i);
    }
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    if (plan.inputs[i] == -1)
      return invalid(manifestPath, "no input with index " + std::to_string(i));
  for (const Json &output : chosen->find("outputs") ? chosen->find("outputs")->array : std::vector<Json>()) {
    auto it = slotOf.find(static_cast<int64_t>(output.number));
    if (it == slotOf.end())
      return invalid(manifestPath, "an output that is not a plan value");
    plan.outputs.push_back(it->second);
  }
  size_t cells = 0;
  for (const Json &step : chosen->find("steps") ? chosen->find("steps")->array : std::vector<Json>()) {
    const Json *kernel = step.find("kernel"), *args = step.find("args");
    if (!kernel || !args || !launches.count(kernel->string))
      return invalid(manifestPath, "a step names no known kernel");
    const Json &launch = *launches[kernel->string];
    Step &s = plan.steps.emplace_back();
    s.name = kernel->string;
    for (auto [key, file] : {std::pair<const char *, std::string *>{"cubin", &s.cubin}, {"ptx", &s.ptx}})
      if (const Json *name = launch.find(key); name && name->kind == Json::Kind::String)
        *file = name->string;
    if (s.ptx.empty() && s.cubin.empty())
      return invalid(manifestPath, "kernel " + s.name + " names no PTX file");
    if (!(!s.ptx.empty() && isFile(root + "/" + s.ptx)) && !(!s.cubin.empty() && isFile(root + "/" + s.cubin)))
      return invalid(manifestPath, "kernel " + s.name + ": " + (s.ptx.empty() ? s.cubin : s.ptx) +
                                       " is not a file of the folder");
    const Json *functionName = launch.find("function");
    if (!functionName || functionName->kind != Json::Kind::String)
      return invalid(manifestPath, "kernel " + s.name + " names no function");
    s.function = functionName->string;
    // What every chip Kiln targets launches: grids of up to 2^31 - 1 blocks along x and 65535 along y and z,
    // blocks of up to 1024 threads.
    const double gridLimits[3] = {2147483647.0, 65535.0, 65535.0}, blockLimits[3] = {1024.0, 1024.0, 64.0};
    if (!launchDims(launch.find("grid"), gridLimits, s.grid))
      return invalid(manifestPath, "kernel " + s.name + ": \"grid\" must be 3 whole numbers of blocks, 1 to "
                                   "2147483647 along x and 1 to 65535 along y and z (a grid no GPU launches)");
    if (!launchDims(launch.find("block"), blockLimits, s.block) ||
        static_cast<uint64_t>(s.block[0]) * s.block[1] * s.block[2] > 1024)
      return invalid(manifestPath, "kernel " + s.name + ": \"block\" must be 3 whole numbers of threads, at "
                                   "most 1024 in all (64 along z)");
    uint64_t shared = 0;
    if (const Json *bytes = launch.find("dynamic_shared_bytes"); bytes && !wholeNumber(bytes, 4294967295.0, shared))
      return invalid(manifestPath, "kernel " + s.name + ": \"dynamic_shared_bytes\" must be a whole number of "
                                   "bytes that fits in 32 bits");
    s.shared = static_cast<unsigned>(shared);
    for (const Json &arg : args->array) {
      auto it = slotOf.find(static_cast<int64_t>(arg.number));
      if (it == slotOf.end())
        return invalid(manifestPath, "a step argument that is not a plan value");
      s.args.push_back(it->second);
    }
    if (const Json *sizes = launch.find("sizes"))
      for (const Json &size : sizes->array) {
        uint64_t value = 0;
        if (!wholeNumber(&size, 9007199254740992.0, value))
          return invalid(manifestPath, "kernel " + s.name + ": \"sizes\" must be whole numbers");
        s.sizes.push_back(value);
      }
    std::string why;
    if (!parseTensorMaps(launch.find("tensor_maps"), s.maps, why))
      return invalid(manifestPath, "kernel " + s.name + ": " + why);
    if (const Json *dependent = launch.find("dependent_launch")) {
      if (dependent->kind != Json::Kind::Bool)
        return invalid(manifestPath, "kernel " + s.name + ": \"dependent_launch\" must be true or false");
      s.dependentLaunch = dependent->boolean;
    }
    cells = std::max(cells, s.args.size() + s.sizes.size());
  }
  plan.argumentCells.resize(cells);
  for (uint64_t &cell : plan.argumentCells)
    plan.argumentPointers.push_back(&cell);
  return KILN_OK;
}

/// Puts a read plan on `device`: each kernel's module (its cubin when it was built for this GPU, sm_90a exactly
/// 9.0 and sm_80 an 8.x device, else its PTX for the driver to compile), device buffers, and the constants.
kiln_status loadPlan(kiln_device *device, kiln_plan &plan) {
  int major = 0, minor = 0, multiprocessors = 0;
  if (kiln_status status = kiln_device_info(device, &major, &minor, &multiprocessors); status != KILN_OK)
    return status;
  plan.device = device;
  bool cubinFits = (plan.target == "sm_90a" && major == 9 && minor == 0) || (plan.target == "sm_80" && major == 8);
  for (Slot &slot : plan.slots) {
    if (!slot.owned)
      continue;
    if (kiln_status status = kiln_malloc(device, static_cast<size_t>(std::max<int64_t>(slot.bytes, 1)),
                                         &slot.pointer);
        status != KILN_OK)
      return status;
    if (slot.kind != "constant")
      continue;
    std::string data;
    if (!readFile(plan.folder + "/" + slot.file, data) || static_cast<int64_t>(data.size()) != slot.bytes)
      return invalid(plan.manifest, "constant file " + slot.file + " is missing or has the wrong size (expected " +
                                        std::to_string(slot.bytes) + " bytes)");
    if (kiln_status status = kiln_copy_to_device(device, slot.pointer, data.data(), data.size()); status != KILN_OK)
      return status;
  }
  for (Step &s : plan.steps) {
    std::string file = cubinFits && !s.cubin.empty() && isFile(plan.folder + "/" + s.cubin) ? s.cubin : s.ptx;
    if (file.empty())
      return invalid(plan.manifest, "kernel " + s.name + " names no PTX file, and its cubin is for " +
                                        (plan.target.empty() ? "another GPU" : plan.target));
    kiln_module *&module = plan.modules[file];
    if (!module)
      if (kiln_status status = kiln_module_load_file(device, (plan.folder + "/" + file).c_str(), &module);
          status != KILN_OK) {
        plan.modules.erase(file);
        return status;
      }
    if (kiln_status status = kiln_module_get_kernel(module, s.function.c_str(), &s.kernel); status != KILN_OK)
      return status;
    if (kiln_status status = kiln_kernel_set_tensor_maps(s.kernel, static_cast<int>(s.args.size() + s.sizes.size()),
                                                         static_cast<int>(s.maps.size()), s.maps.data());
        status != KILN_OK)
      return status;
    if (kiln_status status = kiln_kernel_set_dependent_launch(s.kernel, s.dependentLaunch); status != KILN_OK)
      return status;
  }
  return KILN_OK;
}

/// A plan of `folder` with its paths set, for readPlan to fill.
std::unique_ptr<kiln_plan> emptyPlan(const char *folder) {
  auto plan = std::make_unique<kiln_plan>();
  plan->folder = folder;
  plan->manifest = plan->folder + "/manifest.json";
  return plan;
}
} // namespace

extern "C" {

kiln_status kiln_plan_read(const char *folder, const char *function, kiln_plan **result) {
  if (!folder || !result)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_read: null folder or result");
  *result = nullptr;
  std::unique_ptr<kiln_plan> plan = emptyPlan(folder);
  if (kiln_status status = readPlan(function, *plan); status != KILN_OK)
    return status;
  *result = plan.release();
  return KILN_OK;
}

kiln_status kiln_plan_load(kiln_device *device, const char *folder, const char *function, kiln_plan **result) {
  if (!device || !folder || !result)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_load: null device, folder or result");
  *result = nullptr;
  std::unique_ptr<kiln_plan> plan = emptyPlan(folder);
  if (kiln_status status = readPlan(function, *plan); status != KILN_OK)
    return status;
  if (kiln_status status = loadPlan(device, *plan); status != KILN_OK)
    return status;
  *result = plan.release();
  return KILN_OK;
}

void kiln_plan_free(kiln_plan *plan) { delete plan; }

int kiln_plan_num_inputs(const kiln_plan *plan) { return plan ? static_cast<int>(plan->inputs.size()) : 0; }
int kiln_plan_num_outputs(const kiln_plan *plan) { return plan ? static_cast<int>(plan->outputs.size()) : 0; }

kiln_status kiln_plan_tensor_info(const kiln_plan *plan, int is_output, int index, const char **dtype, int *rank,
                                  int64_t shape[8]) {
  if (!plan || !dtype || !rank || !shape)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_tensor_info: null argument");
  const std::vector<int> &list = is_output ? plan->outputs : plan->inputs;
  if (index < 0 || static_cast<size_t>(index) >= list.size() || list[index] < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_tensor_info: no " + std::string(is_output ? "output" : "input") +
                                                 " " + std::to_string(index));
  const Slot &slot = plan->slots[list[index]];
  if (slot.shape.size() > 8)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_tensor_info: rank above 8");
  *dtype = slot.dtype.c_str();
  *rank = static_cast<int>(slot.shape.size());
  for (size_t d = 0; d < slot.shape.size(); ++d)
    shape[d] = slot.shape[d];
  return KILN_OK;
}

kiln_status kiln_plan_run(kiln_plan *plan, const uint64_t *inputs, uint64_t *outputs, void *stream) {
  if (!plan || (!inputs && !plan->inputs.empty()) || (!outputs && !plan->outputs.empty()))
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_run: null plan, inputs or outputs");
  if (!plan->device)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_run: " + plan->folder + " was read without a GPU "
                                             "(kiln_plan_read); load it with kiln_plan_load to run it");
  for (size_t i = 0; i < plan->inputs.size(); ++i)
    plan->slots[plan->inputs[i]].pointer = inputs[i];
  for (Slot &slot : plan->slots)  // views follow their base (slots come after what they view)
    if (slot.kind == "view")
      slot.pointer = plan->slots[slot.of].pointer;
  for (Step &step : plan->steps) {
    for (size_t a = 0; a < step.args.size(); ++a)
      plan->argumentCells[a] = plan->slots[step.args[a]].pointer;
    for (size_t i = 0; i < step.sizes.size(); ++i)
      plan->argumentCells[step.args.size() + i] = step.sizes[i];
    if (kiln_status status = kiln_kernel_launch(step.kernel, step.grid, step.block, step.shared, stream,
                                                plan->argumentPointers.data());
        status != KILN_OK)
      return status;
  }
  for (size_t o = 0; o < plan->outputs.size(); ++o)
    outputs[o] = plan->slots[plan->outputs[o]].pointer;
  return KILN_OK;
}

} // extern "C"
