#!/usr/bin/env bash
# The sanitizer part of the README's test command: configures and builds build-san/ with clang,
# -fsanitize=address,undefined -fno-sanitize-recover=undefined (POSENC_SANITIZE=ON in CMakeLists.txt), then runs
# the whole test suite there. The same build directory holds the libFuzzer harnesses that scripts/fuzz.sh runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
CXX_CLANG=$(command -v clang++-14 || command -v clang++)
cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$CXX_CLANG" -DPOSENC_SANITIZE=ON \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build build-san -j "$(nproc)"
ctest --test-dir build-san --output-on-failure -j "$(nproc)"
