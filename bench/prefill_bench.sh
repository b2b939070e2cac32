#!/usr/bin/env bash
# Prefill at realistic shapes: whole-process `posenc eval` on random-weight GGUF files this script writes itself
# (posenc_write_bench_model: TinyLlama-1.1B's shape and Llama-2-7B's widths with 4 layers; F32 / BF16 / Q8_0), per
# --compute, against this machine's measured peaks and PyTorch's forward of the same shape in bf16 and f32, all
# in one run. Tokens computed per second = tokens scored (every position of every window is computed) / wall time
# of the whole process (load, packing, tokenizing and the forward passes); the eval's own row rate is printed too.
# Each file is read once before its runs, so that every run finds it in the page cache (the disk's speed is not
# what is measured; a run that reads a file from disk adds its size / the disk's rate).
#
#   bash bench/prefill_bench.sh [BUILD_DIR] > bench/results/prefill.txt
#
# Environment: CASES ("shape type ctx" entries, ';'-separated), COMPUTES (default "f32 auto"; COMPUTES_1THREAD those
# also run on one thread for the TinyLlama Q8_0 ctx-1024 file), TORCH_CASES ("shape ctx" entries), TOKENS (predictions
# per row at ctx 1024; longer ctx: one window), THREADS (default 2), TORCH=0 skips PyTorch, MODELS (folder
# for the files, default BUILD_DIR/bench-models; each file is deleted after its cases unless KEEP=1).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${MODELS:-$BUILD/bench-models}
THREADS=${THREADS:-2}
TOKENS=${TOKENS:-2048}
COMPUTES=${COMPUTES:-"f32 auto"}
CASES=${CASES:-"tinyllama q8_0 1024;tinyllama bf16 1024;tinyllama f32 1024;tinyllama q8_0 4096;7b-width-4l q8_0 1024"}
PY=${PYTHON:-/usr/bin/python3}
mkdir -p "$MODELS"

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# prefill benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) vCPUs"
echo "# flags: $(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_int8|amx_tile)$' | tr '\n' ' ')"
echo "# load average at start: $(load)"

# ---- peaks ------------------------------------------------------------------------------------------------------
echo "## peaks (register-resident loops: bench/peak_flops.c; GEMM 2048^3: posenc_gemm_peak)"
if gcc -O2 -march=native -fopenmp "$ROOT/bench/peak_flops.c" -o "$BUILD/peak_flops" 2>/dev/null; then
  for t in 1 2; do "$BUILD/peak_flops" "$t" 0.5; done
else
  echo "peak_flops: does not build here (needs AVX-512)"
fi
for t in 1 2; do "$BUILD/posenc_gemm_peak" "$t" 5; done
echo "# load average after the peaks: $(load)"

# ---- FLOPs per token ------------------------------------------------------------------------------------------------
# weights: 2 per multiply-add of every matrix (q, k, v, o, gate, up, down per layer; the classifier);
# attention at ctx L: per layer and query head 4 head_dim flops per (query, key) pair, L (L + 1) / 2 pairs per window.
flops_per_token() {  # shape ctx -> "weight_flops attention_flops"
  local dim layers heads kv ffn vocab
  case $1 in
    tinyllama) dim=2048 layers=22 heads=32 kv=4 ffn=5632 vocab=32000 ;;
    7b-width-4l) dim=4096 layers=4 heads=32 kv=32 ffn=11008 vocab=32000 ;;
  esac
  awk -v d=$dim -v l=$layers -v h=$heads -v kv=$kv -v f=$ffn -v v=$vocab -v L=$2 'BEGIN {
    hd = d / h; w = 2 * (l * (d * d * 2 + 2 * d * kv * hd + 3 * d * f) + v * d);
    a = l * h * 4 * hd * (L + 1) / 2; printf "%.6g %.6g", w, a }'
}

# ---- posenc eval ----------------------------------------------------------------------------------------------------
echo "## posenc eval (whole process; --threads $THREADS unless noted)"
printf '| shape | type | ctx | compute | load line: compute | tokens | wall s | tok/s (process) | tok/s (eval row) | GFLOP/s (process) | load s | ppl | peak RSS MiB | load avg |\n'
printf '|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n'
run_eval() {  # file shape type ctx compute tokens threads
  local file=$1 shape=$2 type=$3 ctx=$4 compute=$5 tokens=$6 threads=$7 log
  log=$(mktemp)
  /usr/bin/time -f "%e %M" -o "$log.time" "$BUILD/posenc" eval --model "$file" --tokenizer "$ROOT/data/tok512.bin" \
    --text "$ROOT/data/text/tinyshakespeare.txt" --ctx "$ctx" --methods none --tokens "$tokens" \
    --threads "$threads" --compute "$compute" > "$log" 2> "$log.err"
  local wall rss ppl row_rate load_s how fl
  read -r wall rss < "$log.time"
  ppl=$(grep -E "^\| $ctx \| none" "$log" | awk -F'|' '{gsub(/ /,"",$5); print $5}')
  row_rate=$(grep -E "tokens scored" "$log" | sed -E 's/.*: ([0-9.]+) tokens\/s.*/\1/')
  load_s=$(grep -oE "loaded in [0-9.]+ s" "$log.err" | grep -oE "[0-9.]+" | head -1)
  how=$(grep -E "^compute: " "$log.err" | sed 's/^compute: //')
  fl=$(flops_per_token "$shape" "$ctx")
  awk -v s="$shape" -v ty="$type" -v c="$ctx" -v cp="$compute" -v how="$how" -v n="$tokens" -v w="$wall" \
      -v rr="$row_rate" -v fl="$fl" -v ls="$load_s" -v ppl="$ppl" -v rss="$rss" -v la="$(load)" -v th="$threads" \
      'BEGIN { split(fl, f, " "); tps = n / w;
        printf "| %s | %s | %d | %s%s | %s | %d | %.1f | %.1f | %s | %.1f | %s | %s | %.0f | %s |\n", s, ty, c, cp,
          (th == 2 ? "" : " (" th " thread)"), how, n, w, tps, rr, tps * (f[1] + f[2]) * 1e-9, ls, ppl, rss / 1024, la }'
  rm -f "$log" "$log.time" "$log.err"
}
IFS=';' read -ra case_list <<< "$CASES"
for c in "${case_list[@]}"; do
  read -r shape type ctx <<< "$c"
  file="$MODELS/$shape-$type.gguf"
  [ -f "$file" ] || "$BUILD/posenc_write_bench_model" "$file" "$shape" "$type"
  cat "$file" > /dev/null  # in the page cache before the first timed run, as for every later one
  tokens=$TOKENS
  [ "$ctx" -gt 1024 ] && tokens=$ctx  # one window: its products and attention on all the threads
  for compute in $COMPUTES; do run_eval "$file" "$shape" "$type" "$ctx" "$compute" "$tokens" "$THREADS"; done
  if [ "$shape $type $ctx" = "tinyllama q8_0 1024" ] && [ "$THREADS" -ne 1 ]; then
    for compute in ${COMPUTES_1THREAD:-$COMPUTES}; do run_eval "$file" "$shape" "$type" "$ctx" "$compute" "$tokens" 1; done
  fi
  # Delete a file once no later case uses it.
  if [ "${KEEP:-0}" != 1 ] && ! printf '%s\n' "${case_list[@]}" | sed -n "/^$c\$/,\$p" | tail -n +2 | grep -q "^$shape $type "; then
    rm -f "$file"
  fi
done

# ---- PyTorch ----------------------------------------------------------------------------------------------------
if [ "${TORCH:-1}" = 1 ]; then
  echo "## PyTorch forward of one window, same shapes (bench/torch_prefill_baseline.py, $THREADS threads)"
  IFS=';' read -ra torch_cases <<< "${TORCH_CASES:-tinyllama 1024;7b-width-4l 1024}"
  for c in "${torch_cases[@]}"; do
    read -r shape ctx <<< "$c"
    for dt in bf16 f32; do
      fl=$(flops_per_token "$shape" "$ctx")
      line=$("$PY" "$ROOT/bench/torch_prefill_baseline.py" "$shape" "$dt" "$ctx" "$THREADS" 2 2>&1 | tail -1)
      rate=$(echo "$line" | grep -oE "[0-9.]+ tokens/s" | grep -oE "[0-9.]+" || echo 0)
      echo "$line; $(awk -v r="$rate" -v fl="$fl" 'BEGIN { split(fl, f, " "); printf "%.1f GFLOP/s", r * (f[1] + f[2]) * 1e-9 }'); load $(load)"
    done
  done
fi
echo "# load average at the end: $(load)"
