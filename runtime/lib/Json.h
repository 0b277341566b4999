//===- Json.h - A small JSON reader for manifests ----------------*- C++ -*-===//
//
// The runtime reads manifest.json to execute run plans, and it links nothing but libc: this is the JSON it needs
// (objects, arrays, strings, numbers, booleans, null), parsed into a tree, with an error that says where the text
// went wrong.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_JSON_H
#define KILN_RUNTIME_JSON_H

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

/// One JSON value.
struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  /// The member `key` of an object, or nullptr.
  const Json *find(const std::string &key) const;
};

/// Parses `text`; on failure returns false and sets `error` to the offset and what was expected.
bool parseJson(const std::string &text, Json &value, std::string &error);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_JSON_H
