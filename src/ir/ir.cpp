#include "cujax/ir/ir.h"

#include <bit>

#include "cujax/core/dynamic_shape.h"
#include "cujax/core/error.h"
#include "ir/asm_util.h"

namespace cujax::ir {

int64_t QuantizedType::storage_type_min(DType storage) {
  return is_signed_int(storage) ? -(int64_t{1} << (bit_width(storage) - 1)) : 0;
}

int64_t QuantizedType::storage_type_max(DType storage) {
  const int bits = bit_width(storage) - (is_signed_int(storage) ? 1 : 0);
  return static_cast<int64_t>((uint64_t{1} << bits) - 1);
}

std::string QuantizedType::str() const {
  const int bits = bit_width(storage);
  std::string s = "!quant.uniform<";
  s += (is_signed_int(storage) ? "i" : "u") + std::to_string(bits);
  if (storage_min != storage_type_min(storage) || storage_max != storage_type_max(storage))
    s += "<" + std::to_string(storage_min) + ":" + std::to_string(storage_max) + ">";
  s += ":" + std::string(mlir_name(expressed));
  if (quantization_dimension) s += ":" + std::to_string(*quantization_dimension);
  s += ", ";
  const bool per_axis = quantization_dimension.has_value();
  if (per_axis) s += "{";
  for (size_t i = 0; i < scales.size(); ++i) {
    if (i) s += ", ";
    s += asm_util::format_float(std::bit_cast<uint64_t>(scales[i]), DType::F64) + ":" +
         std::to_string(i < zero_points.size() ? zero_points[i] : 0);
  }
  if (per_axis) s += "}";
  return s + ">";
}

std::string Type::str() const {
  if (is_token) return "!stablehlo.token";
  std::string s = "tensor<";
  for (int64_t d : shape) s += (d == kDynamicDim ? std::string("?") : std::to_string(d)) + "x";
  return s + (quantized ? quantized->str() : std::string(mlir_name(dtype))) + ">";
}

const Attribute* Attribute::field(std::string_view name) const {
  for (const auto& f : fields)
    if (f.name == name) return f.value.get();
  return nullptr;
}

namespace {
std::shared_ptr<Attribute> make(Attribute::Kind k) {
  auto a = std::make_shared<Attribute>();
  a->kind = k;
  return a;
}
}  // namespace

AttrRef Attribute::unit() {
  return make(Kind::Unit);
}
AttrRef Attribute::boolean_attr(bool v) {
  auto a = make(Kind::Bool);
  a->boolean = v;
  return a;
}
AttrRef Attribute::integer_attr(int64_t v, std::optional<DType> t) {
  auto a = make(Kind::Integer);
  a->integer = v;
  a->dtype = t;
  return a;
}
AttrRef Attribute::float_attr(double v, DType t) {
  auto a = make(Kind::Float);
  a->floating = v;
  a->dtype = t;
  return a;
}
AttrRef Attribute::string_attr(std::string s) {
  auto a = make(Kind::String);
  a->text = std::move(s);
  return a;
}
AttrRef Attribute::symbol(std::string name) {
  auto a = make(Kind::Symbol);
  a->text = std::move(name);
  return a;
}
AttrRef Attribute::type_attr(Type t) {
  auto a = make(Kind::TypeAttr);
  a->type = std::move(t);
  return a;
}
AttrRef Attribute::array(std::vector<AttrRef> e) {
  auto a = make(Kind::Array);
  a->elements = std::move(e);
  return a;
}
AttrRef Attribute::int_list(const std::vector<int64_t>& v) {
  std::vector<AttrRef> e;
  e.reserve(v.size());
  for (int64_t x : v) e.push_back(integer_attr(x, std::nullopt));
  return array(std::move(e));
}
AttrRef Attribute::dense_array(std::vector<int64_t> v, DType t) {
  auto a = make(Kind::DenseArray);
  a->ints = std::move(v);
  a->dtype = t;
  return a;
}
AttrRef Attribute::dense_elements(HostTensor t) {
  auto a = make(Kind::DenseElements);
  a->tensor = std::move(t);
  return a;
}
AttrRef Attribute::enum_attr(std::string enum_name, std::string value) {
  auto a = make(Kind::Enum);
  a->text = std::move(enum_name);
  a->enum_value = std::move(value);
  return a;
}
AttrRef Attribute::struct_attr(std::string name, std::vector<NamedAttribute> fields) {
  auto a = make(Kind::Struct);
  a->text = std::move(name);
  a->fields = std::move(fields);
  return a;
}
AttrRef Attribute::opaque(std::string text) {
  auto a = make(Kind::Opaque);
  a->text = std::move(text);
  return a;
}

std::vector<int64_t> as_ints(const Attribute& attr) {
  switch (attr.kind) {
    case Attribute::Kind::DenseArray:
      return attr.ints;
    case Attribute::Kind::Array: {
      std::vector<int64_t> out;
      for (const auto& e : attr.elements) {
        if (e->kind != Attribute::Kind::Integer) throw Error("expected a list of integers");
        out.push_back(e->integer);
      }
      return out;
    }
    case Attribute::Kind::DenseElements: {
      const HostTensor& t = attr.tensor;
      std::vector<int64_t> out(static_cast<size_t>(t.size()));
      visit_dtype(t.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T>) {
          const T* p = t.data_as<T>();
          for (int64_t i = 0; i < t.size(); ++i) out[i] = static_cast<int64_t>(p[i]);
        } else {
          throw Error("expected integer elements, got " + t.type_string());
        }
      });
      return out;
    }
    case Attribute::Kind::Integer:
      return {attr.integer};
    default:
      throw Error("expected a list of integers");
  }
}

Value* Block::add_argument(Type type) {
  auto v = std::make_unique<Value>();
  v->type = std::move(type);
  v->owner_block = this;
  v->index = static_cast<int>(arguments.size());
  arguments.push_back(std::move(v));
  return arguments.back().get();
}

Operation* Block::push_back(std::unique_ptr<Operation> op) {
  op->parent = this;
  ops.push_back(std::move(op));
  return ops.back().get();
}

Block& Region::add_block() {
  blocks.push_back(std::make_unique<Block>());
  blocks.back()->parent = this;
  return *blocks.back();
}

Value* Operation::add_result(Type type) {
  auto v = std::make_unique<Value>();
  v->type = std::move(type);
  v->defining_op = this;
  v->index = static_cast<int>(results.size());
  results.push_back(std::move(v));
  return results.back().get();
}

Region& Operation::add_region() {
  regions.push_back(std::make_unique<Region>());
  regions.back()->parent_op = this;
  return *regions.back();
}

const Attribute* Operation::attr(std::string_view attr_name) const {
  for (const auto& a : attributes)
    if (a.name == attr_name) return a.value.get();
  return nullptr;
}

void Operation::set_attr(std::string attr_name, AttrRef value) {
  for (auto& a : attributes) {
    if (a.name == attr_name) {
      a.value = std::move(value);
      return;
    }
  }
  attributes.push_back({std::move(attr_name), std::move(value)});
}

std::string Operation::where() const {
  if (line == 0) return name;
  return name + " at " + std::to_string(line) + ":" + std::to_string(column);
}

std::vector<int64_t> Operation::ints(std::string_view attr_name) const {
  const Attribute* a = attr(attr_name);
  if (!a) throw Error(where() + ": missing attribute '" + std::string(attr_name) + "'");
  try {
    return as_ints(*a);
  } catch (const Error& e) {
    throw Error(where() + ": attribute '" + std::string(attr_name) + "': " + e.what());
  }
}

std::optional<std::vector<int64_t>> Operation::ints_if_present(std::string_view attr_name) const {
  if (!attr(attr_name)) return std::nullopt;
  return ints(attr_name);
}

int64_t Operation::int_attr(std::string_view attr_name) const {
  const Attribute* a = attr(attr_name);
  if (!a || a->kind != Attribute::Kind::Integer)
    throw Error(where() + ": missing integer attribute '" + std::string(attr_name) + "'");
  return a->integer;
}

std::string_view Operation::enum_attr(std::string_view attr_name) const {
  const Attribute* a = attr(attr_name);
  if (!a || a->kind != Attribute::Kind::Enum)
    throw Error(where() + ": missing enum attribute '" + std::string(attr_name) + "'");
  return a->enum_value;
}

Function::Function() {
  body.add_block();
}

std::vector<Type> Function::arg_types() const {
  std::vector<Type> types;
  for (const auto& a : entry().arguments) types.push_back(a->type);
  return types;
}

Function* Module::lookup(std::string_view fn_name) const {
  for (const auto& f : functions)
    if (f->name == fn_name) return f.get();
  return nullptr;
}

Function& Module::add_function(std::string fn_name) {
  functions.push_back(std::make_unique<Function>());
  functions.back()->name = std::move(fn_name);
  return *functions.back();
}

std::unique_ptr<Operation> make_op(std::string op_name, std::vector<Value*> operands,
                                   const std::vector<Type>& result_types) {
  auto op = std::make_unique<Operation>();
  op->name = std::move(op_name);
  op->operands = std::move(operands);
  for (const auto& t : result_types) op->add_result(t);
  return op;
}

}  // namespace cujax::ir
