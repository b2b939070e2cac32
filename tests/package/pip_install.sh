#!/usr/bin/env bash
# `pip install --no-build-isolation .` into a venv made with --system-site-packages, offline (--no-index), reusing
# the build tree's CMake build of the module; then the installed package (not the build tree's) computes Llama
# 3.1's inv_freq and rotates a tensor, and a rotation keeps the norm.
# Usage: pip_install.sh <python> <source dir> <cmake build dir> <work dir>
set -euo pipefail
python=$1 src=$2 build=$3 work=$4
rm -rf "$work"
"$python" -m venv --system-site-packages "$work/venv"
POSENC_CMAKE_BUILD_DIR="$build" PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$work/venv/bin/pip" install -q --no-build-isolation --no-index "$src"
cd "$work"  # away from the source tree: the import must find the installed package
env -u PYTHONPATH "$work/venv/bin/python" - "$src" "$work/venv" <<'PY'
import sys, pathlib
import numpy as np
import posenc
src, venv = sys.argv[1], pathlib.Path(sys.argv[2]).resolve()
where = pathlib.Path(posenc.__file__).resolve()
assert venv in where.parents, f"posenc imported from {where}, not from the venv {venv}"
config = posenc.RopeConfig.from_hf(src + "/examples/configs/llama3.1-8b.json")
assert config.rotary_dim == 128, config.rotary_dim
assert len(config.inv_freq) == 64 and abs(config.inv_freq[0] - 1.0) < 1e-7, config.inv_freq[0]
cos, sin = posenc.cos_sin(config, np.arange(4)[None])
q = np.ones((1, 2, 4, 128), dtype=np.float32)
k = np.ones((1, 1, 4, 128), dtype=np.float32)
posenc.apply_rope(q, k, cos, sin)
norms = np.linalg.norm(q, axis=-1)
assert np.allclose(norms, np.sqrt(128), rtol=1e-6), norms
print("pip-installed posenc from", where.parent, "ok")
PY
