//===- KernelCache.cpp - Compiled kernels kept on disk across programs -----===//
//
// The entry of a kernel module is a folder named by its key holding kernel.ptx, kernel.cubin and, written with
// them, entry.json: the kernel's name, the assembler and its report, the name of the cache folder (that is, of
// the build) it was written for, the SHA-256 of both files, and the SHA-256 of all of that, since a wrong
// function name loads a kernel as surely as a wrong cubin. See KernelCache.h for why.
//
//===----------------------------------------------------------------------===//

#include "Driver/KernelCache.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::kiln;

static std::string sha256Hex(llvm::StringRef data) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(data)), /*LowerCase=*/true);
}

std::string kiln::kernelCacheKey(gpu::GPUModuleOp gpuModule, llvm::StringRef toolchain) {
  // The module's own name and its symbols' names, by position: in the text, every `@name` token that is one of
  // them becomes `@<position>`.
  llvm::StringMap<unsigned> positions;
  positions[gpuModule.getName()] = 0;
  for (Operation &op : gpuModule.getBody()->getOperations())
    if (isa<SymbolOpInterface>(op))
      positions.try_emplace(SymbolTable::getSymbolName(&op).getValue(), positions.size());
  std::string printed;
  llvm::raw_string_ostream os(printed);
  gpuModule->print(os, OpPrintingFlags().assumeVerified().useLocalScope());
  std::string text = (toolchain + "\n").str();
  text.reserve(printed.size() + text.size());
  auto isNameCharacter = [](char c) { return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.'; };
  for (size_t at = 0; at < printed.size();) {
    size_t end = at + 1;
    if (printed[at] == '@')
      while (end < printed.size() && isNameCharacter(printed[end]))
        ++end;
    auto found = printed[at] == '@' ? positions.find(llvm::StringRef(printed).slice(at + 1, end)) : positions.end();
    if (found != positions.end())
      text += "@" + std::to_string(found->second);
    else
      text.append(printed, at, end - at);
    at = end;
  }
  return sha256Hex(text);
}

/// The contents of `path`, or nothing.
static std::optional<std::string> readFile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().str();
}

/// Writes `contents` to `path`. A stream destroyed with its error still set ends the process ("IO failure on
/// output stream"), so the error is taken off the stream and returned, naming the file.
static llvm::Error writeFile(llvm::StringRef path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return llvm::createStringError(ec, "cannot create " + path + ": " + ec.message());
  os << contents;
  os.close();
  if (std::error_code failed = os.error()) {
    os.clear_error();
    return llvm::createStringError(failed, "cannot write " + path + ": " + failed.message());
  }
  return llvm::Error::success();
}

/// The SHA-256 of an entry's description: of its JSON text without the checksum itself (llvm::json prints an
/// object's keys in sorted order, so a description read back prints as it was written).
static std::string descriptionSha256(llvm::json::Object description) {
  description.erase("entry_sha256");
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(description));
  return sha256Hex(text);
}

/// Removes `path` (a damaged entry) in a way that never removes a good entry another process publishes there
/// meanwhile: a folder is moved aside in one step first; anything else (a file, a symlink) is unlinked.
static void removeDamaged(llvm::StringRef directory, llvm::StringRef path, bool isFolder) {
  if (!isFolder) {
    (void)llvm::sys::fs::remove(path);
    return;
  }
  SmallString<256> model(directory), aside;
  llvm::sys::path::append(model, ".damaged-%%%%%%%%%%%%");
  llvm::sys::fs::createUniquePath(model, aside, /*MakeAbsolute=*/false);
  if (!llvm::sys::fs::rename(path, aside))
    (void)llvm::sys::fs::remove_directories(aside);
}

std::optional<CachedKernel> kiln::lookupCachedKernel(llvm::StringRef directory, llvm::StringRef key) {
  SmallString<256> folder(directory);
  llvm::sys::path::append(folder, key);
  auto pathOf = [&](llvm::StringRef file) {
    SmallString<256> path(folder);
    llvm::sys::path::append(path, file);
    return std::string(path);
  };
  // Not followed: a symlink is never an entry, whatever it points at.
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(folder, status, /*Follow=*/false) || !llvm::sys::fs::exists(status))
    return std::nullopt;
  if (!llvm::sys::fs::is_directory(status)) {
    removeDamaged(directory, folder, /*isFolder=*/false);
    return std::nullopt;
  }
  // An entry appears with all its files at once: a folder without a readable, matching entry.json is damaged.
  std::optional<std::string> entryText = readFile(pathOf("entry.json"));
  CachedKernel kernel;
  bool valid = false;
  llvm::Expected<llvm::json::Value> entry =
      entryText ? llvm::json::parse(*entryText) : llvm::Expected<llvm::json::Value>(nullptr);
  if (!entry) {
    llvm::consumeError(entry.takeError());
  } else if (const llvm::json::Object *object = entry->getAsObject()) {
    auto field = [&](llvm::StringRef name) {
      std::optional<llvm::StringRef> value = object->getString(name);
      return value ? value->str() : std::string();
    };
    std::optional<std::string> ptx = readFile(pathOf("kernel.ptx")), cubin = readFile(pathOf("kernel.cubin"));
    kernel.function = field("function");
    kernel.assembler = field("assembler");
    kernel.log = field("log");
    valid = ptx && cubin && !cubin->empty() && !kernel.function.empty() &&
            field("entry_sha256") == descriptionSha256(*object) &&
            field("build") == llvm::sys::path::filename(directory) && sha256Hex(*ptx) == field("ptx_sha256") &&
            sha256Hex(*cubin) == field("cubin_sha256");
    if (valid)
      kernel.ptx = std::move(*ptx), kernel.cubin = std::move(*cubin);
  }
  if (!valid) {
    removeDamaged(directory, folder, /*isFolder=*/true);
    return std::nullopt;
  }
  return kernel;
}

llvm::Error kiln::storeCachedKernel(llvm::StringRef directory, llvm::StringRef key, const CachedKernel &kernel) {
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(ec, "cannot create " + directory + ": " + ec.message());
  SmallString<256> model(directory), staging, folder(directory);
  llvm::sys::path::append(model, ".staging-%%%%%%%%%%%%");
  llvm::sys::path::append(folder, key);
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(model, staging))
    return llvm::createStringError(ec, "cannot create a folder in " + directory + ": " + ec.message());
  auto pathOf = [&](llvm::StringRef file) {
    SmallString<256> path(staging);
    llvm::sys::path::append(path, file);
    return std::string(path);
  };
  llvm::json::Object entry{{"function", kernel.function},
                           {"assembler", kernel.assembler},
                           {"log", kernel.log},
                           {"build", llvm::sys::path::filename(directory).str()},
                           {"ptx_sha256", sha256Hex(kernel.ptx)},
                           {"cubin_sha256", sha256Hex(kernel.cubin)}};
  entry["entry_sha256"] = descriptionSha256(entry);
  std::string entryText;
  llvm::raw_string_ostream(entryText) << llvm::json::Value(std::move(entry));
  llvm::Error written = kernel.cubin.empty() ? llvm::createStringError("kernel " + kernel.function + " has no cubin")
                                             : writeFile(pathOf("kernel.ptx"), kernel.ptx);
  if (!written)
    written = writeFile(pathOf("kernel.cubin"), kernel.cubin);
  if (!written)
    written = writeFile(pathOf("entry.json"), entryText);
  // One rename publishes the whole entry; it fails too when another process published it first, which is no
  // failure: that entry stays.
  if (!written)
    if (std::error_code ec = llvm::sys::fs::rename(staging, folder); ec && !llvm::sys::fs::is_directory(folder))
      written = llvm::createStringError(ec, "cannot rename " + staging + " to " + folder + ": " + ec.message());
  (void)llvm::sys::fs::remove_directories(staging); // nothing left once renamed
  return written;
}
