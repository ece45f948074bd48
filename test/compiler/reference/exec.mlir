// sits-exec reads .npy inputs, writes result_<i>.npy, and writes a KV-cache
// result as its keys, values and lengths.
// REQUIRES: python-onnx
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/ids.npy', np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)); np.save('%t/k.npy', np.arange(12, dtype=np.float32).reshape(2, 1, 3, 2) / 8)"
// RUN: sits-exec %s --function prefill --input %t/ids.npy --input %t/k.npy --output-dir %t/out
// RUN: %python -c "import numpy as np; d = '%t/out/'; k = np.load('%t/k.npy'); ks = np.load(d + 'result_1.keys.npy'); print(np.load(d + 'result_0.npy').tolist(), np.load(d + 'result_1.lengths.npy').tolist(), ks.shape, (ks[0, :, :, :3] == k).all(), np.isnan(ks[0, :, :, 3:]).all(), np.load(d + 'result_1.values.npy').dtype)" | FileCheck %s

// The positions of the three tokens, the lengths after the step, and the
// cache: rows 0..2 hold the keys, row 3 holds no token (NaN).
// CHECK: {{\[\[}}0, 1, 2], [0, 1, 2]] [3, 3] (1, 2, 1, 4, 2) True True float32

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 4, head_dim = 2, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @prefill(%ids: tensor<?x?xi64>, %k: tensor<?x1x?x2xf32>, %cache: !kv) -> (tensor<?x?xi64>, !kv) {
  %past = sits.kv_cache.length %cache : !kv -> tensor<?xi64>
  %pos = sits.position_ids %ids past %past : tensor<?xi64> : tensor<?x?xi64> -> tensor<?x?xi64>
  %c1 = sits.kv_cache.append %cache[0], %k, %k at %past : !kv, tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>, tensor<?xi64>
  %c2 = sits.kv_cache.advance %c1 by %ids : !kv, tensor<?x?xi64>
  return %pos, %c2 : tensor<?x?xi64>, !kv
}
