// lax.linalg lowered for cuda (label `cuda-nogpu`: no GPU needed, every build): the custom calls
// name JAX's cuSOLVER/cuSPARSE targets with the backend_config, layouts and types of JAX's own
// cuda exports (shared/interop/jax-backcompat/cases/cuda_*), and the cuda-lowered programs run
// on the cpu backend (which runs those targets on the host) to the results of the LAPACK
// lowering, gradients and vmap included.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/linalg.h"
#include "cujax/linalg_platform.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
namespace jnp = cujax::numpy;
namespace ll = cujax::lax::linalg;

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

// One custom call as its target, backend_config, layouts and types print.
struct Call {
  std::string target, config, operand_layouts, result_layouts, types;
  std::vector<ShapeDtype> operands;  // not compared: what to lower cujax's function for
  bool operator==(const Call& o) const {
    return target == o.target && config == o.config && operand_layouts == o.operand_layouts &&
           result_layouts == o.result_layouts && types == o.types;
  }
};
std::ostream& operator<<(std::ostream& os, const Call& c) {
  return os << "@" << c.target << " config " << c.config << " operands " << c.operand_layouts
            << " results " << c.result_layouts << " types " << c.types;
}

std::string attr_text(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attr(name);
  return a ? ir::print_attribute(*a) : "-";
}

void collect(const ir::Block& block, std::vector<Call>& out) {
  for (const auto& op : block.ops) {
    if (op->name == "stablehlo.custom_call") {
      Call c;
      c.target = attr_text(*op, "call_target_name");
      c.config = attr_text(*op, "mhlo.backend_config");
      c.operand_layouts = attr_text(*op, "operand_layouts");
      c.result_layouts = attr_text(*op, "result_layouts");
      for (const ir::Value* v : op->operands) {
        c.types += ir::print_type(v->type) + " ";
        c.operands.push_back({v->type.shape, v->type.dtype});
      }
      c.types += "->";
      for (size_t i = 0; i < op->num_results(); ++i)
        c.types += " " + ir::print_type(op->result(i)->type);
      out.push_back(c);
    }
    for (const auto& region : op->regions)
      for (const auto& b : region->blocks) collect(*b, out);
  }
}

std::vector<Call> calls_of(const std::string& text) {
  const auto module = ir::parse_module(text);
  std::vector<Call> out;
  for (const auto& f : module->functions)
    for (const auto& b : f->body.blocks) collect(*b, out);
  return out;
}

// The calls of f lowered for cuda with arguments of these types.
std::vector<Call> cuda_calls(
    const std::function<std::string(const std::vector<ShapeDtype>&)>& lower,
    const std::vector<ShapeDtype>& args) {
  ll::LoweringPlatform cuda("cuda");
  return calls_of(lower(args));
}

TEST(LinalgCudaLowering, CallsMatchJaxCudaExports) {
  const fs::path cases = fs::path(shared_dir()) / "interop/jax-backcompat/cases";
  if (!fs::is_directory(cases)) GTEST_SKIP() << cases << " not found (set CUJAX_SHARED_DIR)";
  using Lower = std::function<std::string(const std::vector<ShapeDtype>&)>;
  const auto one = [](auto f) -> Lower {
    return [f](const std::vector<ShapeDtype>& a) { return jit(f).lower(a[0]).as_text(); };
  };
  struct Case {
    std::string prefix;  // case folders starting with this, every dtype
    Lower lower;
  };
  const std::vector<Case> table = {
      {"cuda_cholesky_solver_potrf", one([](const Array& x) { return ll::cholesky(x); })},
      {"cuda_eigh_cusolver_syev", one([](const Array& x) { return ll::eigh(x).first; })},
      {"cuda_lu_cusolver_getrf", one([](const Array& x) { return std::get<0>(ll::lu(x)); })},
      {"cuda_lu_pivots_to_permutation",
       one([](const Array& p) { return ll::lu_pivots_to_permutation(p, 8); })},
      {"cuda_qr_cusolver_geqrf", one([](const Array& x) { return ll::qr(x).first; })},
      {"cuda_svd_cusolver_gesvd__data_2024_10_08__jacobi",
       one([](const Array& x) { return ll::svd(x).s; })},
      {"cuda_tridiagonal_cusolver_sytrd", one([](const Array& x) { return ll::tridiagonal(x).d; })},
      {"cuda_tridiagonal_solve",
       [](const std::vector<ShapeDtype>& a) {
         return jit([](const Array& dl, const Array& d, const Array& du, const Array& b) {
                  return ll::tridiagonal_solve(dl, d, du, b);
                })
             .lower(a[0], a[1], a[2], a[3])
             .as_text();
       }},
  };
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(cases)) {
    const std::string name = entry.path().filename().string();
    for (const Case& c : table) {
      if (name.rfind(c.prefix, 0) != 0) continue;
      SCOPED_TRACE(name);
      const std::string text = read_file(entry.path() / "module.mlir");
      const std::vector<Call> jax = calls_of(text);
      ASSERT_FALSE(jax.empty());
      // JAX's programs compute their inputs as constants: cujax's function is lowered for the
      // operands of JAX's first call.
      const std::vector<Call> ours = cuda_calls(c.lower, jax[0].operands);
      for (const Call& want : jax) {
        bool found = false;
        for (const Call& got : ours) found = found || got == want;
        EXPECT_TRUE(found) << "JAX's call " << want << " is not among cujax's:\n"
                           << ::testing::PrintToString(ours);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18) << "the number of JAX's cuda calls found under " << cases;
}

TEST(LinalgCudaLowering, ScopeChoosesTheTargets) {
  auto f = jit([](const Array& a) { return ll::cholesky(a); });
  std::string cpu_text, cuda_text;
  {
    ll::LoweringPlatform cpu("cpu");
    EXPECT_EQ(ll::lowering_platform(), "cpu");
    cpu_text = f.lower(ShapeDtype{{3, 3}, DType::F64}).as_text();
    {
      ll::LoweringPlatform cuda("cuda");
      EXPECT_EQ(ll::lowering_platform(), "cuda");
      cuda_text = jit([](const Array& a) { return ll::cholesky(a); })
                      .lower(ShapeDtype{{3, 3}, DType::F64})
                      .as_text();
    }
    EXPECT_EQ(ll::lowering_platform(), "cpu");
  }
  EXPECT_NE(cpu_text.find("@lapack_dpotrf_ffi"), std::string::npos) << cpu_text;
  EXPECT_NE(cuda_text.find("@cusolver_potrf_ffi"), std::string::npos) << cuda_text;
  EXPECT_NE(cuda_text.find("mhlo.backend_config = {lower = true}"), std::string::npos) << cuda_text;
  EXPECT_THROW(ll::LoweringPlatform("rocm"), Error);
}

// Uniform entries in [-1, 1) of `dtype` (both parts for complex dtypes).
Array random(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> re(static_cast<size_t>(num_elements(shape))), im(re.size());
  for (size_t i = 0; i < re.size(); ++i) re[i] = u(rng), im[i] = u(rng);
  const DType real = complex_component(dtype);
  const Array r = jnp::array(re, shape, real);
  if (!is_complex(dtype)) return r;
  return lax::complex(r, jnp::array(im, shape, real));
}

double max_abs_diff(const Array& a, const Array& b) {
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.dtype(), b.dtype());
  const Array d = jnp::astype(jnp::abs(jnp::subtract(a, b)), DType::F64);
  double m = 0;
  for (double v : d.to_vector<double>()) m = std::isnan(v) ? INFINITY : std::max(m, v);
  return m;
}

double tol(DType t) {
  return t == DType::F32 || t == DType::C64 ? 2e-4 : 1e-10;
}

// Runs f (eagerly, on the cpu backend) lowered for each platform; the results must agree.
void expect_same(const std::string& what, DType t, const std::function<std::vector<Array>()>& f) {
  std::vector<Array> lapack, cusolver;
  {
    ll::LoweringPlatform cpu("cpu");
    lapack = f();
  }
  {
    ll::LoweringPlatform cuda("cuda");
    cusolver = f();
  }
  ASSERT_EQ(lapack.size(), cusolver.size()) << what;
  for (size_t i = 0; i < lapack.size(); ++i)
    EXPECT_LT(max_abs_diff(cusolver[i], lapack[i]), tol(t))
        << what << " " << numpy_name(t) << " result " << i;
}

// The Hermitian positive definite a a^H + n I of a.
Array hpd(const Array& a) {
  const Array ah = jnp::conj(jnp::swapaxes(a, -1, -2));
  const int64_t n = a.shape().back();
  return jnp::add(jnp::matmul(a, ah),
                  jnp::astype(jnp::multiply(jnp::eye(n), double(n)), a.dtype()));
}

TEST(LinalgCudaLowering, RunsOnTheCpuBackendAsTheLapackLowering) {
  for (DType t : {DType::F32, DType::F64, DType::C64, DType::C128}) {
    const Array sq = random({2, 4, 4}, t, 1), tall = random({2, 5, 3}, t, 2);
    const Array wide = random({2, 3, 5}, t, 3);
    expect_same("cholesky", t, [&] { return std::vector<Array>{ll::cholesky(hpd(sq))}; });
    for (const Array& x : {sq, tall, wide}) {
      expect_same("lu", t, [&] {
        auto [lu, piv, perm] = ll::lu(x);
        return std::vector<Array>{lu, piv, perm};
      });
      for (bool full : {true, false}) {
        expect_same("qr", t, [&] {
          auto [q, r] = ll::qr(x, full);
          return std::vector<Array>{jnp::matmul(q, r), jnp::abs(r)};
        });
        // Singular vectors are unique up to phases: compare s and the reconstruction.
        expect_same("svd", t, [&] {
          const ll::SvdResult r = ll::svd(x, full);
          const int64_t k = r.s.shape().back();
          const Array u = jnp::take(r.u, jnp::arange(k), -1);
          const Array vh = jnp::take(r.vh, jnp::arange(k), -2);
          const Array us = jnp::multiply(u, jnp::astype(jnp::expand_dims(r.s, -2), t));
          return std::vector<Array>{r.s, jnp::matmul(us, vh)};
        });
      }
      expect_same("svd values", t, [&] { return std::vector<Array>{ll::svd(x, false, false).s}; });
    }
    for (bool lower : {true, false}) {
      expect_same("eigh", t, [&] {
        auto [v, w] = ll::eigh(hpd(sq), lower, false);
        const Array vw = jnp::multiply(v, jnp::astype(jnp::expand_dims(w, -2), t));
        return std::vector<Array>{w, jnp::matmul(vw, jnp::conj(jnp::swapaxes(v, -1, -2)))};
      });
      expect_same("tridiagonal", t, [&] {
        const ll::TridiagonalResult r = ll::tridiagonal(hpd(sq), lower);
        return std::vector<Array>{r.d, jnp::abs(r.e)};
      });
    }
    expect_same("tridiagonal_solve", t, [&] {
      const Array d = jnp::add(random({2, 6}, t, 4), jnp::astype(jnp::full({2, 6}, 4.0), t));
      return std::vector<Array>{ll::tridiagonal_solve(random({2, 6}, t, 5), d, random({2, 6}, t, 6),
                                                      random({2, 6, 3}, t, 7))};
    });
  }
}

TEST(LinalgCudaLowering, GradAndVmapMatchTheLapackLowering) {
  for (DType t : {DType::F32, DType::F64}) {
    const Array sq = random({4, 4}, t, 11), tall = random({5, 3}, t, 12);
    const Array w = random({4, 4}, t, 13);
    const auto weighted = [w](const Array& y) { return jnp::sum(jnp::multiply(y, w)); };
    expect_same("grad cholesky", t, [&] {
      return std::vector<Array>{
          grad([&](const Array& x) { return weighted(ll::cholesky(hpd(x))); })(sq)};
    });
    expect_same("grad eigh", t, [&] {
      return std::vector<Array>{grad([&](const Array& x) {
        auto [v, e] = ll::eigh(hpd(x));
        return jnp::add(jnp::sum(jnp::multiply(e, jnp::arange(4, t))), jnp::sum(jnp::abs(v)));
      })(sq)};
    });
    expect_same("grad lu", t, [&] {
      return std::vector<Array>{
          grad([&](const Array& x) { return weighted(std::get<0>(ll::lu(x))); })(sq)};
    });
    for (bool full : {true, false})
      expect_same("grad svd", t, [&] {
        return std::vector<Array>{grad([&](const Array& x) {
          // Full matrices are differentiable when square only (as in JAX).
          const ll::SvdResult r = ll::svd(x, full);
          const int64_t k = r.s.shape().back();
          return jnp::add(jnp::sum(jnp::multiply(r.s, jnp::arange(k, t))),
                          jnp::sum(jnp::abs(jnp::matmul(
                              r.u, jnp::matmul(jnp::eye(k, std::nullopt, 0, t), r.vh)))));
        })(full ? sq : tall)};
      });
    expect_same("grad tridiagonal_solve", t, [&] {
      const Array dl = random({5}, t, 14), du = random({5}, t, 15), b = random({5, 2}, t, 16);
      return std::vector<Array>{grad([&](const Array& d) {
        return jnp::sum(ll::tridiagonal_solve(dl, d, du, b));
      })(jnp::add(random({5}, t, 17), jnp::astype(jnp::full({5}, 4.0), t)))};
    });
    const Array batch = random({3, 4, 4}, t, 18);
    expect_same("vmap", t, [&] {
      const auto f = [](const Array& x) {
        auto [lu, piv, perm] = ll::lu(x);
        return jnp::add(jnp::sum(ll::cholesky(hpd(x))), jnp::sum(jnp::multiply(lu, lu)));
      };
      return std::vector<Array>{vmap(f)(batch),
                                vmap([](const Array& x) { return std::get<2>(ll::lu(x)); })(batch)};
    });
  }
}

}  // namespace
}  // namespace cujax
