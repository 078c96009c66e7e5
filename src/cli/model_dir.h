// A model directory as `cujax train --out DIR` writes it:
//   DIR/config.json           {"model": TransformerConfig, "train": the options of the run}
//   DIR/checkpoints/<step>/   Orbax CheckpointManager steps holding the parameters only
//   DIR/opt_state/<step>/     the optimizer state at the same steps (for --resume)
//   DIR/metrics.csv, DIR/loss.svg
// `cujax generate`, `cujax export` and `cujax serve` read it back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cujax/core/json.h"
#include "cujax/models/transformer.h"

namespace cujax::cli {

struct LoadedModel {
  models::TransformerConfig config;
  std::unique_ptr<nnx::Rngs> rngs;
  std::unique_ptr<models::TransformerLM> model;
  State params;
  int64_t step = 0;
};

std::string checkpoints_dir(const std::string& model_dir);
// DIR/opt_state/<step>/: the optimizer state at the same steps, for `cujax train --resume`.
std::string opt_state_dir(const std::string& model_dir);
// Writes DIR/config.json atomically.
void write_model_config(const std::string& model_dir, const models::TransformerConfig& config,
                        const json::Value& train_options);
// Hands the `section` ("model" or "train") of DIR/config.json to `read`. UsageError naming the
// file when it cannot be read (`missing` says why that matters) or when it or `read` fails.
void read_config_section(const std::string& model_dir, const std::string& section,
                         const std::string& missing,
                         const std::function<void(const json::Value&)>& read);
// The model of DIR with the parameters of its latest checkpoint. UsageError naming the path
// when DIR, its config or a complete checkpoint is missing.
LoadedModel load_model_dir(const std::string& model_dir);

}  // namespace cujax::cli
