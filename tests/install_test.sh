#!/usr/bin/env bash
# Installs a build tree to a scratch prefix and builds examples/downstream against it three
# times: as a CMake project (find_package(cujax) + cujax::cujax, the static library), the same
# with cujax::cujax_shared, and with pkg-config's flags alone (which link libcujax.so). Every
# program must run and succeed, and the shared builds must load the installed libcujax.so. The scratch folder sits in the build tree, at a fixed path, so
# that ccache serves the downstream compile on later runs. The downstream builds take the build
# tree's CMAKE_CXX_FLAGS: a library compiled with sanitizers (the debug preset) needs programs
# compiled and linked with them.
#   install_test.sh <build dir> <source dir> <libdir> <generator> <c++ compiler> [launcher]
#                   [c++ flags]
set -euo pipefail
build=$1 source=$2 libdir=$3 generator=$4 cxx=$5 launcher=${6:-} cxxflags=${7:-}
work="$build/install_test"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install failed"; }
for f in include/cujax/cujax.h include/cujax/numpy.h include/cujax/nnx/linear.h bin/cujax \
         "$libdir/cmake/cujax/cujaxConfig.cmake" "$libdir/cmake/cujax/cujaxConfigVersion.cmake" \
         "$libdir/cmake/cujax/cujaxTargets.cmake" "$libdir/pkgconfig/cujax.pc"; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
for lib in libcujax.a libcujax.so; do
  [ -e "$prefix/$libdir/$lib" ] || fail "$lib was not installed in $prefix/$libdir"
done
version=$("$prefix/bin/cujax" --version) || fail "the installed cujax command does not run"
echo "installed: $version"

# The CMake package, found from the scratch prefix only.
launcher_arg=()
[ -n "$launcher" ] && launcher_arg=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
cmake -S "$source/examples/downstream" -B "$work/build" -G "$generator" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" "${launcher_arg[@]}" \
      -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring downstream failed"; }
found=$(sed -n 's/^cujax_DIR:PATH=//p' "$work/build/CMakeCache.txt")
[ "$found" -ef "$prefix/$libdir/cmake/cujax" ] || fail "find_package(cujax) found $found, not the scratch install"
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building downstream failed"; }
"$work/build/downstream" || fail "downstream (CMake package) failed"

# The shared library through the package: a copy of the project linking cujax::cujax_shared.
mkdir -p "$work/shared_src"
cp "$source/examples/downstream/main.cpp" "$work/shared_src/"
sed 's/cujax::cujax)/cujax::cujax_shared)/' "$source/examples/downstream/CMakeLists.txt" \
  >"$work/shared_src/CMakeLists.txt"
grep -q 'cujax::cujax_shared)' "$work/shared_src/CMakeLists.txt" ||
  fail "examples/downstream/CMakeLists.txt no longer links cujax::cujax"
cmake -S "$work/shared_src" -B "$work/build_shared" -G "$generator" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" "${launcher_arg[@]}" \
      -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      >"$work/configure_shared.log" 2>&1 || { cat "$work/configure_shared.log"; fail "configuring downstream (shared) failed"; }
cmake --build "$work/build_shared" >"$work/build_shared.log" 2>&1 ||
  { cat "$work/build_shared.log"; fail "building downstream (shared) failed"; }
loaded=$(ldd "$work/build_shared/downstream" | awk '$1 ~ /^libcujax\.so/ { print $3 }')
[ -n "$loaded" ] && [ "$loaded" -ef "$(readlink -f "$prefix/$libdir/libcujax.so")" ] ||
  fail "downstream (cujax::cujax_shared) loads '$loaded', not the installed libcujax.so"
"$work/build_shared/downstream" || fail "downstream (cujax::cujax_shared) failed"

# pkg-config: the README's compile line.
if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs cujax) ||
    fail "pkg-config cannot read cujax.pc"
  # shellcheck disable=SC2086  # the flags are words
  $launcher "$cxx" -std=c++20 -O2 $cxxflags "$source/examples/downstream/main.cpp" $flags \
    -o "$work/downstream_pkgconfig" || fail "compiling downstream with pkg-config's flags failed"
  # pkg-config gives no run path: the shared libcujax outside the loader's paths needs one.
  export LD_LIBRARY_PATH="$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # ldd's whole output first: `grep -q` quitting early would fail the pipe (pipefail, SIGPIPE).
  libs=$(ldd "$work/downstream_pkgconfig")
  grep -q '^[[:space:]]*libcujax\.so' <<<"$libs" ||
    fail "downstream (pkg-config) does not link libcujax.so: $libs"
  "$work/downstream_pkgconfig" || fail "downstream (pkg-config) failed"
fi
echo "install_test: ok"
