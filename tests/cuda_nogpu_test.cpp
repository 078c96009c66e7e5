// The cuda backend's compiler on a machine without a GPU (label `cuda-nogpu`; CUDA builds
// only): every program of the conformance suite and every step the tiny model and GPT-2 run
// (training, evaluation, decoding, prefill) compiles for cuda with no op left to the host, and the
// host-fallback switch does what it says.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/program.h"
#include "cujax/core/json.h"
#include "cujax/export.h"
#include "cujax/grad.h"
#include "cujax/ir/parser.h"
#include "cujax/models/lm.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/compile_report.h"
#include "cujax/serve/steps.h"
#include "cujax/trace/trace.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;

std::string shared_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<cuda::HostFallbackOp> fallbacks_of(const ir::Module& module) {
  runtime::CompileOptions options;
  options.host_fallback = runtime::HostFallback::Allow;
  const auto program =
      cuda::compile_program(module, *module.lookup("main"), nullptr, nullptr, options);
  return cuda::host_fallbacks(*program);
}

// "name: op at l:c, ..." for each program with a fallback, and the count per op.
struct Offenders {
  std::vector<std::string> programs;
  std::map<std::string, int> per_op;

  void add(const std::string& name, const std::vector<cuda::HostFallbackOp>& f) {
    if (f.empty()) return;
    std::string line = name + ":";
    for (const auto& op : f) {
      line += " " + op.where;
      ++per_op[op.op];
    }
    programs.push_back(line);
  }
  std::string summary() const {
    std::string s;
    for (const auto& [op, n] : per_op) s += "  " + op + ": " + std::to_string(n) + "\n";
    for (const auto& p : programs) s += "  " + p + "\n";
    return s;
  }
};

TEST(CudaNoGpu, ConformanceProgramsRunEntirelyOnTheDevice) {
  const fs::path dir = fs::path(shared_dir()) / "conformance" / "stablehlo-testdata";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no conformance data at " << dir;
  Offenders off;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".mlir") continue;
    ++files;
    const auto module = ir::parse_module(read_file(e.path()));
    off.add(e.path().filename().string(), fallbacks_of(*module));
  }
  EXPECT_GT(files, 0);
  EXPECT_TRUE(off.programs.empty())
      << off.programs.size() << " of " << files << " programs run ops on the host:\n"
      << off.summary();
}

// The complex and chlo programs: whatever the cpu backend compiles, cuda compiles too; the ops
// with complex device kernels (fft through cuFFT, the arithmetic, functions and converts of
// complex.cu, dot_general, the ops that only move elements, control flow, and reductions and
// sorts of complex64 values whatever their region) never take the host path, the others may
// (reductions other than sums and sorts of complex128), and a program without complex values
// (chlo decomposed into StableHLO) runs entirely on the device.
TEST(CudaNoGpu, ComplexAndChloProgramsCompileWhereTheCpuDoes) {
  const fs::path dir = fs::path(shared_dir()) / "conformance" / "stablehlo-testdata-ext";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no conformance data at " << dir;
  Offenders off;
  int files = 0, with_complex = 0, ffts = 0, entirely_on_device = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".mlir") continue;
    const std::string text = read_file(e.path());
    const auto module = ir::parse_module(text);
    try {
      runtime::get_backend("cpu").compile(*module, "main");
    } catch (const UnsupportedError&) {
      continue;  // not yet on either backend (docs/conformance.md lists these)
    }
    ++files;
    std::vector<cuda::HostFallbackOp> f;
    ASSERT_NO_THROW(f = fallbacks_of(*module)) << e.path().filename();
    static const std::set<std::string> on_device = {"stablehlo.fft",
                                                    "stablehlo.add",
                                                    "stablehlo.subtract",
                                                    "stablehlo.multiply",
                                                    "stablehlo.divide",
                                                    "stablehlo.negate",
                                                    "stablehlo.real",
                                                    "stablehlo.imag",
                                                    "stablehlo.complex",
                                                    "stablehlo.abs",
                                                    "stablehlo.compare",
                                                    "stablehlo.constant",
                                                    "stablehlo.reshape",
                                                    "stablehlo.transpose",
                                                    "stablehlo.broadcast_in_dim",
                                                    "stablehlo.slice",
                                                    "stablehlo.select",
                                                    "stablehlo.concatenate",
                                                    "stablehlo.convert",
                                                    "stablehlo.dot_general",
                                                    "stablehlo.reverse",
                                                    "stablehlo.bitcast_convert",
                                                    "stablehlo.dynamic_update_slice",
                                                    "stablehlo.exponential",
                                                    "stablehlo.exponential_minus_one",
                                                    "stablehlo.log",
                                                    "stablehlo.log_plus_one",
                                                    "stablehlo.sqrt",
                                                    "stablehlo.rsqrt",
                                                    "stablehlo.sign",
                                                    "stablehlo.tanh",
                                                    "stablehlo.power",
                                                    "stablehlo.maximum",
                                                    "stablehlo.minimum",
                                                    "chlo.tan",
                                                    "chlo.sinh",
                                                    "chlo.asin",
                                                    "chlo.atan",
                                                    "chlo.asinh",
                                                    "chlo.acosh",
                                                    "chlo.atanh",
                                                    "func.call"};
    const bool complex64_only = text.find("complex<f64>") == std::string::npos;
    for (const auto& op : f)
      EXPECT_FALSE(on_device.count(op.op) ||
                   (complex64_only && (op.op == "stablehlo.reduce" || op.op == "stablehlo.sort" ||
                                       op.op == "stablehlo.reduce_window")))
          << e.path().filename() << ": " << op.op << " at " << op.where << " runs on the host";
    ffts += text.find("stablehlo.fft") != std::string::npos;
    if (text.find("complex<") == std::string::npos)
      off.add(e.path().filename().string(), f);
    else
      ++with_complex, entirely_on_device += f.empty();
  }
  EXPECT_GT(files, 100);
  EXPECT_GT(ffts, 5);
  // 52 of the 95 complex programs on 2026-12-05, 68 with complex dot_general and converts, 86
  // with the element functions, 89 with complex64 regions (2026-12-06; the rest are complex128
  // reductions, cumulative reductions and a sort)
  EXPECT_GT(with_complex, 0);
  EXPECT_GE(entirely_on_device, with_complex * 93 / 100);
  EXPECT_TRUE(off.programs.empty())
      << off.programs.size() << " programs without complex values run ops on the host:\n"
      << off.summary();
}

// Narrow element types (int4, float8_e4m3fn, ...): the interpreter suite's programs on them
// compile for cuda, computing on wide types on the device, with their constants and converts on
// the device too; only bitcast_convert of narrow values (bit fields packed into bytes), the
// control flow that carries them, and the check ops, which read their operands on the host,
// take the host path.
TEST(CudaNoGpu, NarrowTypeProgramsKeepOnlyBitcastsAndControlFlowOnTheHost) {
  const fs::path dir = fs::path(shared_dir()) / "conformance" / "stablehlo-interpret";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no conformance data at " << dir;
  int files = 0, entirely_on_device = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".mlir") continue;
    std::unique_ptr<ir::Module> module;
    try {
      module = ir::parse_module(read_file(e.path()));
    } catch (const Error&) {
      continue;  // element types cujax does not parse yet (docs/conformance.md lists them)
    }
    bool narrow = false;
    for (const auto& op : module->lookup("main")->entry().ops)
      for (const auto& r : op->results) narrow = narrow || is_narrow(r->type.dtype);
    if (!narrow) continue;
    ++files;
    std::vector<cuda::HostFallbackOp> f;
    ASSERT_NO_THROW(f = fallbacks_of(*module)) << e.path().filename();
    entirely_on_device += f.empty();
    for (const auto& op : f)
      EXPECT_TRUE(op.op == "stablehlo.bitcast_convert" || op.op == "stablehlo.while" ||
                  op.op == "stablehlo.if" || op.op == "stablehlo.case" ||
                  op.op.starts_with("check."))
          << e.path().filename() << ": " << op.op << " at " << op.where << " runs on the host";
  }
  EXPECT_GT(files, 20);
  EXPECT_GT(entirely_on_device, files / 2);
}

// Quantized types become integer and float arithmetic before the backend sees them
// (compiler/quantized.h): quantize, dequantize and an op on quantized values, per tensor and per
// axis, run entirely on the device, and so do the interpreter suite's quantized programs, but for
// their check ops.
TEST(CudaNoGpu, QuantizedProgramsRunOnTheDevice) {
  const std::string q = "tensor<4x3x!quant.uniform<i8:f32:1, {0.5:0, 0.1:-30, 2.0:7}>>";
  const std::string p = "tensor<4x3x!quant.uniform<u8<1:250>:f32, 0.25:128>>";
  const auto module = ir::parse_module(
      "func.func @main(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xui8>) {\n"
      "  %0 = stablehlo.uniform_quantize %x : (tensor<4x3xf32>) -> " +
      q +
      "\n"
      "  %1 = stablehlo.multiply %0, %0 : (" +
      q + ", " + q + ") -> " + p +
      "\n"
      "  %2 = stablehlo.uniform_dequantize %0 : (" +
      q +
      ") -> tensor<4x3xf32>\n"
      "  %3 = stablehlo.bitcast_convert %1 : (" +
      p +
      ") -> tensor<4x3xui8>\n"
      "  return %2, %3 : tensor<4x3xf32>, tensor<4x3xui8>\n}");
  std::vector<cuda::HostFallbackOp> f = fallbacks_of(*module);
  for (const auto& op : f) ADD_FAILURE() << op.op << " at " << op.where << " runs on the host";
  const fs::path dir = fs::path(shared_dir()) / "conformance" / "stablehlo-interpret";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no conformance data at " << dir;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.path().filename().string().starts_with("quantized_ops")) continue;
    ++files;
    ASSERT_NO_THROW(f = fallbacks_of(*ir::parse_module(read_file(e.path()))))
        << e.path().filename();
    for (const auto& op : f)
      EXPECT_TRUE(op.op.starts_with("check."))
          << e.path().filename() << ": " << op.op << " at " << op.where << " runs on the host";
  }
  EXPECT_GE(files, 4);
}

// A sort keyed on floats carries complex payloads: complex64 ones (8 bytes) on the device's
// radix sort, complex128 ones (16 bytes, more than the sorts move) on the host, rather than
// half of each element.
TEST(CudaNoGpu, SortsCarryComplex64PayloadsOnTheDeviceAndComplex128OnTheHost) {
  for (const std::string part : {"f32", "f64"}) {
    const std::string c = "tensor<8xcomplex<" + part + ">>";
    const auto module = ir::parse_module(
        "func.func @main(%k: tensor<8xf32>, %v: " + c + ") -> (tensor<8xf32>, " + c + ") {\n" +
        "  %0:2 = \"stablehlo.sort\"(%k, %v) <{dimension = 0 : i64}> ({\n" +
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %x: tensor<complex<" + part +
        ">>, %y: tensor<complex<" + part + ">>):\n" +
        "    %1 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> "
        "tensor<i1>\n    stablehlo.return %1 : tensor<i1>\n  }) : (tensor<8xf32>, " +
        c + ") -> (tensor<8xf32>, " + c + ")\n  return %0#0, %0#1 : tensor<8xf32>, " + c + "\n}\n");
    const auto f = fallbacks_of(*module);
    if (part == "f32") {
      EXPECT_TRUE(f.empty()) << "the complex64 payload's sort runs on the host";
    } else {
      ASSERT_EQ(f.size(), 1u);
      EXPECT_EQ(f[0].op, "stablehlo.sort");
    }
  }
}

// A scatter that assigns complex values (JAX's x.at[i].set) moves their bytes on the device, with
// or without unique indices; one that adds them takes the host path (the scatter kernels compute
// in the element type, which has no complex form).
TEST(CudaNoGpu, ComplexScatterAssignsOnTheDeviceAndAddsOnTheHost) {
  for (const std::string part : {"f32", "f64"})
    for (const bool adds : {false, true})
      for (const std::string unique : {"false", "true"}) {
        const std::string e = "tensor<complex<" + part + ">>";
        const std::string c = "tensor<6x2xcomplex<" + part + ">>";
        const std::string u = "tensor<3x2xcomplex<" + part + ">>";
        const std::string region = adds ? "    %s = stablehlo.add %x, %y : " + e +
                                              "\n    stablehlo.return %s : " + e + "\n"
                                        : "    stablehlo.return %y : " + e + "\n";
        const auto module = ir::parse_module(
            "func.func @main(%a: " + c + ", %i: tensor<3x1xi32>, %v: " + u + ") -> " + c +
            " {\n  %0 = \"stablehlo.scatter\"(%a, %i, %v) ({\n  ^bb0(%x: " + e + ", %y: " + e +
            "):\n" + region +
            "  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
            "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = "
            "1>, unique_indices = " +
            unique + "} : (" + c + ", tensor<3x1xi32>, " + u + ") -> " + c +
            "\n  return %0 : " + c + "\n}\n");
        SCOPED_TRACE(part + (adds ? " add" : " assign") + ", unique " + unique);
        const auto f = fallbacks_of(*module);
        if (!adds) {
          EXPECT_TRUE(f.empty()) << "the assignment runs on the host";
        } else {
          ASSERT_EQ(f.size(), 1u);
          EXPECT_EQ(f[0].op, "stablehlo.scatter");
        }
      }
}

class CudaNoGpuModel : public ::testing::Test {
 protected:
  nnx::Rngs rngs{0};
  models::TransformerLM model{models::tiny_config(), rngs};
  State params = nnx::state(model, nnx::VariableKind::Param);
};

void expect_train_and_eval_on_device(models::TransformerLM& model, const State& params, int64_t B,
                                     int64_t T) {
  const data::Batch batch{numpy::zeros({B, T}, DType::I32), numpy::zeros({B, T}, DType::I32)};
  auto tx = models::make_optimizer({});
  const State opt_state = tx.init(params);
  Offenders off;
  const auto train = models::make_train_step(model, tx).lower(params, opt_state, batch);
  off.add("train step", fallbacks_of(train.module()));
  // The program is the model's: its logits are (B, T, vocab) and every layer is in it.
  const std::string logits = "tensor<" + std::to_string(B) + "x" + std::to_string(T) + "x" +
                             std::to_string(model.config.vocab_size) + "xf32>";
  EXPECT_NE(train.as_text().find(logits), std::string::npos) << logits;
  const auto eval = models::make_eval_step(model).lower(params, batch);
  off.add("eval step", fallbacks_of(eval.module()));
  EXPECT_TRUE(off.programs.empty()) << off.summary();
}

TEST_F(CudaNoGpuModel, TrainAndEvalStepsRunEntirelyOnTheDevice) {
  expect_train_and_eval_on_device(model, params, 2, 16);
}

// GPT-2 (124M parameters) at its full context: the program a GPU run trains. The model is
// built under a trace, as nnx.eval_shape does, so no parameter is computed: only the lowered
// programs matter here.
TEST(CudaNoGpuGpt2, TrainAndEvalStepsRunEntirelyOnTheDevice) {
  trace::TraceContext abstract("abstract_gpt2");
  trace::TraceScope scope(&abstract);
  nnx::Rngs rngs{0};
  models::TransformerLM gpt2(models::gpt2_config(), rngs);
  expect_train_and_eval_on_device(gpt2, nnx::state(gpt2, nnx::VariableKind::Param), 1,
                                  models::gpt2_config().max_len);
}

// The serving bundle's programs: the decode step and one prefill step per bucket, as exported
// StableHLO (serve/steps.h).
void expect_serving_steps_on_device(models::TransformerLM& model, const State& params,
                                    int64_t max_batch, int64_t max_seq) {
  Offenders off;
  int steps = 0;
  for (const auto& [name, program] :
       serve::export_step_programs(model, params, max_batch, max_seq)) {
    off.add(name, fallbacks_of(*ir::parse_module(program.mlir_module())));
    ++steps;
  }
  EXPECT_EQ(steps, 1 + static_cast<int>(serve::prefill_buckets(max_seq).size()));
  EXPECT_TRUE(off.programs.empty()) << off.summary();
}

TEST_F(CudaNoGpuModel, DecodeAndPrefillStepsRunEntirelyOnTheDevice) {
  expect_serving_steps_on_device(model, params, 2, 32);
}

// GPT-2's serving steps at its full context (prefill buckets 16 to 1024), built abstractly.
TEST(CudaNoGpuGpt2, DecodeAndPrefillStepsRunEntirelyOnTheDevice) {
  trace::TraceContext abstract("abstract_gpt2");
  trace::TraceScope scope(&abstract);
  nnx::Rngs rngs{0};
  models::TransformerLM gpt2(models::gpt2_config(), rngs);
  expect_serving_steps_on_device(gpt2, nnx::state(gpt2, nnx::VariableKind::Param), 4,
                                 models::gpt2_config().max_len);
}

// A reduce whose body the device's scalar interpreter does not run (converts): it stays on the
// host, so the switch has something to act on.
const char* kHostOnly = R"(func.func @main(%a: tensor<4xf32>, %z: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %1 = "stablehlo.reduce"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    %w = stablehlo.convert %s : (tensor<f32>) -> tensor<f64>
    %c = stablehlo.convert %w : (tensor<f64>) -> tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %1 : tensor<f32>
})";

// rng_bit_generator has a device kernel: a program drawing bits with either generator
// compiles for cuda under the error switch.
TEST(CudaNoGpuSwitch, RngBitGeneratorRunsOnTheDevice) {
  const auto module = ir::parse_module(
      R"(func.func @main(%s2: tensor<2xui64>, %s3: tensor<3xui64>) -> (tensor<4x5xui32>, tensor<7xf32>) {
  %0, %1 = "stablehlo.rng_bit_generator"(%s2) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4x5xui32>)
  %2, %3 = "stablehlo.rng_bit_generator"(%s3) {rng_algorithm = #stablehlo<rng_algorithm PHILOX>} : (tensor<3xui64>) -> (tensor<3xui64>, tensor<7xf32>)
  return %1, %3 : tensor<4x5xui32>, tensor<7xf32>
})");
  runtime::CompileOptions options;
  options.host_fallback = runtime::HostFallback::Error;
  const auto program =
      cuda::compile_program(*module, *module->lookup("main"), nullptr, nullptr, options);
  EXPECT_TRUE(cuda::host_fallbacks(*program).empty());
}

// cuDNN attention's forward and backward custom calls get the cuDNN kernel, not the host's
// reference, and a malformed one fails to compile naming what is wrong.
TEST(CudaNoGpuSwitch, CudnnAttentionRunsOnTheDevice) {
  auto loss = [](const Array& q, const Array& k) {
    return numpy::sum(
        numpy::astype(nn::dot_product_attention(q, k, k, std::nullopt, std::nullopt, std::nullopt,
                                                true, std::string("cudnn")),
                      DType::F32));
  };
  const ShapeDtype qs{{2, 64, 8, 128}, DType::BF16}, ks{{2, 64, 2, 128}, DType::BF16};
  const std::string text = jit(grad(loss, argnums<0, 1>)).lower(qs, ks).as_text();
  ASSERT_NE(text.find("@cujax.cudnn_sdpa_bwd("), std::string::npos) << text;
  const auto module = ir::parse_module(text);
  runtime::CompileOptions options;
  options.host_fallback = runtime::HostFallback::Error;
  const auto program =
      cuda::compile_program(*module, *module->lookup("main"), nullptr, nullptr, options);
  EXPECT_TRUE(cuda::host_fallbacks(*program).empty());
  std::string bad = text;
  bad.replace(bad.find("layout = \"BTNH\""), 15, "layout = \"BSNH\"");
  const auto bad_module = ir::parse_module(bad);
  try {
    cuda::compile_program(*bad_module, *bad_module->lookup("main"), nullptr, nullptr, options);
    FAIL() << "a BSNH layout compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layout 'BSNH' is not supported"), std::string::npos)
        << e.what();
  }
}

TEST(CudaNoGpuSwitch, ErrorModeNamesTheOpAndLocation) {
  const auto module = ir::parse_module(kHostOnly);
  runtime::CompileOptions options;
  options.host_fallback = runtime::HostFallback::Allow;
  const auto program =
      cuda::compile_program(*module, *module->lookup("main"), nullptr, nullptr, options);
  const auto fallbacks = cuda::host_fallbacks(*program);
  ASSERT_EQ(fallbacks.size(), 1u);
  EXPECT_EQ(fallbacks[0].where, "stablehlo.reduce at 3:3");
  options.host_fallback = runtime::HostFallback::Error;
  try {
    cuda::compile_program(*module, *module->lookup("main"), nullptr, nullptr, options);
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("stablehlo.reduce at 3:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CUJAX_HOST_FALLBACK=error"), std::string::npos);
  }
}

TEST(CudaNoGpuSwitch, EnvironmentVariableSetsTheDefault) {
  const char* before = std::getenv("CUJAX_HOST_FALLBACK");
  const std::string saved = before ? before : "";
  ::setenv("CUJAX_HOST_FALLBACK", "error", 1);
  EXPECT_EQ(runtime::host_fallback_from_env(), runtime::HostFallback::Error);
  ::setenv("CUJAX_HOST_FALLBACK", "sometimes", 1);
  EXPECT_THROW(runtime::host_fallback_from_env(), Error);
  ::unsetenv("CUJAX_HOST_FALLBACK");
  EXPECT_EQ(runtime::host_fallback_from_env(), runtime::HostFallback::Log);
  if (before) ::setenv("CUJAX_HOST_FALLBACK", saved.c_str(), 1);
}

// compile_report (what `cujax compile` prints): steps, nested programs and the peak size.
TEST(CudaNoGpuReport, DescribesStepsNestedProgramsAndPeakBytes) {
  const auto module = ir::parse_module(R"(func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %a, %a : tensor<8xf32>
  %1 = call @twice(%0) : (tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
func.func private @twice(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<8xf32>
  return %0 : tensor<8xf32>
})");
  const runtime::CompileReport r = runtime::compile_report("cuda", *module);
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0], "device  stablehlo.add at 2:3");
  EXPECT_EQ(r.steps[1], "device  func.call at 3:3");
  EXPECT_EQ(r.steps[2], "  device  stablehlo.multiply at 7:3");
  EXPECT_TRUE(r.host_fallbacks.empty());
  // %a and %0 live together (32 bytes each), then %0 and %1
  EXPECT_EQ(r.peak_buffer_bytes, 64);
}

}  // namespace
}  // namespace cujax
