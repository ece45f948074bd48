#!/usr/bin/env bash
# One device call for the serving layer's GPU tests: the Session gtests
# (SessionStepTest, SessionBlocksTest: a slot's KV blocks saved and loaded
# give a full prefill's tokens; PagedSessionTest) and test/serve/test_serve_gpu.py (sits-serve
# through the real `openai` client: greedy completions equal sits-exec's,
# batched and chunked, and with prefix caching the same tokens and the hits
# expected).
#
# Here, before the call: bench/device/prepare.sh, bench/device/pack.sh
# (.device-pack/device.tar.xz), bench/device/prepare-serve.sh (cpp-httplib
# for the machine), and the `openai` wheels with their dependencies for the
# machine's Python (PyPI, test tools only) in .device-serve/wheels:
#   python3 -m pip download --only-binary=:all: --python-version 3.12 \
#     --platform manylinux2014_x86_64 --implementation cp \
#     -d .device-serve/wheels openai
# Call with carry [".device-pack", ".device-serve"]. $OUT gets the logs.
set -uo pipefail
NAME=serve-gpu
. bench/device/serve-env.sh
status=0
python3 -m pip install -q --no-index --no-deps --target "$W/py" "$data"/wheels/*.whl \
  >"$FINAL/pip.log" 2>&1 || { say "openai wheels did not install"; status=1; }
export PYTHONPATH=$W/py
say "$(nvidia-smi -L | head -1); $(python3 -c 'import openai; print("openai", openai.__version__)' 2>&1)"
build_tools SitsRuntimeGpuTest sits-serve || exit 1
say "built"
"$W/build/bin/SitsRuntimeGpuTest" \
  --gtest_filter='SessionBlocksTest.*:SessionStepTest.*:PagedSessionTest.*' \
  >"$FINAL/gtest.log" 2>&1 || status=1
tail -5 "$FINAL/gtest.log" | tee -a "$FINAL/serve-gpu.log"
# sitsc and sits-exec come from .device (PATH), sits-serve from the build.
SITS_REQUIRE_GPU=1 SITS_BIN_DIR=$W/build/bin python3 -m pytest -q -rs \
  --tb=short -p no:cacheprovider test/serve/test_serve_gpu.py >"$FINAL/pytest.log" 2>&1 ||
  status=1
tail -n "${SITS_PYTEST_TAIL:-8}" "$FINAL/pytest.log" | tee -a "$FINAL/serve-gpu.log"
say "done: exit $status"
exit $status
