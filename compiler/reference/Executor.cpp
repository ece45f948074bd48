//===- Executor.cpp - CPU reference executor ------------------------------===//
//
// The interpreter loop: walks the single block of a function in order, runs
// each op's kernel through its ReferenceKernelOpInterface, checks what the
// kernel produced against the op's declared result types, rounds floats to
// their element type, and frees each value after its last use.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Executor.h"
#include "compiler/reference/Kernels.h"
#include "compiler/reference/TensorParallel.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

#include <thread>

using namespace mlir;
using namespace sits::reference;

#include "compiler/reference/ReferenceKernelOpInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// Locations and errors
//===----------------------------------------------------------------------===//

static void collectNames(Location location,
                         llvm::SmallVectorImpl<std::string> &names) {
  if (auto name = dyn_cast<NameLoc>(location)) {
    names.push_back(name.getName().str());
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(location)) {
    for (Location inner : fused.getLocations())
      collectNames(inner, names);
    return;
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(location))
    collectNames(callSite.getCallee(), names);
}

std::string sits::reference::describeLocation(Location location) {
  llvm::SmallVector<std::string> names;
  collectNames(location, names);
  if (!names.empty())
    return llvm::join(names, ", ");
  if (auto file = dyn_cast<FileLineColLoc>(location))
    return (file.getFilename().str() + ":" + std::to_string(file.getLine()) +
            ":" + std::to_string(file.getColumn()));
  if (auto fused = dyn_cast<FusedLoc>(location))
    for (Location inner : fused.getLocations())
      if (auto file = dyn_cast<FileLineColLoc>(inner))
        return describeLocation(file);
  return "unknown location";
}

static std::string typeToString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

llvm::Error KernelContext::error(const llvm::Twine &message) const {
  return llvm::createStringError("'" + op->getName().getStringRef().str() +
                                 "' at " + describeLocation(op->getLoc()) +
                                 ": " + message.str());
}

ElementType KernelContext::resultType(unsigned index) const {
  // Checked by the executor before the kernel runs.
  return cantFail(
      elementTypeOf(getElementTypeOrSelf(op->getResult(index).getType())));
}

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

llvm::SmallVector<int64_t, 6>
sits::reference::stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 6> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::optional<llvm::SmallVector<int64_t, 6>>
sits::reference::broadcastStrides(llvm::ArrayRef<int64_t> source,
                                  llvm::ArrayRef<int64_t> target) {
  if (source.size() > target.size())
    return std::nullopt;
  llvm::SmallVector<int64_t, 6> sourceStrides = stridesOf(source);
  llvm::SmallVector<int64_t, 6> strides(target.size(), 0);
  size_t offset = target.size() - source.size();
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == target[offset + i])
      strides[offset + i] = source[i] == 1 ? 0 : sourceStrides[i];
    else if (source[i] != 1)
      return std::nullopt;
  }
  return strides;
}

//===----------------------------------------------------------------------===//
// Executor::Impl
//===----------------------------------------------------------------------===//

namespace {
/// Per function: the values to free after each op (their last use).
struct FunctionPlan {
  std::vector<llvm::SmallVector<Value, 4>> deadAfter;
};
} // namespace

class Executor::Impl {
public:
  Impl(ModuleOp module, ExecutorOptions options) : module(module) {
    numThreads = options.numThreads;
    if (numThreads == 0)
      numThreads =
          std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
    attachKernels(module->getContext());
  }

  llvm::Expected<std::vector<RuntimeValue>>
  runFunction(func::FuncOp function, std::vector<RuntimeValue> args,
              unsigned depth);

  ModuleOp module;
  unsigned numThreads;
  OpObserver observer;
  ExecutorStatistics statistics;
  /// Set while this executor runs one rank of a tensor-parallel program.
  RankGroup *group = nullptr;
  int rank = 0;
  /// Boxed: a call can add plans while the caller holds its own.
  llvm::DenseMap<Operation *, std::unique_ptr<FunctionPlan>> plans;
  /// Constants and weights, converted once. Keyed by the (uniqued) value
  /// attribute, so that a weight the prefill and decode functions share is
  /// held once.
  llvm::DenseMap<Attribute, std::shared_ptr<const Tensor>> constants;

private:
  const FunctionPlan &planFor(func::FuncOp function);
  llvm::Error checkArgument(func::FuncOp function, unsigned index,
                            const RuntimeValue &value);
  llvm::Error runOp(Operation *op, llvm::DenseMap<Value, RuntimeValue> &values,
                    std::optional<int64_t> stepBatch, unsigned depth);
  llvm::Error runBuiltinOp(Operation *op, KernelContext &context,
                           unsigned depth, bool &handled);
  llvm::Expected<std::shared_ptr<const Tensor>> constantOf(Operation *op,
                                                           Attribute value);
};

const FunctionPlan &Executor::Impl::planFor(func::FuncOp function) {
  auto it = plans.find(function);
  if (it != plans.end())
    return *it->second;
  Block &block = function.getBody().front();
  llvm::DenseMap<Value, size_t> lastUse;
  size_t index = 0;
  for (Operation &op : block) {
    for (Value operand : op.getOperands())
      lastUse[operand] = index;
    ++index;
  }
  // Results nobody uses die right after their op.
  index = 0;
  for (Operation &op : block) {
    for (Value result : op.getResults())
      if (!lastUse.count(result))
        lastUse[result] = index;
    ++index;
  }
  auto plan = std::make_unique<FunctionPlan>();
  plan->deadAfter.resize(index);
  for (auto &[value, last] : lastUse)
    plan->deadAfter[last].push_back(value);
  return *plans.try_emplace(function, std::move(plan)).first->second;
}

llvm::Error Executor::Impl::checkArgument(func::FuncOp function, unsigned index,
                                          const RuntimeValue &value) {
  Type type = function.getArgument(index).getType();
  std::string where = "function '" + function.getSymName().str() +
                      "' argument " + std::to_string(index);
  if (auto cacheType = dyn_cast<sits::KVCacheType>(type)) {
    if (!value.isKVCache())
      return llvm::createStringError(where + " must be a KV-cache state");
    llvm::Expected<KVCacheConfig> config = KVCacheConfig::fromType(cacheType);
    if (!config)
      return config.takeError();
    if (!(*config == value.getKVCache()->getConfig()))
      return llvm::createStringError(where +
                                     ": the KV-cache state does not "
                                     "match the type " +
                                     typeToString(type));
    return llvm::Error::success();
  }
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return llvm::createStringError(where + " has type " + typeToString(type) +
                                   ", which the reference executor does not "
                                   "support");
  if (!value.isTensor())
    return llvm::createStringError(where + " must be a tensor");
  const Tensor &tensor = value.getTensor();
  llvm::Expected<ElementType> expected =
      elementTypeOf(tensorType.getElementType());
  if (!expected)
    return expected.takeError();
  bool shapeOk = tensor.getRank() == tensorType.getRank();
  for (int64_t i = 0; shapeOk && i < tensorType.getRank(); ++i)
    shapeOk = tensorType.isDynamicDim(i) ||
              tensorType.getDimSize(i) == tensor.getDim(i);
  if (!shapeOk || *expected != tensor.getElementType())
    return llvm::createStringError(
        where + " is a " + toString(tensor.getElementType()).str() +
        " tensor of shape " + formatShape(tensor.getShape()) +
        ", but the function expects " + typeToString(type));
  return llvm::Error::success();
}

llvm::Expected<std::shared_ptr<const Tensor>>
Executor::Impl::constantOf(Operation *op, Attribute value) {
  auto it = constants.find(value);
  if (it != constants.end())
    return it->second;
  Type resultType = getElementTypeOrSelf(op->getResult(0).getType());
  llvm::Expected<Tensor> tensor = [&]() -> llvm::Expected<Tensor> {
    if (auto elements = dyn_cast<ElementsAttr>(value))
      return Tensor::fromAttribute(elements);
    // A scalar constant (`arith.constant 0 : index`) is a rank-0 tensor.
    llvm::Expected<ElementType> type = elementTypeOf(resultType);
    if (!type)
      return type.takeError();
    if (auto integer = dyn_cast<IntegerAttr>(value))
      return Tensor::fromInts(*type, {}, {integer.getValue().getSExtValue()});
    if (auto real = dyn_cast<FloatAttr>(value))
      return Tensor::fromFloats(*type, {},
                                {static_cast<float>(real.getValueAsDouble())});
    return llvm::createStringError("unsupported constant attribute");
  }();
  if (!tensor)
    return tensor.takeError();
  auto shared = std::make_shared<const Tensor>(std::move(*tensor));
  constants[value] = shared;
  return shared;
}

/// arith.constant, func.return is handled by the caller, func.call,
/// tensor.dim, tensor.cast and sits.weight: ops that need the executor
/// itself rather than a kernel.
llvm::Error Executor::Impl::runBuiltinOp(Operation *op, KernelContext &context,
                                         unsigned depth, bool &handled) {
  handled = true;
  if (isa<arith::ConstantOp, sits::WeightOp>(op)) {
    Attribute value = isa<sits::WeightOp>(op)
                          ? Attribute(cast<sits::WeightOp>(op).getValue())
                          : cast<arith::ConstantOp>(op).getValue();
    llvm::Expected<std::shared_ptr<const Tensor>> tensor =
        constantOf(op, value);
    if (!tensor)
      return context.error(llvm::toString(tensor.takeError()));
    context.setResult(0, *tensor);
    return llvm::Error::success();
  }
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (!callee)
      return context.error("unknown callee '" + call.getCallee() + "'");
    std::vector<RuntimeValue> args;
    for (Value operand : call.getOperands())
      args.push_back(context.value(operand));
    llvm::Expected<std::vector<RuntimeValue>> results =
        runFunction(callee, std::move(args), depth + 1);
    if (!results)
      return context.error(llvm::toString(results.takeError()));
    for (size_t i = 0; i < results->size(); ++i)
      context.setResult(i, (*results)[i]);
    return llvm::Error::success();
  }
  if (auto dim = dyn_cast<tensor::DimOp>(op)) {
    const Tensor &source = context.tensor(dim.getSource());
    int64_t index = context.tensor(dim.getIndex()).getAsInt(0);
    if (index < 0 || index >= source.getRank())
      return context.error("dimension " + std::to_string(index) +
                           " is outside the rank of " +
                           formatShape(source.getShape()));
    context.setResult(
        0, Tensor::fromInts(ElementType::I64, {}, {source.getDim(index)}));
    return llvm::Error::success();
  }
  if (auto castOp = dyn_cast<tensor::CastOp>(op)) {
    // Only the static type changes; the result check below catches a cast
    // to a shape the value does not have.
    context.setResult(0, context.value(castOp.getSource()));
    return llvm::Error::success();
  }
  handled = false;
  return llvm::Error::success();
}

/// Checks a kernel's result against the op's declared type and rounds it to
/// its element type.
static llvm::Error finalizeResult(KernelContext &context, unsigned index) {
  RuntimeValue &value = context.getResults()[index];
  Type type = context.getOp()->getResult(index).getType();
  if (isa<sits::KVCacheType>(type)) {
    if (!value.isKVCache())
      return context.error("result " + std::to_string(index) +
                           " is not a KV-cache state");
    return llvm::Error::success();
  }
  if (!value.isTensor())
    return context.error("result " + std::to_string(index) +
                         " was not computed");
  const Tensor &tensor = value.getTensor();
  // A scalar (index, integer or float) result is a rank-0 tensor.
  auto tensorType = dyn_cast<RankedTensorType>(type);
  bool shapeOk = tensor.getRank() == (tensorType ? tensorType.getRank() : 0);
  for (int64_t i = 0; tensorType && shapeOk && i < tensorType.getRank(); ++i)
    shapeOk = tensorType.isDynamicDim(i) ||
              tensorType.getDimSize(i) == tensor.getDim(i);
  if (!shapeOk)
    return context.error("result " + std::to_string(index) + " has shape " +
                         formatShape(tensor.getShape()) +
                         " at run time, but the op declares " +
                         typeToString(type));
  ElementType expected = context.resultType(index);
  if (tensor.getElementType() == expected)
    return llvm::Error::success();
  if (isFloat(expected) != tensor.isFloat())
    return context.error("result " + std::to_string(index) + " is " +
                         toString(tensor.getElementType()) +
                         ", but the op declares " + typeToString(type));
  Tensor rounded = tensor;
  rounded.setElementTypeAndRound(expected);
  value = RuntimeValue(std::move(rounded));
  return llvm::Error::success();
}

llvm::Error Executor::Impl::runOp(Operation *op,
                                  llvm::DenseMap<Value, RuntimeValue> &values,
                                  std::optional<int64_t> stepBatch,
                                  unsigned depth) {
  KernelContext context(op, values, stepBatch, numThreads, &statistics, group,
                        rank);
  for (Type type : op->getResultTypes()) {
    if (isa<sits::KVCacheType>(type))
      continue;
    if (!isa<RankedTensorType>(type) && !type.isIntOrIndexOrFloat())
      return context.error("result type " + typeToString(type) +
                           " is not supported by the reference executor");
    llvm::Expected<ElementType> element =
        elementTypeOf(getElementTypeOrSelf(type));
    if (!element)
      return context.error(llvm::toString(element.takeError()));
  }
  // Kernels rely on the verifier for operand counts and attribute kinds.
  if (!op->isRegistered())
    return context.error("op '" + op->getName().getStringRef() +
                         "' is not registered (its dialect is not loaded), "
                         "so the reference executor does not run it");
  bool handled = false;
  if (llvm::Error error = runBuiltinOp(op, context, depth, handled))
    return error;
  if (!handled) {
    auto kernel = dyn_cast<ReferenceKernelOpInterface>(op);
    if (!kernel)
      return context.error("op '" + op->getName().getStringRef() +
                           "' is not supported by the reference executor");
    if (llvm::Error error = kernel.runReferenceKernel(context))
      return error;
  }
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    if (llvm::Error error = finalizeResult(context, i))
      return error;
  std::vector<RuntimeValue> &results = context.getResults();
  if (observer)
    observer(op, results);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    values[op->getResult(i)] = std::move(results[i]);
  return llvm::Error::success();
}

llvm::Expected<std::vector<RuntimeValue>>
Executor::Impl::runFunction(func::FuncOp function,
                            std::vector<RuntimeValue> args, unsigned depth) {
  std::string name = function.getSymName().str();
  if (depth > 64)
    return llvm::createStringError("calls nest deeper than 64 at function '" +
                                   name + "'");
  if (function.isExternal())
    return llvm::createStringError("function '" + name + "' has no body");
  if (!function.getBody().hasOneBlock())
    return llvm::createStringError(
        "function '" + name +
        "' has control flow (several blocks), which the reference executor "
        "does not run");
  if (args.size() != function.getNumArguments())
    return llvm::createStringError("function '" + name + "' takes " +
                                   std::to_string(function.getNumArguments()) +
                                   " arguments, got " +
                                   std::to_string(args.size()));

  llvm::DenseMap<Value, RuntimeValue> values;
  std::optional<int64_t> stepBatch;
  for (unsigned i = 0; i < args.size(); ++i) {
    if (llvm::Error error = checkArgument(function, i, args[i]))
      return std::move(error);
    if (!stepBatch && args[i].isTensor() &&
        args[i].getTensor().getRank() == 2 && !args[i].getTensor().isFloat())
      stepBatch = args[i].getTensor().getDim(0);
    values[function.getArgument(i)] = std::move(args[i]);
  }

  const FunctionPlan &plan = planFor(function);
  size_t index = 0;
  for (Operation &op : function.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<RuntimeValue> results;
      for (Value operand : ret.getOperands())
        results.push_back(values.find(operand)->second);
      return results;
    }
    if (llvm::Error error = runOp(&op, values, stepBatch, depth))
      return std::move(error);
    for (Value dead : plan.deadAfter[index])
      values.erase(dead);
    ++index;
  }
  return llvm::createStringError("function '" + name +
                                 "' does not end with func.return");
}

//===----------------------------------------------------------------------===//
// Executor
//===----------------------------------------------------------------------===//

Executor::Executor(ModuleOp module, ExecutorOptions options) {
  const int64_t ranks = getTensorParallelRanks(module);
  if (ranks > 1 && !options.oneRank) {
    parallel = std::make_unique<TensorParallelRanks>(module, ranks, options);
    return;
  }
  impl = std::make_unique<Impl>(module, options);
}

Executor::~Executor() = default;

void sits::reference::registerReferenceKernels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, sits::SitsDialect *) {
    attachSitsKernels(context);
    attachAttentionKernels(context);
    attachQuantKernels(context);
    attachCollectiveKernels(context);
  });
  registry.addExtension(+[](MLIRContext *context, sits::onnx::OnnxDialect *) {
    attachOnnxKernels(context);
  });
}

void sits::reference::attachKernels(MLIRContext *context) {
  // Cheap after the first call: a registry the context already holds is
  // not applied again.
  DialectRegistry registry;
  registerReferenceKernels(registry);
  context->appendDialectRegistry(registry);
}

bool Executor::supports(OperationName name) {
  attachKernels(name.getContext());
  if (name.hasInterface<ReferenceKernelOpInterface>())
    return true;
  // Ops runBuiltinOp handles.
  return name.getTypeID() == TypeID::get<arith::ConstantOp>() ||
         name.getTypeID() == TypeID::get<sits::WeightOp>() ||
         name.getTypeID() == TypeID::get<func::CallOp>() ||
         name.getTypeID() == TypeID::get<func::ReturnOp>() ||
         name.getTypeID() == TypeID::get<tensor::DimOp>() ||
         name.getTypeID() == TypeID::get<tensor::CastOp>();
}

void Executor::setObserver(OpObserver observer) {
  if (parallel) {
    // Rank 0's ops: the results the caller gets.
    if (Executor *first = parallel->getFirstRank())
      first->setObserver(std::move(observer));
    return;
  }
  impl->observer = std::move(observer);
}

const ExecutorStatistics &Executor::getStatistics() const {
  static const ExecutorStatistics kNone;
  if (parallel) {
    Executor *first = parallel->getFirstRank();
    return first ? first->getStatistics() : kNone;
  }
  return impl->statistics;
}

void Executor::resetStatistics() {
  if (parallel) {
    if (Executor *first = parallel->getFirstRank())
      first->resetStatistics();
    return;
  }
  impl->statistics = ExecutorStatistics();
}

void Executor::setRank(RankGroup *group, int rank) {
  assert(impl && "a rank's executor runs one rank");
  impl->group = group;
  impl->rank = rank;
}

llvm::Expected<std::vector<RuntimeValue>>
Executor::run(llvm::StringRef function, std::vector<RuntimeValue> args) {
  if (parallel)
    return parallel->run(function, std::move(args));
  auto func = impl->module.lookupSymbol<func::FuncOp>(function);
  if (!func)
    return llvm::createStringError("the module has no function '" +
                                   function.str() + "'");
  return impl->runFunction(func, std::move(args), 0);
}
