// SHA-256 through OpenSSL's EVP interface (libcrypto), which is well tested and uses the CPU's
// SHA extensions where it has them.
#include "cujax/core/sha256.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include "cujax/core/error.h"

namespace cujax {

namespace {

[[noreturn]] void openssl_failed(const char* what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw Error(std::string("SHA-256: ") + what + " failed: " + buf);
}

EVP_MD_CTX* ctx_of(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) openssl_failed("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(ctx_of(ctx_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_of(ctx_));
    openssl_failed("EVP_DigestInit_ex");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_of(ctx_));
}

void Sha256::update(std::string_view bytes) {
  if (EVP_DigestUpdate(ctx_of(ctx_), bytes.data(), bytes.size()) != 1)
    openssl_failed("EVP_DigestUpdate");
}

std::array<uint8_t, 32> Sha256::finish() {
  std::array<uint8_t, 32> out;
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_of(ctx_), out.data(), &n) != 1 || n != out.size())
    openssl_failed("EVP_DigestFinal_ex");
  return out;
}

std::array<uint8_t, 32> sha256(std::string_view bytes) {
  std::array<uint8_t, 32> out;
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 ||
      n != out.size())
    openssl_failed("EVP_Digest");
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : sha256(bytes)) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace cujax
