#include "cujax/core/npy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cujax/core/error.h"

namespace cujax {

std::string npy_descr(DType t) {
  switch (t) {
    case DType::Bool:
      return "|b1";
    case DType::I8:
      return "|i1";
    case DType::U8:
      return "|u1";
    case DType::I16:
      return "<i2";
    case DType::I32:
      return "<i4";
    case DType::I64:
      return "<i8";
    case DType::U16:
      return "<u2";
    case DType::U32:
      return "<u4";
    case DType::U64:
      return "<u8";
    case DType::F16:
      return "<f2";
    case DType::BF16:
      return "<V2";
    case DType::F32:
      return "<f4";
    case DType::F64:
      return "<f8";
    case DType::C64:
      return "<c8";
    case DType::C128:
      return "<c16";
    default:
      // The narrow types: ml_dtypes saves them as anonymous one-byte voids ('|V1'), which do not
      // say the type.
      throw UnsupportedError(".npy: " + std::string(numpy_name(t)) +
                             " has no NumPy type descriptor that names it");
  }
  return "";
}

namespace {

// Returns the dtype and whether the data is big-endian.
std::pair<DType, bool> dtype_of_descr(const std::string& descr, const std::string& what) {
  if (descr == "bfloat16") return {DType::BF16, false};
  if (descr.size() < 3) throw Error(what + ": unsupported dtype descr '" + descr + "'");
  const char order = descr[0];
  const bool big = order == '>';
  const std::string code = descr.substr(1);
  static const std::pair<const char*, DType> kCodes[] = {
      {"b1", DType::Bool}, {"i1", DType::I8},  {"u1", DType::U8},   {"i2", DType::I16},
      {"i4", DType::I32},  {"i8", DType::I64}, {"u2", DType::U16},  {"u4", DType::U32},
      {"u8", DType::U64},  {"f2", DType::F16}, {"V2", DType::BF16}, {"f4", DType::F32},
      {"f8", DType::F64},  {"c8", DType::C64}, {"c16", DType::C128}};
  if (order == '<' || order == '>' || order == '|' || order == '=')
    for (const auto& [c, t] : kCodes)
      if (code == c) return {t, big};
  throw Error(what + ": unsupported dtype descr '" + descr + "'");
}

// Value of `key` in the header dict, as written by NumPy: 'descr': '<f4', 'shape': (2, 3).
std::string header_field(const std::string& header, const std::string& key,
                         const std::string& what) {
  const std::string quoted = "'" + key + "'";
  size_t p = header.find(quoted);
  if (p == std::string::npos) throw Error(what + ": header has no " + quoted);
  p = header.find(':', p + quoted.size());
  if (p == std::string::npos) throw Error(what + ": malformed header near " + quoted);
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size()) throw Error(what + ": malformed header near " + quoted);
  size_t end;
  if (header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string::npos) throw Error(what + ": unterminated string in header");
    return header.substr(p + 1, end - p - 1);
  }
  if (header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos) throw Error(what + ": unterminated shape in header");
    return header.substr(p, end - p + 1);
  }
  end = header.find_first_of(",}", p);
  return header.substr(p, end == std::string::npos ? std::string::npos : end - p);
}

Shape parse_shape(const std::string& text, const std::string& what) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    throw Error(what + ": the shape is not a tuple: '" + text + "'");
  Shape shape;
  std::string digits;
  for (char c : text.substr(1)) {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (c == ',' || c == ')') {
      if (!digits.empty()) {
        if (digits.size() > 15) throw Error(what + ": dimension too large in shape " + text);
        shape.push_back(std::stoll(digits));
      }
      digits.clear();
    } else if (c != ' ' && c != 'L') {
      throw Error(what + ": malformed shape " + text);
    }
  }
  return shape;
}

void byteswap(HostTensor& t) {
  // A complex element is two floats, each swapped on its own.
  const size_t w = size_of(complex_component(t.dtype()));
  const int64_t n = t.size() * (is_complex(t.dtype()) ? 2 : 1);
  auto* p = static_cast<unsigned char*>(t.data());
  for (int64_t i = 0; i < n; ++i) std::reverse(p + i * w, p + (i + 1) * w);
}

// Column-major data of `shape` -> row-major.
HostTensor from_fortran_order(const HostTensor& f) {
  HostTensor out(f.dtype(), f.shape());
  const Shape& shape = f.shape();
  const size_t w = size_of(f.dtype());
  const auto row_strides = row_major_strides(shape);
  std::vector<int64_t> col_strides(shape.size());
  int64_t s = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    col_strides[d] = s;
    s *= shape[d];
  }
  const auto* src = static_cast<const std::byte*>(f.data());
  auto* dst = static_cast<std::byte*>(out.data());
  for (int64_t i = 0; i < f.size(); ++i) {
    int64_t rem = i, src_index = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      src_index += (rem / row_strides[d]) * col_strides[d];
      rem %= row_strides[d];
    }
    std::memcpy(dst + i * w, src + src_index * w, w);
  }
  return out;
}

}  // namespace

HostTensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw Error(what + ": not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(what + ": truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= size_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
    offset = 12;
  } else {
    throw Error(what + ": unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < offset + header_len) throw Error(what + ": truncated header");
  const std::string header = bytes.substr(offset, header_len);
  const auto [dtype, big_endian] = dtype_of_descr(header_field(header, "descr", what), what);
  const bool fortran =
      header_field(header, "fortran_order", what).find("True") != std::string::npos;
  const Shape shape = parse_shape(header_field(header, "shape", what), what);
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > (int64_t{1} << 48) / d) throw Error(what + ": shape too large");
    count *= d;
  }
  const size_t data_offset = offset + header_len;
  const size_t need = static_cast<size_t>(count) * size_of(dtype);
  if (bytes.size() - data_offset < need)
    throw Error(what + ": data is truncated: " + std::to_string(need) + " bytes expected, " +
                std::to_string(bytes.size() - data_offset) + " present");
  HostTensor t = HostTensor::from_bytes(
      dtype, shape,
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()) + data_offset,
                                 need));
  if (big_endian) byteswap(t);
  if (fortran && shape.size() > 1) t = from_fortran_order(t);
  return t;
}

HostTensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

std::string serialize_npy(const HostTensor& tensor) {
  // NumPy's tuple syntax: (), (3,), (2, 3).
  const Shape& dims = tensor.shape();
  std::string shape = "(";
  for (size_t i = 0; i < dims.size(); ++i) shape += (i ? ", " : "") + std::to_string(dims[i]);
  shape += dims.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + npy_descr(tensor.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(tensor.data()), tensor.nbytes());
  return out;
}

void save_npy(const std::string& path, const HostTensor& tensor) {
  const std::string bytes = serialize_npy(tensor);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot open for writing");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename temporary file into place");
  }
}

}  // namespace cujax
