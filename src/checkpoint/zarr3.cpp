// zarr v3's codec chain, decoding only: array->bytes ("bytes", "sharding_indexed") after the
// bytes->bytes codecs ("zstd", "gzip", "crc32c") in reverse order, as the v3 spec defines.
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "checkpoint/ocdbt.h"
#include "checkpoint/zarr.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::zarr {

namespace {

const json::Value* config_of(const json::Value& codec) {
  return codec.get("configuration");
}

// Applies the bytes->bytes codecs of `chain` (those after the array->bytes one) in reverse.
// `limit` bounds any decompressed size.
std::string undo_bytes_codecs(std::string data, const json::Value::Array& chain, size_t first,
                              size_t limit, const std::string& where) {
  for (size_t i = chain.size(); i-- > first;) {
    const std::string& name = chain[i].at("name").as_string();
    if (name == "zstd") {
      data = zstd_decode(data, limit, where);
    } else if (name == "gzip") {
      data = gzip_decode(data, limit, where);
    } else if (name == "crc32c") {
      if (data.size() < 4) throw Error(where + ": too short for its crc32c checksum");
      uint32_t stored = 0;
      for (int k = 0; k < 4; ++k)
        stored |= static_cast<uint32_t>(static_cast<uint8_t>(data[data.size() - 4 + k])) << (8 * k);
      data.resize(data.size() - 4);
      if (ocdbt::crc32c(data) != stored) throw Error(where + ": crc32c checksum mismatch");
    } else {
      throw Error(where + ": codec \"" + name +
                  "\" is not supported (bytes, zstd, gzip, crc32c, "
                  "sharding_indexed)");
    }
  }
  return data;
}

size_t array_codec_index(const json::Value::Array& chain, const std::string& where) {
  for (size_t i = 0; i < chain.size(); ++i) {
    const std::string& n = chain[i].at("name").as_string();
    if (n == "bytes" || n == "sharding_indexed") return i;
    if (n == "transpose") throw Error(where + ": the transpose codec is not supported");
  }
  throw Error(where + ": no array->bytes codec (bytes or sharding_indexed)");
}

void byteswap(std::string& bytes, size_t width) {
  if (width <= 1) return;
  for (size_t i = 0; i + width <= bytes.size(); i += width)
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                 bytes.begin() + static_cast<std::ptrdiff_t>(i + width));
}

std::string decode_sharded(std::string_view shard, const json::Value& cfg, const Shape& chunk,
                           DType dtype, const json::Value& fill, const std::string& where) {
  Shape inner;
  for (const auto& d : cfg.at("chunk_shape").as_array()) inner.push_back(d.as_int());
  if (inner.size() != chunk.size()) throw Error(where + ": inner chunk_shape rank differs");
  uint64_t n = 1;
  std::vector<int64_t> grid(chunk.size());
  for (size_t d = 0; d < chunk.size(); ++d) {
    if (inner[d] < 1 || chunk[d] % inner[d] != 0)
      throw Error(where + ": inner chunk_shape " + shape_to_string(inner) +
                  " does not divide the shard " + shape_to_string(chunk));
    grid[d] = chunk[d] / inner[d];
    n *= static_cast<uint64_t>(grid[d]);
  }
  // The index: n (offset, nbytes) u64 pairs, then what its bytes->bytes codecs add.
  const auto& index_chain = cfg.at("index_codecs").as_array();
  const size_t ia = array_codec_index(index_chain, where);
  uint64_t index_size = 16 * n;
  for (size_t i = ia + 1; i < index_chain.size(); ++i) {
    if (index_chain[i].at("name").as_string() != "crc32c")
      throw Error(where + ": index codec \"" + index_chain[i].at("name").as_string() +
                  "\" is not supported (bytes, crc32c)");
    index_size += 4;
  }
  if (n > shard.size() / 16 || index_size > shard.size())
    throw Error(where + ": shard of " + std::to_string(shard.size()) + " bytes cannot hold an " +
                "index of " + std::to_string(n) + " chunks");
  std::string loc = "end";
  if (const json::Value* l = cfg.get("index_location")) loc = l->as_string();
  if (loc != "end" && loc != "start") throw Error(where + ": index_location \"" + loc + "\"");
  const std::string_view index_raw =
      loc == "end" ? shard.substr(shard.size() - index_size) : shard.substr(0, index_size);
  std::string index =
      undo_bytes_codecs(std::string(index_raw), index_chain, ia + 1, index_size, where + " index");
  bool index_big = false;
  if (const json::Value* c = config_of(index_chain[ia]))
    if (const json::Value* e = c->get("endian")) index_big = e->as_string() == "big";
  if (index_big) byteswap(index, 8);

  const size_t width = size_of(dtype);
  const size_t inner_bytes = static_cast<size_t>(num_elements(inner)) * width;
  std::string out(static_cast<size_t>(num_elements(chunk)) * width, '\0');
  std::string fill_elem;
  std::vector<int64_t> pos(chunk.size(), 0);
  const json::Value& inner_codecs = cfg.at("codecs");
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t off = 0, len = 0;
    std::memcpy(&off, index.data() + 16 * k, 8);
    std::memcpy(&len, index.data() + 16 * k + 8, 8);
    std::string bytes;
    const std::string iw = where + " inner chunk " + std::to_string(k);
    if (off == UINT64_MAX && len == UINT64_MAX) {
      if (fill_elem.empty()) fill_elem = fill_bytes(fill, dtype, where);
      bytes.resize(inner_bytes);
      for (size_t i = 0; i < inner_bytes; i += width)
        std::memcpy(&bytes[i], fill_elem.data(), width);
    } else {
      if (off > shard.size() || len > shard.size() - off)
        throw Error(iw + ": (offset " + std::to_string(off) + ", " + std::to_string(len) +
                    " bytes) runs past the shard's " + std::to_string(shard.size()) + " bytes");
      bytes = decode_v3_chunk(shard.substr(off, len), inner_codecs, inner, dtype, fill, iw);
    }
    copy_chunk(out.data(), chunk, bytes.data(), inner, pos, width);
    for (size_t d = chunk.size(); d-- > 0;) {
      if (++pos[d] < grid[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

}  // namespace

std::string zstd_decode(std::string_view src, size_t limit, const std::string& where) {
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  ZSTD_inBuffer in{src.data(), src.size(), 0};
  std::string out;
  std::array<char, 1 << 16> buf;
  while (true) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    const size_t ret = ZSTD_decompressStream(ctx.get(), &o, &in);
    if (ZSTD_isError(ret)) throw Error(where + ": zstd error: " + ZSTD_getErrorName(ret));
    if (out.size() + o.pos > limit)
      throw Error(where + ": zstd data decodes to more than " + std::to_string(limit) + " bytes");
    out.append(buf.data(), o.pos);
    if (ret == 0 && in.pos == in.size) break;
    if (in.pos == in.size && o.pos < o.size) throw Error(where + ": truncated zstd data");
  }
  return out;
}

std::string gzip_decode(std::string_view src, size_t limit, const std::string& where) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw Error(where + ": cannot start zlib");
  std::string out;
  std::array<char, 1 << 16> buf;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(src.data()));
  zs.avail_in = static_cast<uInt>(src.size());
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    ret = inflate(&zs, Z_NO_FLUSH);
    const size_t got = buf.size() - zs.avail_out;
    if (ret != Z_OK && ret != Z_STREAM_END) {
      const std::string msg = zs.msg ? zs.msg : (ret == Z_BUF_ERROR ? "truncated data" : "error");
      inflateEnd(&zs);
      throw Error(where + ": gzip: " + msg);
    }
    if (out.size() + got > limit) {
      inflateEnd(&zs);
      throw Error(where + ": gzip data decodes to more than the chunk's " + std::to_string(limit) +
                  " bytes");
    }
    out.append(buf.data(), got);
    if (ret == Z_OK && got == 0 && zs.avail_in == 0) {
      inflateEnd(&zs);
      throw Error(where + ": truncated gzip data");
    }
  }
  inflateEnd(&zs);
  return out;
}

std::string decode_v3_chunk(std::string_view stored, const json::Value& codecs, const Shape& chunk,
                            DType dtype, const json::Value& fill, const std::string& where) {
  const auto& chain = codecs.as_array();
  const size_t a = array_codec_index(chain, where);
  const size_t chunk_bytes = static_cast<size_t>(num_elements(chunk)) * size_of(dtype);
  const std::string& name = chain[a].at("name").as_string();
  // A shard may be larger than its decoded contents only by its index and per-chunk framing;
  // the bound below is what a bytes->bytes codec may decompress to.
  const size_t limit =
      name == "bytes" ? chunk_bytes : std::max(chunk_bytes * 2, stored.size()) + (1 << 20);
  std::string data = undo_bytes_codecs(std::string(stored), chain, a + 1, limit, where);
  if (name == "sharding_indexed") {
    const json::Value* cfg = config_of(chain[a]);
    if (!cfg) throw Error(where + ": sharding_indexed without configuration");
    return decode_sharded(data, *cfg, chunk, dtype, fill, where);
  }
  if (data.size() != chunk_bytes)
    throw Error(where + ": decoded to " + std::to_string(data.size()) + " bytes, expected " +
                std::to_string(chunk_bytes) + " (chunk " + shape_to_string(chunk) + " of " +
                std::string(numpy_name(dtype)) + ")");
  if (const json::Value* c = config_of(chain[a]))
    if (const json::Value* e = c->get("endian"); e && e->as_string() == "big")
      byteswap(data, size_of(complex_component(dtype)));
  return data;
}

}  // namespace cujax::checkpoint::zarr
