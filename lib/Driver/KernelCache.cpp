//===- KernelCache.cpp - Compiled kernels kept on disk across programs -----===//
//
// The entry of a kernel module is a folder named by its key holding kernel.ptx, kernel.cubin and entry.json (the
// kernel's name, the assembler and its report, the name of the cache folder, that is of the build, it was written
// for), sealed by the runtime's cache protocol (kiln_cache_*: checksums.json covers all three, since a wrong
// function name loads a kernel as surely as a wrong cubin). See KernelCache.h for why.
//
//===----------------------------------------------------------------------===//

#include "Driver/KernelCache.h"

#include "kiln/runtime.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
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

/// The path of `file` in `folder`.
static std::string pathIn(llvm::StringRef folder, llvm::StringRef file) {
  SmallString<256> path(folder);
  llvm::sys::path::append(path, file);
  return std::string(path);
}

std::optional<CachedKernel> kiln::lookupCachedKernel(llvm::StringRef directory, llvm::StringRef key) {
  int found = 0;
  if (kiln_cache_lookup(directory.str().c_str(), key.str().c_str(), &found) != KILN_OK || !found)
    return std::nullopt;
  // The files are sealed (the runtime checked their checksums); what they say must still be an entry of this
  // folder's build with a kernel to launch.
  std::string folder = pathIn(directory, key);
  std::optional<std::string> ptx = readFile(pathIn(folder, "kernel.ptx")),
                             cubin = readFile(pathIn(folder, "kernel.cubin")),
                             entryText = readFile(pathIn(folder, "entry.json"));
  llvm::Expected<llvm::json::Value> entry =
      entryText ? llvm::json::parse(*entryText) : llvm::Expected<llvm::json::Value>(nullptr);
  CachedKernel kernel;
  bool valid = false;
  if (!entry) {
    llvm::consumeError(entry.takeError());
  } else if (const llvm::json::Object *object = entry->getAsObject()) {
    auto field = [&](llvm::StringRef name) {
      std::optional<llvm::StringRef> value = object->getString(name);
      return value ? value->str() : std::string();
    };
    kernel.function = field("function");
    kernel.assembler = field("assembler");
    kernel.log = field("log");
    valid = ptx && cubin && !cubin->empty() && !kernel.function.empty() &&
            field("build") == llvm::sys::path::filename(directory);
    if (valid)
      kernel.ptx = std::move(*ptx), kernel.cubin = std::move(*cubin);
  }
  if (!valid) {
    kiln_cache_discard(folder.c_str());
    return std::nullopt;
  }
  return kernel;
}

llvm::Error kiln::storeCachedKernel(llvm::StringRef directory, llvm::StringRef key, const CachedKernel &kernel) {
  if (kernel.cubin.empty())
    return llvm::createStringError("kernel " + kernel.function + " has no cubin");
  char *stagingPath = nullptr;
  if (kiln_cache_stage(directory.str().c_str(), key.str().c_str(), &stagingPath) != KILN_OK)
    return llvm::createStringError(kiln_last_error());
  std::string staging = stagingPath;
  kiln_buffer_free(stagingPath);
  llvm::json::Object entry{{"function", kernel.function},
                           {"assembler", kernel.assembler},
                           {"log", kernel.log},
                           {"build", llvm::sys::path::filename(directory).str()}};
  std::string entryText;
  llvm::raw_string_ostream(entryText) << llvm::json::Value(std::move(entry));
  llvm::Error written = writeFile(pathIn(staging, "kernel.ptx"), kernel.ptx);
  if (!written)
    written = writeFile(pathIn(staging, "kernel.cubin"), kernel.cubin);
  if (!written)
    written = writeFile(pathIn(staging, "entry.json"), entryText);
  if (written) {
    kiln_cache_discard(staging.c_str());
    return written;
  }
  // Sealed and put in place in one step; when another process published the entry first, that one stays.
  if (kiln_cache_publish(directory.str().c_str(), key.str().c_str(), staging.c_str()) != KILN_OK)
    return llvm::createStringError(kiln_last_error());
  return llvm::Error::success();
}
