#!/usr/bin/env bash
# From a fresh Debian 12 machine: install the dependencies, build sits, and
# compile the bundled example model, printing the optimized program.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh
examples/compile-example.sh
