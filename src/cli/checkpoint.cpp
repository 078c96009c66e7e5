#include "cli/checkpoint.h"

#include <charconv>
#include <cmath>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <type_traits>

#include "cli/args.h"
#include "cujax/checkpoint.h"

namespace cujax::cli {

namespace {

constexpr int64_t kSmall = 16;  // leaves this small print their values

std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// The leaf's values as text (all of them), or its min/max/mean/sum.
std::string describe_values(const HostTensor& t, bool all) {
  const DType d = t.dtype();
  if (is_narrow(d)) return "(values of " + std::string(numpy_name(d)) + " not shown)";
  std::string out;
  visit_dtype_with_complex(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data_as<T>();
    const int64_t n = t.size();
    if constexpr (std::is_same_v<T, std::complex<float>> ||
                  std::is_same_v<T, std::complex<double>>) {
      if (!all && n > kSmall) {
        out = "(" + std::to_string(n) + " complex values; --values prints them)";
        return;
      }
      out = "[";
      for (int64_t i = 0; i < n; ++i)
        out += (i ? ", " : "") + number(p[i].real()) + (p[i].imag() < 0 ? "" : "+") +
               number(p[i].imag()) + "j";
      out += "]";
    } else {
      if (all || n <= kSmall) {
        out = "[";
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, bool>)
            out += std::string(i ? ", " : "") + (p[i] ? "True" : "False");
          else if constexpr (std::is_integral_v<T>)
            out += (i ? ", " : "") + std::to_string(p[i]);
          else
            out += (i ? ", " : "") + number(static_cast<double>(p[i]));
        }
        out += "]";
        return;
      }
      double mn = INFINITY, mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(p[i]);
        mn = std::min(mn, v);
        mx = std::max(mx, v);
        sum += v;
      }
      out = "min " + number(mn) + " max " + number(mx) + " mean " + number(sum / n) + " sum " +
            number(sum);
    }
  });
  return out;
}

int show(const std::string& path, bool values) {
  const checkpoint::LoadedCheckpoint ckpt = checkpoint::load_any(path);
  std::printf("%s: %s, %zu leaves\n", path.c_str(), ckpt.format.c_str(), ckpt.leaves.size());
  for (const auto& leaf : ckpt.leaves) {
    const HostTensor& t = leaf.value;
    std::printf("%s  %s%s  %s\n", leaf.path.c_str(), std::string(numpy_name(t.dtype())).c_str(),
                shape_to_string(t.shape()).c_str(), describe_values(t, values).c_str());
  }
  return 0;
}

}  // namespace

int checkpoint_command(const std::vector<std::string>& argv) {
  const Args args(
      {"checkpoint",
       "show every leaf of a checkpoint (Orbax OCDBT or zarr, zarr v2 or v3, "
       "composite; Flax msgpack, legacy Orbax, t5x; safetensors), or convert it",
       {{"values", "", "show: print every value, not only min/max/mean/sum of large leaves"},
        {"to", "FORMAT", "convert: ocdbt, zarr, safetensors or msgpack"}},
       "show PATH | convert SRC DST",
       "the action and the checkpoint folders or files"},
      argv);
  const auto& pos = args.positional();
  const char* usage =
      "usage: cujax checkpoint show PATH [--values] | cujax checkpoint convert SRC DST --to "
      "ocdbt|zarr|safetensors|msgpack";
  if (pos.empty()) throw UsageError(usage);
  if (pos[0] == "show") {
    if (pos.size() != 2 || args.has("to")) throw UsageError("checkpoint show takes one PATH");
    return show(pos[1], args.flag("values"));
  }
  if (pos[0] != "convert") throw UsageError(usage);
  if (pos.size() != 3 || args.flag("values"))
    throw UsageError("checkpoint convert takes SRC DST --to FORMAT");
  const std::string to = args.string("to", "");
  if (to != "ocdbt" && to != "zarr" && to != "safetensors" && to != "msgpack")
    throw UsageError("checkpoint convert: --to must be ocdbt, zarr, safetensors or msgpack");
  if (std::filesystem::exists(pos[2]))
    throw UsageError("checkpoint convert: " + pos[2] + " already exists");
  checkpoint::convert(pos[1], pos[2], to);
  return 0;
}

}  // namespace cujax::cli
