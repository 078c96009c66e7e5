// `cujax bench ...`: benchmarks that print tables; never part of the tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cujax/data.h"
#include "cujax/models/transformer.h"

namespace cujax::cli {

double median_of(std::vector<double> v);

// What time_train_step measured, medians over the timed steps.
struct StepTiming {
  double ms = 0;             // wall time per step
  double collective_ms = 0;  // per device time in collectives (waiting included); 0 unsharded
  double compile_s = 0;      // the first step: trace, compile and run
  int64_t parameters = 0;
};

// The model's training step (make_optimizer, make_train_step) on one random token batch, which
// `place` may shard, compiled for `platform`. Runs steps + 2 steps: the first two compile and
// warm up and are not timed.
StepTiming time_train_step(const models::TransformerConfig& config, int64_t batch, int64_t seq,
                           int64_t steps, const std::function<data::Batch(data::Batch)>& place,
                           const std::string& platform);

int bench_dispatch(const std::vector<std::string>& args);
int bench_train(const std::vector<std::string>& args);
int bench_attention(const std::vector<std::string>& args);
int bench_decode(const std::vector<std::string>& args);
int bench_scaling(const std::vector<std::string>& args);
// Built only with cpp-httplib, as `cujax serve`.
int bench_serve(const std::vector<std::string>& args);
// The interpreter that has Debian's python3-torch (CUJAX_PEER_PYTHON overrides).
std::string peer_python();

}  // namespace cujax::cli
