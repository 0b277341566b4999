//===- Cache.cpp - Sealed folder caches on disk ----------------------------===//
//
// The one implementation of the caches' protocol, which the Python package's program cache and the compiler's
// kernel cache both call. An entry is a folder named by its key under a cache root. It is written into a private
// staging folder, sealed with checksums.json (the SHA-256 of every other file), and renamed into place in one
// step. So a reader never takes half an entry, nor a damaged or hand-edited one: such an entry is removed (moved
// aside first, so that a good entry another process publishes meanwhile stays) and the caller builds it again.
// Staging folders that killed processes left behind are swept after an hour.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime.h"

#include "Errors.h"
#include "Json.h"
#include "Sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kiln::runtime;

namespace {

const char *const kChecksums = "checksums.json";

kiln_status ioError(const std::string &what, const std::string &path, int error) {
  return fail(KILN_ERROR_IO, what + " " + path + ": " + std::strerror(error));
}

/// Removes `path` and everything under it, without following symlinks.
void removeTree(const std::string &path) {
  nftw(
      path.c_str(),
      [](const char *file, const struct stat *, int kind, struct FTW *) {
        return kind == FTW_DP || kind == FTW_D || kind == FTW_DNR ? rmdir(file) : unlink(file);
      },
      16, FTW_DEPTH | FTW_PHYS);
}

/// The names in folder `path` (not "." or ".."), or false when it cannot be read.
bool listFolder(const std::string &path, std::vector<std::string> &names) {
  DIR *folder = opendir(path.c_str());
  if (!folder)
    return false;
  while (struct dirent *entry = readdir(folder))
    if (std::strcmp(entry->d_name, ".") && std::strcmp(entry->d_name, ".."))
      names.push_back(entry->d_name);
  closedir(folder);
  std::sort(names.begin(), names.end());
  return true;
}

/// The contents of regular file `path`, or false.
bool readFile(const std::string &path, std::string &contents) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW);
  if (fd < 0)
    return false;
  struct stat info;
  bool ok = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  char chunk[1 << 16];
  for (ssize_t got; ok && (got = read(fd, chunk, sizeof chunk)) != 0;)
    ok = got > 0 && (contents.append(chunk, static_cast<size_t>(got)), true);
  close(fd);
  return ok;
}

/// Writes `contents` to a new file `path`; the error names the file (a full disk fails the write or the close).
kiln_status writeFile(const std::string &path, const std::string &contents) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return ioError("cannot create", path, errno);
  for (size_t done = 0; done < contents.size();) {
    ssize_t wrote = write(fd, contents.data() + done, contents.size() - done);
    if (wrote < 0) {
      int error = errno;
      close(fd);
      return ioError("cannot write", path, error);
    }
    done += static_cast<size_t>(wrote);
  }
  if (close(fd) != 0)
    return ioError("cannot write", path, errno);
  return KILN_OK;
}

/// JSON text of a string (file names and hex digests).
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else
      out += c;
  }
  return out + "\"";
}

/// Whether `folder` is a sealed entry: checksums.json names exactly its other files, each with its SHA-256.
bool sealed(const std::string &folder) {
  std::vector<std::string> names;
  std::string text, error;
  Json recorded;
  if (!listFolder(folder, names) || !readFile(folder + "/" + kChecksums, text) || !parseJson(text, recorded, error) ||
      recorded.kind != Json::Kind::Object)
    return false;
  names.erase(std::remove(names.begin(), names.end(), kChecksums), names.end());
  if (names.size() != recorded.object.size())
    return false;
  for (const std::string &name : names) {
    const Json *digest = recorded.find(name);
    std::string contents;
    if (!digest || digest->kind != Json::Kind::String || !readFile(folder + "/" + name, contents) ||
        sha256Hex(contents) != digest->string)
      return false;
  }
  return true;
}

/// Whether `path` is a valid entry: a real folder (a symlink never is one, wherever it points) that is sealed.
bool validEntry(const std::string &path) {
  struct stat info;
  return lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && sealed(path);
}

/// Removes private folders (names starting with a dot) that killed processes left in `root` over an hour ago,
/// once per root and process: a live process renames or removes its own within seconds.
void sweepAbandoned(const std::string &root) {
  static std::mutex mutex;
  static std::set<std::string> swept;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!swept.insert(root).second)
      return;
  }
  std::vector<std::string> names;
  if (!listFolder(root, names))
    return;
  time_t cutoff = std::time(nullptr) - 3600;
  for (const std::string &name : names) {
    struct stat info;
    std::string path = root + "/" + name;
    if (name[0] == '.' && lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_mtime < cutoff)
      removeTree(path);
  }
}

/// Creates `path` and its parents.
bool makeFolders(const std::string &path) {
  for (size_t at = 1; at <= path.size(); ++at)
    if (at == path.size() || path[at] == '/') {
      std::string prefix = path.substr(0, at);
      if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
        return false;
    }
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

} // namespace

extern "C" {

void kiln_cache_discard(const char *path) {
  if (!path)
    return;
  struct stat info;
  if (lstat(path, &info) != 0)
    return;
  if (!S_ISDIR(info.st_mode)) {
    unlink(path); // a file or a symlink, not what it points at
    return;
  }
  // Moved aside in one step first, so that an entry another process publishes at `path` meanwhile stays.
  std::string whole = path, aside = whole.substr(0, whole.find_last_of('/') + 1) + ".damaged-XXXXXX";
  std::vector<char> name(aside.begin(), aside.end());
  name.push_back('\0');
  if (mkdtemp(name.data())) { // an empty folder, which a rename may replace
    if (rename(path, name.data()) == 0) {
      removeTree(name.data());
      return;
    }
    rmdir(name.data());
  }
  removeTree(path);
}

kiln_status kiln_cache_lookup(const char *root, const char *key, int *found) {
  if (!root || !key || !found)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_cache_lookup: null argument");
  *found = 0;
  std::string path = std::string(root) + "/" + key;
  struct stat info;
  if (lstat(path.c_str(), &info) != 0)
    return KILN_OK;
  if (validEntry(path))
    *found = 1;
  else
    kiln_cache_discard(path.c_str());
  return KILN_OK;
}

kiln_status kiln_cache_stage(const char *root, const char *key, char **staging) {
  if (!root || !key || !staging)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_cache_stage: null argument");
  *staging = nullptr;
  if (!makeFolders(root))
    return ioError("cannot create", root, errno ? errno : ENOTDIR);
  sweepAbandoned(root);
  std::string model = std::string(root) + "/." + std::string(key).substr(0, 16) + ".XXXXXX";
  std::vector<char> name(model.begin(), model.end());
  name.push_back('\0');
  if (!mkdtemp(name.data()))
    return ioError("cannot create a folder in", root, errno);
  *staging = static_cast<char *>(std::malloc(name.size()));
  std::memcpy(*staging, name.data(), name.size());
  return KILN_OK;
}

kiln_status kiln_cache_publish(const char *root, const char *key, const char *staging) {
  if (!root || !key || !staging)
    return fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_cache_publish: null argument");
  std::string folder = staging, final = std::string(root) + "/" + key;
  auto finish = [&](kiln_status status) {
    removeTree(folder); // nothing is left once renamed
    return status;
  };
  std::vector<std::string> names;
  if (!listFolder(folder, names))
    return finish(ioError("cannot read", folder, errno));
  std::string checksums = "{";
  for (const std::string &name : names) {
    std::string contents;
    if (name == kChecksums)
      continue;
    if (!readFile(folder + "/" + name, contents))
      return finish(ioError("cannot read", folder + "/" + name, errno ? errno : EINVAL));
    checksums += std::string(checksums.size() > 1 ? ",\n " : "\n ") + quoted(name) + ": " + quoted(sha256Hex(contents));
  }
  checksums += "\n}";
  if (kiln_status status = writeFile(folder + "/" + kChecksums, checksums); status != KILN_OK)
    return finish(status);
  // One rename publishes the entry. It fails too when another process published it first: that entry stays.
  // Anything else at the path (a damaged entry, a file, a symlink) is removed and the rename tried again.
  if (rename(folder.c_str(), final.c_str()) != 0 && !validEntry(final)) {
    kiln_cache_discard(final.c_str());
    (void)rename(folder.c_str(), final.c_str());
  }
  if (!validEntry(final))
    return finish(fail(KILN_ERROR_IO, "the cache entry " + final + " could not be written"));
  return finish(KILN_OK);
}

} // extern "C"
