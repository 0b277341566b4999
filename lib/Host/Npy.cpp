//===- Npy.cpp - Reading and writing .npy files ----------------------------===//
//
// A small, strict .npy codec: it accepts what numpy.save writes for the dialect's element types and rejects
// anything else (big-endian, Fortran order, object arrays, truncated data) with a message naming the file.
//
//===----------------------------------------------------------------------===//

#include "Host/Npy.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir;
using namespace mlir::kiln;

static llvm::Error npyError(StringRef path, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), (path + ": " + message).str());
}

/// The value of `'key': value` in the header dictionary, up to the next top-level comma or brace.
static std::optional<std::string> headerField(StringRef header, StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == StringRef::npos)
    return std::nullopt;
  size_t colon = header.find(':', at);
  if (colon == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(colon + 1).ltrim();
  if (rest.starts_with("(")) {
    size_t close = rest.find(')');
    return close == StringRef::npos ? std::nullopt : std::optional<std::string>(rest.take_front(close + 1).str());
  }
  size_t end = rest.find_first_of(",}");
  return rest.take_front(end).trim().str();
}

/// Maps a numpy type string to an element kind.
static std::optional<ElementKind> kindOfDescr(StringRef descr, std::optional<ElementKind> expected) {
  descr = descr.trim("'\" ");
  if (descr == "<f4")
    return ElementKind::F32;
  if (descr == "<f2")
    return ElementKind::F16;
  if (descr == "<u2" || descr == "<V2" || descr == "|V2")
    return expected == ElementKind::BF16 || !expected ? std::optional(ElementKind::BF16) : std::nullopt;
  if (descr == "<i8")
    return ElementKind::I64;
  if (descr == "<i4")
    return ElementKind::I32;
  if (descr == "|b1")
    return ElementKind::I1;
  return std::nullopt;
}

llvm::Expected<HostTensor> kiln::readNpy(StringRef path, std::optional<ElementKind> expected) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!file)
    return npyError(path, "cannot open: " + file.getError().message());
  StringRef data = (*file)->getBuffer();
  if (data.size() < 10 || !data.starts_with("\x93NUMPY"))
    return npyError(path, "not a .npy file (missing the \\x93NUMPY magic)");
  uint8_t major = data[6];
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = static_cast<uint8_t>(data[8]) | static_cast<uint8_t>(data[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12)
      return npyError(path, "truncated header");
    uint32_t length;
    std::memcpy(&length, data.data() + 8, 4);
    headerLength = length;
    headerStart = 12;
  } else {
    return npyError(path, "unsupported .npy version " + llvm::Twine(major));
  }
  if (data.size() < headerStart + headerLength)
    return npyError(path, "truncated header");
  StringRef header = data.substr(headerStart, headerLength);

  std::optional<std::string> descr = headerField(header, "descr");
  std::optional<std::string> fortran = headerField(header, "fortran_order");
  std::optional<std::string> shapeText = headerField(header, "shape");
  if (!descr || !fortran || !shapeText)
    return npyError(path, "malformed header '" + header.trim() + "'");
  if (*fortran != "False")
    return npyError(path, "Fortran-ordered arrays are not supported; save a C-contiguous array");
  std::optional<ElementKind> kind = kindOfDescr(*descr, expected);
  if (!kind)
    return npyError(path, "unsupported dtype " + *descr + " (expected <f4, <f2, <u2 for bf16, <i8, <i4 or |b1)");

  HostTensor tensor;
  tensor.kind = *kind;
  StringRef dims = StringRef(*shapeText).trim("() ");
  while (!dims.empty()) {
    auto [item, rest] = dims.split(',');
    item = item.trim();
    if (!item.empty()) {
      int64_t size;
      if (item.getAsInteger(10, size) || size < 0)
        return npyError(path, "malformed shape " + *shapeText);
      tensor.shape.push_back(size);
    }
    dims = rest;
  }
  // A header may claim any shape; an unchecked byte count could wrap to the size of the data that is there.
  std::optional<int64_t> payload = checkedByteSize(*kind, tensor.shape);
  if (!payload)
    return npyError(path, "shape " + *shapeText + " of " + elementName(*kind) +
                              " has more bytes than int64 can count");
  size_t offset = headerStart + headerLength;
  if (data.size() - offset != static_cast<uint64_t>(*payload))
    return npyError(path, "holds " + llvm::Twine(data.size() - offset) + " data bytes but shape " + *shapeText +
                              " of " + elementName(*kind) + " needs " + llvm::Twine(*payload));
  llvm::Expected<HostTensor> loaded = HostTensor::zeros(tensor.kind, tensor.shape);
  if (!loaded)
    return npyError(path, llvm::toString(loaded.takeError()));
  if (loaded->bytes.size())
    std::memcpy(loaded->bytes.data(), data.data() + offset, loaded->bytes.size());
  return loaded;
}

llvm::Error kiln::writeNpy(StringRef path, const HostTensor &tensor) {
  static const char *const descrs[] = {"<f4", "<f2", "<u2", "<i8", "<i4", "|b1"};
  std::string shape = "(";
  for (int64_t size : tensor.shape)
    shape += std::to_string(size) + ", ";
  if (tensor.shape.size() > 1)
    shape.erase(shape.size() - 2);
  else if (tensor.shape.size() == 1)
    shape.erase(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + std::string(descrs[static_cast<int>(tensor.kind)]) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that the data starts on a 64-byte boundary, as numpy does.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::error_code error;
  llvm::raw_fd_ostream out(path, error, llvm::sys::fs::OF_None);
  if (error)
    return npyError(path, "cannot write: " + error.message());
  out << "\x93NUMPY" << char(1) << char(0) << char(header.size() & 0xff) << char(header.size() >> 8) << header;
  out.write(reinterpret_cast<const char *>(tensor.bytes.data()), tensor.bytes.size());
  out.close();
  // Taken off the stream: one destroyed with its error set ends the process ("IO failure on output stream").
  if (std::error_code failed = out.error()) {
    out.clear_error();
    return npyError(path, "write failed: " + failed.message());
  }
  return llvm::Error::success();
}
