#!/usr/bin/env bash
# Installs the Debian 12 packages posenc needs, when any is missing. Runs apt-get as root (or through sudo). Safe
# to run again: it does nothing when all are present.
#   bash scripts/install-deps.sh             everything: build, tests (C++, Python, MPI), sanitizers, fuzzing, plots
#   bash scripts/install-deps.sh --minimal   only what building the `posenc` CLI needs (scripts/run.sh)
#   bash scripts/install-deps.sh --minimal --plot   the same and gnuplot, for `posenc eval --plot`
set -euo pipefail
# The `posenc` CLI: compiler, CMake + Ninja, and the libraries posenc_lib and the CLI link.
MINIMAL=(cmake ninja-build g++ pkg-config libhwy-dev libopenblas-dev libdnnl-dev nlohmann-json3-dev libcli11-dev
         libfmt-dev
         libpcre2-dev libsentencepiece-dev libutf8proc-dev)     # tokenizers: regexes, tokenizer.model, NFC
PLOT=(gnuplot-nox)                                               # --plot of eval, demo, train
FULL=("${MINIMAL[@]}" "${PLOT[@]}"
      libgtest-dev libgmock-dev libbenchmark-dev python3-numpy   # tests, benchmarks, the numpy oracles
      libomp-dev clang libclang-rt-14-dev                        # sanitizer and libFuzzer builds (clang's OpenMP)
      python3-dev pybind11-dev python3-pybind11 python3-pytest python3-torch   # the Python package and its tests
      python3-setuptools python3-wheel python3-venv              # its pip install test (package.pip_install)
      openmpi-bin libopenmpi-dev)                                # distributed eval (optional at build time)
PKGS=("${FULL[@]}")
if [ "${1:-}" = "--minimal" ]; then
  PKGS=("${MINIMAL[@]}")
  if [ "${2:-}" = "--plot" ]; then PKGS+=("${PLOT[@]}"); fi
elif [ $# -gt 0 ]; then
  echo "usage: bash scripts/install-deps.sh [--minimal [--plot]]" >&2
  exit 2
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
