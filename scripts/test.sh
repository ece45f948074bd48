#!/usr/bin/env bash
# Builds sits and runs the whole test suite (lit + unit tests) through ctest.
# GPU tests skip cleanly where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
