// StableHLO modules in memory: functions of SSA values, ops with attributes and regions.
//
// An op is stored in MLIR's generic form: its full name ("stablehlo.add", "func.call"), operand
// values, result types, a list of named attributes and its regions. The pretty syntax is only a
// way of printing and parsing it: `stablehlo.compare LT, %a, %b, SIGNED` is the op
// "stablehlo.compare" with attributes comparison_direction = #stablehlo<comparison_direction LT>
// and compare_type = #stablehlo<comparison_type SIGNED>, exactly as its generic form reads. So
// the two spellings give the same Operation, and attributes the backends do not use are kept.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/shape.h"

namespace cujax::ir {

// A uniform quantized element type, `!quant.uniform<i8:f32, 0.1:-30>` (per tensor) or
// `!quant.uniform<i8<-127:127>:f32:1, {0.1:-30, 0.5:-20}>` (per axis: one scale and zero point
// per index of `quantization_dimension`). An element is stored as an integer q of `storage` in
// [storage_min, storage_max] and stands for (q - zero_point) * scale in `expressed`.
struct QuantizedType {
  DType storage = DType::I8;
  int64_t storage_min = 0;
  int64_t storage_max = 0;
  DType expressed = DType::F32;
  std::optional<int64_t> quantization_dimension;  // empty: per tensor
  std::vector<double> scales;
  std::vector<int64_t> zero_points;

  // The range of an integer storage type: the defaults of storage_min and storage_max.
  static int64_t storage_type_min(DType storage);
  static int64_t storage_type_max(DType storage);
  bool operator==(const QuantizedType&) const = default;
  // "!quant.uniform<i8:f32, 1.000000e-01:-30>"; the storage range only where it is narrowed.
  std::string str() const;
};

// tensor<2x3xf32>, tensor<f32> (rank 0), tensor<2x!quant.uniform<...>>, or !stablehlo.token.
struct Type {
  Shape shape;
  DType dtype = DType::F32;  // of a quantized tensor: its storage type
  bool is_token = false;
  std::shared_ptr<const QuantizedType> quantized;  // set for a quantized tensor

  static Type tensor(Shape shape, DType dtype) { return Type{std::move(shape), dtype, false, {}}; }
  static Type token() { return Type{{}, DType::F32, true, {}}; }
  static Type quantized_tensor(Shape shape, QuantizedType q) {
    const DType storage = q.storage;
    return Type{std::move(shape), storage, false,
                std::make_shared<const QuantizedType>(std::move(q))};
  }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t num_elements() const { return cujax::num_elements(shape); }
  bool is_quantized() const { return quantized != nullptr; }
  bool operator==(const Type& o) const {
    if (is_token || o.is_token) return is_token == o.is_token;
    if (shape != o.shape || dtype != o.dtype || is_quantized() != o.is_quantized()) return false;
    return !quantized || *quantized == *o.quantized;
  }
  bool operator!=(const Type& o) const { return !(*this == o); }
  // "tensor<2x3xf32>"
  std::string str() const;
};

struct Attribute;

struct NamedAttribute {
  std::string name;
  std::shared_ptr<const Attribute> value;
};

// An attribute value. Kinds and what they hold:
//   Unit          `unit`, or a bare name in a dictionary (`{has_side_effect}`)
//   Bool          true / false                                  -> boolean
//   Integer       `1 : i64`, or a bare `1` inside a struct attr  -> integer, type (nullopt = bare)
//   Float         `1.0 : f32`                                    -> floating, type
//   String        "text"                                         -> text
//   Symbol        @callee                                        -> text (without the @)
//   TypeAttr      a type written as an attribute                 -> type
//   Array         [a, b, ...]                                    -> elements
//   DenseArray    array<i64: 1, 2>                               -> ints, element_dtype
//   DenseElements dense<...> : tensor<...>                       -> tensor
//   Dictionary    {a = 1, b}                                     -> fields
//   Enum          #stablehlo<comparison_direction LT>            -> text = "comparison_direction",
//                                                                   enum_value = "LT"
//   Struct        #stablehlo.scatter<update_window_dims = [0]>   -> text = "stablehlo.scatter",
//                                                                   fields
//   Opaque        anything else, kept verbatim and printed back  -> text
struct Attribute {
  enum class Kind {
    Unit,
    Bool,
    Integer,
    Float,
    String,
    Symbol,
    TypeAttr,
    Array,
    DenseArray,
    DenseElements,
    Dictionary,
    Enum,
    Struct,
    Opaque
  };
  Kind kind = Kind::Unit;
  bool boolean = false;
  int64_t integer = 0;  // ui64 values above INT64_MAX are stored as their two's-complement bits
  double floating = 0;
  std::optional<DType> dtype;  // Integer/Float element type, DenseArray element type
  std::string text;
  std::string enum_value;
  std::optional<Type> type;  // TypeAttr; DenseElements of a quantized type (the tensor: storage)
  std::vector<std::shared_ptr<const Attribute>> elements;
  std::vector<int64_t> ints;
  std::vector<double> floats;  // DenseArray of a float element type
  HostTensor tensor;
  std::vector<NamedAttribute> fields;

  // Field of a Struct or Dictionary attribute, or nullptr.
  const Attribute* field(std::string_view name) const;

  static std::shared_ptr<const Attribute> unit();
  static std::shared_ptr<const Attribute> boolean_attr(bool v);
  static std::shared_ptr<const Attribute> integer_attr(int64_t v, std::optional<DType> t);
  static std::shared_ptr<const Attribute> float_attr(double v, DType t);
  static std::shared_ptr<const Attribute> string_attr(std::string s);
  static std::shared_ptr<const Attribute> symbol(std::string name);
  static std::shared_ptr<const Attribute> type_attr(Type t);
  static std::shared_ptr<const Attribute> array(std::vector<std::shared_ptr<const Attribute>> e);
  // [1, 2, 3] of bare integers, as struct attributes such as #stablehlo.gather hold them.
  static std::shared_ptr<const Attribute> int_list(const std::vector<int64_t>& v);
  static std::shared_ptr<const Attribute> dense_array(std::vector<int64_t> v, DType t = DType::I64);
  static std::shared_ptr<const Attribute> dense_elements(HostTensor t);
  static std::shared_ptr<const Attribute> enum_attr(std::string enum_name, std::string value);
  static std::shared_ptr<const Attribute> struct_attr(std::string name,
                                                      std::vector<NamedAttribute> fields);
  static std::shared_ptr<const Attribute> opaque(std::string text);
};

using AttrRef = std::shared_ptr<const Attribute>;

// Integer list view of an attribute: a DenseArray, an Array of Integers, or integer
// DenseElements (row-major). Throws Error for anything else.
std::vector<int64_t> as_ints(const Attribute& attr);

struct Operation;
struct Block;
struct Region;

// An SSA value: an op result or a block argument.
struct Value {
  Type type;
  Operation* defining_op = nullptr;  // nullptr for block arguments
  Block* owner_block = nullptr;      // set for block arguments
  int index = 0;                     // result number or argument number
  std::string name_hint;             // the name it was parsed with, if any ("cst", "iterArg")
  std::string loc;                   // loc(...) of a block argument, kept verbatim
};

struct Block {
  std::vector<std::unique_ptr<Value>> arguments;
  std::vector<std::unique_ptr<Operation>> ops;
  Region* parent = nullptr;

  Value* add_argument(Type type);
  // Appends an op and takes ownership; returns it.
  Operation* push_back(std::unique_ptr<Operation> op);
  // The last op (a return / terminator), or nullptr when the block is empty.
  Operation* terminator() const { return ops.empty() ? nullptr : ops.back().get(); }
};

struct Region {
  std::vector<std::unique_ptr<Block>> blocks;
  Operation* parent_op = nullptr;

  Block& add_block();
  Block& front() const { return *blocks.front(); }
};

struct Operation {
  std::string name;  // "stablehlo.add", "func.return", "func.call", "stablehlo.return"
  std::vector<Value*> operands;
  std::vector<std::unique_ptr<Value>> results;
  std::vector<NamedAttribute> attributes;
  std::vector<std::unique_ptr<Region>> regions;
  Block* parent = nullptr;
  std::string loc;  // loc(...) kept verbatim, empty when absent
  int line = 0;     // position in the parsed text, for diagnostics (0 = not parsed)
  int column = 0;

  Value* result(size_t i = 0) const { return results.at(i).get(); }
  size_t num_results() const { return results.size(); }
  Value* add_result(Type type);
  Region& add_region();

  const Attribute* attr(std::string_view name) const;
  // Adds or replaces an attribute.
  void set_attr(std::string name, AttrRef value);
  // as_ints(attr(name)); throws Error naming the op when the attribute is missing.
  std::vector<int64_t> ints(std::string_view name) const;
  std::optional<std::vector<int64_t>> ints_if_present(std::string_view name) const;
  int64_t int_attr(std::string_view name) const;
  std::string_view enum_attr(std::string_view name) const;
  // "stablehlo.add at 12:5" for messages.
  std::string where() const;
};

struct Function {
  std::string name;
  std::string visibility;                              // "public", "private" or empty
  std::vector<std::vector<NamedAttribute>> arg_attrs;  // one list per argument
  std::vector<Type> result_types;
  std::vector<std::vector<NamedAttribute>> result_attrs;  // one list per result
  std::vector<NamedAttribute> attributes;                 // `attributes {...}` after the signature
  Region body;
  std::string loc;

  Function();
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  Block& entry() const { return body.front(); }
  std::vector<Type> arg_types() const;
};

struct Module {
  std::string name;  // "jit_main"; empty for an anonymous module
  std::vector<NamedAttribute> attributes;
  std::vector<std::unique_ptr<Function>> functions;
  std::string loc;
  // `#loc1 = loc("f.py":3:0)` and other alias definitions outside the module body, verbatim.
  // The printer writes location aliases after the module and the others before it.
  std::vector<std::string> aliases;

  Function* lookup(std::string_view name) const;
  Function& add_function(std::string name);
};

// Builds an op with the given operands and result types; the caller adds attributes and
// regions, then appends it to a block.
std::unique_ptr<Operation> make_op(std::string name, std::vector<Value*> operands,
                                   const std::vector<Type>& result_types);

}  // namespace cujax::ir
