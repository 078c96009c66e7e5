#include <cstdio>
#include <filesystem>
#include <string_view>

#include "cli/args.h"
#include "cli/export_model.h"
#include "cli/model_dir.h"
#include "cujax/export.h"
#include "cujax/models/lm.h"
#include "cujax/serve/steps.h"

namespace cujax::cli {

namespace {

// The parameters are constants of the module (closed over), so the artifact is self-contained:
// tokens in, logits out.
Exported export_forward(LoadedModel& m, int64_t batch, int64_t seq) {
  models::TransformerLM& model = *m.model;
  const State params = m.params;
  JitOptions o;
  o.name = "forward";
  o.arg_names = {"tokens"};
  auto forward = jit(
      [&model, params](const Array& tokens) {
        return nnx::functional_call(model, params, [&] { return model(tokens); });
      },
      o);
  return export_(forward, ShapeDtype{{batch, seq}, DType::I32});
}

// One decoding position with the KV cache as explicit state: (cache, token (B, 1), position)
// -> (logits (B, V), cache). The cache starts as zeros (its leaves are listed by cujax run).
Exported export_generate_step(LoadedModel& m, int64_t batch) {
  models::TransformerLM& model = *m.model;
  model.init_cache(batch);
  const State cache = nnx::state(model, nnx::VariableKind::Cache);
  const State params = m.params;
  JitOptions o;
  o.name = "generate_step";
  o.arg_names = {"cache", "token", "position"};
  auto step = jit(
      [&model, params](const State& cache, const Array& token, const Array& position) {
        State both = params;
        for (const auto& [path, value] : cache) both.set(path, value);
        return nnx::functional_call(model, both, nnx::VariableKind::Cache,
                                    [&] { return model.decode_step(token, position); });
      },
      o);
  return export_(step, cache, ShapeDtype{{batch, 1}, DType::I32}, ShapeDtype{{}, DType::I32});
}

// --fn serve: the decode step and one prefill per bucket of `cujax serve`, with the parameters
// stored once beside them (serve/steps.h, docs/serving.md).
int export_serve(const Args& args, LoadedModel& m, const std::string& out) {
  const int64_t max_batch = args.integer("max-batch", 4, 1);
  const int64_t max_seq = args.integer("max-seq", m.config.max_len, 2);
  if (max_seq > m.config.max_len)
    throw UsageError("--max-seq " + std::to_string(max_seq) + " exceeds the model's max_len " +
                     std::to_string(m.config.max_len));
  serve::export_steps(*m.model, m.params, max_batch, max_seq, out);
  std::string buckets;
  for (int64_t L : serve::prefill_buckets(max_seq))
    buckets += (buckets.empty() ? "" : ", ") + std::to_string(L);
  std::printf(
      "exported serve of %s (step %lld) to %s: decode step for max-batch %lld, prefill for %s "
      "(max-seq %lld), %lld bytes\n",
      args.string("model", "").c_str(), static_cast<long long>(m.step), out.c_str(),
      static_cast<long long>(max_batch), buckets.c_str(), static_cast<long long>(max_seq),
      static_cast<long long>(std::filesystem::file_size(out)));
  return 0;
}

}  // namespace

int export_command(const std::vector<std::string>& argv) {
  const Args args(
      {"export",
       "a trained model as a portable artifact with its weights, or as a serving bundle",
       {{"model", "DIR", "a cujax train --out folder (required)"},
        {"out", "FILE", "the artifact written (required)"},
        {"fn", "forward|generate_step|serve", "the function exported (default: forward)"},
        {"batch", "B", "forward, generate_step: the batch (default: 1)"},
        {"seq", "T", "forward, generate_step: the sequence length (default: the model's)"},
        {"max-batch", "B", "serve: the most requests decoded at once (default: 4)"},
        {"max-seq", "T", "serve: the longest prompt plus completion (default: the model's)"},
        {"format", "cujax|jax",
         "forward, generate_step: cujax's artifact (default) or jax.export's serialization, "
         "which jax.export.deserialize loads (one platform: --platform's, default cpu)"},
        platform_option()}},
      argv);
  // Where the model loads and traces; the artifact runs on every platform it lists.
  use_platform(args);
  if (!args.has("model")) throw UsageError("--model DIR is required (a cujax train --out folder)");
  if (!args.has("out")) throw UsageError("--out FILE is required");
  const std::string fn = args.string("fn", "forward");
  if (fn != "forward" && fn != "generate_step" && fn != "serve")
    throw UsageError("--fn must be forward, generate_step or serve, got '" + fn + "'");
  // Each function has its own shape options; a misplaced one would be silently ignored.
  for (const char* o : {"batch", "seq", "max-batch", "max-seq"}) {
    const bool of_serve = std::string_view(o).starts_with("max-");
    if (args.has(o) && of_serve != (fn == "serve"))
      throw UsageError(std::string("--") + o + " is an option of " +
                       (of_serve ? "--fn serve" : "--fn forward and generate_step") + ", not of " +
                       fn);
  }
  LoadedModel m = load_model_dir(args.string("model", ""));
  const std::string out = args.string("out", "");
  if (fn == "serve" && args.has("format"))
    throw UsageError("--format is an option of --fn forward and generate_step, not of serve");
  if (fn == "serve") return export_serve(args, m, out);
  const int64_t batch = args.integer("batch", 1, 1);
  const int64_t seq = args.integer("seq", m.config.max_len, 1);
  if (seq > m.config.max_len)
    throw UsageError("--seq " + std::to_string(seq) + " exceeds the model's max_len " +
                     std::to_string(m.config.max_len));
  const Exported e =
      fn == "forward" ? export_forward(m, batch, seq) : export_generate_step(m, batch);
  const std::string format = args.string("format", "cujax");
  if (format == "jax")
    e.save_jax(out,
               args.string("platform", "cpu").substr(0, args.string("platform", "cpu").find(',')));
  else if (format == "cujax")
    e.save(out);
  else
    throw UsageError("--format must be cujax or jax, got '" + format + "'");
  std::printf("exported %s of %s (step %lld) to %s: %zu inputs, %zu outputs, %lld bytes\n",
              fn.c_str(), args.string("model", "").c_str(), static_cast<long long>(m.step),
              out.c_str(), e.in_leaves().size(), e.out_leaves().size(),
              static_cast<long long>(std::filesystem::file_size(out)));
  return 0;
}

}  // namespace cujax::cli
