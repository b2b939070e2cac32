#!/usr/bin/env bash
# eval throughput (issue 3): `posenc eval` against the numpy oracle shared/tools/ref_llama2c.py, in one run.
#   1. the full default `posenc eval` (4 ctx x 6 methods x 16384 tokens), REPS times: best and median wall time;
#   2. single (ctx, method) rows, posenc REPS times and the oracle once each (it takes seconds to minutes),
#      interleaved row by row; both as whole processes and as each tool's own per-row compute timer
#      (tables + forward passes + NLL; no model loading or tokenizing).
# Usage: bash bench/eval_vs_oracle.sh [posenc binary] [ref_llama2c.py] ["ctx method" ...]
# Needs bc, and /usr/bin/python3 with numpy for the oracle.
set -euo pipefail
cd "$(dirname "$0")/.."
POSENC=${1:-build/posenc}
ORACLE=${2:-../shared/tools/ref_llama2c.py}
ROWS=("${@:3}")
if [ ${#ROWS[@]} -eq 0 ]; then ROWS=("256 none" "1024 yarn" "2048 none" "2048 dynamic"); fi
REPS=${REPS:-3}
TEXT=data/text/tinystories_val_stories.txt
N=16384
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

now() { date +%s.%N; }
calc() { echo "$1" | bc -l; }
best_median() {  # prints "best median" of the numbers given
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {printf "%s %s", a[1], (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

echo "# $(date -u +%FT%TZ)  $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# posenc: $POSENC   oracle: $ORACLE   text: $TEXT   N = $N   posenc runs per figure: $REPS"

walls=()
for r in $(seq "$REPS"); do
  t0=$(now)
  "$POSENC" eval --text "$TEXT" --tokens $N > "$TMP/default.txt"
  t1=$(now)
  walls+=("$(calc "$t1 - $t0")")
done
read -r best median <<< "$(best_median "${walls[@]}")"
printf "\nposenc eval, default (4 ctx x 6 methods = %d tokens scored), whole process: best %.2f s (%.0f tokens/s), median %.2f s\n" \
  $((24 * N)) "$best" "$(calc "24 * $N / $best")" "$median"
echo "  its own summary line (last run): $(tail -1 "$TMP/default.txt")"
if [ "${FULL_ORACLE:-0}" = 1 ]; then  # the oracle's full default run too: minutes
  t0=$(now)
  /usr/bin/python3 "$ORACLE" eval --text "$TEXT" --n-pred $N > "$TMP/oracle_default.txt"
  t1=$(now)
  full=$(calc "$t1 - $t0")
  printf "oracle eval, default (the same 24 rows), whole process: %.1f s (%.0f tokens/s): posenc best is %.1fx faster\n" \
    "$full" "$(calc "24 * $N / $full")" "$(calc "$full / $best")"
  # every row's ppl, posenc vs oracle (the table's 4 decimals)
  worst=$(python3 - "$TMP/default.txt" "$TMP/oracle_default.txt" <<'PY'
import re, sys
ours = {(int(m[0]), m[1]): float(m[2]) for m in re.findall(r"^\| (\d+) \| (\S+) \| \S+ \| ([\d.]+) \|", open(sys.argv[1]).read(), re.M)}
theirs = {(int(m[0]), m[1]): float(m[2]) for m in re.findall(r"^L=(\d+) (\S+)\s+ppl ([\d.]+)", open(sys.argv[2]).read(), re.M)}
print(len(ours), len(theirs), max(abs(ours[k] / theirs[k] - 1) for k in theirs))
PY
)
  echo "  rows compared: posenc $(echo "$worst" | cut -d' ' -f1), oracle $(echo "$worst" | cut -d' ' -f2); max |ppl ratio - 1| at 4 decimals: $(echo "$worst" | cut -d' ' -f3)"
fi

echo
echo "| ctx | method | posenc process s (best / median) | oracle process s | ratio | posenc row s | posenc tok/s | oracle row s | oracle tok/s | ratio | ppl posenc | ppl oracle |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for row in "${ROWS[@]}"; do
  read -r ctx method <<< "$row"
  walls=(); rows_s=()
  for r in $(seq "$REPS"); do
    t0=$(now)
    "$POSENC" eval --text "$TEXT" --tokens $N --ctx "$ctx" --methods "$method" > "$TMP/row.txt"
    t1=$(now)
    walls+=("$(calc "$t1 - $t0")")
    tps=$(grep "^| $ctx | $method |" "$TMP/row.txt" | awk -F'|' '{print $(NF-1)}' | xargs)
    rows_s+=("$(calc "$N / $tps")")
  done
  read -r wbest wmed <<< "$(best_median "${walls[@]}")"
  read -r rbest _ <<< "$(best_median "${rows_s[@]}")"
  ppl_ours=$(grep "^| $ctx | $method |" "$TMP/row.txt" | cut -d'|' -f5 | xargs)
  t0=$(now)
  /usr/bin/python3 "$ORACLE" eval --text "$TEXT" --ctx "$ctx" --methods "$method" --n-pred $N > "$TMP/oracle.txt"
  t1=$(now)
  owall=$(calc "$t1 - $t0")
  orow=$(grep "^L=$ctx " "$TMP/oracle.txt" | awk '{print $NF}' | tr -d s)
  ppl_oracle=$(grep "^L=$ctx " "$TMP/oracle.txt" | awk '{print $4}')
  printf "| %s | %s | %.2f / %.2f | %.2f | %.1fx | %.3f | %.0f | %.1f | %.0f | %.1fx | %s | %s |\n" \
    "$ctx" "$method" "$wbest" "$wmed" "$owall" "$(calc "$owall / $wbest")" "$rbest" "$(calc "$N / $rbest")" \
    "$orow" "$(calc "$N / $orow")" "$(calc "$orow / $rbest")" "$ppl_ours" "$ppl_oracle"
done
echo
echo "# done: load $(cut -d' ' -f1-3 /proc/loadavg)"
