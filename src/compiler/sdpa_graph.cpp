#include "compiler/sdpa_graph.h"

#include <utility>

#include "cujax/core/error.h"

namespace cujax::compiler::sdpa_graph {

const Tensor& Graph::tensor(int64_t uid) const {
  for (const Tensor& t : tensors)
    if (t.uid == uid) return t;
  throw Error("cuDNN attention graph: no tensor with id " + std::to_string(uid));
}

std::string known_bad_backward(long cudnn_version) {
  if (cudnn_version != 91000 && cudnn_version != 91001) return "";
  return "cuDNN 9.10.0 and 9.10.1 compute fused attention's backward wrongly (NVIDIA's "
         "cudnn-frontend refuses them): install cuDNN 9.10.2 or newer, or use "
         "implementation='xla'";
}

namespace {

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) s[i - 1] = s[i] * dims[i];
  return s;
}

DataType compute_type_of(PointwiseMode m) {
  switch (m) {
    case PointwiseMode::kGenIndex:
      return DataType::kInt32;
    case PointwiseMode::kCmpLt:
    case PointwiseMode::kCmpGe:
    case PointwiseMode::kLogicalAnd:
      return DataType::kBoolean;
    default:
      return DataType::kFloat;
  }
}

class Builder {
 public:
  explicit Builder(const SdpaCall& c) : c_(c), d_(c.dims) {}
  Graph take() { return std::move(g_); }

  DataType io() const { return c_.dtype == DType::BF16 ? DataType::kBFloat16 : DataType::kHalf; }

  int64_t real(int64_t uid, DataType t, std::vector<int64_t> dims, std::vector<int64_t> strides) {
    for (const Tensor& x : g_.tensors)
      if (x.uid == uid) return uid;  // one descriptor per id, however often it is used
    g_.tensors.push_back({uid, t, std::move(dims), std::move(strides)});
    return uid;
  }
  int64_t scalar(int64_t uid, DataType t) {
    const int64_t id = real(uid, t, {1, 1, 1, 1}, {1, 1, 1, 1});
    for (Tensor& x : g_.tensors)
      if (x.uid == id) x.by_value = true;
    return id;
  }
  // A real f32 intermediate in the workspace, packed.
  int64_t workspace(int64_t uid, std::vector<int64_t> dims) {
    int64_t bytes = 4;
    for (int64_t e : dims) bytes *= e;
    Tensor t{uid, DataType::kFloat, dims, packed_strides(dims)};
    t.workspace_offset = g_.workspace_bytes;
    g_.workspace_bytes +=
        (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
    g_.tensors.push_back(std::move(t));
    return uid;
  }
  int64_t temp(std::vector<int64_t> dims, DataType t = DataType::kFloat) {
    std::vector<int64_t> strides = packed_strides(dims);
    return view(std::move(dims), std::move(strides), t);
  }
  int64_t view(std::vector<int64_t> dims, std::vector<int64_t> strides, DataType t) {
    Tensor x{next_virtual_++, t, std::move(dims), std::move(strides)};
    x.is_virtual = true;
    g_.tensors.push_back(std::move(x));
    return g_.tensors.back().uid;
  }

  int64_t pointwise(std::string name, PointwiseMode mode, std::vector<int64_t> inputs, int64_t out,
                    int64_t axis = -1) {
    Op op;
    op.kind = OpKind::kPointwise;
    op.name = std::move(name);
    op.pointwise = mode;
    op.compute_type = compute_type_of(mode);
    op.axis = axis;
    op.inputs = std::move(inputs);
    op.output = out;
    g_.ops.push_back(std::move(op));
    return out;
  }
  int64_t reduction(std::string name, ReductionMode mode, int64_t x, int64_t out) {
    Op op;
    op.kind = OpKind::kReduction;
    op.name = std::move(name);
    op.reduction = mode;
    op.inputs = {x};
    op.output = out;
    g_.ops.push_back(std::move(op));
    return out;
  }
  // c = a b with M and N (`n_is_kv`) or M and K bounded by the sequence lengths.
  int64_t matmul(std::string name, int64_t a, int64_t b, int64_t out, int64_t m_len, int64_t n_len,
                 int64_t k_len) {
    Op op;
    op.kind = OpKind::kMatmul;
    op.name = std::move(name);
    op.inputs = {a, b};
    op.output = out;
    if (c_.config.has_seq_lengths) {
      op.m_override = m_len;
      op.n_override = n_len;
      op.k_override = k_len;
    }
    g_.ops.push_back(std::move(op));
    return out;
  }
  int64_t reshape(std::string name, int64_t x, int64_t out) {
    Op op;
    op.kind = OpKind::kReshape;
    op.name = std::move(name);
    op.inputs = {x};
    op.output = out;
    g_.ops.push_back(std::move(op));
    return out;
  }

  // The caller's tensors.
  int64_t q_like(int64_t uid) {
    return real(uid, io(), {d_.B, d_.N, d_.T, d_.H}, {d_.T * d_.N * d_.H, d_.H, d_.N * d_.H, 1});
  }
  int64_t k_like(int64_t uid) {
    return real(uid, io(), {d_.B, d_.K, d_.S, d_.H}, {d_.S * d_.K * d_.H, d_.H, d_.K * d_.H, 1});
  }
  int64_t k_transposed(int64_t uid) {
    return real(uid, io(), {d_.B, d_.K, d_.H, d_.S}, {d_.S * d_.K * d_.H, d_.H, 1, d_.K * d_.H});
  }
  int64_t stats() {
    return real(kStats, DataType::kFloat, {d_.B, d_.N, d_.T, 1}, {d_.N * d_.T, d_.T, 1, 1});
  }
  int64_t length(int64_t uid) { return real(uid, DataType::kInt32, {d_.B, 1, 1, 1}, {1, 1, 1, 1}); }
  int64_t q_len() { return c_.config.has_seq_lengths ? length(kQLen) : 0; }
  int64_t kv_len() { return c_.config.has_seq_lengths ? length(kKvLen) : 0; }

  std::vector<int64_t> bnts() const { return {d_.B, d_.N, d_.T, d_.S}; }
  // (B, N, S, T) transposed view of a (B, N, T, S) tensor, in the io type: a matmul operand.
  int64_t transposed_scores(std::string name, int64_t x) {
    return reshape(
        std::move(name), x,
        view({d_.B, d_.N, d_.S, d_.T}, {d_.N * d_.T * d_.S, d_.T * d_.S, 1, d_.S}, io()));
  }

  // Scaled, biased logits, padded positions masked: q k^T scale [+ bias].
  int64_t logits() {
    int64_t s = matmul("q_kt", q_like(kQ), k_transposed(kK), temp(bnts()), q_len(), kv_len(), 0);
    s = pointwise("scale", PointwiseMode::kMul, {s, scalar(kScale, DataType::kFloat)},
                  temp(bnts()));
    if (c_.config.has_bias) {
      const int64_t bias = real(kBias, io(), {d_.bias_b, d_.bias_n, d_.T, d_.S},
                                {d_.bias_n * d_.T * d_.S, d_.T * d_.S, d_.S, 1});
      s = pointwise("bias", PointwiseMode::kAdd, {s, bias}, temp(bnts()));
    }
    if (!c_.config.has_seq_lengths) return s;
    const int64_t row = index("padding_row", s, 2), col = index("padding_col", s, 3);
    const int64_t rows = pointwise("row_lt_q_len", PointwiseMode::kCmpLt, {row, q_len()},
                                   temp(bnts(), DataType::kBoolean));
    const int64_t cols = pointwise("col_lt_kv_len", PointwiseMode::kCmpLt, {col, kv_len()},
                                   temp(bnts(), DataType::kBoolean));
    const int64_t keep = pointwise("padding_keep", PointwiseMode::kLogicalAnd, {rows, cols},
                                   temp(bnts(), DataType::kBoolean));
    return select("padding_mask", s, keep);
  }
  // Causal: keeps row >= col.
  int64_t causal(int64_t s) {
    const int64_t row = index("causal_row", s, 2), col = index("causal_col", s, 3);
    const int64_t keep = pointwise("row_ge_col", PointwiseMode::kCmpGe, {row, col},
                                   temp(bnts(), DataType::kBoolean));
    return select("causal_mask", s, keep);
  }

 private:
  int64_t index(std::string name, int64_t s, int64_t axis) {
    return pointwise(std::move(name), PointwiseMode::kGenIndex, {s}, temp(bnts(), DataType::kInt32),
                     axis);
  }
  // keep ? s : the mask fill.
  int64_t select(std::string name, int64_t s, int64_t keep) {
    return pointwise(std::move(name), PointwiseMode::kBinarySelect,
                     {s, scalar(kMaskFill, DataType::kFloat), keep}, temp(bnts()));
  }

  const SdpaCall& c_;
  const SdpaDims& d_;
  Graph g_;
  int64_t next_virtual_ = kFirstVirtual;
};

// softmax(logits) v, with stats = max + log(sum(exp(logits - max))) per row.
Graph forward(const SdpaCall& c) {
  Builder b(c);
  const SdpaDims& d = c.dims;
  const std::vector<int64_t> bnt1{d.B, d.N, d.T, 1};
  int64_t s = b.logits();
  if (c.config.causal) s = b.causal(s);
  const int64_t m = b.reduction("max", ReductionMode::kMax, s, b.temp(bnt1));
  const int64_t shifted = b.pointwise("sub_max", PointwiseMode::kSub, {s, m}, b.temp(b.bnts()));
  const int64_t e = b.pointwise("exp", PointwiseMode::kExp, {shifted}, b.temp(b.bnts()));
  const int64_t z = b.reduction("sum", ReductionMode::kAdd, e, b.temp(bnt1));
  const int64_t lz = b.pointwise("log", PointwiseMode::kLog, {z}, b.temp(bnt1));
  b.pointwise("stats", PointwiseMode::kAdd, {m, lz}, b.stats());
  const int64_t p = b.pointwise("div", PointwiseMode::kDiv, {e, z}, b.temp(b.bnts(), b.io()));
  b.matmul("p_v", p, b.k_like(kV), b.q_like(kO), b.q_len(), 0, b.kv_len());
  return b.take();
}

// From the forward's stats: P = exp(logits - stats) (masked after the subtraction when causal),
// dV = P^T dO, dS = P (dO V^T - rowsum(dO O)) scale, dK = dS^T Q, dQ = dS K through an f32
// accumulator. With GQA the products give N heads, summed down to K.
Graph backward(const SdpaCall& c) {
  Builder b(c);
  const SdpaDims& d = c.dims;
  const std::vector<int64_t> bnt1{d.B, d.N, d.T, 1}, bnth{d.B, d.N, d.T, d.H},
      bnsh{d.B, d.N, d.S, d.H};
  const int64_t dout = b.q_like(kDO);
  const int64_t prod = b.pointwise("do_o", PointwiseMode::kMul, {dout, b.q_like(kO)}, b.temp(bnth));
  const int64_t sum = b.reduction("rowsum_do_o", ReductionMode::kAdd, prod, b.temp(bnt1));
  const int64_t rowsum =
      b.pointwise("rowsum", PointwiseMode::kMul, {sum, b.scalar(kOne, DataType::kFloat)},
                  b.workspace(kRowSum, bnt1));
  int64_t s = b.logits();
  s = b.pointwise("sub_stats", PointwiseMode::kSub, {s, b.stats()}, b.temp(b.bnts()));
  if (c.config.causal) s = b.causal(s);
  const int64_t p = b.pointwise("exp", PointwiseMode::kExp, {s}, b.temp(b.bnts()));
  // A K-head gradient from N-head operands: the product per query head, then the sum per group.
  auto per_kv_head = [&](const std::string& name, int64_t a, int64_t x, int64_t uid) {
    if (d.N == d.K) return b.matmul(name, a, x, b.k_like(uid), b.kv_len(), 0, b.q_len());
    const int64_t full = b.matmul(name, a, x, b.temp(bnsh, b.io()), b.kv_len(), 0, b.q_len());
    return b.reduction(name + "_heads", ReductionMode::kAdd, full, b.k_like(uid));
  };
  per_kv_head("pt_do", b.transposed_scores("pt", p), dout, kDV);
  const int64_t dp =
      b.matmul("do_vt", dout, b.k_transposed(kV), b.temp(b.bnts()), b.q_len(), b.kv_len(), 0);
  const int64_t centered =
      b.pointwise("sub_rowsum", PointwiseMode::kSub, {dp, rowsum}, b.temp(b.bnts()));
  const int64_t dsu = b.pointwise("mul_p", PointwiseMode::kMul, {centered, p}, b.temp(b.bnts()));
  const int64_t ds = b.pointwise("ds_scale", PointwiseMode::kMul,
                                 {dsu, b.scalar(kScale, DataType::kFloat)}, b.temp(b.bnts()));
  per_kv_head("dst_q", b.transposed_scores("dst", ds), b.q_like(kQ), kDK);
  const int64_t k =
      b.reshape("k", b.k_transposed(kK),
                b.view({d.B, d.K, d.S, d.H}, {d.S * d.K * d.H, d.H, d.K * d.H, 1}, b.io()));
  const int64_t accum =
      b.matmul("ds_k", ds, k, b.workspace(kDQAccum, bnth), b.q_len(), 0, b.kv_len());
  b.pointwise("dq", PointwiseMode::kIdentity, {accum}, b.q_like(kDQ));
  return b.take();
}

}  // namespace

Graph describe(const SdpaCall& call) {
  return call.backward ? backward(call) : forward(call);
}

}  // namespace cujax::compiler::sdpa_graph
