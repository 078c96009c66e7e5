#include "profiler/source_location.h"

#include <cctype>

namespace cujax::profiler {

namespace {

bool is_ident(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

// The end of the string literal starting at s[i] == '"' (the index after its closing quote).
size_t skip_string(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return s.size();
}

// Digits at s[i...]; returns their end (i when there are none).
size_t skip_digits(std::string_view s, size_t i) {
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

}  // namespace

LocationTable::LocationTable(const std::vector<std::string>& aliases) {
  for (const std::string& a : aliases) {
    if (a.rfind("#", 0) != 0) continue;
    const size_t eq = a.find('=');
    if (eq == std::string::npos) continue;
    size_t end = 1;
    while (end < a.size() && is_ident(a[end])) ++end;
    const size_t body = a.find_first_not_of(' ', eq + 1);
    if (body != std::string::npos) aliases_[a.substr(0, end)] = a.substr(body);
  }
}

std::string LocationTable::expand(std::string_view text, int depth) const {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '"') {
      const size_t end = skip_string(text, i);
      out += text.substr(i, end - i);
      i = end;
      continue;
    }
    if (text[i] == '#' && depth < 16) {
      size_t end = i + 1;
      while (end < text.size() && is_ident(text[end])) ++end;
      auto it = aliases_.find(std::string(text.substr(i, end - i)));
      if (it != aliases_.end()) {
        out += expand(it->second, depth + 1);
        i = end;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

std::string LocationTable::resolve(std::string_view loc) const {
  if (loc.empty()) return "";
  const std::string text = expand(loc, 0);
  std::string name, file;
  for (size_t i = 0; i < text.size() && file.empty();) {
    if (text[i] != '"') {
      ++i;
      continue;
    }
    const size_t end = skip_string(text, i);
    const std::string literal = text.substr(i + 1, end - i - 2);
    if (end < text.size() && text[end] == '(' && name.empty()) name = literal;
    if (end + 1 < text.size() && text[end] == ':') {
      const size_t line_end = skip_digits(text, end + 1);
      if (line_end > end + 1) {
        file = literal + text.substr(end, line_end - end);
        if (line_end + 1 < text.size() && text[line_end] == ':') {
          const size_t col_end = skip_digits(text, line_end + 1);
          file += text.substr(line_end, col_end - line_end);
        }
      }
    }
    i = end;
  }
  if (name.empty()) return file;
  return file.empty() ? name : name + " @ " + file;
}

}  // namespace cujax::profiler
