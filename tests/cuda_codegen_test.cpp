// The CUDA code generator without a GPU (label `cuda-nogpu`; CUDA builds only):
//  - every kernel generated for the conformance programs, the tiny config's training and eval
//    steps and the programs of fusion_programs.h compiles with NVRTC for sm_80 and sm_90;
//  - the kernel cache: a second start compiles nothing, the architecture is part of the key;
//  - the generated arithmetic: the same generated source, compiled by the host compiler over an
//    emulated thread grid (codegen_emu/cuda_emu.h), against the CPU backend on random inputs, for
//    the fusions of fusion_programs.h, a small transformer's steps and the conformance programs.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "backends/common/elementwise.h"
#include "backends/cuda/codegen/emitter.h"
#include "backends/cuda/codegen/fused.h"
#include "backends/cuda/codegen/kernel_cache.h"
#include "backends/cuda/codegen/nvrtc.h"
#include "backends/cuda/program.h"
#include "compiler/chlo_decompose.h"
#include "compiler/fusion.h"
#include "compiler/outline.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"
#include "fusion_programs.h"
#include "lowered_steps.h"
#include "test_models.h"

namespace cujax {
namespace {

namespace cg = cuda::codegen;
namespace fs = std::filesystem;
using Kernels = std::vector<std::shared_ptr<const cg::FusionKernel>>;

fs::path conformance_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return fs::path(env ? env : CUJAX_DEFAULT_SHARED_DIR) / "conformance" / "stablehlo-testdata";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The generated kernels of `module`'s main as the cuda backend compiles it without a device.
Kernels program_kernels(const ir::Module& module) {
  return cuda::fusion_kernels(*cuda::compile_program(module, *module.lookup("main"), nullptr));
}

void add_unique(Kernels& all, std::set<std::string>& seen, const Kernels& more) {
  for (const auto& k : more)
    if (seen.insert(k->name).second) all.push_back(k);
}

fs::path temp_dir(const std::string& tag) {
  std::string templ = (fs::temp_directory_path() / ("cujax-" + tag + "-XXXXXX")).string();
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

// One kernel to check: the generated code and the group outlined for the CPU backend.
struct Check {
  std::shared_ptr<const cg::FusionKernel> kernel;
  std::unique_ptr<ir::Module> reference;
  bool exact = true;  // loops give the CPU backend's bits; float sums differ by their order
  std::string origin;
};

void add_checks(const ir::Module& module, const std::string& origin, std::set<std::string>& seen,
                std::vector<Check>& checks) {
  const ir::Block& block = module.lookup("main")->entry();
  const compiler::FusionPlan plan = compiler::plan_fusion(block, block.ops.size() - 1);
  for (const compiler::FusionGroup& g : plan.groups) {
    auto kernel = std::make_shared<const cg::FusionKernel>(cg::emit_fusion(block, g));
    if (!seen.insert(kernel->name).second) continue;
    Check c;
    c.kernel = kernel;
    c.reference = std::make_unique<ir::Module>();
    compiler::outline_group(*c.reference, "main", block, g).visibility = "public";
    for (size_t h : g.heroes) {
      const ir::Operation& hero = *block.ops[h];
      const std::string body = compiler::reduction_body(hero);
      c.exact = c.exact && (!is_float(hero.result(0)->type.dtype) || body == "stablehlo.maximum" ||
                            body == "stablehlo.minimum");
    }
    c.origin = origin + ": " + kernel->description;
    checks.push_back(std::move(c));
  }
}

// Same bits (any NaN matches any NaN), or within the tolerance of a reordered float sum.
void expect_close(const HostTensor& got, const HostTensor& want, bool exact,
                  const std::string& what) {
  ASSERT_EQ(got.type_string(), want.type_string()) << what;
  if (!is_float(want.dtype()) || exact) {
    int bad = 0;
    const size_t w = size_of(want.dtype());
    for (int64_t i = 0; i < want.size() && bad < 5; ++i) {
      const auto* a = static_cast<const unsigned char*>(got.data()) + i * w;
      const auto* b = static_cast<const unsigned char*>(want.data()) + i * w;
      if (std::memcmp(a, b, w) == 0) continue;
      if (is_float(want.dtype())) {
        const double x = visit_dtype(got.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          return ew::convert<double>(got.data_as<T>()[i]);
        });
        const double y = visit_dtype(want.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          return ew::convert<double>(want.data_as<T>()[i]);
        });
        if (std::isnan(x) && std::isnan(y)) continue;
        ADD_FAILURE() << what << ": element " << i << " is " << x << ", the CPU backend has " << y;
      } else {
        ADD_FAILURE() << what << ": element " << i << " has other bits than the CPU backend's";
      }
      ++bad;
    }
    return;
  }
  const double tol = want.dtype() == DType::F64   ? 1e-10
                     : want.dtype() == DType::F32 ? 1e-4
                     : want.dtype() == DType::F16 ? 1e-2
                                                  : 4e-2;
  int bad = 0;
  for (int64_t i = 0; i < want.size() && bad < 5; ++i) {
    const double x = visit_dtype(got.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      return ew::convert<double>(got.data_as<T>()[i]);
    });
    const double y = visit_dtype(want.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      return ew::convert<double>(want.data_as<T>()[i]);
    });
    if ((std::isnan(x) && std::isnan(y)) || x == y || std::fabs(x - y) <= tol * (1 + std::fabs(y)))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << x << ", the CPU backend has " << y;
    ++bad;
  }
}

// Compiles the kernels' sources with the host compiler into one shared library with an entry
// emu_<name>(void** args) per kernel that runs it over its emulated grid.
void* build_emulation(const std::vector<Check>& checks, const fs::path& dir) {
  std::ofstream src(dir / "kernels.cpp");
  for (const Check& c : checks) src << c.kernel->source << "\n";
  for (const Check& c : checks) {
    const cg::FusionKernel& k = *c.kernel;
    src << "extern \"C\" void emu_" << k.name << "(void* const* a) {\n"
        << "  cujax_emu::launch(" << k.grid << ", " << k.block << ", [&] { " << k.name << "(";
    for (size_t i = 0; i < k.params.size(); ++i)
      src << (i ? ", " : "") << "static_cast<" << (k.params[i].output ? "" : "const ")
          << cg::c_type(k.params[i].dtype) << "*>(a[" << i << "])";
    if (k.scratch_slots > 0)
      src << ", static_cast<unsigned long long*>(a[" << k.params.size()
          << "]), static_cast<unsigned*>(a[" << k.params.size() + 1 << "])";
    src << "); });\n}\n";
  }
  src.close();
  const std::string root = CUJAX_SOURCE_DIR;
  const std::string cmd = std::string(CUJAX_HOST_CXX) +
                          " -std=c++20 -O0 -fPIC -shared -w -ffp-contract=off -fno-strict-aliasing"
                          " -I" +
                          root + "/src -I" + root + "/include -include " + root +
                          "/tests/codegen_emu/cuda_emu.h " + (dir / "kernels.cpp").string() +
                          " -o " + (dir / "kernels.so").string() + " 2> " +
                          (dir / "build.log").string();
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "the host compiler rejects the generated kernels:\n"
                  << read_text(dir / "build.log").substr(0, 4000);
    return nullptr;
  }
  void* lib = dlopen((dir / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) ADD_FAILURE() << dlerror();
  return lib;
}

TEST(CudaCodegen, GeneratedArithmeticMatchesTheCpuBackendOnAnEmulatedGrid) {
  std::vector<std::unique_ptr<ir::Module>> owned;
  std::vector<Check> checks;
  std::set<std::string> seen;
  const auto programs = testutil::fusion_programs();
  for (size_t i = 0; i < programs.size(); ++i) {
    owned.push_back(ir::parse_module(programs[i]));
    add_checks(*owned.back(), "program " + std::to_string(i), seen, checks);
  }
  const auto steps = testutil::lower_steps(testutil::small_transformer(32, 8, 16), 2, 8);
  for (size_t i = 0; i < steps.modules.size(); ++i)
    add_checks(*steps.modules[i], steps.names[i] + " step", seen, checks);
  // The tiny config's widths (128 features, 4 heads, a 256-token vocabulary) on a short batch.
  const auto tiny = testutil::lower_steps(models::tiny_config(), 2, 16);
  for (size_t i = 0; i < tiny.modules.size(); ++i)
    add_checks(*tiny.modules[i], "tiny " + tiny.names[i] + " step", seen, checks);
  // The fusions JAX's own programs give (their decompositions of acos, erf, ... in every type).
  const fs::path conformance = conformance_dir();
  if (fs::is_directory(conformance)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(conformance))
      if (e.path().extension() == ".mlir") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      owned.push_back(ir::parse_module(read_text(f)));
      add_checks(*owned.back(), f.filename().string(), seen, checks);
    }
  }
  // And the expansions of the chlo ops (compiler/chlo_decompose.cpp) in the programs that use
  // them on real types.
  const fs::path ext = conformance.parent_path() / "stablehlo-testdata-ext";
  if (fs::is_directory(ext)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(ext))
      if (e.path().extension() == ".mlir") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string text = read_text(f);
      if (text.find("chlo.") == std::string::npos || text.find("complex<") != std::string::npos)
        continue;
      owned.push_back(compiler::decompose_chlo(*ir::parse_module(text)));
      add_checks(*owned.back(), f.filename().string(), seen, checks);
    }
  }
  std::map<compiler::FusionKind, int> kinds;
  int several_heroes = 0;
  for (const Check& c : checks) {
    ++kinds[c.kernel->kind];
    several_heroes += c.kernel->source.find("partial1") != std::string::npos ||
                      c.kernel->source.find("fold1") != std::string::npos;
  }
  EXPECT_GE(several_heroes, 2) << "sibling reductions in one kernel";
  EXPECT_GT(kinds[compiler::FusionKind::Loop], 10);
  EXPECT_GT(kinds[compiler::FusionKind::RowReduction], 5);
  EXPECT_GT(kinds[compiler::FusionKind::ColumnReduction], 2);

  const fs::path dir = temp_dir("emu");
  const auto t0 = std::chrono::steady_clock::now();
  void* lib = build_emulation(checks, dir);
  ASSERT_NE(lib, nullptr);
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const runtime::Backend& cpu = runtime::get_backend("cpu");
  int splits = 0, in_place = 0;
  for (size_t n = 0; n < checks.size(); ++n) {
    const Check& c = checks[n];
    SCOPED_TRACE(c.origin);
    const ir::Function& fn = *c.reference->lookup("main");
    const std::vector<HostTensor> args = testutil::random_arguments(fn, static_cast<uint32_t>(n));
    const std::vector<HostTensor> want = cpu.compile(*c.reference)->execute_on_host(args);
    std::vector<HostTensor> got;
    std::vector<void*> pointers;
    for (const HostTensor& a : args) pointers.push_back(const_cast<void*>(a.data()));
    for (const cg::KernelParam& p : c.kernel->params) {
      if (!p.output) continue;
      got.push_back(HostTensor::uninitialized(p.dtype, p.shape));
      std::memset(got.back().data(), 0xA5, got.back().nbytes());  // unwritten elements show
    }
    for (HostTensor& g : got) pointers.push_back(g.data());
    std::vector<unsigned long long> scratch(2 * c.kernel->scratch_slots, 0xA5A5A5A5A5A5A5A5ull);
    std::vector<unsigned> counters(c.kernel->counters, 0);
    if (c.kernel->scratch_slots > 0) {
      pointers.push_back(scratch.data());
      pointers.push_back(counters.data());
      ++splits;
    }
    auto fn_ptr =
        reinterpret_cast<void (*)(void* const*)>(dlsym(lib, ("emu_" + c.kernel->name).c_str()));
    ASSERT_NE(fn_ptr, nullptr);
    ASSERT_NO_THROW(fn_ptr(pointers.data()));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(got[i], want[i], c.exact, c.kernel->name + " output " + std::to_string(i));
    // A loop fusion may write its first output into a full-size input's memory (the launcher
    // does so with a donated or dead operand): run it again that way.
    if (c.kernel->kind != compiler::FusionKind::Loop) continue;
    const cg::KernelParam* first_out = nullptr;
    for (const cg::KernelParam& p : c.kernel->params)
      if (p.output && !first_out) first_out = &p;
    for (size_t i = 0; first_out && i < args.size(); ++i) {
      if (args[i].dtype() != first_out->dtype || args[i].size() != num_elements(first_out->shape))
        continue;
      HostTensor shared = args[i].clone();
      std::vector<void*> aliased = pointers;
      aliased[i] = shared.data();
      aliased[args.size()] = shared.data();
      fn_ptr(aliased.data());
      ++in_place;
      expect_close(shared.reshaped(first_out->shape), want[0], c.exact,
                   c.kernel->name + " output 0 written into input " + std::to_string(i));
      break;
    }
  }
  dlclose(lib);
  EXPECT_GE(splits, 2) << "reductions split over several blocks";
  EXPECT_GT(in_place, 10) << "loop fusions run with an output in an input's memory";
  std::cout << splits << " split over several blocks, " << several_heroes
            << " with several reductions; " << checks.size() << " kernels ("
            << kinds[compiler::FusionKind::Loop] << " loops, "
            << kinds[compiler::FusionKind::RowReduction] << " row and "
            << kinds[compiler::FusionKind::ColumnReduction] << " column reductions) checked, "
            << in_place << " loops again in place; host compile " << build_s << " s\n";
  fs::remove_all(dir);
}

TEST(CudaCodegen, IdenticalGroupsShareOneKernelAndShapesAreBakedIn) {
  // Two softmaxes of the same shape: three kernels, each used twice; another shape: three more.
  std::string body, sig, ret, types;
  const char* shapes[] = {"6x40", "6x40", "5x40"};
  for (int k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k), t = std::string("tensor<") + shapes[k] + "xf32>";
    const std::string rows = std::string("tensor<") + std::string(shapes[k]).substr(0, 1) + "xf32>";
    sig += (k ? ", " : "") + std::string("%x") + n + ": " + t;
    ret += (k ? ", " : "") + std::string("%p") + n;
    types += (k ? ", " : "") + t;
    body += "  %m" + n + " = stablehlo.reduce(%x" + n +
            " init: %ninf) applies stablehlo.maximum across dimensions = [1] : (" + t +
            ", tensor<f32>) -> " + rows + "\n  %mb" + n + " = stablehlo.broadcast_in_dim %m" + n +
            ", dims = [0] : (" + rows + ") -> " + t + "\n  %s" + n + " = stablehlo.subtract %x" +
            n + ", %mb" + n + " : " + t + "\n  %e" + n + " = stablehlo.exponential %s" + n + " : " +
            t + "\n  %z" + n + " = stablehlo.reduce(%e" + n +
            " init: %zero) applies stablehlo.add across dimensions = [1] : (" + t +
            ", tensor<f32>) -> " + rows + "\n  %zb" + n + " = stablehlo.broadcast_in_dim %z" + n +
            ", dims = [0] : (" + rows + ") -> " + t + "\n  %p" + n + " = stablehlo.divide %e" + n +
            ", %zb" + n + " : " + t + "\n";
  }
  const auto m = ir::parse_module("func.func @main(" + sig + ") -> (" + types + ") {\n" +
                                  "  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>\n" +
                                  "  %zero = stablehlo.constant dense<0.0> : tensor<f32>\n" + body +
                                  "  return " + ret + " : " + types + "\n}\n");
  const Kernels kernels = program_kernels(*m);
  std::set<std::string> names;
  for (const auto& k : kernels) names.insert(k->name);
  EXPECT_EQ(kernels.size(), 9u);
  EXPECT_EQ(names.size(), 6u);
  for (const auto& k : kernels)
    EXPECT_NE(k->source.find("extern \"C\" __global__ void __launch_bounds__(256) " + k->name),
              std::string::npos);
}

Kernels every_kernel(int* programs) {
  Kernels all;
  std::set<std::string> seen;
  *programs = 0;
  const fs::path dir = conformance_dir();
  if (fs::is_directory(dir)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".mlir") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      try {
        add_unique(all, seen, program_kernels(*ir::parse_module(read_text(f))));
        ++*programs;
      } catch (const Error&) {
        // Programs the backends cannot compile are the conformance suite's business.
      }
    }
  }
  for (const std::string& text : testutil::fusion_programs()) {
    add_unique(all, seen, program_kernels(*ir::parse_module(text)));
    ++*programs;
  }
  const auto steps = testutil::lower_steps(models::tiny_config(), 2, 64);
  for (const auto& m : steps.modules) {
    add_unique(all, seen, program_kernels(*m));
    ++*programs;
  }
  return all;
}

TEST(CudaCodegen, EveryGeneratedKernelCompilesForSm80AndSm90) {
  int programs = 0;
  const Kernels all = every_kernel(&programs);
  ASSERT_GT(all.size(), 20u);
  // One NVRTC program per architecture holds them all (the prelude is parsed once).
  std::string source;
  for (const auto& k : all) source += k->source + "\n";
  for (const char* arch : {"sm_80", "sm_90"}) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string cubin;
    try {
      cubin = cg::compile_cubin(source, arch);
    } catch (const Error& e) {
      // Name the kernels that fail on their own.
      for (const auto& k : all) try {
          cg::compile_cubin(k->source, arch);
        } catch (const Error& ke) {
          ADD_FAILURE() << k->name << " (" << k->description << "): " << ke.what() << "\n"
                        << k->source;
        }
      FAIL() << e.what();
    }
    EXPECT_GT(cubin.size(), all.size() * 100);
    std::cout << all.size() << " kernels of " << programs << " programs compiled for " << arch
              << " in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s\n";
  }
}

TEST(CudaCodegen, ASecondStartCompilesNothing) {
  cg::KernelCache& cache = cg::KernelCache::process();
  const std::string saved = cache.directory();
  const fs::path dir = temp_dir("kernels");
  cache.set_directory(dir.string());
  cache.clear_memory();
  const auto m = ir::parse_module(testutil::kSoftmaxAndNorm);
  Kernels kernels;
  std::set<std::string> seen;
  add_unique(kernels, seen, program_kernels(*m));
  const int64_t before = cg::nvrtc_compile_count();
  cg::compile_all(kernels, "sm_80");
  EXPECT_EQ(cg::nvrtc_compile_count() - before, static_cast<int64_t>(kernels.size()));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".cubin";
  EXPECT_EQ(files, kernels.size());
  // The same process: from memory. A new process (memory cleared): from disk.
  cg::compile_all(kernels, "sm_80");
  cache.clear_memory();
  const cg::CacheStats s0 = cache.stats();
  cg::compile_all(kernels, "sm_80");
  EXPECT_EQ(cg::nvrtc_compile_count() - before, static_cast<int64_t>(kernels.size()));
  EXPECT_EQ(cache.stats().disk_hits - s0.disk_hits, static_cast<int64_t>(kernels.size()));
  // Another architecture is another key.
  cg::compile_all({kernels[0]}, "sm_90");
  EXPECT_EQ(cg::nvrtc_compile_count() - before, static_cast<int64_t>(kernels.size()) + 1);
  cache.set_directory(saved);
  cache.clear_memory();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cujax
