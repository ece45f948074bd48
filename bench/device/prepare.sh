#!/usr/bin/env bash
# Here (no GPU), before a device call of bench/device/: builds sits with
# scripts/build.sh and puts the static tools, stripped, in .device/ (sitsc
# and sits-exec: about 30 MB, which with the 25 MB checkout stays under the
# 64 MiB the device tool carries), which git then ignores. Call the device
# script with carry [".device"].
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/build.sh >/dev/null
mkdir -p .device .git/info
strip -o .device/sitsc build/bin/sitsc
strip -o .device/sits-exec build/bin/sits-exec
grep -qsx '/.device/' .git/info/exclude || echo /.device/ >>.git/info/exclude
du -sh .device
