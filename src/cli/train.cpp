#include "cli/train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/model_dir.h"
#include "cujax/checkpoint.h"
#include "cujax/core/npy.h"
#include "cujax/data.h"
#include "cujax/devices.h"
#include "cujax/distributed.h"
#include "cujax/metrics_log.h"
#include "cujax/models/lm.h"
#include "cujax/numpy.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"
#include "cujax/transfer_guard.h"

namespace cujax::cli {

namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";
constexpr double kValidationFraction = 0.05;
// Checkpoint metrics: the training losses summed since the last log, and how many.
constexpr const char* kWindowSum = "train_loss_window_sum";
constexpr const char* kWindowSteps = "train_loss_window_steps";

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

// One line, redrawn in place on a terminal; a new line per update otherwise (logs, CI).
class Progress {
 public:
  Progress(int64_t total, bool shown)
      : total_(total), shown_(shown), tty_(isatty(fileno(stderr))) {}
  void update(int64_t step, double steps_per_s, double tokens_per_s, double loss,
              std::optional<double> val_loss) {
    if (!shown_) return;
    constexpr int width = 24;
    const int filled = static_cast<int>(width * step / total_);
    std::string bar(filled, '=');
    if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
    char val[32] = "";
    if (val_loss) std::snprintf(val, sizeof val, "  val %.3f", *val_loss);
    std::fprintf(stderr, "%sstep %6lld/%lld [%s] %5.2f steps/s %7.0f tokens/s  loss %.3f%s%s",
                 tty_ ? "\r" : "", static_cast<long long>(step), static_cast<long long>(total_),
                 bar.c_str(), steps_per_s, tokens_per_s, loss, val, tty_ ? "\x1b[K" : "\n");
    std::fflush(stderr);
  }
  // The first step, which traced and compiled the program: shown at once, not after log_every.
  void first_step(int64_t step, double compile_seconds, double loss) {
    if (!shown_) return;
    std::fprintf(stderr, "%sstep %6lld/%lld traced and compiled in %.2f s  loss %.3f%s",
                 tty_ ? "\r" : "", static_cast<long long>(step), static_cast<long long>(total_),
                 compile_seconds, loss, tty_ ? "\x1b[K" : "\n");
    std::fflush(stderr);
  }
  void finish() {
    if (shown_ && tty_) std::fputc('\n', stderr);
  }

 private:
  int64_t total_;
  bool shown_;  // process 0 of a multi-process run reports for all
  bool tty_;
};

// Mean loss over the first `num_batches` validation batches (fetched once, at the end).
double evaluate(models::EvalStep& eval_step, const State& params, const data::DataLoader& loader,
                int64_t num_batches, const std::function<data::Batch(const data::Batch&)>& place) {
  Array total;
  for (int64_t i = 0; i < num_batches; ++i) {
    const Array loss = eval_step(params, place(loader.batch(0, i)));
    total = total.valid() ? total + loss : loss;
  }
  return total.item<float>() / static_cast<double>(num_batches);
}

template <class F>
auto as_usage_error(F&& f) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// What makes a run: stored in DIR/config.json so --resume repeats it exactly.
struct RunOptions {
  std::string config = "tiny";
  std::string data = kDefaultCorpus;
  int64_t steps = 1000, batch = 16, seq = 0, warmup = 0, seed = 0;
  double lr = 3e-3;

  json::Value to_json() const {
    json::Value v = json::Value::object();
    v.set("config", config);
    v.set("data", data);
    v.set("steps", steps);
    v.set("batch", batch);
    v.set("seq", seq);
    v.set("lr", lr);
    v.set("warmup", warmup);
    v.set("seed", seed);
    return v;
  }
  static RunOptions from_json(const json::Value& v) {
    RunOptions r;
    r.config = v.at("config").as_string();
    r.data = v.at("data").as_string();
    r.steps = v.at("steps").as_int();
    r.batch = v.at("batch").as_int();
    r.seq = v.at("seq").as_int();
    r.lr = v.at("lr").as_double();
    r.warmup = v.at("warmup").as_int();
    r.seed = v.at("seed").as_int();
    return r;
  }
};

RunOptions stored_run(const std::string& out) {
  RunOptions run;
  read_config_section(out, "train", "--resume finds no run to resume in " + out,
                      [&](const json::Value& v) { run = RunOptions::from_json(v); });
  return run;
}

// The rows of an earlier metrics.csv (a resumed run appends to them).
std::vector<std::vector<double>> read_metrics(const fs::path& path, int64_t up_to_step) {
  std::vector<std::vector<double>> rows;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<double> row;
    std::stringstream fields(line);
    std::string field;
    while (std::getline(fields, field, ',')) row.push_back(std::strtod(field.c_str(), nullptr));
    if (!row.empty() && row[0] <= static_cast<double>(up_to_step)) rows.push_back(row);
  }
  return rows;
}

// --mesh data=N[,model=M]: the axes in the order given, each once.
struct MeshOption {
  std::vector<std::string> axes;
  Shape shape;
  int64_t size(const std::string& axis) const {
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] == axis) return shape[i];
    return 1;
  }
};

MeshOption parse_mesh(const std::string& text) {
  const std::string form = "--mesh must look like data=N or data=N,model=M, not '" + text + "'";
  MeshOption m;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw UsageError(form);
    const std::string name = item.substr(0, eq), count = item.substr(eq + 1);
    if (name != "data" && name != "model")
      throw UsageError("--mesh: unknown mesh axis '" + name + "' (the axes are data and model)");
    if (std::find(m.axes.begin(), m.axes.end(), name) != m.axes.end())
      throw UsageError("--mesh: axis '" + name + "' is given twice");
    if (count.empty() || count.size() > 6 ||
        count.find_first_not_of("0123456789") != std::string::npos || std::stoi(count) < 1)
      throw UsageError(form);
    m.axes.push_back(name);
    m.shape.push_back(std::stoi(count));
  }
  if (m.axes.empty() || text.back() == ',') throw UsageError(form);
  return m;
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// Tensor parallelism as in Megatron-LM: the MLP's fc and the attention's query/key/value split
// by output (columns, heads), proj and out by input (their products are then all_reduced).
// Optimizer moments end with their parameter's path and are placed the same way; everything
// else is replicated.
PartitionSpec param_spec(const std::string& path, bool model_axis) {
  if (!model_axis) return P();
  if (ends_with(path, "mlp.fc.kernel")) return P(std::nullopt, "model");
  if (ends_with(path, "mlp.fc.bias")) return P("model");
  if (ends_with(path, "mlp.proj.kernel")) return P("model", std::nullopt);
  for (const char* qkv : {"attn.query.kernel", "attn.key.kernel", "attn.value.kernel"})
    if (ends_with(path, qkv)) return P(std::nullopt, "model", std::nullopt);
  if (ends_with(path, "attn.out.kernel")) return P("model", std::nullopt, std::nullopt);
  return P();
}

State place_state(const State& state, const Mesh& mesh) {
  const auto& names = mesh.axis_names();
  const bool model_axis = std::find(names.begin(), names.end(), "model") != names.end();
  State out;
  for (const auto& [path, v] : state)
    out.set(path, device_put(v, NamedSharding(mesh, param_spec(path, model_axis))));
  return out;
}

// The virtual CPU devices the mesh needs, split evenly over the processes: set here unless
// the environment already chose.
void provide_devices(const std::string& text, int64_t needed) {
  const int processes = distributed::process_count();
  if (needed % processes != 0)
    throw UsageError("--mesh " + text + " needs " + std::to_string(needed) +
                     " devices, which do not split evenly over " + std::to_string(processes) +
                     " processes");
  const int64_t local = needed / processes;
  const std::string each = processes > 1 ? " per process" : "";
  if (const std::optional<int> env = runtime::cpu_devices_from_environment()) {
    if (*env != local)
      throw UsageError("--mesh " + text + " needs " + std::to_string(local) + " cpu devices" +
                       each + ", but CUJAX_NUM_CPU_DEVICES or XLA_FLAGS gives " +
                       std::to_string(*env));
    return;
  }
  as_usage_error([&] { runtime::set_num_cpu_devices(static_cast<int>(local)); });
}

// Joins the processes of a multi-process run: under mpirun from its environment, else from
// --coordinator, --num-processes and --process-id (TCP). One process without either is a
// process group of one. Leaves the group on every way out of the command.
class ProcessGroup {
 public:
  explicit ProcessGroup(const Args& args) {
    distributed::InitializeOptions options;
    if (args.has("coordinator")) {
      if (!args.has("num-processes") || !args.has("process-id"))
        throw UsageError("--coordinator needs --num-processes and --process-id");
      options.coordinator_address = args.string("coordinator", "");
      options.num_processes = static_cast<int>(args.integer("num-processes", 1, 1));
      options.process_id = static_cast<int>(args.integer("process-id", 0, 0));
      if (options.process_id >= options.num_processes)
        throw UsageError("--process-id " + std::to_string(options.process_id) +
                         " is not below --num-processes " + std::to_string(options.num_processes));
    } else if (args.has("num-processes") || args.has("process-id")) {
      throw UsageError("--num-processes and --process-id need --coordinator host:port");
    }
    distributed::initialize(options);
  }
  ~ProcessGroup() { distributed::shutdown(); }
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
};

// The global value of every leaf, gathered across the processes for those split over them
// (the model axis). Every process calls it; process 0 saves what it returns.
State global_values(const State& state) {
  State out;
  for (const auto& [path, v] : state) out.set(path, process_allgather(v));
  return out;
}

// --dump-batches FILE: the training batches of steps [start, steps) in the order the run takes
// them, as one .npy of int32 (steps - start, 2, batch, seq) (inputs, then targets), so that a
// peer (bench/jax) trains on the same tokens.
void dump_batches(const std::string& path, const data::DataLoader& loader, int64_t start,
                  int64_t steps) {
  const data::BatchProducer next = loader.stream(start);
  std::vector<int32_t> tokens;
  Shape batch_shape;
  int64_t count = 0;
  for (; start + count < steps; ++count) {
    const std::optional<data::Batch> b = next();
    if (!b) break;
    batch_shape = b->inputs.shape();
    for (const Array* a : {&b->inputs, &b->targets}) {
      const std::vector<int32_t> v = a->to_vector<int32_t>();
      tokens.insert(tokens.end(), v.begin(), v.end());
    }
  }
  if (count == 0) throw UsageError("--dump-batches: the run has no steps left to dump");
  save_npy(path, HostTensor::from_vector(tokens, {count, 2, batch_shape[0], batch_shape[1]}));
}

}  // namespace

int train_command(const std::vector<std::string>& argv) {
  // What config.json stores: --resume repeats the run and refuses these.
  const std::vector<std::string> run_options = {"config", "data", "steps",  "batch",
                                                "seq",    "lr",   "warmup", "seed"};
  const Args args(
      {"train",
       "train a transformer language model on a text corpus (docs/training.md)",
       {{"config", "NAME", "tiny, small or gpt2 (default: tiny)"},
        {"data", "FILE|DIR",
         std::string("a text file or a folder of them (default: ") + kDefaultCorpus + ")"},
        {"steps", "N", "optimizer steps, also the schedule's length (default: 1000)"},
        {"batch", "B", "sequences per step (default: 16)"},
        {"seq", "T", "tokens per sequence (default: the config's max_len)"},
        {"lr", "LR", "peak learning rate (default: 3e-3)"},
        {"warmup", "N", "warmup steps (default: min(100, steps / 10))"},
        {"seed", "S", "parameter initialization and data order (default: 0)"},
        {"log-every", "N", "steps between metric fetches (default: 20)"},
        {"eval-every", "N", "steps between validation losses (default: 200)"},
        {"eval-batches", "N", "validation batches per evaluation (default: 8)"},
        {"checkpoint-every", "N", "steps between checkpoints, 0: only at the end (default: 0)"},
        {"out", "DIR", "the run's folder (default: runs/CONFIG)"},
        {"overwrite", "", "replace an earlier run in --out"},
        {"resume", "", "continue the run in --out from its latest checkpoint"},
        {"dump-batches", "FILE", "also write the run's batches as .npy int32 (steps, 2, B, T)"},
        {"mesh", "data=N[,model=M]",
         "data (and tensor) parallel over N*M virtual cpu devices, split over the processes"},
        {"coordinator", "HOST:PORT", "process 0's address, to run as several processes over TCP"},
        {"num-processes", "N", "the process count, with --coordinator"},
        {"process-id", "I", "this process's index, with --coordinator"},
        platform_option(),
        profile_option()}},
      argv);
  // Like the mesh, the platform changes where the step runs, not what it computes: --resume
  // may change it.
  const std::string platform = use_platform(args);
  const ProfileOption profile(args);
  const bool resume = args.flag("resume");
  if (resume && args.flag("overwrite"))
    throw UsageError("--resume and --overwrite exclude each other");
  RunOptions run;
  std::string out;
  if (resume) {
    if (!args.has("out")) throw UsageError("--resume needs --out DIR, the run to continue");
    out = args.string("out", "");
    for (const auto& name : run_options)
      if (args.has(name))
        throw UsageError("--resume repeats the run stored in " + out + "/config.json; --" + name +
                         " cannot be changed");
    run = stored_run(out);
  } else {
    run.config = args.string("config", run.config);
    run.data = args.string("data", run.data);
    run.steps = args.integer("steps", run.steps, 1);
    run.batch = args.integer("batch", run.batch, 1);
    run.seq = args.integer("seq", 0, 1);
    run.lr = args.number("lr", run.lr, 0);
    run.warmup = args.integer("warmup", std::min<int64_t>(100, run.steps / 10), 0);
    run.seed = args.integer("seed", 0, 0);
    out = args.string("out", "runs/" + run.config);
  }
  const models::TransformerConfig config =
      as_usage_error([&] { return models::config_by_name(run.config); });
  if (run.seq == 0) run.seq = config.max_len;
  const int64_t steps = run.steps, batch_size = run.batch, seq_len = run.seq;
  const std::string& data_path = run.data;
  const int64_t log_every = args.integer("log-every", 20, 1);
  const int64_t eval_every = args.integer("eval-every", 200, 1);
  const int64_t eval_batches = args.integer("eval-batches", 8, 1);
  const int64_t checkpoint_every = args.integer("checkpoint-every", 0, 0);
  if (seq_len > config.max_len)
    throw UsageError("--seq " + std::to_string(seq_len) + " exceeds the '" + config.name +
                     "' config's max_len " + std::to_string(config.max_len));

  // Several processes train one model on a global mesh; process 0 alone prints and writes the
  // run's files, the others hold their devices' shards.
  const ProcessGroup processes(args);
  const bool writer = distributed::process_index() == 0;
  if (distributed::process_count() > 1 && !args.has("mesh"))
    throw UsageError("cujax train runs as " + std::to_string(distributed::process_count()) +
                     " processes: give --mesh data=N to split the batches over them");

  // The mesh changes where the step runs, not what it computes: --resume may change it.
  std::optional<Mesh> mesh;
  if (args.has("mesh")) {
    const std::string text = args.string("mesh", "");
    const MeshOption m = parse_mesh(text);
    if (batch_size % m.size("data") != 0)
      throw UsageError("--batch " + std::to_string(batch_size) +
                       " does not divide by the mesh's data axis (" +
                       std::to_string(m.size("data")) + ")");
    const int64_t model = m.size("model");
    if (config.num_heads % model != 0 || config.d_ff % model != 0)
      throw UsageError("--mesh model=" + std::to_string(model) + ": the '" + config.name +
                       "' config's " + std::to_string(config.num_heads) + " heads and d_ff " +
                       std::to_string(config.d_ff) + " must divide by it");
    provide_devices(text, num_elements(m.shape));
    mesh = make_mesh(m.shape, m.axes);
  }

  if (!resume && fs::exists(checkpoints_dir(out)) && !args.flag("overwrite"))
    throw UsageError(out +
                     " already holds a training run; use --resume to continue it or "
                     "--overwrite to start again");
  // Every process has seen the folder as it was before process 0 changes it, so all stop on
  // the same errors (one that stopped alone would leave the others waiting in a collective).
  sync_global_devices("cujax train: checked " + out);

  // Data: every problem with it is the user's input.
  const data::DatasetSplits splits = as_usage_error(
      [&] { return data::TokenDataset::from_path(data_path, seq_len).split(kValidationFraction); });
  if (batch_size > splits.train.num_examples())
    throw UsageError("--batch " + std::to_string(batch_size) +
                     " is larger than the training set: " + data_path + " gives " +
                     std::to_string(splits.train.num_examples()) + " sequences of " +
                     std::to_string(seq_len) + " tokens");
  data::LoaderOptions train_options;
  train_options.batch_size = batch_size;
  train_options.seed = static_cast<uint64_t>(run.seed);
  const data::DataLoader train_loader(splits.train, train_options);
  data::LoaderOptions val_options;
  val_options.batch_size = std::min(batch_size, splits.validation.num_examples());
  val_options.shuffle = false;
  const data::DataLoader val_loader(splits.validation, val_options);
  const int64_t num_eval_batches = std::min(eval_batches, val_loader.num_batches());
  const double unigram =
      data::unigram_cross_entropy(splits.train.tokens(), splits.validation.tokens());

  nnx::Rngs rngs(run.seed);
  models::TransformerLM model(config, rngs);
  models::OptimizerOptions opt;
  opt.learning_rate = run.lr;
  opt.warmup_steps = run.warmup;
  opt.total_steps = steps;
  const optax::GradientTransformation tx = models::make_optimizer(opt);
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  models::TrainStep train_step = models::make_train_step(model, tx, platform);
  models::EvalStep eval_step = models::make_eval_step(model, platform);

  // Parameters and optimizer state are saved at the same steps, in two managers: generate,
  // export and serve read the parameters only. Process 0 makes them (which also clears what
  // an interrupted save left); the others only read them, to resume.
  checkpoint::CheckpointManagerOptions ckpt_options;
  ckpt_options.max_to_keep = 3;
  ckpt_options.enable_async_checkpointing = true;
  std::optional<checkpoint::CheckpointManager> param_manager, opt_manager;
  if (writer) {
    if (!resume && fs::exists(checkpoints_dir(out))) {
      fs::remove_all(checkpoints_dir(out));  // --overwrite, checked before any work
      fs::remove_all(opt_state_dir(out));
    }
    fs::create_directories(out);
    param_manager.emplace(checkpoints_dir(out), ckpt_options);
    opt_manager.emplace(opt_state_dir(out), ckpt_options);
  }
  sync_global_devices("cujax train: created " + out);
  if (!writer && resume) {
    param_manager.emplace(checkpoints_dir(out), ckpt_options);
    opt_manager.emplace(opt_state_dir(out), ckpt_options);
  }
  int64_t start_step = 0;
  std::vector<std::vector<double>> rows;  // one per log line
  if (resume) {
    // The latest step with both halves complete.
    const auto with_opt = opt_manager->all_steps();
    for (int64_t s : param_manager->all_steps())
      if (std::find(with_opt.begin(), with_opt.end(), s) != with_opt.end()) start_step = s;
    if (start_step == 0) throw UsageError("--resume: no complete checkpoint in " + out);
    // A later step saved in one manager only is half of a save that a crash cut short: the
    // resumed run saves that step again.
    if (writer)
      for (auto* manager : {&*param_manager, &*opt_manager})
        for (int64_t s : manager->all_steps())
          if (s > start_step) manager->delete_step(s);
    params = param_manager->restore(start_step, params);
    opt_state = opt_manager->restore(start_step, opt_state);
    rows = read_metrics(fs::path(out) / "metrics.csv", start_step);
    if (writer)
      std::printf("cujax train: resuming %s at step %lld of %lld\n", out.c_str(),
                  static_cast<long long>(start_step), static_cast<long long>(steps));
  }
  if (writer) write_model_config(out, config, run.to_json());
  if (writer && args.has("dump-batches") && start_step < steps)
    dump_batches(args.string("dump-batches", ""), train_loader, start_step, steps);
  const auto& axes = mesh ? mesh->axis_names() : std::vector<std::string>{};
  const bool data_axis = std::find(axes.begin(), axes.end(), "data") != axes.end();
  const Sharding batch_sharding =
      mesh ? NamedSharding(*mesh, data_axis ? P("data", std::nullopt) : P())
           : SingleDeviceSharding(0);
  // Each device takes its rows of a batch; validation batches too when their size divides.
  auto place_batch = [&](const data::Batch& b) {
    if (!mesh || b.inputs.shape()[0] % (data_axis ? mesh->axis_size("data") : 1) != 0) return b;
    return data::Batch{device_put(b.inputs, batch_sharding), device_put(b.targets, batch_sharding)};
  };
  if (mesh) {
    params = place_state(params, *mesh);
    opt_state = place_state(opt_state, *mesh);
    const bool split = std::find(axes.begin(), axes.end(), "model") != axes.end();
    const int count = distributed::process_count();
    const std::string across = count > 1 ? " across " + std::to_string(count) + " processes of " +
                                               std::to_string(distributed::local_device_count()) +
                                               " device(s)"
                                         : "";
    if (writer)
      std::printf("mesh: %s on %s:0..%lld%s; batches %s; parameters and optimizer state %s\n",
                  mesh->str().c_str(), platform.c_str(), static_cast<long long>(mesh->size() - 1),
                  across.c_str(), batch_sharding.spec().str().c_str(),
                  split ? "replicated, but the MLP and attention kernels split over 'model'"
                        : "replicated");
  }

  if (writer) {
    std::printf(
        "cujax train: config %s (%lld parameters), %s: %lld train / %lld validation "
        "sequences of %lld tokens\n",
        config.name.c_str(), static_cast<long long>(nnx::count(model)), data_path.c_str(),
        static_cast<long long>(splits.train.num_examples()),
        static_cast<long long>(splits.validation.num_examples()), static_cast<long long>(seq_len));
    std::printf("unigram baseline on the validation set: %.3f nats/token\n", unigram);
    if (!mesh) {
      const Device device = local_devices(platform).front();
      std::printf("training on %s (%s)\n", device.str().c_str(), device.device_kind.c_str());
    }
    std::fflush(stdout);
  }

  if (start_step >= steps) {
    if (writer)
      std::printf("%s is complete: step %lld of %lld\n", out.c_str(),
                  static_cast<long long>(start_step), static_cast<long long>(steps));
    return 0;
  }
  Progress progress(steps, writer);
  data::Prefetcher batches(train_loader.stream(start_step), 4);
  const auto start = clock::now();
  auto window_start = start;
  int64_t window_steps = 0;
  double compile_seconds = 0, last_loss = 0;
  std::optional<double> last_val;
  Array loss_sum;          // on the device until the next log
  int64_t loss_steps = 0;  // in loss_sum; the timed window_steps leave out the compiling step
  Array resumed_sum;       // on the host: loss_sum when the resumed checkpoint was saved
  if (resume) {
    const std::map<std::string, double> saved = param_manager->metrics(start_step);
    if (saved.count(kWindowSum) && saved.count(kWindowSteps)) {
      resumed_sum = array(std::vector<float>{static_cast<float>(saved.at(kWindowSum))}, Shape{});
      loss_steps = static_cast<int64_t>(saved.at(kWindowSteps));
    }
    if (saved.count("val_loss")) last_val = saved.at("val_loss");
  }
  const std::string metrics_path = (fs::path(out) / "metrics.csv").string();
  const std::vector<std::string> metrics_columns = {"step",          "train_loss",   "val_loss",
                                                    "learning_rate", "tokens_per_s", "elapsed_s"};
  auto save = [&](int64_t step) {
    std::map<std::string, double> metrics;
    if (last_val) metrics["val_loss"] = *last_val;
    // A checkpoint between two logs records the log's window so far, so that a run resumed
    // there logs the same mean loss (the float32 sum, exact in a double).
    if (loss_steps > 0) {
      metrics[kWindowSum] = loss_sum.item<float>();
      metrics[kWindowSteps] = static_cast<double>(loss_steps);
    }
    const State all_params = global_values(params), all_opt_state = global_values(opt_state);
    if (!writer) return;
    // One save in flight: the two managers never drift apart by more than one step, so the
    // last max_to_keep steps of each always share a complete one (and a failed save stops
    // the run at the next).
    param_manager->wait_until_finished();
    opt_manager->wait_until_finished();
    // The log up to `step` is on disk (atomically) before the checkpoint can be: a run killed
    // after the commit resumes with its rows (those past the checkpoint it drops).
    metrics_log::write_csv(metrics_path, metrics_columns, rows);
    param_manager->save(step, all_params, metrics);
    opt_manager->save(step, all_opt_state, metrics);
  };
  // Device-to-host transfers inside the steps (after the first, which traces): a training loop
  // should make none there, only the fetches for logs, evaluations and checkpoints.
  int64_t step_transfers = 0;
  auto device_to_host = [] { return transfer_stats(TransferDirection::DeviceToHost).count; };
  const int64_t transfers_at_start = device_to_host();
  for (int64_t step = start_step; step < steps; ++step) {
    const profiler::StepTraceAnnotation annotation("train", step);
    std::optional<data::Batch> batch = batches.next();
    const int64_t transfers_before = device_to_host();
    const auto t0 = clock::now();
    auto [new_params, new_opt_state, metrics] = train_step(params, opt_state, place_batch(*batch));
    params = std::move(new_params);
    opt_state = std::move(new_opt_state);
    const Array& loss = metrics.at("loss");
    if (resumed_sum.valid()) {  // placed as the loss is: the same float32 addition follows
      loss_sum = device_put(resumed_sum, sharding_of(loss));
      resumed_sum = Array();
    }
    loss_sum = loss_sum.valid() ? loss_sum + loss : loss;
    ++loss_steps;
    ++window_steps;
    if (step == start_step) {
      // The first call traces and compiles: time it apart from the throughput.
      loss.block_until_ready();
      compile_seconds = seconds_since(t0);
      progress.first_step(step + 1, compile_seconds, loss.item<float>());
      window_start = clock::now();
      window_steps = 0;
    }
    if (step != start_step) step_transfers += device_to_host() - transfers_before;
    const int64_t done = step + 1;
    const bool log_now = done % log_every == 0 || done == steps;
    const bool eval_now = done % eval_every == 0 || done == steps;
    const bool save_now = checkpoint_every > 0 && done % checkpoint_every == 0 && done != steps;
    if (!log_now && !eval_now) {
      if (save_now) save(done);
      continue;
    }
    last_loss = loss_sum.item<float>() / static_cast<double>(loss_steps);
    const double secs = seconds_since(window_start);
    const double steps_per_s = window_steps > 0 && secs > 0 ? window_steps / secs : 0;
    const double tokens_per_s = steps_per_s * batch_size * seq_len;
    std::optional<double> val;
    if (eval_now)
      last_val = val = evaluate(eval_step, params, val_loader, num_eval_batches, place_batch);
    progress.update(done, steps_per_s, tokens_per_s, last_loss, last_val);
    rows.push_back({static_cast<double>(done), last_loss, val.value_or(NAN),
                    models::learning_rate_at(opt, step), tokens_per_s, seconds_since(start)});
    loss_sum = Array();
    loss_steps = 0;
    window_steps = 0;
    window_start = clock::now();
    if (save_now) save(done);
  }
  progress.finish();
  save(steps);
  if (!writer) return 0;
  param_manager->wait_until_finished();
  opt_manager->wait_until_finished();
  const double total_seconds = seconds_since(start);

  metrics_log::write_csv(metrics_path, metrics_columns, rows);
  std::vector<std::pair<double, double>> train_curve, val_curve;
  for (const auto& row : rows) {
    train_curve.emplace_back(row[0], row[1]);
    if (std::isfinite(row[2])) val_curve.emplace_back(row[0], row[2]);
  }
  std::vector<metrics_log::Series> series = {
      {"train loss", train_curve},
      {"validation loss", val_curve},
      {"unigram baseline", {{0.0, unigram}, {static_cast<double>(steps), unigram}}}};
  metrics_log::write_svg_line_chart((fs::path(out) / "loss.svg").string(),
                                    "cujax train " + config.name + " on " + data_path, "step",
                                    "loss (nats/token)", series);

  std::printf("trained steps %lld to %lld in %.1f s (the first, with compilation: %.2f s)\n",
              static_cast<long long>(start_step + 1), static_cast<long long>(steps), total_seconds,
              compile_seconds);
  std::printf(
      "device-to-host transfers: %lld inside the steps after the first, %lld in all (loss "
      "fetches every %lld steps, evaluations, checkpoints)\n",
      static_cast<long long>(step_transfers),
      static_cast<long long>(device_to_host() - transfers_at_start),
      static_cast<long long>(log_every));
  std::printf("validation loss %.3f nats/token against the unigram baseline %.3f (%s)\n",
              last_val.value_or(NAN), unigram,
              last_val && *last_val < unigram ? "below" : "NOT below");
  std::printf("wrote %s/{config.json,metrics.csv,loss.svg,checkpoints/%lld}\n", out.c_str(),
              static_cast<long long>(steps));
  return 0;
}

}  // namespace cujax::cli
