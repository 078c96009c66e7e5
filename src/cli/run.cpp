#include "cli/run.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/args.h"
#include "cujax/core/dynamic_shape.h"
#include "cujax/core/npy.h"
#include "cujax/export.h"
#include "cujax/ir/bytecode.h"
#include "cujax/runtime/spmd.h"

namespace cujax::cli {

namespace {

constexpr const char* kRunUsage =
    "usage: cujax run FILE [--input X.npy]... [--output OUT.npy]... [--print] [--platform P] "
    "[--lowering-platform P]";

// FILE as an Exported: a cujax artifact, jax.export's Exported.serialize() bytes (a flatbuffer
// that verifies as one), or a bare module (a StableHLO portable artifact,
// recognised by MLIR bytecode's magic, or StableHLO text) whose @main takes the --input files
// in order, as JAX's backward-compatibility runner calls it.
Exported load_any(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read exported artifact: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.rfind("cujax-exported ", 0) == 0) return Exported::deserialize(bytes, path);
  const bool bytecode = ir::is_bytecode(bytes);
  if (!bytecode && jax_export::is_serialized(bytes)) return Exported::deserialize(bytes, path);
  if (!bytecode && bytes.find("func.func") == std::string::npos)
    return Exported::deserialize(bytes, path);  // its message says what FILE is not
  return Exported::from_module(bytes, path);
}

std::string leaf_list(const std::vector<ExportedLeaf>& leaves) {
  std::string s;
  for (size_t i = 0; i < leaves.size(); ++i)
    s += (i ? ", " : "") + leaves[i].path + " " + leaves[i].aval.str();
  return s.empty() ? "none" : s;
}

// One line per output: type, range, mean and the first values.
void print_summary(const std::string& path, const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data_as<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
        v[i] = static_cast<double>(static_cast<float>(p[i]));
      else
        v[i] = static_cast<double>(p[i]);
    }
  });
  std::printf("%s %s", path.c_str(), t.type_string().c_str());
  if (!v.empty()) {
    double sum = 0;
    for (double x : v) sum += x;
    std::printf(" min %.6g max %.6g mean %.6g [", *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()), sum / static_cast<double>(v.size()));
    const size_t shown = std::min<size_t>(v.size(), 8);
    for (size_t i = 0; i < shown; ++i) std::printf("%s%.6g", i ? ", " : "", v[i]);
    std::printf("%s]", shown < v.size() ? ", ..." : "");
  }
  std::printf("\n");
}

// Error messages go on one line.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// Everything before the run: the arguments, the artifact, the inputs checked against it.
struct Prepared {
  std::string file;
  std::vector<std::string> outputs;
  bool print = false;
  std::optional<Exported> exported;
  std::vector<Array> inputs;
};

Prepared prepare(const std::vector<std::string>& argv) {
  const Args args({"run",
                   "run an exported artifact on .npy inputs (docs/export.md)",
                   {{"input", "X.npy", "one per input of the artifact, in its order"},
                    {"output", "OUT.npy", "one per output of the artifact, in its order"},
                    {"print", "", "print each output's type, range, mean and first values"},
                    {"lowering-platform", "P",
                     "a jax.export lowered for several platforms: run the lowering for P (one "
                     "it lists, e.g. cuda) on the backend at hand"},
                    platform_option()},
                   "FILE",
                   "a cujax artifact (cujax export), jax.export's Exported.serialize() bytes, a "
                   "StableHLO portable artifact (.mlirbc) or StableHLO text whose @main takes the "
                   "inputs"},
                  argv);
  Prepared p;
  const std::vector<std::string> inputs = args.all("input");
  p.outputs = args.all("output");
  p.print = args.flag("print");
  if (args.positional().empty()) throw Error(std::string("no artifact FILE given; ") + kRunUsage);
  if (args.positional().size() > 1)
    throw Error("one artifact FILE only (also got " + args.positional()[1] + ")");
  p.file = args.positional()[0];
  if (p.outputs.empty() && !p.print)
    throw Error("nothing to do: give --output OUT.npy per output, or --print");
  const std::string backend = use_platform(args);
  p.exported = load_any(p.file);
  // An export for several devices runs on that many: on the cpu backend, virtual devices, unless
  // the environment names a count (a smaller one is then refused by the compile, naming it).
  if (p.exported->nr_devices() > 1 && !runtime::cpu_devices_from_environment())
    runtime::set_num_cpu_devices(p.exported->nr_devices());
  const auto& in = p.exported->in_leaves();
  const auto& out = p.exported->out_leaves();
  if (inputs.size() != in.size())
    throw Error(p.file + " takes " + std::to_string(in.size()) + " inputs (" + leaf_list(in) +
                "), got " + std::to_string(inputs.size()) + " --input");
  if (!p.outputs.empty() && p.outputs.size() != out.size())
    throw Error(p.file + " has " + std::to_string(out.size()) + " outputs (" + leaf_list(out) +
                "), got " + std::to_string(p.outputs.size()) + " --output; give one per output");
  for (size_t i = 0; i < inputs.size(); ++i) {
    HostTensor t = load_npy(inputs[i]);
    if (!shape_fits(t.shape(), in[i].aval.shape) || t.dtype() != in[i].aval.dtype)
      throw Error(inputs[i] + " is " + t.type_string() + ", but input " + in[i].path + " of " +
                  p.file + " is " + in[i].aval.str());
    p.inputs.push_back(array(t));
  }
  // An artifact for another platform, or one the backend cannot compile, is bad input too.
  // Without --platform, an artifact not for the default backend runs on another it lists.
  const std::string platform = args.has("platform") ? backend : "";
  if (args.has("lowering-platform"))
    p.exported->compile_lowering(args.string("lowering-platform", ""), platform);
  else
    p.exported->compile(platform);
  return p;
}

int bad_input(const std::exception& e) {
  std::fprintf(stderr, "cujax run: %s\n", one_line(e.what()).c_str());
  return 2;
}

}  // namespace

int run_artifact(const std::vector<std::string>& args) {
  Prepared p;
  try {
    p = prepare(args);
  } catch (const HelpRequested&) {
    throw;
  } catch (const std::exception& e) {
    return bad_input(e);
  }
  // A failure while running is not bad input: it reaches main (exit code 1).
  std::vector<HostTensor> results;
  for (const Array& r : p.exported->call_flat(p.inputs)) results.push_back(r.to_host());
  try {
    for (size_t i = 0; i < results.size(); ++i) {
      if (i < p.outputs.size()) save_npy(p.outputs[i], results[i]);
      if (p.print) print_summary(p.exported->out_leaves()[i].path, results[i]);
    }
  } catch (const std::exception& e) {
    return bad_input(e);
  }
  return 0;
}

}  // namespace cujax::cli
