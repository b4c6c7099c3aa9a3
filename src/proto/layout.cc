// The control protocol's layout, read off the messages' field lists (proto/fields.h): as text
// for the fingerprint tied to kVersion, and as JSON for `iobench protocol`.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "proto/fields.h"

namespace iobench::proto {
namespace {

using Pairs = std::vector<std::pair<std::string, uint64_t>>;

template <typename V>
const char* type_name_of() {
  if constexpr (std::is_same_v<V, bool>) return "bool";
  if constexpr (std::is_same_v<V, uint32_t>) return "u32";
  if constexpr (std::is_same_v<V, uint64_t>) return "u64";
  if constexpr (std::is_same_v<V, int64_t>) return "i64";
  if constexpr (std::is_same_v<V, double>) return "f64";
  if constexpr (std::is_same_v<V, std::string> || NamedEnum<V>) return "str";
  if constexpr (std::is_same_v<V, Pairs>) return "pairs";
  return "list";
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// "name:type;" per field; a nested block or a list's entry as "name:{...};".
struct LayoutText {
  std::string out;
  template <typename V>
  void operator()(const Field& f, V& v) {
    out += fmt::format("{}:", f.name);
    if constexpr (Described<V>) {
      out += "{";
      describe(v, *this);
      out += "}";
    } else if constexpr (IsVector<V>::value && !std::is_same_v<V, Pairs>) {
      typename V::value_type one{};
      out += "list{";
      describe(one, *this);
      out += "}";
    } else {
      out += type_name_of<V>();
    }
    out += ";";
  }
};

// One JSON entry per wire field: name (nested blocks as "block.field"), type and default.
struct LayoutJson {
  nlohmann::json fields = nlohmann::json::array();
  std::string prefix;
  template <typename V>
  void operator()(const Field& f, V& v) {
    const std::string name = prefix + std::string(f.name);
    if constexpr (Described<V>) {
      LayoutJson inner{nlohmann::json::array(), name + "."};
      describe(v, inner);
      for (auto& e : inner.fields) fields.push_back(std::move(e));
    } else if constexpr (IsVector<V>::value) {
      fields.push_back({{"name", name}, {"type", type_name_of<V>()}, {"default", nlohmann::json::array()}});
    } else if constexpr (NamedEnum<V>) {
      fields.push_back({{"name", name}, {"type", "str"}, {"default", name_of(v)}});
    } else {
      fields.push_back({{"name", name}, {"type", type_name_of<V>()}, {"default", v}});
    }
  }
};

struct Named {
  const char* name;
  Type type;
};

template <typename F>
void each_message(F&& f) {
  f(Named{"HELLO", Type::kHello}, Hello{});
  f(Named{"ACK", Type::kAck}, Ack{});
  f(Named{"RESULT", Type::kResult}, SideResult{});
  f(Named{"ERROR", Type::kError}, ErrorMsg{});
  f(Named{"GROUP", Type::kGroup}, GroupResult{});
  f(Named{"PROGRESS", Type::kProgress}, Progress{});
  f(Named{"CHALLENGE", Type::kChallenge}, Challenge{});
  f(Named{"AUTH", Type::kAuth}, Auth{});
}

}  // namespace

std::string layout_text() {
  std::string out;
  each_message([&](Named n, auto m) {
    LayoutText t;
    describe(m, t);
    out += fmt::format("{}={}\n", n.name, t.out);
  });
  return out;
}

uint64_t layout_fingerprint() {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  for (char c : layout_text()) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string layout_json() {
  nlohmann::json messages = nlohmann::json::object();
  each_message([&](Named n, auto m) {
    LayoutJson j;
    describe(m, j);
    messages[n.name] = {{"type", static_cast<int>(n.type)}, {"fields", std::move(j.fields)}};
  });
  const nlohmann::json doc = {{"version", kVersion},
                              {"magic", "IOBC"},
                              {"header", "magic[4] version:u16 type:u16 body_bytes:u32"},
                              {"encoding", "little-endian; str: u16 length then bytes; bool: u8 0|1"},
                              {"messages", std::move(messages)}};
  return doc.dump(2) + "\n";
}

}  // namespace iobench::proto
