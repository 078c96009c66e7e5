#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "cujax/data.h"
#include "cujax/jit.h"
#include "cujax/metrics_log.h"
#include "cujax/numpy.h"

namespace cujax::data {
namespace {

namespace fs = std::filesystem;
namespace jnp = cujax::numpy;

std::vector<int32_t> iota_tokens(int32_t n) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = i;
  return t;
}

// The message of the Error that `fn` throws ("" if it throws none).
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(expr, ...)                                                 \
  do {                                                                              \
    const std::string msg_ = error_of([&] { (void)(expr); });                       \
    EXPECT_FALSE(msg_.empty()) << #expr " did not throw";                           \
    for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__})          \
      EXPECT_NE(msg_.find(part_), std::string::npos) << msg_ << " lacks " << part_; \
  } while (0)

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() /
              ("cujax_data_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name, const std::string& contents) const {
    std::ofstream(path_ / name, std::ios::binary) << contents;
    return (path_ / name).string();
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Inputs and targets of a batch as host vectors.
std::pair<std::vector<int32_t>, std::vector<int32_t>> host(const Batch& b) {
  return {b.inputs.to_vector<int32_t>(), b.targets.to_vector<int32_t>()};
}

TEST(ByteTokenizer, RoundTripsAnyBytes) {
  ByteTokenizer tok;
  const std::string text = std::string("h\xc3\xa9llo \xff\xfe", 9) + std::string(1, '\0') + "!";
  const std::vector<int32_t> tokens = tok.encode(text);
  // "é" is two UTF-8 bytes, so two tokens; bytes >= 0x80 are tokens >= 128, not negative
  EXPECT_EQ(tokens,
            (std::vector<int32_t>{'h', 0xC3, 0xA9, 'l', 'l', 'o', ' ', 0xFF, 0xFE, 0, '!'}));
  EXPECT_EQ(tok.decode(tokens), text);
  EXPECT_EQ(ByteTokenizer::vocab_size, 256);
  std::vector<int32_t> all = iota_tokens(256);
  EXPECT_EQ(tok.encode(tok.decode(all)), all);
}

TEST(ByteTokenizer, RejectsTokensOutsideTheVocabulary) {
  ByteTokenizer tok;
  EXPECT_ERROR_HAS(tok.decode({65, 66, 256}), "256", "position 2");
  EXPECT_ERROR_HAS(tok.decode({-1}), "-1", "position 0");
}

TEST(TokenDataset, WindowsAndTargetsShiftedByOne) {
  TokenDataset ds(iota_tokens(21), 4, "iota");
  EXPECT_EQ(ds.num_tokens(), 21);
  EXPECT_EQ(ds.num_examples(), 5);  // (21 - 1) / 4
  auto [in0, tg0] = ds.example(0);
  EXPECT_EQ(in0, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(tg0, (std::vector<int32_t>{1, 2, 3, 4}));
  auto [in4, tg4] = ds.example(4);
  EXPECT_EQ(in4, (std::vector<int32_t>{16, 17, 18, 19}));
  EXPECT_EQ(tg4, (std::vector<int32_t>{17, 18, 19, 20}));
  EXPECT_ERROR_HAS(ds.example(5), "iota", "example 5", "[0, 5)");
  // 22 tokens still give 5 examples: the last unused token cannot be a full window
  EXPECT_EQ(TokenDataset(iota_tokens(22), 4).num_examples(), 5);
  EXPECT_EQ(TokenDataset(iota_tokens(20), 4).num_examples(), 4);
}

TEST(TokenDataset, RejectsTooFewTokensAndBadSeqLen) {
  EXPECT_ERROR_HAS(TokenDataset(iota_tokens(4), 4, "tiny"), "tiny", "4 tokens", "needs 5");
  EXPECT_ERROR_HAS(TokenDataset(iota_tokens(10), 0, "zero"), "zero", "seq_len");
}

TEST(TokenDataset, SplitKeepsOrderAndChecksEachPart) {
  TokenDataset ds(iota_tokens(100), 4, "corpus");
  DatasetSplits s = ds.split(0.1);
  EXPECT_EQ(s.train.num_tokens(), 90);
  EXPECT_EQ(s.validation.num_tokens(), 10);
  EXPECT_EQ(s.train.tokens().front(), 0);
  EXPECT_EQ(s.train.tokens().back(), 89);
  EXPECT_EQ(s.validation.tokens().front(), 90);
  EXPECT_EQ(s.validation.tokens().back(), 99);
  EXPECT_EQ(s.validation.seq_len(), 4);
  EXPECT_NE(s.validation.name().find("corpus"), std::string::npos);
  EXPECT_ERROR_HAS(ds.split(0.0), "corpus", "(0, 1)");
  EXPECT_ERROR_HAS(ds.split(1.0), "corpus", "(0, 1)");
  EXPECT_ERROR_HAS(ds.split(std::nan("")), "corpus");
  // 4% of 100 is 4 validation tokens, one short of a sequence
  EXPECT_ERROR_HAS(ds.split(0.04), "96 training", "4 validation", "needs 5");
}

TEST(DataLoader, BatchesHoldTheWindowsInOrder) {
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  DataLoader loader(TokenDataset(iota_tokens(21), 4), o);
  Batch b = loader.batch(0, 1);  // examples 2 and 3
  EXPECT_EQ(b.inputs.dtype(), DType::I32);
  EXPECT_EQ(b.inputs.shape(), (Shape{2, 4}));
  EXPECT_EQ(b.targets.shape(), (Shape{2, 4}));
  EXPECT_EQ(b.inputs.to_vector<int32_t>(), (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(b.targets.to_vector<int32_t>(), (std::vector<int32_t>{9, 10, 11, 12, 13, 14, 15, 16}));
  EXPECT_ERROR_HAS(loader.batch(0, 2), "batch 2", "[0, 2)");
}

TEST(DataLoader, NumBatchesWithAndWithoutDropRemainder) {
  TokenDataset ds(iota_tokens(21), 4);  // 5 examples
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  EXPECT_EQ(DataLoader(ds, o).num_batches(), 2);
  o.drop_remainder = false;
  DataLoader keep(ds, o);
  EXPECT_EQ(keep.num_batches(), 3);
  Batch last = keep.batch(0, 2);  // the fifth example alone
  EXPECT_EQ(last.inputs.shape(), (Shape{1, 4}));
  EXPECT_EQ(last.inputs.to_vector<int32_t>(), (std::vector<int32_t>{16, 17, 18, 19}));
  EXPECT_EQ(last.targets.to_vector<int32_t>(), (std::vector<int32_t>{17, 18, 19, 20}));
  o.batch_size = 5;
  EXPECT_EQ(DataLoader(ds, o).num_batches(), 1);
  o.batch_size = 6;
  EXPECT_EQ(DataLoader(ds, o).num_batches(), 1);
  o.drop_remainder = true;
  EXPECT_ERROR_HAS(DataLoader(ds, o), "5 examples", "batch of 6");
  o.batch_size = 0;
  EXPECT_ERROR_HAS(DataLoader(ds, o), "batch_size");
}

TEST(DataLoader, ShuffledOrderIsADeterministicPermutationPerSeedAndEpoch) {
  TokenDataset ds(iota_tokens(101), 1);  // 100 examples
  LoaderOptions o;
  o.seed = 7;
  DataLoader loader(ds, o);
  const std::vector<int64_t> e0 = loader.order(0);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(100);
  for (int64_t i = 0; i < 100; ++i) identity[i] = i;
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(e0, identity);
  EXPECT_EQ(loader.order(0), e0);
  EXPECT_EQ(DataLoader(ds, o).order(0), e0);
  EXPECT_NE(loader.order(1), e0);
  o.seed = 8;
  EXPECT_NE(DataLoader(ds, o).order(0), e0);
  o.shuffle = false;
  EXPECT_EQ(DataLoader(ds, o).order(5), identity);
  EXPECT_ERROR_HAS(loader.order(-1), "epoch");
}

// The order is pinned across platforms: these values come from an independent Python
// implementation of the documented algorithm (SplitMix64 seeded from (seed, epoch), then
// Fisher-Yates with rejection sampling).
TEST(DataLoader, ShuffledOrderMatchesTheReferenceImplementation) {
  LoaderOptions o;
  o.batch_size = 1;
  o.seed = 0;
  TokenDataset ds(iota_tokens(11), 1);  // 10 examples
  EXPECT_EQ(DataLoader(ds, o).order(0), (std::vector<int64_t>{1, 7, 6, 2, 0, 9, 8, 4, 5, 3}));
  o.seed = 42;
  EXPECT_EQ(DataLoader(ds, o).order(3), (std::vector<int64_t>{0, 4, 8, 3, 5, 9, 7, 2, 6, 1}));
}

TEST(DataLoader, ShuffledBatchesFollowTheOrder) {
  TokenDataset ds(iota_tokens(61), 3);  // 20 examples
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 3;
  DataLoader loader(ds, o);
  const std::vector<int64_t> order = loader.order(2);
  int64_t j = 0;
  for (const Batch& b : loader.epoch(2)) {
    auto [in, tg] = host(b);
    ASSERT_EQ(in.size(), 12u);
    for (int64_t r = 0; r < 4; ++r) {
      auto [ein, etg] = ds.example(order[j * 4 + r]);
      EXPECT_EQ(std::vector<int32_t>(in.begin() + r * 3, in.begin() + r * 3 + 3), ein);
      EXPECT_EQ(std::vector<int32_t>(tg.begin() + r * 3, tg.begin() + r * 3 + 3), etg);
    }
    ++j;
  }
  EXPECT_EQ(j, 5);
}

TEST(DataLoader, ReaderYieldsOneEpochThenEnds) {
  LoaderOptions o;
  o.batch_size = 2;
  DataLoader loader(TokenDataset(iota_tokens(41), 4), o);  // 10 examples, 5 batches
  BatchProducer r = loader.reader(1);
  for (int64_t j = 0; j < 5; ++j) {
    std::optional<Batch> b = r();
    ASSERT_TRUE(b);
    EXPECT_EQ(host(*b), host(loader.batch(1, j)));
  }
  EXPECT_FALSE(r());
  EXPECT_FALSE(r());
}

TEST(DataLoader, StreamResumesAtAStep) {
  LoaderOptions o;
  o.batch_size = 2;
  o.seed = 11;
  DataLoader loader(TokenDataset(iota_tokens(21), 4), o);  // 5 examples, 2 batches an epoch
  BatchProducer from0 = loader.stream();
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> seen;
  for (int64_t s = 0; s < 7; ++s) {
    std::optional<Batch> b = from0();
    ASSERT_TRUE(b);
    seen.push_back(host(*b));
    EXPECT_EQ(seen.back(), host(loader.batch(s / 2, s % 2))) << "step " << s;
  }
  BatchProducer from3 = loader.stream(3);
  for (int64_t s = 3; s < 7; ++s) EXPECT_EQ(host(*from3()), seen[s]) << "step " << s;
  // epochs differ, so the stream is not periodic in one epoch
  EXPECT_NE(loader.order(0), loader.order(1));
  EXPECT_ERROR_HAS(loader.stream(-1), "start_step");
}

TEST(DataLoader, BatchIsATreeAndAJittedStepCompilesOnce) {
  LoaderOptions o;
  o.batch_size = 3;
  DataLoader loader(TokenDataset(iota_tokens(100), 5), o);  // 19 examples: 6 batches, 1 dropped
  EXPECT_EQ(tree_structure(loader.batch(0, 0)), "struct cujax::data::Batch(inputs=*,targets=*)");
  EXPECT_EQ(tree_leaves(loader.batch(0, 0)).size(), 2u);
  auto step = jit([](const Batch& b) { return jnp::sum(b.targets - b.inputs); });
  int64_t batches = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch)
    for (const Batch& b : loader.epoch(epoch)) {
      // targets - inputs is 1 everywhere for consecutive integers
      EXPECT_EQ(step(b).item<int32_t>(), 3 * 5);
      ++batches;
    }
  EXPECT_EQ(batches, 12);
  EXPECT_EQ(step.compile_count(), 1);
}

TEST(Prefetcher, YieldsTheSameBatchesAsDirectIteration) {
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 5;
  DataLoader loader(TokenDataset(iota_tokens(200), 7), o);  // 28 examples, 7 batches
  for (size_t buffer : {size_t{1}, size_t{2}, size_t{16}}) {
    Prefetcher p(loader.reader(3), buffer);
    int64_t j = 0;
    while (auto b = p.next()) {
      EXPECT_EQ(host(*b), host(loader.batch(3, j))) << "buffer " << buffer << " batch " << j;
      ++j;
    }
    EXPECT_EQ(j, 7);
    EXPECT_FALSE(p.next());
  }
}

TEST(Prefetcher, WorksAheadOfTheConsumerUpToItsBuffer) {
  LoaderOptions o;
  o.batch_size = 1;
  DataLoader loader(TokenDataset(iota_tokens(50), 2), o);
  auto calls = std::make_shared<std::atomic<int>>(0);
  BatchProducer inner = loader.stream();
  Prefetcher p(
      [calls, inner]() mutable {
        ++*calls;
        return inner();
      },
      3);
  // Without any next() the thread fills the buffer, then waits.
  for (int i = 0; i < 500 && *calls < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls->load(), 3);
  ASSERT_TRUE(p.next());
  for (int i = 0; i < 500 && *calls < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(calls->load(), 4);
}

TEST(Prefetcher, RethrowsAProducerErrorAfterTheEarlierBatches) {
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  DataLoader loader(TokenDataset(iota_tokens(41), 4), o);
  int produced = 0;
  Prefetcher p(
      [&]() -> std::optional<Batch> {
        if (produced == 3) throw Error("corpus went away at batch 3");
        return loader.batch(0, produced++);
      },
      4);
  for (int64_t j = 0; j < 3; ++j) {
    std::optional<Batch> b = p.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(host(*b), host(loader.batch(0, j)));
  }
  EXPECT_ERROR_HAS(p.next(), "corpus went away at batch 3");
  EXPECT_ERROR_HAS(p.next(), "corpus went away at batch 3");
}

// Runs `fn` on a thread and fails (aborting, since the thread cannot be stopped) unless it
// returns within the deadline.
template <class F>
void finishes_within(std::chrono::seconds deadline, F fn, const char* what) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  std::thread([done, fn]() mutable {
    fn();
    done->set_value();
  }).detach();
  if (f.wait_for(deadline) != std::future_status::ready) {
    std::fprintf(stderr, "%s did not finish within %lld s\n", what,
                 static_cast<long long>(deadline.count()));
    std::abort();
  }
}

TEST(Prefetcher, DestructorMidStreamDoesNotHang) {
  LoaderOptions o;
  o.batch_size = 2;
  DataLoader loader(TokenDataset(iota_tokens(101), 4), o);
  finishes_within(
      std::chrono::seconds(20),
      [loader] {
        // An endless stream with a full buffer: the thread waits for room when the consumer leaves.
        Prefetcher p(loader.stream(), 2);
        (void)p.next();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      },
      "~Prefetcher over a full buffer");
  finishes_within(
      std::chrono::seconds(20),
      [loader] {
        // A slow producer: the destructor waits only for the call in progress.
        BatchProducer inner = loader.stream();
        Prefetcher p(
            [inner]() mutable {
              std::this_thread::sleep_for(std::chrono::milliseconds(30));
              return inner();
            },
            8);
      },
      "~Prefetcher over a slow producer");
  EXPECT_ERROR_HAS(Prefetcher(loader.reader(0), 0), "buffer_size");
}

TEST(TokenDataset, FromPathReadsADirectorySortedSkippingIndexAndHiddenFiles) {
  TempDir dir("corpus");
  dir.file("b", "BBB");
  dir.file("a", "AA");
  dir.file("a.dat", "index");
  dir.file(".hidden", "secret");
  fs::create_symlink(dir.path() / "a", dir.path() / "a.u8");  // as fortune's links
  fs::create_directory(dir.path() / "c");
  dir.file("c/inner", "not read");
  dir.file("d.txt", "dd");
  fs::create_symlink(dir.path() / "d.txt", dir.path() / "e");  // a link to a file is read
  TokenDataset ds = TokenDataset::from_path(dir.path().string(), 2);
  EXPECT_EQ(ByteTokenizer().decode(ds.tokens()), "AABBBdddd");
  EXPECT_EQ(ds.name(), dir.path().string());
  TokenDataset one = TokenDataset::from_path((dir.path() / "b").string(), 2);
  EXPECT_EQ(ByteTokenizer().decode(one.tokens()), "BBB");
  EXPECT_EQ(ByteTokenizer().decode(TokenDataset::from_file(dir.file("f", "xyz"), 1).tokens()),
            "xyz");
}

TEST(TokenDataset, FromPathAndFromFileErrorsNameThePath) {
  TempDir dir("errors");
  const std::string missing = (dir.path() / "nope").string();
  EXPECT_ERROR_HAS(TokenDataset::from_path(missing, 4), missing, "does not exist");
  EXPECT_ERROR_HAS(TokenDataset::from_file(missing, 4), missing, "does not exist");

  const std::string empty = dir.file("empty", "");
  EXPECT_ERROR_HAS(TokenDataset::from_path(empty, 4), empty, "is empty");
  EXPECT_ERROR_HAS(TokenDataset::from_file(empty, 4), empty, "is empty");

  const std::string shortf = dir.file("short", "hello");
  EXPECT_ERROR_HAS(TokenDataset::from_path(shortf, 8), shortf, "5 tokens", "needs 9");

  // A directory whose only files are empty is empty; one with only skipped names has none.
  TempDir empties("empties");
  empties.file("x", "");
  EXPECT_ERROR_HAS(TokenDataset::from_path(empties.path().string(), 4), empties.path().string(),
                   "is empty");
  TempDir skipped("skipped");
  skipped.file("x.dat", "data");
  skipped.file("y.u8", "data");
  skipped.file(".z", "data");
  EXPECT_ERROR_HAS(TokenDataset::from_path(skipped.path().string(), 1), skipped.path().string(),
                   "no usable files");
  EXPECT_ERROR_HAS(TokenDataset::from_file(skipped.path().string(), 1), "not a regular file");
  EXPECT_ERROR_HAS(TokenDataset::from_path("/dev/null", 1), "/dev/null",
                   "neither a regular file nor a directory");

  // Unreadable: reading /proc/self/mem at offset 0 fails (EIO) even for root.
  EXPECT_ERROR_HAS(TokenDataset::from_file("/proc/self/mem", 1), "/proc/self/mem", "cannot read");
  const std::string locked = dir.file("locked", "some text");
  ::chmod(locked.c_str(), 0);
  if (::geteuid() != 0)  // root reads a mode-0 file anyway
    EXPECT_ERROR_HAS(TokenDataset::from_path(locked, 1), locked, "cannot read");
}

TEST(TokenDataset, DefaultCorpusLoadsWhenInstalled) {
  const std::string corpus = "/usr/share/games/fortunes";
  if (!fs::is_directory(corpus)) GTEST_SKIP() << corpus << " is not installed";
  TokenDataset ds = TokenDataset::from_path(corpus, 128);
  EXPECT_GT(ds.num_tokens(), 1'000'000);  // about 2.5 MB of text
  EXPECT_LT(ds.num_tokens(), 10'000'000);
  // English text: its byte entropy is well below the 8 bits (5.55 nats) of random bytes
  const double h = unigram_entropy(ds.tokens());
  EXPECT_GT(h, 2.5);
  EXPECT_LT(h, 3.5);
}

TEST(Unigram, EntropyAgainstHandComputedValues) {
  // "aab": p(a) = 2/3, p(b) = 1/3
  const double h = -(2.0 / 3 * std::log(2.0 / 3) + 1.0 / 3 * std::log(1.0 / 3));
  EXPECT_NEAR(unigram_entropy({'a', 'a', 'b'}), h, 1e-12);
  EXPECT_NEAR(h, 0.6365141682948128, 1e-15);
  EXPECT_NEAR(unigram_entropy(iota_tokens(256)), std::log(256.0), 1e-12);
  EXPECT_EQ(unigram_entropy({7, 7, 7}), 0.0);
  EXPECT_ERROR_HAS(unigram_entropy({}), "no tokens");
  EXPECT_ERROR_HAS(unigram_entropy({1, 300}), "300", "position 1");
}

TEST(Unigram, CrossEntropyWithAddOneSmoothing) {
  // train "aab" (3 tokens): q(a) = 3/259, q(c) = 1/259 (unseen); eval "ac"
  const double ce = -(std::log(3.0 / 259) + std::log(1.0 / 259)) / 2;
  EXPECT_NEAR(unigram_cross_entropy({'a', 'a', 'b'}, {'a', 'c'}), ce, 1e-12);
  // With no training data every byte costs log 256.
  EXPECT_NEAR(unigram_cross_entropy({}, {1, 2, 3}), std::log(256.0), 1e-12);
  // 33334 b and 66666 a: the smoothed probabilities sit just below the frequencies, so the
  // cross-entropy on the same data is slightly above its entropy.
  std::vector<int32_t> big;
  for (int i = 0; i < 100000; ++i) big.push_back(i % 3 == 0 ? 'b' : 'a');
  const double big_ce =
      -(66666 * std::log(66667.0 / 100256) + 33334 * std::log(33335.0 / 100256)) / 100000;
  EXPECT_NEAR(unigram_cross_entropy(big, big), big_ce, 1e-12);
  EXPECT_GT(big_ce, unigram_entropy(big));
  EXPECT_ERROR_HAS(unigram_cross_entropy({1}, {}), "no evaluation tokens");
  EXPECT_ERROR_HAS(unigram_cross_entropy({-4}, {1}), "train", "-4");
}

}  // namespace
}  // namespace cujax::data

namespace cujax::metrics_log {
namespace {

using data::error_of;
using data::TempDir;

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

TEST(MetricsLog, CsvContentIsExact) {
  TempDir dir("csv");
  const std::string path = (dir.path() / "metrics.csv").string();
  write_csv(path, {"step", "loss", "a,b \"q\""},
            {{0, 2.5, 1e-3}, {100, 0.1, std::nan("")}, {-3, 1.0 / 3, INFINITY}});
  EXPECT_EQ(data::read(path),
            "step,loss,\"a,b \"\"q\"\"\"\n"
            "0,2.5,0.001\n"
            "100,0.1,nan\n"
            "-3,0.3333333333333333,inf\n");
  write_csv(path, {"step"}, {{1}});  // replaces the file
  EXPECT_EQ(data::read(path), "step\n1\n");
  EXPECT_ERROR_HAS(write_csv(path, {"a", "b"}, {{1, 2}, {3}}), path, "row 1", "1 values",
                   "2 columns");
  EXPECT_EQ(data::read(path), "step\n1\n");  // a failed write leaves the old file
  EXPECT_EQ(dir.names(), std::vector<std::string>{"metrics.csv"});
  const std::string nowhere = (dir.path() / "no" / "such" / "m.csv").string();
  EXPECT_ERROR_HAS(write_csv(nowhere, {"a"}, {}), nowhere);
}

TEST(MetricsLog, SvgLineChartIsSelfContainedWithEveryPoint) {
  TempDir dir("svg");
  const std::string path = (dir.path() / "loss.svg").string();
  Series train{"train", {}}, val{"val <held out>", {}};
  for (int s = 0; s < 60; ++s) train.points.push_back({s * 10.0, 5.5 * std::exp(-s / 20.0) + 1});
  train.points[30].second = std::nan("");  // a diverged step is left out
  for (int s = 0; s < 6; ++s) val.points.push_back({s * 100.0, 5.0 * std::exp(-s / 2.0) + 1.2});
  write_svg_line_chart(path, "loss & friends", "step", "loss (nats)", {train, val});
  const std::string svg = data::read(path);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find(">train</text>"), std::string::npos);
  EXPECT_NE(svg.find(">val &lt;held out&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss &amp; friends</text>"), std::string::npos);
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss (nats)</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  // one polyline per series, with one "x,y" pair per finite point
  ASSERT_EQ(count(svg, "<polyline"), 2u);
  std::vector<size_t> pairs;
  for (size_t at = svg.find("points=\""); at != std::string::npos;
       at = svg.find("points=\"", at + 1)) {
    const size_t end = svg.find('"', at + 8);
    pairs.push_back(count(svg.substr(at + 8, end - at - 8), ","));
  }
  EXPECT_EQ(pairs, (std::vector<size_t>{59, 6}));
  EXPECT_EQ(count(svg, "<circle"), 6u);  // markers only on the sparse series
  // x spans 0..590, y 1.29..6.5: about 5 intervals of a 1-2-5 step, rounded out to ticks
  for (const char* tick : {">0</text>", ">200</text>", ">400</text>", ">600</text>", ">2</text>",
                           ">4</text>", ">6</text>", ">8</text>"})
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(svg.find(">800</text>"), std::string::npos);
  EXPECT_EQ(dir.names(), std::vector<std::string>{"loss.svg"});  // no temporary left

  // An XML parser accepts it (Python's, when present).
  if (std::filesystem::exists("/usr/bin/python3")) {
    const std::string cmd =
        "/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; "
        "E.parse(sys.argv[1])' " +
        path;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

TEST(MetricsLog, SvgErrorsNameTheFile) {
  TempDir dir("svg_errors");
  const std::string path = (dir.path() / "c.svg").string();
  Series s{"s", {{0, 1}, {1, 2}}};
  EXPECT_ERROR_HAS(write_svg_line_chart(path, "t", "x", "y", {}), path, "0 series");
  EXPECT_ERROR_HAS(write_svg_line_chart(path, "t", "x", "y", {s, s, s, s}), path, "4 series");
  EXPECT_ERROR_HAS(write_svg_line_chart(path, "t", "x", "y", {{"nan", {{0, std::nan("")}}}}), path,
                   "no series has a finite point");
  // a single point still gets a drawable axis
  write_svg_line_chart(path, "t", "x", "y", {{"one", {{3, 3}}}});
  EXPECT_NE(data::read(path).find("<circle"), std::string::npos);
  EXPECT_EQ(dir.names(), std::vector<std::string>{"c.svg"});
}

}  // namespace
}  // namespace cujax::metrics_log
