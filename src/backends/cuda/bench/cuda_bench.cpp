// GPU benchmarks, each against a peer measured in the same run: a bf16 8192^3 matrix product
// through the cuda backend vs cuBLAS called directly (cublasGemmEx, f32 accumulation), and a
// 1 GiB device-to-device copy through the backend (an identity transpose, the strided-copy
// kernel) vs cudaMemcpyAsync; and cuDNN's fused attention (@cujax.cudnn_sdpa, causal bf16,
// head dim 128, T = 4096) against the 550 TFLOP/s that issue 21 asks for (JAX's cuDNN attention
// is measured by gpu-check.sh's jax-attention stage). Prints a table last. Exit 77 when no device
// is usable.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/driver/driver.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/program.h"
#include "cujax/ir/parser.h"

namespace {

using namespace cujax;
using namespace cujax::cuda;

// Median-free and simple: mean milliseconds of `iters` runs after `warmup` runs.
double time_ms(Device& dev, int warmup, int iters, const std::function<void()>& body) {
  for (int i = 0; i < warmup; ++i) body();
  Event start(true), stop(true);
  start.record(dev.stream());
  for (int i = 0; i < iters; ++i) body();
  stop.record(dev.stream());
  stop.synchronize();
  return stop.elapsed_ms_since(start) / iters;
}

struct Row {
  std::string name, unit;
  double backend, peer;  // higher is better
};

// A device array of `shape` filled with `bits` (an element bit pattern).
DeviceArray filled(Device& dev, DType t, Shape shape, uint64_t bits) {
  DeviceArray a = dev.allocate(t, std::move(shape));
  std::shared_ptr<void> v = dev.allocate(8);
  CUJAX_CUDA_CHECK(
      cudaMemcpyAsync(v.get(), &bits, size_of(t), cudaMemcpyHostToDevice, dev.stream()));
  launch_fill(size_of(t), v.get(), a.data.get(), a.size(), dev.stream());
  return a;
}

Row matmul(Device& dev) {
  constexpr int64_t n = 8192;
  const std::string ty = "tensor<8192x8192xbf16>";
  const std::string text = "func.func @main(%a: " + ty + ", %b: " + ty + ") -> " + ty +
                           " {\n  %0 = \"stablehlo.dot_general\"(%a, %b) {dot_dimension_numbers = "
                           "#stablehlo.dot<lhs_contracting_dimensions = [1], "
                           "rhs_contracting_dimensions = [0]>} : (" +
                           ty + ", " + ty + ") -> " + ty + "\n  return %0 : " + ty + "\n}\n";
  auto module = ir::parse_module(text);
  auto program = compile_program(*module, *module->lookup("main"), dev.shared_from_this());
  if (host_steps(*program) != 0) throw Error("bf16 dot_general fell back to the host");
  DeviceArray a = filled(dev, DType::BF16, {n, n}, 0x3c00),
              b = filled(dev, DType::BF16, {n, n}, 0x3c00);
  const double backend_ms = time_ms(dev, 2, 10, [&] { run_program(*program, dev, {a, b}); });

  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw Error("cublasCreate failed");
  cublasSetStream(h, dev.stream());
  DeviceArray c = dev.allocate(DType::BF16, {n, n});
  const float one = 1, zero = 0;
  const double cublas_ms = time_ms(dev, 2, 10, [&] {
    const cublasStatus_t s =
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.data.get(), CUDA_R_16BF, n,
                     a.data.get(), CUDA_R_16BF, n, &zero, c.data.get(), CUDA_R_16BF, n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) throw Error("cublasGemmEx failed: " + std::to_string(s));
  });
  cublasDestroy(h);
  const double flop = 2.0 * n * n * n;
  return {"bf16 matmul 8192^3", "TFLOP/s", flop / backend_ms / 1e9, flop / cublas_ms / 1e9};
}

Row copy(Device& dev) {
  constexpr int64_t rows = 16384, cols = 16384;  // 1 GiB of f32
  const std::string ty = "tensor<16384x16384xf32>";
  const std::string text = "func.func @main(%a: " + ty + ") -> " + ty +
                           " {\n  %0 = \"stablehlo.transpose\"(%a) {permutation = array<i64: 0, "
                           "1>} : (" +
                           ty + ") -> " + ty + "\n  return %0 : " + ty + "\n}\n";
  auto module = ir::parse_module(text);
  auto program = compile_program(*module, *module->lookup("main"), dev.shared_from_this());
  DeviceArray a = filled(dev, DType::F32, {rows, cols}, 0x3f800000);
  const double backend_ms = time_ms(dev, 2, 10, [&] { run_program(*program, dev, {a}); });
  DeviceArray b = dev.allocate(DType::F32, {rows, cols});
  const double memcpy_ms = time_ms(dev, 2, 10, [&] {
    CUJAX_CUDA_CHECK(cudaMemcpyAsync(b.data.get(), a.data.get(), a.nbytes(),
                                     cudaMemcpyDeviceToDevice, dev.stream()));
  });
  const double bytes = 2.0 * static_cast<double>(a.nbytes());  // read + write
  return {"d2d copy 1 GiB f32", "GB/s", bytes / backend_ms / 1e6, bytes / memcpy_ms / 1e6};
}

Row attention(Device& dev) {
  constexpr int64_t B = 4, T = 4096, N = 16, H = 128;
  const std::string ty = "tensor<4x4096x16x128xbf16>";
  const std::string text =
      "func.func @main(%q: " + ty + ", %k: " + ty + ", %v: " + ty + ") -> " + ty +
      " {\n  %0 = \"stablehlo.custom_call\"(%q, %k, %v) {call_target_name = "
      "\"cujax.cudnn_sdpa\", api_version = 4 : i32, backend_config = {causal = true, "
      "dropout_rate = 0.0 : f64, groups = 1 : i64, has_bias = false, has_seq_lengths = false, "
      "layout = \"BTNH\", mask_type = \"causal\", scale = 0.08838834764831845 : f64}} : (" +
      ty + ", " + ty + ", " + ty + ") -> " + ty + "\n  return %0 : " + ty + "\n}\n";
  auto module = ir::parse_module(text);
  auto program = compile_program(*module, *module->lookup("main"), dev.shared_from_this());
  if (host_steps(*program) != 0) throw Error("cuDNN attention fell back to the host");
  DeviceArray q = filled(dev, DType::BF16, {B, T, N, H}, 0x3c00);  // 0.0078125
  const double ms = time_ms(dev, 2, 10, [&] { run_program(*program, dev, {q, q, q}); });
  const double flop = 4.0 * B * N * T * T * H / 2;  // two products, the causal half
  return {"cudnn sdpa causal T4096", "TFLOP/s", flop / ms / 1e9, 550.0};
}

}  // namespace

int main() {
  const Driver& driver = Driver::system();
  if (!driver.usable()) {
    std::printf("SKIP: %s\n", driver.reason().c_str());
    return 77;
  }
  try {
    auto dev = std::make_shared<Device>(0);
    std::vector<Row> rows;
    rows.push_back(matmul(*dev));
    rows.push_back(copy(*dev));
    rows.push_back(attention(*dev));
    std::printf("\n%-22s %-8s %10s %10s %8s\n", "benchmark", "unit", "cujax", "peer", "ratio");
    for (const Row& r : rows)
      std::printf("%-22s %-8s %10.1f %10.1f %8.2f\n", r.name.c_str(), r.unit.c_str(), r.backend,
                  r.peer, r.backend / r.peer);
    std::printf(
        "peers: cublasGemmEx (bf16, f32 accumulation); cudaMemcpyAsync device to device; "
        "attention: the 550 TFLOP/s target (B=4, N=16, H=128, bf16)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
