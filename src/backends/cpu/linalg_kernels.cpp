// JAX's linear-algebra custom calls (lapack_*_ffi, and cusolver_*/cu_*/cusparse_* run on the
// host) and StableHLO's cholesky.
//
// A custom call's kernel moves each operand into the layout the call names for it
// (operand_layouts, minor-to-major), runs the family's body on those buffers, and moves each
// result from its result_layouts layout back to row-major: the body then sees the bytes JAX's
// own kernels see (column-major matrices for every LAPACK and cuSOLVER target). Failures are
// the family's `info` results, which the program JAX lowered turns into NaNs.
#include "backends/cpu/linalg_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/lapack.h"

namespace cujax::cpu {

int64_t LinalgCall::int_field(const char* name, int64_t fallback) const {
  const ir::Attribute* f = config ? config->field(name) : nullptr;
  if (!f) return fallback;
  require(f->kind == ir::Attribute::Kind::Integer,
          std::string("backend_config field '") + name + "' must be an integer");
  return f->integer;
}

bool LinalgCall::bool_field(const char* name, bool fallback) const {
  const ir::Attribute* f = config ? config->field(name) : nullptr;
  if (!f) return fallback;
  require(f->kind == ir::Attribute::Kind::Bool,
          std::string("backend_config field '") + name + "' must be a bool");
  return f->boolean;
}

void LinalgCall::require(bool ok, const std::string& message) const {
  if (!ok) throw UnsupportedError(where + ": custom call " + target + ": " + message);
}

void LinalgCall::require_result(size_t i, DType want_dtype, const Shape& shape) const {
  require(i < results.size(), "needs at least " + std::to_string(i + 1) + " results");
  const ir::Type& t = results[i];
  require(t.dtype == want_dtype && t.shape == shape,
          "result " + std::to_string(i) + " is " + t.str() + ", expected " +
              ir::Type::tensor(shape, want_dtype).str() + " for operand " +
              (operands.empty() ? std::string("-") : ir::Type::tensor(operands[0], dtype).str()));
}

MatrixDims matrix_dims(const Shape& shape) {
  MatrixDims d;
  const size_t r = shape.size();
  if (r < 2) return d;
  d.rows = shape[r - 2];
  d.cols = shape[r - 1];
  for (size_t i = 0; i + 2 < r; ++i) d.batch *= shape[i];
  return d;
}

Shape batch_shape(const Shape& shape, std::initializer_list<int64_t> extra) {
  Shape s(shape.begin(), shape.end() - std::min<size_t>(2, shape.size()));
  s.insert(s.end(), extra.begin(), extra.end());
  return s;
}

namespace {

// The integers of a layout: `dense<[1, 2, 0]> : tensor<3xindex>` (the parser keeps index
// tensors as opaque text) or any integer list.
std::vector<int64_t> layout_ints(const ir::Operation& op, const ir::Attribute& a) {
  if (a.kind != ir::Attribute::Kind::Opaque) return ir::as_ints(a);
  const size_t open = a.text.find("dense<");
  const size_t close = a.text.find('>', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos)
    unsupported(op, "layout '" + a.text + "' is not a dense integer list");
  std::vector<int64_t> out;
  const std::string body = a.text.substr(open + 6, close - open - 6);
  for (size_t p = 0; p < body.size();) {
    if (body[p] >= '0' && body[p] <= '9') {
      size_t used = 0;
      out.push_back(std::stoll(body.substr(p), &used));
      p += used;
    } else if (body[p] == '[' || body[p] == ']' || body[p] == ',' || body[p] == ' ') {
      ++p;
    } else {
      unsupported(op, "layout '" + a.text + "' is not a dense integer list");
    }
  }
  return out;
}

// minor_to_major of operand/result i: the call's layouts attribute, else row-major.
std::vector<int64_t> layout_of(const ir::Operation& op, const char* attr, size_t i, size_t rank) {
  std::vector<int64_t> m2m(rank);
  for (size_t d = 0; d < rank; ++d) m2m[d] = static_cast<int64_t>(rank - 1 - d);
  const ir::Attribute* layouts = op.attr(attr);
  if (!layouts || layouts->kind != ir::Attribute::Kind::Array || i >= layouts->elements.size())
    return m2m;
  std::vector<int64_t> given = layout_ints(op, *layouts->elements[i]);
  std::vector<bool> seen(rank, false);
  bool ok = given.size() == rank;
  for (int64_t d : given) {
    ok = ok && d >= 0 && d < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(d)];
    if (ok) seen[static_cast<size_t>(d)] = true;
  }
  if (!ok) unsupported(op, std::string(attr) + "[" + std::to_string(i) + "] is not a permutation");
  return given;
}

bool is_row_major(const std::vector<int64_t>& m2m) {
  for (size_t d = 0; d < m2m.size(); ++d)
    if (m2m[d] != static_cast<int64_t>(m2m.size() - 1 - d)) return false;
  return true;
}

// Copies between a row-major tensor and its bytes in layout `m2m`: to_physical moves the
// element at each logical index to its place in the layout, and back otherwise.
HostTensor relayout(const HostTensor& t, const std::vector<int64_t>& m2m, bool to_physical) {
  if (is_row_major(m2m) || t.size() <= 1) return t.clone();
  const Shape& shape = t.shape();
  const size_t rank = shape.size();
  std::vector<int64_t> phys_stride(rank);
  int64_t s = 1;
  for (int64_t d : m2m) {
    phys_stride[static_cast<size_t>(d)] = s;
    s *= shape[static_cast<size_t>(d)];
  }
  HostTensor out = HostTensor::uninitialized(t.dtype(), shape);
  const size_t eb = size_of(t.dtype());
  const auto* src = static_cast<const std::byte*>(t.data());
  auto* dst = static_cast<std::byte*>(out.data());
  std::vector<int64_t> idx(rank, 0);
  int64_t phys = 0;
  for (int64_t flat = 0; flat < t.size(); ++flat) {
    if (to_physical)
      std::memcpy(dst + phys * eb, src + flat * eb, eb);
    else
      std::memcpy(dst + flat * eb, src + phys * eb, eb);
    for (size_t d = rank; d-- > 0;) {  // next row-major index
      phys += phys_stride[d];
      if (++idx[d] < shape[d]) break;
      phys -= phys_stride[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// JAX's target name -> (family, cuda); family "" when the name is not a linear-algebra call.
std::pair<std::string, bool> family_of(const std::string& target, DType dtype,
                                       const ir::Operation& op) {
  if (starts_with(target, "lapack_") && ends_with(target, "_ffi") && target.size() > 12) {
    const char p = target[7];
    std::string name = target.substr(8, target.size() - 12);
    static const char* kNames[] = {"potrf", "getrf", "geqrf", "geqp3", "orgqr", "ungqr",
                                   "syevd", "heevd", "gesdd", "gesvd", "geev",  "gees",
                                   "gehrd", "sytrd", "hetrd", "trsm",  "gtsv"};
    bool known = false;
    for (const char* n : kNames) known = known || name == n;
    if (!known) return {"", false};
    const char want = dtype == DType::F32    ? 's'
                      : dtype == DType::F64  ? 'd'
                      : dtype == DType::C64  ? 'c'
                      : dtype == DType::C128 ? 'z'
                                             : '?';
    if (p != want)
      unsupported(op, "custom call " + target + " on " + std::string(numpy_name(dtype)) +
                          " operands (its prefix '" + std::string(1, p) + "' names another type)");
    if (name == "ungqr") name = "orgqr";
    if (name == "heevd") name = "syevd";
    if (name == "hetrd") name = "sytrd";
    return {name, false};
  }
  for (const char* solver : {"cusolver_", "hipsolver_"}) {
    if (!starts_with(target, solver) || !ends_with(target, "_ffi")) continue;
    const size_t n = std::strlen(solver);
    const std::string name = target.substr(n, target.size() - n - 4);
    for (const char* known :
         {"potrf", "getrf", "geqrf", "orgqr", "syevd", "gesvd", "gesvdj", "sytrd"})
      if (name == known) return {name, true};
    return {"", false};
  }
  if (target == "cu_lu_pivots_to_permutation" || target == "hip_lu_pivots_to_permutation")
    return {"pivots_to_permutation", true};
  if (target == "cu_threefry2x32_ffi" || target == "hip_threefry2x32_ffi" ||
      target == "cu_threefry2x32")
    return {"threefry", true};
  if (target == "cusparse_gtsv2_ffi" || target == "hipsparse_gtsv2_ffi") return {"gtsv2", true};
  return {"", false};
}

// ------------------------------------------------------------------ stablehlo.cholesky

// The factor in the triangle `lower` names, zeros in the other; all NaN where the matrix is
// not positive definite (as XLA's CPU backend gives).
template <class T>
void cholesky_batch(HostTensor& a, bool lower) {
  const MatrixDims d = matrix_dims(a.shape());
  const lapack::fint n = static_cast<lapack::fint>(d.rows);
  if (n == 0) return;
  T* data = a.data_as<T>();
  // Row-major lower = column-major upper.
  const lapack::fchar uplo = lower ? 'U' : 'L';
  for (int64_t b = 0; b < d.batch; ++b) {
    T* m = data + b * d.rows * d.rows;
    lapack::fint info = 0;
    CUJAX_LAPACK_PICK(T, potrf_, &uplo, &n, m, &n, &info, 1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T& v = m[i * n + j];
        if (info != 0)
          v = T(std::numeric_limits<lapack::real_t<T>>::quiet_NaN());
        else if (lower ? j > i : j < i)
          v = T(0);
      }
  }
}

Kernel cholesky_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 1 || op.num_results() != 1) unsupported(op, "takes one operand");
  const ir::Type& t = op.operands[0]->type;
  if (t.shape.size() < 2 || t.shape[t.shape.size() - 1] != t.shape[t.shape.size() - 2])
    unsupported(op, "operand " + t.str() + " is not a batch of square matrices");
  if (t.dtype != DType::F32 && t.dtype != DType::F64 && t.dtype != DType::C64 &&
      t.dtype != DType::C128)
    unsupported(op, "operand " + t.str() + " must be f32, f64, complex<f32> or complex<f64>");
  const ir::Attribute* lower_attr = op.attr("lower");
  const bool lower = lower_attr && lower_attr->kind == ir::Attribute::Kind::Bool
                         ? lower_attr->boolean
                         : (lower_attr && lower_attr->integer != 0);
  const DType dtype = t.dtype;
  return [lower, dtype](std::span<const HostTensor> in, ExecContext&) {
    HostTensor a = in[0].clone();
    visit_dtype_with_complex(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, lapack::c64> || std::is_same_v<T, lapack::c128>)
        cholesky_batch<T>(a, lower);
    });
    return std::vector<HostTensor>{a};
  };
}

}  // namespace

std::optional<Kernel> linalg_custom_call_kernel(const ir::Operation& op) {
  const ir::Attribute* target_attr = op.attr("call_target_name");
  if (!target_attr || op.operands.empty()) return std::nullopt;
  LinalgCall call;
  call.target = target_attr->text;
  call.where = op.where();
  call.dtype = op.operands[0]->type.dtype;
  const auto [family, cuda] = family_of(call.target, call.dtype, op);
  if (family.empty()) return std::nullopt;
  call.family = family;
  call.cuda = cuda;
  for (const ir::Value* v : op.operands) call.operands.push_back(v->type.shape);
  for (size_t i = 0; i < op.num_results(); ++i) call.results.push_back(op.result(i)->type);
  const ir::Attribute* config = op.attr("mhlo.backend_config");
  if (config && config->kind == ir::Attribute::Kind::Dictionary) call.config = config;

  LinalgBody body = lapack_factor_body(call);
  if (!body) body = lapack_eigen_body(call);
  call.require(static_cast<bool>(body), "not implemented on the cpu backend");

  std::vector<std::vector<int64_t>> in_layouts, out_layouts;
  for (size_t i = 0; i < op.operands.size(); ++i)
    in_layouts.push_back(layout_of(op, "operand_layouts", i, call.operands[i].size()));
  std::vector<DType> out_dtypes;
  std::vector<Shape> out_shapes;
  for (size_t i = 0; i < call.results.size(); ++i) {
    out_layouts.push_back(layout_of(op, "result_layouts", i, call.results[i].shape.size()));
    out_dtypes.push_back(call.results[i].dtype);
    out_shapes.push_back(call.results[i].shape);
  }
  return Kernel([body, in_layouts, out_layouts, out_dtypes, out_shapes](
                    std::span<const HostTensor> in, ExecContext&) {
    std::vector<HostTensor> phys_in, phys_out, results;
    for (size_t i = 0; i < in_layouts.size(); ++i)
      phys_in.push_back(relayout(in[i], in_layouts[i], true));
    for (size_t i = 0; i < out_shapes.size(); ++i)
      phys_out.push_back(HostTensor(out_dtypes[i], out_shapes[i]));
    body(phys_in, phys_out);
    for (size_t i = 0; i < out_shapes.size(); ++i)
      results.push_back(is_row_major(out_layouts[i])
                            ? std::move(phys_out[i])
                            : relayout(phys_out[i], out_layouts[i], false));
    return results;
  });
}

void register_linalg_kernels(KernelRegistry& r) {
  register_dot_kernels(r);
  register_convolution_kernels(r);
  register_triangular_solve_kernels(r);
  r.add("stablehlo.cholesky", cholesky_kernel);
}

}  // namespace cujax::cpu
