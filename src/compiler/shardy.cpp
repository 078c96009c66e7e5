#include "compiler/shardy.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <numeric>
#include <unordered_map>

#include "cujax/core/error.h"
#include "ir/sdy.h"

namespace cujax::compiler {

namespace {

// A cursor over the text of an sdy attribute; errors name the whole text.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : s_(text) {}

  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() {
    skip();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool consume(std::string_view w) {
    skip();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  // "name" (the quotes escaped or not) or a bare identifier.
  std::string name() {
    std::string out;
    if (consume('"')) {
      while (pos_ < s_.size() && s_[pos_] != '"') {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
        out += s_[pos_++];
      }
      expect('"');
      return out;
    }
    skip();
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
            s_[pos_] == '.' || s_[pos_] == '$' || s_[pos_] == '-'))
      out += s_[pos_++];
    if (out.empty()) fail("expected a name");
    return out;
  }
  int64_t integer() {
    skip();
    size_t end = pos_;
    while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
    if (end == pos_ || end - pos_ > 15) fail("expected an integer");
    const int64_t v = std::stoll(std::string(s_.substr(pos_, end - pos_)));
    pos_ = end;
    return v;
  }
  std::vector<int64_t> int_list() {  // [1, 2, 3]
    std::vector<int64_t> v;
    expect('[');
    if (consume(']')) return v;
    do {
      v.push_back(integer());
    } while (consume(','));
    expect(']');
    return v;
  }
  bool at_end() { return peek() == '\0'; }
  [[noreturn]] void fail(const std::string& what) const {
    throw UnsupportedError("Shardy attribute '" + std::string(s_) + "': " + what + " at offset " +
                           std::to_string(pos_));
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

constexpr int64_t kMaxDevices = int64_t{1} << 20;

SdyMesh read_mesh(Scanner& sc) {  // <["x"=2, ...], device_ids=[...]>
  SdyMesh m;
  sc.expect('<');
  sc.expect('[');
  if (!sc.consume(']')) {
    do {
      std::string axis = sc.name();
      sc.expect('=');
      const int64_t size = sc.integer();
      if (size < 1) sc.fail("axis " + axis + " has size 0");
      if (m.size() > kMaxDevices / size)
        sc.fail("the mesh has more than " + std::to_string(kMaxDevices) + " devices");
      m.axes.emplace_back(std::move(axis), size);
    } while (sc.consume(','));
    sc.expect(']');
  }
  if (sc.consume(',')) {
    if (!sc.consume("device_ids")) sc.fail("expected device_ids");
    sc.expect('=');
    m.device_ids = sc.int_list();
  }
  sc.expect('>');
  if (!m.device_ids.empty() && static_cast<int64_t>(m.device_ids.size()) != m.size())
    sc.fail(std::to_string(m.device_ids.size()) + " device ids for a mesh of " +
            std::to_string(m.size()));
  return m;
}

// One axis reference: "x" or the sub-axis "x":(pre)size.
struct AxisRef {
  std::string axis;
  int64_t pre = 1, size = 0;  // size 0: the whole axis
};

std::vector<AxisRef> read_axes(Scanner& sc, bool* open = nullptr) {  // {"x", "y":(1)2, ?}
  std::vector<AxisRef> v;
  sc.expect('{');
  if (sc.consume('}')) return v;
  do {
    if (sc.consume('?')) {
      if (open) *open = true;
      continue;
    }
    AxisRef a;
    a.axis = sc.name();
    if (sc.consume(':')) {
      sc.expect('(');
      a.pre = sc.integer();
      sc.expect(')');
      a.size = sc.integer();
    }
    v.push_back(std::move(a));
  } while (sc.consume(','));
  sc.expect('}');
  return v;
}

// `<@mesh, [dims], replicated={...}, unreduced={...}>`, the mesh looked up or given inline.
HloSharding read_sharding(Scanner& sc, const std::map<std::string, SdyMesh>& meshes, int64_t rank,
                          int64_t n) {
  sc.expect('<');
  SdyMesh inline_mesh;
  const SdyMesh* mesh = nullptr;
  std::string mesh_name;
  if (sc.consume('@')) {
    mesh_name = sc.name();
    auto it = meshes.find(mesh_name);
    if (it == meshes.end()) sc.fail("no mesh @" + mesh_name + " in the module");
    mesh = &it->second;
  } else if (sc.consume("mesh")) {
    inline_mesh = read_mesh(sc);
    mesh = &inline_mesh;
  } else {
    sc.fail("expected @mesh or mesh<...>");
  }
  sc.expect(',');
  std::vector<std::vector<AxisRef>> dims;
  sc.expect('[');
  if (!sc.consume(']')) {
    do {
      dims.push_back(read_axes(sc));
      if (sc.consume('p')) sc.integer();  // a propagation priority
    } while (sc.consume(','));
    sc.expect(']');
  }
  while (sc.consume(',')) {
    const std::string key = sc.name();
    sc.expect('=');
    const std::vector<AxisRef> axes = read_axes(sc);
    if (key == "unreduced" && !axes.empty())
      sc.fail("unreduced axes (a partial sum on each device) are not supported");
    if (key != "replicated" && key != "unreduced") sc.fail("unknown key " + key);
  }
  sc.expect('>');
  if (static_cast<int64_t>(dims.size()) != rank)
    sc.fail(std::to_string(dims.size()) + " dimension shardings for a value of rank " +
            std::to_string(rank));

  const int64_t size = mesh->size();
  bool sharded = false;
  for (const auto& d : dims) sharded = sharded || !d.empty();
  if (size == 1 || !sharded) return HloSharding::replicated(rank, n);
  if (size != n)
    sc.fail("mesh @" + mesh_name + " has " + std::to_string(size) + " devices but the program " +
            std::to_string(n) + " partitions");

  // Each mesh position's coordinate on each axis, the first axis major.
  auto axis_index = [&](const std::string& a) -> size_t {
    for (size_t i = 0; i < mesh->axes.size(); ++i)
      if (mesh->axes[i].first == a) return i;
    sc.fail("mesh @" + mesh_name + " has no axis '" + a + "'");
  };
  std::vector<std::vector<int64_t>> coords(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    int64_t q = p;
    coords[p].resize(mesh->axes.size());
    for (size_t a = mesh->axes.size(); a-- > 0;) {
      coords[p][a] = q % mesh->axes[a].second;
      q /= mesh->axes[a].second;
    }
  }
  HloSharding h;
  h.tiles.assign(static_cast<size_t>(rank), 1);
  std::vector<std::vector<int64_t>> tile(static_cast<size_t>(n),
                                         std::vector<int64_t>(static_cast<size_t>(rank), 0));
  std::vector<std::string> used;
  for (int64_t d = 0; d < rank; ++d)
    for (const AxisRef& r : dims[d]) {
      const size_t a = axis_index(r.axis);
      const int64_t full = mesh->axes[a].second;
      const int64_t sz = r.size ? r.size : full;
      if (r.pre < 1 || sz < 1 || full % (r.pre * sz) != 0)
        sc.fail("sub-axis " + r.axis + ":(" + std::to_string(r.pre) + ")" + std::to_string(sz) +
                " does not divide the axis of size " + std::to_string(full));
      const std::string key =
          r.axis + (r.size ? ":" + std::to_string(r.pre) + "," + std::to_string(sz) : "");
      for (const std::string& u : used)
        if (u == key || u == r.axis || (key == r.axis && u.starts_with(r.axis + ":")))
          sc.fail("axis " + r.axis + " is used twice");
      used.push_back(key);
      const int64_t minor = full / (r.pre * sz);
      h.tiles[d] *= sz;
      for (int64_t p = 0; p < n; ++p) tile[p][d] = tile[p][d] * sz + (coords[p][a] / minor) % sz;
    }
  const int64_t tiles =
      std::accumulate(h.tiles.begin(), h.tiles.end(), int64_t{1}, std::multiplies<>());
  // Overlapping sub-axes ("x":(1)2 with "x":(1)4) give some tiles to no device.
  std::map<std::vector<int64_t>, int64_t> count;
  for (const auto& t : tile) ++count[t];
  if (static_cast<int64_t>(count.size()) != tiles)
    sc.fail("the axes overlap: " + std::to_string(tiles) + " tiles but " +
            std::to_string(count.size()) + " are held");
  h.replicas = n / tiles;
  // Row-major over [tiles..., replicas]: positions sorted by tile, then by position.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return tile[a] < tile[b]; });
  for (int64_t p : order)
    h.tile_devices.push_back(mesh->device_ids.empty() ? p : mesh->device_ids[p]);
  std::vector<int64_t> sorted = h.tile_devices;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i)
    if (sorted[i] != i) sc.fail("the mesh's device ids are not 0.." + std::to_string(n - 1));
  return h;
}

// The text of an sdy attribute: an opaque #sdy... attribute or a string holding one.
std::string sdy_text(const ir::Attribute* a) {
  return a && (a->kind == ir::Attribute::Kind::Opaque || a->kind == ir::Attribute::Kind::String)
             ? a->text
             : "";
}

// The `xla.sdy.<key>` frontend attribute of an op or an attribute list.
std::string frontend(const ir::Attribute* fa, std::string_view key) {
  return fa ? sdy_text(fa->field(key)) : "";
}

// `#sdy.sharding_per_value<[<...>, ...]>`: one sharding per value of the given ranks.
std::vector<HloSharding> per_value(const std::string& text,
                                   const std::map<std::string, SdyMesh>& meshes,
                                   const std::vector<int64_t>& ranks, int64_t n) {
  Scanner sc(text);
  if (!sc.consume("#sdy.sharding_per_value")) sc.fail("expected #sdy.sharding_per_value");
  sc.expect('<');
  sc.expect('[');
  std::vector<HloSharding> out;
  if (!sc.consume(']')) {
    do {
      if (out.size() >= ranks.size())
        sc.fail("more shardings than the " + std::to_string(ranks.size()) + " values");
      out.push_back(read_sharding(sc, meshes, ranks[out.size()], n));
    } while (sc.consume(','));
    sc.expect(']');
  }
  sc.expect('>');
  if (out.size() != ranks.size())
    sc.fail(std::to_string(out.size()) + " shardings for " + std::to_string(ranks.size()) +
            " values");
  return out;
}

// The manual axes, `#sdy<manual_axes{"x", "y"}>`, must be every axis of size > 1 of the mesh:
// the partitioner runs a manual body on all partitions' local shards.
void check_manual_axes(const std::string& text, const std::map<std::string, SdyMesh>& meshes,
                       const std::string& where) {
  Scanner sc(text);
  if (!sc.consume("#sdy<manual_axes")) sc.fail("expected #sdy<manual_axes{...}>");
  std::vector<std::string> manual;
  for (const AxisRef& a : read_axes(sc)) manual.push_back(a.axis);
  for (const auto& [name, mesh] : meshes)
    for (const auto& [axis, size] : mesh.axes)
      if (size > 1 && std::find(manual.begin(), manual.end(), axis) == manual.end() &&
          std::any_of(manual.begin(), manual.end(), [&](const std::string& m) {
            return std::any_of(mesh.axes.begin(), mesh.axes.end(),
                               [&](const auto& x) { return x.first == m; });
          }))
        throw UnsupportedError(where + ": manual_axes " + text + " leave axis '" + axis +
                               "' of mesh @" + name +
                               " automatic; cujax partitions a manual computation only when all "
                               "of its mesh's axes are manual");
}

std::vector<int64_t> ranks_of(const std::vector<ir::Value*>& values) {
  std::vector<int64_t> r;
  for (const ir::Value* v : values) r.push_back(v->type.rank());
  return r;
}

std::vector<int64_t> result_ranks(const ir::Operation& op) {
  std::vector<int64_t> r;
  for (const auto& v : op.results) r.push_back(v->type.rank());
  return r;
}

bool is_manual_call(const ir::Operation& op) {
  if (op.name == "func.call") {
    const ir::Attribute* c = op.attr("callee");
    return c && c->text.find("xla.sdy.manual_computation_body") != std::string::npos;
  }
  const ir::Attribute* t = op.attr("call_target_name");
  return op.name == "stablehlo.custom_call" && t && t->text == "xla.sdy.ManualComputation";
}

std::string sdy_call_target(const ir::Operation& op) {
  if (op.name != "stablehlo.custom_call") return "";
  const ir::Attribute* t = op.attr("call_target_name");
  if (!t) return "";
  std::string s = t->text;
  if (s.starts_with("local_xla.sdy.")) s.erase(0, 6);
  return s;
}

class ShardyRewriter {
 public:
  ShardyRewriter(std::map<std::string, SdyMesh> meshes, int64_t n)
      : meshes_(std::move(meshes)), n_(n) {}

  HloSharding sharding(const std::string& text, int64_t rank) const {
    return sdy_sharding_to_hlo(text, meshes_, rank, n_);
  }

  void attrs(std::vector<ir::NamedAttribute>& list, int64_t rank) const {
    std::string text;
    bool has_gspmd = false;
    for (const auto& a : list) {
      if (a.name == "sdy.sharding") text = sdy_text(a.value.get());
      if (a.name == "mhlo.frontend_attributes" && text.empty())
        text = frontend(a.value.get(), "xla.sdy.sharding");
      has_gspmd = has_gspmd || a.name == "mhlo.sharding";
    }
    if (text.empty() || has_gspmd) return;
    list.push_back({"mhlo.sharding", ir::Attribute::string_attr(sharding(text, rank).str())});
  }

  void block(ir::Block& b) {
    collect_manual_calls(b);
    std::vector<std::unique_ptr<ir::Operation>> ops = std::move(b.ops);
    b.ops.clear();
    for (auto& op : ops) {
      resolve(*op);
      const std::string target = sdy_call_target(*op);
      if (op->name == "sdy.sharding_constraint" || op->name == "sdy.reshard") {
        const HloSharding h = sharding(sdy_text(op->attr("sharding")), op->result()->type.rank());
        make_sharding_call(*op, h.str());
        b.ops.push_back(std::move(op));
      } else if (target == "xla.sdy.ShardingConstraint" || target == "xla.sdy.Reshard" ||
                 target == "xla.sdy.FuncResultSharding") {
        const std::string text = frontend(op->attr("mhlo.frontend_attributes"), "xla.sdy.sharding");
        if (text.empty() || op->operands.size() != 1 || op->num_results() != 1)
          throw UnsupportedError(op->where() + ": " + target +
                                 " needs one operand and mhlo.frontend_attributes "
                                 "{xla.sdy.sharding = ...}");
        const int64_t rank = op->result()->type.rank();
        const HloSharding h = text.starts_with("#sdy.sharding_per_value")
                                  ? per_value(text, meshes_, {rank}, n_)[0]
                                  : sharding(text, rank);
        make_sharding_call(*op, h.str());
        b.ops.push_back(std::move(op));
      } else if (target == "xla.sdy.GlobalToLocalShape") {
        for (size_t k = 0; k < op->operands.size(); ++k) {
          auto it = in_of_.find(op->result(k));
          if (it == in_of_.end())
            throw UnsupportedError(op->where() + ": result " + std::to_string(k) +
                                   " of xla.sdy.GlobalToLocalShape feeds no manual computation");
          map_[op->result(k)] = to_local(b, op->operands[k], it->second, op->result(k)->type);
        }
        retired_.push_back(std::move(op));
      } else if (target == "xla.sdy.LocalToGlobalShape") {
        for (size_t k = 0; k < op->operands.size(); ++k) {
          auto it = out_of_.find(op->operands[k]);
          if (it == out_of_.end())
            throw UnsupportedError(op->where() + ": operand " + std::to_string(k) +
                                   " of xla.sdy.LocalToGlobalShape comes from no manual "
                                   "computation");
          map_[op->result(k)] = to_global(b, op->operands[k], it->second, op->result(k)->type);
        }
        retired_.push_back(std::move(op));
      } else if (op->name == "sdy.propagation_barrier" || target == "xla.sdy.PropagationBarrier" ||
                 op->name == "sdy.sharding_group" || target == "xla.sdy.ShardingGroup") {
        // Steer propagation only: the partitioner would otherwise replicate their operands.
        for (size_t k = 0; k < op->num_results() && k < op->operands.size(); ++k)
          map_[op->result(k)] = op->operands[k];
        retired_.push_back(std::move(op));
      } else if (op->name == "sdy.manual_computation") {
        inline_manual(b, std::move(op));
      } else {
        b.ops.push_back(std::move(op));
      }
    }
  }

 private:
  // The shardings of each round-trip manual computation's operands and results, read from its
  // call's frontend attributes.
  void collect_manual_calls(const ir::Block& b) {
    for (const auto& op : b.ops) {
      if (!is_manual_call(*op)) continue;
      const ir::Attribute* fa = op->attr("mhlo.frontend_attributes");
      const std::string in = frontend(fa, "xla.sdy.in_shardings");
      const std::string out = frontend(fa, "xla.sdy.out_shardings");
      const std::string axes = frontend(fa, "xla.sdy.manual_axes");
      if (in.empty() || out.empty())
        throw UnsupportedError(op->where() +
                               ": a manual computation needs mhlo.frontend_attributes "
                               "{xla.sdy.in_shardings, xla.sdy.out_shardings}");
      if (!axes.empty()) check_manual_axes(axes, meshes_, op->where());
      const auto ins = per_value(in, meshes_, ranks_of(op->operands), n_);
      const auto outs = per_value(out, meshes_, result_ranks(*op), n_);
      for (size_t k = 0; k < ins.size(); ++k) in_of_.emplace(op->operands[k], ins[k]);
      for (size_t k = 0; k < outs.size(); ++k) out_of_.emplace(op->result(k), outs[k]);
    }
  }

  static void make_sharding_call(ir::Operation& op, const std::string& hlo) {
    op.name = "stablehlo.custom_call";
    op.attributes.clear();
    op.set_attr("call_target_name", ir::Attribute::string_attr("Sharding"));
    op.set_attr("mhlo.sharding", ir::Attribute::string_attr(hlo));
  }

  static ir::Value* custom_call(ir::Block& b, const char* target, ir::Value* x, ir::Type t,
                                const std::string& hlo) {
    auto op = ir::make_op("stablehlo.custom_call", {x}, {t});
    op->set_attr("call_target_name", ir::Attribute::string_attr(target));
    op->set_attr("mhlo.sharding", ir::Attribute::string_attr(hlo));
    op->parent = &b;
    b.ops.push_back(std::move(op));
    return b.ops.back()->result();
  }

  // GSPMD's entry into a manual region: x resharded to h, then its local shard.
  static ir::Value* to_local(ir::Block& b, ir::Value* x, const HloSharding& h, ir::Type local) {
    ir::Value* s = custom_call(b, "Sharding", x, x->type, h.str());
    return custom_call(b, "SPMDFullToShardShape", s, local, "{manual}");
  }
  // And its exit: the local shards of y form the global value sharded by h.
  static ir::Value* to_global(ir::Block& b, ir::Value* y, const HloSharding& h, ir::Type global) {
    ir::Value* s = custom_call(b, "Sharding", y, y->type, "{manual}");
    return custom_call(b, "SPMDShardToFullShape", s, global, h.str());
  }

  void inline_manual(ir::Block& b, std::unique_ptr<ir::Operation> op) {
    const std::string where = op->where();
    const ir::Attribute* axes = op->attr("manual_axes");
    if (axes) check_manual_axes(sdy_text(axes), meshes_, where);
    if (op->regions.size() != 1 || op->regions[0]->blocks.size() != 1)
      throw UnsupportedError(where + ": sdy.manual_computation needs one body block");
    ir::Block& body = op->regions[0]->front();
    const ir::Operation* ret = body.terminator();
    if (body.arguments.size() != op->operands.size() || !ret ||
        ret->operands.size() != op->num_results())
      throw UnsupportedError(where + ": sdy.manual_computation's body does not match its " +
                             std::to_string(op->operands.size()) + " operands and " +
                             std::to_string(op->num_results()) + " results");
    const auto ins =
        per_value(sdy_text(op->attr("in_shardings")), meshes_, ranks_of(op->operands), n_);
    const auto outs =
        per_value(sdy_text(op->attr("out_shardings")), meshes_, result_ranks(*op), n_);
    for (size_t k = 0; k < ins.size(); ++k)
      map_[body.arguments[k].get()] = to_local(b, op->operands[k], ins[k], body.arguments[k]->type);
    for (size_t k = 0; k + 1 < body.ops.size(); ++k) {
      std::unique_ptr<ir::Operation>& inner = body.ops[k];
      resolve(*inner);
      inner->parent = &b;
      b.ops.push_back(std::move(inner));
    }
    for (size_t k = 0; k < outs.size(); ++k)
      map_[op->result(k)] = to_global(b, lookup(ret->operands[k]), outs[k], op->result(k)->type);
    retired_.push_back(std::move(op));
  }

  ir::Value* lookup(ir::Value* v) const {
    for (auto it = map_.find(v); it != map_.end(); it = map_.find(v)) v = it->second;
    return v;
  }
  void resolve(ir::Operation& op) {
    for (auto& v : op.operands) v = lookup(v);
    for (const auto& r : op.regions)
      for (const auto& blk : r->blocks)
        for (const auto& inner : blk->ops) resolve(*inner);
  }

  std::map<std::string, SdyMesh> meshes_;
  int64_t n_;
  std::unordered_map<const ir::Value*, HloSharding> in_of_, out_of_;
  std::unordered_map<const ir::Value*, ir::Value*> map_;
  std::vector<std::unique_ptr<ir::Operation>> retired_;  // own values map_ may still name
};

bool block_has_shardy(const ir::Block& b) {
  for (const auto& op : b.ops) {
    if (op->name.starts_with("sdy.") || sdy_call_target(*op).starts_with("xla.sdy.") ||
        is_manual_call(*op))
      return true;
  }
  return false;
}

bool attrs_have_shardy(const std::vector<std::vector<ir::NamedAttribute>>& lists) {
  for (const auto& list : lists)
    for (const auto& a : list)
      if (a.name == "sdy.sharding" ||
          (a.name == "mhlo.frontend_attributes" && a.value->field("xla.sdy.sharding")))
        return true;
  return false;
}

}  // namespace

int64_t SdyMesh::size() const {
  int64_t s = 1;
  for (const auto& [name, size] : axes) s *= size;
  return s;
}

SdyMesh parse_sdy_mesh(std::string_view text) {
  Scanner sc(text);
  sc.consume("#sdy.mesh");
  SdyMesh m = read_mesh(sc);
  if (!sc.at_end()) sc.fail("unexpected text after the mesh");
  return m;
}

std::map<std::string, SdyMesh> sdy_meshes(const ir::Module& module) {
  std::map<std::string, SdyMesh> meshes;
  for (const std::string& alias : module.aliases) {
    if (!ir::detail::is_sdy_mesh(alias)) continue;
    Scanner sc(alias);  // sdy.mesh @name = <...>
    sc.consume("sdy.mesh");
    sc.expect('@');
    std::string name = sc.name();
    sc.expect('=');
    meshes[name] = read_mesh(sc);
  }
  for (const auto& a : module.attributes) {
    if (a.name != "mhlo.frontend_attributes") continue;
    const std::string text = frontend(a.value.get(), "xla.sdy.meshes");
    if (text.empty()) continue;
    Scanner sc(text);  // {mesh = #sdy.mesh<...>, ...}
    sc.expect('{');
    if (sc.consume('}')) continue;
    do {
      std::string name = sc.name();
      sc.expect('=');
      if (!sc.consume("#sdy.mesh")) sc.fail("expected #sdy.mesh");
      meshes[name] = read_mesh(sc);
    } while (sc.consume(','));
    sc.expect('}');
  }
  return meshes;
}

HloSharding sdy_sharding_to_hlo(std::string_view text, const std::map<std::string, SdyMesh>& meshes,
                                int64_t rank, int64_t num_partitions) {
  Scanner sc(text);
  sc.consume("#sdy.sharding");
  HloSharding h = read_sharding(sc, meshes, rank, num_partitions);
  if (!sc.at_end()) sc.fail("unexpected text after the sharding");
  return h;
}

bool has_shardy(const ir::Module& module) {
  const ir::Function* main = module.lookup("main");
  if (!main) return false;
  if (attrs_have_shardy(main->arg_attrs) || attrs_have_shardy(main->result_attrs)) return true;
  for (const auto& b : main->body.blocks)
    if (block_has_shardy(*b)) return true;
  return false;
}

void shardy_to_gspmd(ir::Module& module, int64_t num_partitions) {
  ir::Function* main = module.lookup("main");
  if (!main || !has_shardy(module)) return;
  ShardyRewriter rw(sdy_meshes(module), num_partitions);
  const std::vector<ir::Type> args = main->arg_types();
  main->arg_attrs.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) rw.attrs(main->arg_attrs[i], args[i].rank());
  main->result_attrs.resize(main->result_types.size());
  for (size_t i = 0; i < main->result_types.size(); ++i)
    rw.attrs(main->result_attrs[i], main->result_types[i].rank());
  rw.block(main->entry());
}

}  // namespace cujax::compiler
