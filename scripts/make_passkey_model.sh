#!/usr/bin/env bash
# Makes the bundled passkey retrieval model, data/passkey/passkey256.bin (and its training report .json):
# a llama2.c-format RoPE model (theta 10000, head_dim 32) trained from scratch by `posenc train` at a training
# length of 256 tokens on 20,000 passkey prompts with their answers from `posenc passkey --write-training-text`,
# under the bundled tok512 tokenizer. About 9 minutes on 2 cores (AMD EPYC, AVX2). Training is deterministic for
# one SIMD target and thread count; another CPU gives a model of the same quality, not the same bits.
# Usage: bash scripts/make_passkey_model.sh [build dir, default build] [output dir, default data/passkey]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-data/passkey}
posenc="$build/posenc"
[ -x "$posenc" ] || { echo "error: $posenc not found: build posenc first (bash scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
"$posenc" passkey --model data/stories260K.bin --tokenizer data/tok512.bin --write-training-text "$work/train.txt" \
  --documents 20000 --max-tokens 256 --seed 7
"$posenc" train --config examples/configs/train/passkey256.json --tokenizer data/tok512.bin --text "$work/train.txt" \
  --ctx 256 --steps 3000 --batch 16 --lr 3e-3 --seed 1 --quiet --out "$work/passkey256.bin"
cp "$work/passkey256.bin" "$work/passkey256.bin.json" "$out/"
# The check the model is bundled for: retrieval at its training length.
"$posenc" passkey --model "$out/passkey256.bin" --tokenizer data/tok512.bin --lengths 256 --trials 20 --methods none
