#include "cli/generate.h"

#include <cstdio>

#include "cli/args.h"
#include "cli/model_dir.h"
#include "cujax/data.h"
#include "cujax/models/lm.h"

namespace cujax::cli {

int generate_command(const std::vector<std::string>& argv) {
  const Args args({"generate",
                   "sample text from a trained model, with the KV cache",
                   {{"model", "DIR", "a cujax train --out folder (required)"},
                    {"prompt", "TEXT", "the text continued (default: a newline)"},
                    {"max-tokens", "N", "tokens sampled (default: 200)"},
                    {"temperature", "T", "0 for greedy decoding (default: 0.8)"},
                    {"top-k", "K", "sample from the K most likely tokens, 0 for all (default: 0)"},
                    {"seed", "S", "the sampling key's seed (default: 0)"},
                    platform_option(),
                    profile_option()}},
                  argv);
  use_platform(args);  // the decode step's jit follows the default backend
  const ProfileOption profile(args);
  if (!args.has("model")) throw UsageError("--model DIR is required (a cujax train --out folder)");
  models::SampleOptions o;
  o.max_tokens = args.integer("max-tokens", 200, 1);
  o.temperature = args.number("temperature", 0.8, 0);
  o.top_k = args.integer("top-k", 0, 0);
  o.seed = static_cast<uint64_t>(args.integer("seed", 0, 0));
  const std::string prompt = args.string("prompt", "\n");
  if (prompt.empty()) throw UsageError("--prompt must not be empty");

  LoadedModel m = load_model_dir(args.string("model", ""));
  const data::ByteTokenizer tokenizer;
  const std::vector<int32_t> tokens = tokenizer.encode(prompt);
  if (static_cast<int64_t>(tokens.size()) >= m.config.max_len)
    throw UsageError("--prompt has " + std::to_string(tokens.size()) +
                     " tokens; the model's context is " + std::to_string(m.config.max_len));
  const int64_t room = m.config.max_len - static_cast<int64_t>(tokens.size());
  if (o.max_tokens > room) {
    std::fprintf(
        stderr,
        "cujax generate: --max-tokens %lld shortened to %lld: the model's context is %lld tokens\n",
        static_cast<long long>(o.max_tokens), static_cast<long long>(room),
        static_cast<long long>(m.config.max_len));
    o.max_tokens = room;
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  // Bytes go out as they come; a multi-byte UTF-8 character appears once complete.
  models::generate(*m.model, m.params, tokens, o, [](int32_t t) {
    std::fputc(t, stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace cujax::cli
