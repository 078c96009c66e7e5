// StableHLO portable artifacts (MLIR bytecode of VHLO) against the text they were written from:
// StableHLO's own vhlo/ test files and every serialized.mlirbc of JAX's backward-compatibility
// cases, compared through cujax's printed IR (locations aside); and the writer: text -> bytecode
// -> text gives the same module (the conformance programs, vhlo/, jax-backcompat/).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/refine_shapes.h"
#include "cujax/core/error.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "ir/bytecode/container.h"

namespace {

using namespace cujax;
using namespace cujax::ir;
namespace fs = std::filesystem;

fs::path shared_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return fs::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR);
}

fs::path interop_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return fs::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR) / "interop";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The same attribute with dictionary and struct fields in name order: MLIR sorts a dictionary's
// entries and StableHLO's structs print in one order, while cujax's parser keeps the order it
// read, so the two spellings of one module would otherwise print differently.
AttrRef canonical(const AttrRef& a) {
  if (!a) return a;
  auto c = std::make_shared<Attribute>(*a);
  for (auto& e : c->elements) e = canonical(e);
  for (auto& f : c->fields) f.value = canonical(f.value);
  if (c->kind == Attribute::Kind::Dictionary || c->kind == Attribute::Kind::Struct)
    std::stable_sort(
        c->fields.begin(), c->fields.end(),
        [](const NamedAttribute& x, const NamedAttribute& y) { return x.name < y.name; });
  return c;
}

void canonical(std::vector<NamedAttribute>& attrs) {
  for (auto& a : attrs) a.value = canonical(a.value);
  std::stable_sort(
      attrs.begin(), attrs.end(),
      [](const NamedAttribute& x, const NamedAttribute& y) { return x.name < y.name; });
}

void canonical(Region& r);
void canonical(Operation& op) {
  op.loc.clear();
  canonical(op.attributes);
  // StableHLO's default custom-call API version, which its VHLO legalization elides.
  if (op.name == "stablehlo.custom_call") {
    std::erase_if(op.attributes, [](const NamedAttribute& a) {
      return a.name == "api_version" && a.value->kind == Attribute::Kind::Integer &&
             a.value->integer == 1;
    });
  }
  for (auto& r : op.regions) canonical(*r);
}
void canonical(Region& r) {
  for (auto& b : r.blocks) {
    for (auto& a : b->arguments) a->loc.clear();
    for (auto& op : b->ops) canonical(*op);
  }
}

std::string printed(std::unique_ptr<Module> m) {
  m->loc.clear();
  m->aliases.clear();
  canonical(m->attributes);
  for (auto& f : m->functions) {
    f->loc.clear();
    canonical(f->attributes);
    for (auto& l : f->arg_attrs) canonical(l);
    for (auto& l : f->result_attrs) canonical(l);
    canonical(f->body);
  }
  return print_module(*m);
}

// The top-level functions of StableHLO text: each `func.func` line opens one, which runs to the
// next; comment lines and the enclosing `module {` / `}` are dropped.
std::map<std::string, std::string> split_functions(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, current;
  bool in_module = false;
  while (std::getline(in, line)) {
    const size_t i = line.find_first_not_of(' ');
    if (i == std::string::npos || line.compare(i, 2, "//") == 0) continue;
    if (i == 0 && line.rfind("module", 0) == 0) {
      in_module = true;
      continue;
    }
    if (in_module && line == "}") continue;
    if (line.compare(i, 9, "func.func") == 0) {
      const size_t at = line.find('@');
      current = line.substr(at + 1, line.find('(', at) - at - 1);
    }
    if (!current.empty()) out[current] += line + "\n";
  }
  return out;
}

TEST(PortableArtifacts, DetectsTheMagicAndReadsTheProducer) {
  EXPECT_TRUE(is_bytecode(std::string("ML\xefR\x06StableHLO_v1.2.3\0", 22)));
  EXPECT_FALSE(is_bytecode("module {}"));
  EXPECT_FALSE(is_bytecode("ML"));
  EXPECT_EQ(portable_artifact_version(std::string("ML\xefR\x0dStableHLO_v1.2.3\0", 22), "x"),
            "1.2.3");
  EXPECT_THROW(bytecode_producer("ML\xefR\x0dStableHLO", "x"), Error);  // no NUL
}

// Upstream's own check: deserializing X.mlir.bc gives the module of X.mlir. cujax's parser does
// not read every function of those files yet (index element types, dynamic shapes, tuples), so
// they are compared function by function and the ones its text parser refuses are counted.
TEST(PortableArtifacts, VhloTestFilesReadAsTheirSourceText) {
  const fs::path dir = interop_dir() / "vhlo";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t files = 0, same = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".mlir.bc")) continue;
    SCOPED_TRACE(name);
    ++files;
    const std::string bc = read_file(e.path());
    const std::string src = read_file(e.path().parent_path() / name.substr(0, name.size() - 3));
    std::string text;
    ASSERT_NO_THROW(text = bytecode_to_stablehlo_text(bc, name));
    const auto got = split_functions(text), want = split_functions(src);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [fn, body] : want) {
      SCOPED_TRACE(fn);
      ASSERT_TRUE(got.count(fn)) << "function @" << fn << " missing from the bytecode";
      std::string expected;
      try {
        expected = printed(parse_module(body));
      } catch (const Error& err) {
        // What cujax cannot parse as text it must not read from bytecode either: the same
        // refusal, not a different module.
        ++skipped;
        const std::string why = err.what();
        const std::string reason = why.substr(why.find(": ") + 2, 40);
        ++skip_reasons[reason];
        try {
          parse_module(got.at(fn));
          ADD_FAILURE() << "the bytecode's @" << fn << " parses, its text does not: " << why;
        } catch (const Error& e2) {
          const std::string why2 = e2.what();
          EXPECT_EQ(why2.substr(why2.find(": ") + 2, 40), reason);
        }
        continue;
      }
      std::string actual;
      ASSERT_NO_THROW(actual = printed(parse_module(got.at(fn)))) << got.at(fn);
      EXPECT_EQ(actual, expected);
      if (actual == expected) ++same;
    }
  }
  ASSERT_EQ(files, 4u) << "expected StableHLO 0.9.0, 0.14.0, 1.0.0 and 1.1.0 artifacts";
  std::printf("vhlo/: %zu files, %zu functions identical, %zu whose text cujax cannot parse yet:\n",
              files, same, skipped);
  for (const auto& [why, n] : skip_reasons) std::printf("  %3d  %s\n", n, why.c_str());
  EXPECT_GT(same, 500u);
}

TEST(PortableArtifacts, VersionProbeReportsTheProducersVersion) {
  const fs::path dir = interop_dir() / "vhlo";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  EXPECT_EQ(
      portable_artifact_version(read_file(dir / "vhlo_emit_version_api.1_1_0.mlir.bc"), "probe"),
      "1.1.0");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (!name.ends_with(".mlir.bc")) continue;
    // X.1_0_0.mlir.bc was written for target 1.0.0.
    std::string v = name.substr(0, name.size() - 8);
    v = v.substr(v.rfind('.') + 1);
    std::replace(v.begin(), v.end(), '_', '.');
    EXPECT_EQ(portable_artifact_version(read_file(e.path()), name), v) << name;
  }
}

TEST(PortableArtifacts, JaxSerializedModulesReadAsTheirText) {
  const fs::path dir = interop_dir() / "jax-backcompat" / "cases";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t cases = 0, same = 0;
  std::vector<std::string> text_skipped, refused;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path bc = e.path() / "serialized.mlirbc", mlir = e.path() / "module.mlir";
    if (!fs::exists(bc) || !fs::exists(mlir)) continue;
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    ++cases;
    std::string expected;
    try {
      expected = printed(parse_module(read_file(mlir)));
    } catch (const Error& err) {
      text_skipped.push_back(name + ": " + err.what());
      continue;
    }
    std::string actual;
    try {
      actual = printed(read_bytecode(read_file(bc), name));
    } catch (const Error& err) {
      // A refusal must name the file and the byte, never be a misread.
      const std::string msg = err.what();
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
      EXPECT_NE(msg.find(": byte "), std::string::npos) << msg;
      refused.push_back(msg);
      continue;
    }
    EXPECT_EQ(actual, expected);
    if (actual == expected) ++same;
  }
  std::printf(
      "jax-backcompat: %zu cases with both files, %zu identical, %zu text not parsed yet, "
      "%zu bytecode refused\n",
      cases, same, text_skipped.size(), refused.size());
  for (const auto& s : text_skipped) std::printf("  text: %s\n", s.c_str());
  for (const auto& s : refused) std::printf("  refused: %.200s\n", s.c_str());
  EXPECT_GT(same, 0u);
}

// Shardy's pieces of a module's text, in order: `sdy.mesh @name = <...>` declarations and
// `#sdy...<...>` attributes outside string literals (those inside strings, like JAX's
// xla.sdy.sharding frontend attributes, are plain strings to the reader). `->` inside a sharding
// rule is not a closing bracket.
std::vector<std::string> sdy_pieces(const std::string& text) {
  std::vector<std::string> out;
  auto skip_string = [&](size_t i) {  // i at the opening quote; returns the index past the close
    for (++i; i < text.size() && text[i] != '"'; ++i)
      if (text[i] == '\\') ++i;
    return i + 1;
  };
  auto balanced_end = [&](size_t i) {  // i at '<'; returns the index past the matching '>'
    int depth = 0;
    while (i < text.size()) {
      const char c = text[i];
      if (c == '"') {
        i = skip_string(i);
        continue;
      }
      if (c == '<') ++depth;
      if (c == '>' && text[i - 1] != '-' && --depth == 0) return i + 1;
      ++i;
    }
    return i;
  };
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '"') {
      i = skip_string(i);
      continue;
    }
    const bool mesh_op = text.compare(i, 9, "sdy.mesh ") == 0 && (i == 0 || text[i - 1] != '#');
    if (mesh_op || text.compare(i, 5, "#sdy.") == 0) {
      const size_t lt = text.find('<', i);
      if (lt == std::string::npos) break;
      const size_t end = balanced_end(lt);
      out.push_back(text.substr(i, end - i));
      i = end;
      continue;
    }
    ++i;
  }
  return out;
}

TEST(PortableArtifacts, SdyPiecesOfAString) {
  const std::string t =
      "sdy.mesh @m = <[\"a\"=2]>\n  x {s = \"#sdy.sharding<@m, [{}]>\"} "
      "{r = #sdy.op_sharding_rule<([i])->([j]) {i=2, j=2}>, q = #sdy.sharding<@m, [{\">\"}]>}";
  EXPECT_EQ(sdy_pieces(t),
            (std::vector<std::string>{"sdy.mesh @m = <[\"a\"=2]>",
                                      "#sdy.op_sharding_rule<([i])->([j]) {i=2, j=2}>",
                                      "#sdy.sharding<@m, [{\">\"}]>"}));
}

// JAX's Shardy modules: the sdy meshes, shardings and sharding rules the reader emits from the
// artifact are the text JAX printed into module.mlir. Artifacts without module.mlir (the
// jax.export serializations) must read too, each holding its mesh declarations.
TEST(PortableArtifacts, ShardyAttributesReadAsJaxPrintsThem) {
  const fs::path dir = interop_dir() / "jax-backcompat" / "cases";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t compared = 0, pieces = 0, exports = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path bc = e.path() / "serialized.mlirbc", mlir = e.path() / "module.mlir";
    if (!fs::exists(bc)) continue;
    const std::string name = e.path().filename().string();
    const std::string bytes = read_file(bc);
    if (bytes.find(std::string("\0sdy\0", 5)) == std::string::npos) continue;  // no sdy dialect
    SCOPED_TRACE(name);
    std::string text;
    ASSERT_NO_THROW(text = bytecode_to_stablehlo_text(bytes, name));
    const std::vector<std::string> actual = sdy_pieces(text);
    if (std::getenv("CUJAX_PRINT_SDY"))
      for (const auto& p : actual) std::printf("%s: %s\n", name.c_str(), p.c_str());
    if (!fs::exists(mlir)) {
      // A jax.export serialization: its module declares the meshes its shardings name.
      EXPECT_NE(text.find("\n  sdy.mesh @"), std::string::npos) << text;
      ++exports;
      continue;
    }
    const std::vector<std::string> expected = sdy_pieces(read_file(mlir));
    EXPECT_EQ(actual, expected);
    ++compared;
    pieces += expected.size();
  }
  std::printf("jax-backcompat: %zu Shardy modules compared (%zu sdy pieces), %zu exports read\n",
              compared, pieces, exports);
  EXPECT_GT(compared, 0u);
  EXPECT_GT(pieces, 0u);
}

// An sdy op cujax does not read is refused by name, with the file's producer.
TEST(PortableArtifacts, RefusesUnknownShardyOps) {
  const fs::path case_dir = interop_dir() / "jax-backcompat" / "cases";
  std::string bytes;
  for (const auto& e : fs::directory_iterator(case_dir))
    if (e.path().filename().string().starts_with("export_with_specified_sharding"))
      bytes = read_file(e.path() / "serialized.mlirbc");
  if (bytes.empty()) GTEST_SKIP() << "no export_with_specified_sharding case";
  ASSERT_NO_THROW(bytecode_to_stablehlo_text(bytes, "x.mlirbc"));
  // The op name `mesh` (shared with the mesh's symbol name) renamed `mesx`.
  std::string renamed = bytes;
  const size_t at = renamed.find(std::string("\0mesh\0", 6));
  ASSERT_NE(at, std::string::npos);
  renamed[at + 4] = 'x';
  try {
    bytecode_to_stablehlo_text(renamed, "x.mlirbc");
    ADD_FAILURE() << "sdy.mesx was read";
  } catch (const Error& e) {
    const std::string msg = e.what();
    std::printf("%s\n", msg.c_str());
    EXPECT_NE(msg.find("sdy.mesx"), std::string::npos) << msg;
    EXPECT_NE(msg.find("producer StableHLO_v"), std::string::npos) << msg;
  }
}

std::string small_artifact() {
  const fs::path p = interop_dir() / "vhlo" / "vhlo_emit_version_api.1_1_0.mlir.bc";
  return fs::exists(p) ? read_file(p) : std::string();
}

TEST(PortableArtifacts, RefusesNewerProducersAndUnknownOps) {
  const std::string bytes = small_artifact();
  if (bytes.empty()) GTEST_SKIP() << "no vhlo/ artifacts (set CUJAX_SHARED_DIR)";
  std::string newer = bytes;
  const size_t v = newer.find("StableHLO_v1.1.0");
  ASSERT_NE(v, std::string::npos);
  newer.replace(v, 16, "StableHLO_v9.1.0");
  try {
    read_bytecode(newer, "newer.mlirbc");
    FAIL() << "read an artifact of a newer StableHLO";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("StableHLO_v9.1.0"), std::string::npos) << e.what();
  }
  std::string unknown = bytes;
  const size_t op = unknown.find("add_v1");
  ASSERT_NE(op, std::string::npos);
  unknown.replace(op, 6, "add_v9");
  try {
    read_bytecode(unknown, "unknown.mlirbc");
    FAIL() << "read an unknown op";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("vhlo.add_v9"), std::string::npos) << msg;
    EXPECT_NE(msg.find("StableHLO_v1.1.0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown.mlirbc: byte "), std::string::npos) << msg;
  }
}

// Every truncation and every single-byte change of a real artifact is read or refused with an
// Error; never a crash, a hang or another exception (the sanitize label runs this under ASan).
TEST(PortableArtifacts, TruncatedOrCorruptBytesFailCleanly) {
  const std::string bytes = small_artifact();
  if (bytes.empty()) GTEST_SKIP() << "no vhlo/ artifacts (set CUJAX_SHARED_DIR)";
  ASSERT_NO_THROW(read_bytecode(bytes, "ok"));
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW(read_bytecode(bytes.substr(0, n), "cut"), Error);
  }
  size_t rejected = 0;
  for (size_t i = 4; i < bytes.size(); ++i) {
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string b = bytes;
      b[i] = static_cast<char>(static_cast<unsigned char>(b[i]) ^ x);
      try {
        read_bytecode(b, "flip");
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, bytes.size());  // most changes are caught, none crash
}

// ---- the writer ----------------------------------------------------------------------------

// text -> bytecode for `target` -> the module again: the same printed module.
void expect_round_trip(const std::string& text, const std::string& target,
                       const std::string& name) {
  const std::string expected = printed(parse_module(text));
  const std::string bytes = write_bytecode(*parse_module(text), target);
  ASSERT_EQ(portable_artifact_version(bytes, name), target);
  EXPECT_EQ(printed(read_bytecode(bytes, name)), expected) << name << " for " << target;
}

TEST(PortableArtifactWriter, SmallModuleRoundTripsAtEveryBytecodeVersion) {
  const std::string text = R"(module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {jax.arg_info = "x"}, %arg1: tensor<i1>) -> (tensor<3x2xf32>) {
    %cst = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
    %b = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
    %0 = stablehlo.add %arg0, %cst : tensor<2x3xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %2 = stablehlo.compare LT, %1, %1, FLOAT : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xi1>
    %3 = stablehlo.select %2, %1, %1 : tensor<3x2xi1>, tensor<3x2xf32>
    return %3 : tensor<3x2xf32>
  }
})";
  // 0.9.0: bytecode 0; 0.11.0: 1; 0.13.0: 3; 0.14.0: 4; 1.1.0 and 1.20.0: 6.
  for (const char* target : {"0.9.0", "0.11.0", "0.13.0", "0.14.0", "1.1.0", "1.20.0"}) {
    SCOPED_TRACE(target);
    expect_round_trip(text, target, "small");
  }
  const std::string bytes = write_bytecode(*parse_module(text), "0.14.0");
  EXPECT_EQ(bytes.substr(0, 5), std::string("ML\xefR\x09", 5));  // bytecode version 4
  EXPECT_EQ(bytecode_producer(bytes, "x"), "StableHLO_v0.14.0");
}

TEST(PortableArtifactWriter, RefusesOpsTheTargetDidNotHaveAndBadTargets) {
  const std::string text = R"(func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tan %a : tensor<4xf32>
  return %0 : tensor<4xf32>
})";
  auto m = parse_module(text);
  try {
    write_bytecode(*m, "1.0.0");
    FAIL() << "wrote stablehlo.tan for StableHLO 1.0.0";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("stablehlo.tan"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1.0.0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1.4.0"), std::string::npos) << msg;  // when it was added
  }
  EXPECT_NO_THROW(write_bytecode(*m, "1.4.0"));
  // Types too: f8E4M3 came with StableHLO 1.7.0.
  auto f8 = parse_module(R"(func.func @main(%a: tensor<4xf8E4M3>) -> tensor<4xf8E4M3> {
  return %a : tensor<4xf8E4M3>
})");
  try {
    write_bytecode(*f8, "1.6.0");
    FAIL() << "wrote f8E4M3 for StableHLO 1.6.0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f8E4M3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1.7.0"), std::string::npos) << e.what();
  }
  expect_round_trip(R"(func.func @main(%a: tensor<4xf8E4M3>) -> tensor<4xf8E4M3> {
  return %a : tensor<4xf8E4M3>
})",
                    "1.7.0", "f8");
  EXPECT_THROW(write_bytecode(*m, "9.0.0"), Error);
  EXPECT_THROW(write_bytecode(*m, "0.8.0"), Error);
  EXPECT_THROW(write_bytecode(*m, "latest"), Error);
  // The default target is the oldest StableHLO JAX still reads.
  EXPECT_STREQ(default_portable_artifact_target(), "0.9.0");
}

// An attribute an older op version has no place for is refused, not dropped.
TEST(PortableArtifactWriter, RefusesWhatAnOlderOpVersionCannotHold) {
  const std::string text =
      R"(func.func @main(%a: tensor<2x3x4xf32>, %i: tensor<2x1xi64>) -> tensor<2x4xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 1, 4>} : (tensor<2x3x4xf32>, tensor<2x1xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
})";
  auto m = parse_module(text);
  try {
    write_bytecode(*m, "1.0.0");
    FAIL() << "dropped the batching dimensions for gather_v1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("operand_batching_dims"), std::string::npos) << e.what();
  }
  expect_round_trip(text, "1.1.0", "gather");
}

// Every conformance program cujax parses survives text -> bytecode -> text unchanged.
TEST(PortableArtifactWriter, ConformanceProgramsRoundTrip) {
  const fs::path dir = shared_dir() / "conformance" / "stablehlo-testdata";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t files = 0, same = 0, unparsed = 0, reader_refused = 0;
  std::map<std::string, int> refusals;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".mlir") continue;
    ++files;
    const std::string name = e.path().filename().string();
    const std::string text = read_file(e.path());
    std::unique_ptr<Module> m;
    try {
      m = parse_module(text);
    } catch (const Error&) {
      ++unparsed;
      continue;
    }
    const std::string expected = printed(parse_module(text));
    std::string bytes;
    try {
      bytes = write_bytecode(*m, "1.20.0");
    } catch (const Error& err) {
      ADD_FAILURE() << name << ": the writer refused a module the parser accepts: " << err.what();
      continue;
    }
    std::unique_ptr<Module> back;
    try {
      back = read_bytecode(bytes, name);
    } catch (const Error& err) {
      // What the reader does not read yet (it names the file and the byte): counted.
      const std::string msg = err.what();
      ++reader_refused;
      ++refusals[msg.substr(msg.find(": byte ") == std::string::npos
                                ? 0
                                : msg.find(": ", msg.find(": byte ") + 7) + 2,
                            50)];
      continue;
    }
    const std::string actual = printed(std::move(back));
    EXPECT_EQ(actual, expected) << name;
    if (actual == expected) ++same;
  }
  std::printf(
      "conformance: %zu programs, %zu parsed, %zu identical after text -> bytecode -> text, "
      "%zu the reader refuses:\n",
      files, files - unparsed, same, reader_refused);
  for (const auto& [why, n] : refusals) std::printf("  %4d  %s\n", n, why.c_str());
  EXPECT_EQ(files, 1022u);
  EXPECT_EQ(same + reader_refused, files - unparsed);
  EXPECT_GT(same, 900u);
}

// StableHLO's own vhlo/ files: every function cujax parses, written for the file's target,
// reads back to the same module; and how many of the .mlir.bc files cujax writes byte for byte
// (upstream's check, a measurement here: see docs/export.md).
TEST(PortableArtifactWriter, VhloTestFilesRoundTripAtTheirTargets) {
  const fs::path dir = interop_dir() / "vhlo";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t files = 0, functions = 0, same = 0, exact = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".mlir")) continue;
    ++files;
    std::string target = name.substr(0, name.size() - 5);
    target = target.substr(target.rfind('.') + 1);
    std::replace(target.begin(), target.end(), '_', '.');
    SCOPED_TRACE(name + " for " + target);
    const std::string src = read_file(e.path());
    try {
      if (write_bytecode(*parse_module(src), target) == read_file(e.path().string() + ".bc"))
        ++exact;
    } catch (const Error&) {
      // cujax does not parse the whole file (index types, dynamic shapes): not byte-exact.
    }
    for (const auto& [fn, body] : split_functions(src)) {
      std::unique_ptr<Module> m;
      try {
        m = parse_module(body);
      } catch (const Error&) {
        continue;
      }
      ++functions;
      std::string bytes;
      try {
        bytes = write_bytecode(*m, target);
      } catch (const Error& err) {
        // Only an op the target does not have may be refused.
        EXPECT_NE(std::string(err.what()).find("did not exist yet"), std::string::npos)
            << fn << ": " << err.what();
        continue;
      }
      std::string actual;
      ASSERT_NO_THROW(actual = printed(read_bytecode(bytes, fn))) << fn;
      EXPECT_EQ(actual, printed(parse_module(body))) << fn;
      if (actual == printed(parse_module(body))) ++same;
    }
  }
  ASSERT_EQ(files, 4u);
  std::printf(
      "vhlo/: %zu functions cujax parses, %zu identical after writing for their target; "
      "%zu of %zu .mlir.bc files reproduced byte for byte\n",
      functions, same, exact, files);
  EXPECT_GT(same, 500u);
}

// JAX's module.mlir files: written for JAX's default target and read back, the same module.
TEST(PortableArtifactWriter, JaxModulesRoundTrip) {
  const fs::path dir = interop_dir() / "jax-backcompat" / "cases";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t cases = 0, same = 0, refused = 0, with_bytecode = 0, exact = 0;
  std::vector<std::string> differ;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path mlir = e.path() / "module.mlir";
    if (!fs::exists(mlir)) continue;
    const std::string name = e.path().filename().string();
    std::unique_ptr<Module> m;
    try {
      m = parse_module(read_file(mlir));
    } catch (const Error&) {
      continue;
    }
    ++cases;
    // The version the case's own artifact was written for, so every op it holds exists.
    std::string target = "1.20.0";
    const fs::path bc = e.path() / "serialized.mlirbc";
    if (fs::exists(bc)) target = portable_artifact_version(read_file(bc), name);
    std::string bytes;
    try {
      bytes = write_bytecode(*m, target);
    } catch (const Error& err) {
      ADD_FAILURE() << name << ": " << err.what();
      continue;
    }
    // Upstream's own check, as a measurement (docs/export.md): the bytes JAX wrote.
    if (fs::exists(bc)) {
      ++with_bytecode;
      if (bytes == read_file(bc))
        ++exact;
      else
        differ.push_back(name);
    }
    std::unique_ptr<Module> back;
    try {
      back = read_bytecode(bytes, name);
    } catch (const Error& err) {
      ++refused;
      std::printf("  reader refused %s: %.160s\n", name.c_str(), err.what());
      continue;
    }
    const std::string actual = printed(std::move(back));
    EXPECT_EQ(actual, printed(parse_module(read_file(mlir)))) << name;
    if (actual == printed(parse_module(read_file(mlir)))) ++same;
  }
  std::printf(
      "jax-backcompat: %zu module.mlir parsed, %zu identical after text -> bytecode -> text, "
      "%zu the reader refuses; %zu of %zu serialized.mlirbc reproduced byte for byte\n",
      cases, same, refused, exact, with_bytecode);
  for (const auto& d : differ) std::printf("  bytes differ: %s\n", d.c_str());
  EXPECT_GT(same, 0u);
}

// A VHLO op tree as text: op names and locations, every attribute (name order) and type with
// the encoding it was read from, regions. Two artifacts with equal dumps hold the same
// VHLO, whatever the order of their tables.
std::string dump(const bytecode::BType& t) {
  std::string s =
      std::to_string(static_cast<int>(t.kind)) + t.elem + "/" + t.text + "/" + t.encoding;
  for (int64_t d : t.shape) s += "x" + std::to_string(d);
  if (t.element) s += "<" + dump(*t.element) + ">";
  for (const auto& i : t.inputs) s += "(" + dump(*i) + ")";
  s += "->";
  for (const auto& o : t.outputs) s += "(" + dump(*o) + ")";
  return s;
}
std::string dump(const bytecode::BAttr& a) {
  // A Shardy attribute stands for its text: cujax writes that text (the assembly form MLIR reads
  // for any dialect), JAX Shardy's own encoding; both read back as the same attribute.
  if (a.kind == bytecode::BAttr::Kind::Sdy) {
    bytecode::BAttr text;
    text.text = bytecode::sdy_attr_text(a);
    return dump(text);
  }
  std::string s = std::to_string(static_cast<int>(a.kind)) + (a.is_builtin ? "b" : "v") +
                  std::to_string(a.boolean) + ":" + std::to_string(a.bits) + ":" + a.text + ":" +
                  a.enum_value + ":" + std::to_string(a.index) + ":";
  if (a.type) s += "{" + dump(*a.type) + "}";
  for (int64_t i : a.ints) s += std::to_string(i) + ",";
  s += ";";
  for (int64_t i : a.ints2) s += std::to_string(i) + ",";
  for (unsigned char c : a.blob) s += std::to_string(c) + ".";
  for (const auto& e : a.elements) s += "[" + dump(*e) + "]";
  for (const auto& [k, v] : a.entries) s += "{" + dump(*k) + "=" + dump(*v) + "}";
  return s;
}
void dump(const bytecode::BOp& op, std::string& out, const std::string& indent, bool locs) {
  out += indent + op.dialect + "." + op.name + " isolated=" + std::to_string(op.isolated) +
         (locs && op.loc ? " loc " + op.loc->text : "") + "\n";
  auto attrs = op.attrs;
  std::sort(attrs.begin(), attrs.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [k, v] : attrs) {
    // An array of empty dictionaries is a function without argument or result attributes, as
    // its text shows it (MLIR keeps the empty dictionaries where a pass emptied them).
    if ((k == "arg_attrs" || k == "res_attrs") &&
        std::all_of(v->elements.begin(), v->elements.end(),
                    [](const auto& d) { return d->entries.empty(); })) {
      out += indent + "  " + k + " = []\n";
      continue;
    }
    out += indent + "  " + k + " = " + dump(*v) + "\n";
  }
  for (const auto& t : op.result_types) out += indent + "  -> " + dump(*t) + "\n";
  out += indent + "  operands " + std::to_string(op.operands.size()) + "\n";
  for (const auto& r : op.regions)
    for (const auto& b : r->blocks) {
      out += indent + "  block";
      for (const auto& [t, id] : b->args) out += " " + dump(*t);
      out += "\n";
      for (const auto& o : b->ops) dump(*o, out, indent + "    ", locs);
    }
}
// Each function of a bytecode file by name, dumped.
std::map<std::string, std::string> vhlo_functions(const std::string& bytes, const std::string& name,
                                                  bool locs = true) {
  std::unique_ptr<bytecode::Container> keep;
  const bytecode::BModule m = bytecode::read_container(bytes, name, &keep);
  std::map<std::string, std::string> out;
  auto module_attrs = m.top.at(0)->attrs;  // under "" (no function has that name)
  std::sort(module_attrs.begin(), module_attrs.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [k, v] : module_attrs) out[""] += k + " = " + dump(*v) + "\n";
  for (const auto& f : m.top.at(0)->regions.at(0)->blocks.at(0)->ops) {
    std::string fn;
    for (const auto& [k, v] : f->attrs)
      if (k == "sym_name") fn = v->text;
    dump(*f, out[fn], "", locs);
  }
  return out;
}

// The VHLO cujax writes is StableHLO's: for every function of the vhlo/ files that cujax parses,
// written for the file's target, the same op versions, attributes (defaults spelled out as
// StableHLO spells them), encodings and types as upstream's .mlir.bc holds.
TEST(PortableArtifactWriter, WritesTheVhloStableHloWrites) {
  const fs::path dir = interop_dir() / "vhlo";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t compared = 0, same = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".mlir")) continue;
    std::string target = name.substr(0, name.size() - 5);
    target = target.substr(target.rfind('.') + 1);
    std::replace(target.begin(), target.end(), '_', '.');
    // Locations aside: vhlo_emit_version_api's carry the positions MLIR's parser gave the ops in
    // StableHLO's checkout, which its text does not spell (the others are stripped).
    const auto upstream = vhlo_functions(read_file(e.path().string() + ".bc"), name, false);
    for (const auto& [fn, body] : split_functions(read_file(e.path()))) {
      std::unique_ptr<Module> m;
      try {
        m = parse_module(body);
      } catch (const Error&) {
        continue;
      }
      ASSERT_TRUE(upstream.count(fn)) << name << ": @" << fn;
      const auto ours = vhlo_functions(write_bytecode(*m, target), fn, false);
      ++compared;
      EXPECT_EQ(ours.at(fn), upstream.at(fn)) << name << ": @" << fn;
      if (ours.at(fn) == upstream.at(fn)) ++same;
    }
  }
  std::printf("vhlo/: %zu of %zu functions hold the same VHLO as StableHLO's own artifacts\n", same,
              compared);
  EXPECT_GT(compared, 500u);
}

// The same against what JAX serialized, locations included: each module.mlir cujax parses,
// written for the version of the case's serialized.mlirbc, holds that artifact's VHLO.
TEST(PortableArtifactWriter, WritesTheVhloJaxWrites) {
  const fs::path dir = interop_dir() / "jax-backcompat" / "cases";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  size_t compared = 0, same = 0, dynamic = 0;
  std::vector<std::string> locs_differ;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path bc = e.path() / "serialized.mlirbc", mlir = e.path() / "module.mlir";
    if (!fs::exists(bc) || !fs::exists(mlir)) continue;
    const std::string name = e.path().filename().string();
    std::unique_ptr<Module> m;
    try {
      m = parse_module(read_file(mlir));
    } catch (const Error&) {
      continue;
    }
    // The shape-polymorphic modules (JAX of 2023) hold vhlo.func_v1 not marked isolated from
    // above, which the writer marks as MLIR does now: not compared until it follows the
    // producer's version there (their text round trip is checked above).
    if (cujax::compiler::has_dynamic_shapes(*m)) {
      ++dynamic;
      continue;
    }
    const std::string theirs = read_file(bc);
    std::map<std::string, std::string> upstream;
    try {
      upstream = vhlo_functions(theirs, name);
    } catch (const Error&) {
      continue;  // what the reader does not read yet
    }
    ++compared;
    const std::string written = write_bytecode(*m, portable_artifact_version(theirs, name));
    const auto ours = vhlo_functions(written, name);
    if (ours != upstream &&
        vhlo_functions(written, name, false) == vhlo_functions(theirs, name, false)) {
      // Only locations differ: the writer's fault unless the case's two files already disagree
      // on them (module.mlir printed from another run of JAX's test than the artifact).
      const std::string text_locs = print_module(*parse_module(read_file(mlir)));
      const std::string artifact_locs = print_module(*read_bytecode(theirs, name));
      if (text_locs != artifact_locs) {
        locs_differ.push_back(name);
        continue;
      }
    }
    EXPECT_EQ(ours, upstream) << name;
    if (ours == upstream) ++same;
  }
  std::printf(
      "jax-backcompat: %zu of %zu modules hold the same VHLO as JAX's artifacts, %zu more where "
      "module.mlir and the artifact disagree on locations (%zu shape-polymorphic ones not "
      "compared)\n",
      same, compared, locs_differ.size(), dynamic);
  for (const auto& n : locs_differ) std::printf("  locations differ in the case: %s\n", n.c_str());
  EXPECT_GT(compared, 0u);
}

}  // namespace
