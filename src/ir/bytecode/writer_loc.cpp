// Locations for the bytecode writer: cujax's IR keeps `loc(...)` as text (with `#locN`
// aliases defined after the module); this parses it into MLIR's builtin location attributes
// (LLVM's BuiltinDialectBytecode.td encodings). Text it cannot read is written as unknown.
#include <cstdlib>

#include "../asm_util.h"
#include "writer.h"

namespace cujax::ir::bytecode::write {
namespace {

constexpr uint64_t kCallSite = 10, kFileLineCol = 11, kFused = 12, kName = 14, kUnknown = 15,
                   kFileLineColRange = 22;

class LocParser {
 public:
  LocParser(const std::map<std::string, std::string>& aliases, Nodes& nodes)
      : aliases_(aliases), nodes_(nodes) {}

  // `loc(...)`, or nullptr when the text is not a location this parser reads.
  NodeP parse(std::string_view text, int depth) {
    if (depth > 64) return nullptr;
    std::string_view t = trim(text);
    if (!t.starts_with("loc(") || !t.ends_with(")")) return nullptr;
    s_ = t.substr(4, t.size() - 5);
    p_ = 0;
    depth_ = depth;
    NodeP n = inner();
    ws();
    return n && p_ == s_.size() ? n : nullptr;
  }

 private:
  static std::string_view trim(std::string_view t) {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    return t;
  }
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n')) ++p_;
  }
  bool eat(std::string_view w) {
    ws();
    if (s_.substr(p_, w.size()) != w) return false;
    p_ += w.size();
    return true;
  }
  bool number(uint64_t& v) {
    ws();
    const size_t b = p_;
    v = 0;
    while (p_ < s_.size() && asm_util::is_digit(s_[p_]))
      v = v * 10 + static_cast<uint64_t>(s_[p_++] - '0');
    return p_ > b;
  }
  bool string(std::string& out) {
    ws();
    if (p_ >= s_.size() || s_[p_] != '"') return false;
    ++p_;
    while (p_ < s_.size() && s_[p_] != '"') {
      if (s_[p_] == '\\' && p_ + 1 < s_.size()) {
        const char c = s_[p_ + 1];
        if (c == 'n')
          out += '\n';
        else if (c == 't')
          out += '\t';
        else if (c == '"' || c == '\\')
          out += c;
        else if (p_ + 2 < s_.size() && asm_util::is_hex_digit(c) &&
                 asm_util::is_hex_digit(s_[p_ + 2])) {
          out += static_cast<char>(asm_util::hex_value(c) * 16 + asm_util::hex_value(s_[p_ + 2]));
          ++p_;
        } else
          return false;
        p_ += 2;
      } else {
        out += s_[p_++];
      }
    }
    if (p_ >= s_.size()) return false;
    ++p_;
    return true;
  }
  NodeP str_attr(const std::string& s) {
    return nodes_.get(NodeBuilder(false, "builtin", 2).string(s).n);
  }
  NodeP unknown() { return nodes_.get(NodeBuilder(false, "builtin", kUnknown).n); }

  NodeP inner() {
    ws();
    if (eat("unknown")) return unknown();
    if (p_ < s_.size() && s_[p_] == '#') {
      const size_t b = p_++;
      while (p_ < s_.size() && asm_util::is_ident_char(s_[p_])) ++p_;
      auto it = aliases_.find(std::string(s_.substr(b, p_ - b)));
      if (it == aliases_.end()) return nullptr;
      // The alias's own text, parsed by a fresh parser (this one keeps its position).
      return LocParser(aliases_, nodes_).parse(it->second, depth_ + 1);
    }
    if (eat("callsite(")) {
      NodeP callee = inner();
      if (!callee || !eat("at")) return nullptr;
      NodeP caller = inner();
      if (!caller || !eat(")")) return nullptr;
      return nodes_.get(NodeBuilder(false, "builtin", kCallSite).attr(callee).attr(caller).n);
    }
    if (eat("fused")) {
      if (eat("<")) {  // metadata: skipped (balanced), not kept
        int open = 1;
        while (p_ < s_.size() && open > 0) {
          if (s_[p_] == '<') ++open;
          if (s_[p_] == '>') --open;
          ++p_;
        }
      }
      if (!eat("[")) return nullptr;
      std::vector<NodeP> locs;
      do {
        NodeP l = inner();
        if (!l) return nullptr;
        locs.push_back(l);
      } while (eat(","));
      if (!eat("]")) return nullptr;
      NodeBuilder b(false, "builtin", kFused);
      b.varint(locs.size());
      for (NodeP l : locs) b.attr(l);
      return nodes_.get(std::move(b.n));
    }
    std::string name;
    if (!string(name)) return nullptr;
    if (eat(":")) {  // "file":line:col [to [line]:col]
      uint64_t line = 0, col = 0;
      if (!number(line) || !eat(":") || !number(col)) return nullptr;
      if (!eat("to")) {
        return nodes_.get(NodeBuilder(false, "builtin", kFileLineCol)
                              .attr(str_attr(name))
                              .varint(line)
                              .varint(col)
                              .n);
      }
      uint64_t end_line = line, end_col = 0;
      ws();
      if (p_ < s_.size() && asm_util::is_digit(s_[p_]) && !number(end_line)) return nullptr;
      if (!eat(":") || !number(end_col)) return nullptr;
      NodeBuilder b(false, "builtin", kFileLineColRange);
      b.attr(str_attr(name));
      if (end_line == line)
        b.varint(3).varint(line).varint(col).varint(end_col);
      else
        b.varint(4).varint(line).varint(col).varint(end_line).varint(end_col);
      return nodes_.get(std::move(b.n));
    }
    NodeP child = unknown();
    if (eat("(")) {
      child = inner();
      if (!child || !eat(")")) return nullptr;
    }
    return nodes_.get(NodeBuilder(false, "builtin", kName).attr(str_attr(name)).attr(child).n);
  }

  const std::map<std::string, std::string>& aliases_;
  Nodes& nodes_;
  std::string_view s_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

std::map<std::string, std::string> location_aliases(const Module& m) {
  std::map<std::string, std::string> out;
  for (const auto& a : m.aliases) {
    const size_t eq = a.find(" = ");
    if (a.starts_with("#") && eq != std::string::npos) out[a.substr(0, eq)] = a.substr(eq + 3);
  }
  return out;
}

NodeP location(std::string_view text, const std::map<std::string, std::string>& aliases,
               Nodes& nodes) {
  if (text.empty()) return nullptr;
  return LocParser(aliases, nodes).parse(text, 0);
}

}  // namespace cujax::ir::bytecode::write
