// Resource limits of parse_module that are not part of the text syntax.
#pragma once

#include <cstdint>

namespace cujax::ir::detail {

// Splat constants (`dense<0> : tensor<100000x1000xf32>`) are expanded into full tensors. This caps
// the bytes that splats may expand to in one parse_module call, so a few bytes of text cannot
// ask for gigabytes. Default 4 GiB; tests and the fuzzer lower it.
void set_splat_expansion_limit(uint64_t bytes);
uint64_t splat_expansion_limit();

// Deepest nesting of regions, attributes, dense literal lists and types that parse_module accepts.
inline constexpr int kMaxNestingDepth = 200;

}  // namespace cujax::ir::detail
