#!/usr/bin/env bash
# Time per window of `posenc eval` on 1 and 2 ranks: one process (1 and 2 threads), mpirun -np 1 and -np 2 with
# --context-parallel (each window split over the ranks), mpirun -np 2 without it (whole windows dealt to the
# ranks). Runs alternate within each repeat, so load changes hit every configuration alike. Prints the footer
# lines of each report (rows, time, tokens/s; the context-parallel line: ms per window, K/V bytes sent per rank
# per window, ring-attention time and the part spent waiting for transfers).
# Usage: bench/mpi_eval_bench.sh REPEATS MODEL_DIR [MODEL CTX TOKENS]...
#   MODEL_DIR: folder holding llama-mini-rand-q8_0.gguf (default cases: the bundled stories260K at ctx 2048 and
#   that file at ctx 4096, 8192 tokens each; a model that is absent is skipped)
# As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:?repeats}
model_dir=${2:?folder with the model files}
shift 2
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=(data/stories260K.bin 2048 8192 "$model_dir"/llama-mini-rand-q8_0.gguf 4096 8192)
fi
posenc=build/posenc
for ((c = 0; c < ${#cases[@]}; c += 3)); do
  model=${cases[c]} ctx=${cases[c + 1]} tokens=${cases[c + 2]}
  [ -e "$model" ] || { echo "absent, skipped: $model"; continue; }
  args=(eval --model "$model" --ctx "$ctx" --tokens "$tokens" --methods none)
  echo "== $(basename "$model"), ctx $ctx, $((tokens / ctx)) windows, method none"
  for ((r = 1; r <= repeats; ++r)); do
    for cfg in "one process, 1 thread" "one process, 2 threads" "mpirun -np 1 --context-parallel" \
               "mpirun -np 2 --context-parallel" "mpirun -np 2 (data-parallel)"; do
      case $cfg in
        "one process, 1 thread") out=$("$posenc" "${args[@]}" --threads 1 2>/dev/null) ;;
        "one process, 2 threads") out=$("$posenc" "${args[@]}" --threads 2 2>/dev/null) ;;
        "mpirun -np 1 --context-parallel") out=$(mpirun -np 1 "$posenc" "${args[@]}" --context-parallel 2>/dev/null) ;;
        "mpirun -np 2 --context-parallel") out=$(mpirun -np 2 "$posenc" "${args[@]}" --context-parallel 2>/dev/null) ;;
        "mpirun -np 2 (data-parallel)") out=$(mpirun -np 2 "$posenc" "${args[@]}" --threads 1 2>/dev/null) ;;
      esac
      echo "-- repeat $r, $cfg"
      printf '%s\n' "$out" | grep -E "^[0-9]+ rows|^context parallel"
    done
  done
done
