//===- FusionUtils.cpp - Forming kernel.launch ops ------------------------===//

#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/Target.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

bool sits::kernel::isDecodeProgram(func::FuncOp func) {
  return func && func.getSymName() == "decode";
}

int64_t sits::kernel::getFewRowTokens(func::FuncOp func) {
  auto rows = func ? func->getAttrOfType<IntegerAttr>(
                         KernelDialect::kFewRowTokensAttrName)
                   : IntegerAttr();
  return rows ? rows.getInt() : 0;
}

KVCacheType sits::kernel::getKVCacheArgType(func::FuncOp func) {
  for (Type type : func.getArgumentTypes())
    if (auto cache = dyn_cast<KVCacheType>(type))
      return cache;
  return {};
}

SmallVector<RMSNormOp> sits::kernel::getUnfusedNorms(func::FuncOp func) {
  SmallVector<RMSNormOp> norms;
  func.walk([&](RMSNormOp norm) {
    if (!getEnclosingLaunch(norm))
      norms.push_back(norm);
  });
  return norms;
}

SmallVector<RMSNormOp> sits::kernel::getUnfusedDecodeNorms(ModuleOp module) {
  SmallVector<RMSNormOp> norms;
  module.walk([&](func::FuncOp func) {
    if (isDecodeProgram(func))
      norms.append(getUnfusedNorms(func));
  });
  return norms;
}

std::pair<int64_t, int64_t> sits::kernel::getQuantKey(Value weight) {
  if (auto dequantize = weight.getDefiningOp<DequantizeOp>())
    return {static_cast<int64_t>(dequantize.getBits()),
            static_cast<int64_t>(dequantize.getGroupSize())};
  return {0, 0};
}

bool sits::kernel::isTokenMajor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getRank() == 3;
}

LinearOp sits::kernel::getSingleUseLinear(Value value) {
  auto linear = value.getDefiningOp<LinearOp>();
  if (!linear || getEnclosingLaunch(linear) ||
      !linear.getResult().hasOneUse() || !isTokenMajor(linear.getInput()))
    return nullptr;
  return linear;
}

/// `value` is available just before `point`.
static bool dominates(Value value, Operation *point) {
  if (auto argument = dyn_cast<BlockArgument>(value))
    return argument.getOwner()->findAncestorOpInBlock(*point) != nullptr;
  Operation *def = value.getDefiningOp();
  Operation *ancestor = def->getBlock()->findAncestorOpInBlock(*point);
  return ancestor && def->isBeforeInBlock(ancestor);
}

bool sits::kernel::canFormLaunchAt(ArrayRef<Operation *> ops, Operation *anchor,
                                   std::string *reason) {
  llvm::SmallPtrSet<Operation *, 8> inside(ops.begin(), ops.end());
  for (Operation *op : ops) {
    if (op->getBlock() != anchor->getBlock()) {
      *reason = "its ops are in different blocks";
      return false;
    }
    for (Value operand : op->getOperands())
      if (!inside.count(operand.getDefiningOp()) &&
          operand.getDefiningOp() != anchor && !dominates(operand, anchor)) {
        *reason = "an operand of '" + op->getName().getStringRef().str() +
                  "' is defined after the launch's place";
        return false;
      }
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (!inside.count(user) && !anchor->isBeforeInBlock(user)) {
          *reason = "'" + user->getName().getStringRef().str() +
                    "' reads a result of '" +
                    op->getName().getStringRef().str() +
                    "' before the launch's place";
          return false;
        }
  }
  return true;
}

LaunchOp sits::kernel::formLaunch(FusionKind fusion, ArrayRef<Operation *> ops,
                                  Operation *anchor) {
  llvm::SmallPtrSet<Operation *, 8> inside(ops.begin(), ops.end());
  SmallVector<Value> escaping;
  for (Operation *op : ops)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(),
                       [&](Operation *user) { return !inside.count(user); }))
        escaping.push_back(result);

  OpBuilder builder(anchor);
  MLIRContext *context = anchor->getContext();
  Location loc = FusedLoc::get(context, getLocations(ops));
  auto launch = LaunchOp::create(builder, loc, ValueRange(escaping).getTypes(),
                                 FusionKindAttr::get(context, fusion),
                                 /*output_operand_bits=*/nullptr);
  Block *body = new Block();
  launch.getBody().push_back(body);
  for (Operation *op : ops)
    op->moveBefore(body, body->end());
  OpBuilder atEnd = OpBuilder::atBlockEnd(body);
  YieldOp::create(atEnd, loc, escaping);
  for (auto [index, value] : llvm::enumerate(escaping))
    value.replaceUsesWithIf(launch.getResult(index), [&](OpOperand &use) {
      return use.getOwner()->getParentOp() != launch.getOperation();
    });
  return launch;
}

SmallVector<Location> sits::kernel::getLocations(ArrayRef<Operation *> ops) {
  SmallVector<Location> locations;
  for (Operation *op : ops)
    locations.push_back(op->getLoc());
  return locations;
}

void sits::kernel::auditChoice(PassAudit &audit, Location loc, StringRef what,
                               Attribute chosen, StringRef counter,
                               const std::string &reason) {
  std::string printed;
  llvm::raw_string_ostream os(printed);
  os << chosen;
  audit.add(counter);
  audit.change(loc, what.str(), printed, reason);
}

format::DType sits::kernel::parseWeightTypeOption(StringRef name) {
  std::string error;
  std::optional<format::DType> type =
      codegen::parseWeightType(name.str(), &error);
  return type ? *type : format::DType::F16;
}

codegen::CodegenOptions
sits::kernel::planningOptions(StringRef dtype, StringRef target,
                              int64_t maxPrefillTokens) {
  codegen::CodegenOptions options;
  options.weightType = parseWeightTypeOption(dtype);
  std::string error;
  if (std::optional<codegen::Target> parsed =
          codegen::parseTarget(target.str(), &error))
    options.target = *parsed;
  options.maxPrefillTokens = maxPrefillTokens;
  return options;
}

unsigned sits::kernel::parseTargetSmOption(StringRef name) {
  std::string error;
  std::optional<codegen::Target> target =
      codegen::parseTarget(name.str(), &error);
  return target ? target->getSm() : codegen::Target().getSm();
}
