#include <array>
#include <cmath>

#include "cujax/data.h"

namespace cujax::data {

namespace {

std::array<int64_t, 256> byte_counts(const char* what, const std::vector<int32_t>& tokens) {
  std::array<int64_t, 256> counts{};
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 255)
      throw Error(std::string(what) + ": token " + std::to_string(tokens[i]) + " at position " +
                  std::to_string(i) + " is not a byte (0..255)");
    ++counts[tokens[i]];
  }
  return counts;
}

}  // namespace

double unigram_entropy(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) throw Error("unigram_entropy: no tokens");
  const auto counts = byte_counts("unigram_entropy", tokens);
  const double n = static_cast<double>(tokens.size());
  double h = 0.0;
  for (int64_t c : counts)
    if (c > 0) h -= (c / n) * std::log(c / n);
  return h;
}

double unigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& eval) {
  if (eval.empty()) throw Error("unigram_cross_entropy: no evaluation tokens");
  const auto fit = byte_counts("unigram_cross_entropy (train)", train);
  const auto seen = byte_counts("unigram_cross_entropy (eval)", eval);
  const double denom = static_cast<double>(train.size()) + 256.0;
  double total = 0.0;
  for (size_t b = 0; b < 256; ++b)
    if (seen[b] > 0) total -= seen[b] * std::log((fit[b] + 1) / denom);
  return total / static_cast<double>(eval.size());
}

}  // namespace cujax::data
