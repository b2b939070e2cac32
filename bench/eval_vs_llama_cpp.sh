#!/usr/bin/env bash
# posenc eval against llama.cpp's llama-perplexity on the same GGUF files and text, equal work, one script:
# 8192 scored predictions at ctx 1024 with 2 threads. posenc scores every position of 8 windows of 1024 tokens;
# llama-perplexity runs 16 chunks of 1024 tokens and scores the second half of each (16 x 512 = 8192).
# Whole-process wall time and peak resident memory (GNU time), runs interleaved, best and median of REPS.
#
# Usage: bash bench/eval_vs_llama_cpp.sh POSENC LLAMA_PERPLEXITY MODEL_DIR [MODEL.gguf ...]
#   POSENC            build/posenc
#   LLAMA_PERPLEXITY  a llama.cpp llama-perplexity binary
#   MODEL_DIR         folder holding the GGUF files (default files: llama-mini-rand-q8_0.gguf, -bf16.gguf)
# Environment: REPS (default 3), TEXT (default data/text/tinyshakespeare.txt), THREADS (default 2).
set -euo pipefail
POSENC=${1:?posenc binary}
PEER=${2:?llama-perplexity binary}
DIR=${3:?folder with the GGUF files}
shift 3
FILES=("$@")
[ ${#FILES[@]} -gt 0 ] || FILES=(llama-mini-rand-q8_0.gguf llama-mini-rand-bf16.gguf)
REPS=${REPS:-3}
TEXT=${TEXT:-data/text/tinyshakespeare.txt}
THREADS=${THREADS:-2}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model | tool | wall s (each run) | best | median | peak RSS MiB | result"
stats() {  # best and median of the numbers given
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {printf "%s %s", a[1], a[int((NR+1)/2)]}'
}
for f in "${FILES[@]}"; do
  model="$DIR/$f"
  declare -a pt=() lt=()
  prss=0; lrss=0; pres=""; lres=""
  for _ in $(seq "$REPS"); do
    /usr/bin/time -f "%e %M" -o "$TMP/t" "$POSENC" eval --model "$model" --text "$TEXT" --ctx 1024 --methods none \
      --tokens 8192 --threads "$THREADS" > "$TMP/p.out" 2> "$TMP/p.err"
    read -r s rss < "$TMP/t"; pt+=("$s"); prss=$((rss > prss ? rss : prss))
    pres=$(grep -E '^\| 1024 \| none' "$TMP/p.out" | awk -F'|' '{gsub(/ /,"",$5); print "ppl " $5}')
    /usr/bin/time -f "%e %M" -o "$TMP/t" "$PEER" -m "$model" -f "$TEXT" -c 1024 -b 1024 -t "$THREADS" --chunks 16 \
      > "$TMP/l.out" 2> "$TMP/l.err"
    read -r s rss < "$TMP/t"; lt+=("$s"); lrss=$((rss > lrss ? rss : lrss))
    lres=$(grep -oE 'Final estimate: PPL = [0-9.]+' "$TMP/l.out" "$TMP/l.err" | head -1 | sed 's/.*PPL = /ppl /')
    lres="$lres; $(grep -oE 'prompt eval time = +[0-9.]+ ms' "$TMP/l.err" | head -1)"
  done
  read -r pbest pmed <<< "$(stats "${pt[@]}")"
  read -r lbest lmed <<< "$(stats "${lt[@]}")"
  echo "$f | posenc | ${pt[*]} | $pbest | $pmed | $((prss / 1024)) | $pres"
  echo "$f | llama-perplexity | ${lt[*]} | $lbest | $lmed | $((lrss / 1024)) | $lres"
  echo "$f | ratio (llama-perplexity / posenc) | | $(echo "scale=2; $lbest / $pbest" | bc) | $(echo "scale=2; $lmed / $pmed" | bc) | |"
  grep -E 'loaded in' "$TMP/p.err" | sed "s/^/# $f posenc load: /" || true
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
