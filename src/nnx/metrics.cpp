#include "cujax/nnx/metrics.h"

#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

namespace {

const Array& arg(const char* metric, const MetricArgs& args, const std::string& name) {
  auto it = args.find(name);
  if (it == args.end())
    throw Error(std::string("nnx.metrics.") + metric + ".update: expected the argument '" + name +
                "'");
  return it->second;
}

}  // namespace

Average::Average(std::string name) : argname(std::move(name)) {
  total = variable("total", VariableKind::MetricState, jnp::zeros({}, DType::F32));
  count = variable("count", VariableKind::MetricState, jnp::zeros({}, DType::I32));
}

void Average::add(const Array& values) {
  total->value = jnp::add(total->value, jnp::astype(jnp::sum(values), DType::F32));
  count->value = jnp::add(count->value, jnp::full({}, values.size(), DType::I32));
}

void Average::update(const MetricArgs& args) {
  add(arg("Average", args, argname));
}

Array Average::compute() const {
  return jnp::divide(total->value, jnp::astype(count->value, DType::F32));
}

void Average::reset() {
  total->value = jnp::zeros({}, DType::F32);
  count->value = jnp::zeros({}, DType::I32);
}

Accuracy::Accuracy(std::optional<double> t, std::string name)
    : Average(std::move(name)), threshold(t) {}

void Accuracy::update(const MetricArgs& args) {
  const Array& logits = arg("Accuracy", args, "logits");
  const Array& labels = arg("Accuracy", args, "labels");
  Array predictions;
  if (threshold) {
    if (logits.shape() != labels.shape())
      throw Error("nnx.metrics.Accuracy.update: with a threshold, logits " + logits.aval().str() +
                  " and labels " + labels.aval().str() + " must have one shape");
    predictions = jnp::greater(logits, *threshold);
  } else {
    if (logits.ndim() != labels.ndim() + 1 || is_float(labels.dtype()) ||
        !std::equal(labels.shape().begin(), labels.shape().end(), logits.shape().begin()))
      throw Error("nnx.metrics.Accuracy.update: logits " + logits.aval().str() +
                  " must be labels' shape " + labels.aval().str() +
                  " plus a class axis, with integer labels");
    predictions = jnp::argmax(logits, -1);
  }
  add(jnp::equal(predictions, jnp::astype(labels, predictions.dtype())));
}

void MultiMetric::update(const MetricArgs& args) {
  for (auto& [name, m] : metrics_) m->update(args);
}

std::map<std::string, Array> MultiMetric::compute() const {
  std::map<std::string, Array> out;
  for (const auto& [name, m] : metrics_) out[name] = m->compute();
  return out;
}

void MultiMetric::reset() {
  for (auto& [name, m] : metrics_) m->reset();
}

Metric& MultiMetric::operator[](const std::string& name) const {
  for (const auto& [n, m] : metrics_)
    if (n == name) return *m;
  throw Error("nnx.MultiMetric: no metric '" + name + "'");
}

}  // namespace cujax::nnx
