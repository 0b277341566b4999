//===- Plan.cpp - Run plans executed by the runtime ------------------------===//
//
// A compiled module's public function is a plan (written by kilnc into manifest.json): inputs, buffers, views
// (the same bytes under another shape), constants in files, and kernel launches in order. Loading a plan loads
// its kernels and allocates every buffer and constant once; a run only binds the inputs' addresses and issues
// the launches on a stream, so whole graphs run from C or C++ with no Python and no MLIR.
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

using namespace kiln::runtime;

namespace {
/// One tensor of the plan: where its bytes are, and what they hold.
struct Slot {
  std::string kind, dtype;
  std::vector<int64_t> shape;
  int index = -1;      // argument position of an input
  int of = -1;         // slot a view aliases
  uint64_t pointer = 0;
  bool owned = false;  // allocated by the plan (buffers and constants)
};

struct Step {
  kiln_kernel *kernel = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared = 0;
  std::vector<int> args;
  std::vector<uint64_t> sizes; ///< a size-generic kernel's sizes, passed after its buffers
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

std::vector<int64_t> shapeOf(const Json &value) {
  std::vector<int64_t> shape;
  for (const Json &dim : value.array)
    shape.push_back(static_cast<int64_t>(dim.number));
  return shape;
}

unsigned dim(const Json *array, size_t index) {
  return array && index < array->array.size() ? static_cast<unsigned>(array->array[index].number) : 1;
}
} // namespace

struct kiln_plan {
  kiln_device *device = nullptr;
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
int64_t bytesOf(const Slot &slot) {
  int64_t count = 1;
  for (int64_t d : slot.shape)
    count *= d;
  return count * elementBytes(slot.dtype);
}

kiln_status invalid(const std::string &manifest, const std::string &what) {
  return fail(KILN_ERROR_INVALID_ARGUMENT, manifest + ": " + what);
}
} // namespace

extern "C" {

kiln_status kiln_plan_load(kiln_device *device, const char *folder, const char *function, kiln_plan **result) {
  if (!device || !folder || !result)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_load: null device, folder or result");
  *result = nullptr;
  std::string root(folder), manifestPath = root + "/manifest.json", text, error;
  if (!readFile(manifestPath, text))
    return fail(KILN_ERROR_NOT_FOUND, manifestPath + ": cannot read it (not a compiled Kiln folder?)");
  Json manifest;
  if (!parseJson(text, manifest, error))
    return invalid(manifestPath, "not valid JSON (" + error + ")");
  const Json *plans = manifest.find("plans"), *kernels = manifest.find("kernels");
  if (!plans || plans->kind != Json::Kind::Array || plans->array.empty() || !kernels)
    return invalid(manifestPath, "no run plan (compile with kilnc)");
  const Json *plan = nullptr;
  std::string names;
  for (const Json &candidate : plans->array) {
    const Json *name = candidate.find("function");
    std::string n = name ? name->string : "";
    names += (names.empty() ? "" : ", ") + n;
    if ((function && n == function) || (!function && plans->array.size() == 1))
      plan = &candidate;
  }
  if (!plan)
    return invalid(manifestPath, function ? "no function '" + std::string(function) + "' (it has " + names + ")"
                                          : "several functions (" + names + "); name one");

  auto owned = std::make_unique<kiln_plan>();
  owned->device = device;
  // Each kernel's cubin when it was built for this GPU (sm_90a: exactly 9.0; sm_80: an 8.x device), else its
  // PTX for the driver to compile.
  const Json *target = manifest.find("target");
  int major = 0, minor = 0, multiprocessors = 0;
  if (kiln_status status = kiln_device_info(device, &major, &minor, &multiprocessors); status != KILN_OK)
    return status;
  std::string chip = target ? target->string : "";
  bool cubinFits = (chip == "sm_90a" && major == 9 && minor == 0) || (chip == "sm_80" && major == 8);
  std::map<std::string, const Json *> launches;
  for (const Json &kernel : kernels->array)
    if (const Json *name = kernel.find("name"))
      launches[name->string] = &kernel;

  std::map<int64_t, int> slotOf;
  const Json *values = plan->find("values");
  for (const Json &value : values ? values->array : std::vector<Json>()) {
    Slot slot;
    const Json *kind = value.find("kind"), *id = value.find("id"), *shape = value.find("shape"),
               *dtype = value.find("dtype");
    if (!kind || !id || !shape || !dtype || !elementBytes(dtype->string))
      return invalid(manifestPath, "a plan value lacks kind, id, shape or a known dtype");
    slot.kind = kind->string, slot.dtype = dtype->string, slot.shape = shapeOf(*shape);
    if (slot.kind == "input") {
      const Json *index = value.find("index");
      slot.index = index ? static_cast<int>(index->number) : -1;
    } else if (slot.kind == "view") {
      const Json *of = value.find("of");
      if (!of || !slotOf.count(static_cast<int64_t>(of->number)))
        return invalid(manifestPath, "a view of an unknown value");
      slot.of = slotOf[static_cast<int64_t>(of->number)];
    } else if (slot.kind == "buffer" || slot.kind == "constant") {
      slot.owned = true;
      int64_t bytes = std::max<int64_t>(bytesOf(slot), 1);
      if (kiln_status status = kiln_malloc(device, static_cast<size_t>(bytes), &slot.pointer); status != KILN_OK)
        return status;
      if (slot.kind == "constant") {
        const Json *file = value.find("file");
        std::string data;
        bool read = file && readFile(root + "/" + file->string, data) &&
                    static_cast<int64_t>(data.size()) == bytesOf(slot);
        uint64_t pointer = slot.pointer;  // not in the plan yet: freed here on failure
        if (!read) {
          kiln_free(device, pointer);
          return invalid(manifestPath, "constant file " + (file ? file->string : "?") + " is missing or has the "
                                       "wrong size");
        }
        if (kiln_status status = kiln_copy_to_device(device, pointer, data.data(), data.size()); status != KILN_OK) {
          kiln_free(device, pointer);
          return status;
        }
      }
    } else {
      return invalid(manifestPath, "unknown plan value kind '" + slot.kind + "'");
    }
    slotOf[static_cast<int64_t>(id->number)] = static_cast<int>(owned->slots.size());
    owned->slots.push_back(std::move(slot));
  }
  for (size_t i = 0; i < owned->slots.size(); ++i)
    if (owned->slots[i].kind == "input") {
      int index = owned->slots[i].index;
      if (index < 0 || index >= static_cast<int>(owned->slots.size()))
        return invalid(manifestPath, "an input without a valid index");
      if (owned->inputs.size() <= static_cast<size_t>(index))
        owned->inputs.resize(index + 1, -1);
      if (owned->inputs[index] != -1)
        return invalid(manifestPath, "two inputs with index " + std::to_string(index));
      owned->inputs[index] = static_cast<int>(i);
    }
  for (size_t i = 0; i < owned->inputs.size(); ++i)
    if (owned->inputs[i] == -1)
      return invalid(manifestPath, "no input with index " + std::to_string(i));
  for (const Json &output : plan->find("outputs") ? plan->find("outputs")->array : std::vector<Json>()) {
    auto it = slotOf.find(static_cast<int64_t>(output.number));
    if (it == slotOf.end())
      return invalid(manifestPath, "an output that is not a plan value");
    owned->outputs.push_back(it->second);
  }
  size_t cells = 0;
  for (const Json &step : plan->find("steps") ? plan->find("steps")->array : std::vector<Json>()) {
    const Json *kernel = step.find("kernel"), *args = step.find("args");
    if (!kernel || !args || !launches.count(kernel->string))
      return invalid(manifestPath, "a step names no known kernel");
    const Json &launch = *launches[kernel->string];
    const Json *cubin = launch.find("cubin"), *ptx = launch.find("ptx");
    std::string file = cubin && cubin->kind == Json::Kind::String && cubinFits ? cubin->string
                       : ptx && ptx->kind == Json::Kind::String             ? ptx->string
                                                                            : "";
    if (file.empty())
      return invalid(manifestPath, "kernel " + kernel->string + " names no PTX file");
    kiln_module *&module = owned->modules[file];
    if (!module)
      if (kiln_status status = kiln_module_load_file(device, (root + "/" + file).c_str(), &module);
          status != KILN_OK) {
        owned->modules.erase(file);
        return status;
      }
    const Json *function = launch.find("function");
    if (!function || function->kind != Json::Kind::String)
      return invalid(manifestPath, "kernel " + kernel->string + " names no function");
    Step &s = owned->steps.emplace_back();  // in the plan before its kernel handle exists: freed with it
    if (kiln_status status = kiln_module_get_kernel(module, function->string.c_str(), &s.kernel); status != KILN_OK)
      return status;
    for (size_t d = 0; d < 3; ++d)
      s.grid[d] = dim(launch.find("grid"), d), s.block[d] = dim(launch.find("block"), d);
    const Json *shared = launch.find("dynamic_shared_bytes");
    s.shared = shared ? static_cast<unsigned>(shared->number) : 0;
    for (const Json &arg : args->array) {
      auto it = slotOf.find(static_cast<int64_t>(arg.number));
      if (it == slotOf.end())
        return invalid(manifestPath, "a step argument that is not a plan value");
      s.args.push_back(it->second);
    }
    if (const Json *sizes = launch.find("sizes"))
      for (const Json &size : sizes->array)
        s.sizes.push_back(static_cast<uint64_t>(size.number));
    std::vector<kiln_tensor_map_spec> maps;
    std::string why;
    if (!parseTensorMaps(launch.find("tensor_maps"), maps, why))
      return invalid(manifestPath, "kernel " + kernel->string + ": " + why);
    if (kiln_status status = kiln_kernel_set_tensor_maps(s.kernel, static_cast<int>(s.args.size() + s.sizes.size()),
                                                         static_cast<int>(maps.size()), maps.data());
        status != KILN_OK)
      return status;
    cells = std::max(cells, s.args.size() + s.sizes.size());
  }
  owned->argumentCells.resize(cells);
  for (uint64_t &cell : owned->argumentCells)
    owned->argumentPointers.push_back(&cell);
  *result = owned.release();
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
