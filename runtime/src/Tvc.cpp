//===- Tvc.cpp - The TVC LM head's requests -------------------------------===//

#include "src/Tvc.h"

#include "sits/Json.h"
#include "sits/Runtime.h"

namespace sits::runtime {

uint32_t tvcExactTop(const std::string &metadataJson) {
  json::Value root;
  std::string error;
  if (!json::parse(metadataJson, &root, &error))
    return 0;
  const json::Value *tvc = root.find("tvc");
  const json::Value *top =
      tvc && tvc->isObject() ? tvc->find("exact_top") : nullptr;
  if (!top)
    return 0;
  double value = top->getNumber();
  return value >= 1 && value < 4294967296.0 ? static_cast<uint32_t>(value) : 0;
}

void checkTvcSampling(uint32_t exactTop, float temperature, uint32_t topK) {
  if (!exactTop || temperature == 0 || topK == 1 ||
      (topK >= 1 && topK <= exactTop))
    return;
  throw Error(ErrorCode::InvalidArgument,
              "this engine's LM head is a TVC head (sitsc --tvc=exact) that "
              "gives exact logits for greedy decoding and top-k sampling with "
              "k <= " +
                  std::to_string(exactTop) + " only; " +
                  (topK ? "top-k " + std::to_string(topK)
                        : std::string("sampling without top-k")) +
                  " needs every logit: use --top-k 1.." +
                  std::to_string(exactTop) +
                  ", or an engine compiled without --tvc (or with "
                  "--tvc-top-k)");
}

} // namespace sits::runtime
