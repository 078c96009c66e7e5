// Orbax checkpoints. Saves write Orbax's default layout (TensorStore's OCDBT database holding
// zarr v2 arrays, with the per-process database under ocdbt.process_0/), or with use_ocdbt =
// false the zarr v2 folders; restores read both, and the OCDBT + zarr v3 layout Orbax's v1
// save_checkpointables writes. See docs/checkpoints.md.
//
//   checkpoint::StandardCheckpointer ckpt;
//   ckpt.save("/tmp/ckpt", state);                     // atomic: tmp folder, fsync, rename
//   State restored = ckpt.restore("/tmp/ckpt", state);  // paths, shapes, dtypes from `state`
//
//   checkpoint::CheckpointManagerOptions opts;
//   opts.max_to_keep = 3;
//   checkpoint::CheckpointManager mgr("/tmp/run", opts);
//   mgr.save(step, state, {{"loss", 0.25}});           // <dir>/<step>/default/...
//   State s = mgr.restore(*mgr.latest_step(), state);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cujax/core/host_tensor.h"
#include "cujax/tree.h"

namespace cujax::checkpoint {

// Part of the name of every folder being written; such folders are never complete checkpoints.
inline constexpr const char* kTmpMarker = ".orbax-checkpoint-tmp";

// A State's arrays copied to host memory, in the State's order: what a save writes.
struct HostState {
  struct Entry {
    std::string path;
    HostTensor value;
    std::string device;  // "cpu:0", recorded in _sharding
  };
  std::vector<Entry> entries;
};
// Waits for each array and copies it to the host (a private copy: training may go on).
HostState to_host(const State& state);

struct StandardCheckpointerOptions {
  // Orbax's default layout (an OCDBT database holding the zarr v2 arrays); false: one zarr v2
  // folder per parameter (Orbax's use_ocdbt=False). Restores read both whatever this says.
  bool use_ocdbt = true;
  // In a run of several processes (cujax::distributed), every process calls save with the same
  // state, as with Orbax: each writes a share of the arrays (whole arrays, entry i by process
  // i mod N) to its own ocdbt.process_<i>/, and process 0, once all have written, the
  // top-level database over them, the metadata and the commit. false: the calling process
  // writes everything alone (what cujax train does from process 0).
  bool all_processes = false;
  // restore: a stored dtype other than the target's is converted (numpy astype) instead of
  // refused.
  bool cast_dtypes = false;
};

class StandardCheckpointer {
 public:
  StandardCheckpointer() = default;
  explicit StandardCheckpointer(StandardCheckpointerOptions options) : options_(options) {}

  // Writes `state` as a complete checkpoint at `path`. Each State path becomes the parameter
  // "<path>.value" (Flax NNX's Variable attribute). Fails when `path` exists unless `force`,
  // which replaces it atomically (an exchange of the two folders). On any failure `path` is
  // left as it was and the temporary folder is removed.
  void save(const std::string& path, const State& state, bool force = false) const;
  void save(const std::string& path, const HostState& state, bool force = false) const;

  // Reads the checkpoint at `path` into arrays with the paths, shapes and dtypes of `target`
  // (only the abstract values of its arrays are used). A parameter matches a target path
  // stored with or without the ".value" suffix. `path` may also be any checkpoint load_any
  // reads: a Flax msgpack file (nested dicts), a safetensors file ('.'- or '/'-joined keys) or
  // a t5x checkpoint (its optimizer target, "target/<path>"). Throws Error naming `path` and
  // listing every mismatch (missing or extra parameters, shapes, dtypes unless cast_dtypes),
  // or naming the file that is unreadable.
  State restore(const std::string& path, const State& target) const;
  // The same with abstract values as the target, e.g. nnx::eval_shape's result (restoring
  // without building the parameters first) or metadata()'s.
  State restore(const std::string& path,
                const std::vector<std::pair<std::string, ShapeDtype>>& target) const;

  // The parameters stored at `path`: name (with ".value" when stored so) -> shape and dtype.
  std::vector<std::pair<std::string, ShapeDtype>> metadata(const std::string& path) const;

 private:
  StandardCheckpointerOptions options_;
};

// Every array of a checkpoint in a format cujax reads, with no target: Orbax's OCDBT layout
// (zarr v2 or v3 inside, composite checkpoints' `state/` item), the non-OCDBT zarr layout,
// Flax msgpack files, legacy Orbax msgpack + zarr folders, t5x checkpoints, and safetensors
// files. Leaves in the checkpoint's order, named by '.'-joined keys.
struct Leaf {
  std::string path;
  HostTensor value;
};
struct LoadedCheckpoint {
  std::string format;  // "orbax ocdbt", "orbax zarr", "orbax msgpack", "flax msgpack", "t5x",
                       // "safetensors"
  std::vector<Leaf> leaves;
};
LoadedCheckpoint load_any(const std::string& path);

// Writes `leaves` as a new checkpoint at `path` in `format`, so that load_any gives back the
// same paths, dtypes, shapes and bytes: "ocdbt" or "zarr" (Orbax's default and use_ocdbt=False
// layouts, each leaf path its parameter name as it is), "safetensors" (a file, keys as they
// are) or "msgpack" (a file: flax.serialization.to_bytes of the nested dicts the paths make).
// Fails when `path` exists; written atomically (a temporary sibling, then a rename).
void save_leaves(const std::string& path, const std::vector<Leaf>& leaves,
                 const std::string& format);
// load_any(src) saved with save_leaves(dst, ..., format): `cujax checkpoint convert`.
void convert(const std::string& src, const std::string& dst, const std::string& format);

struct CheckpointManagerOptions {
  // Keep the most recent N complete steps (nullopt: keep all).
  std::optional<int> max_to_keep;
  // With best_fn set, the best `keep_best` steps by best_fn(metrics) are kept too, even when
  // they are older than the last max_to_keep; best_mode is "max" or "min" as in Orbax.
  std::function<double(const std::map<std::string, double>&)> best_fn;
  std::string best_mode = "max";
  int keep_best = 1;
  // save() writes only steps that are multiples of this (0 or 1: every step).
  int64_t save_interval_steps = 1;
  // Save on a background thread after copying the arrays to host memory.
  bool enable_async_checkpointing = false;
  // Item folder inside each step folder (Orbax's CheckpointManager default item name).
  std::string item_name = "default";
  // The items' layout, as StandardCheckpointerOptions::use_ocdbt.
  bool use_ocdbt = true;
};

// A folder of step checkpoints, as Orbax's CheckpointManager keeps them:
//   <directory>/<step>/_CHECKPOINT_METADATA   item handlers, metrics, timestamps
//   <directory>/<step>/<item_name>/...        a StandardCheckpointer checkpoint
// A step folder appears by one rename once complete, so a crash leaves only a temporary
// "<step>.orbax-checkpoint-tmp-*" folder, which latest_step() ignores and the next manager
// on the directory removes.
class CheckpointManager {
 public:
  explicit CheckpointManager(std::string directory, CheckpointManagerOptions options = {});
  ~CheckpointManager();  // waits for a pending asynchronous save
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Saves `state` at `step` unless save_interval_steps skips it; returns whether it saved.
  // Asynchronous saves copy the arrays to the host before returning, so training can go on
  // and change them. Throws when `step` exists, or rethrows a failed earlier asynchronous save.
  bool save(int64_t step, const State& state, const std::map<std::string, double>& metrics = {});
  bool save(int64_t step, HostState state, const std::map<std::string, double>& metrics = {});
  // Complete steps on disk, ascending.
  std::vector<int64_t> all_steps() const;
  std::optional<int64_t> latest_step() const;
  std::optional<int64_t> best_step() const;
  std::map<std::string, double> metrics(int64_t step) const;
  State restore(int64_t step, const State& target) const;
  State restore(int64_t step, const std::vector<std::pair<std::string, ShapeDtype>>& target) const;
  // Blocks until the pending asynchronous saves are on disk; rethrows their error.
  void wait_until_finished();
  // Removes a complete step (Orbax's delete(step)): renamed to a temporary folder first, so an
  // interrupted removal leaves no partial step. Waits for pending saves first.
  void delete_step(int64_t step);
  const std::string& directory() const { return directory_; }

 private:
  struct Job {
    int64_t step;
    HostState state;
    std::map<std::string, double> metrics;
  };
  void write_step(const Job& job);
  void remove_old_steps();
  void remove_step(int64_t step);
  void worker();
  void rethrow_pending_error();

  std::string directory_;
  CheckpointManagerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace cujax::checkpoint
