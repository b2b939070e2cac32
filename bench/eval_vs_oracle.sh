#!/usr/bin/env bash
# eval throughput: `posenc eval` against the numpy oracle ref_llama2c.py, in one run.
#   1. the full default `posenc eval` (4 ctx x 6 methods x 16384 tokens), REPS times: best and median wall time;
#   2. single (ctx, method) rows, posenc REPS times and the oracle once each (it takes seconds to minutes),
#      interleaved row by row; both as whole processes and as each tool's own per-row compute timer
#      (tables + forward passes + NLL; no model loading or tokenizing).
# Usage: bash bench/eval_vs_oracle.sh [posenc binary] [ref_llama2c.py] ["ctx method" ...]
# (ref_llama2c.py: the numpy oracle's path; ORACLE=<path> in the environment works too. Not needed with BASELINE.)
# Needs bc, and /usr/bin/python3 with numpy for the oracle.
#
# BASELINE=<older posenc binary> (eval speed-up): instead of the oracle comparison, time the full default
# `posenc eval` of BASELINE, of POSENC and of POSENC --no-reuse (every row computed), interleaved, REPS rounds;
# print best / median wall times and best CPU times (user + sys: on a loaded machine the steadier figure), the
# ratios of the bests, each row's compute time (best of REPS, from each
# binary's own tokens/s column) and the largest |ppl ratio - 1| between BASELINE and POSENC over all 24 rows.
set -euo pipefail
cd "$(dirname "$0")/.."
POSENC=${1:-build/posenc}
ORACLE=${2:-${ORACLE:-ref_llama2c.py}}
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

if [ -n "${BASELINE:-}" ]; then
  echo "# $(date -u +%FT%TZ)  $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# before: $BASELINE   after: $POSENC   text: $TEXT   N = $N   rounds (interleaved): $REPS"
  declare -A W C
  for r in $(seq "$REPS"); do
    for v in before after noreuse; do
      case $v in
        before) cmd=("$BASELINE" eval) ;;
        after) cmd=("$POSENC" eval) ;;
        noreuse) cmd=("$POSENC" eval --no-reuse) ;;
      esac
      /usr/bin/time -f "%e %U %S" -o "$TMP/time" "${cmd[@]}" > "$TMP/$v.$r.txt"
      read -r wall user sys < "$TMP/time"
      W[$v]="${W[$v]:-} $wall"
      C[$v]="${C[$v]:-} $(calc "$user + $sys")"
      echo "#   round $r $v: wall $wall s, cpu (user + sys) $(calc "$user + $sys") s   load $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
  echo
  echo "| run (full default posenc eval, 24 rows, $((24 * N)) tokens scored) | wall best s | wall median s | wall, all rounds | before / this (wall best) | cpu best s | before / this (cpu best) |"
  echo "|---|---:|---:|---|---:|---:|---:|"
  read -r bb _ <<< "$(best_median ${W[before]})"
  read -r cb _ <<< "$(best_median ${C[before]})"
  for v in before after noreuse; do
    read -r b m <<< "$(best_median ${W[$v]})"
    read -r c _ <<< "$(best_median ${C[$v]})"
    case $v in
      before) name="before (501aaed)" ;;
      after) name="after, default (identical rows reused)" ;;
      noreuse) name="after, --no-reuse (every row computed)" ;;
    esac
    printf "| %s | %.2f | %.2f | %s | %.2fx | %.2f | %.2fx |\n" "$name" "$b" "$m" "$(echo ${W[$v]} | xargs printf '%.2f ')" \
      "$(calc "$bb / $b")" "$c" "$(calc "$cb / $c")"
  done
  echo
  # Per row: compute seconds = N / tokens/s of each binary's own table, best over the rounds.
  /usr/bin/python3 - "$TMP" "$REPS" "$N" <<'PY'
import re, sys, glob
tmp, reps, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
row = re.compile(r"^\| (\d+) \| (\S+) \| \S+ \| ([\d.]+) \|.*\| (\d+) \| ([^|]+) \|$", re.M)
def rows(v):
    best, ppl, reused = {}, {}, {}
    for r in range(1, reps + 1):
        for m in row.finditer(open(f"{tmp}/{v}.{r}.txt").read()):
            k = (int(m[1]), m[2]); ppl[k] = float(m[3]); tps = m[5].strip()
            if tps.startswith("="): reused[k] = tps; continue
            best[k] = min(best.get(k, 1e9), n / float(tps))
    return best, ppl, reused
b, pb, _ = rows("before"); a, pa, ra = rows("after"); nr, pn, _ = rows("noreuse")
print("| ctx | method | before row s | after --no-reuse row s | ratio | after default row s | ppl before | ppl after |")
print("|---:|---|---:|---:|---:|---:|---:|---:|")
for k in b:
    after = ra[k] + " (reused)" if k in ra else f"{a[k]:.3f}"
    print(f"| {k[0]} | {k[1]} | {b[k]:.3f} | {nr[k]:.3f} | {b[k] / nr[k]:.2f}x | {after} | {pb[k]:.4f} | {pa[k]:.4f} |")
print(f"| | sum | {sum(b.values()):.2f} | {sum(nr.values()):.2f} | {sum(b.values()) / sum(nr.values()):.2f}x | {sum(a.values()):.2f} | | |")
print()
print("max |ppl ratio - 1| (table's 4 decimals), before vs after:", max(abs(pa[k] / pb[k] - 1) for k in pb),
      "; before vs after --no-reuse:", max(abs(pn[k] / pb[k] - 1) for k in pb))
print("reused rows:", ", ".join(f"{k[0]} {k[1]} {v}" for k, v in ra.items()) or "none")
PY
  echo
  echo "# header of the last run: $(sed -n 2p "$TMP/after.$REPS.txt")"
  echo "#   before: $(sed -n 2p "$TMP/before.$REPS.txt")"
  echo "# done: load $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

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
