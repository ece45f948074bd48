//===- HoistRope.cpp - Precomputed RoPE tables, one load per step ---------===//
//
// Exports compute RoPE's cos and sin from the positions in the graph, and the
// opset-23 exports do it again in every layer. Nothing there depends on
// anything but the position, so the whole computation becomes a table built
// at compile time, and the per-layer computations become one table load per
// step that every layer shares.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

namespace sits {
#define GEN_PASS_DEF_HOISTROPE
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {

constexpr llvm::StringLiteral kPassName = "sits-hoist-rope";

/// What makes two cos/sin computations load the same rows of one table.
struct TableKey {
  ElementsAttr invFreq;
  float scaling;
  Type elementType;
  bool operator<(const TableKey &other) const {
    return std::make_tuple(invFreq.getAsOpaquePointer(), scaling,
                           elementType.getAsOpaquePointer()) <
           std::make_tuple(other.invFreq.getAsOpaquePointer(), other.scaling,
                           other.elementType.getAsOpaquePointer());
  }
};

/// A precomputed table and how far it strays from the closed form.
struct RopeTable {
  DenseElementsAttr values;
  double maxDeviation = 0.0;
};

/// Builds rows 0..rows-1 of the table exactly as the graph's formula computes
/// them (one f32 product, then cos/sin, then the f32 scaling), and checks
/// every entry against cos/sin of the exact angle in double precision. The
/// only difference the check allows is the f32 rounding of the angle and of
/// the results, so a table that passes is the graph's formula, not a guess.
FailureOr<RopeTable> buildTable(ArrayRef<float> invFreq, float scaling,
                                int64_t rows, FloatType elementType,
                                Location loc) {
  int64_t half = invFreq.size();
  std::vector<float> data(rows * 2 * half);
  RopeTable table;
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t k = 0; k < half; ++k) {
      float angle = static_cast<float>(p) * invFreq[k];
      float cosValue = static_cast<float>(std::cos(double(angle))) * scaling;
      float sinValue = static_cast<float>(std::sin(double(angle))) * scaling;
      data[p * 2 * half + k] = cosValue;
      data[p * 2 * half + half + k] = sinValue;

      double exactAngle = double(p) * double(invFreq[k]);
      double bound = std::fabs(double(scaling)) *
                     (std::fabs(exactAngle) * 0x1p-23 + 0x1p-21);
      double cosError = std::fabs(cosValue - std::cos(exactAngle) * scaling);
      double sinError = std::fabs(sinValue - std::sin(exactAngle) * scaling);
      double error = std::max(cosError, sinError);
      if (!(error <= bound)) {
        emitError(loc) << "RoPE table entry (position " << p << ", frequency "
                       << k << ") deviates by " << error
                       << " from the closed form, more than f32 rounding "
                          "allows ("
                       << bound << ")";
        return failure();
      }
      table.maxDeviation = std::max(table.maxDeviation, error);
    }
  }
  auto type = RankedTensorType::get({rows, 2 * half}, elementType);
  if (elementType.isF32()) {
    table.values = DenseElementsAttr::get(type, llvm::ArrayRef(data));
  } else {
    // Round once, from the f32 values, to the activations' type.
    std::vector<APFloat> rounded;
    rounded.reserve(data.size());
    for (float value : data) {
      APFloat converted(value);
      bool losesInfo;
      converted.convert(elementType.getFloatSemantics(),
                        APFloat::rmNearestTiesToEven, &losesInfo);
      rounded.push_back(converted);
    }
    table.values = DenseElementsAttr::get(type, rounded);
  }
  return table;
}

/// The f32 values of a 1-D float attribute, or failure for non-finite ones.
FailureOr<std::vector<float>> getInvFreq(RopeCosSinOp op) {
  std::vector<float> values;
  for (APFloat value : op.getInvFreq().getValues<APFloat>()) {
    bool losesInfo;
    value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    float f = value.convertToFloat();
    if (!std::isfinite(f))
      return op.emitOpError() << "has a non-finite inv_freq value";
    values.push_back(f);
  }
  return values;
}

struct HoistRopePass : public sits::impl::HoistRopeBase<HoistRopePass> {
  using HoistRopeBase::HoistRopeBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), kPassName,
                    {"rope_tables_precomputed", "rope_loads_hoisted",
                     "rope_loads_shared"});
    if (maxSeqLen < 1 || maxSeqLen > (int64_t{1} << 24)) {
      getOperation().emitError()
          << kPassName << ": max-seq-len must be between 1 and 2^24 (f32 "
          << "positions are exact up to there), got " << maxSeqLen.getValue();
      return signalPassFailure();
    }
    // Tables are shared by every function of the module (the engine stores
    // each weight once, by name).
    std::map<TableKey, std::pair<std::string, RopeTable>> tables;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(hoistInFunction(func, tables, audit)))
        return signalPassFailure();
  }

  LogicalResult
  hoistInFunction(func::FuncOp func,
                  std::map<TableKey, std::pair<std::string, RopeTable>> &tables,
                  PassAudit &audit) {
    // Group the computations that load the same rows: same positions, same
    // table.
    // (In first-seen order, so that table names and the audit are stable.)
    std::vector<std::pair<std::pair<Value, TableKey>, SmallVector<RopeCosSinOp>>>
        groups;
    std::map<std::pair<const void *, TableKey>, size_t> groupIndex;
    func.walk([&](RopeCosSinOp op) {
      TableKey key{op.getInvFreq(), op.getAttentionScaling().convertToFloat(),
                   op.getCos().getType().getElementType()};
      auto [it, inserted] = groupIndex.insert(
          {{op.getPositions().getAsOpaquePointer(), key}, groups.size()});
      if (inserted)
        groups.push_back({{op.getPositions(), key}, {}});
      groups[it->second].second.push_back(op);
    });
    if (groups.empty())
      return success();

    // First every table, at the start of the function in first-use order;
    // then the loads, each right after its positions (or after the tables
    // and earlier loads, for positions that are function arguments).
    OpBuilder builder(func.getContext());
    Block &entry = func.getBody().front();
    std::map<TableKey, Value> tableValues;
    Operation *lastAtStart = nullptr;
    for (auto &[groupKey, ops] : groups) {
      TableKey key = groupKey.second;
      RopeCosSinOp first = ops.front();
      auto it = tables.find(key);
      if (it == tables.end()) {
        FailureOr<std::vector<float>> invFreq = getInvFreq(first);
        if (failed(invFreq))
          return failure();
        FailureOr<RopeTable> table = buildTable(
            *invFreq, key.scaling, maxSeqLen,
            cast<FloatType>(key.elementType), first.getLoc());
        if (failed(table))
          return failure();
        std::string name = llvm::formatv("rope.table.{0}", tables.size());
        it = tables.insert({key, {name, *table}}).first;
        audit.add("rope_tables_precomputed");
      }
      Value &tableValue = tableValues[key];
      if (tableValue)
        continue;
      if (lastAtStart)
        builder.setInsertionPointAfter(lastAtStart);
      else
        builder.setInsertionPointToStart(&entry);
      tableValue =
          WeightOp::create(builder, first.getLoc(),
                           builder.getStringAttr(it->second.first),
                           it->second.second.values);
      lastAtStart = tableValue.getDefiningOp();
    }

    for (auto &[groupKey, ops] : groups) {
      auto [positions, key] = groupKey;
      RopeCosSinOp first = ops.front();
      auto &[tableName, table] = tables.at(key);
      Value tableValue = tableValues.at(key);
      SmallVector<Location> locations;
      for (RopeCosSinOp op : ops)
        locations.push_back(op.getLoc());
      if (Operation *def = positions.getDefiningOp())
        builder.setInsertionPointAfter(def);
      else
        builder.setInsertionPointAfter(lastAtStart);
      auto gather = RopeGatherOp::create(
          builder, builder.getFusedLoc(locations), first.getCos().getType(),
          first.getSin().getType(), tableValue, positions);
      if (!positions.getDefiningOp())
        lastAtStart = gather;
      for (RopeCosSinOp op : ops) {
        op.getCos().replaceAllUsesWith(gather.getCos());
        op.getSin().replaceAllUsesWith(gather.getSin());
        op.erase();
      }
      audit.add("rope_loads_hoisted", ops.size());
      audit.add("rope_loads_shared");
      int64_t rotaryDim = cast<ShapedType>(table.values.getType()).getDimSize(1);
      audit.change(
          locations,
          llvm::formatv("{0} sits.rope_cos_sin (cos/sin of positions from "
                        "{1} inverse frequencies, computed per layer and step)",
                        ops.size(), rotaryDim / 2),
          llvm::formatv("one sits.rope_gather of '{0}' [{1} x {2}] after the "
                        "positions, shared by every layer",
                        tableName, maxSeqLen, rotaryDim),
          llvm::formatv("cos/sin depend on the position alone; the table "
                        "holds the graph's own f32 formula for positions 0.."
                        "{0} and agrees with the closed form within {1:e} "
                        "(f32 rounding); later positions fail at run time",
                        maxSeqLen - 1, table.maxDeviation));
    }
    return success();
  }
};

} // namespace
