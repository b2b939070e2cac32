#!/usr/bin/env bash
# The README's test command.
#   bash scripts/test.sh          the Release build (scripts/build.sh) and the whole CTest suite: C++ tests, the C
#                                 API test, the Python package's pytest files, the package tests, the fuzz replays,
#                                 the MPI tests under mpirun
#   bash scripts/test.sh --full   the same, then the sanitizer build (ASan + UBSan, clang; scripts/sanitize.sh)
#                                 running the suite again, then every fuzz harness for FUZZ_SECONDS (default 30;
#                                 scripts/fuzz.sh). CI runs this (.ci/run).
# Each part's wall time is printed on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
case "${1:-}" in
  "") ;;
  --full) full=1 ;;
  *) echo "usage: bash scripts/test.sh [--full]" >&2; exit 2 ;;
esac
t0=$(date +%s)
bash scripts/build.sh
t1=$(date +%s)
ctest --test-dir build --output-on-failure -j "$(nproc)"
t2=$(date +%s)
echo "test.sh: release build: $((t1 - t0)) s, tests: $((t2 - t1)) s" >&2
if [ "$full" -eq 0 ]; then
  exit 0
fi
bash scripts/sanitize.sh
t3=$(date +%s)
echo "test.sh: sanitizer build + tests: $((t3 - t2)) s" >&2
bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
t4=$(date +%s)
echo "test.sh: fuzzing: $((t4 - t3)) s; total $((t4 - t0)) s" >&2
