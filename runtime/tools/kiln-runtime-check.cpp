//===- kiln-runtime-check.cpp - Is there a GPU Kiln can run on? ------------===//
//
// Reports what the runtime sees: the driver, each device's compute capability and multiprocessors. Exits 1 with
// the runtime's message when there is no driver or no GPU, which is what the CI (GPU-less) tests check.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include <cstdio>

int main() {
  int count = 0;
  if (kiln_device_count(&count) != KILN_OK) {
    std::fprintf(stderr, "kiln-runtime-check: %s\n", kiln_last_error());
    return 1;
  }
  if (count == 0) {
    std::fprintf(stderr, "kiln-runtime-check: the CUDA driver reports no GPU\n");
    return 1;
  }
  for (int i = 0; i < count; ++i) {
    kiln_device *device = nullptr;
    int major = 0, minor = 0, sms = 0;
    if (kiln_device_open(i, &device) != KILN_OK || kiln_device_info(device, &major, &minor, &sms) != KILN_OK) {
      std::fprintf(stderr, "kiln-runtime-check: device %d: %s\n", i, kiln_last_error());
      kiln_device_close(device);
      return 1;
    }
    std::printf("device %d: sm_%d%d, %d multiprocessors\n", i, major, minor, sms);
    kiln_device_close(device);
  }
  return 0;
}
