#!/usr/bin/env bash
# Runs every libFuzzer harness fuzz/<name>_fuzz.cc for SECONDS each (default 30), nproc at a time, from the
# sanitizer build (build-san/, built by scripts/sanitize.sh; built here if missing). Each harness starts from
# its committed seeds (fuzz/corpus/<name>/) and past crashers (fuzz/regressions/<name>/), uses fuzz/<name>.dict
# when present, and grows a working corpus under build-san/fuzz-work/<name>/ (the committed seeds stay small).
# Prints the executions per harness; fails if any harness finds a crash, and says where the input is (copy it to
# fuzz/regressions/<name>/ once fixed: the normal test suite replays that folder).
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
if [ ! -f build-san/build.ninja ]; then bash scripts/sanitize.sh; fi
names=()
for f in fuzz/*_fuzz.cc; do n=$(basename "$f" _fuzz.cc); names+=("$n"); done
cmake --build build-san -j "$(nproc)" --target $(printf 'posenc_fuzz_%s ' "${names[@]}")
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/sanitizer/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
LOGS=build-san/fuzz-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
run_one() {
  local n=$1 secs=$2
  local work=build-san/fuzz-work/$n art=build-san/fuzz-artifacts/$n/
  mkdir -p "$work" "$art"
  local dict=()
  if [ -f "fuzz/$n.dict" ]; then dict=(-dict="fuzz/$n.dict"); fi
  local seeds=()
  for d in "fuzz/corpus/$n" "fuzz/regressions/$n"; do if [ -d "$d" ]; then seeds+=("$d"); fi; done
  # One OpenMP/BLAS thread: the harnesses run nproc at a time.
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "build-san/fuzz/posenc_fuzz_$n" "$work" "${seeds[@]}" "${dict[@]}" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$art" -print_final_stats=1 \
    >"$LOGS/$n.log" 2>&1
}
export -f run_one
status=0
printf '%s\n' "${names[@]}" | xargs -P "$(nproc)" -I{} bash -c "run_one {} $SECONDS_EACH" || status=1
total=0
for n in "${names[@]}"; do
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$LOGS/$n.log" | tail -1 | awk '{print $2}')
  execs=${execs:-0}
  total=$((total + execs))
  crash=$(ls build-san/fuzz-artifacts/"$n"/ 2>/dev/null | head -1 || true)
  printf 'fuzz %-24s %12s executions in %ss%s\n' "$n" "$execs" "$SECONDS_EACH" \
    "${crash:+   FOUND: build-san/fuzz-artifacts/$n/$crash (log: $LOGS/$n.log)}"
  if [ -n "$crash" ]; then status=1; fi
done
echo "fuzz total: $total executions, ${#names[@]} harnesses"
exit $status
