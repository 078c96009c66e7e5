#include "backends/cuda/fft.h"

#include <cufft.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fft_launch.h"
#include "backends/cuda/library.h"

namespace cujax::cuda {

namespace {

// The cuFFT entry points used, resolved once from the soname of the toolkit built against.
struct Fft {
  decltype(&cufftCreate) create = nullptr;
  decltype(&cufftMakePlanMany64) make_plan_many = nullptr;
  decltype(&cufftSetStream) set_stream = nullptr;
  decltype(&cufftExecZ2Z) exec_z2z = nullptr;
  decltype(&cufftExecD2Z) exec_d2z = nullptr;
  decltype(&cufftExecZ2D) exec_z2d = nullptr;
  decltype(&cufftDestroy) destroy = nullptr;
};

const Fft& api() {
  static const Fft fft = [] {
    Library lib("libcufft.so." + std::to_string(CUFFT_VER_MAJOR), "cuFFT, needed for stablehlo.fft",
                "add the CUDA toolkit's lib64 to LD_LIBRARY_PATH");
    Fft a;
    lib.resolve(a.create, "cufftCreate");
    lib.resolve(a.make_plan_many, "cufftMakePlanMany64");
    lib.resolve(a.set_stream, "cufftSetStream");
    lib.resolve(a.exec_z2z, "cufftExecZ2Z");
    lib.resolve(a.exec_d2z, "cufftExecD2Z");
    lib.resolve(a.exec_z2d, "cufftExecZ2D");
    lib.resolve(a.destroy, "cufftDestroy");
    lib.check_resolved();
    return a;
  }();
  return fft;
}

void check_fft(cufftResult r, const char* call, const char* file, int line) {
  if (r != CUFFT_SUCCESS)
    throw_cuda_error(call, "cufftResult " + std::to_string(static_cast<int>(r)), file, line);
}
#define CUJAX_FFT_CHECK(call) check_fft((call), #call, __FILE__, __LINE__)

enum class Kind { Forward, Inverse, Real, InverseReal };  // FFT, IFFT, RFFT, IRFFT

// One batched transform: `rank` lengths over the trailing axes, `batch` of them.
struct Shape3 {
  Kind kind = Kind::Forward;
  int rank = 1;
  std::array<long long, 3> n{};
  long long batch = 1;
  bool operator<(const Shape3& o) const {
    return std::tie(kind, rank, n, batch) < std::tie(o.kind, o.rank, o.n, o.batch);
  }
};

// Plans of one transform shape on one device; never destroyed (a program has a handful of
// shapes), as cuBLASLt's plans are.
std::mutex& plans_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::pair<int, Shape3>, cufftHandle>& plans() {
  static std::map<std::pair<int, Shape3>, cufftHandle> m;
  return m;
}

cufftHandle plan_for(const Fft& f, int device, const Shape3& s) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  const auto key = std::make_pair(device, s);
  auto it = plans().find(key);
  if (it != plans().end()) return it->second;
  const cufftType type = s.kind == Kind::Real          ? CUFFT_D2Z
                         : s.kind == Kind::InverseReal ? CUFFT_Z2D
                                                       : CUFFT_Z2Z;
  cufftHandle h = 0;
  CUJAX_FFT_CHECK(f.create(&h));
  std::array<long long, 3> n = s.n;
  size_t work = 0;
  // Null embeddings: the contiguous layout (for RFFT/IRFFT the complex side's last axis holds
  // n/2+1 entries), which is the row-major layout of the operand and result.
  const cufftResult r =
      f.make_plan_many(h, s.rank, n.data(), nullptr, 1, 0, nullptr, 1, 0, type, s.batch, &work);
  if (r != CUFFT_SUCCESS) {
    f.destroy(h);
    check_fft(r, "cufftMakePlanMany64", __FILE__, __LINE__);
  }
  plans().emplace(key, h);
  return h;
}

}  // namespace

DeviceKernel fft_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const ir::Type a = op.operands[0]->type, r = op.result(0)->type;
  const std::string type(op.enum_attr("fft_type"));
  const std::vector<int64_t> len = op.ints("fft_length");
  // Anything that does not fit returns no kernel: the CPU kernel's factory then names what is
  // wrong.
  Shape3 s;
  if (type == "FFT")
    s.kind = Kind::Forward;
  else if (type == "IFFT")
    s.kind = Kind::Inverse;
  else if (type == "RFFT")
    s.kind = Kind::Real;
  else if (type == "IRFFT")
    s.kind = Kind::InverseReal;
  else
    return {};
  if (len.empty() || len.size() > 3 || a.rank() < static_cast<int64_t>(len.size())) return {};
  s.rank = static_cast<int>(len.size());
  const Shape& full = s.kind == Kind::InverseReal ? r.shape : a.shape;  // the real side's shape
  const size_t lead = full.size() - len.size();
  double count = 1;
  for (size_t i = 0; i < len.size(); ++i) {
    if (len[i] <= 0 || full[lead + i] != len[i]) return {};
    s.n[i] = len[i];
    count *= static_cast<double>(len[i]);
  }
  for (size_t i = 0; i < lead; ++i) s.batch *= full[i];
  const bool complex_in = is_complex(a.dtype), complex_out = is_complex(r.dtype);
  const DType complex_type = complex_in ? a.dtype : r.dtype;
  if (!is_complex(complex_type)) return {};
  Shape half = full;  // the complex side of RFFT and IRFFT
  half.back() = len.back() / 2 + 1;
  const DType component = complex_component(complex_type);
  const bool fits = s.kind == Kind::Real ? !complex_in && a.dtype == component && r.shape == half
                    : s.kind == Kind::InverseReal
                        ? complex_in && r.dtype == component && a.shape == half
                        : complex_in && a == r;
  if (!fits) return {};
  const bool single = complex_type == DType::C64;
  const bool inverse = s.kind == Kind::Inverse || s.kind == Kind::InverseReal;
  const double scale = inverse ? 1.0 / count : 1.0;
  return [d, s, r, single, complex_in, complex_out, scale](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(r.dtype, r.shape);
    const int64_t in_scalars = in[0].size() * (complex_in ? 2 : 1);
    const int64_t out_scalars = out.size() * (complex_out ? 2 : 1);
    if (in_scalars == 0 || out_scalars == 0) return std::vector<DeviceArray>{out};
    const Fft& f = api();
    const cufftHandle plan = plan_for(f, d->ordinal(), s);
    CUJAX_FFT_CHECK(f.set_stream(plan, d->stream()));
    // Double-precision operands: a widened copy for complex64/float32, and for complex128/
    // float64 the operand itself only where this step holds its only reference, since cuFFT
    // may overwrite the input of an out-of-place transform (it always does for IRFFT).
    std::shared_ptr<void> src_copy, dst_copy;
    void* src = const_cast<void*>(in[0].data.get());
    if (single || in[0].data.use_count() > 1) {
      src_copy = d->allocate(static_cast<size_t>(in_scalars) * sizeof(double));
      launch_scale_convert(!single, src, true, src_copy.get(), in_scalars, 1.0, d->stream());
      src = src_copy.get();
    }
    void* dst = out.data.get();
    if (single) {
      dst_copy = d->allocate(static_cast<size_t>(out_scalars) * sizeof(double));
      dst = dst_copy.get();
    }
    auto* z_src = static_cast<cufftDoubleComplex*>(src);
    auto* z_dst = static_cast<cufftDoubleComplex*>(dst);
    switch (s.kind) {
      case Kind::Forward:
        CUJAX_FFT_CHECK(f.exec_z2z(plan, z_src, z_dst, CUFFT_FORWARD));
        break;
      case Kind::Inverse:
        CUJAX_FFT_CHECK(f.exec_z2z(plan, z_src, z_dst, CUFFT_INVERSE));
        break;
      case Kind::Real:
        CUJAX_FFT_CHECK(f.exec_d2z(plan, static_cast<cufftDoubleReal*>(src), z_dst));
        break;
      case Kind::InverseReal:
        CUJAX_FFT_CHECK(f.exec_z2d(plan, z_src, static_cast<cufftDoubleReal*>(dst)));
        break;
    }
    if (single || scale != 1.0)
      launch_scale_convert(true, dst, !single, out.data.get(), out_scalars, scale, d->stream());
    return std::vector<DeviceArray>{out};
  };
}

}  // namespace cujax::cuda
