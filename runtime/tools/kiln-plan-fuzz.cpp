//===- kiln-plan-fuzz.cpp - Fuzzing the runtime's manifest and plan reader -===//
//
// The runtime reads manifest.json from folders that users copy between machines, edit by hand or truncate:
// kiln_plan_read must reject a bad one with a status and a message, never crash, hang or read out of bounds. Each
// input becomes the manifest of a scratch folder that holds the files the seed manifests (fuzz/plans) name:
// k.cubin, k.ptx and c.bin (64 bytes, a [16] x f32 constant), so that mutations get past the file checks into
// the values, steps, launch dimensions, sizes and tensor maps. A plan that reads is queried as kiln-plan-run
// queries it (its inputs and outputs, each one's dtype and shape).
//
// Built with KILN_FUZZ this is a libFuzzer target (scripts/fuzz.sh). Otherwise it is its own small mutation
// fuzzer without coverage, which `make test` runs: `kiln-plan-fuzz [-runs=N] [-seed=S] FILE...` reads each file,
// then N inputs made from them by random byte changes, insertions, deletions, splices and extreme numbers; seed 0
// (the default) takes one from the clock, and the summary line prints it to replay a failure.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

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
    kiln_plan_free(plan);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  readManifest(std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}

#ifndef KILN_LIBFUZZER
namespace {

/// A small xorshift generator: the runs are reproducible from the seed alone.
struct Random {
  uint64_t state;
  uint64_t next() {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  }
  size_t below(size_t bound) { return bound ? next() % bound : 0; }
};

/// One to four random edits of `text`, sometimes spliced with `other`.
std::string mutate(std::string text, const std::string &other, Random &random) {
  static const char *const numbers[] = {"0", "-1", "1e309", "4294967296", "9223372036854775807",
                                        "18446744073709551616", "2147483648", "1.5", "-0", "65536", "nan"};
  static const char tokens[] = "{}[]\":,-0123456789e.\\ntfu";
  for (int edits = 1 + static_cast<int>(random.below(4)); edits > 0; --edits) {
    size_t at = random.below(text.size() + 1);
    switch (random.below(6)) {
    case 0: // a byte changed
      if (!text.empty())
        text[random.below(text.size())] = static_cast<char>(random.below(256));
      break;
    case 1: // a JSON token inserted
      text.insert(at, 1, tokens[random.below(sizeof(tokens) - 1)]);
      break;
    case 2: // a range deleted
      text.erase(at, random.below(32));
      break;
    case 3: { // a number replaced by an extreme one
      size_t digit = text.find_first_of("0123456789", at);
      if (digit == std::string::npos)
        break;
      size_t end = text.find_first_not_of("0123456789.e-", digit);
      text.replace(digit, (end == std::string::npos ? text.size() : end) - digit,
                   numbers[random.below(sizeof(numbers) / sizeof(*numbers))]);
      break;
    }
    case 4: // a range of this input repeated
      if (at < text.size())
        text.insert(at, text.substr(at, random.below(64)));
      break;
    default: // spliced: this input's head, the other's tail
      text = text.substr(0, at) + other.substr(std::min(other.size(), random.below(other.size() + 1)));
    }
  }
  return text;
}

} // namespace

int main(int argc, char **argv) {
  long runs = 0;
  uint64_t seed = 0;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument.rfind("-runs=", 0) == 0) {
      runs = std::strtol(argument.c_str() + 6, nullptr, 10);
    } else if (argument.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(argument.c_str() + 6, nullptr, 10);
    } else {
      std::ifstream file(argument, std::ios::binary);
      if (!file) {
        std::fprintf(stderr, "kiln-plan-fuzz: cannot read %s\n", argument.c_str());
        return 2;
      }
      std::ostringstream contents;
      contents << file.rdbuf();
      inputs.push_back(contents.str());
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: kiln-plan-fuzz [-runs=N] [-seed=S] FILE...\n");
    return 2;
  }
  long read = 0;
  for (const std::string &input : inputs) {
    readManifest(input);
    ++read;
  }
  if (seed == 0)
    seed = static_cast<uint64_t>(std::time(nullptr)) * 2654435761u ^ static_cast<uint64_t>(getpid());
  std::printf("kiln-plan-fuzz: seed %llu\n", static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  Random random{seed ? seed : 1};
  for (long run = 0; run < runs; ++run, ++read)
    readManifest(mutate(inputs[random.below(inputs.size())], inputs[random.below(inputs.size())], random));
  std::printf("kiln-plan-fuzz: %ld manifests read (%zu files, %ld mutations), no crash\n", read, inputs.size(), runs);
  return 0;
}
#endif
