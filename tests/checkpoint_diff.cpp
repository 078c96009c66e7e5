// checkpoint_diff A B TOL: compares two checkpoints parameter by parameter; prints the largest
// difference |a - b| / max(1, |b|) and the parameter where it is, and exits 0 when it is at most
// TOL (1 on a larger difference or different parameters, 2 on bad arguments).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cujax/checkpoint.h"
#include "cujax/numpy.h"

using namespace cujax;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: checkpoint_diff A B TOL\n");
    return 2;
  }
  const checkpoint::StandardCheckpointer ckpt;
  try {
    const auto meta_a = ckpt.metadata(argv[1]), meta_b = ckpt.metadata(argv[2]);
    if (meta_a != meta_b) {
      std::printf("the checkpoints hold different parameters, shapes or dtypes\n");
      return 1;
    }
    State target;
    for (const auto& [path, aval] : meta_a) target.set(path, numpy::zeros(aval.shape, aval.dtype));
    const State a = ckpt.restore(argv[1], target), b = ckpt.restore(argv[2], target);
    double worst = 0;
    std::string where = "(none)";
    for (const auto& [path, x] : a) {
      const auto u = numpy::astype(x, DType::F64).to_vector<double>();
      const auto v = numpy::astype(b.at(path), DType::F64).to_vector<double>();
      for (size_t i = 0; i < u.size(); ++i) {
        const double d = std::abs(u[i] - v[i]) / std::max(1.0, std::abs(v[i]));
        if (!(d <= worst)) {  // NaN counts as the worst
          worst = d;
          where = path + "[" + std::to_string(i) + "]";
        }
      }
    }
    std::printf("largest difference %.3g at %s (%zu parameters)\n", worst, where.c_str(),
                meta_a.size());
    return worst <= std::atof(argv[3]) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_diff: %s\n", e.what());
    return 2;
  }
}
