//===- Verification.cpp - Accuracy checks with the reference executor -----===//

#include "compiler/reference/Verification.h"

#include "dialects/sits/SitsDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace sits::reference;

//===----------------------------------------------------------------------===//
// ONNX tensor data
//===----------------------------------------------------------------------===//

llvm::Expected<Tensor>
sits::reference::tensorFromOnnxData(int64_t onnxElementType,
                                    llvm::ArrayRef<int64_t> dims,
                                    llvm::ArrayRef<char> bytes) {
  // TensorProto.DataType numbers.
  static const std::pair<int64_t, ElementType> kTypes[] = {
      {1, ElementType::F32},  {2, ElementType::U8},   {3, ElementType::I8},
      {4, ElementType::U16},  {5, ElementType::I16},  {6, ElementType::I32},
      {7, ElementType::I64},  {9, ElementType::I1},   {10, ElementType::F16},
      {11, ElementType::F64}, {12, ElementType::U32}, {16, ElementType::BF16}};
  const auto *found = llvm::find_if(
      kTypes, [&](auto entry) { return entry.first == onnxElementType; });
  if (found == std::end(kTypes))
    return llvm::createStringError("ONNX element type " +
                                   std::to_string(onnxElementType) +
                                   " is not supported by the reference "
                                   "executor");
  int64_t count = numElementsOf(dims);
  size_t size = getElementBytes(found->second);
  if (bytes.size() != static_cast<size_t>(count) * size)
    return llvm::createStringError(
        "tensor data holds " + std::to_string(bytes.size()) + " bytes, " +
        formatShape(dims) + " needs " + std::to_string(count * size));
  return Tensor::fromLittleEndian(found->second, dims, bytes);
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

int64_t Comparison::argmaxAgreements() const {
  int64_t agree = 0;
  for (size_t i = 0; i < actualArgmax.size(); ++i)
    agree += actualArgmax[i] == expectedArgmax[i];
  return agree;
}

bool Comparison::withinTolerance(double tolerance) const {
  return nonFiniteMismatches == 0 && maxAbsError <= tolerance;
}

void Comparison::print(llvm::raw_ostream &os) const {
  os << "shape " << formatShape(shape) << ": max abs error "
     << llvm::format("%.3e", maxAbsError) << ", max rel error "
     << llvm::format("%.3e", maxRelError) << " (worst element " << worstIndex
     << ")";
  if (nonFiniteMismatches)
    os << ", " << nonFiniteMismatches << " non-finite mismatches";
  os << "\nargmax agrees at " << argmaxAgreements() << " of " << positions()
     << " positions\n";
  // Positions of a [batch, seq, vocab] tensor read as (batch, position).
  int64_t seq = shape.size() >= 2 ? shape[shape.size() - 2] : positions();
  for (int64_t p = 0; p < positions(); ++p) {
    if (seq > 0 && p % seq == 0) {
      os << "  batch " << p / seq << ": ";
    }
    os << (actualArgmax[p] == expectedArgmax[p] ? '.' : 'x');
    if (seq > 0 && (p + 1) % seq == 0)
      os << "\n";
  }
  for (int64_t p = 0; p < positions(); ++p)
    if (actualArgmax[p] != expectedArgmax[p])
      os << "  batch " << p / std::max<int64_t>(seq, 1) << ", position "
         << p % std::max<int64_t>(seq, 1) << ": argmax " << actualArgmax[p]
         << ", reference " << expectedArgmax[p] << "\n";
}

/// Index of the largest value of a row (the first one on ties; NaN never
/// wins).
static int64_t argmaxOf(const float *row, int64_t count) {
  int64_t best = 0;
  for (int64_t i = 1; i < count; ++i)
    if (row[i] > row[best] || std::isnan(row[best]))
      best = i;
  return best;
}

llvm::Expected<Comparison>
sits::reference::compareTensors(const Tensor &actual, const Tensor &expected) {
  if (actual.getShape() != expected.getShape())
    return llvm::createStringError("result shape " +
                                   formatShape(actual.getShape()) +
                                   " differs from the reference shape " +
                                   formatShape(expected.getShape()));
  if (!actual.isFloat() || !expected.isFloat())
    return llvm::createStringError("only float tensors are compared");
  Comparison result;
  result.shape.assign(actual.getShape().begin(), actual.getShape().end());
  llvm::ArrayRef<float> a = actual.floats(), e = expected.floats();
  double largest = 0;
  for (float value : e)
    if (std::isfinite(value))
      largest = std::max(largest, std::fabs(double(value)));
  double floor = std::max(1e-3 * largest, 1e-30);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(a[i]) != std::isfinite(e[i]) ||
        (!std::isfinite(e[i]) && !(a[i] == e[i]) &&
         !(std::isnan(a[i]) && std::isnan(e[i])))) {
      ++result.nonFiniteMismatches;
      continue;
    }
    if (!std::isfinite(e[i]))
      continue;
    double error = std::fabs(double(a[i]) - double(e[i]));
    if (error > result.maxAbsError) {
      result.maxAbsError = error;
      result.worstIndex = i;
    }
    result.maxRelError = std::max(
        result.maxRelError, error / std::max(std::fabs(double(e[i])), floor));
  }
  int64_t width = actual.getRank() ? actual.getDim(-1) : 1;
  int64_t positions = width ? actual.getNumElements() / width : 0;
  for (int64_t p = 0; p < positions; ++p) {
    result.actualArgmax.push_back(argmaxOf(a.data() + p * width, width));
    result.expectedArgmax.push_back(argmaxOf(e.data() + p * width, width));
  }
  return result;
}

void AllCloseComparison::print(llvm::raw_ostream &os) const {
  os << "max abs error " << llvm::format("%.3e", maxAbsError)
     << ", max rel error " << llvm::format("%.3e", maxRelError);
  if (passed())
    return;
  os << "; " << mismatches << " of " << numElementsOf(shape)
     << " elements differ, the first at [";
  llvm::SmallVector<int64_t, 6> index(shape.size());
  int64_t rest = firstMismatch;
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
  }
  llvm::interleaveComma(index, os);
  os << "]: " << llvm::format("%.8g", firstActual) << " against "
     << llvm::format("%.8g", firstExpected);
}

llvm::Expected<AllCloseComparison>
sits::reference::compareAllClose(const Tensor &actual, const Tensor &expected,
                                 double rtol, double atol) {
  if (actual.getShape() != expected.getShape())
    return llvm::createStringError("shape " + formatShape(actual.getShape()) +
                                   " differs from the reference's " +
                                   formatShape(expected.getShape()));
  if (actual.getElementType() != expected.getElementType())
    return llvm::createStringError("element type " +
                                   toString(actual.getElementType()).str() +
                                   " differs from the reference's " +
                                   toString(expected.getElementType()).str());
  AllCloseComparison result;
  result.shape.assign(actual.getShape().begin(), actual.getShape().end());
  for (int64_t i = 0; i < actual.getNumElements(); ++i) {
    double a = actual.getAsDouble(i), e = expected.getAsDouble(i);
    bool agree;
    if (std::isfinite(a) && std::isfinite(e)) {
      double error = std::fabs(a - e);
      result.maxAbsError = std::max(result.maxAbsError, error);
      if (e != 0)
        result.maxRelError = std::max(result.maxRelError, error / std::fabs(e));
      agree = error <= atol + rtol * std::fabs(e);
    } else {
      agree = (std::isnan(a) && std::isnan(e)) || a == e;
    }
    if (agree)
      continue;
    if (result.mismatches++ == 0) {
      result.firstMismatch = i;
      result.firstActual = a;
      result.firstExpected = e;
    }
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

llvm::Expected<Program>
sits::reference::findProgram(ModuleOp module, llvm::StringRef forwardName) {
  Program program;
  llvm::SmallVector<func::FuncOp> functions;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    functions.push_back(function);
    if (auto step = function->getAttrOfType<StringAttr>("sits.step")) {
      if (step.getValue() == "prefill")
        program.prefill = function.getSymName().str();
      else if (step.getValue() == "decode")
        program.decode = function.getSymName().str();
    }
  }
  if (program.prefill.empty() != program.decode.empty())
    return llvm::createStringError(
        "the module has a prefill step without a decode step (or the other "
        "way round)");
  if (!forwardName.empty()) {
    if (!module.lookupSymbol<func::FuncOp>(forwardName))
      return llvm::createStringError("the module has no function '" +
                                     forwardName.str() + "'");
    program.forward = forwardName.str();
  } else if (!program.hasCache()) {
    if (functions.size() != 1)
      return llvm::createStringError(
          "the module has " + std::to_string(functions.size()) +
          " functions and no prefill/decode steps: name the one to run");
    program.forward = functions.front().getSymName().str();
  }
  return program;
}

/// The arguments `function` takes for token ids `ids`: the ids in the
/// argument's integer type, and an empty cache for a KV-cache argument.
static llvm::Expected<std::vector<RuntimeValue>>
stepArguments(func::FuncOp function, const Tensor &ids,
              std::shared_ptr<KVCacheState> cache) {
  std::vector<RuntimeValue> args;
  for (Type type : function.getArgumentTypes()) {
    if (auto cacheType = dyn_cast<sits::KVCacheType>(type)) {
      if (!cache) {
        llvm::Expected<KVCacheConfig> config =
            KVCacheConfig::fromType(cacheType);
        if (!config)
          return config.takeError();
        cache = std::make_shared<KVCacheState>(*config);
      }
      args.push_back(cache);
      continue;
    }
    auto tensorType = dyn_cast<RankedTensorType>(type);
    if (!tensorType || !args.empty())
      return llvm::createStringError(
          "function '" + function.getSymName().str() +
          "' must take the token ids (and optionally a KV cache)");
    llvm::Expected<ElementType> element =
        elementTypeOf(tensorType.getElementType());
    if (!element)
      return element.takeError();
    args.push_back(ids.castTo(*element));
  }
  return args;
}

llvm::Expected<StepResult>
sits::reference::runStep(Executor &executor, ModuleOp module,
                         llvm::StringRef name, const Tensor &ids,
                         std::shared_ptr<KVCacheState> cache) {
  auto function = module.lookupSymbol<func::FuncOp>(name);
  if (!function)
    return llvm::createStringError("the module has no function '" + name.str() +
                                   "'");
  llvm::Expected<std::vector<RuntimeValue>> args =
      stepArguments(function, ids, std::move(cache));
  if (!args)
    return args.takeError();
  llvm::Expected<std::vector<RuntimeValue>> results =
      executor.run(name, std::move(*args));
  if (!results)
    return results.takeError();
  const Tensor *logits = nullptr;
  std::shared_ptr<KVCacheState> next;
  for (const RuntimeValue &value : *results) {
    if (value.isKVCache())
      next = value.getKVCache();
    else if (!logits && value.getTensor().isFloat())
      logits = &value.getTensor();
  }
  if (!logits)
    return llvm::createStringError("function '" + name.str() +
                                   "' returns no float tensor (logits)");
  return StepResult{*logits, std::move(next)};
}

llvm::Expected<Tensor> sits::reference::runLogits(Executor &executor,
                                                  ModuleOp module,
                                                  llvm::StringRef function,
                                                  const Tensor &tokenIds) {
  auto step = runStep(executor, module, function, tokenIds, nullptr);
  if (!step)
    return step.takeError();
  return std::move(step->logits);
}

//===----------------------------------------------------------------------===//
// Greedy decoding
//===----------------------------------------------------------------------===//

/// The greedy choice from the last position of `logits` ([1, seq, vocab]).
static llvm::Expected<GreedyStep> chooseToken(const Tensor &logits) {
  if (logits.getRank() < 2 || logits.getDim(0) != 1)
    return llvm::createStringError("logits of shape " +
                                   formatShape(logits.getShape()) +
                                   " are not [1, seq, vocab]");
  int64_t vocab = logits.getDim(-1);
  if (vocab == 0 || logits.getNumElements() == 0)
    return llvm::createStringError("empty logits");
  const float *row = logits.floats().data() + logits.getNumElements() - vocab;
  GreedyStep step;
  step.logits.assign(row, row + vocab);
  step.token = argmaxOf(row, vocab);
  float runnerUp = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i)
    if (i != step.token)
      runnerUp = std::max(runnerUp, row[i]);
  step.margin = vocab > 1 ? row[step.token] - runnerUp : 0.0f;
  return step;
}

llvm::Expected<std::vector<GreedyStep>> sits::reference::greedyDecode(
    Executor &executor, ModuleOp module, const Program &program,
    llvm::ArrayRef<int64_t> prompt, int64_t newTokens) {
  if (prompt.empty())
    return llvm::createStringError("the prompt is empty");
  std::vector<GreedyStep> steps;
  std::vector<int64_t> sequence(prompt.begin(), prompt.end());
  std::shared_ptr<KVCacheState> cache;
  for (int64_t t = 0; t < newTokens; ++t) {
    Tensor ids;
    llvm::StringRef function = program.forward;
    if (!program.hasCache()) {
      ids = Tensor::fromInts(ElementType::I64,
                             {1, static_cast<int64_t>(sequence.size())},
                             sequence);
    } else if (t == 0) {
      function = program.prefill;
      ids = Tensor::fromInts(ElementType::I64,
                             {1, static_cast<int64_t>(sequence.size())},
                             sequence);
    } else {
      function = program.decode;
      ids = Tensor::fromInts(ElementType::I64, {1, 1}, {sequence.back()});
    }
    auto result = runStep(executor, module, function, ids, cache);
    if (!result)
      return llvm::createStringError("greedy step " + std::to_string(t) + ": " +
                                     llvm::toString(result.takeError()));
    if (program.hasCache() && !result->cache)
      return llvm::createStringError("function '" + function.str() +
                                     "' returns no KV cache");
    cache = std::move(result->cache);
    llvm::Expected<GreedyStep> step = chooseToken(result->logits);
    if (!step)
      return step.takeError();
    sequence.push_back(step->token);
    steps.push_back(std::move(*step));
  }
  return steps;
}

std::optional<GreedyMismatch>
sits::reference::findGreedyMismatch(llvm::ArrayRef<GreedyStep> steps,
                                    llvm::ArrayRef<int64_t> expected) {
  size_t count = std::min(steps.size(), expected.size());
  for (size_t i = 0; i < count; ++i) {
    if (steps[i].token == expected[i])
      continue;
    GreedyMismatch mismatch;
    mismatch.step = i;
    mismatch.actualToken = steps[i].token;
    mismatch.expectedToken = expected[i];
    int64_t vocab = steps[i].logits.size();
    float expectedLogit = expected[i] >= 0 && expected[i] < vocab
                              ? steps[i].logits[expected[i]]
                              : NAN;
    mismatch.margin = steps[i].logits[steps[i].token] - expectedLogit;
    return mismatch;
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Perplexity
//===----------------------------------------------------------------------===//

double PerplexityResult::perplexity() const { return std::exp(meanNll); }

llvm::Expected<PerplexityResult> sits::reference::teacherForcedPerplexity(
    Executor &executor, ModuleOp module, const Program &program,
    llvm::ArrayRef<int64_t> ids, int64_t window, int64_t maxTokens) {
  if (window < 2)
    return llvm::createStringError("the window must hold at least 2 tokens");
  if (maxTokens > 0 && static_cast<int64_t>(ids.size()) > maxTokens)
    ids = ids.take_front(maxTokens);
  llvm::StringRef function =
      program.hasCache() ? program.prefill : program.forward;
  double totalNll = 0;
  int64_t predicted = 0;
  for (size_t start = 0; start + 1 < ids.size(); start += window) {
    llvm::ArrayRef<int64_t> chunk =
        ids.slice(start, std::min<size_t>(window, ids.size() - start));
    if (chunk.size() < 2)
      break;
    int64_t length = chunk.size();
    Tensor tokens = Tensor::fromInts(ElementType::I64, {1, length},
                                     {chunk.begin(), chunk.end()});
    llvm::Expected<Tensor> logits =
        runLogits(executor, module, function, tokens);
    if (!logits)
      return logits.takeError();
    if (logits->getRank() != 3 || logits->getDim(1) != length)
      return llvm::createStringError("logits of shape " +
                                     formatShape(logits->getShape()) +
                                     " do not cover the window");
    int64_t vocab = logits->getDim(2);
    for (int64_t t = 0; t + 1 < length; ++t) {
      const float *row = logits->floats().data() + t * vocab;
      int64_t target = chunk[t + 1];
      if (target < 0 || target >= vocab)
        return llvm::createStringError("token " + std::to_string(target) +
                                       " is outside the vocabulary");
      double top = -INFINITY;
      for (int64_t v = 0; v < vocab; ++v)
        top = std::max(top, double(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp(double(row[v]) - top);
      totalNll += std::log(sum) + top - double(row[target]);
      ++predicted;
    }
  }
  if (predicted == 0)
    return llvm::createStringError("fewer than 2 tokens: nothing to predict");
  PerplexityResult result;
  result.predictedTokens = predicted;
  result.meanNll = totalNll / predicted;
  return result;
}
