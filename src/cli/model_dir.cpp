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

void read_config_section(const std::string& model_dir, const std::string& section,
                         const std::string& missing,
                         const std::function<void(const json::Value&)>& read) {
  const fs::path path = fs::path(model_dir) / "config.json";
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read " + path.string() + ": " + missing);
  std::stringstream text;
  text << in.rdbuf();
  try {
    read(json::parse(text.str(), path.string()).at(section));
  } catch (const Error& e) {
    throw UsageError(path.string() + ": " + e.what());
  }
}

LoadedModel load_model_dir(const std::string& model_dir) {
  if (!fs::is_directory(model_dir))
    throw UsageError("model directory " + model_dir +
                     " does not exist (train one with cujax train --out " + model_dir + ")");
  LoadedModel m;
  read_config_section(
      model_dir, "model", "not a cujax train output directory",
      [&](const json::Value& v) { m.config = models::TransformerConfig::from_json(v); });
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
