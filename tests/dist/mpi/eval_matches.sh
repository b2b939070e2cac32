#!/usr/bin/env bash
# Runs `posenc eval` in one process and under mpirun with the same arguments and compares the JSON results:
#   exact: the files are identical byte for byte (data-parallel eval is bit-identical to one process);
#   close: every ppl (rows and position buckets) agrees within 1e-6 relative (context-parallel eval).
# Usage: eval_matches.sh exact|close OUT_PREFIX POSENC NP MPIRUN... -- EVAL_ARGS...
# A --model that does not exist (a large fixture absent here) skips the test (exit 77).
set -euo pipefail
mode=$1 out=$2 posenc=$3 np=$4
shift 4
mpirun=()
while [ "$1" != "--" ]; do mpirun+=("$1"); shift; done
shift
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; ++i)); do
  if [ "${args[i]}" = "--model" ] && [ ! -e "${args[i + 1]}" ]; then
    echo "eval_matches: large fixture absent, skipped: ${args[i + 1]}"
    exit 77
  fi
done
one_args=()  # the one-process run: the same arguments without --context-parallel (which needs ranks)
for a in "${args[@]}"; do [ "$a" = "--context-parallel" ] || one_args+=("$a"); done
rm -f "$out".one.json "$out".ranks.json
"$posenc" eval "${one_args[@]}" --json "$out".one.json > "$out".one.md
"${mpirun[@]}" "$np" "$posenc" eval "${args[@]}" --json "$out".ranks.json > "$out".ranks.md
cat "$out".ranks.md
# Rank 0 alone prints: one table.
if [ "$(grep -c '^| ctx |' "$out".ranks.md)" -ne 1 ]; then
  echo "eval_matches: expected one table from rank 0 in $out.ranks.md" >&2
  exit 1
fi
grep -q "($np ranks, " "$out".ranks.md
if [ "$mode" = exact ]; then
  cmp "$out".one.json "$out".ranks.json
  echo "eval_matches: $np ranks, JSON identical to one process"
  exit 0
fi
/usr/bin/python3 - "$out".one.json "$out".ranks.json <<'PY'
import json, sys
one, ranks = (json.load(open(p)) for p in sys.argv[1:3])
assert len(one["results"]) == len(ranks["results"]) > 0, "row counts differ"
worst = 0.0
for a, b in zip(one["results"], ranks["results"]):
    assert (a["ctx"], a["method"]) == (b["ctx"], b["method"]), (a["ctx"], a["method"], b["ctx"], b["method"])
    pairs = [(a["ppl"], b["ppl"])] + [(x["ppl"], y["ppl"]) for x, y in zip(a["buckets"], b["buckets"])]
    assert len(a["buckets"]) == len(b["buckets"])
    for want, got in pairs:
        rel = abs(got - want) / want
        worst = max(worst, rel)
        assert rel <= 1e-6, f"ctx {a['ctx']} {a['method']}: ppl {got} vs one process {want} (relative {rel:.3g})"
print(f"eval_matches: every ppl within 1e-6 relative of one process (largest difference {worst:.3g})")
PY
