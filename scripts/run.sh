#!/usr/bin/env bash
# The README's main command: installs what building the CLI needs (scripts/install-deps.sh --minimal), builds only
# the `posenc` target into ./build (the CMake preset `cli`: no tests, benchmarks, Python package or MPI), then runs
# the main job — a real pretrained model (stories260K, trained at 512 tokens) evaluated past its training length
# with every RoPE extension method, on the bundled text. Extra arguments go to `posenc eval` (e.g. --ctx 512,1024
# --methods none,yarn --plot out.png; --plot installs gnuplot first). A build/ configured before (scripts/test.sh,
# scripts/build.sh) is kept as it is: only its `posenc` target is brought up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
plot=()
for a in "$@"; do
  case "$a" in --plot|--plot=*) plot=(--plot) ;; esac
done
bash scripts/install-deps.sh --minimal "${plot[@]}" >&2
if [ ! -f build/CMakeCache.txt ]; then
  cmake --preset cli >/dev/null
fi
cmake --build build -j "$(nproc)" --target posenc >&2
exec build/posenc eval "$@"
