#include "cujax/data.h"

namespace cujax::data {

Prefetcher::Prefetcher(BatchProducer producer, size_t buffer_size)
    : producer_(std::move(producer)), buffer_size_(buffer_size) {
  if (!producer_) throw Error("Prefetcher: the producer is empty");
  if (buffer_size_ < 1) throw Error("Prefetcher: buffer_size must be >= 1, got 0");
  thread_ = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // waits at most for the producer call in progress
}

void Prefetcher::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queue_.size() < buffer_size_; });
      if (stop_) return;
    }
    std::optional<Batch> batch;
    std::exception_ptr error;
    try {
      batch = producer_();
      // A batch is handed over once its transfer to the device is done, so the consumer's step
      // does not wait for it.
      if (batch) {
        batch->inputs.block_until_ready();
        batch->targets.block_until_ready();
      }
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (batch) {
        queue_.push_back(std::move(*batch));
      } else {
        error_ = error;
        done_ = true;
      }
    }
    cv_.notify_all();
    if (!batch) return;
  }
}

std::optional<Batch> Prefetcher::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || done_; });
  if (!queue_.empty()) {
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return b;
  }
  if (error_) std::rethrow_exception(error_);  // every later call too: the stream is broken
  return std::nullopt;
}

}  // namespace cujax::data
