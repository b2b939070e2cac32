#!/usr/bin/env bash
# stories260K eval with two posenc binaries (e.g. before and after a change), interleaved, same process settings:
# whole-process wall time of `eval --ctx 512,1024 --methods none,yarn,dynamic --tokens 8192 --no-reuse`.
# Usage: bash bench/stories_before_after.sh POSENC_A POSENC_B [REPS]   (MODEL=... to use another container)
set -euo pipefail
A=${1:?first posenc binary}
B=${2:?second posenc binary}
REPS=${3:-3}
MODEL=${MODEL:-data/stories260K.bin}
args=(eval --model "$MODEL" --tokenizer data/tok512.bin --text data/text/tinystories_val_stories.txt --ctx 512,1024
      --methods none,yarn,dynamic --tokens 8192 --no-reuse --threads 2)
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg); $MODEL"
for bin in "$A" "$B"; do printf '%s ' "$bin"; done; echo
for _ in $(seq "$REPS"); do
  for bin in "$A" "$B"; do
    /usr/bin/time -f "%e" -o /tmp/stories_ba_t "$bin" "${args[@]}" > /tmp/stories_ba_out 2>/dev/null
    printf '%s s (ppl 1024 dynamic %s)  ' "$(cat /tmp/stories_ba_t)" \
      "$(grep -E '^\| 1024 \| dynamic' /tmp/stories_ba_out | awk -F'|' '{gsub(/ /,"",$5); print $5}')"
  done
  echo
done
