#!/usr/bin/env bash
# Here (no GPU), before a device call of bench/device/: builds sits with
# scripts/build.sh and puts the static tools, stripped, in .device/ (sitsc
# and sits-exec: about 30 MB, which with the 25 MB checkout stays under the
# 64 MiB the device tool carries), which git then ignores. Call the device
# script with carry [".device"].
#
# The GPU machines lack the text libraries' development files, so their
# headers and static archives go to .device/deps (about 2 MB, found there
# through CMAKE_PREFIX_PATH by test/runtime/run-gpu-tests.sh): PCRE2,
# utf8proc and nlohmann-json, all from Debian (scripts/install-deps.sh).
# They also lack LLVM, so the lit tests of test/runtime/ run there with lit
# and the Python port of FileCheck (`filecheck`), whose wheels (about 140 KB,
# from PyPI, test tools only) go to .device/wheels.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/build.sh >/dev/null
mkdir -p .device .git/info
strip -o .device/sitsc build/bin/sitsc
strip -o .device/sits-exec build/bin/sits-exec
rm -rf .device/deps
mkdir -p .device/deps/include .device/deps/lib
cp /usr/include/pcre2.h /usr/include/utf8proc.h .device/deps/include/
cp -r /usr/include/nlohmann .device/deps/include/
cp "$(gcc -print-file-name=libpcre2-8.a)" "$(gcc -print-file-name=libutf8proc.a)" \
  .device/deps/lib/
rm -rf .device/wheels
mkdir -p .device/wheels
# lit 23 refuses the external shell test/lit.cfg.py uses; LLVM 22 ships 22.
python3 -m pip download -q --no-deps -d .device/wheels 'lit<23' filecheck ||
  echo "prepare: no lit/filecheck wheels (no internet?): lit tests will not run there"
grep -qsx '/.device/' .git/info/exclude || echo /.device/ >>.git/info/exclude
du -sh .device
