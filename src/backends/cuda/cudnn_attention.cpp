#include "backends/cuda/cudnn_attention.h"

#include <cudnn.h>

#include <cfloat>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/library.h"
#include "compiler/sdpa_call.h"

namespace cujax::cuda {

namespace {

// The cuDNN entry points used, resolved once.
struct Dnn {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_desc = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_desc = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attr = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attr = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
};

const Dnn& dnn() {
  static const Dnn api = [] {
    Library lib("libcudnn.so." + std::to_string(CUDNN_MAJOR),
                "cuDNN, needed for nn.dot_product_attention(implementation='cudnn')",
                "install cuDNN " + std::to_string(CUDNN_MAJOR) +
                    " (or its pip wheel) and add its lib folder to LD_LIBRARY_PATH");
    Dnn a;
    lib.resolve(a.get_version, "cudnnGetVersion");
    lib.resolve(a.error_string, "cudnnGetErrorString");
    lib.resolve(a.create, "cudnnCreate");
    lib.resolve(a.set_stream, "cudnnSetStream");
    lib.resolve(a.create_desc, "cudnnBackendCreateDescriptor");
    lib.resolve(a.destroy_desc, "cudnnBackendDestroyDescriptor");
    lib.resolve(a.set_attr, "cudnnBackendSetAttribute");
    lib.resolve(a.get_attr, "cudnnBackendGetAttribute");
    lib.resolve(a.finalize, "cudnnBackendFinalize");
    lib.resolve(a.execute, "cudnnBackendExecute");
    lib.check_resolved();
    return a;
  }();
  return api;
}

void check_dnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) throw_cuda_error(call, dnn().error_string(s), file, line);
}
#define CUJAX_DNN_CHECK(call) check_dnn((call), #call, __FILE__, __LINE__)

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    CUJAX_DNN_CHECK(dnn().create_desc(type, &d_));
  }
  ~Desc() {
    if (d_) dnn().destroy_desc(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
            const std::vector<T>& v) {
    CUJAX_DNN_CHECK(dnn().set_attr(d_, name, type, static_cast<int64_t>(v.size()), v.data()));
    return *this;
  }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T& v) {
    CUJAX_DNN_CHECK(dnn().set_attr(d_, name, type, 1, &v));
    return *this;
  }
  Desc& finalize() {
    CUJAX_DNN_CHECK(dnn().finalize(d_));
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using DescPtr = std::shared_ptr<Desc>;

cudnnHandle_t handle_for(const Device& device) {
  static std::mutex mu;
  static std::map<const Device*, cudnnHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  cudnnHandle_t& h = handles[&device];
  if (!h) CUJAX_DNN_CHECK(dnn().create(&h));
  return h;
}

// Fixed unique ids of the graph's non-virtual tensors (the variant pack's keys).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kBias,
  kQLen,
  kKvLen,
  kScale,
  kNeg,
  kDO,
  kDQ,
  kDK,
  kDV,
  kDScale,  // the backward's second by-value scale
  kFirstVirtual = 100
};

// Builds one operation graph: tensors and the ops between them, kept alive with it.
class Graph {
 public:
  Graph(const compiler::SdpaCall& call) : c_(call) {}

  DescPtr tensor(int64_t uid, cudnnDataType_t t, std::vector<int64_t> dims,
                 std::vector<int64_t> strides, bool by_value = false) {
    auto d = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const bool is_virtual = uid >= kFirstVirtual;
    const int64_t align = 16;
    d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, t)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, align)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual);
    if (by_value) d->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
    d->finalize();
    return d;
  }
  // A virtual f32 (or `t`) tensor of `dims`, packed row-major.
  DescPtr temp(std::vector<int64_t> dims, cudnnDataType_t t = CUDNN_DATA_FLOAT) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
    return tensor(next_virtual_++, t, dims, strides);
  }
  // A virtual tensor with its own strides (a transposed view, for a reshape's output).
  DescPtr view(cudnnDataType_t t, std::vector<int64_t> dims, std::vector<int64_t> strides) {
    return tensor(next_virtual_++, t, dims, strides);
  }
  // y = mode(x, b[, t]); GEN_INDEX takes `axis`.
  DescPtr pointwise(cudnnPointwiseMode_t mode, const DescPtr& x, const DescPtr& b, const DescPtr& y,
                    const DescPtr& t = nullptr, int64_t axis = -1) {
    auto pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
    if (axis >= 0) pw->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
    pw->finalize();
    auto op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, pw->get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x->get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y->get());
    if (b) op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->get());
    if (t) op->set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t->get());
    ops_.push_back(op->finalize().get());
    return y;
  }
  DescPtr reduce(cudnnReduceTensorOp_t mode, const DescPtr& x, const DescPtr& y) {
    auto r = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT)
        .finalize();
    auto op = keep(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op->set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, r->get())
        .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x->get())
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y->get());
    ops_.push_back(op->finalize().get());
    return y;
  }
  DescPtr matmul(const DescPtr& a, const DescPtr& b, const DescPtr& c) {
    auto m = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    m->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT).finalize();
    auto op = keep(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op->set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, m->get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a->get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c->get());
    ops_.push_back(op->finalize().get());
    return c;
  }
  DescPtr reshape(const DescPtr& x, const DescPtr& y) {
    auto op = keep(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x->get())
        .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y->get());
    ops_.push_back(op->finalize().get());
    return y;
  }

  // The scaled, biased, masked logits (B, N, T, S) in f32 from q and k^T.
  DescPtr logits(const DescPtr& q, const DescPtr& kt) {
    const auto& d = c_.dims;
    const std::vector<int64_t> bnts{d.B, d.N, d.T, d.S}, one{1, 1, 1, 1};
    DescPtr s = matmul(q, kt, temp(bnts));
    const DescPtr scale = tensor(kScale, CUDNN_DATA_FLOAT, one, one, true);
    s = pointwise(CUDNN_POINTWISE_MUL, s, scale, temp(bnts));
    if (c_.config.has_bias) {
      const DescPtr bias = tensor(kBias, io_type(), {d.bias_b, d.bias_n, d.T, d.S},
                                  {d.bias_n * d.T * d.S, d.T * d.S, d.S, 1});
      s = pointwise(CUDNN_POINTWISE_ADD, s, bias, temp(bnts));
    }
    if (!c_.config.has_seq_lengths && !c_.config.causal) return s;
    // Masked logits become -0.7 * FLT_MAX, as the "xla" path and the reference kernel set them.
    const DescPtr neg = tensor(kNeg, CUDNN_DATA_FLOAT, one, one, true);
    auto index = [&](int64_t axis) {
      return pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, temp(bnts, CUDNN_DATA_INT32), nullptr,
                       axis);
    };
    if (c_.config.has_seq_lengths) {
      const std::vector<int64_t> b111{d.B, 1, 1, 1}, sb{1, 1, 1, 1};
      const DescPtr ql = tensor(kQLen, CUDNN_DATA_INT32, b111, sb);
      const DescPtr kl = tensor(kKvLen, CUDNN_DATA_INT32, b111, sb);
      const DescPtr rows =
          pointwise(CUDNN_POINTWISE_CMP_LT, index(2), ql, temp(bnts, CUDNN_DATA_BOOLEAN));
      const DescPtr cols =
          pointwise(CUDNN_POINTWISE_CMP_LT, index(3), kl, temp(bnts, CUDNN_DATA_BOOLEAN));
      const DescPtr keep_mask =
          pointwise(CUDNN_POINTWISE_LOGICAL_AND, rows, cols, temp(bnts, CUDNN_DATA_BOOLEAN));
      s = pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, neg, temp(bnts), keep_mask);
    }
    if (c_.config.causal) {
      const DescPtr keep_mask =
          pointwise(CUDNN_POINTWISE_CMP_GE, index(2), index(3), temp(bnts, CUDNN_DATA_BOOLEAN));
      s = pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, neg, temp(bnts), keep_mask);
    }
    return s;
  }

  cudnnDataType_t io_type() const {
    return c_.dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  }
  // q-like (B, N, T, H) and k-like (B, K, S, H) views of BTNH memory, and k^T (B, K, H, S).
  DescPtr q_like(int64_t uid) {
    const auto& d = c_.dims;
    return tensor(uid, io_type(), {d.B, d.N, d.T, d.H}, {d.T * d.N * d.H, d.H, d.N * d.H, 1});
  }
  DescPtr k_like(int64_t uid, bool transposed) {
    const auto& d = c_.dims;
    if (transposed)
      return tensor(uid, io_type(), {d.B, d.K, d.H, d.S}, {d.S * d.K * d.H, d.H, 1, d.K * d.H});
    return tensor(uid, io_type(), {d.B, d.K, d.S, d.H}, {d.S * d.K * d.H, d.H, d.K * d.H, 1});
  }
  DescPtr stats() {
    const auto& d = c_.dims;
    return tensor(kStats, CUDNN_DATA_FLOAT, {d.B, d.N, d.T, 1}, {d.N * d.T, d.T, 1, 1});
  }

  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }
  std::vector<DescPtr> owned;

 private:
  DescPtr keep(cudnnBackendDescriptorType_t type) {
    owned.push_back(std::make_shared<Desc>(type));
    return owned.back();
  }
  const compiler::SdpaCall& c_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// Forward: softmax(logits) v, with stats = max + log(sum(exp(logits - max))).
void build_forward(Graph& g, const compiler::SdpaCall& c) {
  const auto& d = c.dims;
  const std::vector<int64_t> bnt1{d.B, d.N, d.T, 1}, bnts{d.B, d.N, d.T, d.S};
  const DescPtr s = g.logits(g.q_like(kQ), g.k_like(kK, true));
  const DescPtr m = g.reduce(CUDNN_REDUCE_TENSOR_MAX, s, g.temp(bnt1));
  const DescPtr e =
      g.pointwise(CUDNN_POINTWISE_EXP, g.pointwise(CUDNN_POINTWISE_SUB, s, m, g.temp(bnts)),
                  nullptr, g.temp(bnts));
  const DescPtr z = g.reduce(CUDNN_REDUCE_TENSOR_ADD, e, g.temp(bnt1));
  const DescPtr lz = g.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, g.temp(bnt1));
  g.pointwise(CUDNN_POINTWISE_ADD, m, lz, g.stats());
  const DescPtr p = g.pointwise(CUDNN_POINTWISE_DIV, e, z, g.temp(bnts, g.io_type()));
  g.matmul(p, g.k_like(kV, false), g.q_like(kO));
}

// Backward from the stats: P = exp(logits - stats), dV = P^T dO, dP = dO V^T,
// dS = P (dP - rowsum(dO O)) scale, dQ = dS K, dK = dS^T Q.
void build_backward(Graph& g, const compiler::SdpaCall& c) {
  const auto& d = c.dims;
  const std::vector<int64_t> bnt1{d.B, d.N, d.T, 1}, bnts{d.B, d.N, d.T, d.S},
      bnst{d.B, d.N, d.S, d.T}, one{1, 1, 1, 1};
  const DescPtr q = g.q_like(kQ);
  const DescPtr s = g.logits(q, g.k_like(kK, true));
  const DescPtr p =
      g.pointwise(CUDNN_POINTWISE_EXP, g.pointwise(CUDNN_POINTWISE_SUB, s, g.stats(), g.temp(bnts)),
                  nullptr, g.temp(bnts, g.io_type()));
  const DescPtr pt = g.reshape(p, g.view(g.io_type(), bnst, {d.N * d.S * d.T, d.S * d.T, 1, d.S}));
  const DescPtr dout = g.q_like(kDO);
  g.matmul(pt, dout, g.k_like(kDV, false));
  const DescPtr vt = g.k_like(kV, true);
  const DescPtr dp = g.matmul(dout, vt, g.temp(bnts));
  const DescPtr delta =
      g.reduce(CUDNN_REDUCE_TENSOR_ADD,
               g.pointwise(CUDNN_POINTWISE_MUL, dout, g.q_like(kO), g.temp({d.B, d.N, d.T, d.H})),
               g.temp(bnt1));
  const DescPtr ds0 =
      g.pointwise(CUDNN_POINTWISE_MUL, p, g.pointwise(CUDNN_POINTWISE_SUB, dp, delta, g.temp(bnts)),
                  g.temp(bnts));
  const DescPtr ds =
      g.pointwise(CUDNN_POINTWISE_MUL, ds0, g.tensor(kDScale, CUDNN_DATA_FLOAT, one, one, true),
                  g.temp(bnts, g.io_type()));
  g.matmul(ds, g.k_like(kK, false), g.q_like(kDQ));
  const DescPtr dst =
      g.reshape(ds, g.view(g.io_type(), bnst, {d.N * d.S * d.T, d.S * d.T, 1, d.S}));
  g.matmul(dst, q, g.k_like(kDK, false));
}

// A finalized execution plan of one call's graph and its workspace size.
struct Plan {
  std::vector<DescPtr> owned;
  DescPtr plan;
  int64_t workspace = 0;
};

using PlanKey = std::tuple<bool, DType, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, bool, bool, bool, const Device*>;

std::mutex& plan_mu() {
  static std::mutex m;
  return m;
}
std::map<PlanKey, std::shared_ptr<const Plan>>& plans() {
  static std::map<PlanKey, std::shared_ptr<const Plan>> p;
  return p;
}

std::shared_ptr<const Plan> plan_for(const compiler::SdpaCall& c, const Device& device) {
  const auto& d = c.dims;
  const PlanKey key{c.backward,
                    c.dtype,
                    d.B,
                    d.T,
                    d.N,
                    d.H,
                    d.S,
                    d.K,
                    d.bias_b,
                    d.bias_n,
                    c.config.causal,
                    c.config.has_bias,
                    c.config.has_seq_lengths,
                    &device};
  {
    std::lock_guard<std::mutex> lock(plan_mu());
    auto it = plans().find(key);
    if (it != plans().end()) return it->second;
  }
  auto plan = std::make_shared<Plan>();
  Graph g(c);
  if (c.backward)
    build_backward(g, c);
  else
    build_forward(g, c);
  const cudnnHandle_t h = handle_for(device);
  auto graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, h)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.ops())
      .finalize();
  auto heur = std::make_shared<Desc>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur->set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, graph->get())
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A)
      .finalize();
  constexpr int64_t kMaxConfigs = 8;
  std::vector<DescPtr> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < kMaxConfigs; ++i) {
    cfgs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->get());
  }
  int64_t found = 0;
  CUJAX_DNN_CHECK(dnn().get_attr(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxConfigs, &found, raw.data()));
  // The first configuration whose plan finalizes is supported.
  std::string last_error = "the heuristics returned no engine";
  for (int64_t i = 0; i < found && !plan->plan; ++i) {
    auto p = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    try {
      p->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, h)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw[i])
          .finalize();
      int64_t n = 0;
      CUJAX_DNN_CHECK(dnn().get_attr(p->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &n, &plan->workspace));
      plan->plan = p;
    } catch (const CudaError& e) {
      last_error = e.what();
    }
  }
  if (!plan->plan)
    throw CudaError(std::string(c.backward ? compiler::kSdpaBackward : compiler::kSdpaForward) +
                    ": cuDNN has no engine for this attention graph (B=" + std::to_string(d.B) +
                    " T=" + std::to_string(d.T) + " S=" + std::to_string(d.S) +
                    " N=" + std::to_string(d.N) + " K=" + std::to_string(d.K) +
                    " H=" + std::to_string(d.H) + "): " + last_error);
  plan->owned = std::move(g.owned);
  plan->owned.insert(plan->owned.end(), {graph, heur});
  plan->owned.insert(plan->owned.end(), cfgs.begin(), cfgs.end());
  std::lock_guard<std::mutex> lock(plan_mu());
  return plans().emplace(key, plan).first->second;
}

}  // namespace

long cudnn_version(std::string* error) {
  try {
    return static_cast<long>(dnn().get_version());
  } catch (const Error& e) {
    if (error) *error = e.what();
    return 0;
  }
}

runtime::FusedAttentionSupport cudnn_attention_support(int compute_capability) {
  runtime::FusedAttentionSupport s;
  s.reference = false;
  s.compute_capability = compute_capability;
  s.cudnn_version = cudnn_version(&s.cudnn_error);
  return s;
}

size_t cudnn_plan_count() {
  std::lock_guard<std::mutex> lock(plan_mu());
  return plans().size();
}

DeviceKernel cudnn_sdpa_kernel(const ir::Operation& op, const std::shared_ptr<Device>& device) {
  const compiler::SdpaCall c = compiler::sdpa_call(op);
  Device* dev = device.get();
  const ir::Type q = op.operands[0]->type, k = op.operands[1]->type;
  const ir::Type stats = ir::Type::tensor({c.dims.B, c.dims.N, c.dims.T}, DType::F32);
  return [c, dev, q, k, stats](std::span<const DeviceArray> in) {
    const std::shared_ptr<const Plan> plan = plan_for(c, *dev);
    const float scale = static_cast<float>(c.config.scale), neg = -0.7f * FLT_MAX;
    std::vector<int64_t> uids;
    std::vector<void*> ptrs;
    auto add = [&](int64_t uid, const void* p) {
      uids.push_back(uid);
      ptrs.push_back(const_cast<void*>(p));
    };
    add(kQ, in[0].data.get());
    add(kK, in[1].data.get());
    add(kV, in[2].data.get());
    add(kScale, &scale);
    if (c.config.causal || c.config.has_seq_lengths) add(kNeg, &neg);  // masks only
    size_t at = 3;
    if (c.config.has_bias) add(kBias, in[at++].data.get());
    if (c.config.has_seq_lengths) {
      add(kQLen, in[at++].data.get());
      add(kKvLen, in[at++].data.get());
    }
    std::vector<DeviceArray> out;
    out.push_back(dev->allocate(q.dtype, q.shape));
    if (c.backward) {
      out.push_back(dev->allocate(k.dtype, k.shape));
      out.push_back(dev->allocate(k.dtype, k.shape));
      add(kO, in[at].data.get());
      add(kStats, in[at + 1].data.get());
      add(kDO, in[at + 2].data.get());
      add(kDQ, out[0].data.get());
      add(kDK, out[1].data.get());
      add(kDV, out[2].data.get());
      add(kDScale, &scale);
    } else {
      out.push_back(dev->allocate(DType::F32, stats.shape));
      add(kO, out[0].data.get());
      add(kStats, out[1].data.get());
    }
    void* workspace =
        plan->workspace > 0 ? dev->workspace(static_cast<size_t>(plan->workspace)) : nullptr;
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids)
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs)
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace)
        .finalize();
    const cudnnHandle_t h = handle_for(*dev);
    CUJAX_DNN_CHECK(dnn().set_stream(h, dev->stream()));
    CUJAX_DNN_CHECK(dnn().execute(h, plan->plan->get(), pack.get()));
    if (!c.backward && !c.with_stats) out.pop_back();
    return out;
  };
}

}  // namespace cujax::cuda
