//===- FuzzDriver.cpp - A coverage-blind mutation driver for Kiln's fuzz targets -===//
//
// libFuzzer needs clang and a coverage build (scripts/fuzz.sh); `make test` has neither, yet should still throw
// a bounded number of mutated inputs at each fuzz target. This file is the `main` that a fuzz target links
// instead of libFuzzer's in a normal build: it reads seed files (split at `// -----` with -split-input-file, as
// lit inputs are), runs the target (LLVMFuzzerTestOneInput) on each, then on N inputs made from them by random
// byte changes, insertions of dictionary tokens (libFuzzer's -dict format: one "token" per line), deletions,
// repeats, splices and extreme numbers. A crash or a sanitizer report ends the process, as under libFuzzer; the
// seed it prints replays the run.
//
//   TARGET [-runs=N] [-seed=S] [-dict=FILE] [-split-input-file] [-save=FILE] FILE...
//
// -save=FILE writes each input to FILE before running it: after a crash, FILE holds the input that caused it.
//
//===----------------------------------------------------------------------===//

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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

/// A small xorshift generator: a run is reproducible from its seed alone.
struct Random {
  uint64_t state;
  uint64_t next() {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  }
  size_t below(size_t bound) { return bound ? next() % bound : 0; }
};

/// The tokens of a libFuzzer dictionary: the quoted part of each line, with \" and \\ unescaped.
std::vector<std::string> readDictionary(const std::string &path) {
  std::vector<std::string> tokens;
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    size_t open = line.find('"'), close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open)
      continue;
    std::string token;
    for (size_t i = open + 1; i < close; ++i)
      token += (line[i] == '\\' && i + 1 < close) ? line[++i] : line[i];
    tokens.push_back(token);
  }
  return tokens;
}

/// One to four random edits of `text`, sometimes spliced with `other`.
std::string mutate(std::string text, const std::string &other, const std::vector<std::string> &tokens,
                   Random &random) {
  static const char *const numbers[] = {"0", "-1", "1e309", "4294967296", "9223372036854775807",
                                        "18446744073709551616", "2147483648", "1.5", "-0", "65536", "nan"};
  for (int edits = 1 + static_cast<int>(random.below(4)); edits > 0; --edits) {
    size_t at = random.below(text.size() + 1);
    switch (random.below(6)) {
    case 0: // a byte changed
      if (!text.empty())
        text[random.below(text.size())] = static_cast<char>(random.below(256));
      break;
    case 1: // a dictionary token (or a punctuation byte) inserted
      if (!tokens.empty())
        text.insert(at, tokens[random.below(tokens.size())]);
      else
        text.insert(at, 1, "{}[]()<>:,=\"-0123456789x%"[random.below(25)]);
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

/// The parts of `text` between `// -----` lines (the whole text without them).
std::vector<std::string> splitInput(const std::string &text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t found; (found = text.find("// -----", start)) != std::string::npos; start = found + 8)
    parts.push_back(text.substr(start, found - start));
  parts.push_back(text.substr(start));
  return parts;
}

void run(const std::string &input, const std::string &save) {
  if (!save.empty())
    std::ofstream(save, std::ios::binary | std::ios::trunc) << input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(input.data()), input.size());
}

} // namespace

int main(int argc, char **argv) {
  std::string name = argv[0];
  name = name.substr(name.find_last_of('/') + 1);
  long runs = 0;
  uint64_t seed = 0;
  bool split = false;
  std::string save;
  std::vector<std::string> tokens, inputs;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument.rfind("-runs=", 0) == 0) {
      runs = std::strtol(argument.c_str() + 6, nullptr, 10);
    } else if (argument.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(argument.c_str() + 6, nullptr, 10);
    } else if (argument.rfind("-dict=", 0) == 0) {
      tokens = readDictionary(argument.substr(6));
      if (tokens.empty()) {
        std::fprintf(stderr, "%s: no tokens in the dictionary %s\n", name.c_str(), argument.c_str() + 6);
        return 2;
      }
    } else if (argument == "-split-input-file") {
      split = true;
    } else if (argument.rfind("-save=", 0) == 0) {
      save = argument.substr(6);
    } else {
      std::ifstream file(argument, std::ios::binary);
      if (!file) {
        std::fprintf(stderr, "%s: cannot read %s\n", name.c_str(), argument.c_str());
        return 2;
      }
      std::ostringstream contents;
      contents << file.rdbuf();
      for (const std::string &part : split ? splitInput(contents.str()) : std::vector<std::string>{contents.str()})
        inputs.push_back(part);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s [-runs=N] [-seed=S] [-dict=FILE] [-split-input-file] [-save=FILE] FILE...\n",
                 name.c_str());
    return 2;
  }
  if (seed == 0)
    seed = static_cast<uint64_t>(std::time(nullptr)) * 2654435761u ^ static_cast<uint64_t>(getpid());
  std::printf("%s: seed %llu\n", name.c_str(), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  for (const std::string &input : inputs)
    run(input, save);
  Random random{seed};
  for (long i = 0; i < runs; ++i)
    run(mutate(inputs[random.below(inputs.size())], inputs[random.below(inputs.size())], tokens, random), save);
  std::printf("%s: %zu seed inputs and %ld mutations run, no crash\n", name.c_str(), inputs.size(), runs);
  return 0;
}
