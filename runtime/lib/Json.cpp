//===- Json.cpp - A small JSON reader for manifests ------------------------===//
//
// Recursive descent over the text; \uXXXX escapes are kept for the ASCII range (manifests name kernels, files
// and dtypes) and replaced by '?' otherwise.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include <cstdlib>

using namespace kiln::runtime;

const Json *Json::find(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

namespace {
struct Parser {
  const std::string &text;
  size_t at = 0;
  std::string error;

  void skipSpace() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\n' || text[at] == '\r' || text[at] == '\t'))
      ++at;
  }
  bool expect(const char *what) {
    error = "at offset " + std::to_string(at) + ": expected " + what;
    return false;
  }
  bool literal(const char *word) {
    size_t length = std::string(word).size();
    if (text.compare(at, length, word) != 0)
      return expect(word);
    at += length;
    return true;
  }
  bool parseString(std::string &out) {
    if (at >= text.size() || text[at] != '"')
      return expect("a string");
    ++at;
    while (at < text.size() && text[at] != '"') {
      char c = text[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= text.size())
        return expect("an escape");
      char e = text[at++];
      switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        if (at + 4 > text.size())
          return expect("four hex digits");
        long code = std::strtol(text.substr(at, 4).c_str(), nullptr, 16);
        out += code < 128 ? static_cast<char>(code) : '?';
        at += 4;
        break;
      }
      default: out += e;
      }
    }
    if (at >= text.size())
      return expect("the closing quote");
    ++at;
    return true;
  }
  bool parseValue(Json &value, int depth) {
    if (depth > 64)
      return expect("less nesting");
    skipSpace();
    if (at >= text.size())
      return expect("a value");
    char c = text[at];
    if (c == '{') {
      value.kind = Json::Kind::Object;
      ++at;
      skipSpace();
      if (at < text.size() && text[at] == '}')
        return ++at, true;
      while (true) {
        skipSpace();
        std::string key;
        if (!parseString(key))
          return false;
        skipSpace();
        if (at >= text.size() || text[at] != ':')
          return expect("':'");
        ++at;
        if (!parseValue(value.object[key], depth + 1))
          return false;
        skipSpace();
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at < text.size() && text[at] == '}')
          return ++at, true;
        return expect("',' or '}'");
      }
    }
    if (c == '[') {
      value.kind = Json::Kind::Array;
      ++at;
      skipSpace();
      if (at < text.size() && text[at] == ']')
        return ++at, true;
      while (true) {
        value.array.emplace_back();
        if (!parseValue(value.array.back(), depth + 1))
          return false;
        skipSpace();
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at < text.size() && text[at] == ']')
          return ++at, true;
        return expect("',' or ']'");
      }
    }
    if (c == '"') {
      value.kind = Json::Kind::String;
      return parseString(value.string);
    }
    if (c == 't' || c == 'f') {
      value.kind = Json::Kind::Bool;
      value.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return literal("null");
    const char *start = text.c_str() + at;
    char *end = nullptr;
    value.number = std::strtod(start, &end);
    if (end == start)
      return expect("a value");
    value.kind = Json::Kind::Number;
    at += static_cast<size_t>(end - start);
    return true;
  }
};
} // namespace

bool kiln::runtime::parseJson(const std::string &text, Json &value, std::string &error) {
  Parser parser{text};
  if (!parser.parseValue(value, 0)) {
    error = parser.error;
    return false;
  }
  parser.skipSpace();
  if (parser.at != text.size()) {
    error = "at offset " + std::to_string(parser.at) + ": unexpected text after the value";
    return false;
  }
  return true;
}
