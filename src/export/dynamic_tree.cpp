// DynamicTree: an output tree rebuilt from its structure text. Two spellings are read: the one
// trace::flatten_arguments writes ("tuple2(*,state1(w=*,)s:3,)": a leaf is "*,", a static leaf
// "s:<value>,", a key "k=" before its child, a container "kind(" ... ")"), and JAX's treedef
// text after "jax:" for artifacts converted from jax.export.
#include <string_view>

#include "cujax/export.h"

namespace cujax {

class DynamicTreeParser {
 public:
  DynamicTreeParser(const std::string& text, const std::vector<Array>& leaves)
      : text_(text), leaves_(leaves) {}

  DynamicTree parse() {
    DynamicTree root;
    if (std::string_view(text_).starts_with("jax:")) {
      pos_ = 4;
      expect("PyTreeDef(");
      root = jax_node();
      expect(")");
    } else {
      root = node();
    }
    if (pos_ != text_.size()) fail("unexpected text at offset " + std::to_string(pos_));
    if (next_leaf_ != leaves_.size())
      fail("it has " + std::to_string(next_leaf_) + " leaves, but " +
           std::to_string(leaves_.size()) + " arrays were given");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("output tree '" + text_ + "' cannot be read: " + why);
  }
  bool at(std::string_view s) const { return std::string_view(text_).substr(pos_).starts_with(s); }
  void expect(std::string_view s) {
    if (!at(s)) fail("expected '" + std::string(s) + "' at offset " + std::to_string(pos_));
    pos_ += s.size();
  }
  DynamicTree leaf() {
    if (next_leaf_ >= leaves_.size())
      fail("it has more leaves than the " + std::to_string(leaves_.size()) + " arrays given");
    DynamicTree t;
    t.kind_ = "*";
    t.array_ = leaves_[next_leaf_++];
    return t;
  }

  // flatten_arguments' form.
  DynamicTree node() {
    if (at("*,")) {
      pos_ += 2;
      return leaf();
    }
    if (at("s:")) {
      const size_t end = text_.find(',', pos_);
      if (end == std::string::npos) fail("a static leaf without its ','");
      DynamicTree t;
      t.kind_ = "s";
      t.static_ = text_.substr(pos_ + 2, end - pos_ - 2);
      pos_ = end + 1;
      return t;
    }
    const size_t open = text_.find('(', pos_);
    if (open == std::string::npos) fail("expected a node at offset " + std::to_string(pos_));
    DynamicTree t;
    t.kind_ = text_.substr(pos_, open - pos_);
    pos_ = open + 1;
    while (!at(")")) {
      if (pos_ >= text_.size()) fail("'" + t.kind_ + "(' is not closed");
      // A key runs to '=' when that comes before any '(' or ',' (a node's own text).
      const size_t eq = text_.find('=', pos_);
      const size_t stop = text_.find_first_of("(,", pos_);
      if (!at("*,") && !at("s:") && eq != std::string::npos && eq < stop) {
        t.keys_.push_back(text_.substr(pos_, eq - pos_));
        pos_ = eq + 1;
      } else if (!t.keys_.empty()) {
        fail("a child of '" + t.kind_ + "' without a key at offset " + std::to_string(pos_));
      }
      t.children_.push_back(node());
    }
    ++pos_;
    return t;
  }

  // JAX's treedef text: *, None, (a, b), [a, b], {'k': a}.
  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  DynamicTree jax_node() {
    skip_spaces();
    if (at("*")) {
      ++pos_;
      return leaf();
    }
    DynamicTree t;
    if (at("None")) {
      pos_ += 4;
      t.kind_ = "none";
      return t;
    }
    std::string close, kind;
    if (at("(")) {
      close = ")", kind = "tuple";
    } else if (at("[")) {
      close = "]", kind = "list";
    } else if (at("{")) {
      close = "}", kind = "dict";
    } else {
      fail("only *, None, tuples, lists and dicts are read (offset " + std::to_string(pos_) +
           "); call the flat form, call_flat");
    }
    ++pos_;
    for (skip_spaces(); !at(close); skip_spaces()) {
      if (kind == "dict") {
        if (!at("'") && !at("\"")) fail("expected a quoted key at offset " + std::to_string(pos_));
        const char quote = text_[pos_];
        const size_t end = text_.find(quote, pos_ + 1);
        if (end == std::string::npos) fail("unterminated key");
        t.keys_.push_back(text_.substr(pos_ + 1, end - pos_ - 1));
        pos_ = end + 1;
        expect(":");
      }
      t.children_.push_back(jax_node());
      skip_spaces();
      if (at(",")) {
        ++pos_;
      } else if (!at(close)) {
        fail("expected ',' or '" + close + "' at offset " + std::to_string(pos_));
      }
    }
    ++pos_;
    t.kind_ = kind + std::to_string(t.children_.size());
    return t;
  }

  const std::string& text_;
  const std::vector<Array>& leaves_;
  size_t pos_ = 0;
  size_t next_leaf_ = 0;
};

DynamicTree DynamicTree::from_structure(const std::string& structure,
                                        const std::vector<Array>& leaves) {
  return DynamicTreeParser(structure, leaves).parse();
}

const Array& DynamicTree::array() const {
  if (!is_leaf())
    throw Error("DynamicTree: this node is " + tree_structure(*this) + ", not an array leaf");
  return array_;
}

const std::string& DynamicTree::static_value() const {
  if (!is_static())
    throw Error("DynamicTree: this node is " + tree_structure(*this) + ", not a static leaf");
  return static_;
}

const DynamicTree& DynamicTree::operator[](size_t i) const {
  if (i >= children_.size())
    throw Error("DynamicTree: index " + std::to_string(i) + " is out of range for " +
                tree_structure(*this));
  return children_[i];
}

const DynamicTree& DynamicTree::operator[](const std::string& key) const {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return children_[i];
  throw Error("DynamicTree: no key '" + key + "' in " + tree_structure(*this));
}

std::vector<Array> DynamicTree::leaves() const {
  return tree_leaves(*this);
}

State DynamicTree::state() const {
  if (keys_.empty() && !children_.empty())
    throw Error("DynamicTree::state: " + tree_structure(*this) +
                " has no keys (a dict, State or struct has)");
  State out;
  for (size_t i = 0; i < children_.size(); ++i) {
    const DynamicTree& c = children_[i];
    if (c.is_leaf()) {
      out.set(keys_[i], c.array_);
    } else if (!c.is_static()) {
      for (auto& [path, a] : c.state()) out.set(keys_[i] + "." + path, a);
    }
  }
  return out;
}

}  // namespace cujax
