// cujax::data: the input pipeline of a language model: a byte-level tokenizer, a dataset of
// fixed-length token windows from a text file, shuffled fixed-size batches, and a background
// prefetcher.
//
//   auto splits = data::TokenDataset::from_file("input.txt", 128).split(0.1);
//   data::LoaderOptions o;
//   o.batch_size = 32;
//   o.seed = 0;
//   data::DataLoader train(splits.train, o);
//   for (int64_t epoch = 0;; ++epoch) {
//     data::Prefetcher batches(train.reader(epoch), 4);     // next 4 batches ready in advance
//     while (auto b = batches.next()) step(params, opt_state, *b);
//   }
//
// Examples. A dataset of N tokens with sequence length T has (N - 1) / T examples: example i is
// the window tokens[i T, i T + T + 1), whose inputs are its first T tokens and whose targets
// its last T (the next token of each input). Windows do not overlap (consecutive windows share
// only a boundary token), so an epoch predicts each token at most once; the last N - 1 - T *
// num_examples tokens are unused.
//
// Order. Without shuffling an epoch visits examples 0..n-1. With shuffling the order of epoch e
// is a Fisher-Yates permutation drawn from a SplitMix64 stream seeded by (seed, e): the same
// seed gives the same order on every platform, each epoch a different one.
//
// Batches. Batch j of an epoch holds the examples order[j B, j B + B) as int32 Arrays of shape
// (B, T). With drop_remainder (the default) a last incomplete batch is dropped, so shapes stay
// constant and a jitted step compiles once; without it the last batch has fewer rows.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/tree.h"

namespace cujax::data {

// Bytes as tokens: token = byte value (0..255), vocabulary 256, no special tokens. Any byte
// sequence (UTF-8 or not) round-trips exactly; a multi-byte UTF-8 character is several tokens.
class ByteTokenizer {
 public:
  static constexpr int64_t vocab_size = 256;
  std::vector<int32_t> encode(std::string_view text) const;
  // Throws naming the position of a token outside 0..255.
  std::string decode(const std::vector<int32_t>& tokens) const;
};

// A batch of next-token examples: int32 (B, T) inputs and targets (targets = inputs shifted
// left by one, with the following token at the end). A tree: jit takes it as an argument.
struct Batch {
  Array inputs;
  Array targets;
};

class TokenDataset;
struct DatasetSplits;

// A sequence of tokens cut into windows of seq_len + 1 tokens (see the top of this file).
class TokenDataset {
 public:
  // `name` appears in error messages (the file name for from_file). Throws unless there are at
  // least seq_len + 1 tokens (one example) and seq_len >= 1.
  TokenDataset(std::vector<int32_t> tokens, int64_t seq_len, std::string name = "tokens");
  // The file's bytes as tokens (ByteTokenizer). Throws naming the file if it cannot be read, is
  // empty, or is too short for one sequence.
  static TokenDataset from_file(const std::string& path, int64_t seq_len);
  // A regular file as from_file; a directory as its regular files sorted by name and
  // concatenated, skipping hidden files and names ending in ".dat" or ".u8" (the index files and
  // links of a fortune database such as /usr/share/games/fortunes, the default corpus). Throws
  // naming the path if it is missing, unreadable, empty, a directory without usable files, or
  // too short for one sequence.
  static TokenDataset from_path(const std::string& path, int64_t seq_len);

  // The first (1 - validation_fraction) of the tokens for training, the rest for validation;
  // 0 < validation_fraction < 1, and each part must hold one sequence (the error says how many
  // tokens each part has and needs).
  DatasetSplits split(double validation_fraction) const;

  int64_t seq_len() const { return seq_len_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_->size()); }
  int64_t num_examples() const { return (num_tokens() - 1) / seq_len_; }
  const std::string& name() const { return name_; }
  const std::vector<int32_t>& tokens() const { return *tokens_; }
  // Example i: its seq_len inputs and seq_len targets.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> example(int64_t i) const;

 private:
  std::shared_ptr<const std::vector<int32_t>> tokens_;  // shared by copies and loader threads
  int64_t seq_len_;
  std::string name_;
};

struct DatasetSplits {
  TokenDataset train;
  TokenDataset validation;
};

struct LoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_remainder = true;
};

// Produces the next batch, or nothing at the end of the stream.
using BatchProducer = std::function<std::optional<Batch>()>;

// Batches of a TokenDataset, epoch by epoch.
class DataLoader {
 public:
  DataLoader(TokenDataset dataset, LoaderOptions options);

  const TokenDataset& dataset() const { return dataset_; }
  const LoaderOptions& options() const { return options_; }
  // Batches per epoch: floor(n / B) with drop_remainder, ceil(n / B) without.
  int64_t num_batches() const;
  // The example indices of `epoch` in visiting order.
  std::vector<int64_t> order(int64_t epoch) const;
  // Batch `index` of an epoch whose order is `order`.
  Batch batch(const std::vector<int64_t>& order, int64_t index) const;
  Batch batch(int64_t epoch, int64_t index) const { return batch(order(epoch), index); }

  // The batches of one epoch, for range-for: for (const Batch& b : loader.epoch(3)). The range
  // points to the loader, which must outlive it.
  class EpochRange {
   public:
    class iterator {
     public:
      iterator(const EpochRange* range, int64_t index);
      const Batch& operator*() const { return current_; }
      const Batch* operator->() const { return &current_; }
      iterator& operator++();
      bool operator==(const iterator& o) const { return index_ == o.index_; }
      bool operator!=(const iterator& o) const { return index_ != o.index_; }

     private:
      void load();
      const EpochRange* range_;
      int64_t index_;
      Batch current_;
    };
    EpochRange(const DataLoader* loader, std::vector<int64_t> order)
        : loader_(loader), order_(std::move(order)) {}
    iterator begin() const { return iterator(this, 0); }
    iterator end() const { return iterator(this, loader_->num_batches()); }

   private:
    const DataLoader* loader_;
    std::vector<int64_t> order_;
  };
  EpochRange epoch(int64_t epoch) const { return EpochRange(this, order(epoch)); }

  // A producer of the batches of one epoch (for Prefetcher). It holds a copy of the loader.
  BatchProducer reader(int64_t epoch) const;
  // An endless producer: step s is batch s % num_batches of epoch s / num_batches, so a run
  // resumed at `start_step` sees the batches it would have seen.
  BatchProducer stream(int64_t start_step = 0) const;

 private:
  TokenDataset dataset_;
  LoaderOptions options_;
};

// Runs `producer` on a background thread that keeps up to `buffer_size` batches ready (as
// device Arrays) while the consumer works. next() blocks until a batch is ready and returns
// nothing at the end of the stream; an exception thrown by the producer is rethrown by next()
// (after the batches produced before it). The destructor stops the producer and joins the
// thread, also mid-stream.
class Prefetcher {
 public:
  explicit Prefetcher(BatchProducer producer, size_t buffer_size = 2);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  std::optional<Batch> next();

 private:
  void run();
  BatchProducer producer_;
  size_t buffer_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool done_ = false;  // the producer finished (end of stream or error)
  bool stop_ = false;  // the consumer is going away
  std::exception_ptr error_;
  std::thread thread_;  // started by the constructor once the arguments are checked
};

// The unigram baseline of a language model's loss. unigram_entropy is -sum_b p(b) log p(b) in
// nats, p the empirical distribution of the tokens (0..255): the mean cross-entropy that the
// best model ignoring context reaches on these same tokens. A model whose loss is not below it
// has learned nothing but byte frequencies.
double unigram_entropy(const std::vector<int32_t>& tokens);
// The mean cross-entropy in nats on `eval` of a unigram model fitted on `train` with add-one
// smoothing, q(b) = (count_train(b) + 1) / (len(train) + 256): the baseline that a validation
// loss is compared with (a byte unseen in train still has a finite cost).
double unigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& eval);

}  // namespace cujax::data

CUJAX_REGISTER_TREE(cujax::data::Batch, inputs, targets);
