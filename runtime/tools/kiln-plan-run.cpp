//===- kiln-plan-run.cpp - Run a compiled graph from .npy files, no Python ---===//
//
// kiln-plan-run FOLDER [--function NAME] [--repeat N] -o PREFIX INPUT.npy...
//
// Loads the run plan kilnc wrote into FOLDER through the runtime's C API, copies the inputs (.npy, C order,
// little endian; bf16 as uint16) to the GPU, runs the plan and writes each output to PREFIX<i>.npy. With
// --repeat N it runs N more times and prints the median wall time of a run (launches plus synchronize). Every
// mismatch between a file and the plan (dtype, shape, count) is an error naming the file, found before the GPU
// is opened: the arguments, the folder and the inputs are read first, so a mistake in them is reported as such
// on a machine without a GPU too.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace {
const char *const kDescrs[][2] = {{"f32", "<f4"}, {"f16", "<f2"}, {"bf16", "<u2"},
                                  {"i64", "<i8"}, {"i32", "<i4"}, {"i1", "|b1"}};

std::string descrOf(const std::string &dtype) {
  for (auto &pair : kDescrs)
    if (dtype == pair[0])
      return pair[1];
  return "";
}

/// Bytes per element of a .npy descr.
int64_t elementBytes(const std::string &descr) {
  return descr == "<f4" || descr == "<i4" ? 4 : descr == "<i8" ? 8 : descr == "|b1" ? 1 : 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "kiln-plan-run: error: %s\n", message.c_str());
  return 1;
}

struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::string data;
};

/// Reads a .npy file; on failure returns false with `error` set.
bool readNpy(const std::string &path, Array &array, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && bytes.empty())
    return error = path + ": cannot read it", false;
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return error = path + ": not a .npy file", false;
  size_t headerLength = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  size_t start = 10;
  if (bytes[6] >= 2) {
    if (bytes.size() < 12)
      return error = path + ": truncated header", false;
    headerLength |= (static_cast<size_t>(static_cast<unsigned char>(bytes[10])) << 16) |
                    (static_cast<size_t>(static_cast<unsigned char>(bytes[11])) << 24);
    start = 12;
  }
  if (bytes.size() < start + headerLength)
    return error = path + ": truncated header", false;
  std::string header = bytes.substr(start, headerLength);
  size_t d = header.find("'descr':"), f = header.find("'fortran_order':"), s = header.find("'shape':");
  if (d == std::string::npos || f == std::string::npos || s == std::string::npos)
    return error = path + ": header without descr, fortran_order or shape", false;
  size_t q1 = header.find('\'', d + 8), q2 = q1 == std::string::npos ? q1 : header.find('\'', q1 + 1);
  size_t order = header.find_first_not_of(' ', f + 16);
  size_t open = header.find('(', s), close = open == std::string::npos ? open : header.find(')', open);
  if (q2 == std::string::npos || order == std::string::npos || close == std::string::npos)
    return error = path + ": malformed header", false;
  array.descr = header.substr(q1 + 1, q2 - q1 - 1);
  if (header.compare(order, 4, "True") == 0)
    return error = path + ": Fortran order is not supported (save a C-contiguous array)", false;
  std::string dims = header.substr(open + 1, close - open - 1);
  for (size_t at = 0; at < dims.size();) {
    size_t comma = dims.find(',', at);
    std::string token = dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (token.find_first_not_of(' ') != std::string::npos) {
      char *end = nullptr;
      long long dim = std::strtoll(token.c_str(), &end, 10);
      if (end == token.c_str() || dim < 0)
        return error = path + ": malformed shape in the header", false;
      array.shape.push_back(dim);
    }
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  array.data = bytes.substr(start + headerLength);
  return true;
}

bool writeNpy(const std::string &path, const std::string &descr, const std::vector<int64_t> &shape,
              const std::string &data) {
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 1);
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  return out.good();
}

/// The dtype (as a .npy descr) and shape of the plan's input or output `index`; false with the runtime's error.
bool tensorInfo(const kiln_plan *plan, bool isOutput, int index, std::string &descr, std::vector<int64_t> &shape) {
  const char *dtype = nullptr;
  int rank = 0;
  int64_t dims[8];
  if (kiln_plan_tensor_info(plan, isOutput, index, &dtype, &rank, dims) != KILN_OK)
    return false;
  descr = descrOf(dtype);
  shape.assign(dims, dims + rank);
  return true;
}

int64_t elements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return count;
}

/// " (bf16)" for the descr that stands for bf16 (numpy has no bf16 and saves its bits as uint16), else "".
std::string dtypeNote(const std::string &descr) { return descr == "<u2" ? " (bf16)" : ""; }

/// Renders a shape as numpy does: `(1, 8, 77, 64)`, `(512,)`.
std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

/// Parses --repeat's value: a whole number of runs, 0 or more; false on anything else ("abc", "-5", "3x").
bool parseRepeat(const std::string &text, int &repeat) {
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' || errno == ERANGE || value < 0 ||
      value > std::numeric_limits<int>::max())
    return false;
  repeat = static_cast<int>(value);
  return true;
}

/// The inputs read from their files, each checked against the plan's input of its position.
bool readInputs(const kiln_plan *plan, const std::vector<std::string> &paths, std::vector<Array> &arrays,
                std::string &error) {
  int numInputs = kiln_plan_num_inputs(plan);
  if (static_cast<int>(paths.size()) != numInputs)
    return error = "the plan takes " + std::to_string(numInputs) + " inputs, got " + std::to_string(paths.size()) +
                   " files",
           false;
  arrays.resize(paths.size());
  for (int i = 0; i < numInputs; ++i) {
    std::string descr;
    std::vector<int64_t> expected;
    if (!tensorInfo(plan, false, i, descr, expected))
      return error = kiln_last_error(), false;
    Array &array = arrays[i];
    if (!readNpy(paths[i], array, error))
      return false;
    if (array.descr != descr || array.shape != expected)
      return error = paths[i] + ": input " + std::to_string(i) + " must be " + descr + dtypeNote(descr) +
                     " of shape " + formatShape(expected) + "; the file holds " + array.descr + " of shape " +
                     formatShape(array.shape),
             false;
    if (static_cast<int64_t>(array.data.size()) != elements(expected) * elementBytes(array.descr))
      return error = paths[i] + ": the file holds " + std::to_string(array.data.size()) +
                     " bytes of data, expected " + std::to_string(elements(expected) * elementBytes(array.descr)),
             false;
  }
  return true;
}
} // namespace

int main(int argc, char **argv) {
  std::string folder, prefix, function;
  int repeat = 0;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "-o" || arg == "--function" || arg == "--repeat") && i + 1 >= argc)
      return fail(arg + " needs a value");
    if (arg == "-o")
      prefix = argv[++i];
    else if (arg == "--function")
      function = argv[++i];
    else if (arg == "--repeat") {
      if (!parseRepeat(argv[++i], repeat))
        return fail(std::string("--repeat takes a whole number of runs (0 or more), got '") + argv[i] + "'");
    } else if (folder.empty())
      folder = arg;
    else
      inputs.push_back(arg);
  }
  if (folder.empty() || prefix.empty())
    return fail("usage: kiln-plan-run FOLDER [--function NAME] [--repeat N] -o PREFIX INPUT.npy...");

  // The folder and the inputs first: their mistakes are the user's to fix whether or not there is a GPU.
  const char *functionName = function.empty() ? nullptr : function.c_str();
  kiln_plan *plan = nullptr;
  if (kiln_plan_read(folder.c_str(), functionName, &plan) != KILN_OK)
    return fail(kiln_last_error());
  std::vector<Array> arrays;
  std::string error;
  bool readable = readInputs(plan, inputs, arrays, error);
  kiln_plan_free(plan);
  if (!readable)
    return fail(error);

  kiln_device *device = nullptr;
  if (kiln_device_open(0, &device) != KILN_OK ||
      kiln_plan_load(device, folder.c_str(), functionName, &plan) != KILN_OK)
    return fail(kiln_last_error());
  int numInputs = kiln_plan_num_inputs(plan), numOutputs = kiln_plan_num_outputs(plan);
  std::vector<uint64_t> inputPointers(numInputs), outputPointers(numOutputs);
  for (int i = 0; i < numInputs; ++i) {
    const std::string &data = arrays[i].data;
    if (kiln_malloc(device, std::max<size_t>(data.size(), 1), &inputPointers[i]) != KILN_OK ||
        kiln_copy_to_device(device, inputPointers[i], data.data(), data.size()) != KILN_OK)
      return fail(inputs[i] + ": " + kiln_last_error());
  }
  auto run = [&] {
    return kiln_plan_run(plan, inputPointers.data(), outputPointers.data(), nullptr) == KILN_OK &&
           kiln_synchronize(device) == KILN_OK;
  };
  if (!run())
    return fail(kiln_last_error());
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (!run())
      return fail(kiln_last_error());
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  for (int o = 0; o < numOutputs; ++o) {
    std::string descr;
    std::vector<int64_t> dims;
    if (!tensorInfo(plan, true, o, descr, dims))
      return fail(kiln_last_error());
    int64_t bytes = elements(dims) * elementBytes(descr);
    std::string data(static_cast<size_t>(bytes), '\0');
    std::string path = prefix + std::to_string(o) + ".npy";
    if (kiln_copy_to_host(device, data.data(), outputPointers[o], data.size()) != KILN_OK)
      return fail(kiln_last_error());
    if (!writeNpy(path, descr, dims, data))
      return fail(path + ": cannot write it");
    std::printf("kiln-plan-run: wrote %s\n", path.c_str());
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    std::printf("kiln-plan-run: median of %d runs %.3f ms\n", repeat, times[times.size() / 2]);
  }
  for (uint64_t pointer : inputPointers)
    kiln_free(device, pointer);
  kiln_plan_free(plan);
  kiln_device_close(device);
  return 0;
}
