#!/usr/bin/env bash
# Install the project into a scratch prefix and build a user program in C and
# one in C++ (include/tslab.hpp) against it: with find_package(tslab) and
# with pkg-config.
# Usage: check_install.sh SOURCE_DIR SCRATCH_DIR
set -euo pipefail
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DTSLAB_BUILD_TESTS=OFF \
  -DTSLAB_BUILD_BENCH=OFF -DTSLAB_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/build" -j2 >/dev/null
cmake --install "$work/build" >/dev/null
prefix="$work/prefix"
libdir=$(dirname "$(find "$prefix" -name tslab.pc)")

# find_package
cmake -S "$src/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$(dirname "$libdir")" "$work/consumer/consumer_shared"
"$work/consumer/consumer_static"
LD_LIBRARY_PATH="$prefix/lib:$(dirname "$libdir")" "$work/consumer/consumer_cpp_shared"
"$work/consumer/consumer_cpp_static"
LD_LIBRARY_PATH="$prefix/lib:$(dirname "$libdir")" "$work/consumer/consumer_malloc"
"$work/consumer/consumer_malloc_static"
LD_LIBRARY_PATH="$prefix/lib:$(dirname "$libdir")" "$work/consumer/consumer_compat_shared"
"$work/consumer/consumer_compat_static"

# pkg-config
export PKG_CONFIG_PATH="$libdir"
cc -std=c11 $(pkg-config --cflags tslab) "$src/tests/install/consumer.c" \
  $(pkg-config --libs tslab) -o "$work/consumer_pc"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/consumer_pc"
c++ -std=c++17 $(pkg-config --cflags tslab) "$src/tests/install/consumer.cpp" \
  $(pkg-config --libs tslab) -o "$work/consumer_cpp_pc"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/consumer_cpp_pc"
cc -std=c11 $(pkg-config --cflags tslab-malloc) "$src/tests/install/consumer_malloc.c" \
  $(pkg-config --libs tslab-malloc) -o "$work/consumer_malloc_pc"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/consumer_malloc_pc"
cc -std=c11 $(pkg-config --cflags tslab-compat) "$src/tests/install/consumer_compat.c" \
  $(pkg-config --libs tslab-compat) -o "$work/consumer_compat_pc"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/consumer_compat_pc"

# Exported: the functions declared in include/tslab.h and nothing else (no
# internal name, no generic name of the seed's API: a program's other
# libraries may define their own now_ns or slab_free).
nm -D --defined-only "$(dirname "$libdir")/libtslab.so" | awk '{print $3}' | sort > "$work/exports"
grep -o 'tslab_[a-z_]*(' "$src/include/tslab.h" | tr -d '(' | sort -u > "$work/declared"
if grep -v -x -f "$work/declared" "$work/exports"; then
  echo "libtslab.so exports the symbols above, which include/tslab.h does not declare"
  exit 1
fi
# libtslab-compat exports the seed's names, all of them, and nothing else.
nm -D --defined-only "$(dirname "$libdir")/libtslab-compat.so" | awk '{print $3}' | sort > "$work/exports_compat"
if ! sort "$src/tests/install/compat_exports.txt" | diff - "$work/exports_compat"; then
  echo "libtslab-compat.so exports (>) or misses (<) the names above against tests/install/compat_exports.txt"
  exit 1
fi
# The drop-in exports the tslab_ API with its own tslab_malloc_ functions, and
# the allocation names it replaces (src/malloc/exports.map); nothing else, not
# the seed's compatibility names.
nm -D --defined-only "$(dirname "$libdir")/libtslab-malloc.so" | awk '{print $3}' | sort > "$work/exports_malloc"
sed -n 's/^ *\([A-Za-z_][A-Za-z0-9_]*\);$/\1/p' "$src/src/malloc/exports.map" | sort > "$work/malloc_names"
grep -h -o 'tslab_[a-z_]*(' "$src/include/tslab.h" "$src/include/tslab_malloc.h" | tr -d '(' | sort -u \
  > "$work/declared_malloc"
if grep -E '^tslab_' "$work/exports_malloc" | grep -v -x -f "$work/declared_malloc"; then
  echo "exported tslab_ symbols above are not declared in include/tslab.h or include/tslab_malloc.h"
  exit 1
fi
if ! grep -v -E '^tslab_' "$work/exports_malloc" | diff - "$work/malloc_names"; then
  echo "libtslab-malloc.so exports (<) or misses (>) the names above against src/malloc/exports.map"
  exit 1
fi
if grep -E '^tslab_malloc_' "$work/exports"; then
  echo "libtslab.so exports the drop-in's functions above"
  exit 1
fi
echo "install ok"
