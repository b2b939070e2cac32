#!/usr/bin/env bash
# The training measurements of docs/training.md: (1) fine-tuning stories260K (trained at 512) at L = 2048 with
# linear, ntk, yarn and dynamic, held-out perplexity at 512, 1024, 2048 after 0, 25, 100, 400 steps; (2) train
# short, test long: stories260K-shaped models trained from scratch at L = 256 with rope, sinusoidal, learned
# (256 and 2048 rows) and none, evaluated at 256, 512, 1024, 2048. Results (reports, JSON) go to
# bench/results/training/; bench/train_tables.py turns them into the tables and plots.
# Usage: bash bench/train_measurements.sh [finetune|scratch|all]   (from the source root, after building)
set -euo pipefail
POSENC=${POSENC:-build/posenc}
OUT=bench/results/training
mkdir -p "$OUT"
what=${1:-all}
# Sizes as recorded in docs/training.md (batch 1 for fine-tuning and batch 4 from scratch: scaled down from 8 for
# a shared 2-core machine; the docs say why). FT_STEPS=100 FT_EVAL_AT=0,25,100 gives a quicker partial run.
FT_STEPS=${FT_STEPS:-400}
FT_EVAL_AT=${FT_EVAL_AT:-0,25,100,400}
SC_STEPS=${SC_STEPS:-300}
SC_BATCH=${SC_BATCH:-4}
# One thread per run, runs side by side: on a machine shared with other jobs this wastes no time in barriers.
if [[ $what == finetune || $what == all ]]; then
  for m in linear ntk yarn dynamic; do
    OMP_NUM_THREADS=1 nice -n 10 "$POSENC" finetune --method "$m" --factor 4 --ctx 2048 --batch 1 --steps "$FT_STEPS" \
      --lr 1e-4 --warmup 10 --eval-ctx 512,1024,2048 --eval-at "$FT_EVAL_AT" --eval-tokens 8192 --quiet \
      --out "$OUT/finetune_$m.bin" > "$OUT/finetune_$m.txt" &
  done
  wait
fi
if [[ $what == scratch || $what == all ]]; then
  for pe in rope sinusoidal learned learned2048 none; do
    OMP_NUM_THREADS=1 nice -n 10 "$POSENC" train --config "examples/configs/train/stories260K_$pe.json" --ctx 256 \
      --batch "$SC_BATCH" --steps "$SC_STEPS" --lr 2e-3 --warmup 20 --eval-ctx 256,512,1024,2048 --eval-tokens 8192 \
      --quiet --out "$OUT/scratch_$pe.gguf" > "$OUT/scratch_$pe.txt" &
  done
  wait
fi
