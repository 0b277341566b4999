//===- StridedCopy.cpp - The copy between strided buffers the host JIT calls ===//
//
// An odometer over the leading dimensions with one contiguous memcpy per innermost row where both sides are
// dense along it, element by element otherwise. Zero-size shapes copy nothing.
//
//===----------------------------------------------------------------------===//

#include "Host/StridedCopy.h"

#include <cstring>
#include <vector>

namespace {

/// A ranked memref descriptor read from an unranked one: {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct StridedView {
  char *base = nullptr;
  const int64_t *sizes = nullptr;
  const int64_t *strides = nullptr;
};

/// The view of `memref` for elements of `elementBytes` bytes.
StridedView viewOf(::UnrankedMemRefType<char> *memref, int64_t elementBytes) {
  auto *words = static_cast<int64_t *>(memref->descriptor);
  char *aligned = reinterpret_cast<char *>(words[1]);
  StridedView view;
  view.base = aligned + words[2] * elementBytes;
  view.sizes = words + 3;
  view.strides = words + 3 + memref->rank;
  return view;
}

} // namespace

void mlir::kiln::copyStrided(int64_t elementBytes, ::UnrankedMemRefType<char> *source,
                             ::UnrankedMemRefType<char> *destination) {
  int64_t rank = source->rank;
  StridedView from = viewOf(source, elementBytes);
  StridedView to = viewOf(destination, elementBytes);
  if (rank == 0) {
    std::memcpy(to.base, from.base, elementBytes);
    return;
  }
  for (int64_t dim = 0; dim < rank; ++dim)
    if (from.sizes[dim] == 0)
      return;
  int64_t inner = rank - 1;
  int64_t rowLength = from.sizes[inner];
  bool denseRows = from.strides[inner] == 1 && to.strides[inner] == 1;
  std::vector<int64_t> index(rank, 0);
  while (true) {
    int64_t fromOffset = 0, toOffset = 0;
    for (int64_t dim = 0; dim < inner; ++dim) {
      fromOffset += index[dim] * from.strides[dim];
      toOffset += index[dim] * to.strides[dim];
    }
    char *fromRow = from.base + fromOffset * elementBytes;
    char *toRow = to.base + toOffset * elementBytes;
    if (denseRows) {
      std::memcpy(toRow, fromRow, rowLength * elementBytes);
    } else {
      for (int64_t i = 0; i < rowLength; ++i)
        std::memcpy(toRow + i * to.strides[inner] * elementBytes, fromRow + i * from.strides[inner] * elementBytes,
                    elementBytes);
    }
    int64_t dim = inner - 1;
    while (dim >= 0 && ++index[dim] == from.sizes[dim])
      index[dim--] = 0;
    if (dim < 0)
      return;
  }
}
