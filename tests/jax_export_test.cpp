// jax.export's Exported.serialize() bytes: every exported.flatbuffer of JAX's backward-
// compatibility cases read by cujax and checked against the same bytes decoded another way
// (`flatc --json` through src/export/jax_export.fbs), against the case's meta.json and the
// portable artifact saved beside it; corrupt bytes; and a JAX export calling a module through
// module_kept_var_idx, built with flatc from JSON around a case's own portable artifact.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "cujax/core/error.h"
#include "cujax/core/json.h"
#include "cujax/core/npy.h"
#include "cujax/export.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "cujax/jax_export.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"
#include "cujax/runtime/spmd.h"
#include "export/symbolic_dims.h"
#include "host_compare.h"

namespace {

using namespace cujax;
namespace fs = std::filesystem;
namespace jx = cujax::jax_export;

fs::path cases_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return fs::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR) / "interop/jax-backcompat/cases";
}

const fs::path kSchema = fs::path(CUJAX_SOURCE_DIR) / "src/export/jax_export.fbs";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("cujax-jax-export-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// flatc with `args`; its exit status.
int flatc(const std::string& args) {
  const std::string cmd = std::string(CUJAX_FLATC) + " " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The flatbuffer as JSON, decoded by flatc through our schema (defaults written out).
json::Value flatc_json(const fs::path& flatbuffer, const fs::path& out_dir) {
  const int rc = flatc("--json --raw-binary --strict-json --defaults-json -o " + out_dir.string() +
                       " " + kSchema.string() + " -- " + flatbuffer.string());
  EXPECT_EQ(rc, 0) << "flatc could not decode " << flatbuffer;
  const fs::path json_path = out_dir / (flatbuffer.stem().string() + ".json");
  return json::parse(read_file(json_path), json_path.string());
}

std::vector<fs::path> export_cases() {
  std::vector<fs::path> out;
  if (!fs::exists(cases_dir())) return out;
  for (const auto& e : fs::directory_iterator(cases_dir()))
    if (fs::exists(e.path() / "exported.flatbuffer")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The JSON's enum names in JAX's spellings.
std::string numpy_dtype(const std::string& fb) {
  static const std::map<std::string, std::string> names = {
      {"bool_", "bool"},    {"i8", "int8"},         {"i16", "int16"},     {"i32", "int32"},
      {"i64", "int64"},     {"ui8", "uint8"},       {"ui16", "uint16"},   {"ui32", "uint32"},
      {"ui64", "uint64"},   {"f16", "float16"},     {"f32", "float32"},   {"f64", "float64"},
      {"c64", "complex64"}, {"c128", "complex128"}, {"bf16", "bfloat16"}, {"f0", "float0"}};
  const auto it = names.find(fb);
  return it == names.end() ? "<" + fb + ">" : it->second;
}

std::string memory_space(const std::string& fb) {
  return fb == "host" ? "Host" : fb == "any" ? "Any" : "Device";
}

// JAX's treedef text from the JSON tree.
std::string tree_text(const json::Value& t) {
  const std::string kind = t.at("kind").as_string();
  if (kind == "leaf") return "*";
  if (kind == "none") return "None";
  std::vector<std::string> kids;
  if (const auto* c = t.get("children"))
    for (const auto& k : c->as_array()) kids.push_back(tree_text(k));
  std::string s;
  for (size_t i = 0; i < kids.size(); ++i) {
    s += i ? ", " : "";
    if (kind == "dict") s += "'" + t.at("children_names").as_array()[i].as_string() + "': ";
    s += kids[i];
  }
  if (kind == "tuple") return "(" + s + (kids.size() == 1 ? ",)" : ")");
  if (kind == "list") return "[" + s + "]";
  if (kind == "dict") return "{" + s + "}";
  return "<" + kind + ">";
}

std::vector<std::string> string_list(const json::Value* v) {
  std::vector<std::string> out;
  if (v)
    for (const auto& s : v->as_array()) out.push_back(s.as_string());
  return out;
}

bool has_items(const json::Value& j, const char* key) {
  const auto* v = j.get(key);
  return v && !v->as_array().empty();
}

// The avals JAX wrote: through the unique table (schema version 10) or in place.
std::vector<json::Value> json_avals(const json::Value& j, const char* list, const char* idxs) {
  std::vector<json::Value> out;
  if (has_items(j, idxs)) {
    for (const auto& i : j.at(idxs).as_array())
      out.push_back(j.at("unique_avals").as_array()[static_cast<size_t>(i.as_int())]);
  } else if (const auto* v = j.get(list)) {
    for (const auto& a : v->as_array()) out.push_back(a);
  }
  return out;
}

// The named sharding of input or output i, or null when unspecified.
const json::Value* json_named_sharding(const json::Value& j, const char* list, const char* idxs,
                                       size_t i) {
  if (has_items(j, idxs)) {
    const int64_t k = j.at(idxs).as_array()[i].as_int();
    return k ? &j.at("unique_named_shardings").as_array()[static_cast<size_t>(k - 1)] : nullptr;
  }
  return j.at(list).as_array()[i].get("named_sharding");
}

void expect_avals(const std::vector<jx::AbstractValue>& got, const std::vector<json::Value>& want,
                  const json::Value& meta) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), meta.as_array().size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("aval " + std::to_string(i));
    EXPECT_EQ(got[i].shape, string_list(want[i].get("shape")));
    EXPECT_EQ(got[i].dtype, numpy_dtype(want[i].at("dtype").as_string()));
    EXPECT_EQ(got[i].memory_space, memory_space(want[i].at("memory_space").as_string()));
    const json::Value& m = meta.as_array()[i];
    EXPECT_EQ(got[i].shape, string_list(m.get("shape")));
    EXPECT_EQ(got[i].dtype, m.at("dtype").as_string());
    EXPECT_EQ(got[i].memory_space, m.at("memory_space").as_string());
  }
}

void expect_shardings(const std::vector<jx::Sharding>& got, const json::Value& j, const char* list,
                      const char* idxs, const std::vector<jx::AbstractValue>& avals) {
  const size_t n = has_items(j, idxs) ? j.at(idxs).as_array().size()
                                      : (j.get(list) ? j.at(list).as_array().size() : 0);
  ASSERT_EQ(got.size(), n);
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(std::string(list) + "[" + std::to_string(i) + "]");
    const json::Value* named = json_named_sharding(j, list, idxs, i);
    ASSERT_EQ(got[i].named.has_value(), named != nullptr);
    if (named) {
      std::vector<uint32_t> sizes;
      for (const auto& s : named->at("mesh").at("axis_sizes").as_array())
        sizes.push_back(static_cast<uint32_t>(s.as_int()));
      EXPECT_EQ(got[i].named->mesh.axis_sizes, sizes);
      EXPECT_EQ(got[i].named->mesh.axis_names, string_list(named->at("mesh").get("axis_names")));
      std::vector<std::vector<std::string>> spec;
      for (const auto& p : named->at("spec").at("partitions").as_array())
        spec.push_back(string_list(p.get("axes")));
      EXPECT_EQ(got[i].named->spec, spec);
    }
    // Up to schema version 8 the same sharding is also an XLA OpSharding: it must tile the
    // devices as the NamedSharding's conversion does.
    const bool proto =
        !has_items(j, idxs) && has_items(j.at(list).as_array()[i], "hlo_sharding_proto");
    ASSERT_EQ(got[i].hlo.has_value(), proto);
    if (got[i].hlo && got[i].named) {
      const jx::OpSharding converted = got[i].named->to_op_sharding(avals[i].shape.size());
      EXPECT_EQ(got[i].hlo->type, converted.type);
      EXPECT_EQ(got[i].hlo->tile_assignment_dimensions, converted.tile_assignment_dimensions);
      EXPECT_EQ(got[i].hlo->devices(), converted.devices());
      EXPECT_EQ(got[i].hlo->replicate_on_last_tile_dim, converted.replicate_on_last_tile_dim);
      EXPECT_EQ(got[i].hlo->str(), converted.str());
    }
  }
}

TEST(JaxExport, EveryFixtureReadsAsFlatcAndMetaJsonSay) {
  const auto cases = export_cases();
  if (cases.empty()) GTEST_SKIP() << "no " << cases_dir() << " (CUJAX_SHARED_DIR)";
  const fs::path tmp = scratch("json");
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    const fs::path file = dir / "exported.flatbuffer";
    const std::string bytes = read_file(file);
    ASSERT_TRUE(jx::is_serialized(bytes));
    const jx::Serialized s = jx::deserialize(bytes, file.string());
    const json::Value j = flatc_json(file, tmp);
    const json::Value meta = json::parse(read_file(dir / "meta.json"), "meta.json");

    EXPECT_EQ(s.function_name, j.at("function_name").as_string());
    EXPECT_EQ(s.function_name, meta.at("function_name").as_string());
    EXPECT_EQ(s.platforms, string_list(j.get("platforms")));
    EXPECT_EQ(s.platforms, string_list(meta.get("platforms")));
    EXPECT_EQ(s.in_tree.str(), "PyTreeDef(" + tree_text(j.at("in_tree")) + ")");
    EXPECT_EQ(s.out_tree.str(), "PyTreeDef(" + tree_text(j.at("out_tree")) + ")");
    expect_avals(s.in_avals, json_avals(j, "in_avals", "in_avals_idxs"), meta.at("in_avals"));
    expect_avals(s.out_avals, json_avals(j, "out_avals", "out_avals_idxs"), meta.at("out_avals"));
    expect_shardings(s.in_shardings, j, "in_shardings", "in_shardings_idxs", s.in_avals);
    expect_shardings(s.out_shardings, j, "out_shardings", "out_shardings_idxs", s.out_avals);
    const int64_t nr = j.at("nr_devices").as_int() ? j.at("nr_devices").as_int()
                                                   : j.at("nr_devices_short").as_int();
    EXPECT_EQ(s.nr_devices, nr);
    EXPECT_EQ(s.nr_devices, meta.at("nr_devices").as_int());
    std::vector<int> kept, meta_kept;
    for (const auto& k : j.at("module_kept_var_idx").as_array())
      kept.push_back(static_cast<int>(k.as_int()));
    for (const auto& k : meta.at("module_kept_var_idx").as_array())
      meta_kept.push_back(static_cast<int>(k.as_int()));
    EXPECT_EQ(s.module_kept_var_idx, kept);
    EXPECT_EQ(s.module_kept_var_idx, meta_kept);
    EXPECT_EQ(s.uses_global_constants, j.at("uses_global_constants").as_bool());
    EXPECT_EQ(s.uses_global_constants, meta.at("uses_global_constants").as_bool());
    EXPECT_EQ(s.calling_convention_version, j.at("calling_convention_version").as_int());
    EXPECT_EQ(s.calling_convention_version, meta.at("xla_call_module_version").as_int());
    EXPECT_EQ(s.serialization_version, j.at("serialization_version").as_int());
    // The stored version is 3 up to schema version 11; what the bytes use bounds the real one.
    const int64_t version = meta.at("serialization_version").as_int();
    EXPECT_LE(s.min_schema_version, version);
    EXPECT_GE(s.min_schema_version, std::min<int64_t>(version, 6));
    const json::Value& jv = meta.at("jax_version");
    EXPECT_EQ(s.jax_version, jv.is_null() ? "" : jv.as_string());
    EXPECT_EQ(s.ordered_effects.size(), j.at("ordered_effects").as_array().size());
    EXPECT_EQ(s.unordered_effects.size(), j.at("unordered_effects").as_array().size());
    EXPECT_EQ(s.disabled_checks.size(), j.at("disabled_checks").as_array().size());
    EXPECT_EQ(s.vjp != nullptr, j.get("vjp") != nullptr && !j.at("vjp").is_null());
    // The module is the portable artifact the case saved beside the flatbuffer.
    EXPECT_EQ(s.mlir_module_serialized, read_file(dir / "serialized.mlirbc"));
  }
  fs::remove_all(tmp);
}

TEST(JaxExport, OpShardingWireFormat) {
  // {devices=[2,1]<=[2]}: type OTHER, tile dims packed, iota reshape [2], transpose [0].
  const std::string tiled("\x08\x03\x1a\x02\x02\x01\x4a\x01\x02\x52\x01\x00", 12);
  const jx::OpSharding s = jx::OpSharding::parse(tiled, "t");
  EXPECT_EQ(s.str(), "{devices=[2,1]<=[2]}");
  EXPECT_EQ(s.devices(), (std::vector<int64_t>{0, 1}));
  // Unpacked repeated fields, an explicit device list and a skipped field (11: metadata).
  const std::string listed(
      "\x08\x03\x18\x02\x18\x02\x20\x03\x20\x01\x20\x02\x20\x00\x30\x01"
      "\x5a\x02\x08\x01",
      20);
  const jx::OpSharding l = jx::OpSharding::parse(listed, "l");
  EXPECT_EQ(l.str(), "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}");
  // iota [2,3] transposed (1,0): devices 0,3,1,4,2,5.
  jx::OpSharding t;
  t.type = jx::OpSharding::OTHER;
  t.tile_assignment_dimensions = {3, 2};
  t.iota_reshape_dims = {2, 3};
  t.iota_transpose_perm = {1, 0};
  EXPECT_EQ(t.devices(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.str(), "{devices=[3,2]<=[2,3]T(1,0)}");
  // Truncated: a clear error with the offset.
  try {
    jx::OpSharding::parse(tiled.substr(0, 4), "cut");
    FAIL() << "a truncated OpSharding was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut: OpSharding byte"), std::string::npos) << e.what();
  }
}

TEST(JaxExport, NamedShardingToOpSharding) {
  jx::NamedSharding n;
  n.mesh.axis_sizes = {2, 4};
  n.mesh.axis_names = {"x", "y"};
  n.spec = {{"y"}, {}};
  // Tiled 4 ways along y, replicated over x: devices of mesh [[0..3],[4..7]] read y-major.
  const jx::OpSharding s = n.to_op_sharding(2);
  EXPECT_EQ(s.tile_assignment_dimensions, (std::vector<int64_t>{4, 1, 2}));
  EXPECT_TRUE(s.replicate_on_last_tile_dim);
  EXPECT_EQ(s.devices(), (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  n.spec = {};
  EXPECT_EQ(n.to_op_sharding(2).str(), "{replicated}");
}

TEST(JaxExport, CorruptBytesNameTheFileAndOffset) {
  const auto cases = export_cases();
  if (cases.empty()) GTEST_SKIP() << "no " << cases_dir() << " (CUJAX_SHARED_DIR)";
  const std::string bytes = read_file(cases[0] / "exported.flatbuffer");
  // Every truncation is refused with the name and a byte offset, never read past the end.
  size_t refused = 0;
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 16) {
    const std::string cut = bytes.substr(0, n);
    EXPECT_FALSE(jx::is_serialized(cut)) << n;
    try {
      jx::deserialize(cut, "cut.flatbuffer");
      ADD_FAILURE() << "a flatbuffer cut to " << n << " bytes was read";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("cut.flatbuffer: ", 0), 0u) << m;
      EXPECT_TRUE(m.find("byte") != std::string::npos || m.find("truncated") != std::string::npos)
          << m;
      ++refused;
    }
  }
  EXPECT_GT(refused, 10u);
  // An offset pointing past the end names the field and where it is.
  std::string bad = bytes;
  uint32_t root;
  std::memcpy(&root, bad.data(), 4);
  bad[0] = '\xff';
  bad[1] = '\xff';
  try {
    Exported::deserialize(bad, "bad.flatbuffer");
    FAIL() << "a corrupt root offset was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bad.flatbuffer"), std::string::npos) << m;
    EXPECT_NE(m.find("root table offset at byte 0"), std::string::npos) << m;
  }
  // Garbage is neither format, and says both.
  try {
    Exported::deserialize(std::string(64, '\x07'), "junk.bin");
    FAIL() << "garbage was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("not a cujax exported artifact"), std::string::npos) << m;
    EXPECT_NE(m.find("jax.export"), std::string::npos) << m;
  }
}

// A JAX export around a case's own portable artifact (built by flatc from JSON): an unused
// input that module_kept_var_idx drops, the trees, and the results JAX computed.
TEST(JaxExport, CallDropsUnusedInputsAndMatchesJax) {
  const fs::path dir = cases_dir() / "cpu_tridiagonal_solve_lapack_gtsv__data_2025_01_09__f32";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (CUJAX_SHARED_DIR)";
  const json::Value meta = json::parse(read_file(dir / "meta.json"), "meta.json");
  const std::string module = read_file(dir / "serialized.mlirbc");
  auto aval = [](const json::Value& a) {
    std::string shape;
    for (const auto& d : a.at("shape").as_array())
      shape += (shape.empty() ? "\"" : ", \"") + std::to_string(d.as_int()) + "\"";
    return "{\"shape\": [" + shape + "], \"dtype\": \"f32\"}";
  };
  // Inputs: the case's four, with an unused f32[7] between the second and the third.
  std::vector<std::string> in_avals;
  std::vector<HostTensor> inputs;
  const auto& ins = meta.at("inputs").as_array();
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i == 2) {
      in_avals.push_back("{\"shape\": [\"7\"], \"dtype\": \"f32\"}");
      inputs.push_back(HostTensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7}, Shape{7}));
    }
    in_avals.push_back(aval(ins[i]));
    inputs.push_back(load_npy((dir / ins[i].at("file").as_string()).string()));
  }
  std::string avals_in, leaves, bytes;
  for (size_t i = 0; i < in_avals.size(); ++i) {
    avals_in += (i ? ", " : "") + in_avals[i];
    leaves += std::string(i ? ", " : "") + "{\"kind\": \"leaf\"}";
  }
  // [byte] is signed in flatbuffers' JSON.
  for (const char c : module)
    bytes +=
        (bytes.empty() ? "" : ",") + std::to_string(static_cast<int>(static_cast<signed char>(c)));
  const auto& outs = meta.at("expected").as_array();
  ASSERT_EQ(outs.size(), 1u);
  const std::string json_text =
      "{\"serialization_version\": 3, \"function_name\": \"solve\", "
      "\"in_tree\": {\"kind\": \"tuple\", \"children\": [{\"kind\": \"tuple\", \"children\": [" +
      leaves + "]}, {\"kind\": \"dict\"}]}, \"in_avals\": [" + avals_in +
      "], \"out_tree\": {\"kind\": \"leaf\"}, \"out_avals\": [" + aval(outs[0]) +
      "], \"platforms\": [\"cpu\"], \"mlir_module_serialized\": [" + bytes +
      "], \"calling_convention_version\": 10, \"module_kept_var_idx\": [0, 1, 3, 4], "
      "\"nr_devices\": 1}";
  const fs::path tmp = scratch("call");
  write_file(tmp / "solve.json", json_text);
  ASSERT_EQ(flatc("--binary -o " + tmp.string() + " " + kSchema.string() + " " +
                  (tmp / "solve.json").string()),
            0);
  const Exported e = Exported::load((tmp / "solve.bin").string());
  EXPECT_EQ(e.fun_name(), "solve");
  EXPECT_EQ(e.in_tree(), "jax:PyTreeDef(((*, *, *, *, *), {}))");
  EXPECT_EQ(e.out_tree(), "jax:PyTreeDef(*)");
  ASSERT_EQ(e.in_leaves().size(), 5u);
  EXPECT_EQ(e.in_leaves()[2].path, "args[2]");
  EXPECT_EQ(e.in_leaves()[2].aval.shape, (Shape{7}));
  ASSERT_NE(e.jax(), nullptr);
  EXPECT_EQ(e.jax()->module_kept_var_idx, (std::vector<int>{0, 1, 3, 4}));
  // Serializing gives back JAX's bytes.
  EXPECT_EQ(e.serialize(), read_file(tmp / "solve.bin"));

  std::vector<Array> args;
  for (const HostTensor& t : inputs) args.push_back(array(t));
  const HostTensor expected = load_npy((dir / outs[0].at("file").as_string()).string());
  const DynamicTree out = e.call(args[0], args[1], args[2], args[3], args[4]);
  ASSERT_TRUE(out.is_leaf());
  expect_same(out.array().to_host(), expected, 1e-3, 1e-4, "call");
  // The flat form gives the same, and a wrong structure is refused naming JAX's tree.
  expect_same(e.call_flat(args)[0].to_host(), expected, 1e-3, 1e-4, "call_flat");
  try {
    e.call(args[0], args[1]);
    FAIL() << "two arguments for five were accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("PyTreeDef(((*, *, *, *, *), {}))"), std::string::npos)
        << err.what();
  }
  fs::remove_all(tmp);
}

// A JAX export lowered for two platforms: @main takes the platform's index first, which cujax
// passes for the platform it runs (or the lowering asked for).
TEST(JaxExport, PlatformIndexSelectsTheLowering) {
  const std::string text =
      R"(func.func @main(%arg0: tensor<i32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<i32>) -> tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %2 = stablehlo.add %arg1, %1 : tensor<3xf32>
  return %2 : tensor<3xf32>
})";
  const std::string module =
      ir::write_bytecode(*ir::parse_module(text), ir::default_portable_artifact_target());
  std::string bytes;
  for (const char c : module)
    bytes +=
        (bytes.empty() ? "" : ",") + std::to_string(static_cast<int>(static_cast<signed char>(c)));
  const std::string json_text =
      "{\"function_name\": \"shift\", \"in_tree\": {\"kind\": \"tuple\", \"children\": "
      "[{\"kind\": \"tuple\", \"children\": [{\"kind\": \"leaf\"}]}, {\"kind\": \"dict\"}]}, "
      "\"in_avals\": [{\"shape\": [\"3\"], \"dtype\": \"f32\"}], \"out_tree\": {\"kind\": "
      "\"leaf\"}, \"out_avals\": [{\"shape\": [\"3\"], \"dtype\": \"f32\"}], \"platforms\": "
      "[\"cuda\", \"cpu\", \"tpu\"], \"mlir_module_serialized\": [" +
      bytes + "], \"calling_convention_version\": 9, \"module_kept_var_idx\": [0]}";
  const fs::path tmp = scratch("platforms");
  write_file(tmp / "shift.json", json_text);
  ASSERT_EQ(flatc("--binary -o " + tmp.string() + " " + kSchema.string() + " " +
                  (tmp / "shift.json").string()),
            0);
  const std::string file = (tmp / "shift.bin").string();
  const Array x = array(HostTensor::from_vector<float>({1.5f, -2.0f, 0.25f}, Shape{3}));
  // On cpu: cpu's lowering, index 1.
  const Exported on_cpu = Exported::load(file);
  on_cpu.compile("cpu");
  EXPECT_EQ(on_cpu.call_flat({x})[0].to_vector<float>(), (std::vector<float>{2.5f, -1.0f, 1.25f}));
  // tpu's lowering (index 2) on the cpu backend, as cujax run --lowering-platform tpu.
  const Exported as_tpu = Exported::load(file);
  as_tpu.compile_lowering("tpu", "cpu");
  EXPECT_EQ(as_tpu.call_flat({x})[0].to_vector<float>(), (std::vector<float>{3.5f, 0.0f, 2.25f}));
  EXPECT_THROW(as_tpu.compile_lowering("rocm", "cpu"), Error);
  fs::remove_all(tmp);
}

// serialize_jax: a cujax export written as jax.export's bytes reads back (through cujax and,
// a second way, through flatc) with its trees and avals, and its call gives the jitted results.
TEST(JaxExport, SerializeJaxReadsBackAndCalls) {
  namespace jnp = cujax::numpy;
  JitOptions opts;
  opts.name = "affine";
  auto f = jit(
      [](const Array& x, const std::vector<Array>& wb) {
        const Array y = jnp::matmul(x, wb[0]) + wb[1];
        return std::make_tuple(y, jnp::sum(y));
      },
      opts);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 6), {2, 3});
  const std::vector<Array> wb = {jnp::reshape(jnp::linspace(0.5, 2.0, 12), {3, 4}),
                                 jnp::linspace(-0.5, 0.5, 4)};
  const auto want = f(x, wb);
  const std::string bytes = export_(f, x, wb).serialize_jax("cpu");

  const jx::Serialized s = jx::deserialize(bytes, "affine.jax");
  EXPECT_EQ(s.function_name, "affine");
  EXPECT_EQ(s.in_tree.str(), "PyTreeDef(((*, [*, *]), {}))");
  EXPECT_EQ(s.out_tree.str(), "PyTreeDef((*, *))");
  ASSERT_EQ(s.in_avals.size(), 3u);
  EXPECT_EQ(s.in_avals[1].str(), "f32[3,4]");
  EXPECT_EQ(s.out_avals[1].str(), "f32[]");
  EXPECT_EQ(s.platforms, (std::vector<std::string>{"cpu"}));
  EXPECT_EQ(s.module_kept_var_idx, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s.calling_convention_version, 9);
  EXPECT_EQ(s.nr_devices, 1u);

  // flatc reads the same fields through the schema.
  const fs::path tmp = scratch("write");
  write_file(tmp / "affine.bin", bytes);
  const json::Value j = flatc_json(tmp / "affine.bin", tmp);
  EXPECT_EQ(j.at("function_name").as_string(), "affine");
  EXPECT_EQ("PyTreeDef(" + tree_text(j.at("in_tree")) + ")", s.in_tree.str());
  EXPECT_EQ(json_avals(j, "in_avals", "in_avals_idxs").size(), 3u);
  EXPECT_EQ(string_list(json_avals(j, "out_avals", "out_avals_idxs")[0].get("shape")),
            (std::vector<std::string>{"2", "4"}));
  fs::remove_all(tmp);

  const Exported back = Exported::deserialize(bytes, "affine.jax");
  const DynamicTree out = back.call(x, wb);
  ASSERT_EQ(out.kind(), "tuple2");
  EXPECT_EQ(out[0].array().to_vector<float>(), std::get<0>(want).to_vector<float>());
  EXPECT_EQ(out[1].array().item<float>(), std::get<1>(want).item<float>());
  EXPECT_EQ(back.serialize_jax(), bytes);
}

// Where the fixture's module reads (its sdy.mesh and sharding annotations included), it runs on
// as many cpu devices as it was exported for and matches JAX's outputs.
TEST(JaxExport, FixturesRunWhereTheirModuleReads) {
  const auto cases = export_cases();
  if (cases.empty()) GTEST_SKIP() << "no " << cases_dir() << " (CUJAX_SHARED_DIR)";
  std::string unread;
  size_t ran = 0;
  // Exports for several devices run on that many virtual cpu devices (through the SPMD
  // partitioner), so the count is set before the cpu backend is first used.
  std::vector<std::optional<Exported>> loaded;
  int devices = 1;
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    try {
      loaded.emplace_back(Exported::load((dir / "exported.flatbuffer").string()));
      devices = std::max(devices, loaded.back()->nr_devices());
    } catch (const Error& err) {
      // The module reader's open limits (shardy's sdy dialect) belong to the IR, not to the
      // container: note them; any other refusal is a failure.
      const std::string m = err.what();
      if (m.find("sdy.") == std::string::npos) ADD_FAILURE() << m;
      unread += "\n  " + dir.filename().string() + ": " + m;
      loaded.emplace_back();
    }
  }
  const std::optional<int> from_env = runtime::cpu_devices_from_environment();
  if (!from_env) runtime::set_num_cpu_devices(devices);
  for (size_t c = 0; c < cases.size(); ++c) {
    const fs::path& dir = cases[c];
    SCOPED_TRACE(dir.filename().string());
    std::optional<Exported>& e = loaded[c];
    if (!e) continue;
    if (e->nr_devices() > runtime::num_cpu_devices()) {
      ADD_FAILURE() << "needs " << e->nr_devices() << " devices; CUJAX_NUM_CPU_DEVICES gives "
                    << runtime::num_cpu_devices();
      continue;
    }
    const json::Value meta = json::parse(read_file(dir / "meta.json"), "meta.json");
    std::vector<Array> args;
    for (const auto& in : meta.at("inputs").as_array())
      args.push_back(array(load_npy((dir / in.at("file").as_string()).string())));
    const std::vector<std::string> plats = e->platforms();
    std::vector<Array> outs;
    if (std::find(plats.begin(), plats.end(), "cpu") == plats.end())
      e->compile_lowering(plats[0], "cpu");
    outs = e->call_flat(args);
    const auto& expected = meta.at("expected").as_array();
    ASSERT_EQ(outs.size(), expected.size());
    for (size_t i = 0; i < outs.size(); ++i)
      expect_same(outs[i].to_host(), load_npy((dir / expected[i].at("file").as_string()).string()),
                  1e-6, 1e-6, "output " + std::to_string(i));
    ++ran;
  }
  if (!unread.empty())
    std::cout << "[ NOTE     ] read but not run (module reader):" << unread << "\n";
  RecordProperty("ran", static_cast<int>(ran));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// --- symbolic dimensions ---------------------------------------------------------------------

TEST(SymbolicDims, ParsesSumsOfProducts) {
  using jax_export::parse_dim_expr;
  const std::map<std::string, int64_t> vars = {{"b", 3}, {"c", 5}};
  EXPECT_EQ(parse_dim_expr("b").evaluate(vars), 3);
  EXPECT_EQ(parse_dim_expr("2*b").evaluate(vars), 6);
  EXPECT_EQ(parse_dim_expr("b + 1").evaluate(vars), 4);
  EXPECT_EQ(parse_dim_expr("b*c - 2*b + 7").evaluate(vars), 15 - 6 + 7);
  EXPECT_EQ(parse_dim_expr("-(b - c)*2").evaluate(vars), 4);
  EXPECT_EQ(parse_dim_expr("b*b").evaluate(vars), 9);
  EXPECT_EQ(parse_dim_expr("b - b + 4").terms.size(), 1u);  // terms cancel
  EXPECT_EQ(parse_dim_expr("c*b + 2").variables(), (std::vector<std::string>{"b", "c"}));
  for (const char* bad : {"", "b +", "2**b", "(b", "b)", "b $ 1"})
    EXPECT_THROW(parse_dim_expr(bad), Error) << bad;
  const std::string op = error_of([] { parse_dim_expr("log(b)"); });
  EXPECT_NE(op.find("unknown operator log(...)"), std::string::npos) << op;
  EXPECT_NE(op.find("'log(b)'"), std::string::npos) << op;
}

// JAX's floordiv, mod, max, min and non_negative, as Python's // and % round (toward negative
// infinity), against values worked out by hand.
TEST(SymbolicDims, FloordivModMaxMinEvaluate) {
  using jax_export::parse_dim_expr;
  const std::map<std::string, int64_t> b7 = {{"b", 7}, {"c", 3}};
  EXPECT_EQ(parse_dim_expr("b // 2").evaluate(b7), 3);
  EXPECT_EQ(parse_dim_expr("floordiv(b, 2)").evaluate(b7), 3);
  EXPECT_EQ(parse_dim_expr("b % 3").evaluate(b7), 1);
  EXPECT_EQ(parse_dim_expr("mod(b, c)").evaluate(b7), 1);
  EXPECT_EQ(parse_dim_expr("b // c * 2 + b % c").evaluate(b7), 5);
  EXPECT_EQ(parse_dim_expr("2*(b // 2) + b % 2").evaluate(b7), 7);
  EXPECT_EQ(parse_dim_expr("max(b, 10)").evaluate(b7), 10);
  EXPECT_EQ(parse_dim_expr("min(b, 10)").evaluate(b7), 7);
  EXPECT_EQ(parse_dim_expr("non_negative(b - 10)").evaluate(b7), 0);
  EXPECT_EQ(parse_dim_expr("non_negative(b - 4)").evaluate(b7), 3);
  EXPECT_EQ(parse_dim_expr("(2 - b) // 2").evaluate(b7), -3);  // -5 // 2
  EXPECT_EQ(parse_dim_expr("(2 - b) % 3").evaluate(b7), 1);    // -5 % 3
  EXPECT_EQ(parse_dim_expr("b % (0 - 3)").evaluate(b7), -2);   // 7 % -3
  // Constants fold; the two spellings are one factor; variables inside operators count.
  EXPECT_EQ(parse_dim_expr("7 // 2 + 7 % 2").str(), "4");
  EXPECT_TRUE(parse_dim_expr("b // 2 - floordiv(b, 2)").terms.empty());
  EXPECT_EQ(parse_dim_expr("b // c + 1").variables(), (std::vector<std::string>{"b", "c"}));
  const std::string zero = error_of([] {
    parse_dim_expr("b // (c - 3)").evaluate({{"b", 1}, {"c", 3}});
  });
  EXPECT_NE(zero.find("division by zero"), std::string::npos) << zero;
  EXPECT_THROW(parse_dim_expr("1 // 0"), Error);
  const std::string arity = error_of([] { parse_dim_expr("floordiv(b)"); });
  EXPECT_NE(arity.find("floordiv takes 2 operands, not 1"), std::string::npos) << arity;
}

TEST(SymbolicDims, OperatorDimensionsAreCheckedNotSolved) {
  using jax_export::solve_dimension_vars;
  EXPECT_EQ(solve_dimension_vars({{"args[0]", {"b", "b // 2", "b % 3"}, {7, 3, 1}}}).at("b"), 7);
  const std::string wrong = error_of([] {
    solve_dimension_vars({{"args[0]", {"b", "b // 2"}, {7, 4}}});
  });
  EXPECT_NE(wrong.find("Found inconsistency between dimension size args[0].shape[1] (= 4) and the "
                       "specification 'b // 2' (= 3)"),
            std::string::npos)
      << wrong;
  // b only under an operator: JAX does not solve it from there either.
  const std::string alone = error_of([] { solve_dimension_vars({{"args[0]", {"b // 2"}, {3}}}); });
  EXPECT_NE(alone.find("Cannot solve for values of dimension variables 'b'"), std::string::npos)
      << alone;
}

TEST(SymbolicDims, SolvesVariablesFromShapes) {
  using jax_export::solve_dimension_vars;
  // b from args[1] (alone), then c from 2*b + c once b is known; b*c checked after.
  const auto vars = solve_dimension_vars(
      {{"args[0]", {"2*b + c", "b*c"}, {13, 20}}, {"args[1]", {"b", "4"}, {4, 4}}});
  EXPECT_EQ(vars, (std::map<std::string, int64_t>{{"b", 4}, {"c", 5}}));
  EXPECT_EQ(solve_dimension_vars({{"args[0]", {"b + 1"}, {8}}}).at("b"), 7);
}

TEST(SymbolicDims, InconsistentCallsGiveJaxsMessages) {
  using jax_export::solve_dimension_vars;
  const std::string odd = error_of([] {
    solve_dimension_vars({{"args[0]", {"2*b", "3"}, {5, 3}}});
  });
  EXPECT_NE(odd.find("Input shapes do not match the polymorphic shapes specification. Division "
                     "had remainder 1 when computing the value of 'b'."),
            std::string::npos)
      << odd;
  EXPECT_NE(odd.find("args[0].shape = (2*b, 3)"), std::string::npos) << odd;
  const std::string twice = error_of([] {
    solve_dimension_vars({{"args[0]", {"b"}, {3}}, {"args[1]", {"b", "2"}, {4, 2}}});
  });
  EXPECT_NE(twice.find("Found inconsistency between dimension size args[1].shape[0] (= 4) and the "
                       "specification 'b' (= 3)."),
            std::string::npos)
      << twice;
  EXPECT_NE(twice.find("'b' = 3 from specification 'b' for dimension args[0].shape[0] (= 3)"),
            std::string::npos)
      << twice;
  const std::string small = error_of([] { solve_dimension_vars({{"args[0]", {"b + 1"}, {1}}}); });
  EXPECT_NE(small.find("Expected value >= 1 for dimension variable 'b'."), std::string::npos)
      << small;
  const std::string unsolved = error_of([] { solve_dimension_vars({{"args[0]", {"b*c"}, {6}}}); });
  EXPECT_NE(unsolved.find("Cannot solve for values of dimension variables 'b', 'c'"),
            std::string::npos)
      << unsolved;
}

// A JAX export with symbolic in_avals (built by flatc from JSON): f(x: f32[b], y: f32[b]) = x + y
// and g(x: f32[2*b]) = x * x, called at consistent and inconsistent sizes.
Exported symbolic_export(const std::string& name, const std::string& main_text,
                         const std::vector<std::string>& avals, const std::string& extra = "") {
  const std::string module =
      ir::write_bytecode(*ir::parse_module(main_text), ir::default_portable_artifact_target());
  std::string bytes, in_avals, leaves;
  for (const char c : module)
    bytes +=
        (bytes.empty() ? "" : ",") + std::to_string(static_cast<int>(static_cast<signed char>(c)));
  std::string kept;
  for (size_t i = 0; i < avals.size(); ++i) {
    in_avals +=
        std::string(i ? ", " : "") + "{\"shape\": [\"" + avals[i] + "\"], \"dtype\": \"f32\"}";
    leaves += std::string(i ? ", " : "") + "{\"kind\": \"leaf\"}";
    kept += std::string(i ? ", " : "") + std::to_string(i);
  }
  const std::string json_text =
      "{\"function_name\": \"" + name +
      "\", \"in_tree\": {\"kind\": \"tuple\", \"children\": [{\"kind\": \"tuple\", \"children\": "
      "[" +
      leaves + "]}, {\"kind\": \"dict\"}]}, \"in_avals\": [" + in_avals +
      "], \"out_tree\": {\"kind\": \"leaf\"}, \"out_avals\": [{\"shape\": [\"" + avals[0] +
      "\"], \"dtype\": \"f32\"}], \"platforms\": [\"cpu\"], \"mlir_module_serialized\": [" + bytes +
      "], \"calling_convention_version\": 9, \"module_kept_var_idx\": [" + kept + "]" + extra + "}";
  const fs::path tmp = scratch("symbolic_" + name);
  write_file(tmp / (name + ".json"), json_text);
  EXPECT_EQ(flatc("--binary -o " + tmp.string() + " " + kSchema.string() + " " +
                  (tmp / (name + ".json")).string()),
            0);
  Exported e = Exported::load((tmp / (name + ".bin")).string());
  fs::remove_all(tmp);
  return e;
}

TEST(SymbolicDims, ExportedChecksItsInputsAgainstTheSymbolicAvals) {
  const Exported add = symbolic_export(
      "add", R"(func.func @main(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<?xf32>
  return %0 : tensor<?xf32>
})",
      {"b", "b"});
  const Array x3 = array(HostTensor::from_vector<float>({1, 2, 3}, Shape{3}));
  const Array y3 = array(HostTensor::from_vector<float>({0.5f, -1, 4}, Shape{3}));
  const Array y4 = array(HostTensor::from_vector<float>({0.5f, -1, 4, 2}, Shape{4}));
  EXPECT_EQ(add.call_flat({x3, y3})[0].to_vector<float>(), (std::vector<float>{1.5f, 1, 7}));
  const std::string twice = error_of([&] { add.call_flat({x3, y4}); });
  EXPECT_NE(twice.find("Found inconsistency between dimension size args[1].shape[0] (= 4) and the "
                       "specification 'b' (= 3)"),
            std::string::npos)
      << twice;

  const Exported square =
      symbolic_export("square", R"(func.func @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<?xf32>
  return %0 : tensor<?xf32>
})",
                      {"2*b"});
  EXPECT_EQ(square.jax()->in_avals[0].shape, (std::vector<std::string>{"2*b"}));
  const Array x4 = array(HostTensor::from_vector<float>({1, -2, 3, 0.5f}, Shape{4}));
  EXPECT_EQ(square.call_flat({x4})[0].to_vector<float>(), (std::vector<float>{1, 4, 9, 0.25f}));
  const std::string odd = error_of([&] { square.call_flat({x3}); });
  EXPECT_NE(odd.find("Division had remainder 1 when computing the value of 'b'"), std::string::npos)
      << odd;

  // f(x: f32[b], y: f32[b // 2]) = x * x: y's length is checked against b's.
  const Exported halves = symbolic_export(
      "halves", R"(func.func @main(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<?xf32>
  return %0 : tensor<?xf32>
})",
      {"b", "b // 2"});
  const Array x5 = array(HostTensor::from_vector<float>({1, -2, 3, 0.5f, 2}, Shape{5}));
  const Array y2 = array(HostTensor::from_vector<float>({7, 8}, Shape{2}));
  EXPECT_EQ(halves.call_flat({x5, y2})[0].to_vector<float>(),
            (std::vector<float>{1, 4, 9, 0.25f, 4}));
  const std::string half = error_of([&] { halves.call_flat({x5, y3}); });
  EXPECT_NE(half.find("Found inconsistency between dimension size args[1].shape[0] (= 3) and the "
                      "specification 'b // 2' (= 2)"),
            std::string::npos)
      << half;
}

// JAX's convention for ordered effects: @main takes a token after the platform index and returns
// one before its results; the call makes and drops them.
const char* kWithEffectToken =
    R"(func.func public @main(%arg0: !stablehlo.token, %arg1: tensor<3xf32>) -> (!stablehlo.token, tensor<3xf32>) {
  %0:2 = call @_wrapped_jax_export_main(%arg0, %arg1) : (!stablehlo.token, tensor<3xf32>) -> (!stablehlo.token, tensor<3xf32>)
  return %0#0, %0#1 : !stablehlo.token, tensor<3xf32>
}
func.func private @_wrapped_jax_export_main(%arg0: !stablehlo.token, %arg1: tensor<3xf32>) -> (!stablehlo.token, tensor<3xf32>) {
  %0 = stablehlo.multiply %arg1, %arg1 : tensor<3xf32>
  %1:2 = stablehlo.optimization_barrier %arg0, %0 : !stablehlo.token, tensor<3xf32>
  %2 = stablehlo.after_all %1#0 : !stablehlo.token
  %3 = stablehlo.add %1#1, %arg1 : tensor<3xf32>
  return %2, %3 : !stablehlo.token, tensor<3xf32>
})";

TEST(JaxExport, OrderedEffectsTokensAreMadeAndDroppedByTheCall) {
  const Exported e =
      symbolic_export("effects", kWithEffectToken, {"3"},
                      ", \"ordered_effects\": [{\"type_name\": \"ForTestingOrderedEffect1()\"}]");
  ASSERT_EQ(e.jax()->ordered_effects.size(), 1u);
  const Array x = array(HostTensor::from_vector<float>({1, -2, 0.5f}, Shape{3}));
  const auto out = e.call_flat({x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 2, 0.75f}));  // x*x + x
  // Two effects recorded for a module that passes one token: refused naming the count.
  const std::string two = error_of([] {
    symbolic_export(
        "effects2", kWithEffectToken, {"3"},
        ", \"ordered_effects\": [{\"type_name\": \"E1()\"}, {\"type_name\": \"E2()\"}]");
  });
  EXPECT_NE(two.find("2 effect tokens"), std::string::npos) << two;
  // A bare module with tokens, as `cujax run` calls one (Exported::from_module): its arrays only.
  const Exported bare = Exported::from_module(kWithEffectToken);
  ASSERT_EQ(bare.in_avals().size(), 1u);
  EXPECT_EQ(bare.call_flat({x})[0].to_vector<float>(), (std::vector<float>{2, 2, 0.75f}));
}

}  // namespace
