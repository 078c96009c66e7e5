// Exported artifacts: SHA-256 against FIPS 180-2 vectors; export then call gives the jitted
// function's outputs; the calling convention; serialize/deserialize and every corruption error;
// save/load; the committed fixture (format guard); `cujax run`; the AOT first-call guarantee.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cujax/core/npy.h"
#include "cujax/core/sha256.h"
#include "cujax/export.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/verifier.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
namespace jnp = cujax::numpy;

// The message of the Error that f throws ("" when it does not throw).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// --- SHA-256 -------------------------------------------------------------------------------

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // FIPS 180-4 two-block example (896 bits).
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklm"
                 "nopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, StreamingInUnevenPiecesMatchesOneShot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>(i * 37 + 11);
  for (size_t len : {0, 1, 55, 56, 63, 64, 65, 119, 120, 1000}) {
    const std::string_view msg(data.data(), len);
    Sha256 h;
    for (size_t pos = 0, step = 1; pos < len; pos += step, step = step * 2 + 1)
      h.update(msg.substr(pos, std::min(step, len - pos)));
    EXPECT_EQ(h.finish(), sha256(msg)) << "length " << len;
  }
}

// --- an MLP-like function with a tree of parameters and several dtypes -----------------------

HostTensor f32_tensor(Shape shape, float scale, float offset) {
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i)
    t.data_as<float>()[i] = scale * std::sin(0.7f * static_cast<float>(i) + offset);
  return t;
}

struct Inputs {
  State params;
  Array x, labels, gate;
};

Inputs make_inputs() {
  Inputs in;
  in.params.set("dense1.kernel", array(f32_tensor({3, 5}, 0.8f, 0.1f)));
  in.params.set("dense1.bias", array(f32_tensor({5}, 0.1f, 0.3f)));
  in.params.set("dense2.kernel", array(f32_tensor({5, 2}, 0.9f, 0.5f)));
  in.params.set("dense2.bias", array(f32_tensor({2}, 0.2f, 0.7f)));
  in.x = array(f32_tensor({4, 3}, 1.5f, 0.0f));
  in.labels = array(std::vector<int32_t>{0, 1, 1, 0}, {4});
  std::vector<bfloat16> g;
  for (int i = 0; i < 8; ++i) g.push_back(bfloat16(0.25 * (i - 3)));
  in.gate = array(HostTensor::from_vector(g, {4, 2}));
  return in;
}

// logits f32[4,2], hits i32[], gated bf16[4,2], total f64[].
auto mlp(const State& p, const Array& x, const Array& labels, const Array& gate) {
  Array h = jnp::tanh(jnp::matmul(x, p.at("dense1.kernel")) + p.at("dense1.bias"));
  Array logits = jnp::matmul(h, p.at("dense2.kernel")) + p.at("dense2.bias");
  Array hits = jnp::sum(jnp::astype(jnp::equal(jnp::argmax(logits, 1), labels), DType::I32));
  Array gated = gate * jnp::astype(logits, DType::BF16);
  Array total = jnp::sum(jnp::astype(logits, DType::F64));
  return std::make_tuple(logits, hits, gated, total);
}

JitOptions mlp_options() {
  JitOptions o;
  o.name = "mlp";
  o.arg_names = {"params", "x", "labels", "gate"};
  return o;
}

auto jitted_mlp() {
  return jit([](const State& p, const Array& x, const Array& labels,
                const Array& gate) { return mlp(p, x, labels, gate); },
             mlp_options());
}

Exported export_mlp() {
  const Inputs in = make_inputs();
  return export_(jitted_mlp(), in.params, ShapeDtype{{4, 3}, DType::F32},
                 ShapeDtype{{4}, DType::I32}, ShapeDtype{{4, 2}, DType::BF16});
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::vector<HostTensor> expected_outputs(const Inputs& in) {
  auto [logits, hits, gated, total] = jitted_mlp()(in.params, in.x, in.labels, in.gate);
  return {logits.to_host(), hits.to_host(), gated.to_host(), total.to_host()};
}

TEST(Export, CallGivesTheJittedOutputsExactly) {
  const Inputs in = make_inputs();
  const std::vector<HostTensor> want = expected_outputs(in);
  const Exported exp = export_mlp();
  const std::vector<Array> got = exp.call(in.params, in.x, in.labels, in.gate).leaves();
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(same_bytes(got[i].to_host(), want[i])) << exp.out_leaves()[i].path;

  // The jitted function itself against a host computation of the MLP.
  const auto k1 = in.params.at("dense1.kernel").to_vector<float>();
  const auto b1 = in.params.at("dense1.bias").to_vector<float>();
  const auto k2 = in.params.at("dense2.kernel").to_vector<float>();
  const auto b2 = in.params.at("dense2.bias").to_vector<float>();
  const auto x = in.x.to_vector<float>();
  const auto logits = got[0].to_vector<float>();
  double total = 0;
  int hits = 0;
  const std::vector<int32_t> labels = {0, 1, 1, 0};
  for (int r = 0; r < 4; ++r) {
    double out[2];
    for (int c = 0; c < 2; ++c) {
      out[c] = b2[c];
      for (int j = 0; j < 5; ++j) {
        double h = b1[j];
        for (int i = 0; i < 3; ++i) h += double(x[r * 3 + i]) * k1[i * 5 + j];
        out[c] += std::tanh(h) * k2[j * 2 + c];
      }
      EXPECT_NEAR(logits[r * 2 + c], out[c], 1e-5) << r << "," << c;
      total += logits[r * 2 + c];
    }
    hits += (out[1] > out[0] ? 1 : 0) == labels[r];
  }
  EXPECT_EQ(got[1].item<int32_t>(), hits);
  EXPECT_NEAR(got[3].item<double>(), total, 1e-12);
  const HostTensor gated = got[2].to_host();
  const HostTensor gate = in.gate.to_host();
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(float(gated.data_as<bfloat16>()[i]),
              float(bfloat16(float(gate.data_as<bfloat16>()[i]) * float(bfloat16(logits[i])))));

  // The flat form takes the leaves in in_leaves() order.
  std::vector<Array> flat;
  for (const auto& [path, value] : in.params) flat.push_back(value);
  for (const Array& a : {in.x, in.labels, in.gate}) flat.push_back(a);
  const std::vector<Array> again = exp.call_flat(flat);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(again[i].to_host(), want[i]));
  EXPECT_TRUE(same_bytes(exp.call(flat)[3].array().to_host(), want[3]));
}

// Exported::call returns the output tree, as jax.export's Exported.call does: here a tuple of
// an array, a State and a list, after a serialize/deserialize round trip.
TEST(Export, CallReturnsTheOutputTree) {
  auto f = jit([](const Array& x, const Array& w) {
    const Array y = jnp::matmul(x, w);
    State hidden;
    hidden.set("dense.out", jnp::tanh(y));
    hidden.set("dense.square", y * y);
    return std::make_tuple(y, hidden, std::vector<Array>{jnp::sum(y), jnp::mean(y)});
  });
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 6), {2, 3});
  const Array w = jnp::reshape(jnp::linspace(0.5, 2.0, 12), {3, 4});
  const auto want = f(x, w);
  const Exported exp = Exported::deserialize(export_(f, x, w).serialize());
  const DynamicTree out = exp.call(x, w);
  EXPECT_EQ(tree_structure(out), tree_structure(want));
  EXPECT_EQ(out.kind(), "tuple3");
  ASSERT_EQ(out.size(), 3u);
  const Array y = out[0];
  EXPECT_EQ(y.to_vector<float>(), std::get<0>(want).to_vector<float>());
  EXPECT_EQ(out[1].keys(), (std::vector<std::string>{"dense.out", "dense.square"}));
  EXPECT_EQ(out[1]["dense.square"].array().to_vector<float>(),
            std::get<1>(want).at("dense.square").to_vector<float>());
  const State hidden = out[1].state();
  EXPECT_EQ(hidden.at("dense.out").to_vector<float>(),
            std::get<1>(want).at("dense.out").to_vector<float>());
  EXPECT_EQ(out[2].as<std::vector<Array>>()[1].item<float>(), std::get<2>(want)[1].item<float>());
  EXPECT_EQ(out.leaves().size(), 5u);
  // A tree like any other: tree_map keeps its structure.
  const DynamicTree doubled = tree_map([](const Array& a) { return a * 2.0; }, out);
  EXPECT_EQ(tree_structure(doubled), tree_structure(want));
  EXPECT_EQ(doubled[2][0].array().item<float>(), 2 * std::get<2>(want)[0].item<float>());
  // as<T>() needs T's default value to have the tree's structure (a list's length does not).
  using Out = std::tuple<Array, State, std::vector<Array>>;
  EXPECT_NE(message_of([&] { (void)out.as<Out>(); }).find("the requested type is"),
            std::string::npos);
  EXPECT_NE(message_of([&] { (void)out["x"]; }).find("no key 'x'"), std::string::npos);
  EXPECT_NE(message_of([&] { (void)out[1].array(); }).find("not an array leaf"), std::string::npos);
}

// Artifacts converted from jax.export record JAX's treedef text.
TEST(Export, OutputTreeFromJaxTreedef) {
  const std::vector<Array> leaves = {jnp::arange(2), jnp::arange(3), jnp::arange(4)};
  const DynamicTree t =
      DynamicTree::from_structure("jax:PyTreeDef((*, {'a': *, 'b': [*, None]}))", leaves);
  EXPECT_EQ(t.kind(), "tuple2");
  EXPECT_EQ(t[0].array().shape(), (Shape{2}));
  EXPECT_EQ(t[1].kind(), "dict2");
  EXPECT_EQ(t[1]["a"].array().shape(), (Shape{3}));
  EXPECT_EQ(t[1]["b"][0].array().shape(), (Shape{4}));
  EXPECT_EQ(t[1]["b"][1].kind(), "none");
  EXPECT_EQ(DynamicTree::from_structure("jax:PyTreeDef((*,))", {leaves[0]}).kind(), "tuple1");
  EXPECT_NE(message_of([&] {
              (void)DynamicTree::from_structure("jax:PyTreeDef(CustomNode(Foo[()], [*]))", leaves);
            }).find("call_flat"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              (void)DynamicTree::from_structure("tuple2(*,*,)", leaves);
            }).find("3 arrays were given"),
            std::string::npos);
}

TEST(Export, RecordsTheCallingConvention) {
  const Exported exp = export_mlp();
  EXPECT_EQ(exp.fun_name(), "mlp");
  std::vector<std::string> in_paths, out_paths;
  for (const auto& l : exp.in_leaves()) in_paths.push_back(l.path);
  for (const auto& l : exp.out_leaves()) out_paths.push_back(l.path);
  EXPECT_EQ(in_paths, (std::vector<std::string>{"params.dense1.kernel", "params.dense1.bias",
                                                "params.dense2.kernel", "params.dense2.bias", "x",
                                                "labels", "gate"}));
  EXPECT_EQ(out_paths,
            (std::vector<std::string>{"result[0]", "result[1]", "result[2]", "result[3]"}));
  const std::vector<ShapeDtype> in_avals = {
      {{3, 5}, DType::F32}, {{5}, DType::F32}, {{5, 2}, DType::F32}, {{2}, DType::F32},
      {{4, 3}, DType::F32}, {{4}, DType::I32}, {{4, 2}, DType::BF16}};
  EXPECT_EQ(exp.in_avals(), in_avals);
  const std::vector<ShapeDtype> out_avals = {
      {{4, 2}, DType::F32}, {{}, DType::I32}, {{4, 2}, DType::BF16}, {{}, DType::F64}};
  EXPECT_EQ(exp.out_avals(), out_avals);
  EXPECT_EQ(exp.in_shardings_hlo(), std::vector<std::string>(7, "{replicated}"));
  EXPECT_EQ(exp.out_shardings_hlo(), std::vector<std::string>(4, "{replicated}"));
  EXPECT_EQ(exp.platforms(), (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(exp.nr_devices(), 1);
  EXPECT_EQ(exp.in_tree(),
            "state4(dense1.kernel=*,dense1.bias=*,dense2.kernel=*,dense2.bias=*,)*,*,*,");
  EXPECT_EQ(exp.out_tree(), "tuple4(*,*,*,*,)");

  // The text is a module whose @main has exactly that signature, and it verifies.
  auto module = ir::parse_module(exp.mlir_module());
  ir::verify(*module);
  const ir::Function* main = module->lookup("main");
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->arg_types().size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(main->arg_types()[i].shape, in_avals[i].shape);
    EXPECT_EQ(main->arg_types()[i].dtype, in_avals[i].dtype);
  }
  ASSERT_EQ(main->result_types.size(), 4u);
  EXPECT_EQ(main->result_types[3].dtype, DType::F64);

  ExportOptions cpu_only;
  cpu_only.platforms = {"cpu"};
  const Inputs in = make_inputs();
  EXPECT_EQ(export_(jitted_mlp(), cpu_only, in.params, in.x, in.labels, in.gate).platforms(),
            std::vector<std::string>{"cpu"});
}

TEST(Export, WrongInputsNameTheLeaf) {
  const Exported exp = export_mlp();
  Inputs in = make_inputs();
  in.params.set("dense1.bias", jnp::zeros({6}));
  try {
    exp.call(in.params, in.x, in.labels, in.gate);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input params.dense1.bias is f32[6]"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("exported for f32[5]"), std::string::npos) << e.what();
  }
  in = make_inputs();
  try {
    exp.call(in.params, in.x, jnp::astype(in.labels, DType::I64), in.gate);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input labels is i64[4]"), std::string::npos) << e.what();
  }
  try {
    exp.call(in.params, in.x, in.labels);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("structure"), std::string::npos) << e.what();
  }
  try {
    exp.call(std::vector<Array>{in.x});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes 7 arrays"), std::string::npos) << e.what();
  }
  try {
    exp.compile("tpu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[cpu, cuda], not tpu"), std::string::npos) << e.what();
  }
}

// --- serialization ---------------------------------------------------------------------------

TEST(Export, SerializeRoundTrips) {
  const Exported exp = export_mlp();
  const std::string bytes = exp.serialize();
  EXPECT_EQ(bytes.substr(0, 17), "cujax-exported 1\n");
  EXPECT_EQ(bytes.substr(17, 7 + 64), "sha256 " + exp.checksum());
  const Exported back = Exported::deserialize(bytes);
  EXPECT_EQ(back.serialize(), bytes);
  EXPECT_EQ(back.mlir_module(), exp.mlir_module());
  EXPECT_EQ(back.in_tree(), exp.in_tree());
  EXPECT_EQ(back.out_tree(), exp.out_tree());
  EXPECT_EQ(back.in_avals(), exp.in_avals());
  EXPECT_EQ(back.out_avals(), exp.out_avals());
  EXPECT_EQ(back.platforms(), exp.platforms());
  EXPECT_FALSE(back.is_compiled());
  const Inputs in = make_inputs();
  const std::vector<HostTensor> want = expected_outputs(in);
  const auto [logits, hits, gated, total] =
      back.call(in.params, in.x, in.labels, in.gate).as<std::tuple<Array, Array, Array, Array>>();
  const std::vector<Array> got = {logits, hits, gated, total};
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(got[i].to_host(), want[i]));
  EXPECT_EQ(back.compiled_platform(), "cpu");
}

std::string error_of(std::string_view bytes) {
  try {
    Exported::deserialize(bytes, "art");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// An artifact with a valid checksum over the given header and text.
std::string forge(const std::string& header, const std::string& text) {
  return "cujax-exported 1\nsha256 " + sha256_hex(header + "\n" + text) + "\n" + header + "\n" +
         text;
}

void expect_contains(const std::string& s, const std::string& part) {
  EXPECT_NE(s.find(part), std::string::npos) << s;
}

TEST(Export, DeserializeRejectsEveryCorruption) {
  const std::string good = export_mlp().serialize();
  const size_t header_at = good.find('\n', 17) + 1;
  const size_t text_at = good.find('\n', header_at) + 1;
  const std::string header = good.substr(header_at, text_at - header_at - 1);
  const std::string text = good.substr(text_at);
  ASSERT_EQ(forge(header, text), good);

  expect_contains(error_of("\x93NUMPY garbage"), "art: not a cujax exported artifact");
  expect_contains(error_of(""), "not a cujax exported artifact");
  expect_contains(error_of("cujax-exported 2\n" + good.substr(17)),
                  "art: format version '2' is not supported");
  expect_contains(error_of("cujax-exported 1"), "truncated in the first line");
  expect_contains(error_of(good.substr(0, 40)), "truncated before the checksum line");
  expect_contains(error_of(good.substr(0, header_at + 20)), "truncated in the JSON header");
  expect_contains(error_of(good.substr(0, good.size() - 10)),
                  "truncated: the header promises " + std::to_string(text.size()) +
                      " bytes of StableHLO text, " + std::to_string(text.size() - 10) + " follow");
  expect_contains(error_of(good + "x"), "1 unexpected bytes after the StableHLO text");
  std::string flipped = good;
  flipped[text_at + text.size() / 2] ^= 1;
  expect_contains(error_of(flipped), "art: checksum mismatch");
  flipped = good;
  flipped[header_at + 5] ^= 1;
  expect_contains(error_of(flipped), "checksum mismatch");
  flipped = good;
  flipped[17 + 7 + 3] = flipped[17 + 7 + 3] == '0' ? '1' : '0';
  expect_contains(error_of(flipped), "checksum mismatch");
  std::string short_sum = good;
  short_sum.erase(17 + 7, 1);
  expect_contains(error_of(short_sum), "is not \"sha256 <64 hex digits>\"");

  // Consistent checksums over wrong contents: the header and the text are checked too.
  expect_contains(error_of(forge("{not json", text)), "corrupt header");
  std::string h = header;
  h.replace(h.find("\"shape\": [3, 5]"), 15, "\"shape\": [3, 6]");
  expect_contains(error_of(forge(h, text)), "art: exported mlp: @main takes (f32[3,5]");
  h = header;
  h.replace(h.find("\"float64\""), 9, "\"float32\"");
  expect_contains(error_of(forge(h, text)), "@main returns");
  h = header;
  h.replace(h.find("\"float64\""), 9, "\"float99\"");
  expect_contains(error_of(forge(h, text)), "unknown dtype 'float99'");
  h = header;
  h.replace(h.find("{replicated}"), 12, "{devices=[2]<=[2]}");
  expect_contains(error_of(forge(h, text)), "only single-device");
  std::string t = text;
  t.replace(t.find("stablehlo."), 10, "stablehlo.bogus_");
  h = header;
  h.replace(h.find("\"module_bytes\""), std::string::npos,
            "\"module_bytes\": " + std::to_string(t.size()) + "}");
  expect_contains(error_of(forge(h, t)), "StableHLO text is invalid");
}

fs::path fresh_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("cujax_export_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(Export, SaveIsAtomicAndLoadReadsItBack) {
  const fs::path dir = fresh_dir("save");
  const Exported exp = export_mlp();
  exp.save((dir / "mlp.cujax").string());
  exp.save((dir / "mlp.cujax").string());  // replaces
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"mlp.cujax"});  // no temporary files left
  const Exported back = Exported::load((dir / "mlp.cujax").string());
  EXPECT_EQ(back.serialize(), exp.serialize());
  try {
    Exported::load((dir / "missing.cujax").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    expect_contains(e.what(), "missing.cujax: cannot read exported artifact");
  }
  try {
    exp.save((dir / "no" / "such" / "dir.cujax").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    expect_contains(e.what(), "cannot open for writing");
  }
  fs::remove_all(dir);
}

// tools/jax_bridge/cujax_artifact.py (standard library only) reads what cujax writes and writes
// the same bytes back.
TEST(Export, PythonWriterMatchesTheFormat) {
  if (std::system("python3 -c 'import hashlib, json' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no python3 on PATH";
  const fs::path tools =
      fs::path(CUJAX_FIXTURES_DIR).parent_path().parent_path() / "tools" / "jax_bridge";
  const fs::path dir = fresh_dir("python");
  const Exported exp = export_mlp();
  exp.save((dir / "a.cujax").string());
  const std::string script = "import sys; sys.path.insert(0, '" + tools.string() +
                             "'); import cujax_artifact as c; h, t = c.read('" +
                             (dir / "a.cujax").string() + "'); c.write('" +
                             (dir / "b.cujax").string() +
                             "', h['fun_name'], t, h['in'], h['out'], h['platforms'], "
                             "h['in_tree'], h['out_tree'])";
  ASSERT_EQ(std::system(("python3 -c \"" + script + "\"").c_str()), 0);
  std::ifstream in(dir / "b.cujax", std::ios::binary);
  const std::string written(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(written, exp.serialize());
  EXPECT_EQ(Exported::load((dir / "b.cujax").string()).checksum(), exp.checksum());
  fs::remove_all(dir);
}

// --- the committed fixture: artifacts written by format version 1 keep loading ----------------

const fs::path kFixtures = fs::path(CUJAX_FIXTURES_DIR) / "export";

std::vector<std::string> fixture_inputs() {
  std::vector<std::string> v;
  for (int i = 0; i < 7; ++i) v.push_back((kFixtures / ("mlp_v1.in" + std::to_string(i) + ".npy")));
  return v;
}
std::vector<std::string> fixture_outputs() {
  std::vector<std::string> v;
  for (int i = 0; i < 4; ++i)
    v.push_back((kFixtures / ("mlp_v1.out" + std::to_string(i) + ".npy")));
  return v;
}

// Recorded outputs may come from another machine, whose BLAS may round differently: integers
// must match exactly, floats to a few ulps of f32 (bf16 to one of its own).
void expect_matches_recorded(const HostTensor& got, const HostTensor& want,
                             const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  if (!is_float(want.dtype())) {
    EXPECT_TRUE(same_bytes(got, want)) << what;
    return;
  }
  const double rtol = want.dtype() == DType::BF16 ? 1e-2 : 1e-5;
  visit_dtype(want.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < want.size(); ++i) {
      const double g = static_cast<double>(static_cast<float>(got.data_as<T>()[i]));
      const double w = static_cast<double>(static_cast<float>(want.data_as<T>()[i]));
      EXPECT_NEAR(g, w, rtol * (1 + std::abs(w))) << what << " at " << i;
    }
  });
}

// CUJAX_WRITE_FIXTURES=1 rewrites the fixture (after a deliberate format change, with a new
// version number); otherwise the committed files are only read.
void write_fixture_when_asked() {
  const char* v = std::getenv("CUJAX_WRITE_FIXTURES");
  if (!v || std::string(v) != "1") return;
  fs::create_directories(kFixtures);
  export_mlp().save((kFixtures / "mlp_v1.cujax").string());
  const Inputs in = make_inputs();
  std::vector<Array> leaves;
  for (const auto& [path, value] : in.params) leaves.push_back(value);
  for (const Array& a : {in.x, in.labels, in.gate}) leaves.push_back(a);
  for (int i = 0; i < 7; ++i) save_npy(fixture_inputs()[i], leaves[i].to_host());
  const std::vector<HostTensor> out = expected_outputs(in);
  for (int i = 0; i < 4; ++i) save_npy(fixture_outputs()[i], out[i]);
}

TEST(ExportFixture, VersionOneArtifactStillGivesItsRecordedOutputs) {
  write_fixture_when_asked();
  const Exported exp = Exported::load((kFixtures / "mlp_v1.cujax").string());
  EXPECT_EQ(exp.fun_name(), "mlp");
  EXPECT_EQ(exp.in_leaves()[0].path, "params.dense1.kernel");
  std::vector<Array> inputs;
  for (const auto& f : fixture_inputs()) inputs.push_back(array(load_npy(f)));
  const std::vector<Array> got = exp.call_flat(inputs);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i)
    expect_matches_recorded(got[i].to_host(), load_npy(fixture_outputs()[i]), fixture_outputs()[i]);
  // The recorded outputs are today's jitted function's outputs too.
  const std::vector<HostTensor> now = expected_outputs(make_inputs());
  for (int i = 0; i < 4; ++i)
    expect_matches_recorded(now[i], load_npy(fixture_outputs()[i]), fixture_outputs()[i]);
}

// --- cujax run ----------------------------------------------------------------------------------

struct CliResult {
  int code;
  std::string err, out;
};

CliResult run_cli(const std::string& args, const fs::path& dir) {
  const fs::path err = dir / "stderr.txt", out = dir / "stdout.txt";
  const std::string cmd =
      std::string(CUJAX_CLI_PATH) + " run " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(err), slurp(out)};
}

std::string join_flags(const std::string& flag, const std::vector<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += " " + flag + " " + f;
  return s;
}

TEST(RunCommand, RunsAnArtifactOnNpyFiles) {
  const fs::path dir = fresh_dir("cli");
  export_mlp().save((dir / "mlp.cujax").string());
  const Inputs in = make_inputs();
  std::vector<std::string> ins, outs;
  int i = 0;
  auto put = [&](const Array& a) {
    ins.push_back((dir / ("in" + std::to_string(i++) + ".npy")).string());
    save_npy(ins.back(), a.to_host());
  };
  for (const auto& [path, value] : in.params) put(value);
  for (const Array& a : {in.x, in.labels, in.gate}) put(a);
  for (int o = 0; o < 4; ++o) outs.push_back((dir / ("out" + std::to_string(o) + ".npy")).string());
  const CliResult r = run_cli((dir / "mlp.cujax").string() + join_flags("--input", ins) +
                                  join_flags("--output", outs) + " --print",
                              dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<HostTensor> want = expected_outputs(in);
  for (int o = 0; o < 4; ++o) EXPECT_TRUE(same_bytes(load_npy(outs[o]), want[o])) << o;
  expect_contains(r.out, "result[0] f32[4,2] min ");
  expect_contains(r.out, "result[2] bf16[4,2] ");
  const std::string hits = "result[1] i32[] min " + std::to_string(want[1].data_as<int32_t>()[0]);
  expect_contains(r.out, hits);

  // Bad input: exit code 2 and one line naming the problem.
  auto bad = [&](const std::string& args, const std::string& part) {
    const CliResult b = run_cli(args, dir);
    EXPECT_EQ(b.code, 2) << args << "\n" << b.err;
    expect_contains(b.err, part);
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
    EXPECT_EQ(b.err.rfind("cujax run: ", 0), 0u) << b.err;
  };
  const std::string art = (dir / "mlp.cujax").string();
  bad(art + join_flags("--input", ins) + " --output " + outs[0],
      "has 4 outputs (result[0] f32[4,2], result[1] i32[], result[2] bf16[4,2], result[3] f64[]), "
      "got 1 --output");
  bad(art + join_flags("--input", {ins[0], ins[1]}) + join_flags("--output", outs),
      "takes 7 inputs (params.dense1.kernel f32[3,5], ");
  std::vector<std::string> swapped = ins;
  std::swap(swapped[0], swapped[1]);
  bad(art + join_flags("--input", swapped) + join_flags("--output", outs),
      "in1.npy is f32[5], but input params.dense1.kernel of " + art + " is f32[3,5]");
  std::vector<std::string> missing = ins;
  missing[3] = (dir / "nope.npy").string();
  bad(art + join_flags("--input", missing) + join_flags("--output", outs), "nope.npy");
  bad((dir / "nope.cujax").string() + " --print", "nope.cujax: cannot read exported artifact");
  bad(ins[0] + " --print", "not a cujax exported artifact");
  std::string corrupt = Exported::load(art).serialize();
  corrupt[corrupt.size() - 30] ^= 4;
  {
    std::ofstream f(dir / "corrupt.cujax", std::ios::binary);
    f << corrupt;
  }
  bad((dir / "corrupt.cujax").string() + " --print", "checksum mismatch");
  const auto platforms = runtime::available_platforms();
  if (std::find(platforms.begin(), platforms.end(), "cuda") == platforms.end()) {
    ExportOptions cuda_only;
    cuda_only.platforms = {"cuda"};
    export_(jitted_mlp(), cuda_only, in.params, in.x, in.labels, in.gate)
        .save((dir / "cuda.cujax").string());
    bad((dir / "cuda.cujax").string() + join_flags("--input", ins) + " --print",
        "is for platforms [cuda], but this build runs [cpu]");
  }
  bad(art + join_flags("--input", ins), "nothing to do");
  bad(art + " --frobnicate", "unknown option --frobnicate");
  bad("--print", "no artifact FILE given");
  fs::remove_all(dir);
}

TEST(RunCommand, RunsTheCommittedFixture) {
  const fs::path dir = fresh_dir("cli_fixture");
  std::vector<std::string> outs;
  for (int o = 0; o < 4; ++o) outs.push_back((dir / ("out" + std::to_string(o) + ".npy")).string());
  const CliResult r =
      run_cli((kFixtures / "mlp_v1.cujax").string() + join_flags("--input", fixture_inputs()) +
                  join_flags("--output", outs),
              dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int o = 0; o < 4; ++o)
    expect_matches_recorded(load_npy(outs[o]), load_npy(fixture_outputs()[o]), outs[o]);
  fs::remove_all(dir);
}

// --- AOT: after compile(), the first call neither traces nor compiles, and is not slow ----------
// One first call can be delayed by a scheduler time slice on a loaded machine (measured here:
// 4-8 ms now and then, for any call that has to wake the device thread), so the bound is on the
// median of the first calls of several freshly compiled programs: extra work done by first
// calls still moves it, one unlucky wake-up does not.

double call_ms(const std::function<void()>& call) {
  const auto t0 = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kPrograms = 5;

void expect_first_calls_fast(const std::vector<double>& firsts, const std::vector<double>& steady) {
  std::printf("first call: median %.3f ms of %s; steady state: median %.3f ms\n", median(firsts),
              ::testing::PrintToString(firsts).c_str(), median(steady));
  EXPECT_LE(median(firsts), 3 * median(steady) + 2.0);
}

// Compiling uses up the thread's time slice; a pause lets the first call start with a fresh one
// (a server's first request comes some time after its compile, too). Every timed call gets the
// same pause: on a loaded machine waking from one costs milliseconds, which back-to-back calls
// would not pay, and the first call alone paying it is what made the comparison flaky.
void settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

double settled_call_ms(const std::function<void()>& call) {
  settle();
  return call_ms(call);
}

TEST(Aot, CompiledFirstCallDoesNoTracingOrCompilation) {
  int traces = 0;
  auto f = jit(
      [&traces](const State& p, const Array& x, const Array& labels, const Array& gate) {
        ++traces;  // runs only while tracing
        return mlp(p, x, labels, gate);
      },
      mlp_options());
  const Inputs in = make_inputs();
  const auto lowered = f.lower(in.params, ShapeDtype{{4, 3}, DType::F32},
                               ShapeDtype{{4}, DType::I32}, ShapeDtype{{4, 2}, DType::BF16});
  std::vector<double> firsts, steady;
  for (int k = 0; k < kPrograms; ++k) {
    const int64_t before = global_compile_count();
    const auto compiled = lowered.compile();
    EXPECT_EQ(global_compile_count(), before + 1);
    auto call = [&] {
      std::get<0>(compiled(in.params, in.x, in.labels, in.gate)).block_until_ready();
    };
    firsts.push_back(settled_call_ms(call));
    for (int i = 0; i < 5; ++i) steady.push_back(settled_call_ms(call));
    EXPECT_EQ(traces, 1);
    EXPECT_EQ(global_compile_count(), before + 1);
  }
  expect_first_calls_fast(firsts, steady);
}

TEST(Aot, ExportedFirstCallAfterCompileDoesNoCompilation) {
  const std::string bytes = export_mlp().serialize();
  const Inputs in = make_inputs();
  std::vector<double> firsts, steady;
  for (int k = 0; k < kPrograms; ++k) {
    const Exported exp = Exported::deserialize(bytes);
    const int64_t before = global_compile_count();
    exp.compile();
    EXPECT_TRUE(exp.is_compiled());
    EXPECT_EQ(global_compile_count(), before + 1);
    const Exported copy = exp;  // copies share the compiled program
    auto call = [&] {
      copy.call(in.params, in.x, in.labels, in.gate)[0].array().block_until_ready();
    };
    firsts.push_back(settled_call_ms(call));
    for (int i = 0; i < 5; ++i) steady.push_back(settled_call_ms(call));
    EXPECT_EQ(global_compile_count(), before + 1);
  }
  expect_first_calls_fast(firsts, steady);
}

}  // namespace
}  // namespace cujax
