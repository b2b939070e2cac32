#!/usr/bin/env bash
# Kills rank 1 of a running `mpirun ... posenc eval` (found among mpirun's children by its OMPI_COMM_WORLD_RANK)
# once it has started, and checks that the job ends with a nonzero status, a message naming rank 1, and no report
# file (rank 0 writes only after the last row).
# Usage: kill_rank_during_eval.sh REPORT_JSON MPIRUN_COMMAND... (the command gets --json REPORT_JSON appended)
set -u
out=$1
shift
rm -f "$out" "$out".*
log=$(mktemp)
"$@" --json "$out" > "$log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 400); do  # up to 20 s for the ranks to start
  for status in /proc/[0-9]*/status; do
    pid=${status#/proc/}
    pid=${pid%/status}
    if grep -qx "PPid:[[:space:]]*$job" "$status" 2>/dev/null &&
       tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
      victim=$pid
    fi
  done
  [ -n "$victim" ] && break
  sleep 0.05
done
if [ -z "$victim" ]; then
  cat "$log"
  echo "kill_rank_during_eval: rank 1 never appeared" >&2
  kill "$job" 2>/dev/null
  exit 1
fi
# Wait until the model is loaded (rank 0's load line), then a moment into the windows.
for _ in $(seq 1 400); do grep -q "loaded in" "$log" && break; sleep 0.05; done
sleep 0.5
kill -9 "$victim"
wait "$job"
rc=$?
cat "$log"
named=$(grep -c "process rank 1 " "$log")
rm -f "$log"
if [ "$named" -eq 0 ]; then
  echo "kill_rank_during_eval: mpirun's message does not name rank 1" >&2
  exit 1
fi
if [ "$rc" -eq 0 ]; then
  echo "kill_rank_during_eval: the job finished before rank 1 was killed, or ignored it" >&2
  exit 1
fi
if ls "$out"* > /dev/null 2>&1; then
  echo "kill_rank_during_eval: $out (or a temporary of it) was written by the failed job" >&2
  exit 1
fi
echo "kill_rank_during_eval: job ended with status $rc after rank 1 was killed; nothing written"
