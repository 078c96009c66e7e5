#include "cujax/nnx/embed.h"

#include "cujax/lax.h"
#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

Embed::Embed(int64_t num, int64_t feat, Rngs& rngs, const EmbedOptions& options)
    : num_embeddings(num), features(feat), dtype_(options.dtype) {
  embedding =
      param("embedding", options.embedding_init(rngs.params(), {num, feat}, options.param_dtype));
}

Array Embed::operator()(const Array& ids) const {
  if (!is_integer(ids.dtype()))
    throw Error("nnx.Embed: input must be integer ids, got " + ids.aval().str());
  const DType t = dtype_ ? *dtype_ : embedding->value.dtype();
  return jnp::take(jnp::astype(embedding->value, t), ids, 0);
}

Array Embed::attend(const Array& query) const {
  if (query.ndim() < 1 || query.shape().back() != features)
    throw Error("nnx.Embed.attend: query " + query.aval().str() + " does not end with features " +
                std::to_string(features));
  const DType t = dtype_ ? *dtype_ : jnp::promote_types(query.dtype(), embedding->value.dtype());
  lax::DotDimensionNumbers dims;
  dims.lhs_contracting_dimensions = {query.ndim() - 1};
  dims.rhs_contracting_dimensions = {1};
  return lax::dot_general(jnp::astype(query, t), jnp::astype(embedding->value, t), dims);
}

}  // namespace cujax::nnx
