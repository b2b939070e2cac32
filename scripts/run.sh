#!/usr/bin/env bash
# The README's main command: build posenc, then run the main job — a real pretrained model (stories260K,
# trained at 512 tokens) evaluated past its training length with every RoPE extension method, on the
# bundled text. Extra arguments go to `posenc eval` (e.g. --ctx 512,1024 --methods none,yarn --plot out.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >&2
exec build/posenc eval "$@"
