//===- PlanRead.h - A compiled folder's manifest, read and checked -*- C++ -*-===//
//
// The one reader of manifest.json: kilnc and kiln.compile write it (lib/Driver/GpuCompiler.cpp), and everything
// that runs a compiled program (kiln-plan-run, the C API, the Python package through it) reads it here. Reading
// checks every field that loading and running use, with its type, that every file it names is a plain file of
// the folder and every value id is defined, so that a damaged, hand-edited or foreign manifest is an error
// naming the file and the field, never a crash or a wrong launch. It touches no GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PLANREAD_H
#define KILN_RUNTIME_PLANREAD_H

#include "kiln/runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

/// What a plan value is: an argument, scratch memory of the run, a constant from a file, another value's bytes
/// under another shape, or the copy that keeps an output from aliasing an argument or a constant.
enum class SlotKind { Input, Buffer, Constant, View, Copy };

/// One tensor of the plan: where its bytes are, and what they hold.
struct Slot {
  SlotKind kind = SlotKind::Buffer;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  int input = -1;               ///< an input's argument position
  bool updatedInPlace = false;  ///< an input a kernel writes (kiln.append_kv's caches)
  std::string file;             ///< a constant's data, in the folder
  int of = -1;                  ///< the slot a view aliases, or a copy copies
  int64_t offset = 0;           ///< where a view starts in the bytes of `of`
  bool partial = false;         ///< a view of a run of the bytes of `of` (a slice), not all of them
  int buffer = -1;              ///< a buffer's or copy's position among the run's scratch buffers
};

/// One kernel launch as the manifest describes it.
struct Step {
  std::string name, function;
  std::string cubin, ptx;       ///< the kernel's files in the folder ("" when the manifest names none)
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared = 0;
  std::vector<int> args;        ///< slots
  std::vector<uint64_t> sizes;  ///< a size-generic kernel's sizes, passed after its buffers
  std::vector<kiln_tensor_map_spec> maps;
  bool dependentLaunch = false; ///< launched to overlap its predecessor
};

/// A plan read from a folder: its slots (inputs first by position is not promised; `inputs` maps positions),
/// steps, outputs and scratch buffers.
struct PlanDescription {
  std::string folder, manifest, target, function;
  std::vector<Slot> slots;
  std::vector<int> inputs, outputs, buffers; ///< slots, by argument, result and scratch position
  std::vector<Step> steps;
};

/// Bytes of one element of a dtype name ("f32", "bf16", ...); 0 for a name that is none.
int64_t elementBytes(const std::string &dtype);

/// Reads the plan of `function` (null: the manifest's only one) from `plan.folder`'s manifest.json into `plan`:
/// KILN_ERROR_NOT_FOUND without a readable manifest or with no such function, KILN_ERROR_INVALID_ARGUMENT with
/// the file and the field for a manifest this runtime cannot run.
kiln_status readPlan(const char *function, PlanDescription &plan);

/// Whether a GPU of compute capability major.minor runs `target`'s kernels: its cubins (`cubinFits`) or, for
/// sm_80, their PTX on a newer 8.x or later chip; else KILN_ERROR_INVALID_ARGUMENT saying why.
kiln_status checkChip(const std::string &target, int major, int minor, bool &cubinFits);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_PLANREAD_H
