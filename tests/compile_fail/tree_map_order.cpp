// Must not compile: tree_map takes the function first, as jax.tree_util.tree_map does. CTest
// (tree_map_order_rejected) checks that the compiler says so.
#include "cujax/tree.h"

void scale(const std::vector<cujax::Array>& tree) {
  auto out = cujax::tree_map(tree, [](const cujax::Array& a) { return a; });
  (void)out;
}
