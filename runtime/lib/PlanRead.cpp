//===- PlanRead.cpp - Reading and checking a compiled folder's manifest ----===//
//
// The manifest is data a user may copy between machines, edit, truncate, or bring from another Kiln: every field
// is read through a typed accessor that names the object and the key it wanted, files must be plain files of the
// folder (no path parts), ids must be defined before use, and sizes must be whole numbers whose byte counts fit
// int64. The first problem stops the read with "<manifest path>: <what>".
//
//===----------------------------------------------------------------------===//

#include "PlanRead.h"

#include "Errors.h"
#include "Json.h"

#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <sys/stat.h>

using namespace kiln::runtime;

int64_t kiln::runtime::elementBytes(const std::string &dtype) {
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

namespace {
/// Each GPU target and the compute capability its cubins are built for.
struct ChipTarget {
  const char *name;
  int major, minor;
};
const ChipTarget kTargets[] = {{"sm_80", 8, 0}, {"sm_90a", 9, 0}};
} // namespace

extern "C" {
const char *kiln_target_for_capability(int major, int minor) {
  if (major == 9 && minor == 0)
    return kTargets[1].name;
  return major >= 8 ? kTargets[0].name : nullptr;
}

kiln_status kiln_target_capability(const char *target, int *major, int *minor) {
  if (!target || !major || !minor)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_target_capability: null argument");
  for (const ChipTarget &chip : kTargets)
    if (std::string(target) == chip.name) {
      *major = chip.major, *minor = chip.minor;
      return KILN_OK;
    }
  return fail(KILN_ERROR_NOT_FOUND, "no GPU target '" + std::string(target) + "' (expected sm_80 or sm_90a)");
}
} // extern "C"

kiln_status kiln::runtime::checkChip(const std::string &target, int major, int minor, bool &cubinFits) {
  std::string capability = std::to_string(major) + "." + std::to_string(minor);
  if (target == "sm_90a" && (major != 9 || minor != 0))
    return fail(KILN_ERROR_INVALID_ARGUMENT, "this program is compiled for sm_90a (compute capability 9.0); the "
                                             "GPU has " + capability);
  if (target == "sm_80" && major < 8)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "this program is compiled for sm_80; the GPU's compute capability " +
                                                 capability + " is older");
  cubinFits = target == "sm_90a" || major == 8;
  return KILN_OK;
}

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

/// Whether `path` is a regular file.
bool isFile(const std::string &path, int64_t *size = nullptr) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    return false;
  if (size)
    *size = static_cast<int64_t>(info.st_size);
  return true;
}

/// Reads one manifest; each accessor returns false after recording what is wrong in `error`.
class ManifestReader {
public:
  explicit ManifestReader(PlanDescription &plan) : plan(plan) {}

  kiln_status read(const char *function);

private:
  PlanDescription &plan;
  std::string error;

  bool bad(const std::string &why) {
    if (error.empty())
      error = why;
    return false;
  }

  /// Member `key` of `object` (described as `where`) of `kind`, described as `what` when missing.
  const Json *member(const Json &object, const char *key, Json::Kind kind, const std::string &where,
                     const char *what) {
    const Json *value = object.find(key);
    if (value && value->kind == kind)
      return value;
    bad(where + " has no " + quoted(key) + " (" + what + ")");
    return nullptr;
  }
  bool string(const Json &object, const char *key, const std::string &where, std::string &result) {
    const Json *value = member(object, key, Json::Kind::String, where, "a string");
    if (value)
      result = value->string;
    return value;
  }
  /// A whole number from 0 to `limit`.
  static bool whole(const Json &value, double limit, uint64_t &result) {
    if (value.kind != Json::Kind::Number || value.number < 0 || value.number > limit ||
        value.number != static_cast<double>(static_cast<uint64_t>(value.number)))
      return false;
    result = static_cast<uint64_t>(value.number);
    return true;
  }
  bool integer(const Json &object, const char *key, const std::string &where, double limit, uint64_t &result,
               bool optional = false) {
    const Json *value = object.find(key);
    if (!value && optional)
      return true;
    if (!value)
      return bad(where + " has no " + quoted(key) + " (a whole number)");
    if (!whole(*value, limit, result))
      return bad(where + ": " + quoted(key) + " must be a whole number from 0 to " + std::to_string(
                                                                                       static_cast<uint64_t>(limit)));
    return true;
  }
  /// A list of whole numbers up to `limit` (an optional key reads as empty).
  bool integers(const Json &object, const char *key, const std::string &where, double limit,
                std::vector<uint64_t> &result, bool optional = false) {
    const Json *value = object.find(key);
    if (!value && optional)
      return true;
    if (!value || value->kind != Json::Kind::Array)
      return bad(where + " has no " + quoted(key) + " (a list of whole numbers)");
    for (const Json &item : value->array) {
      uint64_t number = 0;
      if (!whole(item, limit, number))
        return bad(where + ": " + quoted(key) + " must list whole numbers from 0 to " +
                   std::to_string(static_cast<uint64_t>(limit)));
      result.push_back(number);
    }
    return true;
  }
  bool flag(const Json &object, const char *key, const std::string &where, bool &result) {
    const Json *value = object.find(key);
    if (!value)
      return true;
    if (value->kind != Json::Kind::Bool)
      return bad(where + ": " + quoted(key) + " is not true or false");
    result = value->boolean;
    return true;
  }
  const std::vector<Json> *objects(const Json &object, const char *key, const std::string &where) {
    const Json *value = member(object, key, Json::Kind::Array, where, "a list");
    if (!value)
      return nullptr;
    for (const Json &item : value->array)
      if (item.kind != Json::Kind::Object) {
        bad(where + "'s " + quoted(key) + " holds something other than objects");
        return nullptr;
      }
    return &value->array;
  }
  /// A file name of the folder (no path parts) that is a plain file there, of `size` bytes when given.
  bool file(const std::string &name, const std::string &where, const char *key, int64_t size = -1) {
    int64_t actual = 0;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        !isFile(plan.folder + "/" + name, &actual))
      return bad(where + " names " + key + " " + quoted(name) + ", which is not a file of the folder");
    if (size >= 0 && actual != size)
      return bad(where + ": " + key + " " + quoted(name) + " holds " + std::to_string(actual) + " bytes, not the " +
                 std::to_string(size) + " its shape needs");
    return true;
  }
  /// A grid or block: three whole numbers from 1 to `limits`.
  bool dims(const Json &object, const char *key, const std::string &where, const double limits[3],
            const char *what, unsigned result[3]) {
    const Json *value = object.find(key);
    if (!value)
      return bad(where + " has no " + quoted(key) + " (" + what + ")");
    bool ok = value->kind == Json::Kind::Array && value->array.size() == 3;
    for (size_t d = 0; ok && d < 3; ++d) {
      uint64_t size = 0;
      ok = whole(value->array[d], limits[d], size) && size >= 1;
      result[d] = static_cast<unsigned>(size);
    }
    return ok || bad(where + ": " + quoted(key) + " must be " + what);
  }

  bool readKernel(const Json &kernel, Step &step, size_t &params);
  bool readTensorMaps(const Json &kernel, const std::string &where, std::vector<kiln_tensor_map_spec> &maps);
  bool readValues(const Json &chosen, const std::string &where, std::map<uint64_t, int> &slotOf);
};

bool ManifestReader::readTensorMaps(const Json &kernel, const std::string &where,
                                    std::vector<kiln_tensor_map_spec> &maps) {
  const Json *list = kernel.find("tensor_maps");
  if (!list)
    return true;
  const std::string why = where + ": 'tensor_maps' must list maps of a buffer index, dtype (f16 or bf16), 1 to 5 "
                                  "dims, as many box sizes, one stride fewer and a swizzle, all whole numbers";
  if (list->kind != Json::Kind::Array || list->array.size() > KILN_MAX_TENSOR_MAPS)
    return bad(why);
  for (const Json &map : list->array) {
    kiln_tensor_map_spec spec{};
    const Json *dtype = map.find("dtype"), *sizes = map.find("dims"), *strides = map.find("strides"),
               *box = map.find("box"), *buffer = map.find("buffer"), *swizzle = map.find("swizzle");
    uint64_t bufferIndex = 0, swizzleBytes = 0;
    if (map.kind != Json::Kind::Object || !buffer || !whole(*buffer, 1 << 20, bufferIndex) || !swizzle ||
        !whole(*swizzle, 128, swizzleBytes) || !dtype || dtype->kind != Json::Kind::String ||
        (dtype->string != "f16" && dtype->string != "bf16") || !sizes || !strides || !box ||
        sizes->kind != Json::Kind::Array || strides->kind != Json::Kind::Array || box->kind != Json::Kind::Array ||
        sizes->array.empty() || sizes->array.size() > 5 || box->array.size() != sizes->array.size() ||
        strides->array.size() + 1 != sizes->array.size())
      return bad(why);
    spec.buffer = static_cast<int>(bufferIndex);
    spec.dtype = dtype->string == "bf16" ? KILN_TENSOR_MAP_BF16 : KILN_TENSOR_MAP_F16;
    spec.rank = static_cast<int>(sizes->array.size());
    spec.swizzle_bytes = static_cast<int>(swizzleBytes);
    for (size_t d = 0; d < sizes->array.size(); ++d) {
      uint64_t boxSize = 0;
      if (!whole(sizes->array[d], 1e15, spec.dims[d]) || !whole(box->array[d], 256, boxSize))
        return bad(why);
      spec.box[d] = static_cast<uint32_t>(boxSize);
    }
    for (size_t d = 0; d < strides->array.size(); ++d)
      if (!whole(strides->array[d], 1e15, spec.strides[d]))
        return bad(why);
    maps.push_back(spec);
  }
  return true;
}

bool ManifestReader::readKernel(const Json &kernel, Step &step, size_t &params) {
  std::string where = "kernel " + quoted(step.name);
  const Json *ptx = kernel.find("ptx"), *cubin = kernel.find("cubin"), *function = kernel.find("function");
  // Written before each kernel had files of its own, or named the function it launches.
  if (!ptx || ptx->kind != Json::Kind::String || !function)
    return bad("kernel " + step.name + " names no PTX file or function; the folder comes from an older Kiln, "
               "compile it again");
  step.ptx = ptx->string;
  if (!string(kernel, "function", where, step.function))
    return false;
  // A folder may travel with its cubins alone: the PTX is only needed where no cubin fits the GPU.
  if (cubin && cubin->kind != Json::Kind::Null) {
    if (cubin->kind != Json::Kind::String)
      return bad(where + ": 'cubin' is not a file name or null");
    step.cubin = cubin->string;
    if (!file(step.cubin, where, "cubin"))
      return false;
  } else if (!file(step.ptx, where, "ptx")) {
    return false;
  }
  const std::vector<Json> *paramList = objects(kernel, "params", where);
  if (!paramList)
    return false;
  params = paramList->size();
  // What every chip Kiln targets launches: grids of up to 2^31 - 1 blocks along x and 65535 along y and z,
  // blocks of up to 1024 threads (64 along z).
  const double gridLimits[3] = {2147483647.0, 65535.0, 65535.0}, blockLimits[3] = {1024.0, 1024.0, 64.0};
  if (!dims(kernel, "grid", where, gridLimits, "3 whole numbers of blocks, 1 to 2147483647 along x and 1 to 65535 "
                                               "along y and z", step.grid) ||
      !dims(kernel, "block", where, blockLimits, "3 whole numbers of threads, at most 1024 in all (64 along z)",
            step.block))
    return false;
  if (static_cast<uint64_t>(step.block[0]) * step.block[1] * step.block[2] > 1024)
    return bad(where + ": 'block' must be 3 whole numbers of threads, at most 1024 in all (64 along z)");
  uint64_t shared = 0;
  if (!integer(kernel, "dynamic_shared_bytes", where, 4294967295.0, shared))
    return false;
  step.shared = static_cast<unsigned>(shared);
  if (!integers(kernel, "sizes", where, 9007199254740992.0, step.sizes, /*optional=*/true) ||
      !flag(kernel, "dependent_launch", where, step.dependentLaunch))
    return false;
  return readTensorMaps(kernel, where, step.maps);
}

bool ManifestReader::readValues(const Json &chosen, const std::string &where, std::map<uint64_t, int> &slotOf) {
  const std::vector<Json> *values = objects(chosen, "values", where);
  if (!values)
    return false;
  for (const Json &value : *values) {
    uint64_t id = 0;
    if (!integer(value, "id", "a value of " + where, 9007199254740992.0, id))
      return false;
    std::string at = "value " + std::to_string(id) + " of " + where, kind;
    if (slotOf.count(id))
      return bad(where + " defines value " + std::to_string(id) + " twice");
    Slot slot;
    if (!string(value, "kind", at, kind) || !string(value, "dtype", at, slot.dtype))
      return false;
    int64_t elementSize = elementBytes(slot.dtype);
    if (!elementSize)
      return bad(at + " has dtype " + quoted(slot.dtype) + " (not one of f32, f16, bf16, i64, i32, i1)");
    std::vector<uint64_t> shape;
    if (!integers(value, "shape", at, 9007199254740992.0, shape))
      return false;
    slot.bytes = elementSize;
    for (uint64_t size : shape) {
      slot.shape.push_back(static_cast<int64_t>(size));
      if (__builtin_mul_overflow(slot.bytes, static_cast<int64_t>(size), &slot.bytes))
        return bad(at + " has more bytes than int64 can count");
    }
    if (kind == "input") {
      uint64_t index = 0;
      if (!integer(value, "index", at, 65535.0, index) || !flag(value, "updated_in_place", at, slot.updatedInPlace))
        return false;
      slot.kind = SlotKind::Input;
      slot.input = static_cast<int>(index);
      if (plan.inputs.size() <= index)
        plan.inputs.resize(index + 1, -1);
      if (plan.inputs[index] != -1)
        return bad(where + " has two inputs with index " + std::to_string(index));
      plan.inputs[index] = static_cast<int>(plan.slots.size());
    } else if (kind == "view") {
      uint64_t of = 0, offset = 0;
      if (!integer(value, "of", at, 9007199254740992.0, of) ||
          !integer(value, "offset", at, 9007199254740992.0, offset, /*optional=*/true))
        return false;
      if (!slotOf.count(of))
        return bad(at + " is a view of value " + std::to_string(of) + ", which the plan does not define before it");
      slot.kind = SlotKind::View;
      slot.of = slotOf[of];
      slot.offset = static_cast<int64_t>(offset);
      // A reshape (no offset) views every byte; a slice one run of them, from an offset the kernels' loads keep
      // aligned.
      int64_t viewed = plan.slots[slot.of].bytes;
      slot.partial = value.find("offset") != nullptr;
      if (!slot.partial && viewed != slot.bytes)
        return bad(at + " views value " + std::to_string(of) + " under a shape of another byte count");
      if (offset % 16 != 0)
        return bad(at + " views value " + std::to_string(of) + " from byte " + std::to_string(offset) +
                   ", not a multiple of 16");
      if (slot.bytes > viewed || slot.offset > viewed - slot.bytes)
        return bad(at + " views " + std::to_string(slot.bytes) + " bytes of value " + std::to_string(of) +
                   " from byte " + std::to_string(offset) + ", past its " + std::to_string(viewed) + " bytes");
    } else if (kind == "constant") {
      slot.kind = SlotKind::Constant;
      if (!string(value, "file", at, slot.file) || !file(slot.file, at, "file", slot.bytes))
        return false;
    } else if (kind == "buffer") {
      slot.kind = SlotKind::Buffer;
    } else {
      return bad(at + " is of unknown kind " + quoted(kind));
    }
    slotOf[id] = static_cast<int>(plan.slots.size());
    plan.slots.push_back(std::move(slot));
  }
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    if (plan.inputs[i] == -1)
      return bad(where + " has no input with index " + std::to_string(i));
  return true;
}

kiln_status ManifestReader::read(const char *function) {
  std::ifstream in(plan.manifest, std::ios::binary);
  if (!in || !isFile(plan.manifest))
    return fail(KILN_ERROR_NOT_FOUND, plan.manifest + ": cannot read it (not a compiled Kiln folder?)");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), parseError;
  auto invalid = [&](const std::string &why) { return fail(KILN_ERROR_INVALID_ARGUMENT, plan.manifest + ": " + why); };
  Json manifest;
  if (!parseJson(text, manifest, parseError))
    return invalid("not JSON (" + parseError + ")");
  if (manifest.kind != Json::Kind::Object)
    return invalid("not a JSON object");
  if (!string(manifest, "target", "the manifest", plan.target))
    return invalid(error);
  int major = 0, minor = 0;
  if (kiln_target_capability(plan.target.c_str(), &major, &minor) != KILN_OK)
    return invalid("target " + quoted(plan.target) + " is not one of sm_80, sm_90a");

  // Kernels by name, each with the number of buffers its launch takes.
  const std::vector<Json> *kernels = objects(manifest, "kernels", "the manifest");
  if (!kernels)
    return invalid(error);
  std::map<std::string, std::pair<Step, size_t>> byName;
  for (const Json &kernel : *kernels) {
    Step step;
    size_t params = 0;
    if (!string(kernel, "name", "a kernel", step.name) || !readKernel(kernel, step, params))
      return invalid(error);
    std::string name = step.name;
    byName[name] = {std::move(step), params};
  }

  const std::vector<Json> *plans = objects(manifest, "plans", "the manifest");
  if (!plans)
    return invalid(error);
  const Json *chosen = nullptr;
  std::string names;
  for (const Json &candidate : *plans) {
    std::string name;
    if (!string(candidate, "function", "a plan", name))
      return invalid(error);
    names += (names.empty() ? "" : ", ") + name;
    if (function ? name == function : plans->size() == 1)
      chosen = &candidate, plan.function = name;
  }
  if (!chosen)
    return fail(KILN_ERROR_NOT_FOUND,
                plan.manifest + ": " + (function ? "no function '" + std::string(function) + "' (it has " + names + ")"
                                                 : "the module has " + std::to_string(plans->size()) +
                                                       " public functions (" + names + "); name one"));
  std::string where = "plan " + quoted(plan.function);
  std::map<uint64_t, int> slotOf;
  if (!readValues(*chosen, where, slotOf))
    return invalid(error);
  auto slotsOf = [&](const Json &object, const char *key, const std::string &at, std::vector<int> &slots) {
    std::vector<uint64_t> ids;
    if (!integers(object, key, at, 9007199254740992.0, ids))
      return false;
    for (uint64_t id : ids) {
      if (!slotOf.count(id))
        return bad(at + " takes value " + std::to_string(id) + ", which the plan does not define");
      slots.push_back(slotOf[id]);
    }
    return true;
  };
  const std::vector<Json> *steps = objects(*chosen, "steps", where);
  if (!steps)
    return invalid(error);
  for (const Json &launch : *steps) {
    std::string kernel;
    if (!string(launch, "kernel", "a step of " + where, kernel))
      return invalid(error);
    auto found = byName.find(kernel);
    if (found == byName.end())
      return invalid("a step of " + where + " launches kernel " + quoted(kernel) +
                     ", which the manifest does not list");
    Step step = found->second.first;
    std::string at = "step " + quoted(kernel) + " of " + where;
    if (!slotsOf(launch, "args", at, step.args))
      return invalid(error);
    if (step.args.size() != found->second.second)
      return invalid(at + " passes " + std::to_string(step.args.size()) + " values; the kernel takes " +
                     std::to_string(found->second.second));
    plan.steps.push_back(std::move(step));
  }
  if (!slotsOf(*chosen, "outputs", where, plan.outputs))
    return invalid(error);
  return KILN_OK;
}

} // namespace

kiln_status kiln::runtime::readPlan(const char *function, PlanDescription &plan) {
  if (kiln_status status = ManifestReader(plan).read(function); status != KILN_OK)
    return status;
  // An output that is (a view of) an argument or a constant gets a copy of its own, so that a result never
  // aliases what the caller passed or the program keeps; an argument a kernel updates in place is returned
  // itself, updated, as torch's in-place ops return theirs.
  // An output that is part of its storage (a slice) is copied as well: a caller gets outputs as whole buffers
  // or inputs (kiln_plan_output_source).
  auto root = [&](int slot, bool &partial) {
    while (plan.slots[slot].kind == SlotKind::View) {
      partial = partial || plan.slots[slot].partial;
      slot = plan.slots[slot].of;
    }
    return slot;
  };
  std::map<int, int> copyOf;
  for (int &output : plan.outputs) {
    bool partial = false;
    const Slot &source = plan.slots[root(output, partial)];
    if (!partial && source.kind != SlotKind::Constant && !(source.kind == SlotKind::Input && !source.updatedInPlace))
      continue;
    auto [it, added] = copyOf.emplace(output, static_cast<int>(plan.slots.size()));
    if (added) {
      Slot copy = plan.slots[output];
      copy.kind = SlotKind::Copy, copy.of = output, copy.input = -1, copy.updatedInPlace = false, copy.file.clear();
      copy.offset = 0, copy.partial = false;
      plan.slots.push_back(std::move(copy));
    }
    output = it->second;
  }
  for (size_t i = 0; i < plan.slots.size(); ++i)
    if (plan.slots[i].kind == SlotKind::Buffer || plan.slots[i].kind == SlotKind::Copy) {
      plan.slots[i].buffer = static_cast<int>(plan.buffers.size());
      plan.buffers.push_back(static_cast<int>(i));
    }
  return KILN_OK;
}
