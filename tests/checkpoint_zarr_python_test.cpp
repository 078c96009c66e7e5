// Interop: a checkpoint saved by StandardCheckpointer is read parameter by parameter by the
// zarr-python library (Debian's python3-zarr under /usr/bin/python3), and every value matches.
// Skips when that interpreter or its zarr module is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cujax/checkpoint.h"
#include "cujax/core/npy.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";

// Reads every parameter folder of a checkpoint with zarr and saves it as <name>.npy. NumPy has
// no bfloat16 without ml_dtypes (not installed with python3-zarr), so a bfloat16 parameter is
// read through zarr with its dtype relabelled '<u2': the same chunks, decoded by zarr, as bits.
constexpr const char* kReader = R"(import json, os, sys
import numpy as np, zarr
ckpt, out = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(ckpt)):
    folder = os.path.join(ckpt, name)
    if not os.path.isfile(os.path.join(folder, '.zarray')):
        continue
    with open(os.path.join(folder, '.zarray')) as f:
        meta = json.load(f)
    dtype = meta['dtype']
    if dtype == 'bfloat16':
        store = {}
        for entry in os.listdir(folder):
            with open(os.path.join(folder, entry), 'rb') as f:
                store[entry] = f.read()
        meta['dtype'] = '<u2'
        store['.zarray'] = json.dumps(meta).encode()
        arr = zarr.open_array(store, mode='r')[...]
    else:
        arr = zarr.open_array(folder, mode='r')[...]
    np.save(os.path.join(out, name + '.npy'), arr)
    print(name, dtype, json.dumps(list(arr.shape), separators=(',', ':')))
)";

HostTensor pattern(DType dtype, Shape shape, uint32_t seed) {
  HostTensor t(dtype, std::move(shape));
  uint32_t x = seed * 2654435761u + 1;
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < t.size(); ++i) {
      x = x * 1664525u + 1013904223u;
      const double v = static_cast<double>(x >> 8) / (1 << 24) * 200.0 - 100.0;
      if constexpr (std::is_same_v<T, bfloat16>)
        t.data_as<T>()[i] = bfloat16(v);
      else
        t.data_as<T>()[i] = static_cast<T>(v);
    }
  });
  return t;
}

bool python_zarr_available() {
  if (!fs::exists(kPython)) return false;
  const std::string cmd = std::string(kPython) + " -c 'import zarr, numpy' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(CheckpointZarrPython, ZarrReadsEveryParameter) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is absent (Debian's python3)";
  if (!python_zarr_available())
    GTEST_SKIP() << kPython << " cannot import zarr and numpy (apt-get install python3-zarr)";

  const fs::path dir = fs::temp_directory_path() / ("cujax_zarr_py_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "npy");
  const std::vector<std::pair<std::string, HostTensor>> params = {
      {"dense.kernel", pattern(DType::F32, {3, 4}, 1)},
      {"dense.bias", pattern(DType::F64, {4}, 2)},
      {"layers.0.counts", pattern(DType::I32, {2, 3}, 3)},
      {"step", pattern(DType::I32, {}, 4)},
      {"embed.embedding", pattern(DType::BF16, {5, 2}, 5)},
  };
  State state;
  for (const auto& [path, value] : params) state.set(path, array(value));
  // zarr-python reads the use_ocdbt=False layout (folders); OCDBT is a TensorStore store.
  checkpoint::StandardCheckpointer({.use_ocdbt = false}).save((dir / "ckpt").string(), state);
  {
    std::ofstream f(dir / "read.py");
    f << kReader;
  }
  const std::string cmd = std::string(kPython) + " " + (dir / "read.py").string() + " " +
                          (dir / "ckpt").string() + " " + (dir / "npy").string() + " > " +
                          (dir / "listing.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream listing_file(dir / "listing.txt");
  const std::string listing(std::istreambuf_iterator<char>(listing_file), {});
  ASSERT_EQ(status, 0) << "zarr could not read the checkpoint:\n" << listing;

  for (const auto& [path, value] : params) {
    const std::string name = path + ".value";
    const std::string line =
        name + " " +
        (value.dtype() == DType::BF16 ? std::string("bfloat16") : npy_descr(value.dtype())) + " " +
        shape_to_string(value.shape());
    EXPECT_NE(listing.find(line), std::string::npos) << line << " not in\n" << listing;
    const fs::path npy = dir / "npy" / (name + ".npy");
    ASSERT_TRUE(fs::exists(npy)) << name;
    HostTensor read = load_npy(npy.string());
    // zarr gives the bfloat16 parameter as its uint16 bits.
    const HostTensor want = value.dtype() == DType::BF16 ? value.bitcast(DType::U16) : value;
    EXPECT_EQ(read.dtype(), want.dtype()) << name;
    EXPECT_EQ(read.shape(), want.shape()) << name;
    ASSERT_EQ(read.nbytes(), want.nbytes()) << name;
    EXPECT_EQ(std::memcmp(read.data(), want.data(), want.nbytes()), 0) << name;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cujax
