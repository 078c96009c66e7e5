# `cmake --install <build> [--prefix <dir>]` installs:
#   include/cujax/...                        the public headers (<cujax/cujax.h> brings them all)
#   lib/libcujax.a, lib/libcujax.so*        the static and the shared library
#   bin/cujax                                the command
#   lib/cmake/cujax/cujaxConfig.cmake, ...   find_package(cujax CONFIG) -> cujax::cujax (static),
#                                            cujax::cujax_shared
#   lib/pkgconfig/cujax.pc                   pkg-config --cflags --libs cujax
# Both package files are relocatable: they find the prefix from where they are installed.
include(CMakePackageConfigHelpers)

set(CUJAX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/cujax)
set_target_properties(cujax PROPERTIES EXPORT_NAME cujax)

set(CUJAX_INSTALL_LIBRARIES cujax)
if(CUJAX_BUILD_SHARED_LIBRARY)
  list(APPEND CUJAX_INSTALL_LIBRARIES cujax_shared)
endif()
install(TARGETS ${CUJAX_INSTALL_LIBRARIES} EXPORT cujaxTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS cujax_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cujax DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT cujaxTargets NAMESPACE cujax:: DESTINATION ${CUJAX_INSTALL_CMAKEDIR})

# What the config file must find again for users of the static library (its PRIVATE link
# dependencies); the shared library carries them itself. NCCL, cuBLASLt, cuDNN, NVRTC and the
# driver are loaded with dlopen at run time, so they are never link dependencies.
set(CUJAX_WITH_MPI OFF)
if(MPI_C_FOUND)
  set(CUJAX_WITH_MPI ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cujaxConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cujaxConfig.cmake
                              INSTALL_DESTINATION ${CUJAX_INSTALL_CMAKEDIR}
                              PATH_VARS CMAKE_INSTALL_BINDIR)
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cujaxConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cujaxConfig.cmake ${PROJECT_BINARY_DIR}/cujaxConfigVersion.cmake
        DESTINATION ${CUJAX_INSTALL_CMAKEDIR})

# cujax.pc, as libzstd.pc does it: `-lcujax` links libcujax.so where it is installed, and
# `pkg-config --static` adds what the static library needs.
set(pc_deps "")
foreach(lib IN LISTS BLAS_LIBRARIES MPI_C_LIBRARIES)
  string(APPEND pc_deps " ${lib}")
endforeach()
if(BLAS_LINKER_FLAGS)
  string(APPEND pc_deps " ${BLAS_LINKER_FLAGS}")
endif()
if(CUJAX_CUDA_BUILD)
  string(APPEND pc_deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt")
endif()
string(APPEND pc_deps " -ldl -pthread")
if(CUJAX_BUILD_SHARED_LIBRARY)
  set(CUJAX_PC_LIBS "-L\${libdir} -lcujax")
  set(CUJAX_PC_LIBS_PRIVATE "${pc_deps}")
  set(CUJAX_PC_REQUIRES "")
  set(CUJAX_PC_REQUIRES_PRIVATE "libzstd libcrypto")
else()
  set(CUJAX_PC_LIBS "-L\${libdir} -lcujax${pc_deps}")
  set(CUJAX_PC_LIBS_PRIVATE "")
  set(CUJAX_PC_REQUIRES "libzstd libcrypto")
  set(CUJAX_PC_REQUIRES_PRIVATE "")
endif()
set(CUJAX_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The prefix as a path from the .pc file's folder, so the installed tree can move.
file(RELATIVE_PATH CUJAX_PC_PREFIX /prefix/${CUJAX_PC_DIR} /prefix)
string(REGEX REPLACE "/$" "" CUJAX_PC_PREFIX "${CUJAX_PC_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/cujax.pc.in ${PROJECT_BINARY_DIR}/cujax.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cujax.pc DESTINATION ${CUJAX_PC_DIR})
