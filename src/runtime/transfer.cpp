// Host <-> device copies through the transfer guard, and host-tensor execution on top of them.
#include "cujax/runtime/backend.h"
#include "cujax/runtime/spmd.h"
#include "cujax/transfer_guard.h"
#include "profiler/hooks.h"

namespace cujax::runtime {

DeviceBuffer transfer_to_device(const HostTensor& value, std::string_view platform, int device,
                                bool is_explicit, const std::string& what) {
  const profiler::Span span = profiler::transfer_span(
      TransferDirection::HostToDevice, value.nbytes(), is_explicit, what, platform, device);
  detail::note_transfer(TransferDirection::HostToDevice, is_explicit,
                        static_cast<int64_t>(value.nbytes()), what);
  return get_backend(platform).to_device(value, device);
}

HostTensor transfer_to_host(const DeviceBuffer& buffer, bool is_explicit, const std::string& what) {
  const profiler::Span span =
      profiler::transfer_span(TransferDirection::DeviceToHost, buffer.nbytes(), is_explicit, what,
                              buffer.platform, buffer.device);
  detail::note_transfer(TransferDirection::DeviceToHost, is_explicit,
                        static_cast<int64_t>(buffer.nbytes()), what);
  return get_backend(buffer.platform).to_host(buffer);
}

DeviceBuffer transfer_between(const DeviceBuffer& buffer, std::string_view platform, int device,
                              bool is_explicit, const std::string& what) {
  if (buffer.platform == platform && buffer.device == device) return buffer;
  const profiler::Span span = profiler::transfer_span(
      TransferDirection::DeviceToDevice, buffer.nbytes(), is_explicit, what, platform, device);
  detail::note_transfer(TransferDirection::DeviceToDevice, is_explicit,
                        static_cast<int64_t>(buffer.nbytes()), what);
  if (buffer.platform == "cpu" && platform == "cpu") {
    DeviceBuffer b = buffer;
    b.device = device;
    return b;
  }
  // Through the host: GPUs of one process could copy peer to peer instead.
  const HostTensor host = get_backend(buffer.platform).to_host(buffer);
  return get_backend(platform).to_device(host, device);
}

std::vector<HostTensor> Executable::execute_on_host(std::span<const HostTensor> args,
                                                    const ExecuteOptions& options) {
  std::vector<DeviceBuffer> in;
  in.reserve(args.size());
  const std::string platform(backend().platform());
  for (const HostTensor& a : args)
    in.push_back(transfer_to_device(a, platform, device(), true, a.type_string()));
  std::vector<HostTensor> out;
  for (const DeviceBuffer& r : execute(std::move(in), options))
    out.push_back(
        transfer_to_host(r, true, std::string(mlir_name(r.dtype)) + shape_to_string(r.shape)));
  return out;
}

std::vector<std::vector<HostTensor>> SpmdExecutable::execute_on_host(
    const std::vector<std::vector<HostTensor>>& per_device_args) {
  const std::vector<int> devices = local_device_indices();
  std::vector<std::vector<DeviceBuffer>> in(per_device_args.size());
  for (size_t d = 0; d < per_device_args.size(); ++d)
    for (const HostTensor& a : per_device_args[d])
      in[d].push_back(transfer_to_device(a, platform(), d < devices.size() ? devices[d] : 0, true,
                                         a.type_string()));
  std::vector<std::vector<HostTensor>> out;
  for (const auto& device_results : execute(std::move(in))) {
    out.emplace_back();
    for (const DeviceBuffer& r : device_results)
      out.back().push_back(
          transfer_to_host(r, true, std::string(mlir_name(r.dtype)) + shape_to_string(r.shape)));
  }
  return out;
}

}  // namespace cujax::runtime
