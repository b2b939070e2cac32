#!/usr/bin/env bash
# The README's test command: the Release build and every test through CTest, then the sanitizer build
# (ASan + UBSan, clang) running the whole suite again, then every fuzz harness for FUZZ_SECONDS (default 30).
# Each part's wall time is printed on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
t1=$(date +%s)
echo "test.sh: release build + tests: $((t1 - t0)) s" >&2
bash scripts/sanitize.sh
t2=$(date +%s)
echo "test.sh: sanitizer build + tests: $((t2 - t1)) s" >&2
bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
t3=$(date +%s)
echo "test.sh: fuzzing: $((t3 - t2)) s; total $((t3 - t0)) s" >&2
