#include "checkpoint/zarr.h"

#include "cujax/core/npy.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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

std::string single_chunk_key(const HostTensor& t) {
  return chunk_key(std::vector<int64_t>(t.shape().size(), 0), ".");
}

std::string single_chunk(const HostTensor& t) {
  std::string frame(ZSTD_compressBound(t.nbytes()), '\0');
  const size_t n = ZSTD_compress(frame.data(), frame.size(), t.data(), t.nbytes(), 1);
  if (ZSTD_isError(n))
    throw Error(std::string("checkpoint: zstd compression failed: ") + ZSTD_getErrorName(n));
  frame.resize(n);
  return frame;
}

void write_array(const fs::path& dir, const HostTensor& t) {
  files::write_synced(dir / ".zarray", json::dump(zarray_for(t)));
  if (t.size() > 0) files::write_synced(dir / single_chunk_key(t), single_chunk(t));
  files::sync_dir(dir);
}

std::string fill_bytes(const json::Value& fill, DType dtype, const std::string& where) {
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
      throw Error(where + ": unsupported fill_value \"" + s + "\"");
  } else {
    throw Error(where + ": unsupported fill_value");
  }
  std::string out(size_of(dtype), '\0');
  visit_dtype_with_complex(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = static_cast<T>(v);
    std::memcpy(out.data(), &x, sizeof(T));
  });
  return out;
}

namespace {

// Shapes come from untrusted metadata: an array or chunk larger than this machine's memory is
// refused, naming the file, before anything is allocated for it.
void check_fits_in_memory(const Shape& shape, DType dtype, const char* what,
                          const std::string& file) {
  const double bytes = static_cast<double>(num_elements(shape)) * size_of(dtype);
  const double memory =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (memory > 0 && bytes > memory) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f", bytes / (1 << 30));
    throw Error("checkpoint: " + file + ": " + what + " " + shape_to_string(shape) + " of " +
                std::string(numpy_name(dtype)) + " needs " + gib +
                " GiB, more than this machine's memory");
  }
}

std::string key_in(const std::string& name, const std::string& key) {
  return name.empty() ? key : name + "/" + key;
}

DType parse_v2_dtype(const std::string& dtype, bool& big_endian) {
  std::vector<DType> dtypes(std::begin(kAllDTypes), std::end(kAllDTypes));
  dtypes.insert(dtypes.end(), std::begin(kComplexDTypes), std::end(kComplexDTypes));
  for (DType t : dtypes) {
    std::string s = dtype_string(t);
    if (dtype == s) return t;
    if (s[0] == '<' && dtype == ">" + s.substr(1)) {
      big_endian = true;
      return t;
    }
    if (s[0] == '|' && dtype.size() == 3 && dtype.substr(1) == s.substr(1) &&
        (dtype[0] == '<' || dtype[0] == '>'))
      return t;
  }
  throw Error("unsupported dtype \"" + dtype + "\"");
}

void read_v2(const json::Value& z, ArrayInfo& info, const std::string& file) {
  if (z.at("zarr_format").as_int() != 2)
    throw Error("zarr_format " + std::to_string(z.at("zarr_format").as_int()) +
                " in .zarray (zarr v2)");
  info.shape = read_int_list(z.at("shape"), file, "shape");
  info.chunks = read_int_list(z.at("chunks"), file, "chunks");
  info.dtype = parse_v2_dtype(z.at("dtype").as_string(), info.big_endian);
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
  } else if (comp.at("id").as_string() == "gzip" || comp.at("id").as_string() == "zlib") {
    info.zstd = false;
    info.gzip = true;
  } else if (comp.at("id").as_string() != "zstd") {
    throw Error("compressor \"" + comp.at("id").as_string() +
                "\" (cujax reads zstd, gzip, zlib or null)");
  }
  if (const json::Value* fill = z.get("fill_value")) info.fill_value = *fill;
}

void read_v3(const json::Value& z, ArrayInfo& info, const std::string& file) {
  info.zarr_format = 3;
  if (z.at("zarr_format").as_int() != 3)
    throw Error("zarr_format " + std::to_string(z.at("zarr_format").as_int()) +
                " in zarr.json (zarr v3)");
  if (const json::Value* t = z.get("node_type"); t && t->as_string() != "array")
    throw Error("node_type \"" + t->as_string() + "\" is not an array");
  info.shape = read_int_list(z.at("shape"), file, "shape");
  const std::string& dt = z.at("data_type").as_string();
  const auto dtype = dtype_from_numpy_name(dt);
  if (!dtype) throw Error("unsupported data_type \"" + dt + "\"");
  info.dtype = *dtype;
  const json::Value& grid = z.at("chunk_grid");
  if (grid.at("name").as_string() != "regular")
    throw Error("chunk_grid \"" + grid.at("name").as_string() + "\" (cujax reads regular)");
  info.chunks = read_int_list(grid.at("configuration").at("chunk_shape"), file, "chunk_shape");
  info.separator = "/";
  info.key_prefix = "c";
  if (const json::Value* enc = z.get("chunk_key_encoding")) {
    const std::string& n = enc->at("name").as_string();
    if (n == "v2") {
      info.separator = ".";
      info.key_prefix.clear();
    } else if (n != "default") {
      throw Error("chunk_key_encoding \"" + n + "\"");
    }
    if (const json::Value* c = enc->get("configuration"))
      if (const json::Value* sep = c->get("separator")) info.separator = sep->as_string();
    if (info.separator != "." && info.separator != "/")
      throw Error("chunk key separator \"" + info.separator + "\"");
  }
  if (const json::Value* d = z.get("dimension_names"); d && !d->is_null() && !d->is_array())
    throw Error("dimension_names is not a list");
  info.codecs = z.at("codecs");
  if (!info.codecs.is_array() || info.codecs.as_array().empty())
    throw Error("codecs is not a non-empty list");
  info.fill_value = z.at("fill_value");
  info.zstd = false;
}

std::string chunk_key_for(const ArrayInfo& info, const std::vector<int64_t>& index) {
  if (info.key_prefix.empty()) return chunk_key(index, info.separator);
  std::string k = info.key_prefix;
  for (int64_t i : index) k += info.separator + std::to_string(i);
  return k;
}

}  // namespace

ArrayInfo read_info(const KvStore& store, const std::string& name) {
  ArrayInfo info;
  std::optional<std::string> text;
  info.metadata_key = key_in(name, ".zarray");
  text = store.get(info.metadata_key);
  bool v3 = false;
  if (!text) {
    const std::string k3 = key_in(name, "zarr.json");
    if (auto t3 = store.get(k3)) {
      text = std::move(t3);
      info.metadata_key = k3;
      v3 = true;
    }
  }
  const std::string file = store.describe(info.metadata_key);
  if (!text) throw Error("checkpoint: " + file + " is missing (and no zarr.json beside it)");
  const json::Value z = json::parse(*text, file);
  try {
    if (v3)
      read_v3(z, info, file);
    else
      read_v2(z, info, file);
    if (info.chunks.size() != info.shape.size())
      throw Error("chunks " + shape_to_string(info.chunks) + " and shape " +
                  shape_to_string(info.shape) + " differ in rank");
    for (int64_t c : info.chunks)
      if (c < 1) throw Error("chunk sizes must be positive");
    // Bound the element counts before anything is allocated from them.
    int64_t n = 1, c = 1;
    for (size_t d = 0; d < info.shape.size(); ++d) {
      if (info.shape[d] > (int64_t{1} << 40) || info.chunks[d] > (int64_t{1} << 40))
        throw Error("dimension too large");
      n = info.shape[d] == 0 ? 0
                             : (n > (int64_t{1} << 40) / info.shape[d] ? -1 : n * info.shape[d]);
      c = c > (int64_t{1} << 40) / info.chunks[d] ? -1 : c * info.chunks[d];
      if (n < 0 || c < 0) throw Error("array or chunk of more than 2^40 elements");
    }
    return info;
  } catch (const Error& e) {
    throw Error("checkpoint: " + file + ": " + e.what());
  }
}

ArrayInfo read_info(const fs::path& dir) {
  return read_info(DirStore(dir), "");
}

HostTensor read_array(const fs::path& dir, const ArrayInfo& info) {
  return read_array(DirStore(dir), "", info);
}

void copy_chunk(char* dst, const Shape& shape, const char* chunk, const Shape& chunk_shape,
                const std::vector<int64_t>& index, size_t width) {
  const size_t rank = shape.size();
  const std::vector<int64_t> out_strides = row_major_strides(shape);
  const std::vector<int64_t> chunk_strides = row_major_strides(chunk_shape);
  std::vector<int64_t> extent(rank), origin(rank);
  for (size_t d = 0; d < rank; ++d) {
    origin[d] = index[d] * chunk_shape[d];
    extent[d] = std::min(chunk_shape[d], shape[d] - origin[d]);
    if (extent[d] <= 0) return;
  }
  // One innermost row at a time.
  const size_t row = rank ? static_cast<size_t>(extent[rank - 1]) * width : width;
  std::vector<int64_t> pos(rank, 0);
  while (true) {
    int64_t src_off = 0, dst_off = 0;
    for (size_t d = 0; d < rank; ++d) {
      src_off += pos[d] * chunk_strides[d];
      dst_off += (origin[d] + pos[d]) * out_strides[d];
    }
    std::memcpy(dst + dst_off * static_cast<int64_t>(width),
                chunk + src_off * static_cast<int64_t>(width), row);
    if (rank <= 1) break;
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++pos[d] < extent[d]) break;
      pos[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
}

HostTensor read_array(const KvStore& store, const std::string& name, const ArrayInfo& info) {
  check_fits_in_memory(info.shape, info.dtype, "array", store.describe(info.metadata_key));
  check_fits_in_memory(info.chunks, info.dtype, "chunk", store.describe(info.metadata_key));
  HostTensor out(info.dtype, info.shape);
  if (out.size() == 0) return out;
  const size_t width = size_of(info.dtype);
  const size_t rank = info.shape.size();
  const size_t chunk_bytes = static_cast<size_t>(num_elements(info.chunks)) * width;
  std::vector<int64_t> grid(rank);
  for (size_t d = 0; d < rank; ++d) grid[d] = (info.shape[d] + info.chunks[d] - 1) / info.chunks[d];
  auto* dst = static_cast<char*>(out.data());
  const std::string meta_file = store.describe(info.metadata_key);

  std::vector<int64_t> index(rank, 0);
  std::string fill;
  while (true) {
    const std::string key = key_in(name, chunk_key_for(info, index));
    const std::string file = store.describe(key);
    std::string bytes;
    if (std::optional<std::string> raw = store.get(key)) {
      if (info.zarr_format == 3) {
        try {
          bytes =
              decode_v3_chunk(*raw, info.codecs, info.chunks, info.dtype, info.fill_value, file);
        } catch (const Error& e) {
          throw Error(std::string("checkpoint: corrupt chunk ") + e.what());
        }
      } else if (info.gzip) {
        try {
          bytes = gzip_decode(*raw, chunk_bytes, file);
        } catch (const Error& e) {
          throw Error(std::string("checkpoint: corrupt chunk ") + e.what());
        }
        if (bytes.size() != chunk_bytes)
          throw Error("checkpoint: corrupt chunk " + file + ": decompressed to " +
                      std::to_string(bytes.size()) + " bytes, expected " +
                      std::to_string(chunk_bytes));
      } else if (info.zstd) {
        bytes.resize(chunk_bytes);
        const size_t n = ZSTD_decompress(bytes.data(), bytes.size(), raw->data(), raw->size());
        if (ZSTD_isError(n))
          throw Error("checkpoint: corrupt chunk " + file +
                      ": zstd error: " + ZSTD_getErrorName(n));
        if (n != chunk_bytes)
          throw Error("checkpoint: corrupt chunk " + file + ": decompressed to " +
                      std::to_string(n) + " bytes, expected " + std::to_string(chunk_bytes) +
                      " (chunk " + shape_to_string(info.chunks) + " of " +
                      std::string(numpy_name(info.dtype)) + ")");
      } else {
        if (raw->size() != chunk_bytes)
          throw Error("checkpoint: corrupt chunk " + file + ": " + std::to_string(raw->size()) +
                      " bytes, expected " + std::to_string(chunk_bytes));
        bytes = std::move(*raw);
      }
      if (info.big_endian)  // a complex element's two parts swap separately
        byteswap_elements(bytes, size_of(complex_component(info.dtype)));
    } else {
      if (info.fill_value.is_null())
        throw Error("checkpoint: chunk " + file + " is missing (and fill_value is null)");
      if (fill.empty()) fill = fill_bytes(info.fill_value, info.dtype, meta_file);
      bytes.resize(chunk_bytes);
      for (size_t i = 0; i < chunk_bytes; i += width) std::memcpy(&bytes[i], fill.data(), width);
    }
    copy_chunk(dst, info.shape, bytes.data(), info.chunks, index, width);

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
