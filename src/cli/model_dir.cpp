#include "cli/model_dir.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cujax/checkpoint.h"
#include "cujax/metrics_log.h"

namespace cujax::cli {

namespace fs = std::filesystem;

std::string checkpoints_dir(const std::string& model_dir) {
  return (fs::path(model_dir) / "checkpoints").string();
}

std::string opt_state_dir(const std::string& model_dir) {
  return (fs::path(model_dir) / "opt_state").string();
}

void write_model_config(const std::string& model_dir, const models::TransformerConfig& config,
                        const json::Value& train_options) {
  json::Value v = json::Value::object();
  v.set("model", config.to_json());
  v.set("train", train_options);
  metrics_log::write_file_atomic((fs::path(model_dir) / "config.json").string(),
                                 json::dump(v, 2) + "\n");
}

LoadedModel load_model_dir(const std::string& model_dir) {
  const fs::path config_path = fs::path(model_dir) / "config.json";
  if (!fs::is_directory(model_dir))
    throw UsageError("model directory " + model_dir +
                     " does not exist (train one with cujax train --out " + model_dir + ")");
  std::ifstream in(config_path);
  if (!in)
    throw UsageError("cannot read " + config_path.string() +
                     ": not a cujax train output directory");
  std::stringstream text;
  text << in.rdbuf();
  LoadedModel m;
  try {
    m.config = models::TransformerConfig::from_json(
        json::parse(text.str(), config_path.string()).at("model"));
  } catch (const Error& e) {
    throw UsageError(config_path.string() + ": " + e.what());
  }
  checkpoint::CheckpointManager manager(checkpoints_dir(model_dir));
  const auto step = manager.latest_step();
  if (!step) throw UsageError("no complete checkpoint in " + checkpoints_dir(model_dir));
  m.rngs = std::make_unique<nnx::Rngs>(0);
  m.model = std::make_unique<models::TransformerLM>(m.config, *m.rngs);
  m.params = manager.restore(*step, nnx::state(*m.model, nnx::VariableKind::Param));
  nnx::update(*m.model, m.params);
  m.step = *step;
  return m;
}

}  // namespace cujax::cli
