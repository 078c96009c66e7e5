#include "backends/cuda/cudnn_attention.h"

#include <cudnn.h>

#include <algorithm>
#include <cfloat>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/driver/library_search.h"
#include "backends/cuda/library.h"
#include "compiler/sdpa_call.h"
#include "compiler/sdpa_graph.h"

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
    // cuDNN 9 opens its sub-libraries by soname: loading them from the folder it is found in
    // keeps a pip-installed cuDNN from picking up another one's.
    LibraryOptions options;
    options.setting = kCudnnDirSetting;
    for (const char* sub : {"graph", "engines_runtime_compiled", "engines_precompiled", "heuristic",
                            "ops", "cnn", "adv"})
      options.companions.push_back(std::string("libcudnn_") + sub + ".so." +
                                   std::to_string(CUDNN_MAJOR));
    Library lib("libcudnn.so." + std::to_string(CUDNN_MAJOR),
                "cuDNN, needed for nn.dot_product_attention(implementation='cudnn')",
                "install cuDNN " + std::to_string(CUDNN_MAJOR) + " (or its pip wheel) and set " +
                    kCudnnDirSetting + " to its lib folder",
                options);
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

namespace g = compiler::sdpa_graph;

cudnnDataType_t data_type(g::DataType t) {
  switch (t) {
    case g::DataType::kFloat:
      return CUDNN_DATA_FLOAT;
    case g::DataType::kHalf:
      return CUDNN_DATA_HALF;
    case g::DataType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case g::DataType::kInt32:
      return CUDNN_DATA_INT32;
    case g::DataType::kBoolean:
      return CUDNN_DATA_BOOLEAN;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnPointwiseMode_t pointwise_mode(g::PointwiseMode m) {
  switch (m) {
    case g::PointwiseMode::kAdd:
      return CUDNN_POINTWISE_ADD;
    case g::PointwiseMode::kSub:
      return CUDNN_POINTWISE_SUB;
    case g::PointwiseMode::kMul:
      return CUDNN_POINTWISE_MUL;
    case g::PointwiseMode::kDiv:
      return CUDNN_POINTWISE_DIV;
    case g::PointwiseMode::kExp:
      return CUDNN_POINTWISE_EXP;
    case g::PointwiseMode::kLog:
      return CUDNN_POINTWISE_LOG;
    case g::PointwiseMode::kIdentity:
      return CUDNN_POINTWISE_IDENTITY;
    case g::PointwiseMode::kGenIndex:
      return CUDNN_POINTWISE_GEN_INDEX;
    case g::PointwiseMode::kCmpLt:
      return CUDNN_POINTWISE_CMP_LT;
    case g::PointwiseMode::kCmpGe:
      return CUDNN_POINTWISE_CMP_GE;
    case g::PointwiseMode::kLogicalAnd:
      return CUDNN_POINTWISE_LOGICAL_AND;
    case g::PointwiseMode::kBinarySelect:
      return CUDNN_POINTWISE_BINARY_SELECT;
  }
  return CUDNN_POINTWISE_IDENTITY;
}

// A description's backend descriptors: one per tensor id, one per op.
struct Realized {
  std::vector<DescPtr> owned;
  std::vector<cudnnBackendDescriptor_t> ops;
};

Realized realize(const g::Graph& graph) {
  Realized r;
  std::map<int64_t, DescPtr> tensors;
  auto keep = [&](cudnnBackendDescriptorType_t type) {
    r.owned.push_back(std::make_shared<Desc>(type));
    return r.owned.back();
  };
  for (const g::Tensor& t : graph.tensors) {
    auto d = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, data_type(t.type))
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.dims)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.strides)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, t.uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, int64_t{16})
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, t.is_virtual);
    if (t.by_value) d->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
    d->finalize();
    tensors[t.uid] = d;
  }
  auto at = [&](int64_t uid) { return tensors.at(uid)->get(); };
  for (const g::Op& op : graph.ops) {
    DescPtr o;
    switch (op.kind) {
      case g::OpKind::kPointwise: {
        auto pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, pointwise_mode(op.pointwise))
            .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, data_type(op.compute_type));
        if (op.axis >= 0) pw->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, op.axis);
        pw->finalize();
        o = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR,
               pw->get())
            .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.inputs[0]))
            .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.output));
        if (op.inputs.size() > 1)
          o->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.inputs[1]));
        if (op.inputs.size() > 2)
          o->set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.inputs[2]));
        break;
      }
      case g::OpKind::kReduction: {
        auto red = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        red->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
                 op.reduction == g::ReductionMode::kMax ? CUDNN_REDUCE_TENSOR_MAX
                                                        : CUDNN_REDUCE_TENSOR_ADD)
            .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT)
            .finalize();
        o = keep(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, red->get())
            .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.inputs[0]))
            .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.output));
        break;
      }
      case g::OpKind::kMatmul: {
        auto mm = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        mm->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT).finalize();
        o = keep(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, mm->get())
            .set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, at(op.inputs[0]))
            .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, at(op.inputs[1]))
            .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, at(op.output));
        if (op.m_override)
          o->set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.m_override));
        if (op.n_override)
          o->set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.n_override));
        if (op.k_override)
          o->set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 at(op.k_override));
        break;
      }
      case g::OpKind::kReshape:
        o = keep(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        o->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, at(op.inputs[0]))
            .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, at(op.output));
        break;
    }
    r.ops.push_back(o->finalize().get());
  }
  return r;
}

// A finalized execution plan of one call's graph. The workspace holds the graph's real
// intermediates first, then cuDNN's own.
struct Plan {
  g::Graph graph;
  std::vector<DescPtr> owned;
  DescPtr plan;
  int64_t cudnn_workspace = 0;
  int64_t workspace() const {
    return graph.workspace_bytes + (cudnn_workspace > 0 ? cudnn_workspace : 0);
  }
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

// The engine configurations `mode`'s heuristics offer for `graph`; a failed query is recorded
// in `failures`.
std::vector<DescPtr> engine_configs(const DescPtr& graph, cudnnBackendHeurMode_t mode,
                                    const char* mode_name, std::string& failures) {
  constexpr int64_t kMaxConfigs = 16;
  std::vector<DescPtr> cfgs;
  try {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, graph->get())
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode)
        .finalize();
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < kMaxConfigs; ++i) {
      cfgs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(cfgs.back()->get());
    }
    int64_t found = 0;
    CUJAX_DNN_CHECK(dnn().get_attr(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxConfigs, &found, raw.data()));
    cfgs.resize(static_cast<size_t>(std::clamp<int64_t>(found, 0, kMaxConfigs)));
    if (cfgs.empty()) failures += std::string("\n  heuristics ") + mode_name + ": no engine";
  } catch (const CudaError& e) {
    failures += std::string("\n  heuristics ") + mode_name + ": " + e.what();
    cfgs.clear();
  }
  return cfgs;
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
  plan->graph = g::describe(c);
  Realized r = realize(plan->graph);
  const cudnnHandle_t h = handle_for(device);
  auto graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, h)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, r.ops)
      .finalize();
  // The first configuration whose plan finalizes, from heuristics mode A, then the fallback
  // list as cuDNN's samples do; every failure is kept for the message.
  std::string failures;
  std::vector<DescPtr> tried;
  for (auto [mode, name] :
       {std::pair{CUDNN_HEUR_MODE_A, "mode A"}, std::pair{CUDNN_HEUR_MODE_FALLBACK, "fallback"}}) {
    const std::vector<DescPtr> cfgs = engine_configs(graph, mode, name, failures);
    for (size_t i = 0; i < cfgs.size() && !plan->plan; ++i) {
      auto p = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      try {
        p->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, h)
            .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 cfgs[i]->get())
            .finalize();
        int64_t n = 0;
        CUJAX_DNN_CHECK(dnn().get_attr(p->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &n, &plan->cudnn_workspace));
        plan->plan = p;
      } catch (const CudaError& e) {
        failures +=
            std::string("\n  ") + name + " engine config " + std::to_string(i) + ": " + e.what();
      }
    }
    tried.insert(tried.end(), cfgs.begin(), cfgs.end());
    if (plan->plan) break;
  }
  if (!plan->plan)
    throw CudaError(std::string(c.backward ? compiler::kSdpaBackward : compiler::kSdpaForward) +
                    ": cuDNN " + std::to_string(dnn().get_version()) +
                    " has no engine for this attention graph (B=" + std::to_string(d.B) +
                    " T=" + std::to_string(d.T) + " S=" + std::to_string(d.S) +
                    " N=" + std::to_string(d.N) + " K=" + std::to_string(d.K) +
                    " H=" + std::to_string(d.H) + (c.config.causal ? ", causal" : "") +
                    (c.config.has_bias ? ", bias" : "") +
                    (c.config.has_seq_lengths ? ", sequence lengths" : "") + "):" + failures);
  plan->owned = std::move(r.owned);
  plan->owned.push_back(graph);
  plan->owned.insert(plan->owned.end(), tried.begin(), tried.end());
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
  if (c.backward && device) {
    const std::string why = g::known_bad_backward(cudnn_version(nullptr));
    if (!why.empty()) throw UnsupportedError(std::string(compiler::kSdpaBackward) + ": " + why);
  }
  Device* dev = device.get();
  const ir::Type q = op.operands[0]->type, k = op.operands[1]->type;
  const ir::Type stats = ir::Type::tensor({c.dims.B, c.dims.N, c.dims.T}, DType::F32);
  return [c, dev, q, k, stats](std::span<const DeviceArray> in) {
    const std::shared_ptr<const Plan> plan = plan_for(c, *dev);
    const float scale = static_cast<float>(c.config.scale), fill = -0.7f * FLT_MAX, one = 1;
    std::map<int64_t, const void*> bound{{g::kQ, in[0].data.get()}, {g::kK, in[1].data.get()},
                                         {g::kV, in[2].data.get()}, {g::kScale, &scale},
                                         {g::kMaskFill, &fill},     {g::kOne, &one}};
    size_t at = 3;
    if (c.config.has_bias) bound[g::kBias] = in[at++].data.get();
    if (c.config.has_seq_lengths) {
      bound[g::kQLen] = in[at++].data.get();
      bound[g::kKvLen] = in[at++].data.get();
    }
    std::vector<DeviceArray> out;
    out.push_back(dev->allocate(q.dtype, q.shape));
    if (c.backward) {
      out.push_back(dev->allocate(k.dtype, k.shape));
      out.push_back(dev->allocate(k.dtype, k.shape));
      bound[g::kO] = in[at].data.get();
      bound[g::kStats] = in[at + 1].data.get();
      bound[g::kDO] = in[at + 2].data.get();
      bound[g::kDQ] = out[0].data.get();
      bound[g::kDK] = out[1].data.get();
      bound[g::kDV] = out[2].data.get();
    } else {
      out.push_back(dev->allocate(DType::F32, stats.shape));
      bound[g::kO] = out[0].data.get();
      bound[g::kStats] = out[1].data.get();
    }
    // With sequence lengths the products stop at each row's length and leave padded rows
    // unwritten; pool memory is not zeroed, and NaN * 0 is NaN in a caller's mask.
    if (c.config.has_seq_lengths)
      for (const DeviceArray& o : out)
        CUJAX_CUDA_CHECK(cudaMemsetAsync(o.data.get(), 0, o.nbytes(), dev->stream()));
    char* workspace =
        plan->workspace() > 0
            ? static_cast<char*>(dev->workspace(static_cast<size_t>(plan->workspace())))
            : nullptr;
    std::vector<int64_t> uids;
    std::vector<void*> ptrs;
    for (const g::Tensor& t : plan->graph.tensors) {
      if (t.is_virtual) continue;
      void* p = nullptr;
      if (t.workspace_offset >= 0) {
        p = workspace + t.workspace_offset;
        if (t.uid == g::kDQAccum)  // accumulated into, so it starts at zero
          CUJAX_CUDA_CHECK(cudaMemsetAsync(
              p, 0, static_cast<size_t>(t.dims[0] * t.strides[0]) * sizeof(float), dev->stream()));
      } else {
        auto it = bound.find(t.uid);
        if (it == bound.end())
          throw CudaError("cuDNN attention graph: tensor id " + std::to_string(t.uid) +
                          " has no buffer");
        p = const_cast<void*>(it->second);
      }
      uids.push_back(t.uid);
      ptrs.push_back(p);
    }
    void* cudnn_workspace =
        plan->cudnn_workspace > 0 ? workspace + plan->graph.workspace_bytes : nullptr;
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids)
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs)
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, cudnn_workspace)
        .finalize();
    const cudnnHandle_t h = handle_for(*dev);
    CUJAX_DNN_CHECK(dnn().set_stream(h, dev->stream()));
    CUJAX_DNN_CHECK(dnn().execute(h, plan->plan->get(), pack.get()));
    if (!c.backward && !c.with_stats) out.pop_back();
    return out;
  };
}

}  // namespace cujax::cuda
