#!/usr/bin/env bash
# Load time (the loader's own line) and whole-process peak resident memory of `posenc eval` on each model file,
# with a tiny eval (one window of 64 tokens) so that loading dominates.
# Usage: bash bench/model_load.sh POSENC MODEL_DIR [model ...]   (default: every .gguf file and folder there)
set -euo pipefail
POSENC=${1:?posenc binary}
DIR=${2:?folder with the model files}
shift 2
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  for p in "$DIR"/*.gguf "$DIR"/*/; do MODELS+=("$(basename "$p")"); done
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# model | file MiB | load s (loader) | peak RSS MiB (whole process) | loader line"
for m in "${MODELS[@]}"; do
  path="$DIR/$m"
  tok=()
  case "$m" in stories260K*) tok=(--tokenizer data/tok512.bin) ;; esac
  text=data/text/tinyshakespeare.txt
  /usr/bin/time -f "%M" -o "$TMP/t" "$POSENC" eval --model "$path" "${tok[@]}" --text "$text" --ctx 64 --methods none \
    --tokens 64 --threads 1 > /dev/null 2> "$TMP/err" || { echo "$m | failed: $(tail -1 "$TMP/err")"; continue; }
  line=$(grep 'loaded in' "$TMP/err" | head -1)
  secs=$(echo "$line" | sed -E 's/.*loaded in ([0-9.]+) s.*/\1/')
  mib=$(du -sm --apparent-size "$path" | cut -f1)
  echo "$m | $mib | $secs | $(( $(cat "$TMP/t") / 1024 )) | $line"
done
