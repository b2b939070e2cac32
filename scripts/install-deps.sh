#!/usr/bin/env bash
# Installs the Debian 12 packages posenc needs to build, test and plot, when any is missing.
# Runs apt-get as root (or through sudo). Safe to run again: it does nothing when all are present.
set -euo pipefail
PKGS=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev
      libopenblas-dev libdnnl-dev nlohmann-json3-dev libcli11-dev libfmt-dev libomp-dev gnuplot-nox python3-numpy
      libpcre2-dev libsentencepiece-dev                      # tokenizers: pre-tokenizer regexes, tokenizer.model
      clang libclang-rt-14-dev                                # sanitizer and libFuzzer builds
      python3-dev pybind11-dev python3-pybind11 python3-pytest python3-torch   # the Python package and its tests
      openmpi-bin libopenmpi-dev)                             # distributed eval (optional at build time)
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
