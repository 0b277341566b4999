//===- kiln-plan-fuzz.cpp - Fuzzing the runtime's manifest and plan reader -===//
//
// The runtime reads manifest.json from folders that users copy between machines, edit by hand or truncate:
// kiln_plan_read must reject a bad one with a status and a message, never crash, hang or read out of bounds. Each
// input becomes the manifest of a scratch folder that holds the files the seed manifests (fuzz/plans) name:
// k.cubin, k.ptx and c.bin (64 bytes, a [16] x f32 constant), so that mutations get past the file checks into
// the values, steps, launch dimensions, sizes and tensor maps. A plan that reads is queried as kiln-plan-run
// and the Python package query it (its inputs and outputs, each one's dtype and shape, its scratch buffers and
// where each output lives).
//
// Built with KILN_FUZZ this is a libFuzzer target (scripts/fuzz.sh); otherwise it links tools/fuzz-driver, a
// coverage-blind mutation driver that `make test` runs (test/Tools/kiln-plan-fuzz.test).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

/// The scratch folder with the files the seeds name, made on first use and removed at exit.
const std::string &scratchFolder() {
  static const std::string folder = [] {
    char name[] = "/tmp/kiln-plan-fuzz-XXXXXX";
    if (!mkdtemp(name)) {
      std::perror("kiln-plan-fuzz: mkdtemp");
      std::exit(2);
    }
    std::string made = name;
    std::ofstream(made + "/k.cubin") << "not a cubin";
    std::ofstream(made + "/k.ptx") << "// not PTX";
    std::ofstream(made + "/c.bin") << std::string(64, '\0');
    static std::string removed = made;
    std::atexit([] {
      for (const char *file : {"/k.cubin", "/k.ptx", "/c.bin", "/manifest.json"})
        std::remove((removed + file).c_str());
      rmdir(removed.c_str());
    });
    return made;
  }();
  return folder;
}

/// Reads `text` as a folder's manifest and queries what it describes; any status is a fine outcome.
void readManifest(const std::string &text) {
  const std::string &folder = scratchFolder();
  {
    std::ofstream manifest(folder + "/manifest.json", std::ios::binary | std::ios::trunc);
    manifest << text;
  }
  for (const char *function : {static_cast<const char *>(nullptr), "main"}) {
    kiln_plan *plan = nullptr;
    if (kiln_plan_read(folder.c_str(), function, &plan) != KILN_OK) {
      (void)kiln_last_error();
      continue;
    }
    for (int isOutput = 0; isOutput < 2; ++isOutput) {
      int count = isOutput ? kiln_plan_num_outputs(plan) : kiln_plan_num_inputs(plan);
      for (int index = -1; index <= count; ++index) {
        const char *dtype = nullptr;
        int rank = 0;
        int64_t shape[8];
        if (kiln_plan_tensor_info(plan, isOutput, index, &dtype, &rank, shape) == KILN_OK && (!dtype || rank > 8))
          std::abort();
      }
    }
    // Where each output lives must be an input or a scratch buffer the plan has.
    int buffers = kiln_plan_num_buffers(plan);
    for (int index = -1; index <= buffers; ++index) {
      uint64_t bytes = 0;
      (void)kiln_plan_buffer_bytes(plan, index, &bytes);
    }
    for (int index = -1; index <= kiln_plan_num_outputs(plan); ++index) {
      int isInput = 0, source = -1;
      if (kiln_plan_output_source(plan, index, &isInput, &source) == KILN_OK &&
          (source < 0 || source >= (isInput ? kiln_plan_num_inputs(plan) : buffers) ||
           (isInput && !kiln_plan_input_updated_in_place(plan, source))))
        std::abort();
    }
    (void)kiln_plan_check_chip(plan, 9, 0);
    kiln_plan_free(plan);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  readManifest(std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}
