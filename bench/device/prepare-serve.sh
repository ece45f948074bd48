#!/usr/bin/env bash
# Here, before bench/device/serve.sh: the GPU machines have no cpp-httplib,
# so Debian's (the header, the shared library and the brotli libraries it
# links, about 1 MB) goes to .device-serve/httplib with a pkg-config file
# that points there; and the llama_gqa test model is compiled here (fp32,
# with the Llama-3-shaped test tokenizer and chat template) into
# .device-serve/gqa.sits. Call the device with carry
# [".device/deps", ".device-serve"].
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.device-serve
rm -rf "$out"
mkdir -p "$out/httplib/include" "$out/httplib/lib/pkgconfig" "$out/tok"
cp /usr/include/httplib.h "$out/httplib/include/"
# The header includes OpenSSL's, zlib's and brotli's (Debian built the
# library with them).
cp -r /usr/include/openssl /usr/include/brotli /usr/include/zlib.h \
  /usr/include/zconf.h "$out/httplib/include/"
cp /usr/include/x86_64-linux-gnu/openssl/*.h "$out/httplib/include/openssl/"
lib=/usr/lib/x86_64-linux-gnu
cp -L "$lib"/libcpp-httplib.so* "$lib"/libbrotli{common,dec,enc}.so.1* \
  "$out/httplib/lib/"
# Debian's flags, without Requires.private: the machine's OpenSSL, zlib and
# brotli libraries are linked through the library, not by the tools.
cat >"$out/httplib/lib/pkgconfig/cpp-httplib.pc" <<'PC'
prefix=${pcfiledir}/../..
Name: cpp-httplib
Description: cpp-httplib from Debian, carried to the GPU machine
Version: 0.11.4
Libs: -L${prefix}/lib -lcpp-httplib -Wl,-rpath-link,${prefix}/lib -l:libssl.so.3 -l:libcrypto.so.3 -l:libz.so.1 -pthread
Cflags: -I${prefix}/include -DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT -DCPPHTTPLIB_BROTLI_SUPPORT
PC
cp test/runtime/tokenizer/Inputs/llama3-512.json "$out/tok/tokenizer.json"
python3 -c "import json, sys; json.dump({'bos_token': '<|begin_of_text|>', 'eos_token': '<|eot_id|>', 'chat_template': open(sys.argv[1]).read()}, open(sys.argv[2], 'w'))" \
  test/runtime/chat/Inputs/templates/llama3.jinja "$out/tok/tokenizer_config.json"
build/bin/sitsc test/models/llama_gqa/model.onnx --tokenizer="$out/tok" \
  --dtype=fp32 --max-seq-len=128 --max-batch=4 -o "$out/gqa.sits" >/dev/null
grep -qsx '/.device-serve/' .git/info/exclude || echo /.device-serve/ >>.git/info/exclude
du -sh "$out"
