#include "compiler/refine_shapes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"

namespace cujax::compiler {

namespace {

using ir::Operation;
using ir::Type;
using ir::Value;
using Ints = std::vector<int64_t>;

// Sizes are folded only for the small integer tensors that compute them.
constexpr int64_t kMaxFolded = 64;

const std::set<std::string, std::less<>> kElementwise = {"stablehlo.abs",
                                                         "stablehlo.add",
                                                         "stablehlo.and",
                                                         "stablehlo.atan2",
                                                         "stablehlo.cbrt",
                                                         "stablehlo.ceil",
                                                         "stablehlo.clamp",
                                                         "stablehlo.compare",
                                                         "stablehlo.complex",
                                                         "stablehlo.convert",
                                                         "stablehlo.cosine",
                                                         "stablehlo.count_leading_zeros",
                                                         "stablehlo.divide",
                                                         "stablehlo.exponential",
                                                         "stablehlo.exponential_minus_one",
                                                         "stablehlo.floor",
                                                         "stablehlo.imag",
                                                         "stablehlo.is_finite",
                                                         "stablehlo.log",
                                                         "stablehlo.log_plus_one",
                                                         "stablehlo.logistic",
                                                         "stablehlo.maximum",
                                                         "stablehlo.minimum",
                                                         "stablehlo.multiply",
                                                         "stablehlo.negate",
                                                         "stablehlo.not",
                                                         "stablehlo.or",
                                                         "stablehlo.popcnt",
                                                         "stablehlo.power",
                                                         "stablehlo.real",
                                                         "stablehlo.remainder",
                                                         "stablehlo.round_nearest_afz",
                                                         "stablehlo.round_nearest_even",
                                                         "stablehlo.rsqrt",
                                                         "stablehlo.select",
                                                         "stablehlo.shift_left",
                                                         "stablehlo.shift_right_arithmetic",
                                                         "stablehlo.shift_right_logical",
                                                         "stablehlo.sign",
                                                         "stablehlo.sine",
                                                         "stablehlo.sqrt",
                                                         "stablehlo.subtract",
                                                         "stablehlo.tan",
                                                         "stablehlo.tanh",
                                                         "stablehlo.xor",
                                                         "stablehlo.reduce_precision",
                                                         "stablehlo.optimization_barrier"};

bool folds(const Type& t) {
  return !t.is_token && !t.is_quantized() && !is_dynamic(t.shape) &&
         (is_integer(t.dtype) || t.dtype == DType::Bool) && t.num_elements() <= kMaxFolded;
}

// x as the element type `d` holds it (wrapping as the program's integer arithmetic does).
int64_t wrap(int64_t x, DType d) {
  if (d == DType::Bool) return x != 0;
  int64_t out = x;
  visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) out = static_cast<int64_t>(static_cast<T>(x));
  });
  return out;
}

HostTensor tensor_of(const Type& t, const Ints& v) {
  HostTensor out = HostTensor::uninitialized(t.dtype, t.shape);
  if (t.dtype == DType::Bool) {
    for (size_t i = 0; i < v.size(); ++i) out.data_as<bool>()[i] = v[i] != 0;
    return out;
  }
  visit_dtype(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>)
      for (size_t i = 0; i < v.size(); ++i) out.data_as<T>()[i] = static_cast<T>(v[i]);
  });
  return out;
}

Ints values_of(const HostTensor& t) {
  Ints v(static_cast<size_t>(t.size()));
  if (t.dtype() == DType::Bool) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data_as<bool>()[i];
    return v;
  }
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>)
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(t.data_as<T>()[i]);
  });
  return v;
}

std::string type_list(const std::vector<Value*>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i]->type.str();
  return s;
}

class Refiner {
 public:
  explicit Refiner(ir::Module& module) : module_(module) {}

  // Refines `f` for arguments of `args` (and the values of those in `known`); returns the
  // values its results are known to hold.
  std::vector<std::optional<Ints>> function(ir::Function& f, const std::vector<Type>& args,
                                            const std::vector<std::optional<Ints>>& known) {
    ir::Block& entry = f.entry();
    for (size_t i = 0; i < args.size(); ++i) {
      entry.arguments[i]->type = args[i];
      if (known[i]) known_[entry.arguments[i].get()] = *known[i];
    }
    for (const auto& b : f.body.blocks) block(*b);
    const Operation* ret = entry.terminator();
    std::vector<std::optional<Ints>> out;
    if (!ret) return out;
    f.result_types.clear();
    for (Value* v : ret->operands) {
      f.result_types.push_back(v->type);
      out.push_back(lookup(v));
    }
    return out;
  }

 private:
  std::optional<Ints> lookup(const Value* v) const {
    const auto it = known_.find(v);
    return it == known_.end() ? std::nullopt : std::optional<Ints>(it->second);
  }

  const Ints& need(const Operation& op, size_t i, const char* what) const {
    const auto it = known_.find(op.operands.at(i));
    if (it == known_.end())
      throw UnsupportedError(op.where() + ": its " + what +
                             " is not a constant once the shapes are known, so the op cannot be "
                             "made static");
    return it->second;
  }

  void block(ir::Block& b) {
    for (const auto& op : b.ops) operation(*op);
  }

  void set_known(Value* v, Ints values) {
    if (!folds(v->type)) return;
    for (int64_t& x : values) x = wrap(x, v->type.dtype);
    known_[v] = std::move(values);
  }

  // Rewrites `op` in place as `name` with the given operands, attributes and result types.
  static void become(Operation& op, std::string name, std::vector<Value*> operands,
                     std::vector<ir::NamedAttribute> attrs, const std::vector<Type>& results) {
    op.name = std::move(name);
    op.operands = std::move(operands);
    op.attributes = std::move(attrs);
    for (size_t i = 0; i < results.size(); ++i) op.result(i)->type = results[i];
  }

  static Type with_shape(const Type& t, Shape s) {
    Type out = t;
    out.shape = std::move(s);
    return out;
  }

  void operation(Operation& op) {
    const std::string& n = op.name;
    if (n == "func.call") return call(op);
    if (n == "stablehlo.custom_call") return custom_call(op);
    if (n == "stablehlo.while") {
      for (const auto& r : op.regions)
        for (size_t i = 0; i < op.operands.size() && i < r->front().arguments.size(); ++i)
          r->front().arguments[i]->type = op.operands[i]->type;
      for (size_t i = 0; i < op.num_results(); ++i) op.result(i)->type = op.operands[i]->type;
    }
    for (const auto& r : op.regions)
      for (const auto& b : r->blocks) block(*b);
    if ((n == "stablehlo.if" || n == "stablehlo.case") && !op.regions.empty()) {
      const Operation* ret = op.regions[0]->front().terminator();
      for (size_t i = 0; ret && i < op.num_results() && i < ret->operands.size(); ++i)
        op.result(i)->type = ret->operands[i]->type;
    }
    if (n == "stablehlo.get_dimension_size") {
      const int64_t d = op.int_attr("dimension");
      const Shape& s = op.operands.at(0)->type.shape;
      if (d < 0 || d >= static_cast<int64_t>(s.size()))
        throw UnsupportedError(op.where() + ": dimension " + std::to_string(d) +
                               " is out of range for " + op.operands[0]->type.str());
      const Type t = op.result()->type;
      become(op, "stablehlo.constant", {},
             {{"value", ir::Attribute::dense_elements(tensor_of(t, {s[d]}))}}, {t});
      set_known(op.result(), {s[d]});
      return;
    }
    if (n == "stablehlo.real_dynamic_slice") return real_dynamic_slice(op);
    if (n == "stablehlo.dynamic_broadcast_in_dim") {
      const Ints dims = need(op, 1, "output_dimensions");
      ir::NamedAttribute bd{"broadcast_dimensions",
                            ir::Attribute::dense_array(op.ints("broadcast_dimensions"))};
      return become(op, "stablehlo.broadcast_in_dim", {op.operands[0]}, {bd},
                    {with_shape(op.result()->type, dims)});
    }
    if (n == "stablehlo.dynamic_reshape") {
      const Ints dims = need(op, 1, "output_shape");
      Value* x = op.operands[0];
      become(op, "stablehlo.reshape", {x}, {}, {with_shape(op.result()->type, dims)});
      if (auto k = lookup(x)) set_known(op.result(), *k);
      return;
    }
    if (n == "stablehlo.dynamic_iota") {
      const Ints dims = need(op, 0, "output_shape");
      ir::NamedAttribute d{"iota_dimension",
                           ir::Attribute::integer_attr(op.int_attr("iota_dimension"), DType::I64)};
      return become(op, "stablehlo.iota", {}, {d}, {with_shape(op.result()->type, dims)});
    }
    if (n == "stablehlo.dynamic_pad") return dynamic_pad(op);
    if (n == "stablehlo.dynamic_gather") return dynamic_gather(op);
    if (n == "stablehlo.dynamic_conv") return dynamic_conv(op);
    infer_result(op);
    fold(op);
  }

  // Result shapes of the ops whose result type may be dynamic in JAX's exports.
  void infer_result(Operation& op) {
    const std::string& n = op.name;
    bool dynamic = false;
    for (const auto& r : op.results)
      dynamic = dynamic || (!r->type.is_token && is_dynamic(r->type.shape));
    if (!dynamic) return;
    if (kElementwise.count(n) || n.starts_with("chlo.")) {
      // Every operand has the result's shape but for select's and clamp's scalars.
      const Value* widest = op.operands.at(0);
      for (const Value* v : op.operands)
        if (v->type.rank() > widest->type.rank()) widest = v;
      for (auto& r : op.results) r->type = with_shape(r->type, widest->type.shape);
    } else if (n == "stablehlo.transpose") {
      const Ints perm = op.ints("permutation");
      Shape s;
      for (int64_t p : perm) s.push_back(op.operands[0]->type.shape.at(static_cast<size_t>(p)));
      op.result()->type = with_shape(op.result()->type, s);
    } else if (n == "stablehlo.reduce") {
      const Ints dims = op.ints("dimensions");
      const size_t inputs = op.num_results();
      for (size_t i = 0; i < inputs; ++i) {
        Shape s;
        const Shape& in = op.operands[i]->type.shape;
        for (size_t d = 0; d < in.size(); ++d)
          if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
            s.push_back(in[d]);
        op.result(i)->type = with_shape(op.result(i)->type, s);
      }
    } else if (n == "stablehlo.sort") {
      for (size_t i = 0; i < op.num_results(); ++i) op.result(i)->type = op.operands[i]->type;
    } else if (n == "stablehlo.concatenate") {
      const int64_t d = op.int_attr("dimension");
      Shape s = op.operands.at(0)->type.shape;
      s.at(static_cast<size_t>(d)) = 0;
      for (const Value* v : op.operands) s[d] += v->type.shape.at(static_cast<size_t>(d));
      op.result()->type = with_shape(op.result()->type, s);
    } else if (n == "stablehlo.slice") {
      const Ints a = op.ints("start_indices"), b = op.ints("limit_indices"), c = op.ints("strides");
      Shape s;
      for (size_t i = 0; i < a.size(); ++i) s.push_back((b[i] - a[i] + c[i] - 1) / c[i]);
      op.result()->type = with_shape(op.result()->type, s);
    } else if (n == "stablehlo.dot_general") {
      const ir::Attribute* dn = op.attr("dot_dimension_numbers");
      auto field = [&](const char* f) {
        const ir::Attribute* a = dn ? dn->field(f) : nullptr;
        return a ? ir::as_ints(*a) : Ints{};
      };
      const Ints lb = field("lhs_batching_dimensions"), rb = field("rhs_batching_dimensions");
      const Ints lc = field("lhs_contracting_dimensions"), rc = field("rhs_contracting_dimensions");
      const Shape& l = op.operands[0]->type.shape;
      const Shape& r = op.operands[1]->type.shape;
      auto in = [](const Ints& v, size_t d) {
        return std::find(v.begin(), v.end(), static_cast<int64_t>(d)) != v.end();
      };
      Shape s;
      for (int64_t d : lb) s.push_back(l.at(static_cast<size_t>(d)));
      for (size_t d = 0; d < l.size(); ++d)
        if (!in(lb, d) && !in(lc, d)) s.push_back(l[d]);
      for (size_t d = 0; d < r.size(); ++d)
        if (!in(rb, d) && !in(rc, d)) s.push_back(r[d]);
      op.result()->type = with_shape(op.result()->type, s);
    } else {
      throw UnsupportedError(op.where() + ": cannot refine the result type " +
                             op.result()->type.str() + " of " + n + " from its operands (" +
                             type_list(op.operands) + ")");
    }
  }

  // Integer arithmetic on the values that size things, as the program would compute it.
  void fold(Operation& op) {
    if (op.num_results() != 1 || !folds(op.result()->type)) return;
    const std::string& n = op.name;
    Value* r = op.result();
    if (n == "stablehlo.constant") {
      const ir::Attribute* v = op.attr("value");
      if (v && v->kind == ir::Attribute::Kind::DenseElements) {
        Ints vals = values_of(v->tensor);
        if (static_cast<int64_t>(vals.size()) == 1 && r->type.num_elements() != 1)
          vals.assign(static_cast<size_t>(r->type.num_elements()), vals[0]);  // a splat
        if (static_cast<int64_t>(vals.size()) == r->type.num_elements()) set_known(r, vals);
      }
      return;
    }
    std::vector<Ints> in;
    for (Value* v : op.operands) {
      auto k = lookup(v);
      if (!k) return;
      in.push_back(std::move(*k));
    }
    const size_t count = static_cast<size_t>(r->type.num_elements());
    if (n == "stablehlo.convert" || n == "stablehlo.reshape") return set_known(r, in[0]);
    if (n == "stablehlo.broadcast_in_dim") {
      if (in[0].size() == 1) set_known(r, Ints(count, in[0][0]));
      return;
    }
    if (n == "stablehlo.concatenate") {
      if (r->type.rank() != 1) return;
      Ints out;
      for (const Ints& v : in) out.insert(out.end(), v.begin(), v.end());
      return set_known(r, out);
    }
    if (n == "stablehlo.slice") {
      if (r->type.rank() != 1) return;
      const Ints a = op.ints("start_indices"), b = op.ints("limit_indices"), c = op.ints("strides");
      Ints out;
      for (int64_t i = a[0]; i < b[0]; i += c[0]) out.push_back(in[0].at(static_cast<size_t>(i)));
      return set_known(r, out);
    }
    if (n == "stablehlo.select") {
      Ints out(count);
      for (size_t i = 0; i < count; ++i)
        out[i] = in[0][in[0].size() == 1 ? 0 : i] ? in[1][i] : in[2][i];
      return set_known(r, out);
    }
    const bool is_unsigned = is_unsigned_int(op.operands[0]->type.dtype);
    const DType t0 = op.operands[0]->type.dtype;
    std::optional<int64_t> (*unary)(int64_t, DType) = nullptr;
    if (n == "stablehlo.negate")
      unary = [](int64_t x, DType) { return std::optional<int64_t>(-x); };
    if (n == "stablehlo.abs")
      unary = [](int64_t x, DType) { return std::optional<int64_t>(x < 0 ? -x : x); };
    if (n == "stablehlo.not")
      unary = [](int64_t x, DType d) { return std::optional<int64_t>(d == DType::Bool ? !x : ~x); };
    if (unary) {
      Ints out(count);
      for (size_t i = 0; i < count; ++i) out[i] = *unary(in[0][i], t0);
      return set_known(r, out);
    }
    if (in.size() != 2 || in[0].size() != count || in[1].size() != count) return;
    const std::string dir =
        n == "stablehlo.compare" ? std::string(op.enum_attr("comparison_direction")) : "";
    Ints out(count);
    for (size_t i = 0; i < count; ++i) {
      const int64_t a = in[0][i], b = in[1][i];
      const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
      auto lt = [&] { return is_unsigned ? ua < ub : a < b; };
      int64_t v;
      if (n == "stablehlo.add")
        v = static_cast<int64_t>(ua + ub);
      else if (n == "stablehlo.subtract")
        v = static_cast<int64_t>(ua - ub);
      else if (n == "stablehlo.multiply")
        v = static_cast<int64_t>(ua * ub);
      else if (n == "stablehlo.divide" || n == "stablehlo.remainder") {
        if (b == 0 || (!is_unsigned && b == -1)) return;  // left to the program
        const bool div = n == "stablehlo.divide";
        v = is_unsigned ? static_cast<int64_t>(div ? ua / ub : ua % ub) : (div ? a / b : a % b);
      } else if (n == "stablehlo.maximum")
        v = lt() ? b : a;
      else if (n == "stablehlo.minimum")
        v = lt() ? a : b;
      else if (n == "stablehlo.and")
        v = a & b;
      else if (n == "stablehlo.or")
        v = a | b;
      else if (n == "stablehlo.xor")
        v = a ^ b;
      else if (dir == "EQ")
        v = a == b;
      else if (dir == "NE")
        v = a != b;
      else if (dir == "LT")
        v = lt();
      else if (dir == "GE")
        v = !lt();
      else if (dir == "GT")
        v = a != b && !lt();
      else if (dir == "LE")
        v = a == b || lt();
      else
        return;
      out[i] = v;
    }
    set_known(r, out);
  }

  void real_dynamic_slice(Operation& op) {
    const Ints start = need(op, 1, "start_indices");
    const Ints limit = need(op, 2, "limit_indices");
    const Ints strides = need(op, 3, "strides");
    const Shape& in = op.operands[0]->type.shape;
    Shape s;
    for (size_t i = 0; i < in.size(); ++i) {
      if (i >= start.size() || i >= limit.size() || i >= strides.size() || strides[i] <= 0 ||
          start[i] < 0 || limit[i] < start[i] || limit[i] > in[i])
        throw Error(op.where() + ": the slice [" + shape_to_string(start) + ", " +
                    shape_to_string(limit) + ") with strides " + shape_to_string(strides) +
                    " does not fit " + op.operands[0]->type.str());
      s.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
    }
    become(op, "stablehlo.slice", {op.operands[0]},
           {{"start_indices", ir::Attribute::dense_array(start)},
            {"limit_indices", ir::Attribute::dense_array(limit)},
            {"strides", ir::Attribute::dense_array(strides)}},
           {with_shape(op.result()->type, s)});
  }

  // gather with slice_sizes from its third operand; the result shape as the spec gives it: the
  // indices' dimensions but index_vector_dim (batch), and at offset_dims the slice sizes of the
  // dimensions neither collapsed nor operand batching.
  void dynamic_gather(Operation& op) {
    const Ints sizes = need(op, 2, "slice_sizes");
    const ir::Attribute* dn = op.attr("dimension_numbers");
    auto field = [&](const char* name) {
      const ir::Attribute* f = dn ? dn->field(name) : nullptr;
      return f ? ir::as_ints(*f) : Ints{};
    };
    const Ints offset = field("offset_dims"), collapsed = field("collapsed_slice_dims"),
               batching = field("operand_batching_dims");
    const ir::Attribute* ivd_attr = dn ? dn->field("index_vector_dim") : nullptr;
    const int64_t ivd = ivd_attr ? ivd_attr->integer : 0;
    const Shape& operand = op.operands[0]->type.shape;
    const Shape& indices = op.operands[1]->type.shape;
    if (sizes.size() != operand.size())
      throw Error(op.where() + ": slice_sizes " + shape_to_string(sizes) + " do not match " +
                  op.operands[0]->type.str());
    auto has = [](const Ints& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
    Ints window, batch;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] < 0 || sizes[d] > operand[d])
        throw Error(op.where() + ": slice_sizes " + shape_to_string(sizes) + " do not fit " +
                    op.operands[0]->type.str());
      const auto di = static_cast<int64_t>(d);
      if (!has(collapsed, di) && !has(batching, di)) window.push_back(sizes[d]);
    }
    for (size_t d = 0; d < indices.size(); ++d)
      if (static_cast<int64_t>(d) != ivd) batch.push_back(indices[d]);
    if (window.size() != offset.size())
      throw Error(op.where() + ": " + std::to_string(offset.size()) + " offset_dims for " +
                  std::to_string(window.size()) + " window dimensions");
    Shape s;
    size_t w = 0, b = 0;
    for (size_t d = 0; d < offset.size() + batch.size(); ++d)
      s.push_back(has(offset, static_cast<int64_t>(d)) ? window.at(w++) : batch.at(b++));
    std::vector<ir::NamedAttribute> attrs = op.attributes;
    attrs.push_back({"slice_sizes", ir::Attribute::dense_array(sizes)});
    become(op, "stablehlo.gather", {op.operands[0], op.operands[1]}, std::move(attrs),
           {with_shape(op.result()->type, s)});
  }

  // convolution with its padding from the third operand (N x 2, low and high per spatial
  // dimension); the result shape as the spec gives it.
  void dynamic_conv(Operation& op) {
    const Ints pad = need(op, 2, "padding");
    const Shape& lhs = op.operands[0]->type.shape;
    const Shape& rhs = op.operands[1]->type.shape;
    const size_t ns = lhs.size() >= 2 ? lhs.size() - 2 : 0;
    if (pad.size() != 2 * ns || rhs.size() != lhs.size())
      throw Error(op.where() + ": padding of " + std::to_string(pad.size()) + " values for " +
                  op.operands[0]->type.str() + " and " + op.operands[1]->type.str());
    const ir::Attribute* dn = op.attr("dimension_numbers");
    auto int_field = [&](const char* name) -> int64_t {
      const ir::Attribute* f = dn ? dn->field(name) : nullptr;
      if (!f) throw UnsupportedError(op.where() + ": dimension_numbers lack " + name);
      return f->integer;
    };
    auto ints_field = [&](const char* name) {
      const ir::Attribute* f = dn ? dn->field(name) : nullptr;
      return f ? ir::as_ints(*f) : Ints{};
    };
    auto ints_or_ones = [&](const char* name) {
      auto v = op.ints_if_present(name);
      return v ? *v : Ints(ns, 1);
    };
    const Ints ls = ints_field("input_spatial_dimensions"),
               ks = ints_field("kernel_spatial_dimensions"),
               os = ints_field("output_spatial_dimensions");
    const Ints strides = ints_or_ones("window_strides"), ldil = ints_or_ones("lhs_dilation"),
               rdil = ints_or_ones("rhs_dilation");
    const int64_t bgc = op.attr("batch_group_count") ? op.int_attr("batch_group_count") : 1;
    if (ls.size() != ns || ks.size() != ns || os.size() != ns || strides.size() != ns ||
        ldil.size() != ns || rdil.size() != ns || bgc <= 0)
      throw Error(op.where() + ": dimension numbers or window attributes do not match rank " +
                  std::to_string(lhs.size()));
    Shape s(lhs.size(), 0);
    s.at(static_cast<size_t>(int_field("output_batch_dimension"))) =
        lhs.at(static_cast<size_t>(int_field("input_batch_dimension"))) / bgc;
    s.at(static_cast<size_t>(int_field("output_feature_dimension"))) =
        rhs.at(static_cast<size_t>(int_field("kernel_output_feature_dimension")));
    for (size_t i = 0; i < ns; ++i) {
      const int64_t in = lhs.at(static_cast<size_t>(ls[i]));
      const int64_t k = rhs.at(static_cast<size_t>(ks[i]));
      const int64_t padded = (in > 0 ? (in - 1) * ldil[i] + 1 : 0) + pad[2 * i] + pad[2 * i + 1];
      const int64_t window = k > 0 ? (k - 1) * rdil[i] + 1 : 0;
      if (strides[i] <= 0)
        throw Error(op.where() + ": window stride " + std::to_string(strides[i]));
      s.at(static_cast<size_t>(os[i])) = padded < window ? 0 : (padded - window) / strides[i] + 1;
    }
    std::vector<ir::NamedAttribute> attrs;
    for (const auto& a : op.attributes)
      if (a.name != "padding") attrs.push_back(a);
    attrs.push_back(
        {"padding", ir::Attribute::dense_elements(
                        tensor_of(Type::tensor({static_cast<int64_t>(ns), 2}, DType::I64), pad))});
    become(op, "stablehlo.convolution", {op.operands[0], op.operands[1]}, std::move(attrs),
           {with_shape(op.result()->type, s)});
  }

  void dynamic_pad(Operation& op) {
    const Ints low = need(op, 2, "edge_padding_low");
    const Ints high = need(op, 3, "edge_padding_high");
    const Ints interior = need(op, 4, "interior_padding");
    const Shape& in = op.operands[0]->type.shape;
    Shape s;
    for (size_t i = 0; i < in.size(); ++i)
      s.push_back(low.at(i) + high.at(i) + in[i] +
                  std::max<int64_t>(in[i] - 1, 0) * interior.at(i));
    become(op, "stablehlo.pad", {op.operands[0], op.operands[1]},
           {{"edge_padding_low", ir::Attribute::dense_array(low)},
            {"edge_padding_high", ir::Attribute::dense_array(high)},
            {"interior_padding", ir::Attribute::dense_array(interior)}},
           {with_shape(op.result()->type, s)});
  }

  void custom_call(Operation& op) {
    const ir::Attribute* t = op.attr("call_target_name");
    const std::string target = t ? t->text : "";
    if (target == "shape_assertion") return shape_assertion(op);
    if (target == "stablehlo.dynamic_rng_bit_generator") {
      const Ints shape = need(op, 1, "output_shape");
      const ir::Attribute* alg = op.attr("rng_algorithm");
      if (!alg) throw UnsupportedError(op.where() + ": " + target + " needs rng_algorithm");
      const auto alg_ref = ir::Attribute::enum_attr(alg->text, alg->enum_value);
      return become(op, "stablehlo.rng_bit_generator", {op.operands[0]},
                    {{"rng_algorithm", alg_ref}},
                    {op.operands[0]->type, with_shape(op.result(1)->type, shape)});
    }
    if (target == "stablehlo.dynamic_top_k") {
      const Ints k = need(op, 1, "k");
      Shape s = op.operands[0]->type.shape;
      if (s.empty() || k.size() != 1)
        throw UnsupportedError(op.where() + ": " + target +
                               " takes an operand of rank >= 1 and a scalar k");
      s.back() = k[0];
      return become(op, "chlo.top_k", {op.operands[0]},
                    {{"k", ir::Attribute::integer_attr(k[0], DType::I64)}},
                    {with_shape(op.result(0)->type, s), with_shape(op.result(1)->type, s)});
    }
    for (const auto& r : op.results)
      if (!r->type.is_token && is_dynamic(r->type.shape))
        throw UnsupportedError(op.where() + ": custom call @" + target +
                               " has a dynamic result type " + r->type.str() +
                               " that cujax cannot refine");
  }

  // custom_call @shape_assertion(%ok, %v0, %v1, ...) {error_message = "... {0} ... {1}"}.
  void shape_assertion(Operation& op) {
    const Ints ok = need(op, 0, "assertion");
    if (ok.size() == 1 && ok[0]) {
      op.name = "cujax.refined_away";  // removed once the walk is over
      return;
    }
    const ir::Attribute* m = op.attr("error_message");
    std::string msg = m ? m->text : "shape assertion failed";
    for (size_t i = 1; i < op.operands.size(); ++i) {
      const auto v = lookup(op.operands[i]);
      const std::string value = v && v->size() == 1 ? std::to_string((*v)[0]) : "?";
      const std::string key = "{" + std::to_string(i - 1) + "}";
      for (size_t at = msg.find(key); at != std::string::npos;
           at = msg.find(key, at + value.size()))
        msg.replace(at, key.size(), value);
    }
    throw Error(msg);
  }

  void call(Operation& op) {
    const ir::Attribute* callee = op.attr("callee");
    ir::Function* f = callee ? module_.lookup(callee->text) : nullptr;
    if (!f) throw UnsupportedError(op.where() + ": calls an undefined function");
    std::vector<Type> args;
    std::vector<std::optional<Ints>> known;
    std::string key;
    for (Value* v : op.operands) {
      args.push_back(v->type);
      known.push_back(lookup(v));
      key += v->type.str() + "=" + (known.back() ? shape_to_string(*known.back()) : "") + ";";
    }
    auto it = refined_.find(f->name);
    if (it == refined_.end()) {
      it = refined_.emplace(f->name, std::make_pair(key, function(*f, args, known))).first;
    } else if (it->second.first != key) {
      throw UnsupportedError(op.where() + ": @" + f->name +
                             " is called with two different shapes or dimension values; cujax "
                             "refines a function for one");
    }
    for (size_t i = 0; i < op.num_results() && i < f->result_types.size(); ++i) {
      op.result(i)->type = f->result_types[i];
      if (i < it->second.second.size() && it->second.second[i])
        set_known(op.result(i), *it->second.second[i]);
    }
  }

  ir::Module& module_;
  std::unordered_map<const Value*, Ints> known_;
  std::map<std::string, std::pair<std::string, std::vector<std::optional<Ints>>>> refined_;
};

bool dynamic_block(const ir::Block& b) {
  for (const auto& a : b.arguments)
    if (!a->type.is_token && is_dynamic(a->type.shape)) return true;
  for (const auto& op : b.ops) {
    for (const auto& r : op->results)
      if (!r->type.is_token && is_dynamic(r->type.shape)) return true;
    for (const auto& r : op->regions)
      for (const auto& nb : r->blocks)
        if (dynamic_block(*nb)) return true;
  }
  return false;
}

void drop_refined_away(ir::Block& b) {
  std::erase_if(b.ops, [](const auto& op) { return op->name == "cujax.refined_away"; });
  for (const auto& op : b.ops)
    for (const auto& r : op->regions)
      for (const auto& nb : r->blocks) drop_refined_away(*nb);
}

}  // namespace

bool has_dynamic_shapes(const ir::Module& module) {
  for (const auto& f : module.functions) {
    for (const Type& t : f->result_types)
      if (!t.is_token && is_dynamic(t.shape)) return true;
    for (const auto& b : f->body.blocks)
      if (dynamic_block(*b)) return true;
  }
  return false;
}

std::unique_ptr<ir::Module> refine_polymorphic_shapes(const ir::Module& module,
                                                      const std::vector<Shape>& arg_shapes) {
  std::unique_ptr<ir::Module> out = ir::parse_module(ir::print_module(module));
  ir::Function* main = out->lookup("main");
  if (!main) throw Error("refine shapes: the module has no @main");
  std::vector<Type> args = main->arg_types();
  if (args.size() != arg_shapes.size())
    throw Error("@main takes " + std::to_string(args.size()) + " arguments, got " +
                std::to_string(arg_shapes.size()) + " shapes");
  for (size_t i = 0; i < args.size(); ++i) {
    if (!shape_fits(arg_shapes[i], args[i].shape))
      throw Error("@main argument " + std::to_string(i) + " is " + args[i].str() + ", which a " +
                  shape_to_string(arg_shapes[i]) + " input does not fit");
    args[i].shape = arg_shapes[i];
  }
  Refiner refiner(*out);
  refiner.function(*main, args, std::vector<std::optional<Ints>>(args.size()));
  for (const auto& f : out->functions) {
    for (const auto& b : f->body.blocks) drop_refined_away(*b);
    for (const auto& b : f->body.blocks)
      if (dynamic_block(*b))
        throw UnsupportedError("@" + f->name +
                               " keeps dynamic dimensions after refining (a function @main does "
                               "not call?)");
  }
  return out;
}

}  // namespace cujax::compiler
