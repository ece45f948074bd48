//===- TvcPlan.cpp - sits.tvc_lm_head as GPU launches ---------------------===//
//
// The TVC LM head becomes the eight launches of kernels/tvc.cuh (see there
// for what each does). The last-but-one is the plain LM head's own launch
// (planLinear), wrapped so that it skips the proved sequences; the exact
// logits of the candidates use that launch's config, so they are summed
// exactly as the plain head sums them and tokens do not change.
//
// The IR's bounds hold for the f32 weights. The engine stores the head in
// --dtype and the tensor-core head rounds its input to that type, so the
// bounds are recomputed for the stored rows w' (rho' = rho + |w' - w|,
// sigma' = sigma + |T|_2 |w' - w|, omega' = |w'|, all rounded up) and the
// preview reads the rounded input; the rounding term of the exact logits
// uses u = 2^-21 rather than 2^-24 (tensor cores truncate while they add).
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/LaunchBuilder.h"
#include "backends/cuda/ProgramPlanner.h"
#include "backends/cuda/TvcBounds.h"
#include "compiler/reference/Tensor.h"

#include <cmath>
#include <cstdio>

namespace sits::codegen::detail {

using format::DType;
using format::Expr;

namespace {

constexpr int64_t kThreads = 256; ///< tvc.cuh's kTvcThreads
constexpr int64_t kWarps = kThreads / 32;
constexpr int64_t kSelectThreads = 1024;
constexpr int64_t kMaxSelect = 16384;    ///< 12 bytes each in shared memory
constexpr int64_t kResidualColumns = 32; ///< inputs per tvcResidual block

/// tvc.cuh's tvcAligned, tvcPreviewSharedBytes and tvcSelectSharedBytes.
constexpr uint64_t aligned16(int64_t bytes) { return (bytes + 15) / 16 * 16; }
uint64_t previewSharedBytes(int64_t batch, int64_t chunk, int64_t rank) {
  return aligned16(8 * batch * chunk) + aligned16(4 * 256 * batch) +
         aligned16(24 * batch) + aligned16(32 * batch) + aligned16(4 * batch) +
         aligned16(4 * (kWarps + 2)) + aligned16(4 * batch * rank);
}
uint64_t selectSharedBytes(int64_t kept) {
  return aligned16(8 * kept) + aligned16(4 * kept) + aligned16(4 * 256) +
         aligned16(24) + aligned16(4 * (32 + 2)) + aligned16(8 * 32);
}
constexpr double kSlack = 1.0 + 0x1p-30;

/// `g(n)` for unit roundoff `u`.
double gamma(int64_t n, double u) {
  double nu = static_cast<double>(n) * u;
  return nu / (1.0 - nu);
}

int64_t powerOfTwoAtLeast(int64_t value) {
  int64_t p = 1;
  while (p < value)
    p *= 2;
  return p;
}

/// Rounds a non-negative double up to an f32.
float roundUp(double value) {
  float f = static_cast<float>(value);
  if (static_cast<double>(f) < value)
    f = std::nextafter(f, INFINITY);
  return f;
}

float storedValue(float value, DType type) {
  if (type == DType::F16)
    return format::halfToFloat(format::floatToHalf(value));
  if (type == DType::BF16)
    return format::bfloat16ToFloat(format::floatToBFloat16(value));
  return value;
}

std::string hexDouble(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", value);
  return text;
}

ArgBinding weightArg(unsigned index) {
  return ArgBinding::bufferArg(BufferKind::Weight, index);
}

/// Layout of the scratch buffer: byte offsets of regions of
/// `maxBatch x perSequence` elements, 256-byte aligned.
struct ScratchLayout {
  uint64_t bytes = 0;
  uint64_t add(int64_t maxBatch, int64_t perSequence, int64_t elementBytes) {
    uint64_t offset = bytes;
    bytes +=
        (static_cast<uint64_t>(maxBatch * perSequence * elementBytes) + 255) /
        256 * 256;
    return offset;
  }
};

} // namespace

} // namespace sits::codegen::detail

std::vector<float> sits::codegen::storedTvcBounds(llvm::ArrayRef<float> wv,
                                                  llvm::ArrayRef<float> tv,
                                                  llvm::ArrayRef<float> bv,
                                                  format::DType type,
                                                  int64_t vocab, int64_t hidden,
                                                  int64_t rank) {
  using namespace detail;
  // |T|_2: Gershgorin on T T^T when affordable, else |T|_F.
  double tNorm = 0;
  if (static_cast<double>(rank) * rank * hidden <= 4e9) {
    std::vector<double> gram(rank * rank);
    for (int64_t i = 0; i < rank; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < hidden; ++k)
          sum += double(tv[i * hidden + k]) * double(tv[j * hidden + k]);
        gram[i * rank + j] = gram[j * rank + i] = sum;
      }
    // Each computed entry is within g |T_i| |T_j| of the exact one (f64
    // sums of exact products, g = 2 H 2^-53): add that to every row sum.
    const double g = 2.0 * double(hidden) * 0x1p-53;
    std::vector<double> rowNorm(rank);
    double norms = 0;
    for (int64_t i = 0; i < rank; ++i) {
      rowNorm[i] = std::sqrt(gram[i * rank + i] * (1 + g)) * kSlack;
      norms += rowNorm[i];
    }
    double worst = 0;
    for (int64_t i = 0; i < rank; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < rank; ++j)
        sum += std::fabs(gram[i * rank + j]);
      worst = std::max(worst, sum + g * rowNorm[i] * norms * kSlack);
    }
    tNorm = std::sqrt(worst * kSlack) * kSlack;
  } else {
    double sum = 0;
    for (float value : tv)
      sum += double(value) * double(value);
    tNorm = std::sqrt(sum) * kSlack * kSlack;
  }
  std::vector<float> out(vocab * 4);
  for (int64_t v = 0; v < vocab; ++v) {
    double diff = 0, stored = 0;
    for (int64_t k = 0; k < hidden; ++k) {
      double x = wv[v * hidden + k], y = storedValue(wv[v * hidden + k], type);
      diff += (y - x) * (y - x);
      stored += y * y;
    }
    diff = std::sqrt(diff) * kSlack;
    const float *in = &bv[v * 4];
    out[v * 4 + 0] = roundUp((double(in[0]) + diff) * kSlack);
    out[v * 4 + 1] = roundUp((double(in[1]) + tNorm * diff) * kSlack);
    out[v * 4 + 2] = in[2];
    out[v * 4 + 3] = roundUp(std::sqrt(stored) * kSlack * kSlack);
  }
  return out;
}

namespace sits::codegen::detail {

/// storedTvcBounds of the op's constants, as an attribute (null when they
/// cannot be read).
static ElementsAttr storedBounds(MLIRContext *context, ElementsAttr weight,
                                 ElementsAttr right, ElementsAttr bounds,
                                 DType type, int64_t vocab, int64_t hidden,
                                 int64_t rank) {
  auto w = reference::Tensor::fromAttribute(weight);
  auto t = reference::Tensor::fromAttribute(right);
  auto b = reference::Tensor::fromAttribute(bounds);
  if (!w || !t || !b) {
    llvm::consumeError(w.takeError());
    llvm::consumeError(t.takeError());
    llvm::consumeError(b.takeError());
    return {};
  }
  std::vector<float> out = storedTvcBounds(
      w->floats(), t->floats(), b->floats(), type, vocab, hidden, rank);
  auto attrType = RankedTensorType::get({vocab, 4}, Float32Type::get(context));
  return DenseElementsAttr::get(attrType, llvm::ArrayRef<float>(out));
}

LogicalResult ProgramPlanner::planTVCHead(TVCLMHeadOp head) {
  if (logits)
    return head.emitError() << "codegen: a step has one LM head";
  if (!head.getResult().hasOneUse() ||
      !isa<func::ReturnOp>(*head.getResult().getUsers().begin()))
    return head.emitError()
           << "codegen: the LM head's logits must be returned and used by "
              "nothing else (the engine computes only each sequence's last "
              "token)";
  auto weightOp = head.getWeight().getDefiningOp<WeightOp>();
  auto leftOp = head.getPreviewLeft().getDefiningOp<WeightOp>();
  auto rightOp = head.getPreviewRight().getDefiningOp<WeightOp>();
  auto boundsOp = head.getRowBounds().getDefiningOp<WeightOp>();
  if (!weightOp)
    return head.emitError()
           << "codegen: the TVC head's weight must be a sits.weight (a TVC "
              "head over a quantized LM head has no GPU kernel yet)";
  if (!leftOp || !rightOp || !boundsOp)
    return head.emitError() << "codegen: the TVC head's factors and bounds "
                               "must be sits.weight constants";
  auto inputType = dyn_cast<RankedTensorType>(head.getInput().getType());
  if (!inputType || inputType.getRank() != 3)
    return head.emitError() << "codegen: the LM head's input must be "
                               "[batch, seq, hidden]";
  auto weightType = cast<ShapedType>(head.getWeight().getType());
  auto leftType = cast<ShapedType>(head.getPreviewLeft().getType());
  if (weightType.getRank() != 2 || leftType.getRank() != 2)
    return head.emitError() << "codegen: the TVC head's weights must be 2-D";
  const int64_t vocab = weightType.getDimSize(0),
                hidden = weightType.getDimSize(1),
                rank = leftType.getDimSize(1);
  const int64_t candidates = head.getCandidates(),
                exactTop = head.getExactTop();
  const int64_t batch = observed.config.maxBatch;

  // The plain head, as planLMHead plans it.
  LinearLaunch desc;
  desc.decode = true;
  desc.gatherLast = true;
  desc.weightType = options.weightType;
  desc.tensorCores = hasTensorCores();
  FailureOr<int64_t> k = tokenWidth(head.getInput(), head);
  FailureOr<ArgBinding> input = use(head.getInput(), head);
  if (failed(k) || failed(input))
    return failure();
  desc.k = *k;
  desc.input = *input;
  FailureOr<LinearSegment> segment =
      linearSegment(head, head.getWeight(), Value(), desc);
  if (failed(segment))
    return failure();
  segment->out = ArgBinding::bufferArg(BufferKind::Logits);
  desc.segments.push_back(*segment);
  if (failed(takeLinearKernel(head, desc)))
    return failure();
  PlannedLaunch plain = planLinear(desc);
  const bool tensorCore =
      plain.spec.call.find("gemvTensorCore") != std::string::npos;

  FailureOr<unsigned> left =
      weightOf(head.getPreviewLeft(), head, DType::F32, {vocab, rank});
  FailureOr<unsigned> right =
      weightOf(head.getPreviewRight(), head, DType::F32, {rank, hidden});
  if (failed(left) || failed(right))
    return failure();
  unsigned bounds = 0;
  if (options.weightType == DType::F32) {
    FailureOr<unsigned> given =
        weightOf(head.getRowBounds(), head, DType::F32, {vocab, 4});
    if (failed(given))
      return failure();
    bounds = *given;
  } else {
    bool broken = false;
    bounds = weights.bindComputed(
        (boundsOp.getName() + "." + format::dtypeName(options.weightType))
            .str(),
        DType::F32, [&]() -> ElementsAttr {
          ElementsAttr attr = storedBounds(
              head.getContext(), weightOp.getValue(), rightOp.getValue(),
              boundsOp.getValue(), options.weightType, vocab, hidden, rank);
          if (!attr) {
            broken = true;
            return boundsOp.getValue();
          }
          return attr;
        });
    if (broken)
      return head.emitError() << "codegen: cannot read the TVC head's weights";
  }

  // Preview chunks (a block each): the smallest that lets the union of the
  // chunks' kept rows fit in the selection's shared memory, from 1024 rows
  // (for a 128K vocabulary about one block per SM; 128 rows for small
  // vocabularies, where the committed test models then exercise the merge
  // of several chunks).
  int64_t chunk = 0, keep = 0, chunks = 0;
  uint64_t previewShared = 0, selectShared = 0;
  for (int64_t c = std::min<int64_t>(vocab >= 8192 ? 1024 : 128,
                                     powerOfTwoAtLeast(vocab));
       c <= 8192; c *= 2) {
    int64_t kp = std::min(candidates + 1, c);
    int64_t n = (vocab + c - 1) / c;
    uint64_t shared = previewSharedBytes(batch, c, rank);
    uint64_t select = selectSharedBytes(n * kp);
    if (n * kp <= kMaxSelect && shared <= uint64_t(kMaxSharedBytes) &&
        select <= uint64_t(kMaxSharedBytes)) {
      chunk = c, keep = kp, chunks = n, previewShared = shared;
      selectShared = select;
      break;
    }
    if (c >= vocab)
      break;
  }
  if (!chunk)
    return head.emitError()
           << "codegen: the TVC head's GPU candidate selection does not fit "
              "in shared memory (candidates "
           << candidates << ", vocabulary " << vocab << ", rank " << rank
           << ", max batch " << batch
           << "); use fewer --tvc-candidates, a smaller rank or --max-batch";
  const int64_t residualBlocks =
      (hidden + kResidualColumns - 1) / kResidualColumns;
  if (rank * 4 > 32 * 1024)
    return head.emitError()
           << "codegen: the TVC head's rank " << rank
           << " is too large for the GPU kernels (at most " << 8192 << ")";

  ScratchLayout layout;
  uint64_t offZ = layout.add(batch, rank, 4);
  uint64_t offA = layout.add(batch, rank, 8);
  uint64_t offNorms = layout.add(batch, 2 * residualBlocks, 8);
  uint64_t offKeys = layout.add(batch, chunks * keep, 8);
  uint64_t offRows = layout.add(batch, chunks * keep, 4);
  uint64_t offNaN = layout.add(batch, chunks, 4);
  uint64_t offCandidates = layout.add(batch, candidates, 4);
  uint64_t offNext = layout.add(batch, 1, 8);
  uint64_t offExact = layout.add(batch, candidates, 4);
  uint64_t offFlags = layout.add(batch, 2, 4);

  const bool roundInput = tensorCore;
  std::vector<std::string> tvcConfig = {
      "static constexpr int kVocab = " + std::to_string(vocab) + ";",
      "static constexpr int kRank = " + std::to_string(rank) + ";",
      "static constexpr int kCandidates = " + std::to_string(candidates) + ";",
      "static constexpr int kExactTop = " + std::to_string(exactTop) + ";",
      "static constexpr int kMaxBatch = " + std::to_string(batch) + ";",
      "static constexpr int kChunk = " + std::to_string(chunk) + ";",
      "static constexpr int kChunks = " + std::to_string(chunks) + ";",
      "static constexpr int kKeep = " + std::to_string(keep) + ";",
      "static constexpr int kResidualBlocks = " +
          std::to_string(residualBlocks) + ";",
      std::string("static constexpr bool kRoundInput = ") +
          (roundInput ? "true;" : "false;"),
      std::string("static constexpr bool kTensorCore = ") +
          (tensorCore ? "true;" : "false;"),
      "static constexpr double kGammaH = " + hexDouble(gamma(hidden, 0x1p-24)) +
          "; // g(H), u = 2^-24",
      "static constexpr double kGammaRank = " +
          hexDouble(gamma(rank, 0x1p-24)) + "; // g(R)",
      "static constexpr double kGammaDot = " +
          hexDouble(gamma(hidden, 0x1p-21)) + "; // exact logits, u = 2^-21",
      "static constexpr double kSqrtHidden = " +
          hexDouble(std::sqrt(double(hidden)) * kSlack) + ";",
  };
  // tau = max |T_rk| (exact in f64).
  {
    auto t = reference::Tensor::fromAttribute(rightOp.getValue());
    if (!t) {
      llvm::consumeError(t.takeError());
      return head.emitError() << "codegen: cannot read the TVC factors";
    }
    double tau = 0;
    for (float value : t->floats())
      tau = std::max(tau, std::fabs(double(value)));
    tvcConfig.push_back("static constexpr double kTau = " + hexDouble(tau) +
                        ";");
  }
  auto offsets = [&](std::vector<std::string> &config) {
    for (auto [name, value] : {std::pair<const char *, uint64_t>{"kOffZ", offZ},
                               {"kOffA", offA},
                               {"kOffNorms", offNorms},
                               {"kOffKeys", offKeys},
                               {"kOffRows", offRows},
                               {"kOffNaN", offNaN},
                               {"kOffCandidates", offCandidates},
                               {"kOffNext", offNext},
                               {"kOffExact", offExact},
                               {"kOffFlags", offFlags}})
      config.push_back(std::string("static constexpr long ") + name + " = " +
                       std::to_string(value) + ";");
  };
  // Kernels of the TVC family alone: their constants, with kK (hidden) and
  // the weight type as gemv names them.
  auto ownConfig = [&]() {
    std::vector<std::string> config = plain.spec.config;
    config.insert(config.end(), tvcConfig.begin(), tvcConfig.end());
    offsets(config);
    return config;
  };
  ArgBinding scratchArg = ArgBinding::bufferArg(BufferKind::TvcScratch);
  ArgBinding countersArg = ArgBinding::bufferArg(BufferKind::TvcCounters);
  ArgBinding stepArg = ArgBinding::bufferArg(BufferKind::StepLengths);
  std::string weightPtr = options.weightType == DType::F32
                              ? "const float *"
                              : "const unsigned short *";

  auto add = [&](LaunchBuilder &b, const std::string &call) {
    b.setConfig(ownConfig());
    b.call(call);
    addLaunch(b.take(), {head});
  };

  {
    LaunchBuilder b("tvc_project", "sits/tvc.cuh", kThreads);
    b.param("const float *", "x", *input);
    b.param("const float *", "right", weightArg(*right));
    b.param("void *", "scratch", scratchArg);
    const std::string steps = addStepRows(b);
    // Two rank rows a block (tvc.cuh: kTvcProjectSplit warps each).
    b.setGrid(Expr::constant((rank + 1) / 2), Expr::batch());
    add(b, "sits::tvcProject<Cfg>(x, right, scratch, " + steps + ")");
  }
  {
    LaunchBuilder b("tvc_residual", "sits/tvc.cuh", kThreads);
    b.param("const float *", "x", *input);
    b.param("const float *", "right", weightArg(*right));
    b.param("void *", "scratch", scratchArg);
    const std::string steps = addStepRows(b);
    b.setGrid(Expr::constant(residualBlocks), Expr::batch());
    add(b, "sits::tvcResidual<Cfg>(x, right, scratch, " + steps + ")");
  }
  {
    LaunchBuilder b("tvc_preview", "sits/tvc.cuh", kThreads);
    b.param("const float *", "left", weightArg(*left));
    b.param("const float *", "bounds", weightArg(bounds));
    b.param("void *", "scratch", scratchArg);
    b.param("int", "tokens", ArgBinding::int32(Expr::batch()));
    b.param("const int *", "step_lengths", stepArg);
    b.setGrid(Expr::constant(chunks));
    b.setShared(previewShared);
    add(b, "sits::tvcPreview<Cfg>(left, bounds, scratch, tokens, "
           "step_lengths)");
  }
  {
    LaunchBuilder b("tvc_select", "sits/tvc.cuh", kSelectThreads);
    b.param("void *", "scratch", scratchArg);
    b.param("const int *", "step_lengths", stepArg);
    b.setGrid(Expr::batch());
    b.setShared(selectShared);
    add(b, "sits::tvcSelect<Cfg>(scratch, step_lengths)");
  }
  {
    const int threads = tensorCore ? 256 : 128;
    LaunchBuilder b("tvc_exact", "sits/tvc.cuh", threads);
    b.param("const float *", "x", *input);
    b.param(weightPtr, "weight", weightArg(segment->weight));
    b.param("void *", "scratch", scratchArg);
    const std::string steps = addStepRows(b);
    const int64_t perBlock = tensorCore ? 16 : 4;
    b.setGrid(Expr::constant((candidates + perBlock - 1) / perBlock),
              Expr::batch());
    if (tensorCore)
      b.setShared(8 * 32 * 16);
    add(b, std::string("sits::") +
               (tensorCore ? "tvcExactTensorCore" : "tvcExactSimple") +
               "<Cfg>(x, weight, scratch, " + steps + ")");
  }
  {
    LaunchBuilder b("tvc_decide", "sits/tvc.cuh", kThreads);
    b.param("void *", "scratch", scratchArg);
    b.param("unsigned long long *", "counters", countersArg);
    b.param("const int *", "step_lengths", stepArg);
    b.setGrid(Expr::batch());
    add(b, "sits::tvcDecide<Cfg>(scratch, counters, step_lengths)");
  }
  {
    // The plain head's launch, with the scratch added and the call wrapped.
    PlannedLaunch full = plain;
    full.spec.family = "tvc_lm_head";
    full.spec.header = "sits/tvc.cuh";
    full.spec.config = ownConfig();
    full.spec.params.push_back({"void *", "scratch"});
    full.launch.args.push_back(scratchArg);
    full.spec.body.clear();
    full.spec.body.push_back(weightPtr + "weights[] = {w0};");
    // The plain head gathers: its params are addStepRows's.
    full.spec.call = "sits::tvcHead<Cfg>(x, weights, out0, tokens, " +
                     stepRowsCall() + ", scratch)";
    // tvcHead reads the decision before the GEMV: the entry waits first.
    full.spec.callWaitsForPredecessors = false;
    addLaunch(std::move(full), {head});
  }
  {
    LaunchBuilder b("tvc_scatter", "sits/tvc.cuh", kThreads);
    b.param("void *", "scratch", scratchArg);
    b.param("float *", "logits", ArgBinding::bufferArg(BufferKind::Logits));
    b.param("const int *", "step_lengths", stepArg);
    b.setGrid(Expr::batch());
    add(b, "sits::tvcScatter<Cfg>(scratch, logits, step_lengths)");
  }

  EnginePlan::Tvc tvc;
  tvc.rank = rank;
  tvc.candidates = candidates;
  tvc.exactTop = exactTop;
  tvc.scratchBytes = layout.bytes;
  tvc.previewBytes = uint64_t(vocab) * rank * 4 + uint64_t(rank) * hidden * 4 +
                     uint64_t(vocab) * 16;
  observed.tvc = tvc;
  observed.config.vocab = vocab;
  // Tied: the head reads the embedding's table (sits.tvc_lm_head has no
  // `tied` attribute; the weight's name says it).
  bool tied = false;
  func.walk([&](EmbeddingOp embedding) {
    auto table = embedding.getTable().getDefiningOp<WeightOp>();
    tied |= table && table.getName() == weightOp.getName();
  });
  observed.config.tiedLMHead = tied;
  logits = head.getResult();
  return success();
}

} // namespace sits::codegen::detail
