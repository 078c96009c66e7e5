// NumPy .npy files (format versions 1.0 to 3.0) for every cujax dtype.
//
// bfloat16 has no NumPy type code. cujax writes it with descr '<V2' (what np.save records for
// an ml_dtypes.bfloat16 array) and reads '<V2', '|V2' and 'bfloat16' as bfloat16; load such a
// file in Python with np.load(f).view(ml_dtypes.bfloat16). Fortran-ordered and big-endian
// files are converted to row-major little-endian on read.
#pragma once

#include <string>

#include "cujax/core/host_tensor.h"

namespace cujax {

// The NumPy dtype descr cujax writes for `t` ("<f4", "|b1"; "<V2" for bfloat16).
std::string npy_descr(DType t);

// Throws Error naming the file and the problem (bad magic, unsupported descr, short data).
HostTensor load_npy(const std::string& path);
HostTensor parse_npy(const std::string& bytes, const std::string& what = "npy data");
// Writes atomically: to a temporary file in the same folder, then renamed over `path`.
void save_npy(const std::string& path, const HostTensor& tensor);
std::string serialize_npy(const HostTensor& tensor);

}  // namespace cujax
