# libcujax.so (target cujax_shared, installed as cujax::cujax_shared) from the static library's
# objects: the same code, compiled once. Its link dependencies (BLAS, zstd, MPI, the static CUDA
# runtime) are linked into it, so a program linking it needs none of them. Included after every
# dependency is added to `cujax`.
add_library(cujax_shared SHARED $<TARGET_OBJECTS:cujax>)
add_library(cujax::cujax_shared ALIAS cujax_shared)
set_target_properties(cujax_shared PROPERTIES
  OUTPUT_NAME cujax
  EXPORT_NAME cujax_shared
  VERSION ${PROJECT_VERSION}
  # 0.x: a minor version may break the ABI.
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
target_include_directories(cujax_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                               $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(cujax_shared PUBLIC cxx_std_20)
target_link_libraries(cujax_shared PUBLIC Threads::Threads
                                   PRIVATE $<TARGET_PROPERTY:cujax,LINK_LIBRARIES>)
# Every symbol must resolve inside the library or its dependencies, not in the program.
target_link_options(cujax_shared PRIVATE LINKER:--no-undefined)
