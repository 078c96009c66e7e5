#include <algorithm>
#include <numeric>

#include "cujax/data.h"

namespace cujax::data {

namespace {

// SplitMix64 (Steele, Lea and Flood 2014): integer-only, so an order is the same everywhere.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound): rejection of the low values makes r % bound exact, not biased.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    uint64_t r;
    do r = next();
    while (r < threshold);
    return r % bound;
  }
};

}  // namespace

DataLoader::DataLoader(TokenDataset dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  if (options_.batch_size < 1)
    throw Error("DataLoader: batch_size must be >= 1, got " + std::to_string(options_.batch_size));
  if (num_batches() < 1)
    throw Error("DataLoader: dataset '" + dataset_.name() + "' has " +
                std::to_string(dataset_.num_examples()) + " examples of seq_len " +
                std::to_string(dataset_.seq_len()) + ", fewer than one batch of " +
                std::to_string(options_.batch_size) + " (drop_remainder is on)");
}

int64_t DataLoader::num_batches() const {
  const int64_t n = dataset_.num_examples(), b = options_.batch_size;
  return options_.drop_remainder ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::order(int64_t epoch) const {
  if (epoch < 0) throw Error("DataLoader::order: epoch must be >= 0, got " + std::to_string(epoch));
  std::vector<int64_t> order(static_cast<size_t>(dataset_.num_examples()));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!options_.shuffle) return order;
  // The stream of epoch e starts from a mix of the seed and e, so neighbouring seeds and epochs
  // give unrelated orders.
  SplitMix64 mix{options_.seed};
  SplitMix64 rng{mix.next() ^ static_cast<uint64_t>(epoch)};
  rng.state = rng.next();
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

Batch DataLoader::batch(const std::vector<int64_t>& order, int64_t index) const {
  const int64_t n = dataset_.num_examples(), b = options_.batch_size, t = dataset_.seq_len();
  if (static_cast<int64_t>(order.size()) != n)
    throw Error("DataLoader::batch: an order of " + std::to_string(order.size()) +
                " indices for a dataset of " + std::to_string(n) + " examples");
  if (index < 0 || index >= num_batches())
    throw Error("DataLoader::batch: batch " + std::to_string(index) + " is out of range [0, " +
                std::to_string(num_batches()) + ")");
  const int64_t rows = std::min(b, n - index * b);
  HostTensor inputs(DType::I32, {rows, t}), targets(DType::I32, {rows, t});
  const std::vector<int32_t>& tokens = dataset_.tokens();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t e = order[index * b + r];
    if (e < 0 || e >= n)
      throw Error("DataLoader::batch: example " + std::to_string(e) + " is out of range [0, " +
                  std::to_string(n) + ")");
    const int32_t* window = tokens.data() + e * t;
    std::copy(window, window + t, inputs.data_as<int32_t>() + r * t);
    std::copy(window + 1, window + t + 1, targets.data_as<int32_t>() + r * t);
  }
  return Batch{array(inputs), array(targets)};
}

DataLoader::EpochRange::iterator::iterator(const EpochRange* range, int64_t index)
    : range_(range), index_(index) {
  load();
}

DataLoader::EpochRange::iterator& DataLoader::EpochRange::iterator::operator++() {
  ++index_;
  load();
  return *this;
}

void DataLoader::EpochRange::iterator::load() {
  // end() and the position past the last batch hold no batch
  if (index_ < range_->loader_->num_batches())
    current_ = range_->loader_->batch(range_->order_, index_);
  else
    current_ = Batch{};
}

BatchProducer DataLoader::reader(int64_t epoch) const {
  return
      [loader = *this, visit = order(epoch), next = int64_t{0}]() mutable -> std::optional<Batch> {
        if (next >= loader.num_batches()) return std::nullopt;
        return loader.batch(visit, next++);
      };
}

BatchProducer DataLoader::stream(int64_t start_step) const {
  if (start_step < 0)
    throw Error("DataLoader::stream: start_step must be >= 0, got " + std::to_string(start_step));
  return [loader = *this, step = start_step, visiting = int64_t{-1},
          visit = std::vector<int64_t>{}]() mutable -> std::optional<Batch> {
    const int64_t nb = loader.num_batches();
    if (step / nb != visiting) {  // a new epoch: draw its order once
      visiting = step / nb;
      visit = loader.order(visiting);
    }
    Batch b = loader.batch(visit, step % nb);
    ++step;
    return b;
  };
}

}  // namespace cujax::data
