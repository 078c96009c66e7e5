#include "compiler/sdpa_call.h"

#include <memory>

#include "cujax/core/error.h"

namespace cujax::compiler {

namespace {

using Kind = ir::Attribute::Kind;

[[noreturn]] void bad(const ir::Operation& op, const std::string& why) {
  throw UnsupportedError(op.where() + " (" + std::string(sdpa_target(op)) + "): " + why);
}

std::string type_str(const ir::Type& t) {
  return t.str();
}

}  // namespace

ir::AttrRef sdpa_backend_config(const SdpaConfig& c) {
  auto a = std::make_shared<ir::Attribute>();
  a->kind = Kind::Dictionary;
  a->fields = {
      {"causal", ir::Attribute::boolean_attr(c.causal)},
      {"dropout_rate", ir::Attribute::float_attr(c.dropout_rate, DType::F64)},
      {"groups", ir::Attribute::integer_attr(c.groups, DType::I64)},
      {"has_bias", ir::Attribute::boolean_attr(c.has_bias)},
      {"has_seq_lengths", ir::Attribute::boolean_attr(c.has_seq_lengths)},
      {"layout", ir::Attribute::string_attr(c.layout)},
      {"mask_type", ir::Attribute::string_attr(c.causal ? "causal" : "none")},
      {"scale", ir::Attribute::float_attr(c.scale, DType::F64)},
  };
  return a;
}

std::string_view sdpa_target(const ir::Operation& op) {
  if (op.name != "stablehlo.custom_call") return {};
  const ir::Attribute* t = op.attr("call_target_name");
  if (!t) return {};
  if (t->text == kSdpaForward) return kSdpaForward;
  if (t->text == kSdpaBackward) return kSdpaBackward;
  return {};
}

SdpaCall sdpa_call(const ir::Operation& op) {
  SdpaCall call;
  call.backward = sdpa_target(op) == kSdpaBackward;
  const ir::Attribute* cfg = op.attr("backend_config");
  if (!cfg || cfg->kind != Kind::Dictionary) bad(op, "needs a dictionary backend_config");
  auto field = [&](const char* name, Kind kind) -> const ir::Attribute& {
    const ir::Attribute* f = cfg->field(name);
    if (!f || (f->kind != kind && !(kind == Kind::Float && f->kind == Kind::Integer)))
      bad(op, std::string("backend_config needs '") + name + "'");
    return *f;
  };
  auto number = [&](const char* name) {
    const ir::Attribute& f = field(name, Kind::Float);
    return f.kind == Kind::Integer ? static_cast<double>(f.integer) : f.floating;
  };
  SdpaConfig& c = call.config;
  c.scale = number("scale");
  c.dropout_rate = number("dropout_rate");
  c.has_bias = field("has_bias", Kind::Bool).boolean;
  c.has_seq_lengths = field("has_seq_lengths", Kind::Bool).boolean;
  c.groups = field("groups", Kind::Integer).integer;
  c.layout = field("layout", Kind::String).text;
  const std::string mask = field("mask_type", Kind::String).text;
  if (mask != "causal" && mask != "none")
    bad(op, "mask_type '" + mask + "' is not one of none, causal");
  c.causal = mask == "causal";
  if (c.dropout_rate != 0)
    bad(op,
        "dropout is not supported: cuDNN draws its dropout mask from its own Philox stream, which "
        "JAX's threefry keys cannot reproduce, so results would not match implementation='xla'");
  if (c.layout != "BTNH")
    bad(op, "layout '" + c.layout + "' is not supported; the attention takes BTNH (JAX's layout)");

  const size_t nb = c.has_bias ? 1 : 0, nl = c.has_seq_lengths ? 2 : 0;
  const size_t n_in = 3 + nb + nl + (call.backward ? 3 : 0);
  if (op.operands.size() != n_in)
    bad(op, "expects " + std::to_string(n_in) + " operands for its backend_config, got " +
                std::to_string(op.operands.size()));
  const ir::Type& q = op.operands[0]->type;
  const ir::Type& k = op.operands[1]->type;
  const ir::Type& v = op.operands[2]->type;
  if (q.shape.size() != 4 || k.shape.size() != 4)
    bad(op, "query and key must have rank 4 (BTNH), got " + type_str(q) + " and " + type_str(k));
  call.dtype = q.dtype;
  if (q.dtype != DType::F16 && q.dtype != DType::BF16)
    bad(op, "needs float16 or bfloat16 inputs, got " + type_str(q));
  if (k.dtype != q.dtype || v.dtype != q.dtype || v.shape != k.shape)
    bad(op, "query, key and value must share a dtype and key and value a shape, got " +
                type_str(q) + ", " + type_str(k) + ", " + type_str(v));
  SdpaDims& d = call.dims;
  d.B = q.shape[0], d.T = q.shape[1], d.N = q.shape[2], d.H = q.shape[3];
  d.S = k.shape[1], d.K = k.shape[2];
  if (k.shape[0] != d.B || k.shape[3] != d.H || c.groups < 1 || d.K * c.groups != d.N)
    bad(op, "key " + type_str(k) + " does not match query " + type_str(q) + " with " +
                std::to_string(c.groups) + " query heads per key head");
  d.bias_b = d.bias_n = 1;
  if (c.has_bias) {
    const ir::Type& b = op.operands[3]->type;
    if (b.shape.size() != 4 || b.dtype != q.dtype || (b.shape[0] != 1 && b.shape[0] != d.B) ||
        (b.shape[1] != 1 && b.shape[1] != d.N) || b.shape[2] != d.T || b.shape[3] != d.S)
      bad(op, "bias must be (B or 1, N or 1, T, S) of the query's dtype, got " + type_str(b));
    d.bias_b = b.shape[0], d.bias_n = b.shape[1];
  }
  for (size_t i = 0; i < nl; ++i) {
    const ir::Type& l = op.operands[3 + nb + i]->type;
    if (l.dtype != DType::I32 || l.shape != Shape{d.B})
      bad(op, "sequence lengths must be i32 (B,), got " + type_str(l));
  }
  const ir::Type stats = ir::Type::tensor({d.B, d.N, d.T}, DType::F32);
  if (call.backward) {
    const size_t at = 3 + nb + nl;
    if (op.operands[at]->type != q || op.operands[at + 2]->type != q ||
        op.operands[at + 1]->type != stats)
      bad(op, "out and d_out must be like the query and stats (B, N, T) f32");
    if (op.results.size() != 3 || op.results[0]->type != q || op.results[1]->type != k ||
        op.results[2]->type != v)
      bad(op, "returns d_q, d_k, d_v like q, k, v");
  } else {
    if (op.results.empty() || op.results.size() > 2 || op.results[0]->type != q ||
        (op.results.size() == 2 && op.results[1]->type != stats))
      bad(op, "returns out like the query and optionally stats (B, N, T) f32");
    call.with_stats = op.results.size() == 2;
  }
  return call;
}

double sdpa_forward_flops(const SdpaDims& d, bool causal) {
  const double f = 4.0 * d.B * d.N * d.T * d.S * d.H;
  return causal ? f / 2 : f;
}

}  // namespace cujax::compiler
