#include "compiler/fusion.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "cujax/core/error.h"

namespace cujax::compiler {

namespace {

// Which element types an element-wise op accepts (the kTypes of its functor in
// backends/common/elementwise.h; a test checks that the two agree).
enum TypeMask : unsigned { kBool = 1, kInt = 2, kFloat = 4, kNumeric = kInt | kFloat, kAny = 7 };

struct ElementwiseOp {
  int arity;
  unsigned types;
};

const std::map<std::string, ElementwiseOp, std::less<>>& same_type_ops() {
  static const std::map<std::string, ElementwiseOp, std::less<>> m = {
      {"stablehlo.abs", {1, kNumeric}},
      {"stablehlo.negate", {1, kNumeric}},
      {"stablehlo.sign", {1, kNumeric}},
      {"stablehlo.not", {1, kInt | kBool}},
      {"stablehlo.popcnt", {1, kInt}},
      {"stablehlo.count_leading_zeros", {1, kInt}},
      {"stablehlo.ceil", {1, kFloat}},
      {"stablehlo.floor", {1, kFloat}},
      {"stablehlo.round_nearest_afz", {1, kFloat}},
      {"stablehlo.round_nearest_even", {1, kFloat}},
      {"stablehlo.sqrt", {1, kFloat}},
      {"stablehlo.rsqrt", {1, kFloat}},
      {"stablehlo.cbrt", {1, kFloat}},
      {"stablehlo.exponential", {1, kFloat}},
      {"stablehlo.exponential_minus_one", {1, kFloat}},
      {"stablehlo.log", {1, kFloat}},
      {"stablehlo.log_plus_one", {1, kFloat}},
      {"stablehlo.logistic", {1, kFloat}},
      {"stablehlo.sine", {1, kFloat}},
      {"stablehlo.cosine", {1, kFloat}},
      {"stablehlo.tan", {1, kFloat}},
      {"stablehlo.tanh", {1, kFloat}},
      {"stablehlo.reduce_precision", {1, kFloat}},
      {"stablehlo.add", {2, kAny}},
      {"stablehlo.subtract", {2, kNumeric}},
      {"stablehlo.multiply", {2, kAny}},
      {"stablehlo.divide", {2, kNumeric}},
      {"stablehlo.remainder", {2, kNumeric}},
      {"stablehlo.maximum", {2, kAny}},
      {"stablehlo.minimum", {2, kAny}},
      {"stablehlo.power", {2, kNumeric}},
      {"stablehlo.atan2", {2, kFloat}},
      {"stablehlo.and", {2, kInt | kBool}},
      {"stablehlo.or", {2, kInt | kBool}},
      {"stablehlo.xor", {2, kInt | kBool}},
      {"stablehlo.shift_left", {2, kInt}},
      {"stablehlo.shift_right_logical", {2, kInt}},
      {"stablehlo.shift_right_arithmetic", {2, kInt}},
  };
  return m;
}

unsigned type_bit(DType t) {
  if (t == DType::Bool) return kBool;
  return is_float(t) ? kFloat : kInt;
}

// The index arithmetic of generated kernels keeps shapes within this rank.
constexpr int64_t kMaxRank = 16;
// A group stops growing here, so that kernels stay quick to compile.
constexpr size_t kMaxMembers = 160;
// Reductions folded by one kernel: each costs registers in every thread.
constexpr size_t kMaxHeroes = 4;

enum class Role { None, Elementwise, Broadcast, Reshape, Leaf, Reduce };

bool is_splat(const HostTensor& t) {
  const size_t w = size_of(t.dtype());
  const auto* p = static_cast<const unsigned char*>(t.data());
  for (int64_t i = 1; i < t.size(); ++i)
    if (std::memcmp(p, p + i * w, w) != 0) return false;
  return true;
}

Role classify(const ir::Operation& op, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return Role::None;
  };
  if (op.num_results() != 1) return no("has " + std::to_string(op.num_results()) + " results");
  const ir::Type& r = op.result(0)->type;
  if (r.is_token) return no("produces a token");
  for (const ir::Value* v : op.operands)
    if (v->type.is_token) return no("reads a token");
  // Generated kernels have no complex arithmetic and no narrow types (int4, float8_e4m3fn, ...,
  // which compiler/narrow_types.cpp leaves only to converts, bitcasts and constants): such ops
  // keep their own kernels.
  if (is_complex(r.dtype)) return no("complex element type");
  for (const ir::Value* v : op.operands)
    if (is_complex(v->type.dtype)) return no("complex operand");
  if (is_narrow(r.dtype)) return no(std::string(numpy_name(r.dtype)) + " element type");
  for (const ir::Value* v : op.operands)
    if (is_narrow(v->type.dtype)) return no(std::string(numpy_name(v->type.dtype)) + " operand");
  if (r.rank() > kMaxRank) return no("rank above 16");
  if (r.num_elements() == 0) return no("empty result");
  for (const ir::Value* v : op.operands)
    if (v->type.num_elements() == 0) return no("empty operand");
  const std::string& name = op.name;
  auto operand = [&](size_t i) -> const ir::Type& { return op.operands[i]->type; };

  if (auto it = same_type_ops().find(name); it != same_type_ops().end()) {
    if (static_cast<int>(op.operands.size()) != it->second.arity) return no("unexpected arity");
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (operand(i) != r) return no("operand and result types differ");
    if (!(it->second.types & type_bit(r.dtype)))
      return no(std::string(mlir_name(r.dtype)) + " is not an element type of this op");
    if (name == "stablehlo.reduce_precision") {
      const ir::Attribute* e = op.attr("exponent_bits");
      const ir::Attribute* m = op.attr("mantissa_bits");
      if (!e || !m || e->kind != ir::Attribute::Kind::Integer ||
          m->kind != ir::Attribute::Kind::Integer || e->integer < 1 || m->integer < 0 ||
          e->integer > 64 || m->integer > 64)
        return no("invalid exponent_bits/mantissa_bits");
    }
    return Role::Elementwise;
  }
  if (name == "stablehlo.is_finite") {
    if (op.operands.size() != 1 || !is_float(operand(0).dtype) || r.dtype != DType::Bool ||
        r.shape != operand(0).shape)
      return no("is_finite needs a float operand and an i1 result of its shape");
    return Role::Elementwise;
  }
  if (name == "stablehlo.compare") {
    if (op.operands.size() != 2 || operand(0) != operand(1) || r.dtype != DType::Bool ||
        r.shape != operand(0).shape)
      return no("compare needs equal operand types and an i1 result");
    const ir::Attribute* d = op.attr("comparison_direction");
    static const char* kDirs[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
    if (!d || d->kind != ir::Attribute::Kind::Enum ||
        std::none_of(std::begin(kDirs), std::end(kDirs),
                     [&](const char* x) { return d->enum_value == x; }))
      return no("unknown comparison_direction");
    if (const ir::Attribute* ct = op.attr("compare_type")) {
      static const char* kTypes[] = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "NOTYPE"};
      if (ct->kind != ir::Attribute::Kind::Enum ||
          std::none_of(std::begin(kTypes), std::end(kTypes),
                       [&](const char* x) { return ct->enum_value == x; }))
        return no("unknown compare_type");
      if (ct->enum_value == "TOTALORDER" && !is_float(operand(0).dtype))
        return no("TOTALORDER on a non-float type");
    }
    return Role::Elementwise;
  }
  if (name == "stablehlo.select") {
    if (op.operands.size() != 3 || operand(0).dtype != DType::Bool || operand(1) != r ||
        operand(2) != r || (operand(0).rank() != 0 && operand(0).shape != r.shape))
      return no("select needs an i1 scalar or same-shape predicate");
    return Role::Elementwise;
  }
  if (name == "stablehlo.clamp") {
    if (op.operands.size() != 3 || operand(1) != r) return no("clamp operand/result types differ");
    for (size_t i : {size_t{0}, size_t{2}})
      if (operand(i).dtype != r.dtype || (operand(i).rank() != 0 && operand(i).shape != r.shape))
        return no("clamp bounds must be scalars or match the operand");
    return Role::Elementwise;
  }
  if (name == "stablehlo.convert") {
    if (op.operands.size() != 1 || operand(0).shape != r.shape) return no("convert changes shape");
    return Role::Elementwise;
  }
  if (name == "stablehlo.broadcast_in_dim") {
    if (op.operands.size() != 1 || operand(0).dtype != r.dtype) return no("malformed broadcast");
    const auto dims = op.ints_if_present("broadcast_dimensions");
    if (!dims || dims->size() != operand(0).shape.size()) return no("malformed broadcast");
    for (size_t j = 0; j < dims->size(); ++j) {
      const int64_t d = (*dims)[j];
      if (d < 0 || d >= r.rank() || (j > 0 && d <= (*dims)[j - 1]))
        return no("broadcast_dimensions are not increasing (a transpose)");
      if (operand(0).shape[j] != 1 && operand(0).shape[j] != r.shape[d])
        return no("malformed broadcast");
    }
    return Role::Broadcast;
  }
  if (name == "stablehlo.reshape") {
    if (op.operands.size() != 1 || operand(0).dtype != r.dtype ||
        operand(0).num_elements() != r.num_elements())
      return no("malformed reshape");
    return Role::Reshape;
  }
  if (name == "stablehlo.constant") {
    const ir::Attribute* v = op.attr("value");
    if (!v || v->kind != ir::Attribute::Kind::DenseElements || v->tensor.dtype() != r.dtype ||
        v->tensor.size() != r.num_elements())
      return no("constant without dense elements of its type");
    if (!is_splat(v->tensor)) return no("constant with more than one distinct element");
    return Role::Leaf;
  }
  if (name == "stablehlo.iota") {
    const auto dim = op.ints_if_present("iota_dimension");
    if (!dim || dim->size() != 1 || (*dim)[0] < 0 || (*dim)[0] >= r.rank())
      return no("malformed iota");
    return Role::Leaf;
  }
  if (name == "stablehlo.reduce") {
    ReductionShape shape;
    std::string reason;
    if (!reduction_shape(op, &shape, &reason)) return no(reason);
    return Role::Reduce;
  }
  return no("not an element-wise, broadcast, reshape or reduce op");
}

// The values `op`'s regions read from enclosing blocks.
void captured_values(const ir::Operation& op, std::vector<const ir::Value*>& out) {
  std::unordered_set<const ir::Value*> inside;
  std::vector<const ir::Operation*> stack = {&op};
  std::vector<const ir::Value*> used;
  while (!stack.empty()) {
    const ir::Operation* o = stack.back();
    stack.pop_back();
    for (const auto& region : o->regions)
      for (const auto& block : region->blocks) {
        for (const auto& a : block->arguments) inside.insert(a.get());
        for (const auto& inner : block->ops) {
          for (const auto& r : inner->results) inside.insert(r.get());
          for (const ir::Value* v : inner->operands) used.push_back(v);
          stack.push_back(inner.get());
        }
      }
  }
  for (const ir::Value* v : used)
    if (!inside.count(v) && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
}

// Ops whose order among themselves is kept: they may have effects beyond their results.
bool is_ordered(const ir::Operation& op) {
  if (op.num_results() == 0 || !op.regions.empty()) return true;
  if (op.name == "stablehlo.custom_call" || op.name == "func.call") return true;
  for (const ir::Value* v : op.operands)
    if (v->type.is_token) return true;
  for (const auto& r : op.results)
    if (r->type.is_token) return true;
  return false;
}

enum Side : uint8_t { kInputSide = 1, kEpilogueSide = 2 };

class Planner {
 public:
  Planner(const ir::Block& block, size_t num_ops) : block_(block), n_(num_ops) {}

  FusionPlan run() {
    index_uses();
    for (size_t k = n_; k-- > 0;) visit(k);
    merge_siblings();
    return finish();
  }

 private:
  struct Work {
    FusionKind kind = FusionKind::Loop;
    int64_t elements = 0;        // loop: iteration count; reductions: the hero operand's
    int64_t out_elements = 0;    // reductions: the hero result's
    std::vector<size_t> heroes;  // reductions: the reduce ops
    ReductionShape reduction;
    std::vector<size_t> members;
    bool merged = false;  // into a sibling (merge_siblings)
  };

  const ir::Operation& op(size_t i) const { return *block_.ops[i]; }
  int64_t count(size_t i) const { return op(i).result(0)->type.num_elements(); }

  void index_uses() {
    role_.resize(n_);
    group_of_.assign(n_, -1);
    side_.assign(n_, 0);
    users_.resize(n_);
    returned_.assign(n_, false);
    standalone_.assign(n_, false);
    ordered_.resize(n_);
    for (size_t i = 0; i < n_; ++i) {
      const ir::Operation& o = op(i);
      for (const auto& r : o.results) defined_by_[r.get()] = i;
      role_[i] = classify(o, nullptr);
      ordered_[i] = is_ordered(o);
      std::vector<const ir::Value*> reads(o.operands.begin(), o.operands.end());
      if (!o.regions.empty()) captured_values(o, reads);
      reads_.push_back(reads);
      for (const ir::Value* v : reads) {
        auto it = defined_by_.find(v);
        if (it != defined_by_.end()) users_[it->second].push_back(i);
      }
    }
    // An ordered op waits for the one before it (see schedule()).
    next_ordered_.assign(n_, n_);
    size_t previous = n_;
    for (size_t i = 0; i < n_; ++i) {
      if (!ordered_[i] || role_[i] != Role::None) continue;
      if (previous < n_) next_ordered_[previous] = i;
      previous = i;
    }
    for (size_t i = n_; i < block_.ops.size(); ++i)
      for (const ir::Value* v : block_.ops[i]->operands) {
        auto it = defined_by_.find(v);
        if (it != defined_by_.end()) returned_[it->second] = true;
      }
  }

  // The side of group g that reads op i's value through its users there.
  uint8_t side_in(int g, size_t i) const {
    uint8_t s = 0;
    const Work& w = groups_[g];
    for (size_t u : users_[i]) {
      if (group_of_[u] != g) continue;
      if (std::find(w.heroes.begin(), w.heroes.end(), u) != w.heroes.end()) {
        const ir::Operation& h = op(u);
        if (h.operands[0] == op(i).result(0)) s |= kInputSide;
        if (h.operands[1] == op(i).result(0)) s |= kEpilogueSide;  // the init, read when writing
      } else {
        s |= side_[u];
      }
    }
    return s;
  }

  bool fits(int g, size_t i, bool as_output) const {
    const Work& w = groups_[g];
    if (w.members.size() >= kMaxMembers) return false;
    if (!as_output) return true;
    const int64_t c = count(i);
    if (w.kind == FusionKind::Loop) return c == w.elements;
    const uint8_t s = side_in(g, i);
    return (s == kInputSide && c == w.elements) || (s == kEpilogueSide && c == w.out_elements);
  }

  // A node of the graph whose nodes are groups and ungrouped ops.
  int64_t node(size_t i) const {
    return group_of_[i] >= 0 && role_[i] != Role::Leaf ? group_of_[i]
                                                       : -1 - static_cast<int64_t>(i);
  }

  // Whether a path from the ops `from` leads into group g (through groups as wholes and
  // ungrouped ops, ordered ops waiting for the one before them). A search that grows past
  // `max_visits` nodes answers yes: a missed fusion, never a cycle.
  bool reaches(const std::vector<size_t>& from, int g, size_t max_visits) const {
    std::unordered_set<int64_t> seen;
    std::vector<int64_t> todo;
    for (size_t u : from) {
      if (group_of_[u] == g && role_[u] != Role::Leaf) return true;
      if (seen.insert(node(u)).second) todo.push_back(node(u));
    }
    while (!todo.empty()) {
      const int64_t nd = todo.back();
      todo.pop_back();
      std::vector<size_t> ops;
      if (nd >= 0)
        ops = groups_[nd].members;
      else
        ops.push_back(static_cast<size_t>(-1 - nd));
      for (size_t m : ops) {
        if (role_[m] == Role::Leaf) continue;  // copied into each reader: no dependency
        std::vector<size_t> next = users_[m];
        if (nd < 0 && next_ordered_[m] < n_) next.push_back(next_ordered_[m]);
        for (size_t u : next) {
          if (group_of_[u] == g && role_[u] != Role::Leaf) return true;
          if (seen.insert(node(u)).second) todo.push_back(node(u));
          if (seen.size() > max_visits) return true;
        }
      }
    }
    return false;
  }

  // Whether giving op i to group g, where its users outside g read it, would make g depend on
  // itself. Asked for most ops, so the search is bounded and planning stays linear.
  bool makes_cycle(int g, size_t i) const {
    std::vector<size_t> outside;
    for (size_t u : users_[i])
      if (group_of_[u] != g) outside.push_back(u);
    return reaches(outside, g, 1024);
  }

  // The values group g reads from outside.
  std::unordered_set<const ir::Value*> reads_of(int g) const {
    std::unordered_set<const ir::Value*> out;
    for (size_t m : groups_[g].members)
      for (const ir::Value* v : op(m).operands) {
        auto it = defined_by_.find(v);
        if (it != defined_by_.end() && role_[it->second] == Role::Leaf) continue;
        if (it == defined_by_.end() || group_of_[it->second] != g) out.insert(v);
      }
    return out;
  }

  // Reductions of the same fold that read a common value become one kernel with several heroes
  // (layer norm's sums of x and of x^2), when neither depends on the other.
  void merge_siblings() {
    for (size_t a = 0; a < groups_.size(); ++a) {
      if (groups_[a].heroes.empty()) continue;
      for (size_t b = a + 1; b < groups_.size(); ++b) {
        Work& wa = groups_[a];
        Work& wb = groups_[b];
        if (wb.heroes.empty() || wa.kind != wb.kind || wa.elements != wb.elements ||
            wa.out_elements != wb.out_elements || !(wa.reduction == wb.reduction) ||
            wa.members.size() + wb.members.size() > kMaxMembers ||
            wa.heroes.size() + wb.heroes.size() > kMaxHeroes)
          continue;
        // Worth one kernel when they read a common value, or one reads the other's.
        const auto ra = reads_of(static_cast<int>(a));
        const auto rb = reads_of(static_cast<int>(b));
        auto made_by = [&](const ir::Value* v, size_t g) {
          auto it = defined_by_.find(v);
          return it != defined_by_.end() && group_of_[it->second] == static_cast<int>(g);
        };
        const bool related =
            std::any_of(ra.begin(), ra.end(),
                        [&](const ir::Value* v) { return rb.count(v) || made_by(v, b); }) ||
            std::any_of(rb.begin(), rb.end(), [&](const ir::Value* v) { return made_by(v, a); });
        if (!related) continue;
        // What one reads of the other: values of its reading phase can be computed anywhere;
        // a reduction's result and its epilogue exist only in the other's epilogue.
        auto reads_fit = [&](size_t from, size_t to) {
          for (size_t m : groups_[from].members)
            if (role_[m] != Role::Leaf && side_[m] == kEpilogueSide)
              for (size_t u : users_[m])
                if (group_of_[u] == static_cast<int>(to) && side_[u] != kEpilogueSide) return false;
          return true;
        };
        auto outside_users = [&](size_t g, size_t other) {
          std::vector<size_t> out;
          for (size_t m : groups_[g].members)
            if (role_[m] != Role::Leaf)
              for (size_t u : users_[m])
                if (group_of_[u] != static_cast<int>(g) && group_of_[u] != static_cast<int>(other))
                  out.push_back(u);
          return out;
        };
        if (!reads_fit(a, b) || !reads_fit(b, a) ||
            reaches(outside_users(a, b), static_cast<int>(b), n_) ||
            reaches(outside_users(b, a), static_cast<int>(a), n_))
          continue;
        for (size_t m : wb.members) {
          if (std::find(wa.members.begin(), wa.members.end(), m) == wa.members.end())
            wa.members.push_back(m);
          if (group_of_[m] == static_cast<int>(b)) group_of_[m] = static_cast<int>(a);
        }
        wa.heroes.insert(wa.heroes.end(), wb.heroes.begin(), wb.heroes.end());
        wb.members.clear();
        wb.heroes.clear();
        wb.merged = true;
      }
    }
  }

  void join(int g, size_t i, uint8_t side) {
    groups_[g].members.push_back(i);
    group_of_[i] = g;
    side_[i] = side;
  }

  int new_group(size_t i, FusionKind kind) {
    Work w;
    w.kind = kind;
    w.elements = count(i);
    groups_.push_back(std::move(w));
    const int g = static_cast<int>(groups_.size()) - 1;
    join(g, i, kInputSide);
    return g;
  }

  void visit(size_t i) {
    const Role role = role_[i];
    if (role == Role::None) return;
    if (role == Role::Leaf) {
      // Copied into every group that reads it; runs on its own for any other reader.
      standalone_[i] = returned_[i];
      for (size_t u : users_[i]) {
        const int g = group_of_[u];
        if (g < 0 || role_[u] == Role::Leaf) {
          standalone_[i] = true;
          continue;
        }
        auto& m = groups_[g].members;
        if (std::find(m.begin(), m.end(), i) == m.end()) m.push_back(i);
        group_of_[i] = g;
      }
      if (group_of_[i] < 0) standalone_[i] = true;
      return;
    }
    // The one group all users are in, if any.
    int common = -2;
    for (size_t u : users_[i]) {
      const int g = group_of_[u];
      if (common == -2) common = g;
      if (g != common) common = -1;
    }
    if (users_[i].empty() && !returned_[i]) return;  // dead: left to run (or not) on its own
    if (returned_[i]) common = -1;

    if (role == Role::Reduce) {
      visit_reduce(i, common);
      return;
    }
    if (common >= 0 && fits(common, i, false)) {
      join(common, i, side_in(common, i));
      return;
    }
    for (size_t u : users_[i]) {
      const int g = group_of_[u];
      if (g < 0 || !fits(g, i, true) || makes_cycle(g, i)) continue;
      join(g, i, side_in(g, i));
      return;
    }
    if (role != Role::Reshape) new_group(i, FusionKind::Loop);  // a lone reshape copies nothing
  }

  void visit_reduce(size_t i, int common) {
    ReductionShape shape;
    reduction_shape(op(i), &shape, nullptr);
    const int64_t in_count = op(i).operands[0]->type.num_elements();
    const FusionKind kind =
        shape.inner == 1 ? FusionKind::RowReduction : FusionKind::ColumnReduction;
    // Becomes the hero of the loop group of its element-wise consumers (its epilogue).
    int target = common;
    if (target < 0) {
      for (size_t u : users_[i])
        if (group_of_[u] >= 0) {
          target = group_of_[u];
          break;
        }
      if (target >= 0)
        for (size_t u : users_[i])
          if (group_of_[u] >= 0 && group_of_[u] != target) target = -1;
    }
    if (target >= 0) {
      Work& w = groups_[target];
      const bool outside = common < 0;
      if (w.kind == FusionKind::Loop && w.elements == count(i) && w.members.size() < kMaxMembers &&
          (!outside || !makes_cycle(target, i))) {
        for (size_t m : w.members) side_[m] = kEpilogueSide;
        w.kind = kind;
        w.out_elements = count(i);
        w.elements = in_count;
        w.heroes = {i};
        w.reduction = shape;
        join(target, i, kEpilogueSide);
        return;
      }
    }
    const int g = new_group(i, kind);
    Work& w = groups_[g];
    w.out_elements = count(i);
    w.elements = in_count;
    w.heroes = {i};
    w.reduction = shape;
    side_[i] = kEpilogueSide;
  }

  FusionPlan finish() {
    FusionPlan plan;
    std::vector<int> number(groups_.size(), -1);  // merged groups are dropped
    for (size_t g = 0, k = 0; g < groups_.size(); ++g)
      if (!groups_[g].merged) number[g] = static_cast<int>(k++);
    for (int& g : group_of_)
      if (g >= 0) g = number[g];
    std::vector<int> stamp(n_, -1);
    for (size_t g = 0; g < groups_.size(); ++g) {
      Work& w = groups_[g];
      if (w.merged) continue;
      std::sort(w.members.begin(), w.members.end());
      std::sort(w.heroes.begin(), w.heroes.end());
      FusionGroup out;
      out.kind = w.kind;
      out.ops = w.members;
      out.heroes = w.heroes;
      out.reduction = w.reduction;
      out.elements = w.elements;
      const int id = number[g];
      for (size_t m : w.members) stamp[m] = id;
      for (size_t m : w.members)
        for (const ir::Value* v : op(m).operands) {
          auto it = defined_by_.find(v);
          const bool inside = it != defined_by_.end() && stamp[it->second] == id;
          if (!inside && std::find(out.inputs.begin(), out.inputs.end(), v) == out.inputs.end())
            out.inputs.push_back(v);
        }
      for (size_t m : w.members) {
        if (role_[m] == Role::Leaf) continue;
        bool used_outside = returned_[m];
        for (size_t u : users_[m])
          if (stamp[u] != id || role_[u] == Role::Leaf) used_outside = true;
        if (used_outside) out.outputs.push_back(op(m).result(0));
      }
      plan.groups.push_back(std::move(out));
    }
    plan.group_of = group_of_;
    plan.standalone.assign(n_, false);
    for (size_t i = 0; i < n_; ++i)
      plan.standalone[i] = role_[i] == Role::Leaf ? standalone_[i] : group_of_[i] < 0;
    schedule(plan);
    return plan;
  }

  // Kahn's algorithm over groups and standalone ops, by the position of each one's last op, with
  // ordered ops kept in their order.
  void schedule(FusionPlan& plan) {
    const size_t num_groups = plan.groups.size();
    // Nodes: groups first, then standalone ops.
    std::vector<int64_t> key;
    std::vector<FusionPlan::Item> items;
    std::vector<int> node_of_op(n_, -1);
    for (size_t g = 0; g < num_groups; ++g) {
      key.push_back(static_cast<int64_t>(plan.groups[g].ops.back()));
      items.push_back({static_cast<int>(g), 0});
    }
    for (size_t i = 0; i < n_; ++i)
      if (plan.standalone[i]) {
        node_of_op[i] = static_cast<int>(items.size());
        key.push_back(static_cast<int64_t>(i));
        items.push_back({-1, i});
      }
    const size_t num_nodes = items.size();
    std::vector<std::vector<int>> next(num_nodes);
    std::vector<int> pending(num_nodes, 0);
    auto edge = [&](int from, int to) {
      if (from < 0 || from == to) return;
      next[from].push_back(to);
      ++pending[to];
    };
    // The node that provides value v to a reader in group `reader_group` (-1: standalone).
    auto provider = [&](const ir::Value* v, int reader_group) -> int {
      auto it = defined_by_.find(v);
      if (it == defined_by_.end()) return -1;
      const size_t p = it->second;
      if (role_[p] == Role::Leaf) {
        if (reader_group >= 0) {
          const auto& m = plan.groups[reader_group].ops;
          if (std::find(m.begin(), m.end(), p) != m.end()) return -1;
        }
        return node_of_op[p];
      }
      return group_of_[p] >= 0 ? group_of_[p] : node_of_op[p];
    };
    for (size_t g = 0; g < num_groups; ++g) {
      std::unordered_set<int> from;
      for (const ir::Value* v : plan.groups[g].inputs)
        from.insert(provider(v, static_cast<int>(g)));
      for (int f : from) edge(f, static_cast<int>(g));
    }
    int previous_ordered = -1;
    for (size_t i = 0; i < n_; ++i) {
      if (node_of_op[i] < 0) continue;
      const int nd = node_of_op[i];
      std::unordered_set<int> from;
      for (const ir::Value* v : reads_[i]) from.insert(provider(v, -1));
      if (ordered_[i] && role_[i] == Role::None) {
        from.insert(previous_ordered);
        previous_ordered = nd;
      }
      for (int f : from) edge(f, nd);
    }
    using Entry = std::pair<int64_t, int>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
    for (size_t k = 0; k < num_nodes; ++k)
      if (pending[k] == 0) ready.push({key[k], static_cast<int>(k)});
    while (!ready.empty()) {
      const int k = ready.top().second;
      ready.pop();
      plan.schedule.push_back(items[k]);
      for (int t : next[k])
        if (--pending[t] == 0) ready.push({key[t], t});
    }
    if (plan.schedule.size() != num_nodes)
      throw Error("fusion planning made a cycle (a bug): " + std::to_string(num_nodes) +
                  " steps, " + std::to_string(plan.schedule.size()) + " ordered");
  }

  const ir::Block& block_;
  size_t n_;
  std::vector<Role> role_;
  std::vector<int> group_of_;
  std::vector<uint8_t> side_;
  std::vector<std::vector<size_t>> users_;
  std::vector<std::vector<const ir::Value*>> reads_;
  std::vector<bool> returned_, standalone_, ordered_;
  std::vector<size_t> next_ordered_;
  std::unordered_map<const ir::Value*, size_t> defined_by_;
  std::vector<Work> groups_;
};

}  // namespace

const char* fusion_kind_name(FusionKind kind) {
  switch (kind) {
    case FusionKind::Loop:
      return "loop";
    case FusionKind::RowReduction:
      return "row reduction";
    case FusionKind::ColumnReduction:
      return "column reduction";
  }
  return "?";
}

std::string reduction_body(const ir::Operation& reduce) {
  if (reduce.regions.size() != 1 || reduce.regions[0]->blocks.size() != 1) return "";
  const ir::Block& b = reduce.regions[0]->front();
  if (b.arguments.size() != 2 || b.ops.size() != 2) return "";
  const ir::Operation& o = *b.ops[0];
  const ir::Operation& ret = *b.ops[1];
  if (o.operands.size() != 2 || o.num_results() != 1 || ret.operands.size() != 1 ||
      ret.operands[0] != o.result(0) || !o.regions.empty() || !o.attributes.empty())
    return "";
  const ir::Value* x = b.arguments[0].get();
  const ir::Value* y = b.arguments[1].get();
  static const char* kBodies[] = {"stablehlo.add",     "stablehlo.multiply", "stablehlo.maximum",
                                  "stablehlo.minimum", "stablehlo.and",      "stablehlo.or",
                                  "stablehlo.xor"};
  if (std::none_of(std::begin(kBodies), std::end(kBodies),
                   [&](const char* n) { return o.name == n; }))
    return "";
  const bool straight = o.operands[0] == x && o.operands[1] == y;
  const bool swapped = o.operands[0] == y && o.operands[1] == x;
  return straight || swapped ? o.name : "";
}

bool reduction_shape(const ir::Operation& reduce, ReductionShape* out, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (reduce.operands.size() != 2 || reduce.num_results() != 1)
    return no("reduce of several inputs");
  const ir::Type& in = reduce.operands[0]->type;
  const ir::Type& init = reduce.operands[1]->type;
  const ir::Type& r = reduce.result(0)->type;
  if (in.is_token || init.is_token || r.is_token || init.rank() != 0 || init.dtype != in.dtype ||
      r.dtype != in.dtype)
    return no("reduce with mismatched types");
  const std::string body = reduction_body(reduce);
  if (body.empty()) return no("reduce body is not a single add/multiply/max/min/and/or/xor");
  if ((body == "stablehlo.and" || body == "stablehlo.or" || body == "stablehlo.xor") &&
      is_float(in.dtype))
    return no("bitwise reduce of a float type");
  if (in.rank() > kMaxRank || in.num_elements() == 0) return no("empty or high-rank operand");
  const auto dims = reduce.ints_if_present("dimensions");
  if (!dims) return no("reduce without dimensions");
  std::vector<bool> reduced(in.shape.size(), false);
  for (int64_t d : *dims) {
    if (d < 0 || d >= in.rank() || reduced[d]) return no("invalid reduce dimensions");
    reduced[d] = true;
  }
  Shape kept;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (!reduced[d]) kept.push_back(in.shape[d]);
  if (kept != r.shape) return no("reduce result shape does not match");
  // Runs of kept (0) and reduced (1) dimensions, size-1 dimensions dropped.
  std::vector<std::pair<int, int64_t>> runs;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    if (!runs.empty() && runs.back().first == kind)
      runs.back().second *= in.shape[d];
    else
      runs.push_back({kind, in.shape[d]});
  }
  ReductionShape s;
  size_t k = 0;
  if (k < runs.size() && runs[k].first == 0) s.outer = runs[k++].second;
  if (k < runs.size() && runs[k].first == 1) s.reduced = runs[k++].second;
  if (k < runs.size() && runs[k].first == 0) s.inner = runs[k++].second;
  if (k != runs.size())
    return no("reduced dimensions are not contiguous (neither rows nor columns)");
  if (s.reduced == 1) return no("reduces nothing (only size-1 dimensions)");
  if (out) *out = s;
  return true;
}

std::string why_not_fusible(const ir::Operation& op) {
  std::string why;
  return classify(op, &why) == Role::None ? why : "";
}

FusionPlan plan_fusion(const ir::Block& block, size_t num_ops) {
  return Planner(block, num_ops).run();
}

FusionPlan unfused_plan(size_t num_ops) {
  FusionPlan plan;
  plan.group_of.assign(num_ops, -1);
  plan.standalone.assign(num_ops, true);
  for (size_t i = 0; i < num_ops; ++i) plan.schedule.push_back({-1, i});
  return plan;
}

}  // namespace cujax::compiler
