#!/usr/bin/env bash
# Configures and builds everything (Release, Ninja) into ./build: the library, the CLI, every test, the benchmarks,
# the Python package and the MPI transport (the last two when their packages are found). Installs missing packages
# first. A build/ made by scripts/run.sh (the `cli` preset) is switched to the full set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# -U: the Python package and MPI go back to their defaults (on when found), whatever an earlier configure chose.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSENC_BUILD_TESTS=ON -DPOSENC_BUILD_BENCHMARKS=ON \
  -UPOSENC_BUILD_PYTHON -UPOSENC_WITH_MPI >/dev/null
cmake --build build -j "$(nproc)"
