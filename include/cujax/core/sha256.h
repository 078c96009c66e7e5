// SHA-256 (FIPS 180-4): the checksum of exported artifacts, computed by OpenSSL's libcrypto.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cujax {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes);
  // The digest of everything given to update(); the object is spent afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void* ctx_;  // EVP_MD_CTX, kept out of this header so users need no OpenSSL headers
};

std::array<uint8_t, 32> sha256(std::string_view bytes);
// Lower-case hex, 64 characters.
std::string sha256_hex(std::string_view bytes);

}  // namespace cujax
