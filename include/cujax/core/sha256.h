// SHA-256 (FIPS 180-4): the checksum of exported artifacts.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cujax {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  // The digest of everything given to update(); the object is spent afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes
};

std::array<uint8_t, 32> sha256(std::string_view bytes);
// Lower-case hex, 64 characters.
std::string sha256_hex(std::string_view bytes);

}  // namespace cujax
