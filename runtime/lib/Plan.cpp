//===- Plan.cpp - Run plans executed by the runtime ------------------------===//
//
// A compiled module's public function is a plan (written by kilnc into manifest.json, read by PlanRead.cpp):
// inputs, scratch buffers, views (the same bytes under another shape), constants in files, and kernel launches
// in order. This is the one place a plan executes: kiln-plan-run, C and C++ callers and the Python package all
// run it here. Loading puts the kernels and constants on a GPU once; a run binds the inputs' and the scratch
// buffers' addresses and issues the launches (and the copies that keep outputs from aliasing arguments or
// constants) on a stream, with nothing allocated, so that a run can be captured into a CUDA graph. The scratch
// buffers are the plan's own (kiln_plan_run) or the caller's, from a framework's allocator
// (kiln_plan_run_with_buffers).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include "Errors.h"
#include "PlanRead.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace kiln::runtime;

struct kiln_plan {
  PlanDescription description;
  kiln_device *device = nullptr; ///< null for a plan read without a GPU
  std::map<std::string, kiln_module *> modules; ///< by file: one per kernel file
  std::vector<kiln_kernel *> kernels;            ///< by step
  std::vector<uint64_t> constants;               ///< device copies, by slot (0 for other slots)
  std::vector<uint64_t> ownedBuffers;            ///< kiln_plan_run's scratch, allocated at its first call

  /// Frees what the plan holds, also when loading stopped half way.
  ~kiln_plan() {
    for (kiln_kernel *kernel : kernels)
      kiln_kernel_free(kernel);
    for (uint64_t pointer : constants)
      if (pointer)
        kiln_free(device, pointer);
    for (uint64_t pointer : ownedBuffers)
      kiln_free(device, pointer);
    for (auto &[file, module] : modules)
      kiln_module_unload(module);
  }
};

namespace {
kiln_status invalid(const kiln_plan &plan, const std::string &what) {
  return fail(KILN_ERROR_INVALID_ARGUMENT, plan.description.manifest + ": " + what);
}

/// Reads a whole file.
bool readFile(const std::string &path, std::string &contents) {
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return false;
  char chunk[1 << 16];
  for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, file)) > 0;)
    contents.append(chunk, got);
  bool ok = !std::ferror(file);
  std::fclose(file);
  return ok;
}

/// Puts a read plan on `device`: each kernel's module (its cubin when it was built for this GPU, else its PTX
/// for the driver to compile) and the constants.
kiln_status loadPlan(kiln_device *device, kiln_plan &plan) {
  const PlanDescription &d = plan.description;
  int major = 0, minor = 0, multiprocessors = 0;
  if (kiln_status status = kiln_device_info(device, &major, &minor, &multiprocessors); status != KILN_OK)
    return status;
  plan.device = device;
  bool cubinFits = false;
  if (kiln_status status = checkChip(d.target, major, minor, cubinFits); status != KILN_OK)
    return status;
  plan.constants.assign(d.slots.size(), 0);
  for (size_t i = 0; i < d.slots.size(); ++i) {
    const Slot &slot = d.slots[i];
    if (slot.kind != SlotKind::Constant)
      continue;
    std::string data;
    if (!readFile(d.folder + "/" + slot.file, data) || static_cast<int64_t>(data.size()) != slot.bytes)
      return invalid(plan, "constant file " + slot.file + " is missing or has the wrong size (expected " +
                               std::to_string(slot.bytes) + " bytes)");
    if (kiln_status status = kiln_malloc(device, std::max<size_t>(data.size(), 1), &plan.constants[i]);
        status != KILN_OK)
      return status;
    if (kiln_status status = kiln_copy_to_device(device, plan.constants[i], data.data(), data.size());
        status != KILN_OK)
      return status;
  }
  std::string chip = " (compiled for " + d.target + "; the GPU has compute capability " + std::to_string(major) +
                     "." + std::to_string(minor) + ")";
  for (const Step &step : d.steps) {
    std::string file = cubinFits && !step.cubin.empty() ? step.cubin : step.ptx;
    kiln_module *&module = plan.modules[file];
    if (!module)
      if (kiln_status status = kiln_module_load_file(device, (d.folder + "/" + file).c_str(), &module);
          status != KILN_OK) {
        plan.modules.erase(file);
        return fail(status, kiln_last_error() + chip); // the runtime's message names the file
      }
    kiln_kernel *kernel = nullptr;
    if (kiln_status status = kiln_module_get_kernel(module, step.function.c_str(), &kernel); status != KILN_OK)
      return status;
    plan.kernels.push_back(kernel);
    if (kiln_status status = kiln_kernel_set_tensor_maps(kernel, static_cast<int>(step.args.size() +
                                                                                  step.sizes.size()),
                                                         static_cast<int>(step.maps.size()), step.maps.data());
        status != KILN_OK)
      return status;
    if (kiln_status status = kiln_kernel_set_dependent_launch(kernel, step.dependentLaunch); status != KILN_OK)
      return status;
  }
  return KILN_OK;
}

/// Runs a loaded plan over `inputs` and `buffers` (device addresses by argument and scratch position); reads
/// nothing of the plan that a run changes, so threads may run one plan at once.
kiln_status runPlan(const kiln_plan &plan, const uint64_t *inputs, const uint64_t *buffers, void *stream) {
  const PlanDescription &d = plan.description;
  thread_local std::vector<uint64_t> pointers, cells;
  thread_local std::vector<void *> cellPointers;
  pointers.assign(d.slots.size(), 0);
  for (size_t i = 0; i < d.slots.size(); ++i) {
    const Slot &slot = d.slots[i];
    switch (slot.kind) {
    case SlotKind::Input:
      pointers[i] = inputs[slot.input];
      break;
    case SlotKind::Buffer:
    case SlotKind::Copy:
      pointers[i] = buffers[slot.buffer];
      break;
    case SlotKind::Constant:
      pointers[i] = plan.constants[i];
      break;
    case SlotKind::View: // a view comes after what it views
      pointers[i] = pointers[slot.of] + static_cast<uint64_t>(slot.offset);
      break;
    }
  }
  for (size_t s = 0; s < d.steps.size(); ++s) {
    const Step &step = d.steps[s];
    cells.resize(step.args.size() + step.sizes.size());
    cellPointers.resize(cells.size());
    for (size_t a = 0; a < step.args.size(); ++a)
      cells[a] = pointers[step.args[a]];
    std::copy(step.sizes.begin(), step.sizes.end(), cells.begin() + step.args.size());
    for (size_t c = 0; c < cells.size(); ++c)
      cellPointers[c] = &cells[c];
    if (kiln_status status =
            kiln_kernel_launch(plan.kernels[s], step.grid, step.block, step.shared, stream, cellPointers.data());
        status != KILN_OK)
      return status;
  }
  for (size_t i = 0; i < d.slots.size(); ++i)
    if (d.slots[i].kind == SlotKind::Copy && d.slots[i].bytes > 0)
      if (kiln_status status = kiln_copy_on_device(plan.device, pointers[i], pointers[d.slots[i].of],
                                                   static_cast<size_t>(d.slots[i].bytes), stream);
          status != KILN_OK)
        return status;
  return KILN_OK;
}

/// The plan of `function` in `folder`, read.
kiln_status readFolder(const char *folder, const char *function, std::unique_ptr<kiln_plan> &plan) {
  plan = std::make_unique<kiln_plan>();
  plan->description.folder = folder;
  plan->description.manifest = plan->description.folder + "/manifest.json";
  return readPlan(function, plan->description);
}
} // namespace

extern "C" {

kiln_status kiln_plan_read(const char *folder, const char *function, kiln_plan **result) {
  if (!folder || !result)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_read: null folder or result");
  *result = nullptr;
  std::unique_ptr<kiln_plan> plan;
  if (kiln_status status = readFolder(folder, function, plan); status != KILN_OK)
    return status;
  *result = plan.release();
  return KILN_OK;
}

kiln_status kiln_plan_load(kiln_device *device, const char *folder, const char *function, kiln_plan **result) {
  if (!device || !folder || !result)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_load: null device, folder or result");
  *result = nullptr;
  std::unique_ptr<kiln_plan> plan;
  if (kiln_status status = readFolder(folder, function, plan); status != KILN_OK)
    return status;
  if (kiln_status status = loadPlan(device, *plan); status != KILN_OK)
    return status;
  *result = plan.release();
  return KILN_OK;
}

void kiln_plan_free(kiln_plan *plan) { delete plan; }

const char *kiln_plan_target(const kiln_plan *plan) { return plan ? plan->description.target.c_str() : ""; }
const char *kiln_plan_function(const kiln_plan *plan) { return plan ? plan->description.function.c_str() : ""; }

kiln_status kiln_plan_check_chip(const kiln_plan *plan, int major, int minor) {
  if (!plan)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_check_chip: null plan");
  bool cubinFits = false;
  return checkChip(plan->description.target, major, minor, cubinFits);
}

int kiln_plan_num_inputs(const kiln_plan *plan) {
  return plan ? static_cast<int>(plan->description.inputs.size()) : 0;
}
int kiln_plan_num_outputs(const kiln_plan *plan) {
  return plan ? static_cast<int>(plan->description.outputs.size()) : 0;
}
int kiln_plan_num_buffers(const kiln_plan *plan) {
  return plan ? static_cast<int>(plan->description.buffers.size()) : 0;
}

kiln_status kiln_plan_tensor_info(const kiln_plan *plan, int is_output, int index, const char **dtype, int *rank,
                                  int64_t shape[8]) {
  if (!plan || !dtype || !rank || !shape)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_tensor_info: null argument");
  const PlanDescription &d = plan->description;
  const std::vector<int> &list = is_output ? d.outputs : d.inputs;
  if (index < 0 || static_cast<size_t>(index) >= list.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_tensor_info: no " +
                                                 std::string(is_output ? "output" : "input") + " " +
                                                 std::to_string(index));
  const Slot &slot = d.slots[list[index]];
  if (slot.shape.size() > 8)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_tensor_info: rank above 8");
  *dtype = slot.dtype.c_str();
  *rank = static_cast<int>(slot.shape.size());
  std::copy(slot.shape.begin(), slot.shape.end(), shape);
  return KILN_OK;
}

int kiln_plan_input_updated_in_place(const kiln_plan *plan, int index) {
  if (!plan || index < 0 || static_cast<size_t>(index) >= plan->description.inputs.size())
    return 0;
  return plan->description.slots[plan->description.inputs[index]].updatedInPlace;
}

kiln_status kiln_plan_buffer_bytes(const kiln_plan *plan, int index, uint64_t *bytes) {
  if (!plan || !bytes || index < 0 || static_cast<size_t>(index) >= plan->description.buffers.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_buffer_bytes: null argument or no buffer " +
                                                 std::to_string(index));
  *bytes = static_cast<uint64_t>(plan->description.slots[plan->description.buffers[index]].bytes);
  return KILN_OK;
}

kiln_status kiln_plan_output_source(const kiln_plan *plan, int index, int *is_input, int *source) {
  if (!plan || !is_input || !source || index < 0 ||
      static_cast<size_t>(index) >= plan->description.outputs.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_output_source: null argument or no output " +
                                                 std::to_string(index));
  const std::vector<Slot> &slots = plan->description.slots;
  int slot = plan->description.outputs[index];
  while (slots[slot].kind == SlotKind::View)
    slot = slots[slot].of;
  *is_input = slots[slot].kind == SlotKind::Input;
  *source = *is_input ? slots[slot].input : slots[slot].buffer;
  return KILN_OK;
}

kiln_status kiln_plan_run_with_buffers(kiln_plan *plan, const uint64_t *inputs, const uint64_t *buffers,
                                       void *stream) {
  if (!plan || (!inputs && !plan->description.inputs.empty()) || (!buffers && !plan->description.buffers.empty()))
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_run_with_buffers: null plan, inputs or buffers");
  if (!plan->device)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_run: " + plan->description.folder + " was read without a "
                                             "GPU (kiln_plan_read); load it with kiln_plan_load to run it");
  return runPlan(*plan, inputs, buffers, stream);
}

kiln_status kiln_plan_run(kiln_plan *plan, const uint64_t *inputs, uint64_t *outputs, void *stream) {
  if (!plan || (!inputs && !plan->description.inputs.empty()) || (!outputs && !plan->description.outputs.empty()))
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_plan_run: null plan, inputs or outputs");
  const PlanDescription &d = plan->description;
  if (plan->device && plan->ownedBuffers.size() != d.buffers.size())
    for (size_t b = plan->ownedBuffers.size(); b < d.buffers.size(); ++b) {
      uint64_t pointer = 0;
      size_t bytes = static_cast<size_t>(std::max<int64_t>(d.slots[d.buffers[b]].bytes, 1));
      if (kiln_status status = kiln_malloc(plan->device, bytes, &pointer); status != KILN_OK)
        return status;
      plan->ownedBuffers.push_back(pointer);
    }
  if (kiln_status status = kiln_plan_run_with_buffers(plan, inputs, plan->ownedBuffers.data(), stream);
      status != KILN_OK)
    return status;
  for (size_t o = 0; o < d.outputs.size(); ++o) {
    int isInput = 0, source = 0;
    kiln_plan_output_source(plan, static_cast<int>(o), &isInput, &source);
    outputs[o] = isInput ? inputs[source] : plan->ownedBuffers[source];
  }
  return KILN_OK;
}

} // extern "C"
