// The two compiled functions a serving engine runs, and the serving bundle that carries them
// without the model's source code.
//
// decode: one step of every slot, (cache, tokens (B, 1), positions (B,), seeds (B,),
//         temperatures (B,), top_k (B,), top_p (B,)) -> (next tokens (B,), cache).
// prefill: one slot's prompt padded to a bucket L, (cache, tokens (1, L), slot (), length (),
//         seeds (1,), temperatures (1,), top_k (1,), top_p (1,)) -> (next token (1,), cache).
// The cache is blocks.<i>.key and blocks.<i>.value, (max_batch, heads, max_seq, head_dim) per
// layer (each slot's keys of a head contiguous, as attention reads them); a step's new cache
// replaces the old one. Tokens are drawn as models::generate draws them (fold_in(PRNGKey(seed),
// position)), so a seeded request gives the same tokens either way.
//
// jit_steps() jits them from a model and its parameters. export_steps() exports them (the
// decode step and one prefill per bucket, as jax.export artifacts taking the parameters as
// their first argument) into one bundle file with the parameters stored once; load_steps()
// reads it back and runs it with no model at hand. The format is in docs/serving.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cujax/export.h"
#include "cujax/models/transformer.h"

namespace cujax::serve {

// The bundle format this cujax writes and the only one it reads (2: the steps take top_p; 3:
// the cache is (max_batch, heads, max_seq, head_dim)).
inline constexpr int kServeBundleVersion = 3;

struct ServeSteps {
  using Decode = std::function<std::pair<Array, State>(
      const State& cache, const Array& tokens, const Array& positions, const Array& seeds,
      const Array& temperatures, const Array& top_k, const Array& top_p)>;
  using Prefill = std::function<std::pair<Array, State>(
      const State& cache, const Array& tokens, const Array& slot, const Array& length,
      const Array& seeds, const Array& temperatures, const Array& top_k, const Array& top_p)>;

  int64_t max_batch = 0;  // B
  int64_t max_seq = 0;    // the cache's length: prompt + generated tokens
  int64_t vocab_size = 0;
  std::vector<int64_t> buckets;  // prefill lengths, ascending, the last one max_seq
  State cache;                   // the initial cache (zeros)
  Decode decode;
  Prefill prefill;  // for tokens of any length in `buckets`
};

// The sampler's parts, for tests. gumbel_noise: (B, vocab) f32 noise, row b the bits of
// random::gumbel(fold_in(PRNGKey(seeds[b]), positions[b] + 1), (vocab,)), with each threefry
// hash one op; seeds and positions are i32 (B,). row_argmax: each row's argmax of x (B, V) as i32
// (B,), the index lax::argmax gives (the first of equal maxima; a row's first NaN where it holds
// one).
Array gumbel_noise(const Array& seeds, const Array& positions, int64_t vocab);
Array row_argmax(const Array& x);

// Prefill lengths for a context of max_seq: 16, 32, 64, ... below max_seq, then max_seq.
std::vector<int64_t> prefill_buckets(int64_t max_seq);

// max_seq defaults to the model's max_len and must be in [2, max_len]; max_batch >= 1. The
// model must outlive the steps. Each function compiles on its first call.
ServeSteps jit_steps(models::TransformerLM& model, State params, int64_t max_batch,
                     std::optional<int64_t> max_seq = std::nullopt);

// The bundle's programs: "decode", then "prefill.L" per bucket L, exported for `params`'
// shapes (which may be abstract: under nnx.eval_shape's trace, nothing is computed).
std::vector<std::pair<std::string, Exported>> export_step_programs(models::TransformerLM& model,
                                                                   const State& params,
                                                                   int64_t max_batch,
                                                                   int64_t max_seq);
// Writes the bundle for (model, params, max_batch, max_seq) to `path` atomically.
void export_steps(models::TransformerLM& model, const State& params, int64_t max_batch,
                  int64_t max_seq, const std::string& path);
// Throws Error naming the file for bad magic, an unknown version, truncation, a checksum
// mismatch, or members that disagree with the header. Each function compiles on its first call.
ServeSteps load_steps(const std::string& path);

}  // namespace cujax::serve
