// Flax NNX's MNIST tutorial in cujax, on digits the program draws itself (no download): a CNN
// of nnx::Conv, nnx::avg_pool and nnx::Linear, with the tutorial's BatchNorm and Dropout
// variant, adamw, nnx::jit train and eval steps, nnx::MultiMetric, and model.train()/eval().
// The Flax program it follows:
//
//   class CNN(nnx.Module):
//     def __init__(self, *, rngs):
//       self.conv1 = nnx.Conv(1, 32, kernel_size=(3, 3), rngs=rngs)
//       self.batch_norm1 = nnx.BatchNorm(32, rngs=rngs)
//       self.conv2 = nnx.Conv(32, 64, kernel_size=(3, 3), rngs=rngs)
//       self.batch_norm2 = nnx.BatchNorm(64, rngs=rngs)
//       self.avg_pool = partial(nnx.avg_pool, window_shape=(2, 2), strides=(2, 2))
//       self.linear1 = nnx.Linear(3136, 256, rngs=rngs)
//       self.dropout = nnx.Dropout(0.4, rngs=rngs)
//       self.linear2 = nnx.Linear(256, 10, rngs=rngs)
//     def __call__(self, x):
//       x = self.avg_pool(nnx.relu(self.batch_norm1(self.conv1(x))))
//       x = self.avg_pool(nnx.relu(self.batch_norm2(self.conv2(x))))
//       x = x.reshape(x.shape[0], -1)
//       x = self.dropout(nnx.relu(self.linear1(x)))
//       return self.linear2(x)
//
//   def loss_fn(model, batch):
//     logits = model(batch['image'])
//     loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch['label']).mean()
//     return loss, logits
//   @nnx.jit
//   def train_step(model, optimizer, metrics, batch):
//     (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model, batch)
//     metrics.update(loss=loss, logits=logits, labels=batch['label'])
//     optimizer.update(model, grads)
//   @nnx.jit
//   def eval_step(model, metrics, batch):
//     loss, logits = loss_fn(model, batch)
//     metrics.update(loss=loss, logits=logits, labels=batch['label'])
//
// and, as the tutorial's checkpointing section, the trained state saved and restored into an
// abstract model (Orbax's StandardCheckpointer), which must evaluate to the same accuracy:
//
//   checkpointer.save(ckpt_dir / 'state', nnx.state(model))
//   abstract_model = nnx.eval_shape(lambda: CNN(rngs=nnx.Rngs(0)))
//   graphdef, abstract_state = nnx.split(abstract_model)
//   model = nnx.merge(graphdef, checkpointer.restore(ckpt_dir / 'state', abstract_state))
//
// The channel counts are smaller than the tutorial's (8 and 16, and 64 hidden units) so that
// CTest's run on a 2-core machine stays short (--full uses the tutorial's 32, 64 and 256), and
// the learning rate is 0.001 (the tutorial's 0.005 gives a noisier test accuracy here);
// --steps N and --lr X change the 900 steps and the rate. The images are seven-segment digits
// of random size, position and stroke width with Gaussian noise. The program exits non-zero
// unless the final test accuracy reaches 90% (chance is 10%) and the restored model's equals it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cujax/checkpoint.h"
#include "cujax/nn.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/optax.h"

namespace jnp = cujax::numpy;
namespace nnx = cujax::nnx;
namespace optax = cujax::optax;
using cujax::Array;

constexpr int kSize = 28;

// Segments a (top), b (top right), c (bottom right), d (bottom), e (bottom left), f (top left),
// g (middle) of each digit.
constexpr const char* kSegments[10] = {"abcdef", "bc",     "abdeg", "abcdg",   "bcfg",
                                       "acdfg",  "acdefg", "abc",   "abcdefg", "abcdfg"};

struct Dataset {
  std::vector<float> images;  // (n, 28, 28, 1)
  std::vector<int32_t> labels;
};

Dataset draw_digits(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  std::normal_distribution<float> noise(0.0f, 0.15f);
  Dataset d;
  d.images.assign(static_cast<size_t>(n) * kSize * kSize, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int label = uniform(0, 9);
    d.labels.push_back(label);
    const int w = uniform(9, 14), h = uniform(14, 20), t = uniform(2, 3);
    const int x0 = uniform(2, kSize - 2 - w), y0 = uniform(2, kSize - 2 - h);
    const int ym = y0 + h / 2;
    float* img = &d.images[static_cast<size_t>(i) * kSize * kSize];
    auto fill = [&](int xa, int ya, int xb, int yb) {  // inclusive box
      for (int y = ya; y <= yb; ++y)
        for (int x = xa; x <= xb; ++x)
          if (x >= 0 && x < kSize && y >= 0 && y < kSize) img[y * kSize + x] = 1.0f;
    };
    for (const char* s = kSegments[label]; *s; ++s) switch (*s) {
        case 'a':
          fill(x0, y0, x0 + w, y0 + t - 1);
          break;
        case 'b':
          fill(x0 + w - t + 1, y0, x0 + w, ym);
          break;
        case 'c':
          fill(x0 + w - t + 1, ym, x0 + w, y0 + h);
          break;
        case 'd':
          fill(x0, y0 + h - t + 1, x0 + w, y0 + h);
          break;
        case 'e':
          fill(x0, ym, x0 + t - 1, y0 + h);
          break;
        case 'f':
          fill(x0, y0, x0 + t - 1, ym);
          break;
        case 'g':
          fill(x0, ym - t / 2, x0 + w, ym - t / 2 + t - 1);
          break;
      }
    for (int p = 0; p < kSize * kSize; ++p) img[p] += noise(gen);
  }
  return d;
}

struct CNN : nnx::Module {
  nnx::Conv conv1;
  nnx::BatchNorm batch_norm1;
  nnx::Conv conv2;
  nnx::BatchNorm batch_norm2;
  nnx::Linear linear1;
  nnx::Dropout dropout;
  nnx::Linear linear2;
  CNN(int64_t c1, int64_t c2, int64_t hidden, nnx::Rngs& rngs)
      : conv1(1, c1, {3, 3}, rngs),
        batch_norm1(c1, rngs),
        conv2(c1, c2, {3, 3}, rngs),
        batch_norm2(c2, rngs),
        linear1(7 * 7 * c2, hidden, rngs),
        dropout(0.4, false, &rngs),
        linear2(hidden, 10, rngs) {
    child("conv1", conv1);
    child("batch_norm1", batch_norm1);
    child("conv2", conv2);
    child("batch_norm2", batch_norm2);
    child("linear1", linear1);
    child("dropout", dropout);
    child("linear2", linear2);
  }
  Array operator()(const Array& image) {
    auto avg_pool = [](const Array& x) { return nnx::avg_pool(x, {2, 2}, {2, 2}); };
    Array x = avg_pool(cujax::nn::relu(batch_norm1(conv1(image))));
    x = avg_pool(cujax::nn::relu(batch_norm2(conv2(x))));
    x = jnp::reshape(x, {x.shape()[0], -1});
    x = dropout(cujax::nn::relu(linear1(x)));
    return linear2(x);
  }
};

// The model's Rngs lives beside it and is registered, so dropout keys are state under nnx::jit.
struct Model : nnx::Module {
  nnx::Rngs rngs;
  CNN cnn;
  Model(int64_t c1, int64_t c2, int64_t hidden)
      : rngs({{"params", 0}, {"dropout", 1}}), cnn(c1, c2, hidden, rngs) {
    child("rngs", rngs);
    child("cnn", cnn);
  }
  Array operator()(const Array& x) { return cnn(x); }
};

std::pair<Array, Array> loss_fn(Model& model, const Array& images, const Array& labels) {
  const Array logits = model(images);
  const Array loss = jnp::mean(optax::softmax_cross_entropy_with_integer_labels(logits, labels));
  return {loss, logits};
}

int main(int argc, char** argv) {
  bool full = false;
  int train_steps = 0;
  double learning_rate = 0.001;  // the tutorial has 0.005; noisier on these images
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--full") == 0) full = true;
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) train_steps = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--lr") == 0 && i + 1 < argc) learning_rate = std::atof(argv[++i]);
  }
  if (train_steps <= 0) train_steps = 900;
  const int batch_size = 32, n_test = 1024;
  const Dataset train = draw_digits(batch_size * train_steps, 1);
  const Dataset test = draw_digits(n_test, 2);
  auto batch = [](const Dataset& d, int start, int n) {
    const size_t px = static_cast<size_t>(kSize) * kSize;
    std::vector<float> img(d.images.begin() + start * px, d.images.begin() + (start + n) * px);
    std::vector<int32_t> lab(d.labels.begin() + start, d.labels.begin() + start + n);
    return std::make_pair(jnp::array(img, cujax::Shape{n, kSize, kSize, 1}), jnp::array(lab));
  };

  const int64_t c1 = full ? 32 : 8, c2 = full ? 64 : 16, hidden = full ? 256 : 64;
  Model model(c1, c2, hidden);
  nnx::Optimizer optimizer(model, optax::adamw(learning_rate, 0.9));
  nnx::MultiMetric metrics;
  metrics.add<nnx::Accuracy>("accuracy").add<nnx::Average>("loss", "loss");

  auto train_step = nnx::jit([](Model& m, nnx::Optimizer& opt, nnx::MultiMetric& mm,
                                const Array& images, const Array& labels) {
    auto grad_fn = nnx::value_and_grad(loss_fn, cujax::has_aux);
    auto [loss_logits, grads] = grad_fn(m, images, labels);
    auto& [loss, logits] = loss_logits;
    mm.update({{"loss", loss}, {"logits", logits}, {"labels", labels}});
    opt.update(m, grads);
    return loss;
  });
  auto eval_step =
      nnx::jit([](Model& m, nnx::MultiMetric& mm, const Array& images, const Array& labels) {
        auto [loss, logits] = loss_fn(m, images, labels);
        mm.update({{"loss", loss}, {"logits", logits}, {"labels", labels}});
        return loss;
      });
  // The test set's (loss, accuracy) in eval mode.
  auto evaluate = [&](Model& m) {
    metrics.reset();
    m.eval();
    for (int i = 0; i + 256 <= n_test; i += 256) {
      const auto [ti, tl] = batch(test, i, 256);
      eval_step(m, metrics, ti, tl);
    }
    const auto e = metrics.compute();
    metrics.reset();
    return std::make_pair(e.at("loss").item<float>(), e.at("accuracy").item<float>());
  };

  std::printf("CNN with %lld parameters, %d training steps of %d images\n",
              static_cast<long long>(nnx::count(model)), train_steps, batch_size);
  double step_seconds = 0;
  int timed_steps = 0;
  double test_accuracy = 0;
  const int eval_every = train_steps / 3;
  for (int step = 0; step < train_steps; ++step) {
    model.train();
    const auto [images, labels] = batch(train, step * batch_size, batch_size);
    const auto t0 = std::chrono::steady_clock::now();
    train_step(model, optimizer, metrics, images, labels).block_until_ready();
    if (step > 0) {  // the first step traces and compiles
      step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++timed_steps;
    }
    if ((step + 1) % eval_every == 0 || step + 1 == train_steps) {
      const auto m = metrics.compute();
      const float train_loss = m.at("loss").item<float>(),
                  train_acc = m.at("accuracy").item<float>();
      const auto [test_loss, accuracy] = evaluate(model);
      test_accuracy = accuracy;
      std::printf("step %4d  train loss %.4f accuracy %.3f  test loss %.4f accuracy %.3f\n",
                  step + 1, train_loss, train_acc, test_loss, test_accuracy);
    }
  }
  std::printf("%.1f ms per training step (batch %d, mean of %d steps after the first)\n",
              1e3 * step_seconds / timed_steps, batch_size, timed_steps);
  std::printf("test accuracy %.3f\n", test_accuracy);
  if (!(test_accuracy >= 0.9)) {
    std::printf("FAILED: test accuracy below 0.9\n");
    return 1;
  }

  // Checkpoint, then restore into an abstract model (no parameter computed before the restore).
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("cujax_mnist_cnn_" + std::to_string(getpid())))
          .string();
  cujax::checkpoint::StandardCheckpointer checkpointer;
  checkpointer.save(dir + "/state", nnx::state(model), /*force=*/true);
  auto restored = nnx::abstract_model([&] { return std::make_unique<Model>(c1, c2, hidden); });
  auto [graphdef, abstract_state] = nnx::split(*restored);
  nnx::merge(graphdef, {checkpointer.restore(dir + "/state", abstract_state[0])});
  std::filesystem::remove_all(dir);
  const float restored_accuracy = evaluate(*restored).second;
  std::printf("restored from %s into an abstract model: test accuracy %.3f\n", dir.c_str(),
              restored_accuracy);
  if (restored_accuracy != test_accuracy) {
    std::printf("FAILED: the restored model's accuracy differs\n");
    return 1;
  }
  return 0;
}
