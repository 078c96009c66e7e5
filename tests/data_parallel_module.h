// A hand-partitioned data-parallel SGD step of linear regression, for the SPMD runtime's
// tests: each of `devices` devices takes the gradient of the mean squared error on its
// `local_batch` rows, an all_reduce sums the gradients and the loss over the devices and
// divides by their number (the mean), and every device applies the same SGD update.
// devices = 1 and local_batch = the full batch gives the single-device reference step.
#pragma once

#include <string>
#include <vector>

#include "cujax/core/host_tensor.h"

namespace cujax::dp_test {

constexpr int kFeatures = 3;
constexpr float kLearningRate = 0.1f;

inline std::string data_parallel_step(int devices, int local_batch) {
  const std::string B = std::to_string(local_batch);
  const std::string X = "tensor<" + B + "x3xf32>", V = "tensor<" + B + "xf32>";
  const std::string scale = std::to_string(2.0 / local_batch);  // d(mean r^2)/dr = 2r/B
  const std::string inv_b = std::to_string(1.0 / local_batch);
  const std::string inv_d = std::to_string(1.0 / devices);
  std::string reduce;
  if (devices > 1) {
    std::string groups;
    for (int d = 0; d < devices; ++d) groups += (d ? ", " : "") + std::to_string(d);
    reduce =
        "    %sw, %sb, %sl = \"stablehlo.all_reduce\"(%gw, %gb, %loss) <{channel_handle = "
        "#stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[" +
        groups + "]]> : tensor<1x" + std::to_string(devices) +
        "xi64>, use_global_device_ids}> ({\n"
        "    ^bb0(%a: tensor<f32>, %b2: tensor<f32>):\n"
        "      %s = stablehlo.add %a, %b2 : tensor<f32>\n"
        "      stablehlo.return %s : tensor<f32>\n"
        "    }) : (tensor<3xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<f32>, "
        "tensor<f32>)\n";
  } else {
    reduce =
        "    %sw = stablehlo.add %gw, %gw0 : tensor<3xf32>\n"
        "    %sb = stablehlo.add %gb, %z : tensor<f32>\n"
        "    %sl = stablehlo.add %loss, %z : tensor<f32>\n";
  }
  return "module @dp_step attributes {mhlo.num_partitions = " + std::to_string(devices) +
         " : i32, mhlo.num_replicas = 1 : i32} {\n"
         "  func.func public @main(%w: tensor<3xf32>, %bias: tensor<f32>, %x: " +
         X + ", %y: " + V +
         ") -> (tensor<3xf32>, tensor<f32>, tensor<f32>) {\n"
         "    %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
         "    %gw0 = stablehlo.constant dense<0.0> : tensor<3xf32>\n"
         "    %p = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (" +
         X + ", tensor<3xf32>) -> " + V +
         "\n"
         "    %bb = stablehlo.broadcast_in_dim %bias, dims = [] : (tensor<f32>) -> " +
         V +
         "\n"
         "    %pred = stablehlo.add %p, %bb : " +
         V +
         "\n"
         "    %r = stablehlo.subtract %pred, %y : " +
         V +
         "\n"
         "    %c = stablehlo.constant dense<" +
         scale + "> : " + V +
         "\n"
         "    %g = stablehlo.multiply %r, %c : " +
         V +
         "\n"
         "    %gw = stablehlo.dot_general %g, %x, contracting_dims = [0] x [0] : (" +
         V + ", " + X +
         ") -> tensor<3xf32>\n"
         "    %gb = stablehlo.reduce(%g init: %z) applies stablehlo.add across dimensions = [0] "
         ": (" +
         V +
         ", tensor<f32>) -> tensor<f32>\n"
         "    %r2 = stablehlo.multiply %r, %r : " +
         V +
         "\n"
         "    %sq = stablehlo.reduce(%r2 init: %z) applies stablehlo.add across dimensions = [0] "
         ": (" +
         V +
         ", tensor<f32>) -> tensor<f32>\n"
         "    %ib = stablehlo.constant dense<" +
         inv_b +
         "> : tensor<f32>\n"
         "    %loss = stablehlo.multiply %sq, %ib : tensor<f32>\n" +
         reduce + "    %id = stablehlo.constant dense<" + inv_d +
         "> : tensor<f32>\n"
         "    %idw = stablehlo.broadcast_in_dim %id, dims = [] : (tensor<f32>) -> tensor<3xf32>\n"
         "    %mw = stablehlo.multiply %sw, %idw : tensor<3xf32>\n"
         "    %mb = stablehlo.multiply %sb, %id : tensor<f32>\n"
         "    %ml = stablehlo.multiply %sl, %id : tensor<f32>\n"
         "    %lr = stablehlo.constant dense<" +
         std::to_string(kLearningRate) +
         "> : tensor<f32>\n"
         "    %lrw = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<3xf32>\n"
         "    %uw = stablehlo.multiply %mw, %lrw : tensor<3xf32>\n"
         "    %ub = stablehlo.multiply %mb, %lr : tensor<f32>\n"
         "    %w2 = stablehlo.subtract %w, %uw : tensor<3xf32>\n"
         "    %b3 = stablehlo.subtract %bias, %ub : tensor<f32>\n"
         "    return %w2, %b3, %ml : tensor<3xf32>, tensor<f32>, tensor<f32>\n"
         "  }\n}\n";
}

// The batch: row i of x and its target y = x . (1, -2, 0.5) + 0.3 + noise.
inline HostTensor batch_x(int begin, int rows) {
  std::vector<float> v;
  for (int i = begin; i < begin + rows; ++i)
    for (int j = 0; j < kFeatures; ++j)
      v.push_back(static_cast<float>(((i * 7 + j * 3) % 11) - 5) / 4);
  return HostTensor::from_vector(v, {rows, kFeatures});
}
inline HostTensor batch_y(int begin, int rows) {
  const HostTensor x = batch_x(begin, rows);
  const float* p = x.data_as<float>();
  std::vector<float> v;
  for (int i = 0; i < rows; ++i)
    v.push_back(p[i * 3] - 2 * p[i * 3 + 1] + 0.5f * p[i * 3 + 2] + 0.3f +
                0.01f * static_cast<float>((begin + i) % 3 - 1));
  return HostTensor::from_vector(v, {rows});
}

}  // namespace cujax::dp_test
