# Sourced by main.sh and test.sh: sets `preset` and `bin`. The CUDA build (the `default` preset,
# in build/) when a CUDA toolkit and an NVIDIA GPU are here (nvidia-smi lists one, or
# /dev/nvidia0 exists), else the `cpu` preset (build-cpu/); CUJAX_PRESET overrides. Whether the
# GPU can then be used (the driver's version, the device nodes) is what `cujax doctor` tells once
# built: a CUDA build whose GPU cannot be used runs on the cpu backend and says why.
has_cuda_toolkit() {
  command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${CUDACXX:-}" ]
}
has_nvidia_gpu() {
  nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]' || [ -e /dev/nvidia0 ]
}
if [ -n "${CUJAX_PRESET:-}" ]; then
  preset="$CUJAX_PRESET"
elif has_cuda_toolkit && has_nvidia_gpu; then
  preset=default
else
  preset=cpu
fi
case "$preset" in
  default) bin=build/cujax ;;
  cpu) bin=build-cpu/cujax ;;
  *) bin="build-$preset/cujax" ;;  # debug, fuzz (CMakePresets.json)
esac
