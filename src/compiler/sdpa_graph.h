// The operation graphs cuDNN's fused attention runs for @cujax.cudnn_sdpa and its backward,
// described without cuDNN: tensors (unique ids, data types, dims, strides, virtual or real) and
// the pointwise, reduction, matmul and reshape ops between them, in the structure cuDNN's flash
// attention engines match (the one NVIDIA's cudnn-frontend builds). backends/cuda/
// cudnn_attention.cpp turns a description into backend descriptors, one per tensor id; tests
// check a description's properties on any machine.
//
// Layouts: q, o, dO, dQ (B, N, T, H) views of BTNH memory; k, v, dK, dV (B, K, S, H) views of
// BSKH memory, k and v given to cuDNN transposed, (B, K, H, S); stats (B, N, T, 1) f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/sdpa_call.h"

namespace cujax::compiler::sdpa_graph {

enum class DataType { kFloat, kHalf, kBFloat16, kInt32, kBoolean };
enum class OpKind { kPointwise, kReduction, kMatmul, kReshape };
enum class PointwiseMode {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kExp,
  kLog,
  kIdentity,
  kGenIndex,
  kCmpLt,
  kCmpGe,
  kLogicalAnd,
  kBinarySelect
};
enum class ReductionMode { kMax, kAdd };

// The unique ids of the tensors cujax binds in the variant pack; virtual ones count from
// kFirstVirtual.
enum Uid : int64_t {
  kQ = 1,
  kK,  // given transposed: (B, K, H, S)
  kV,  // (B, K, S, H) forward, transposed (B, K, H, S) backward
  kO,
  kStats,
  kBias,
  kQLen,
  kKvLen,
  kScale,     // by value: the attention scale
  kMaskFill,  // by value: what masked logits become
  kOne,       // by value: 1
  kDO,
  kDQ,
  kDK,
  kDV,
  kRowSum,   // backward, real f32 in the workspace: rowsum(dO * O)
  kDQAccum,  // backward, real f32 in the workspace: dQ before its conversion
  kFirstVirtual = 100
};

struct Tensor {
  int64_t uid = 0;
  DataType type = DataType::kFloat;
  std::vector<int64_t> dims, strides;
  bool is_virtual = false;
  bool by_value = false;          // a host scalar passed in the variant pack
  int64_t workspace_offset = -1;  // a real intermediate cujax places in the workspace
};

struct Op {
  OpKind kind = OpKind::kPointwise;
  std::string name;  // for messages and tests
  PointwiseMode pointwise = PointwiseMode::kIdentity;
  ReductionMode reduction = ReductionMode::kAdd;
  DataType compute_type = DataType::kFloat;
  int64_t axis = -1;            // kGenIndex's axis
  std::vector<int64_t> inputs;  // pointwise x [, b [, t]]; matmul a, b; reduction, reshape x
  int64_t output = 0;
  // Matmul: the uids of per-batch extents that bound M, N and K (sequence lengths); 0: none.
  int64_t m_override = 0, n_override = 0, k_override = 0;
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  // Bytes of the real intermediates (kRowSum, kDQAccum) at the workspace's start; cuDNN's own
  // workspace follows, kWorkspaceAlignment-aligned.
  int64_t workspace_bytes = 0;
  const Tensor& tensor(int64_t uid) const;
};

inline constexpr int64_t kWorkspaceAlignment = 256;

// The graph of a forward or backward call (`call.backward`).
Graph describe(const SdpaCall& call);

// cuDNN 9.10.0 and 9.10.1 compute fused attention's backward wrongly; cudnn-frontend refuses
// them. The reason to give for `version` (91001 for 9.10.1), or empty when it is not one.
std::string known_bad_backward(long cudnn_version);

}  // namespace cujax::compiler::sdpa_graph
