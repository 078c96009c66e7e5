# The cuda backend: built into the cujax library when CUJAX_ENABLE_CUDA is on and nvcc is found
# (the `default` preset); the `cpu` preset never enables CUDA, so it stays as fast as before.
# Machine code for sm_80 and sm_90, plus compute_90 PTX for newer GPUs.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90")  # also what enable_language tests nvcc with
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# CMake 3.25 does not know nvcc's C++20 flag (nvcc 12+ has it); tell it.
if(NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

file(GLOB CUJAX_CUDA_BACKEND_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cpp ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cu
     ${PROJECT_SOURCE_DIR}/src/backends/cuda/codegen/*.cpp)
target_sources(cujax PRIVATE ${CUJAX_CUDA_BACKEND_SOURCES})
# Compiled one by one, outside the library's unity batches: the backend's files share helper
# names (plans, Plan), and the cpu preset's batches stay the same objects for ccache.
set_source_files_properties(${CUJAX_CUDA_BACKEND_SOURCES} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
# The headers NVRTC compiles generated kernels with, embedded as string literals (include name =
# file), so that device code and the CPU backend share the same math.
set(CUJAX_RTC_DIR ${PROJECT_SOURCE_DIR}/src/backends/cuda/codegen/rtc)
set(CUJAX_RTC_HEADERS
    "cujax/core/half.h=${PROJECT_SOURCE_DIR}/include/cujax/core/half.h"
    "backends/common/elementwise.h=${PROJECT_SOURCE_DIR}/src/backends/common/elementwise.h"
    "backends/common/index.h=${PROJECT_SOURCE_DIR}/src/backends/common/index.h"
    "backends/cuda/codegen/rtc/prelude.h=${CUJAX_RTC_DIR}/prelude.h"
    "bit=${CUJAX_RTC_DIR}/std/bit" "cmath=${CUJAX_RTC_DIR}/std/cmath"
    "cstdint=${CUJAX_RTC_DIR}/std/cstdint" "type_traits=${CUJAX_RTC_DIR}/std/type_traits")
set(CUJAX_RTC_FILES)
foreach(pair ${CUJAX_RTC_HEADERS})
  string(REGEX REPLACE "^[^=]*=" "" path "${pair}")
  list(APPEND CUJAX_RTC_FILES ${path})
endforeach()
string(REPLACE ";" "|" CUJAX_RTC_PAIRS "${CUJAX_RTC_HEADERS}")
set(CUJAX_RTC_EMBEDDED ${CMAKE_BINARY_DIR}/generated/rtc_headers.cpp)
add_custom_command(
  OUTPUT ${CUJAX_RTC_EMBEDDED}
  COMMAND ${CMAKE_COMMAND} -DOUTPUT=${CUJAX_RTC_EMBEDDED} "-DHEADERS=${CUJAX_RTC_PAIRS}"
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_headers.cmake
  DEPENDS ${CUJAX_RTC_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_headers.cmake
  COMMENT "Embedding the NVRTC headers" VERBATIM)
target_sources(cujax PRIVATE ${CUJAX_RTC_EMBEDDED})
set_source_files_properties(${CUJAX_RTC_EMBEDDED} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
set_target_properties(cujax PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
target_compile_options(cujax PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra --Werror=all-warnings>)
# Only the files that branch on the build type get the defines, so every other object is the
# same as in the `cpu` preset and comes from ccache.
math(EXPR CUJAX_CUDA_TOOLKIT_VERSION
     "${CUDAToolkit_VERSION_MAJOR} * 1000 + ${CUDAToolkit_VERSION_MINOR} * 10")
set_source_files_properties(
  ${PROJECT_SOURCE_DIR}/src/backends/registry.cpp
  ${PROJECT_SOURCE_DIR}/src/backends/compile_report.cpp
  ${PROJECT_SOURCE_DIR}/src/backends/cuda/driver/driver.cpp
  PROPERTIES COMPILE_DEFINITIONS
  "CUJAX_HAVE_CUDA;CUJAX_CUDA_TOOLKIT_VERSION=${CUJAX_CUDA_TOOLKIT_VERSION}")
# The CUDA headers for the host-only .cpp files; cudart is linked statically and itself loads
# libcuda.so.1 at run time, as do the driver loader and cublaslt.cpp (no link-time driver).
target_include_directories(cujax PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
# PRIVATE: linked into users of the static library, without adding CUDA include paths to
# their compile lines (so their objects match the `cpu` build and come from ccache).
target_link_libraries(cujax PRIVATE CUDA::cudart_static)
set(CUJAX_CUDA_BUILD ON)

# Benchmarks against peers measured in the same run (scripts/gpu-check.sh runs it).
add_executable(cuda_bench ${PROJECT_SOURCE_DIR}/src/backends/cuda/bench/cuda_bench.cpp)
target_include_directories(cuda_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(cuda_bench PRIVATE cujax CUDA::cublas)

# Cold and warm compile times of a training step's generated kernels (docs/performance.md).
add_executable(codegen_compile_time ${PROJECT_SOURCE_DIR}/src/backends/cuda/codegen/bench/compile_time.cpp)
target_include_directories(codegen_compile_time PRIVATE ${PROJECT_SOURCE_DIR}/src ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(codegen_compile_time PRIVATE cujax)
