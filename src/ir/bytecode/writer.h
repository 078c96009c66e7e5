// The bytecode writer's internals: attributes and types as uniqued nodes with their encoding
// (writer_vhlo.cpp builds them from cujax's IR), and the ops of the VHLO module that
// writer.cpp numbers and emits as MLIR bytecode.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::ir::bytecode::write {

struct Node;
using NodeP = const Node*;

// One step of an attribute's or type's encoding, in the order the bytes are written (and the
// order MLIR numbers nested attributes and types in).
struct Item {
  enum class Kind { Varint, SVarint, Byte, AttrRef, TypeRef, String, Blob } kind;
  uint64_t v = 0;
  NodeP ref = nullptr;
  std::string s;
};

// An attribute or a type of one dialect: a custom encoding (items) or, for attributes the
// writer cannot encode (another dialect's), its assembly text.
struct Node {
  bool is_type = false;
  std::string dialect;
  bool custom = true;
  std::string asm_text;
  std::vector<Item> items;
};

// Uniques nodes by value, as MLIR's context does: equal attributes are one table entry.
class Nodes {
 public:
  NodeP get(Node n);

 private:
  std::deque<Node> nodes_;
  std::unordered_map<size_t, std::vector<NodeP>> by_hash_;
};

// Builds a node item by item.
struct NodeBuilder {
  Node n;
  NodeBuilder(bool is_type, std::string dialect, uint64_t code) {
    n.is_type = is_type;
    n.dialect = std::move(dialect);
    varint(code);
  }
  NodeBuilder& varint(uint64_t v) {
    n.items.push_back({Item::Kind::Varint, v, nullptr, {}});
    return *this;
  }
  NodeBuilder& svarint(int64_t v) {
    n.items.push_back({Item::Kind::SVarint, static_cast<uint64_t>(v), nullptr, {}});
    return *this;
  }
  NodeBuilder& byte(uint8_t v) {
    n.items.push_back({Item::Kind::Byte, v, nullptr, {}});
    return *this;
  }
  NodeBuilder& attr(NodeP a) {
    n.items.push_back({Item::Kind::AttrRef, 0, a, {}});
    return *this;
  }
  NodeBuilder& type(NodeP t) {
    n.items.push_back({Item::Kind::TypeRef, 0, t, {}});
    return *this;
  }
  NodeBuilder& string(std::string s) {
    n.items.push_back({Item::Kind::String, 0, nullptr, std::move(s)});
    return *this;
  }
  NodeBuilder& blob(std::string s) {
    n.items.push_back({Item::Kind::Blob, 0, nullptr, std::move(s)});
    return *this;
  }
};

struct WOp;
struct WBlock {
  std::vector<const Value*> args;
  std::vector<NodeP> arg_types, arg_locs;  // loc nullptr: unknown
  std::vector<WOp> ops;
};
struct WRegion {
  std::vector<WBlock> blocks;
};
struct WOp {
  std::string dialect, name;  // "vhlo", "add_v1"
  NodeP loc = nullptr;
  // Inherent attributes (VHLO's op attributes; builtin.module's sym_name), by name.
  std::vector<std::pair<std::string, NodeP>> inherent;
  // Discardable attributes (mhlo.sharding, jax.result_info, ...).
  std::vector<std::pair<std::string, NodeP>> discardable;
  std::vector<NodeP> result_types;
  std::vector<const Value*> operands, results;
  std::vector<WRegion> regions;
  bool isolated = false;
  bool is_module = false;
};

// `#locN` -> `loc(...)` of the module's alias definitions (writer_loc.cpp).
std::map<std::string, std::string> location_aliases(const Module& m);
// The builtin location attribute of `loc(...)` text; nullptr (unknown) for empty text or text
// that is not a location.
NodeP location(std::string_view text, const std::map<std::string, std::string>& aliases,
               Nodes& nodes);

// The module as VHLO for `target`, with every node uniqued in `nodes` (writer_vhlo.cpp).
WOp to_vhlo(const Module& m, const std::string& target, Nodes& nodes);

// MLIR bytecode of `module` at bytecode `version` with `producer` (writer.cpp).
std::string emit(const WOp& module, uint64_t version, const std::string& producer, Nodes& nodes);

}  // namespace cujax::ir::bytecode::write
