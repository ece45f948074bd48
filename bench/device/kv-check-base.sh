set -uo pipefail
W=/tmp/kvb; mkdir -p $W
tar -xJf .device-pack/device.tar.xz
xz -dc .device-pack/sitsc-base.xz > $W/sitsc-base && chmod +x $W/sitsc-base
export PATH="$(pwd)/.device:$PATH"
cmake -G Ninja -S . -B $W/rt -DCMAKE_BUILD_TYPE=Release -DSITS_BUILD_COMPILER=OFF -DSITS_BUILD_TESTS=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$(pwd)/.device/deps > $OUT/build.log 2>&1 && cmake --build $W/rt --target sits-score -j 16 >> $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 1; }
for side in base new; do
  s=$W/sitsc-base; [ $side = new ] && s=$(pwd)/.device/sitsc
  echo "== $side"
  python3 test/gpu/check_kv_quant.py --sitsc $s --exec .device/sits-exec --runner $W/rt/bin/sits-score --target sm_90a --configs int8:per-token,int8:per-channel,int4:per-channel --dtypes fp32 --work $W/$side .device/models/llama_bytes 2>&1 | tail -5
done
