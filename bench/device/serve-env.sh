# Sourced by the serving device scripts (serve-gpu-tests.sh, serve-bench.sh)
# with NAME set: $FINAL and $W (work folder) made, say() logging to
# $FINAL/$NAME.log, the tools of .device-pack unpacked onto PATH, and the
# cpp-httplib of .device-serve found by pkg-config and the loader.
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/$NAME
data=$(pwd)/.device-serve
mkdir -p "$FINAL" "$W"
say() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$FINAL/$NAME.log"; }
tar -xJf .device-pack/device.tar.xz
export PATH="$(pwd)/.device:$PATH"
export PKG_CONFIG_PATH=$data/httplib/lib/pkgconfig
export LD_LIBRARY_PATH=$data/httplib/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
