#include "checkpoint/zarr.h"

#include "cujax/core/npy.h"

#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "checkpoint/files.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::zarr {

namespace fs = std::filesystem;

namespace {

std::vector<int64_t> chunk_shape_for(const Shape& shape) {
  // zarr needs chunk sizes >= 1; an empty dimension has no chunks anyway.
  Shape c = shape;
  for (auto& d : c) d = std::max<int64_t>(d, 1);
  return c;
}

json::Value int_list(const Shape& s) {
  json::Value::Array a;
  for (int64_t d : s) a.emplace_back(d);
  return json::Value(std::move(a));
}

Shape read_int_list(const json::Value& v, const fs::path& file, const char* field) {
  Shape out;
  if (!v.is_array()) throw Error(file.string() + ": \"" + field + "\" is not a list");
  for (const auto& x : v.as_array()) {
    const int64_t d = x.as_int();
    if (d < 0) throw Error(file.string() + ": negative entry in \"" + field + "\"");
    out.push_back(d);
  }
  return out;
}

std::string chunk_key(const std::vector<int64_t>& index, const std::string& sep) {
  if (index.empty()) return "0";
  std::string k;
  for (size_t i = 0; i < index.size(); ++i) k += (i ? sep : "") + std::to_string(index[i]);
  return k;
}

void byteswap_elements(std::string& bytes, size_t width) {
  if (width <= 1) return;
  for (size_t i = 0; i + width <= bytes.size(); i += width)
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                 bytes.begin() + static_cast<std::ptrdiff_t>(i + width));
}

// One element of `dtype` holding the zarr fill_value (a number, a bool, or "NaN"/"Infinity").
std::string fill_bytes(const json::Value& fill, DType dtype, const fs::path& file) {
  double v = 0;
  if (fill.kind() == json::Value::Kind::Bool) {
    v = fill.as_bool() ? 1 : 0;
  } else if (fill.is_number()) {
    v = fill.as_double();
  } else if (fill.is_string()) {
    const std::string& s = fill.as_string();
    if (s == "NaN")
      v = std::nan("");
    else if (s == "Infinity")
      v = HUGE_VAL;
    else if (s == "-Infinity")
      v = -HUGE_VAL;
    else
      throw Error(file.string() + ": unsupported fill_value \"" + s + "\"");
  } else {
    throw Error(file.string() + ": unsupported fill_value");
  }
  std::string out(size_of(dtype), '\0');
  visit_dtype_with_complex(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = static_cast<T>(v);
    std::memcpy(out.data(), &x, sizeof(T));
  });
  return out;
}

}  // namespace

std::string dtype_string(DType t) {
  // zarr (as Orbax writes it) names bfloat16 by name; every other dtype as NumPy does.
  return t == DType::BF16 ? "bfloat16" : npy_descr(t);
}

json::Value zarray_for(const HostTensor& t) {
  json::Value compressor = json::Value::object();
  compressor.set("id", "zstd");
  compressor.set("level", 1);
  json::Value z = json::Value::object();
  z.set("chunks", int_list(chunk_shape_for(t.shape())));
  z.set("compressor", std::move(compressor));
  z.set("dimension_separator", ".");
  z.set("dtype", dtype_string(t.dtype()));
  z.set("fill_value", nullptr);
  z.set("filters", nullptr);
  z.set("order", "C");
  z.set("shape", int_list(t.shape()));
  z.set("zarr_format", 2);
  return z;
}

void write_array(const fs::path& dir, const HostTensor& t) {
  files::write_synced(dir / ".zarray", json::dump(zarray_for(t)));
  if (t.size() > 0) {
    std::string frame(ZSTD_compressBound(t.nbytes()), '\0');
    const size_t n = ZSTD_compress(frame.data(), frame.size(), t.data(), t.nbytes(), 1);
    if (ZSTD_isError(n))
      throw Error("checkpoint: zstd compression of " + dir.string() +
                  " failed: " + ZSTD_getErrorName(n));
    frame.resize(n);
    files::write_synced(dir / chunk_key(std::vector<int64_t>(t.shape().size(), 0), "."), frame);
  }
  files::sync_dir(dir);
}

ArrayInfo read_info(const fs::path& dir) {
  const fs::path file = dir / ".zarray";
  if (!fs::exists(file)) throw Error("checkpoint: " + file.string() + " is missing");
  const json::Value z = json::parse(files::read(file), file.string());
  try {
    ArrayInfo info;
    if (z.at("zarr_format").as_int() != 2)
      throw Error("zarr_format " + std::to_string(z.at("zarr_format").as_int()) +
                  " (cujax reads zarr v2)");
    info.shape = read_int_list(z.at("shape"), file, "shape");
    info.chunks = read_int_list(z.at("chunks"), file, "chunks");
    if (info.chunks.size() != info.shape.size())
      throw Error("chunks " + shape_to_string(info.chunks) + " and shape " +
                  shape_to_string(info.shape) + " differ in rank");
    for (int64_t c : info.chunks)
      if (c < 1) throw Error("chunk sizes must be positive");
    const std::string& dtype = z.at("dtype").as_string();
    bool found = false;
    std::vector<DType> dtypes(std::begin(kAllDTypes), std::end(kAllDTypes));
    dtypes.insert(dtypes.end(), std::begin(kComplexDTypes), std::end(kComplexDTypes));
    for (DType t : dtypes) {
      std::string s = dtype_string(t);
      if (dtype == s) {
        info.dtype = t;
        found = true;
      } else if (s[0] == '<' && dtype == ">" + s.substr(1)) {
        info.dtype = t;
        info.big_endian = true;
        found = true;
      } else if (s[0] == '|' && dtype.size() == 3 && dtype.substr(1) == s.substr(1) &&
                 (dtype[0] == '<' || dtype[0] == '>')) {
        info.dtype = t;
        found = true;
      }
    }
    if (!found) throw Error("unsupported dtype \"" + dtype + "\"");
    if (const json::Value* order = z.get("order"); order && order->as_string() != "C")
      throw Error("order \"" + order->as_string() + "\" (cujax reads C order)");
    if (const json::Value* filters = z.get("filters");
        filters && !filters->is_null() && !filters->as_array().empty())
      throw Error("zarr filters are not supported");
    if (const json::Value* sep = z.get("dimension_separator"); sep && !sep->is_null()) {
      info.separator = sep->as_string();
      if (info.separator != "." && info.separator != "/")
        throw Error("dimension_separator \"" + info.separator + "\"");
    }
    const json::Value& comp = z.at("compressor");
    if (comp.is_null()) {
      info.zstd = false;
    } else if (comp.at("id").as_string() != "zstd") {
      throw Error("compressor \"" + comp.at("id").as_string() + "\" (cujax reads zstd or null)");
    }
    if (const json::Value* fill = z.get("fill_value")) info.fill_value = *fill;
    return info;
  } catch (const Error& e) {
    throw Error("checkpoint: " + file.string() + ": " + e.what());
  }
}

HostTensor read_array(const fs::path& dir, const ArrayInfo& info) {
  HostTensor out(info.dtype, info.shape);
  if (out.size() == 0) return out;
  const size_t width = size_of(info.dtype);
  const size_t rank = info.shape.size();
  const size_t chunk_bytes = static_cast<size_t>(num_elements(info.chunks)) * width;
  std::vector<int64_t> grid(rank);
  for (size_t d = 0; d < rank; ++d) grid[d] = (info.shape[d] + info.chunks[d] - 1) / info.chunks[d];
  const std::vector<int64_t> out_strides = row_major_strides(info.shape);
  const std::vector<int64_t> chunk_strides = row_major_strides(info.chunks);
  auto* dst = static_cast<char*>(out.data());

  std::vector<int64_t> index(rank, 0);
  std::string fill;
  while (true) {
    const fs::path file = dir / chunk_key(index, info.separator);
    std::string bytes;
    if (fs::exists(file)) {
      const std::string raw = files::read(file);
      if (info.zstd) {
        bytes.resize(chunk_bytes);
        const size_t n = ZSTD_decompress(bytes.data(), bytes.size(), raw.data(), raw.size());
        if (ZSTD_isError(n))
          throw Error("checkpoint: corrupt chunk " + file.string() +
                      ": zstd error: " + ZSTD_getErrorName(n));
        if (n != chunk_bytes)
          throw Error("checkpoint: corrupt chunk " + file.string() + ": decompressed to " +
                      std::to_string(n) + " bytes, expected " + std::to_string(chunk_bytes) +
                      " (chunk " + shape_to_string(info.chunks) + " of " +
                      std::string(numpy_name(info.dtype)) + ")");
      } else {
        if (raw.size() != chunk_bytes)
          throw Error("checkpoint: corrupt chunk " + file.string() + ": " +
                      std::to_string(raw.size()) + " bytes, expected " +
                      std::to_string(chunk_bytes));
        bytes = raw;
      }
      if (info.big_endian)  // a complex element's two parts swap separately
        byteswap_elements(bytes, size_of(complex_component(info.dtype)));
    } else {
      if (info.fill_value.is_null())
        throw Error("checkpoint: chunk " + file.string() + " is missing (and fill_value is null)");
      if (fill.empty()) fill = fill_bytes(info.fill_value, info.dtype, dir / ".zarray");
      bytes.resize(chunk_bytes);
      for (size_t i = 0; i < chunk_bytes; i += width) std::memcpy(&bytes[i], fill.data(), width);
    }

    // Copy the part of the chunk inside the array, one innermost row at a time.
    std::vector<int64_t> extent(rank), origin(rank);
    for (size_t d = 0; d < rank; ++d) {
      origin[d] = index[d] * info.chunks[d];
      extent[d] = std::min(info.chunks[d], info.shape[d] - origin[d]);
    }
    const size_t row = rank ? static_cast<size_t>(extent[rank - 1]) * width : width;
    std::vector<int64_t> pos(rank, 0);
    while (true) {
      int64_t src_off = 0, dst_off = 0;
      for (size_t d = 0; d < rank; ++d) {
        src_off += pos[d] * chunk_strides[d];
        dst_off += (origin[d] + pos[d]) * out_strides[d];
      }
      std::memcpy(dst + dst_off * static_cast<int64_t>(width),
                  bytes.data() + src_off * static_cast<int64_t>(width), row);
      if (rank <= 1) break;
      size_t d = rank - 1;
      while (d-- > 0) {
        if (++pos[d] < extent[d]) break;
        pos[d] = 0;
      }
      if (d == static_cast<size_t>(-1)) break;
    }

    size_t d = rank;
    while (d-- > 0) {
      if (++index[d] < grid[d]) break;
      index[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  return out;
}

}  // namespace cujax::checkpoint::zarr
