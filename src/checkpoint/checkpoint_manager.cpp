#include <algorithm>
#include <set>

#include "checkpoint/files.h"
#include "checkpoint/layout.h"
#include "cujax/checkpoint.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint {

namespace fs = std::filesystem;

namespace {

std::optional<int64_t> step_of(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.empty() || name.size() > 18 ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(name);
}

}  // namespace

CheckpointManager::CheckpointManager(std::string directory, CheckpointManagerOptions options)
    : directory_(std::move(directory)), options_(std::move(options)) {
  if (options_.best_mode != "max" && options_.best_mode != "min")
    throw Error("CheckpointManager: best_mode must be 'max' or 'min', got '" + options_.best_mode +
                "'");
  if (options_.max_to_keep && *options_.max_to_keep < 0)
    throw Error("CheckpointManager: max_to_keep must be non-negative");
  if (options_.item_name.empty() || options_.item_name.find('/') != std::string::npos)
    throw Error("CheckpointManager: invalid item_name '" + options_.item_name + "'");
  fs::create_directories(directory_);
  // Temporary folders are what an interrupted save left behind: never a complete step.
  for (const auto& entry : fs::directory_iterator(directory_))
    if (files::is_tmp(entry.path())) fs::remove_all(entry.path());
}

CheckpointManager::~CheckpointManager() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<int64_t> CheckpointManager::all_steps() const {
  std::vector<int64_t> steps;
  for (const auto& entry : fs::directory_iterator(directory_)) {
    if (!entry.is_directory() || files::is_tmp(entry.path())) continue;
    if (auto s = step_of(entry.path())) steps.push_back(*s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<int64_t> CheckpointManager::latest_step() const {
  const auto steps = all_steps();
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

std::map<std::string, double> CheckpointManager::metrics(int64_t step) const {
  const fs::path file = fs::path(directory_) / std::to_string(step) / "_CHECKPOINT_METADATA";
  std::map<std::string, double> out;
  if (!fs::exists(file)) return out;
  const json::Value meta = json::parse(files::read(file), file.string());
  if (const json::Value* m = meta.get("metrics"); m && m->is_object())
    for (const auto& [k, v] : m->as_object())
      if (v.is_number()) out[k] = v.as_double();
  return out;
}

std::optional<int64_t> CheckpointManager::best_step() const {
  if (!options_.best_fn) return std::nullopt;
  std::optional<int64_t> best;
  double best_value = 0;
  for (int64_t s : all_steps()) {
    const auto m = metrics(s);
    if (m.empty()) continue;
    const double v = options_.best_fn(m);
    const bool better = options_.best_mode == "max" ? v > best_value : v < best_value;
    if (!best || better) {
      best = s;
      best_value = v;
    }
  }
  return best;
}

State CheckpointManager::restore(int64_t step, const State& target) const {
  std::vector<std::pair<std::string, ShapeDtype>> avals;
  for (const auto& [p, a] : target) avals.emplace_back(p, a.aval());
  return restore(step, avals);
}

State CheckpointManager::restore(
    int64_t step, const std::vector<std::pair<std::string, ShapeDtype>>& target) const {
  const fs::path step_dir = fs::path(directory_) / std::to_string(step);
  if (!fs::is_directory(step_dir))
    throw Error("CheckpointManager: no step " + std::to_string(step) + " in " + directory_);
  fs::path item = step_dir / options_.item_name;
  // A step saved by a StandardCheckpointer directly has no item folder.
  if (!fs::exists(item) && fs::exists(step_dir / "_METADATA")) item = step_dir;
  return StandardCheckpointer().restore(item.string(), target);
}

bool CheckpointManager::save(int64_t step, const State& state,
                             const std::map<std::string, double>& metrics) {
  if (options_.save_interval_steps > 1 && step % options_.save_interval_steps != 0) return false;
  return save(step, to_host(state), metrics);
}

bool CheckpointManager::save(int64_t step, HostState state,
                             const std::map<std::string, double>& metrics) {
  rethrow_pending_error();
  if (step < 0) throw Error("CheckpointManager: negative step " + std::to_string(step));
  if (options_.save_interval_steps > 1 && step % options_.save_interval_steps != 0) return false;
  const auto steps = all_steps();
  bool exists = std::binary_search(steps.begin(), steps.end(), step);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& j : queue_) exists = exists || j.step == step;
  }
  if (exists)
    throw Error("CheckpointManager: step " + std::to_string(step) + " already exists in " +
                directory_);
  Job job{step, std::move(state), metrics};
  if (!options_.enable_async_checkpointing) {
    write_step(job);
    remove_old_steps();
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    if (!thread_.joinable()) thread_ = std::thread([this] { worker(); });
  }
  cv_.notify_all();
  return true;
}

void CheckpointManager::write_step(const Job& job) {
  const fs::path final_path = fs::path(directory_) / std::to_string(job.step);
  const fs::path tmp = files::tmp_sibling(final_path);
  try {
    const int64_t init = files::now_nanos();
    fs::create_directory(tmp);
    fs::create_directory(tmp / options_.item_name);
    layout::write_item(tmp / options_.item_name, job.state, {.use_ocdbt = options_.use_ocdbt});
    json::Value handlers = json::Value::object();
    handlers.set(options_.item_name, layout::kStandardHandler);
    json::Value metrics = json::Value::object();
    for (const auto& [k, v] : job.metrics) metrics.set(k, v);
    files::write_synced(
        tmp / "_CHECKPOINT_METADATA",
        json::dump(layout::checkpoint_metadata(std::move(handlers), std::move(metrics), init)));
    files::sync_dir(tmp);
    files::commit(tmp, final_path, false);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

void CheckpointManager::remove_old_steps() {
  if (!options_.max_to_keep) return;
  const auto steps = all_steps();
  std::set<int64_t> keep;
  const size_t n = static_cast<size_t>(*options_.max_to_keep);
  for (size_t i = steps.size() > n ? steps.size() - n : 0; i < steps.size(); ++i)
    keep.insert(steps[i]);
  if (options_.best_fn && options_.keep_best > 0) {
    std::vector<std::pair<double, int64_t>> scored;
    for (int64_t s : steps) {
      const auto m = metrics(s);
      if (!m.empty()) scored.push_back({options_.best_fn(m), s});
    }
    // Best first; among equal scores the later step.
    std::sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first)
        return options_.best_mode == "max" ? a.first > b.first : a.first < b.first;
      return a.second > b.second;
    });
    for (size_t i = 0; i < scored.size() && i < static_cast<size_t>(options_.keep_best); ++i)
      keep.insert(scored[i].second);
  }
  for (int64_t s : steps)
    if (!keep.count(s)) remove_step(s);
}

// Renamed first, so an interrupted removal leaves a temporary folder, not a partial step.
void CheckpointManager::remove_step(int64_t step) {
  const fs::path p = fs::path(directory_) / std::to_string(step);
  const fs::path doomed = files::tmp_sibling(p);
  fs::rename(p, doomed);
  fs::remove_all(doomed);
}

void CheckpointManager::delete_step(int64_t step) {
  wait_until_finished();
  const auto steps = all_steps();
  if (!std::binary_search(steps.begin(), steps.end(), step))
    throw Error("CheckpointManager: no step " + std::to_string(step) + " to delete in " +
                directory_);
  remove_step(step);
}

void CheckpointManager::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ with nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      write_step(job);
      remove_old_steps();
    } catch (...) {
      lock.lock();
      if (!error_) error_ = std::current_exception();
      lock.unlock();
    }
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void CheckpointManager::wait_until_finished() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }
  rethrow_pending_error();
}

void CheckpointManager::rethrow_pending_error() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace cujax::checkpoint
