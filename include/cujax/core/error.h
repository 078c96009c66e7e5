// Error types. Every message names what failed: the op, the operand, the file or the shapes.
#pragma once

#include <stdexcept>
#include <string>

namespace cujax {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Text that is not valid StableHLO; line and column are 1-based.
class ParseError : public Error {
 public:
  ParseError(int line, int column, const std::string& message)
      : Error(std::to_string(line) + ":" + std::to_string(column) + ": " + message),
        line_(line),
        column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_;
  int column_;
};

// A module that parses but breaks a type or shape rule of an op.
class VerifyError : public Error {
 public:
  using Error::Error;
};

// An op, dtype or attribute that a backend does not implement.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

// A failure while running a compiled program (out-of-bounds data, a failed runtime check).
class RuntimeError : public Error {
 public:
  using Error::Error;
};

}  // namespace cujax
