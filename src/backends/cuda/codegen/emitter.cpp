#include "backends/cuda/codegen/emitter.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <unordered_map>

#include "cujax/core/error.h"
#include "cujax/core/sha256.h"

namespace cujax::cuda::codegen {

namespace {

constexpr int kBlock = 256;
constexpr const char* kNamePlaceholder = "@KERNEL@";

// Functor of backends/common/elementwise.h per same-type element-wise op.
const std::map<std::string, std::string>& functors() {
  static const std::map<std::string, std::string> m = {
      {"stablehlo.abs", "Abs"},
      {"stablehlo.negate", "Negate"},
      {"stablehlo.sign", "Sign"},
      {"stablehlo.not", "Not"},
      {"stablehlo.popcnt", "Popcnt"},
      {"stablehlo.count_leading_zeros", "CountLeadingZeros"},
      {"stablehlo.ceil", "Ceil"},
      {"stablehlo.floor", "Floor"},
      {"stablehlo.round_nearest_afz", "RoundNearestAfz"},
      {"stablehlo.round_nearest_even", "RoundNearestEven"},
      {"stablehlo.sqrt", "Sqrt"},
      {"stablehlo.rsqrt", "Rsqrt"},
      {"stablehlo.cbrt", "Cbrt"},
      {"stablehlo.exponential", "Exp"},
      {"stablehlo.exponential_minus_one", "Expm1"},
      {"stablehlo.log", "Log"},
      {"stablehlo.log_plus_one", "Log1p"},
      {"stablehlo.logistic", "Logistic"},
      {"stablehlo.sine", "Sin"},
      {"stablehlo.cosine", "Cos"},
      {"stablehlo.tan", "Tan"},
      {"stablehlo.tanh", "Tanh"},
      {"stablehlo.add", "Add"},
      {"stablehlo.subtract", "Subtract"},
      {"stablehlo.multiply", "Multiply"},
      {"stablehlo.divide", "Divide"},
      {"stablehlo.remainder", "Remainder"},
      {"stablehlo.maximum", "Maximum"},
      {"stablehlo.minimum", "Minimum"},
      {"stablehlo.power", "Power"},
      {"stablehlo.atan2", "Atan2"},
      {"stablehlo.and", "And"},
      {"stablehlo.or", "Or"},
      {"stablehlo.xor", "Xor"},
      {"stablehlo.shift_left", "ShiftLeft"},
      {"stablehlo.shift_right_logical", "ShiftRightLogical"},
      {"stablehlo.shift_right_arithmetic", "ShiftRightArithmetic"},
  };
  return m;
}

std::string hex(uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

// The element at `bytes` as a C++ expression of its storage type, bit for bit.
std::string literal(DType t, const void* bytes) {
  uint64_t bits = 0;
  std::memcpy(&bits, bytes, size_of(t));
  switch (t) {
    case DType::Bool:
      return bits ? "true" : "false";
    case DType::F16:
      return "cujax::float16::from_bits(" + hex(bits, 4) + ")";
    case DType::BF16:
      return "cujax::bfloat16::from_bits(" + hex(bits, 4) + ")";
    case DType::F32:
      return "cujax::ew::from_bits<float>(" + hex(bits, 8) + "u)";
    case DType::F64:
      return "cujax::ew::from_bits<double>(" + hex(bits, 16) + "ull)";
    default:
      return "static_cast<" + c_type(t) + ">(" + hex(bits, 2 * size_of(t)) + "ull)";
  }
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Coordinate d of flat index `idx` in `shape`, as an expression.
std::string coordinate(const std::string& idx, const Shape& shape, size_t d) {
  const int64_t stride = strides_of(shape)[d];
  std::string e = stride == 1 ? idx : "(" + idx + " / " + std::to_string(stride) + ")";
  if (d > 0) e = "(" + e + " % " + std::to_string(shape[d]) + ")";
  return e;
}

class Emitter {
 public:
  Emitter(const ir::Block& block, const compiler::FusionGroup& group)
      : block_(block), group_(group) {
    for (size_t m : group.ops) {
      const ir::Operation& op = *block.ops[m];
      for (const auto& r : op.results) member_[r.get()] = &op;
    }
    for (size_t k = 0; k < group.inputs.size(); ++k) input_[group.inputs[k]] = k;
    for (size_t k = 0; k < group.outputs.size(); ++k) output_[group.outputs[k]] = k;
    for (size_t h : group.heroes) heroes_.push_back(block.ops[h].get());
  }

  FusionKernel run() {
    FusionKernel k;
    k.kind = group_.kind;
    for (const ir::Value* v : group_.inputs)
      k.params.push_back({v->type.dtype, v->type.shape, false});
    for (const ir::Value* v : group_.outputs)
      k.params.push_back({v->type.dtype, v->type.shape, true});
    k.block = kBlock;
    std::string names;
    int counted = 0;
    for (size_t m : group_.ops) {
      const std::string& n = block_.ops[m]->name;
      names +=
          std::string(counted++ ? ", " : "") + (n.rfind("stablehlo.", 0) == 0 ? n.substr(10) : n);
    }
    k.description = std::string(compiler::fusion_kind_name(group_.kind)) + " fusion of " +
                    std::to_string(counted) + " ops: " + names;
    std::ostringstream src;
    src << "#include \"backends/cuda/codegen/rtc/prelude.h\"\n"
        << "// " << k.description << "\n"
        << "extern \"C\" __global__ void __launch_bounds__(" << kBlock << ") " << kNamePlaceholder
        << "(";
    // A loop fusion's output may be written into the memory of a full-size input (a donated or
    // dead operand's): each thread loads its elements of every input before it stores its
    // outputs at the same indices, so those pointers may alias and are not __restrict__.
    const char* restrict_kw = group_.kind == compiler::FusionKind::Loop ? "" : "__restrict__ ";
    for (size_t i = 0; i < group_.inputs.size(); ++i)
      src << (i ? ", " : "") << "const " << c_type(group_.inputs[i]->type.dtype) << "* "
          << restrict_kw << "in" << i;
    for (size_t i = 0; i < group_.outputs.size(); ++i)
      src << (i || !group_.inputs.empty() ? ", " : "") << c_type(group_.outputs[i]->type.dtype)
          << "* " << restrict_kw << "out" << i;
    src << "@SCRATCH@) {\n";
    switch (group_.kind) {
      case compiler::FusionKind::Loop:
        k.grid = loop(src);
        break;
      case compiler::FusionKind::RowReduction:
        k.grid = row(src, k);
        break;
      case compiler::FusionKind::ColumnReduction:
        k.grid = column(src, k);
        break;
    }
    src << "}\n";
    k.source = src.str();
    const size_t at = k.source.find("@SCRATCH@");
    k.source.replace(at, 9,
                     k.scratch_slots > 0 ? ", unsigned long long* __restrict__ scratch, unsigned* "
                                           "__restrict__ counters"
                                         : "");
    k.name = "fusion_" + sha256_hex(k.source).substr(0, 16);
    k.source.replace(k.source.find(kNamePlaceholder), std::strlen(kNamePlaceholder), k.name);
    return k;
  }

 private:
  // The code of one phase: the flat index variable of its domain, the inputs already loaded
  // for that index, and the values computed so far (per value and index expression).
  struct Scope {
    std::ostringstream* out = nullptr;
    std::string indent;
    std::string index;
    std::map<const ir::Value*, std::string> direct;
    std::map<std::string, std::string> memo;
    std::map<const ir::Operation*, std::string> heroes;  // results, in the epilogue
  };

  std::string fresh(const char* prefix) { return prefix + std::to_string(next_++); }

  const ir::Operation& op_of(const ir::Value* v) const { return *member_.at(v); }

  std::string index_type(int64_t extent) const {
    return extent < (int64_t{1} << 30) ? "int" : "long long";
  }

  // Loads of V elements at `base` (bounded by `end`) for every input with `count` elements,
  // into arrays in<k>_v the scope reads as in<k>_v[k].
  void load_direct(Scope& s, int64_t count, int v, const std::string& base,
                   const std::string& end) {
    for (size_t k = 0; k < group_.inputs.size(); ++k) {
      const ir::Value* in = group_.inputs[k];
      if (in->type.num_elements() != count) continue;
      const std::string arr = "in" + std::to_string(k) + "_v";
      *s.out << s.indent << c_type(in->type.dtype) << " " << arr << "[" << v << "];\n"
             << s.indent << "cujax::rtc::load<" << v << ">(" << arr << ", in" << k << ", " << base
             << ", " << end << ");\n";
      s.direct[in] = arr + "[k]";
    }
  }

  // A variable (or literal) holding value v at flat index `idx` of v's shape.
  std::string at(Scope& s, const ir::Value* v, const std::string& idx) {
    const std::string key = std::to_string(reinterpret_cast<uintptr_t>(v)) + "@" + idx;
    if (auto it = s.memo.find(key); it != s.memo.end()) return it->second;
    std::string result = compute(s, v, idx);
    s.memo[key] = result;
    return result;
  }

  std::string define(Scope& s, DType t, const std::string& expr) {
    const std::string name = fresh("v");
    *s.out << s.indent << "const " << c_type(t) << " " << name << " = " << expr << ";\n";
    return name;
  }

  std::string compute(Scope& s, const ir::Value* v, const std::string& idx) {
    const DType t = v->type.dtype;
    if (auto it = input_.find(v); it != input_.end()) {
      if (idx == s.index)
        if (auto d = s.direct.find(v); d != s.direct.end()) return d->second;
      return define(s, t, "in" + std::to_string(it->second) + "[" + idx + "]");
    }
    const ir::Operation& op = op_of(v);
    if (std::find(heroes_.begin(), heroes_.end(), &op) != heroes_.end()) {
      auto h = s.heroes.find(&op);
      if (h == s.heroes.end())
        throw Error("codegen: a reduction's result is read before it exists");
      return h->second;
    }
    const std::string& name = op.name;
    const Shape& shape = v->type.shape;
    if (name == "stablehlo.reshape") return at(s, op.operands[0], idx);
    if (name == "stablehlo.broadcast_in_dim") {
      const ir::Value* x = op.operands[0];
      const int64_t n = x->type.num_elements();
      if (n == v->type.num_elements()) return at(s, x, idx);
      if (n == 1) return at(s, x, "0");
      const std::vector<int64_t> dims = op.ints("broadcast_dimensions");
      const std::vector<int64_t> xs = strides_of(x->type.shape);
      std::string expr;
      for (size_t j = 0; j < dims.size(); ++j) {
        if (x->type.shape[j] == 1) continue;
        std::string term = coordinate(idx, shape, static_cast<size_t>(dims[j]));
        if (xs[j] != 1) term += " * " + std::to_string(xs[j]);
        expr += (expr.empty() ? "" : " + ") + term;
      }
      const std::string key = "#" + expr;
      auto it = s.memo.find(key);
      if (it == s.memo.end()) {
        const std::string var = fresh("x");
        *s.out << s.indent << "const idx_t " << var << " = " << expr << ";\n";
        it = s.memo.emplace(key, var).first;
      }
      return at(s, x, it->second);
    }
    if (name == "stablehlo.constant") {
      const HostTensor& c = op.attr("value")->tensor;
      return at_literal(s, v, literal(t, c.data()));
    }
    if (name == "stablehlo.iota") {
      const size_t d = static_cast<size_t>(op.ints("iota_dimension").at(0));
      return define(s, t,
                    "cujax::ew::convert<" + c_type(t) + ">(static_cast<long long>(" +
                        coordinate(idx, shape, d) + "))");
    }
    // Element-wise: operands of the result's shape at the same index, scalars at 0.
    std::vector<std::string> a;
    for (const ir::Value* x : op.operands)
      a.push_back(at(s, x, x->type.rank() == 0 && v->type.rank() != 0 ? "0" : idx));
    if (auto f = functors().find(name); f != functors().end()) {
      std::string call = "cujax::ew::apply(cujax::ew::" + f->second + "{}";
      for (const std::string& x : a) call += ", " + x;
      return define(s, t, call + ")");
    }
    const DType in_t = op.operands.empty() ? t : op.operands[0]->type.dtype;
    if (name == "stablehlo.convert")
      return define(s, t, "cujax::ew::convert<" + c_type(t) + ">(" + a[0] + ")");
    if (name == "stablehlo.is_finite") return define(s, t, "cujax::ew::IsFinite{}(" + a[0] + ")");
    if (name == "stablehlo.reduce_precision")
      return define(s, t,
                    "cujax::ew::ReducePrecision{" +
                        std::to_string(op.attr("exponent_bits")->integer) + ", " +
                        std::to_string(op.attr("mantissa_bits")->integer) + "}(" + a[0] + ")");
    if (name == "stablehlo.select") return define(s, t, a[0] + " ? " + a[1] + " : " + a[2]);
    if (name == "stablehlo.clamp")
      return define(s, t, "cujax::rtc::clamp(" + a[0] + ", " + a[1] + ", " + a[2] + ")");
    if (name == "stablehlo.compare") {
      const std::string dir = "cujax::ew::Compare<cujax::ew::CompareDirection::" +
                              op.attr("comparison_direction")->enum_value + ">{}";
      const ir::Attribute* ct = op.attr("compare_type");
      if (ct && ct->enum_value == "TOTALORDER")
        return define(s, t,
                      dir + "(cujax::ew::total_order_key(" + a[0] +
                          "), cujax::ew::total_order_key(" + a[1] + "))");
      const std::string c = "cujax::ew::compute_t<" + c_type(in_t) + ", false>";
      return define(s, t,
                    dir + "(cujax::ew::to_compute<" + c + ">(" + a[0] +
                        "), cujax::ew::to_compute<" + c + ">(" + a[1] + "))");
    }
    throw UnsupportedError(op.where() + ": the fusion emitter has no code for " + name);
  }

  std::string at_literal(Scope& s, const ir::Value* v, const std::string& lit) {
    const std::string key = std::to_string(reinterpret_cast<uintptr_t>(v)) + "@*";
    if (auto it = s.memo.find(key); it != s.memo.end()) return it->second;
    const std::string var = define(s, v->type.dtype, lit);
    s.memo[key] = var;
    return var;
  }

  // Elements per thread step: as many as fit 16 bytes of the widest type moved at full size.
  int vector_width(int64_t count) const {
    size_t widest = 1;
    for (const ir::Value* v : group_.inputs)
      if (v->type.num_elements() == count) widest = std::max(widest, size_of(v->type.dtype));
    for (const ir::Value* v : group_.outputs)
      if (v->type.num_elements() == count) widest = std::max(widest, size_of(v->type.dtype));
    return static_cast<int>(std::min<size_t>(8, 16 / widest));
  }

  // Computes and stores (into out<k>_v[k], or out<k>[idx] when `arrays` is false) every output
  // with `count` elements.
  void write_outputs(Scope& s, int64_t count, bool arrays) {
    for (size_t k = 0; k < group_.outputs.size(); ++k) {
      const ir::Value* v = group_.outputs[k];
      if (v->type.num_elements() != count) continue;
      const std::string x = at(s, v, s.index);
      if (arrays)
        *s.out << s.indent << "out" << k << "_v[k] = " << x << ";\n";
      else
        *s.out << s.indent << "out" << k << "[" << s.index << "] = " << x << ";\n";
    }
  }

  void declare_output_arrays(Scope& s, int64_t count, int v) {
    for (size_t k = 0; k < group_.outputs.size(); ++k)
      if (group_.outputs[k]->type.num_elements() == count)
        *s.out << s.indent << c_type(group_.outputs[k]->type.dtype) << " out" << k << "_v[" << v
               << "];\n";
  }

  void store_output_arrays(Scope& s, int64_t count, int v, const std::string& base,
                           const std::string& end) {
    for (size_t k = 0; k < group_.outputs.size(); ++k)
      if (group_.outputs[k]->type.num_elements() == count)
        *s.out << s.indent << "cujax::rtc::store<" << v << ">(out" << k << ", out" << k << "_v, "
               << base << ", " << end << ");\n";
  }

  unsigned loop(std::ostringstream& src) {
    const int64_t n = group_.elements;
    const int v = vector_width(n);
    const int64_t blocks =
        std::min<int64_t>((n + int64_t{kBlock} * v - 1) / (int64_t{kBlock} * v), int64_t{1} << 16);
    src << "  using idx_t = " << index_type(n + blocks * kBlock * v) << ";\n"
        << "  constexpr idx_t n = " << n << ";\n"
        << "  constexpr int V = " << v << ";\n"
        << "  for (idx_t base = (static_cast<idx_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;"
           " base < n;\n"
        << "       base += static_cast<idx_t>(gridDim.x) * blockDim.x * V) {\n";
    std::ostringstream body;
    Scope s;
    s.out = &body;
    s.indent = "    ";
    s.index = "i";
    load_direct(s, n, v, "base", "n");
    declare_output_arrays(s, n, v);
    body << "#pragma unroll\n" << s.indent << "for (int k = 0; k < V; ++k) {\n";
    s.indent = "      ";
    body << s.indent << "const idx_t i = base + k;\n";
    const bool ragged = n % v != 0;
    if (ragged) {
      body << s.indent << "if (i < n) {\n";
      s.indent = "        ";
    }
    write_outputs(s, n, true);
    if (ragged) body << "      }\n";
    body << "    }\n";
    s.indent = "    ";
    store_output_arrays(s, n, v, "base", "n");
    src << body.str() << "  }\n";
    return static_cast<unsigned>(blocks);
  }

  std::string fold_type(size_t h) const {
    return "cujax::rtc::Fold<cujax::ew::" + functors().at(compiler::reduction_body(*heroes_[h])) +
           ", " + value_type(h) + ">";
  }
  std::string value_type(size_t h) const { return c_type(heroes_[h]->result(0)->type.dtype); }
  static std::string fold_name(const std::string& base, size_t h) {
    return base + std::to_string(h);
  }

  // The epilogue at output index `j` (already defined): each hero's result from its fold
  // `<fold><h>`, then every output of the results' size.
  void epilogue(std::ostringstream& body, const std::string& indent, const std::string& fold) {
    Scope e;
    e.out = &body;
    e.indent = indent;
    e.index = "j";
    for (size_t h = 0; h < heroes_.size(); ++h) {
      const std::string init = at(e, heroes_[h]->operands[1], "0");
      e.heroes[heroes_[h]] = define(e, heroes_[h]->result(0)->type.dtype,
                                    fold_name(fold, h) + ".result(" + init + ")");
    }
    write_outputs(e, heroes_[0]->result(0)->type.num_elements(), false);
  }

  // The reading phase's folds: each hero's operand at `i` added to `<fold><h>`.
  void fold_operands(Scope& s, std::ostringstream& body, const std::string& fold) {
    for (size_t h = 0; h < heroes_.size(); ++h) {
      const std::string x = at(s, heroes_[h]->operands[0], "i");
      body << s.indent << fold_name(fold, h) << ".add(" << x << ");\n";
    }
  }

  void declare_folds(std::ostringstream& src, const std::string& indent, const std::string& fold) {
    for (size_t h = 0; h < heroes_.size(); ++h)
      src << indent << fold_type(h) << " " << fold_name(fold, h) << ";\n";
  }

  // Blocks that share one row (or column block) fold their partials through `scratch` (per hero,
  // values then flags, `slots` words each); the last one to finish (counted in `counters`, zeroed
  // per launch) folds them in part order and computes the epilogue, so the result does not depend
  // on which block finishes last.
  void split_tail(std::ostringstream& src, const std::string& owner, const std::string& writer,
                  const std::string& reader, int lanes) {
    const std::string lane = lanes == 1 ? "" : " * " + std::to_string(lanes) + " + tx";
    const std::string slots = "static_cast<idx_t>(gridDim.x) * " + std::to_string(lanes);
    src << "  __shared__ bool last;\n"
        << "  if (" << writer << ") {\n";
    for (size_t h = 0; h < heroes_.size(); ++h) {
      const std::string base = std::to_string(2 * h) + " * " + slots;
      src << "    scratch[" << base << " + static_cast<idx_t>(blockIdx.x)" << lane
          << "] = cujax::rtc::to_raw(" << fold_name("partial", h) << ".value);\n"
          << "    scratch[" << base << " + " << slots << " + static_cast<idx_t>(blockIdx.x)" << lane
          << "] = " << fold_name("partial", h) << ".has;\n";
    }
    src << "    __threadfence();\n"
        << "  }\n"
        << "  __syncthreads();\n"
        << "  if (threadIdx.x == 0) last = atomicAdd(&counters[" << owner << "], 1u) == S - 1;\n"
        << "  __syncthreads();\n"
        << "  if (last && " << reader << ") {\n"
        << "    const volatile unsigned long long* parts = scratch;\n";
    declare_folds(src, "    ", "total");
    src << "    for (idx_t p = 0; p < S; ++p) {\n"
        << "      const idx_t at = (" << owner << " * S + p)" << lane << ";\n";
    for (size_t h = 0; h < heroes_.size(); ++h) {
      const std::string base = std::to_string(2 * h) + " * " + slots;
      src << "      " << fold_name("total", h) << ".merge(cujax::rtc::from_raw<" << value_type(h)
          << ">(static_cast<cujax::rtc::raw_t<" << value_type(h) << ">>(parts[" << base
          << " + at])), parts[" << base << " + " << slots << " + at] != 0);\n";
    }
    src << "    }\n";
  }

  unsigned row(std::ostringstream& src, FusionKernel& k) {
    const int64_t rows = group_.reduction.outer, k_len = group_.reduction.reduced;
    const int64_t n = group_.elements;
    const int tpr = k_len <= 1024 ? 32 : kBlock;
    const int rpb = kBlock / tpr;
    const int v = vector_width(n);
    // Long rows and few of them: split each row over several blocks, each sweeping its part at
    // least 4 times, until there are about 1024 blocks.
    const int64_t sweep = int64_t{kBlock} * v;
    const int64_t splits =
        tpr == kBlock ? std::max<int64_t>(1, std::min((k_len + 4 * sweep - 1) / (4 * sweep),
                                                      (1024 + rows - 1) / rows))
                      : 1;
    const int64_t part = ((k_len + splits - 1) / splits + v - 1) / v * v;
    src << "  using idx_t = " << index_type(n + sweep) << ";\n"
        << "  constexpr idx_t rows = " << rows << ", K = " << k_len << ";\n"
        << "  constexpr int TPR = " << tpr << ", RPB = " << rpb << ", V = " << v << ";\n";
    if (splits > 1)
      src << "  constexpr idx_t S = " << splits << ", P = " << part << ";\n"
          << "  const idx_t row = static_cast<idx_t>(blockIdx.x) / S;\n"
          << "  const idx_t lo = static_cast<idx_t>(blockIdx.x) % S * P;\n"
          << "  const idx_t hi = lo + P < K ? lo + P : K;\n";
    else
      src << "  const idx_t row = static_cast<idx_t>(blockIdx.x) * RPB + "
             "static_cast<idx_t>(threadIdx.x) / TPR;\n"
          << "  constexpr idx_t lo = 0, hi = K;\n";
    src << "  const idx_t t = static_cast<idx_t>(threadIdx.x) % TPR;\n";
    declare_folds(src, "  ", "partial");
    src << "  if (row < rows) {\n"
        << "    const idx_t end = row * K + hi;\n"
        << "    for (idx_t k0 = lo + t * V; k0 < hi; k0 += TPR * V) {\n"
        << "      const idx_t base = row * K + k0;\n";
    std::ostringstream body;
    Scope s;
    s.out = &body;
    s.indent = "      ";
    s.index = "i";
    load_direct(s, n, v, "base", "end");
    declare_output_arrays(s, n, v);
    body << "#pragma unroll\n"
         << "      for (int k = 0; k < V; ++k) {\n"
         << "        if (k0 + k < hi) {\n"
         << "          const idx_t i = base + k;\n";
    s.indent = "          ";
    fold_operands(s, body, "partial");
    write_outputs(s, n, true);
    body << "        }\n      }\n";
    s.indent = "      ";
    store_output_arrays(s, n, v, "base", "end");
    src << body.str() << "    }\n  }\n";
    for (size_t h = 0; h < heroes_.size(); ++h) {
      const std::string f = fold_name("partial", h);
      if (tpr == 32) {
        src << "  " << f << ".warp_merge(32);\n";
      } else {
        src << "  {\n"
            << "    __shared__ cujax::rtc::raw_t<" << value_type(h) << "> values[" << kBlock / 32
            << "];\n"
            << "    __shared__ bool flags[" << kBlock / 32 << "];\n"
            << "    cujax::rtc::block_merge<" << kBlock / 32 << ">(" << f << ", values, flags);\n"
            << "  }\n";
      }
    }
    std::ostringstream tail;
    if (splits > 1) {
      split_tail(src, "row", "t == 0", "t == 0", 1);
      k.scratch_slots = rows * splits * static_cast<int64_t>(heroes_.size());
      k.counters = rows;
      tail << "    const idx_t j = row;\n";
      epilogue(tail, "    ", "total");
    } else {
      src << "  if (t == 0 && row < rows) {\n";
      tail << "    const idx_t j = row;\n";
      epilogue(tail, "    ", "partial");
    }
    src << tail.str() << "  }\n";
    return static_cast<unsigned>(splits > 1 ? rows * splits : (rows + rpb - 1) / rpb);
  }

  unsigned column(std::ostringstream& src, FusionKernel& k) {
    const auto& r = group_.reduction;
    const int64_t n = group_.elements;
    const int64_t col_blocks = (r.inner + 31) / 32;
    const int64_t owners = r.outer * col_blocks;
    constexpr int kRowsPerBlock = kBlock / 32;
    // Few column blocks and long columns: split the rows over several blocks, each taking at
    // least 64 rows, until there are about 512 blocks.
    const int64_t splits =
        std::max<int64_t>(1, std::min((r.reduced + 63) / 64, (512 + owners - 1) / owners));
    const int64_t part = (r.reduced + splits - 1) / splits;
    src << "  using idx_t = " << index_type(n + kBlock) << ";\n"
        << "  constexpr idx_t R = " << r.reduced << ", I = " << r.inner << ", IB = " << col_blocks
        << ", S = " << splits << ", P = " << part << ";\n"
        << "  const idx_t tx = static_cast<idx_t>(threadIdx.x) % 32, ty = "
           "static_cast<idx_t>(threadIdx.x) / 32;\n"
        << "  const idx_t b = static_cast<idx_t>(blockIdx.x) / S;\n"
        << "  const idx_t lo = static_cast<idx_t>(blockIdx.x) % S * P;\n"
        << "  const idx_t hi = lo + P < R ? lo + P : R;\n"
        << "  const idx_t o = b / IB;\n"
        << "  const idx_t col = b % IB * 32 + tx;\n";
    declare_folds(src, "  ", "fold");
    src << "  if (col < I) {\n"
        << "    for (idx_t r = lo + ty; r < hi; r += " << kRowsPerBlock << ") {\n"
        << "      const idx_t i = (o * R + r) * I + col;\n";
    std::ostringstream body;
    Scope s;
    s.out = &body;
    s.indent = "      ";
    s.index = "i";
    fold_operands(s, body, "fold");
    write_outputs(s, n, false);
    src << body.str() << "    }\n  }\n";
    declare_folds(src, "  ", "partial");
    for (size_t h = 0; h < heroes_.size(); ++h) {
      const std::string t = value_type(h);
      src << "  {\n"
          << "    __shared__ cujax::rtc::raw_t<" << t << "> values[" << kRowsPerBlock << "][32];\n"
          << "    __shared__ bool flags[" << kRowsPerBlock << "][32];\n"
          << "    values[ty][tx] = cujax::rtc::to_raw(" << fold_name("fold", h) << ".value);\n"
          << "    flags[ty][tx] = " << fold_name("fold", h) << ".has;\n"
          << "    __syncthreads();\n"
          << "    if (ty == 0)\n"
          << "      for (int y = 0; y < " << kRowsPerBlock << "; ++y)\n"
          << "        " << fold_name("partial", h) << ".merge(cujax::rtc::from_raw<" << t
          << ">(values[y][tx]), flags[y][tx]);\n"
          << "  }\n";
    }
    std::ostringstream tail;
    if (splits > 1) {
      split_tail(src, "b", "ty == 0", "ty == 0 && col < I", 32);
      k.scratch_slots = owners * splits * 32 * static_cast<int64_t>(heroes_.size());
      k.counters = owners;
      tail << "    const idx_t j = o * I + col;\n";
      epilogue(tail, "    ", "total");
    } else {
      src << "  if (ty == 0 && col < I) {\n";
      tail << "    const idx_t j = o * I + col;\n";
      epilogue(tail, "    ", "partial");
    }
    src << tail.str() << "  }\n";
    return static_cast<unsigned>(owners * splits);
  }

  const ir::Block& block_;
  const compiler::FusionGroup& group_;
  std::vector<const ir::Operation*> heroes_;
  std::unordered_map<const ir::Value*, const ir::Operation*> member_;
  std::unordered_map<const ir::Value*, size_t> input_, output_;
  int next_ = 0;
};

}  // namespace

std::string c_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::I8:
      return "int8_t";
    case DType::I16:
      return "int16_t";
    case DType::I32:
      return "int32_t";
    case DType::I64:
      return "int64_t";
    case DType::U8:
      return "uint8_t";
    case DType::U16:
      return "uint16_t";
    case DType::U32:
      return "uint32_t";
    case DType::U64:
      return "uint64_t";
    case DType::F16:
      return "cujax::float16";
    case DType::BF16:
      return "cujax::bfloat16";
    case DType::F32:
      return "float";
    case DType::F64:
      return "double";
    default:
      break;  // the fusion planner keeps complex and narrow ops out of generated kernels
  }
  throw UnsupportedError("generated kernels: no " + std::string(mlir_name(t)) + " element type");
}

FusionKernel emit_fusion(const ir::Block& block, const compiler::FusionGroup& group) {
  return Emitter(block, group).run();
}

}  // namespace cujax::cuda::codegen
