#include "backends/common/rng_bit_generator.h"

#include <string>

#include "cujax/core/error.h"
#include "cujax/ir/ir.h"

namespace cujax::rng_bits {

namespace {

[[noreturn]] void reject(const ir::Operation& op, const std::string& message) {
  throw UnsupportedError(op.where() + ": " + message);
}

// XLA's SplitShapeIntoHalves for 32-bit and narrower THREE_FRY outputs: the first even
// dimension, else the first largest one, is split into pairs.
void split_in_halves(const Shape& shape, Plan& p) {
  if (shape.empty()) return;  // a scalar takes the first word of one block
  int64_t dim = -1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] % 2 == 0) {
      dim = static_cast<int64_t>(i);
      break;
    }
  if (dim < 0)
    for (size_t i = 0; i < shape.size(); ++i)
      if (dim < 0 || shape[i] > shape[dim]) dim = static_cast<int64_t>(i);
  for (int64_t i = 0; i < dim; ++i) p.pre *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i) p.post *= shape[i];
  p.len = shape[dim];
  p.half = (p.len + 1) / 2;
}

}  // namespace

Plan plan(const ir::Operation& op) {
  if (op.operands.size() != 1 || op.results.size() != 2)
    reject(op, "takes an initial state and returns (output_state, output)");
  Plan p;  // DEFAULT is PHILOX on XLA's CPU and GPU backends
  if (const ir::Attribute* a = op.attr("rng_algorithm")) {
    if (a->kind != ir::Attribute::Kind::Enum) reject(op, "`rng_algorithm` must be an enum");
    if (a->enum_value == "THREE_FRY")
      p.algorithm = Algorithm::ThreeFry;
    else if (a->enum_value != "PHILOX" && a->enum_value != "DEFAULT")
      reject(op, "unknown rng_algorithm " + a->enum_value);
  }
  const ir::Type state_type = op.operands[0]->type;
  if (state_type.is_token || state_type.rank() != 1 || size_of(state_type.dtype) != 8 ||
      !is_integer(state_type.dtype))
    reject(op, "initial_state must be a 1-dimensional ui64 tensor, got " + state_type.str());
  const int64_t words = state_type.shape[0];
  if (p.algorithm == Algorithm::ThreeFry && words != 2)
    reject(op, "THREE_FRY needs a state of 2 words, got " + std::to_string(words));
  if (p.algorithm == Algorithm::Philox && words != 2 && words != 3)
    reject(op, "PHILOX needs a state of 2 or 3 words, got " + std::to_string(words));
  if (op.result(0)->type != state_type) reject(op, "output_state must have the state's type");
  const ir::Type out_type = op.result(1)->type;
  if (out_type.is_token || out_type.dtype == DType::Bool)
    reject(op, "output must be a tensor of integer or floating-point type");
  p.state_words = static_cast<int>(words);
  p.width = static_cast<int>(size_of(out_type.dtype));
  p.count = num_elements(out_type.shape);
  if (p.algorithm == Algorithm::ThreeFry) {
    if (p.width == 8) {
      p.blocks = p.count;
    } else {
      split_in_halves(out_type.shape, p);
      p.blocks = p.pre * p.half * p.post;
    }
  } else {
    const int64_t per_block = p.width == 8 ? 2 : 4;
    p.blocks = (p.count + per_block - 1) / per_block;
  }
  return p;
}

}  // namespace cujax::rng_bits
