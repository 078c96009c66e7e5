// A row-major matrix of complex doubles on the host: the reference arithmetic that the linear
// algebra tests check factorizations against, whatever the dtype under test.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace cujax::testutil {

using cd = std::complex<double>;

struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<cd> v;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c)) {}
  cd& operator()(int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; }
  cd operator()(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
};

inline Mat matmul(const Mat& a, const Mat& b) {
  Mat c(a.rows, b.cols);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t k = 0; k < a.cols; ++k)
      for (int64_t j = 0; j < b.cols; ++j) c(i, j) += a(i, k) * b(k, j);
  return c;
}

// The conjugate transpose.
inline Mat adjoint(const Mat& a) {
  Mat c(a.cols, a.rows);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < a.cols; ++j) c(j, i) = std::conj(a(i, j));
  return c;
}

inline Mat eye(int64_t n) {
  Mat c(n, n);
  for (int64_t i = 0; i < n; ++i) c(i, i) = 1;
  return c;
}

// The largest entrywise distance; a shape mismatch fails the test.
inline double max_diff(const Mat& a, const Mat& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  double d = 0;
  for (size_t i = 0; i < a.v.size() && i < b.v.size(); ++i)
    d = std::max(d, std::abs(a.v[i] - b.v[i]));
  return d;
}

}  // namespace cujax::testutil
