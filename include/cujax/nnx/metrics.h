// nnx.metrics: Average, Accuracy and MultiMetric (update / compute / reset), as Flax NNX has
// them. Metrics are modules whose totals are MetricState variables, so an nnx::jit step that
// takes them by reference updates them in place like any other state.
//
//   nnx::MultiMetric metrics;
//   metrics.add<nnx::Accuracy>("accuracy").add<nnx::Average>("loss", "loss");
//   metrics.update({{"loss", loss}, {"logits", logits}, {"labels", labels}});
//   auto m = metrics.compute();   // m["accuracy"], m["loss"]: f32 scalars
//   metrics.reset();
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cujax/nnx/module.h"

namespace cujax::nnx {

// The keyword arguments of update(): name -> array.
using MetricArgs = std::map<std::string, Array>;

class Metric : public Module {
 public:
  virtual void update(const MetricArgs& args) = 0;
  virtual Array compute() const = 0;
  virtual void reset() = 0;
};

// nnx.metrics.Average(argname="values"): the mean of every element passed as args[argname];
// total (f32) and count (i32) scalars.
class Average : public Metric {
 public:
  explicit Average(std::string argname = "values");
  void update(const MetricArgs& args) override;
  Array compute() const override;  // total / count (NaN before any update)
  void reset() override;
  std::string argname;
  Variable* total;
  Variable* count;

 protected:
  void add(const Array& values);
};

// nnx.metrics.Accuracy(threshold=None): the share of args["logits"] predicting args["labels"].
// Without a threshold logits are (..., classes) and labels integer (...), compared by argmax;
// with one, logits > threshold is compared to labels of logits' shape.
class Accuracy : public Average {
 public:
  explicit Accuracy(std::optional<double> threshold = std::nullopt, std::string argname = "values");
  void update(const MetricArgs& args) override;
  std::optional<double> threshold;
};

// nnx.MultiMetric(**metrics): update() passes its arguments to every metric, compute() gives
// {name: value}, reset() resets them all. Metrics are children under their names.
class MultiMetric : public Module {
 public:
  template <class T, class... Args>
  MultiMetric& add(const std::string& name, Args&&... args) {
    metrics_.emplace_back(name, std::make_unique<T>(std::forward<Args>(args)...));
    child(name, *metrics_.back().second);
    return *this;
  }
  void update(const MetricArgs& args);
  std::map<std::string, Array> compute() const;
  void reset();
  Metric& operator[](const std::string& name) const;

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Metric>>> metrics_;
};

}  // namespace cujax::nnx
