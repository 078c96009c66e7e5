#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cujax/data.h"

namespace cujax::data {

namespace fs = std::filesystem;

namespace {

// Appends the bytes of the regular file `path` to `out`; `what` prefixes errors.
void append_file(const std::string& what, const fs::path& path, std::string& out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(what + ": cannot read '" + path.string() + "': " + std::strerror(errno));
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (failed) throw Error(what + ": cannot read '" + path.string() + "': " + std::strerror(err));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The status of `path`, following links; throws naming the path if it does not exist.
fs::file_status existing(const std::string& what, const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(what + ": '" + path + "' does not exist");
  return st;
}

TokenDataset from_bytes(const std::string& what, const std::string& path, const std::string& bytes,
                        int64_t seq_len) {
  if (bytes.empty()) throw Error(what + ": '" + path + "' is empty");
  return TokenDataset(ByteTokenizer().encode(bytes), seq_len, path);
}

}  // namespace

TokenDataset::TokenDataset(std::vector<int32_t> tokens, int64_t seq_len, std::string name)
    : seq_len_(seq_len), name_(std::move(name)) {
  if (seq_len < 1)
    throw Error("TokenDataset '" + name_ + "': seq_len must be >= 1, got " +
                std::to_string(seq_len));
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < seq_len + 1)
    throw Error("TokenDataset '" + name_ + "': " + std::to_string(n) +
                " tokens, too short for one sequence of seq_len " + std::to_string(seq_len) +
                " (needs " + std::to_string(seq_len + 1) + " tokens)");
  tokens_ = std::make_shared<const std::vector<int32_t>>(std::move(tokens));
}

TokenDataset TokenDataset::from_file(const std::string& path, int64_t seq_len) {
  const std::string what = "TokenDataset::from_file";
  if (!fs::is_regular_file(existing(what, path)))
    throw Error(what + ": '" + path + "' is not a regular file");
  std::string bytes;
  append_file(what, path, bytes);
  return from_bytes(what, path, bytes, seq_len);
}

TokenDataset TokenDataset::from_path(const std::string& path, int64_t seq_len) {
  const std::string what = "TokenDataset::from_path";
  const fs::file_status st = existing(what, path);
  if (fs::is_regular_file(st)) return from_file(path, seq_len);
  if (!fs::is_directory(st))
    throw Error(what + ": '" + path + "' is neither a regular file nor a directory");

  std::vector<fs::path> files;
  std::error_code ec;
  fs::directory_iterator it(path, ec);
  if (ec) throw Error(what + ": cannot list directory '" + path + "': " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".") || ends_with(name, ".dat") || ends_with(name, ".u8")) continue;
    std::error_code fec;
    if (fs::is_regular_file(it->path(), fec)) files.push_back(it->path());  // follows links
  }
  if (ec) throw Error(what + ": cannot list directory '" + path + "': " + ec.message());
  if (files.empty())
    throw Error(what + ": directory '" + path +
                "' has no usable files (regular, not hidden, not ending in .dat or .u8)");
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  std::string bytes;
  for (const fs::path& f : files) append_file(what, f, bytes);
  return from_bytes(what, path, bytes, seq_len);
}

DatasetSplits TokenDataset::split(double validation_fraction) const {
  if (!(validation_fraction > 0.0 && validation_fraction < 1.0))
    throw Error("TokenDataset '" + name_ + "': split(" + std::to_string(validation_fraction) +
                "): the validation fraction must be in (0, 1)");
  const int64_t n = num_tokens();
  const int64_t n_train = static_cast<int64_t>(std::floor((1.0 - validation_fraction) * n));
  const int64_t n_val = n - n_train;
  if (n_train < seq_len_ + 1 || n_val < seq_len_ + 1)
    throw Error("TokenDataset '" + name_ + "': split(" + std::to_string(validation_fraction) +
                ") of " + std::to_string(n) + " tokens gives " + std::to_string(n_train) +
                " training and " + std::to_string(n_val) + " validation tokens; each part needs " +
                std::to_string(seq_len_ + 1) + " (one sequence of seq_len " +
                std::to_string(seq_len_) + " plus its next token)");
  const auto& t = *tokens_;
  return DatasetSplits{TokenDataset(std::vector<int32_t>(t.begin(), t.begin() + n_train), seq_len_,
                                    name_ + " (train)"),
                       TokenDataset(std::vector<int32_t>(t.begin() + n_train, t.end()), seq_len_,
                                    name_ + " (validation)")};
}

std::pair<std::vector<int32_t>, std::vector<int32_t>> TokenDataset::example(int64_t i) const {
  if (i < 0 || i >= num_examples())
    throw Error("TokenDataset '" + name_ + "': example " + std::to_string(i) +
                " is out of range [0, " + std::to_string(num_examples()) + ")");
  const auto first = tokens_->begin() + i * seq_len_;
  return {std::vector<int32_t>(first, first + seq_len_),
          std::vector<int32_t>(first + 1, first + seq_len_ + 1)};
}

}  // namespace cujax::data
