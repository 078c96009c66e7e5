#include "profiler/hooks.h"

namespace cujax::profiler {

namespace {

std::string device_name(std::string_view platform, int device) {
  return std::string(platform) + ":" + std::to_string(device);
}

const char* direction_name(TransferDirection d) {
  switch (d) {
    case TransferDirection::HostToDevice:
      return "host_to_device";
    case TransferDirection::DeviceToHost:
      return "device_to_host";
    case TransferDirection::DeviceToDevice:
      return "device_to_device";
  }
  return "?";
}

thread_local int64_t dispatches = 0;
thread_local int64_t dispatches_waited = 0;

}  // namespace

namespace detail {

int64_t dispatch_count() {
  return dispatches;
}

int64_t dispatches_at_last_wait() {
  return dispatches_waited;
}

Span stage_span(std::string_view stage, std::string_view function) {
  return Span("compile", std::string(stage) + " " + std::string(function),
              json::Value::object({{"function", std::string(function)}}));
}

Span compile_span(std::string_view module, std::string_view platform,
                  const std::string& cache_dir) {
  json::Value args =
      json::Value::object({{"module", std::string(module)}, {"platform", std::string(platform)}});
  if (!cache_dir.empty()) args.set("persistent_cache_dir", cache_dir);
  return Span("compile", "compile " + std::string(module), std::move(args));
}

Span backend_compile_span(std::string_view platform, std::string_view module) {
  return Span("compile", std::string(platform) + " compile " + std::string(module),
              json::Value::object({{"module", std::string(module)}}));
}

Span dispatch_span(std::string_view what, std::string_view platform, int device) {
  ++dispatches;
  return Span("dispatch", "dispatch " + std::string(what),
              json::Value::object({{"device", device_name(platform, device)}}));
}

Span execute_span(std::string_view program, std::string_view platform, int device) {
  return Span("device", "execute " + std::string(program),
              json::Value::object(
                  {{"device", device_name(platform, device)}, {"program", std::string(program)}}));
}

Span op_span(std::string_view name, std::string_view where, std::string_view loc, double flops,
             double bytes) {
  json::Value args = json::Value::object({{"long_name", std::string(where)}});
  if (!loc.empty()) args.set("source", std::string(loc));
  if (flops > 0) args.set("flops", flops);
  if (bytes > 0) args.set("bytes", bytes);
  return Span("op", name, std::move(args));
}

Span transfer_span(TransferDirection direction, int64_t bytes, bool is_explicit,
                   std::string_view what, std::string_view platform, int device) {
  const char* dir = direction_name(direction);
  if (direction == TransferDirection::DeviceToHost) dispatches_waited = dispatches;
  return Span("transfer", std::string("transfer ") + dir,
              json::Value::object({{"direction", dir},
                                   {"bytes", bytes},
                                   {"explicit", is_explicit},
                                   {"array", std::string(what)},
                                   {"device", device_name(platform, device)}}));
}

Span wait_span(std::string_view name) {
  dispatches_waited = dispatches;
  return Span("wait", name);
}

void cache_miss(std::string_view function, const std::string& reason) {
  instant("compile", "cache miss " + std::string(function),
          json::Value::object({{"function", std::string(function)}, {"reason", reason}}));
}

void persistent_cache_hit(std::string_view module) {
  instant("compile", "persistent cache hit " + std::string(module),
          json::Value::object({{"module", std::string(module)}}));
}

}  // namespace detail

}  // namespace cujax::profiler
