// MLIR bytecode's container (docs: LLVM mlir/docs/BytecodeFormat.md): sections, string table,
// dialects and op names, the attribute/type table with the builtin and VHLO encodings, the
// properties section and the IR. It yields a generic tree of ops; vhlo.cpp maps it to StableHLO.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cujax::ir::bytecode {

// Bounds on untrusted input: nesting of attributes/types and of regions.
inline constexpr int kMaxDepth = 200;

struct BType;
using TypeRef = std::shared_ptr<const BType>;

// A type, builtin or VHLO, already in the terms StableHLO prints.
struct BType {
  enum class Kind { Element, Tensor, Unranked, Token, Tuple, Function, None, Other };
  Kind kind = Kind::Other;
  std::string elem;  // Element: "f32", "i1", "ui8", "complex<f32>", "index"
  int bits = 0;      // Element: storage width of one element (complex: both parts)
  bool is_float = false;
  bool is_complex = false;
  std::vector<int64_t> shape;            // Tensor; INT64_MIN = dynamic
  TypeRef element;                       // Tensor/Unranked/complex part
  std::vector<TypeRef> inputs, outputs;  // Function; Tuple uses inputs
  std::string encoding;                  // Tensor: printed encoding attribute, if any
  std::string text;                      // Other: verbatim
};

struct BAttr;
using AttrRef = std::shared_ptr<const BAttr>;

struct BAttr {
  enum class Kind {
    Array,
    Bool,
    Enum,
    Dict,
    Float,
    Int,
    String,
    Symbol,
    Tensor,
    TypeA,
    Unit,
    TypeExtensions,
    ResultAccuracy,
    OutputOperandAlias,
    DenseArray,
    Location,
    Sdy,
    Verbatim
  };
  Kind kind = Kind::Verbatim;
  bool boolean = false;
  uint64_t bits = 0;  // Int: two's-complement value; Float: the IEEE bits
  TypeRef type;       // Int/Float/Tensor/TypeA/DenseArray
  std::string text;   // String/Symbol value; Enum kind ("comparison_direction"); Verbatim/Location;
                      // Sdy: the text Shardy prints after the mnemonic when nested ("\"a\"=2")
  std::string enum_value;         // Enum value; Sdy: the mnemonic ("mesh", "sharding", "axis_ref")
  std::vector<AttrRef> elements;  // Array
  std::vector<std::pair<AttrRef, AttrRef>> entries;  // Dict: name (String) -> value
  std::vector<int64_t> ints;  // TypeExtensions bounds; OutputOperandAlias: out..., -1, idx, op...
  std::vector<int64_t> ints2;
  int64_t index = 0;
  std::string blob;  // Tensor/DenseArray raw data
  bool is_builtin = false;
};

struct BOp;
struct BBlock {
  std::vector<std::pair<TypeRef, int64_t>> args;  // type, value id
  std::vector<std::unique_ptr<BOp>> ops;
};
struct BRegion {
  std::vector<std::unique_ptr<BBlock>> blocks;
};
struct BOp {
  std::string dialect, name;  // "vhlo", "add_v1"
  size_t offset = 0;          // byte offset of the op in the file, for messages
  AttrRef loc;
  std::vector<std::pair<std::string, AttrRef>> attrs;  // dictionary and properties
  AttrRef properties_attr;                 // properties of an op written as a whole attribute
  std::vector<uint64_t> property_indices;  // raw attribute indices of native properties
  bool has_native_properties = false;
  std::vector<TypeRef> result_types;
  std::vector<int64_t> operands;  // value ids, per isolated scope
  std::vector<int64_t> result_ids;
  std::vector<std::unique_ptr<BRegion>> regions;
  bool isolated = false;
  int scope = 0;  // isolated scope the value ids belong to
};

struct BModule {
  uint64_t version = 0;
  std::string producer;
  std::vector<std::unique_ptr<BOp>> top;  // ops of the top-level block (a builtin.module)
};

class Container;

// Parses the whole file (throws Error naming `name` and the byte offset).
BModule read_container(std::string_view bytes, std::string_view name,
                       std::unique_ptr<Container>* keep);

// Resolves attribute indices of native properties (kept alive for vhlo.cpp).
class Container {
 public:
  virtual ~Container() = default;
  virtual AttrRef attribute(uint64_t index, size_t at) = 0;
  [[noreturn]] virtual void fail(size_t at, const std::string& msg) const = 0;
};

}  // namespace cujax::ir::bytecode

namespace cujax::ir::bytecode {

// A Shardy attribute as MLIR prints it on its own: `#sdy.sharding<@mesh, [{"a"}]>`, or, where the
// text after the mnemonic is not `<...>`, inside the dialect's brackets: `#sdy<manual_axes{"a"}>`.
inline std::string sdy_attr_text(const BAttr& a) {
  const std::string& b = a.text;
  if (!b.empty() && b.front() == '<' && b.back() == '>') return "#sdy." + a.enum_value + b;
  return "#sdy<" + a.enum_value + b + ">";
}

}  // namespace cujax::ir::bytecode
