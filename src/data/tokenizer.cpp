#include "cujax/data.h"

namespace cujax::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> tokens(text.size());
  // unsigned char: a byte >= 0x80 is a token >= 128, not a negative one
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      throw Error("ByteTokenizer::decode: token " + std::to_string(tokens[i]) + " at position " +
                  std::to_string(i) + " is outside the byte vocabulary 0..255");
    text[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return text;
}

}  // namespace cujax::data
