// StableHLO programs whose fusions cover every kind, element type and index map the CUDA code
// generator produces: the emulated check (cuda_codegen_test) and the GPU check
// (cuda_fusion_checks) run them against the CPU backend.
#pragma once

#include <string>
#include <vector>

namespace cujax::testutil {

inline const char* kSoftmaxAndNorm = R"(
func.func @main(%x: tensor<6x40xf32>, %y: tensor<6x40xf32>, %g: tensor<40xf32>) -> (tensor<6x40xf32>, tensor<6x40xf32>, tensor<6x40xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<40.0> : tensor<6xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<6xf32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<6x40xf32>, tensor<f32>) -> tensor<6xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<6xf32>) -> tensor<6x40xf32>
  %s = stablehlo.subtract %x, %mb : tensor<6x40xf32>
  %e = stablehlo.exponential %s : tensor<6x40xf32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x40xf32>, tensor<f32>) -> tensor<6xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<6xf32>) -> tensor<6x40xf32>
  %p = stablehlo.divide %e, %sb : tensor<6x40xf32>
  %m2 = stablehlo.reduce(%y init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<6x40xf32>, tensor<f32>) -> tensor<6xf32>
  %mb2 = stablehlo.broadcast_in_dim %m2, dims = [0] : (tensor<6xf32>) -> tensor<6x40xf32>
  %s2 = stablehlo.subtract %y, %mb2 : tensor<6x40xf32>
  %e2 = stablehlo.exponential %s2 : tensor<6x40xf32>
  %sum2 = stablehlo.reduce(%e2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x40xf32>, tensor<f32>) -> tensor<6xf32>
  %sb2 = stablehlo.broadcast_in_dim %sum2, dims = [0] : (tensor<6xf32>) -> tensor<6x40xf32>
  %p2 = stablehlo.divide %e2, %sb2 : tensor<6x40xf32>
  %xs = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x40xf32>, tensor<f32>) -> tensor<6xf32>
  %mean = stablehlo.divide %xs, %n : tensor<6xf32>
  %meanb = stablehlo.broadcast_in_dim %mean, dims = [0] : (tensor<6xf32>) -> tensor<6x40xf32>
  %c = stablehlo.subtract %x, %meanb : tensor<6x40xf32>
  %c2 = stablehlo.multiply %c, %c : tensor<6x40xf32>
  %vs = stablehlo.reduce(%c2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x40xf32>, tensor<f32>) -> tensor<6xf32>
  %var = stablehlo.divide %vs, %n : tensor<6xf32>
  %ve = stablehlo.add %var, %eps : tensor<6xf32>
  %r = stablehlo.rsqrt %ve : tensor<6xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<6xf32>) -> tensor<6x40xf32>
  %gb = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<40xf32>) -> tensor<6x40xf32>
  %cn = stablehlo.multiply %c, %rb : tensor<6x40xf32>
  %ln = stablehlo.multiply %cn, %gb : tensor<6x40xf32>
  return %p, %p2, %ln : tensor<6x40xf32>, tensor<6x40xf32>, tensor<6x40xf32>
}
)";

// Programs whose fusions cover every kind, element type and index map the emitter produces.
inline std::vector<std::string> fusion_programs() {
  return {
      kSoftmaxAndNorm,
      // Long rows (a block per row), a ragged row length, bf16 summed in storage precision, a
      // non-identity init applied once, integer and f16 maxima, a full reduction.
      R"(
func.func @main(%x: tensor<3x1500xf32>, %b: tensor<5x37xbf16>, %i: tensor<4x70xi32>, %h: tensor<777xf16>, %f: tensor<1000xf32>) -> (tensor<3xf32>, tensor<5xbf16>, tensor<4xi32>, tensor<f16>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %bz = stablehlo.constant dense<1.5> : tensor<bf16>
  %imin = stablehlo.constant dense<-2147483648> : tensor<i32>
  %hmin = stablehlo.constant dense<0xFC00> : tensor<f16>
  %two = stablehlo.constant dense<2.0> : tensor<3x1500xf32>
  %xx = stablehlo.multiply %x, %two : tensor<3x1500xf32>
  %a = stablehlo.reduce(%xx init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<3x1500xf32>, tensor<f32>) -> tensor<3xf32>
  %bs = stablehlo.reduce(%b init: %bz) applies stablehlo.add across dimensions = [1] : (tensor<5x37xbf16>, tensor<bf16>) -> tensor<5xbf16>
  %im = stablehlo.reduce(%i init: %imin) applies stablehlo.maximum across dimensions = [1] : (tensor<4x70xi32>, tensor<i32>) -> tensor<4xi32>
  %hm = stablehlo.reduce(%h init: %hmin) applies stablehlo.maximum across dimensions = [0] : (tensor<777xf16>, tensor<f16>) -> tensor<f16>
  %fe = stablehlo.exponential %f : tensor<1000xf32>
  %fs = stablehlo.reduce(%fe init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<1000xf32>, tensor<f32>) -> tensor<f32>
  %fl = stablehlo.log %fs : tensor<f32>
  return %a, %bs, %im, %hm, %fl : tensor<3xf32>, tensor<5xbf16>, tensor<4xi32>, tensor<f16>, tensor<f32>
}
)",
      // Column reductions: a bias gradient of a bf16 activation, batched columns with a side
      // output, an integer column product.
      R"(
func.func @main(%g: tensor<70x45xbf16>, %y: tensor<3x20x33xf32>, %k: tensor<9x40xi64>) -> (tensor<45xf32>, tensor<3x33xf32>, tensor<3x20x33xf32>, tensor<40xi64>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %gf = stablehlo.convert %g : (tensor<70x45xbf16>) -> tensor<70x45xf32>
  %db = stablehlo.reduce(%gf init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<70x45xf32>, tensor<f32>) -> tensor<45xf32>
  %t = stablehlo.tanh %y : tensor<3x20x33xf32>
  %ts = stablehlo.reduce(%t init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<3x20x33xf32>, tensor<f32>) -> tensor<3x33xf32>
  %kp = stablehlo.reduce(%k init: %one) applies stablehlo.multiply across dimensions = [0] : (tensor<9x40xi64>, tensor<i64>) -> tensor<40xi64>
  return %db, %ts, %t, %kp : tensor<45xf32>, tensor<3x33xf32>, tensor<3x20x33xf32>, tensor<40xi64>
}
)",
      // Loops: bf16 and f16 chains rounded per op, broadcasts of a middle dimension, reshapes,
      // clamp with scalar bounds, selects, compares (TOTALORDER too), converts, iota masks.
      R"(
func.func @main(%a: tensor<3x4x5xbf16>, %v: tensor<4xbf16>, %h: tensor<3x4x5xf16>, %f: tensor<60xf32>, %lo: tensor<f32>, %hi: tensor<f32>) -> (tensor<3x4x5xbf16>, tensor<3x4x5xf16>, tensor<60xf32>, tensor<3x4x5xi1>, tensor<6x6xf32>) {
  %vb = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<4xbf16>) -> tensor<3x4x5xbf16>
  %s = stablehlo.add %a, %vb : tensor<3x4x5xbf16>
  %t = stablehlo.tanh %s : tensor<3x4x5xbf16>
  %m = stablehlo.multiply %t, %a : tensor<3x4x5xbf16>
  %hc = stablehlo.convert %m : (tensor<3x4x5xbf16>) -> tensor<3x4x5xf16>
  %hl = stablehlo.logistic %h : tensor<3x4x5xf16>
  %hd = stablehlo.divide %hc, %hl : tensor<3x4x5xf16>
  %fr = stablehlo.reshape %hd : (tensor<3x4x5xf16>) -> tensor<60xf16>
  %ff = stablehlo.convert %fr : (tensor<60xf16>) -> tensor<60xf32>
  %fa = stablehlo.atan2 %ff, %f : tensor<60xf32>
  %fc = stablehlo.clamp %lo, %fa, %hi : (tensor<f32>, tensor<60xf32>, tensor<f32>) -> tensor<60xf32>
  %cmp = stablehlo.compare GT, %fc, %f, TOTALORDER : (tensor<60xf32>, tensor<60xf32>) -> tensor<60xi1>
  %sel = stablehlo.select %cmp, %fc, %f : tensor<60xi1>, tensor<60xf32>
  %fin = stablehlo.is_finite %hd : (tensor<3x4x5xf16>) -> tensor<3x4x5xi1>
  %io = stablehlo.iota dim = 1 : tensor<6x6xi32>
  %jo = stablehlo.iota dim = 0 : tensor<6x6xi32>
  %causal = stablehlo.compare GE, %jo, %io, SIGNED : (tensor<6x6xi32>, tensor<6x6xi32>) -> tensor<6x6xi1>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<6x6xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<6x6xf32>
  %mask = stablehlo.select %causal, %zero, %ninf : tensor<6x6xi1>, tensor<6x6xf32>
  return %m, %hd, %sel, %fin, %mask : tensor<3x4x5xbf16>, tensor<3x4x5xf16>, tensor<60xf32>, tensor<3x4x5xi1>, tensor<6x6xf32>
}
)",
      // Few long rows and few long columns: split over several blocks, two reductions each.
      R"(
func.func @main(%x: tensor<2x30000xf32>, %c: tensor<600x40xf32>) -> (tensor<2xf32>, tensor<40xf32>, tensor<600x40xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %e = stablehlo.exponential %x : tensor<2x30000xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<2x30000xf32>, tensor<f32>) -> tensor<2xf32>
  %mx = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<2x30000xf32>, tensor<f32>) -> tensor<2xf32>
  %l = stablehlo.log %s : tensor<2xf32>
  %lm = stablehlo.subtract %l, %mx : tensor<2xf32>
  %cc = stablehlo.multiply %c, %c : tensor<600x40xf32>
  %cs = stablehlo.reduce(%cc init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<600x40xf32>, tensor<f32>) -> tensor<40xf32>
  %cm = stablehlo.reduce(%c init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<600x40xf32>, tensor<f32>) -> tensor<40xf32>
  %q = stablehlo.sqrt %cs : tensor<40xf32>
  %qm = stablehlo.add %q, %cm : tensor<40xf32>
  return %lm, %qm, %cc : tensor<2xf32>, tensor<40xf32>, tensor<600x40xf32>
}
)",
      // Integers, booleans and f64.
      R"(
func.func @main(%a: tensor<7x9xi32>, %b: tensor<7x9xi32>, %u: tensor<63xui8>, %p: tensor<7x9xi1>, %d: tensor<7x9xf64>, %e: tensor<7x9xf64>) -> (tensor<7x9xi32>, tensor<63xui8>, tensor<7x9xi1>, tensor<7x9xf64>) {
  %sh = stablehlo.shift_left %a, %b : tensor<7x9xi32>
  %r = stablehlo.remainder %sh, %b : tensor<7x9xi32>
  %pc = stablehlo.popcnt %r : tensor<7x9xi32>
  %q = stablehlo.divide %pc, %b : tensor<7x9xi32>
  %ur = stablehlo.reshape %q : (tensor<7x9xi32>) -> tensor<63xi32>
  %uc = stablehlo.convert %ur : (tensor<63xi32>) -> tensor<63xui8>
  %us = stablehlo.add %uc, %u : tensor<63xui8>
  %ne = stablehlo.compare NE, %a, %b, SIGNED : (tensor<7x9xi32>, tensor<7x9xi32>) -> tensor<7x9xi1>
  %np = stablehlo.not %p : tensor<7x9xi1>
  %x = stablehlo.xor %ne, %np : tensor<7x9xi1>
  %pw = stablehlo.power %d, %e : tensor<7x9xf64>
  %l1 = stablehlo.log_plus_one %pw : tensor<7x9xf64>
  %rp = stablehlo.reduce_precision %l1, format = e5m10 : tensor<7x9xf64>
  return %q, %us, %x, %rp : tensor<7x9xi32>, tensor<63xui8>, tensor<7x9xi1>, tensor<7x9xf64>
}
)",
  };
}

}  // namespace cujax::testutil
