// safetensors: the README example written by the reference implementation
// (../shared/interop/formats/safetensors_minimal, skipped when absent), round trips of every
// dtype through load_any, and each header rule broken in turn.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/safetensors.h"
#include "cujax/checkpoint.h"
#include "cujax/core/json.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
namespace st = checkpoint::safetensors;

fs::path formats_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::string shared = env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
  return fs::path(shared) / "interop" / "formats";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A file from a header (JSON text) and a buffer of `n` bytes.
std::string file_of(const std::string& header, size_t n) {
  std::string out(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(out.data(), &len, 8);
  return out + header + std::string(n, '\x01');
}

TEST(Safetensors, ReadsTheReferenceExample) {
  const fs::path f = formats_dir() / "safetensors_minimal" / "test.safetensors";
  if (!fs::exists(f)) GTEST_SKIP() << "no " << f << " (set CUJAX_SHARED_DIR)";
  const auto ckpt = checkpoint::load_any(f.string());
  EXPECT_EQ(ckpt.format, "safetensors");
  ASSERT_EQ(ckpt.leaves.size(), 2u);
  size_t data_bytes = 0;
  for (const auto& l : ckpt.leaves) {
    data_bytes += l.value.nbytes();
    const auto* p = static_cast<const unsigned char*>(l.value.data());
    for (size_t i = 0; i < l.value.nbytes(); ++i) EXPECT_EQ(p[i], 0) << l.path;
  }
  EXPECT_EQ(ckpt.leaves[0].path, "a");
  EXPECT_EQ(ckpt.leaves[0].value.dtype(), DType::F64);
  EXPECT_EQ(ckpt.leaves[0].value.shape(), (Shape{2, 2}));
  EXPECT_EQ(ckpt.leaves[1].path, "b");
  EXPECT_EQ(ckpt.leaves[1].value.dtype(), DType::U8);
  EXPECT_EQ(ckpt.leaves[1].value.shape(), (Shape{2, 3}));
  // The file is the header's length, the header and exactly the tensors' bytes.
  std::ifstream in(f, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(fs::file_size(f), 8 + n + data_bytes);
}

TEST(Safetensors, RoundTripsEveryDtypeBitForBit) {
  std::vector<checkpoint::Leaf> leaves;
  int k = 0;
  for (DType d :
       {DType::F32, DType::BF16, DType::F16, DType::F64, DType::I8, DType::U8, DType::I16,
        DType::U16, DType::I32, DType::U32, DType::I64, DType::U64, DType::Bool, DType::C64}) {
    HostTensor t(d, Shape{3, 2});
    auto* p = static_cast<unsigned char*>(t.data());
    for (size_t i = 0; i < t.nbytes(); ++i)
      p[i] = static_cast<unsigned char>(d == DType::Bool ? (i + k) % 2 : (i * 37 + k) & 0xff);
    leaves.push_back({"layer." + std::to_string(k++) + ".w", t});
  }
  leaves.push_back({"scalar", HostTensor(DType::F32, Shape{})});
  leaves.push_back({"empty", HostTensor(DType::F32, Shape{0, 4})});
  const fs::path f =
      fs::temp_directory_path() / ("cujax_st_" + std::to_string(::getpid()) + ".safetensors");
  st::write_file(f, leaves, {{"format", "flax"}});
  // The header: 8-byte aligned, and every tensor starts at a multiple of its element size.
  const std::string bytes = [&] {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const json::Value h = json::parse(bytes.substr(8, n));
  EXPECT_EQ(h.at("__metadata__").at("format").as_string(), "flax");
  for (const auto& [name, v] : h.as_object()) {
    if (name == "__metadata__") continue;
    const int64_t begin = v.at("data_offsets").as_array()[0].as_int();
    const std::string dt = v.at("dtype").as_string();
    const int64_t w = dt == "C64" || dt == "F64" || dt == "I64" || dt == "U64"    ? 8
                      : dt == "F32" || dt == "I32" || dt == "U32"                 ? 4
                      : dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16" ? 2
                                                                                  : 1;
    EXPECT_EQ(begin % w, 0) << name;
  }
  const auto back = checkpoint::load_any(f.string()).leaves;
  ASSERT_EQ(back.size(), leaves.size());
  for (const auto& l : leaves) {
    auto it = std::find_if(back.begin(), back.end(), [&](auto& b) { return b.path == l.path; });
    ASSERT_NE(it, back.end()) << l.path;
    EXPECT_EQ(it->value.dtype(), l.value.dtype()) << l.path;
    EXPECT_EQ(it->value.shape(), l.value.shape()) << l.path;
    ASSERT_EQ(it->value.nbytes(), l.value.nbytes());
    EXPECT_EQ(std::memcmp(it->value.data(), l.value.data(), l.value.nbytes()), 0) << l.path;
  }
  fs::remove(f);
}

TEST(Safetensors, HeaderRulesAreEnforced) {
  struct Case {
    std::string file, expected;
  };
  const std::string ok_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::string huge(8, '\xff');
  const std::vector<Case> cases = {
      {"", "has no header length"},
      {huge, "exceeds the limit"},
      {file_of("{" + ok_a + "}", 8).substr(0, 20), "runs past the file's end"},
      {file_of("[1]", 0), "does not start with '{'"},
      {file_of("{" + ok_a + "}", 9), "but the buffer"},
      {file_of("{" + ok_a + "}", 7), "but the buffer"},
      {file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "12 expected"},
      {file_of(R"({"a":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}})", 8), "unsupported dtype"},
      {file_of("{" + ok_a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8),
       "overlapping"},
      {file_of("{" + ok_a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}})", 16),
       "leaving a gap"},
      {file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "not an interval"},
      {file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "negative"},
      {file_of(R"({"__metadata__":{"k":1}})", 0), "is not a string"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of([&] { st::parse(c.file, "t.safetensors"); });
    EXPECT_NE(msg.find(c.expected), std::string::npos)
        << "expected '" << c.expected << "', got '" << msg << "'";
    EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
  }
  EXPECT_EQ(st::parse(file_of("{" + ok_a + "}", 8), "ok").size(), 1u);
}

}  // namespace
}  // namespace cujax
