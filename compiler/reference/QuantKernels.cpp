//===- QuantKernels.cpp - sits.quantize, sits.dequantize, sits.tvc_lm_head ===//
//
// Quantize and dequantize run dialects/sits/QuantMath.h, the one
// implementation of their rounding rules. The TVC LM head follows its
// description step by step, with the same dot products as sits.lm_head, so a
// proved row's candidates hold bit-identical logits and a fallback row is
// sits.lm_head's row.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/Math.h"

#include "dialects/sits/QuantMath.h"
#include "dialects/sits/SitsOps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace sits;
using namespace sits::reference;

//===----------------------------------------------------------------------===//
// Quantize and dequantize
//===----------------------------------------------------------------------===//

/// The layout of a grouped tensor of logical shape `shape` stored with
/// `rowBytes` bytes per last-dimension row.
static llvm::Expected<quant::GroupLayout>
makeLayout(const KernelContext &context, llvm::ArrayRef<int64_t> shape,
           int64_t bits, int64_t axis, int64_t groupSize, int64_t rowBytes) {
  quant::GroupLayout layout;
  layout.shape.assign(shape.begin(), shape.end());
  layout.axis = axis;
  layout.groupSize = groupSize;
  layout.bits = static_cast<unsigned>(bits);
  layout.rowBytes = rowBytes;
  if (std::optional<std::string> problem = layout.check())
    return context.error(*problem);
  return layout;
}

static llvm::Error runQuantize(KernelContext &context) {
  auto op = cast<QuantizeOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  if (input.getRank() < 1)
    return context.error("input must have rank >= 1");
  int64_t bits = op.getBits();
  // Rows take the declared width when it is static, else the packed size.
  int64_t declared = op.getData().getType().getShape().back();
  int64_t rowBytes =
      ShapedType::isDynamic(declared)
          ? quant::GroupLayout::packedRowBytes(input.getDim(-1), bits)
          : declared;
  llvm::Expected<quant::GroupLayout> layout =
      makeLayout(context, input.getShape(), bits, op.getAxis(),
                 op.getGroupSize(), rowBytes);
  if (!layout)
    return layout.takeError();
  std::vector<int8_t> bytes(layout->numDataBytes());
  std::vector<float> scales(layout->numScales());
  bool halfScales = context.resultType(1) == ElementType::F16;
  quant::quantize(input.floats().data(), *layout, halfScales, bytes.data(),
                  scales.data());
  Tensor data = context.makeResult(0, layout->dataShape());
  std::copy(bytes.begin(), bytes.end(), data.ints().begin());
  context.setResult(0, std::move(data));
  context.setResult(1, Tensor::fromFloats(context.resultType(1),
                                          layout->scaleShape(),
                                          std::move(scales)));
  return llvm::Error::success();
}

static llvm::Error runDequantize(KernelContext &context) {
  auto op = cast<DequantizeOp>(context.getOp());
  const Tensor &data = context.tensor(op.getData());
  const Tensor &scales = context.tensor(op.getScales());
  if (data.getRank() < 1)
    return context.error("data must have rank >= 1");
  // The logical last dimension comes from the result type, or (dynamic)
  // from the packed row width.
  Shape shape(data.getShape());
  int64_t declared = op.getResult().getType().getShape().back();
  int64_t bits = op.getBits();
  shape.back() = !ShapedType::isDynamic(declared) ? declared
                 : bits == 4                      ? 2 * data.getDim(-1)
                                                  : data.getDim(-1);
  llvm::Expected<quant::GroupLayout> layout = makeLayout(
      context, shape, bits, op.getAxis(), op.getGroupSize(), data.getDim(-1));
  if (!layout)
    return layout.takeError();
  if (Shape(scales.getShape()) != layout->scaleShape())
    return context.error("scales have shape " + formatShape(scales.getShape()) +
                         ", expected " + formatShape(layout->scaleShape()));
  std::vector<int8_t> bytes(data.getNumElements());
  for (int64_t i = 0; i < data.getNumElements(); ++i)
    bytes[i] = static_cast<int8_t>(data.ints()[i]);
  Tensor result = context.makeResult(0, shape);
  quant::dequantize(bytes.data(), scales.floats().data(), *layout,
                    result.floats().data());
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// TVC LM head
//===----------------------------------------------------------------------===//

namespace {
/// `g(n) = n u / (1 - n u)`, u = 2^-24: the f32 rounding bound of an
/// n-term dot product.
double gammaF32(int64_t terms) {
  double nu = static_cast<double>(terms) * 0x1p-24;
  return nu / (1.0 - nu);
}

constexpr double kNormSlack = 1.0 + 0x1p-32;

double norm(const double *values, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += values[i] * values[i];
  return std::sqrt(sum) * kNormSlack;
}

/// The operands of a TVC LM head, checked.
struct TvcProblem {
  const Tensor *input, *weight, *left, *right, *bounds;
  int64_t vocab, hidden, rank, rows, candidates, exactTop;
};
} // namespace

static llvm::Expected<TvcProblem> checkTvc(KernelContext &context,
                                           TVCLMHeadOp op) {
  TvcProblem p;
  p.input = &context.tensor(op.getInput());
  p.weight = &context.tensor(op.getWeight());
  p.left = &context.tensor(op.getPreviewLeft());
  p.right = &context.tensor(op.getPreviewRight());
  p.bounds = &context.tensor(op.getRowBounds());
  for (const Tensor *tensor : {p.weight, p.left, p.right, p.bounds})
    if (tensor->getRank() != 2)
      return context.error("weights and factors must be 2-D, got " +
                           formatShape(tensor->getShape()));
  p.vocab = p.weight->getDim(0);
  p.hidden = p.weight->getDim(1);
  p.rank = p.left->getDim(1);
  if (p.input->getRank() < 1 || p.input->getDim(-1) != p.hidden ||
      p.left->getDim(0) != p.vocab || p.right->getDim(0) != p.rank ||
      p.right->getDim(1) != p.hidden || p.bounds->getDim(0) != p.vocab ||
      p.bounds->getDim(1) != 4)
    return context.error("input " + formatShape(p.input->getShape()) +
                         ", weight " + formatShape(p.weight->getShape()) +
                         ", preview " + formatShape(p.left->getShape()) +
                         " x " + formatShape(p.right->getShape()) +
                         " and bounds " + formatShape(p.bounds->getShape()) +
                         " do not fit together");
  p.rows = numElementsOf(p.input->getShape().drop_back());
  p.candidates = op.getCandidates();
  p.exactTop = op.getExactTop();
  if (p.candidates < 1 || p.candidates > p.vocab || p.exactTop < 1 ||
      p.exactTop > p.candidates)
    return context.error("candidates " + std::to_string(p.candidates) +
                         " and exact_top " + std::to_string(p.exactTop) +
                         " do not fit a vocabulary of " +
                         std::to_string(p.vocab));
  return p;
}

/// One row: the result row, and whether it was proved.
static bool runTvcRow(const TvcProblem &p, const float *h, float *out,
                      std::vector<double> &upper, std::vector<int64_t> &order) {
  const float *left = p.left->floats().data();
  const float *right = p.right->floats().data();
  const float *bounds = p.bounds->floats().data();
  const float *weight = p.weight->floats().data();
  int64_t H = p.hidden, R = p.rank, V = p.vocab;

  // 1. z = T h and the previews, in f32 as sits.linear sums.
  std::vector<float> z(R);
  for (int64_t r = 0; r < R; ++r)
    z[r] = dotF32(right + r * H, h, H);
  // 2. Norms in f64, rounded up.
  std::vector<double> hd(h, h + H), zd(z.begin(), z.end()), e(H), a(R);
  double tau = 0, zAbsSum = 0;
  for (int64_t r = 0; r < R; ++r) {
    double sum = 0;
    for (int64_t k = 0; k < H; ++k) {
      double t = right[r * H + k];
      tau = std::max(tau, std::fabs(t));
      sum += std::fabs(t) * std::fabs(hd[k]);
    }
    a[r] = gammaF32(H) * sum;
    zAbsSum += std::fabs(zd[r]);
  }
  for (int64_t k = 0; k < H; ++k) {
    double sum = hd[k];
    for (int64_t r = 0; r < R; ++r)
      sum -= double(right[r * H + k]) * zd[r];
    e[k] = sum;
  }
  double nh = norm(hd.data(), H), nz = norm(zd.data(), R),
         na = norm(a.data(), R);
  double ne =
      norm(e.data(), H) + 0x1p-32 * (nh + std::sqrt(double(H)) * tau * zAbsSum);
  double gammaR = gammaF32(R), gammaH = gammaF32(H);
  // 3. Upper bounds of every row's logit.
  bool sawNaN = std::isnan(nh) || std::isnan(ne) || std::isnan(nz);
  for (int64_t v = 0; v < V; ++v) {
    double preview = dotF32(left + v * R, z.data(), R);
    const float *b = bounds + v * 4;
    double slack = double(b[0]) * ne + double(b[1]) * nz +
                   double(b[2]) * (gammaR * nz + na) +
                   gammaH * double(b[3]) * nh;
    upper[v] = preview + slack * kNormSlack + 0x1p-50 * std::fabs(preview);
    sawNaN |= std::isnan(upper[v]);
  }
  // 4. Candidates: the largest upper bounds, lower index first on ties.
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&](int64_t x, int64_t y) {
    return upper[x] > upper[y] || (upper[x] == upper[y] && x < y);
  };
  if (!sawNaN && p.candidates < V)
    std::nth_element(order.begin(), order.begin() + p.candidates, order.end(),
                     higher);
  // 5. The exact logits of the candidates, and the proof.
  bool proved = !sawNaN;
  std::vector<float> exact;
  if (proved) {
    exact.reserve(p.candidates);
    for (int64_t i = 0; i < p.candidates; ++i) {
      float y = dotF32(weight + order[i] * H, h, H);
      proved &= !std::isnan(y);
      exact.push_back(y);
    }
  }
  if (proved) {
    std::vector<float> sorted(exact);
    std::nth_element(sorted.begin(), sorted.begin() + (p.exactTop - 1),
                     sorted.end(), std::greater<float>());
    double threshold = sorted[p.exactTop - 1];
    for (int64_t i = p.candidates; i < V && proved; ++i)
      proved = upper[order[i]] < threshold;
  }
  if (proved) {
    std::fill(out, out + V, -std::numeric_limits<float>::infinity());
    for (int64_t i = 0; i < p.candidates; ++i)
      out[order[i]] = exact[i];
    return true;
  }
  // 6. Fallback: the full head, as sits.lm_head computes it.
  for (int64_t v = 0; v < V; ++v)
    out[v] = dotF32(weight + v * H, h, H);
  return false;
}

static llvm::Error runTvcLMHead(KernelContext &context) {
  auto op = cast<TVCLMHeadOp>(context.getOp());
  llvm::Expected<TvcProblem> checked = checkTvc(context, op);
  if (!checked)
    return checked.takeError();
  const TvcProblem &p = *checked;
  Shape shape(p.input->getShape());
  shape.back() = p.vocab;
  Tensor result = context.makeResult(0, shape);
  std::vector<double> upper(p.vocab);
  std::vector<int64_t> order(p.vocab);
  for (int64_t row = 0; row < p.rows; ++row) {
    bool proved =
        runTvcRow(p, p.input->floats().data() + row * p.hidden,
                  result.floats().data() + row * p.vocab, upper, order);
    context.noteTvcRow(proved);
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

void sits::reference::attachQuantKernels(MLIRContext *context) {
  attachKernel<runQuantize, QuantizeOp>(context);
  attachKernel<runDequantize, DequantizeOp>(context);
  attachKernel<runTvcLMHead, TVCLMHeadOp>(context);
}
