#!/usr/bin/env bash
# Builds sits and runs the whole test suite (lit + unit tests) through ctest.
# GPU tests skip cleanly where no GPU is present. Then the reliability checks
# (docs/reliability.md): the CUDA-free libraries' tests under ASan and UBSan
# (scripts/sanitize.sh) and a short run of each runtime fuzz target
# (scripts/fuzz.sh, SITS_FUZZ_SECONDS each, default 30). SITS_SKIP_RELIABILITY=1
# leaves those out for a quick local run; CI runs them.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"

if [ "${SITS_SKIP_RELIABILITY:-0}" != 1 ]; then
  scripts/sanitize.sh
  scripts/fuzz.sh runtime "${SITS_FUZZ_SECONDS:-30}"
fi
