//===- PlanQuant.cpp - Linear layers over int8/int4 weights ---------------===//
//
// `--sits-insert-qdq weights=int8|int4` makes a linear layer's weight
// `sits.dequantize %data, %scales` of two constants. Codegen stores the
// levels (i8, or i4x2: two per byte) and the f16 scales as they are, and:
//   decode GEMV, LM head   read them directly (gemv_quant.cuh), one scale
//                          multiply per group;
//   prefill GEMM           `dequantize` into a workspace value in the
//                          engine's weight type, then the usual GEMM.
// Everything the fp16 path fuses (Q/K/V segments, gate/up + GLU, residual,
// biases, the LM head's gather) is the same.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/ProgramPlanner.h"

namespace sits::codegen::detail {

using format::DType;

FailureOr<LinearQuant> ProgramPlanner::quantizedWeight(Operation *op,
                                                       DequantizeOp dequantize,
                                                       int64_t k,
                                                       LinearSegment &segment) {
  auto fail = [&]() {
    return dequantize.emitError()
           << "codegen: quantized weight read by " << describeOp(op) << ": ";
  };
  LinearQuant quant;
  quant.bits = static_cast<int>(dequantize.getBits());
  quant.group = static_cast<int64_t>(dequantize.getGroupSize());
  if (quant.bits != 8 && quant.bits != 4)
    return fail() << "bits must be 8 or 4, got " << quant.bits;
  if (dequantize.getAxis() != 1)
    return fail() << "the GEMV reads groups along the input features "
                     "(axis 1), got axis "
                  << dequantize.getAxis();
  // One 16-byte load holds 16 int8 or 32 int4 levels; it must lie in one
  // group, since the kernels multiply each load's sums by one scale.
  const int64_t perLoad = quant.bits == 8 ? 16 : 32;
  if (quant.group < perLoad || quant.group % perLoad != 0)
    return fail() << "group_size " << quant.group << " cannot be read: the "
                  << "GEMV loads " << perLoad << " int" << quant.bits
                  << " levels (16 bytes) under one scale, so a group must be "
                     "a multiple of "
                  << perLoad;
  auto data = dequantize.getData().getDefiningOp<WeightOp>();
  auto scales = dequantize.getScales().getDefiningOp<WeightOp>();
  if (!data || !scales)
    return fail() << "its data and scales must be sits.weight constants";
  auto dataType = cast<ShapedType>(data.getType());
  auto scaleType = cast<ShapedType>(scales.getType());
  const int64_t rows = segment.rows;
  const int64_t packed = quant.bits == 8 ? k : (k + 1) / 2;
  quant.rowBytes = dataType.getRank() == 2 ? dataType.getDimSize(1) : 0;
  if (dataType.getRank() != 2 || dataType.getDimSize(0) != rows ||
      quant.rowBytes % 16 != 0 || quant.rowBytes < packed ||
      quant.rowBytes > packed + 15)
    return fail() << "data " << dataType << " must be [" << rows
                  << ", row bytes] with rows of " << packed
                  << " bytes padded to a multiple of 16";
  if (!scaleType.getElementType().isF16() || scaleType.getRank() != 2 ||
      scaleType.getDimSize(0) != rows ||
      scaleType.getDimSize(1) != quant.groups(k))
    return fail() << "scales " << scaleType << " must be f16 [" << rows << ", "
                  << quant.groups(k) << "]";
  FailureOr<unsigned> dataIndex =
      weights.bind(data, quant.bits == 8 ? DType::I8 : DType::I4X2);
  FailureOr<unsigned> scaleIndex = weights.bind(scales, DType::F16);
  if (failed(dataIndex) || failed(scaleIndex))
    return failure();
  // The storage order the IR chose (--kernel-choose-weight-layout); every
  // kernel that reads the weight (decode GEMV of either kind, prefill
  // dequantization) is told so.
  auto layout = dequantize->getAttrOfType<kernel::WeightLayoutAttr>(
      kernel::KernelDialect::kWeightLayoutAttrName);
  if (!layout)
    return fail() << "no '" << kernel::KernelDialect::kWeightLayoutAttrName
                  << "' says how its levels are stored (the pass "
                     "--kernel-choose-weight-layout chooses it)";
  quant.interleaved = layout.getValue() == kernel::WeightLayout::Interleaved;
  if (quant.interleaved)
    if (std::string why = checkInterleavedRows(quant.bits, quant.group, k);
        !why.empty())
      return fail() << "cannot store it interleaved: " << why;
  if (!weights.setInterleaved(*dataIndex, quant.interleaved ? quant.bits : 0))
    return fail() << "another sits.dequantize of '" << data.getName()
                  << "' stores it in the other layout";
  segment.weight = *dataIndex;
  segment.scales = *scaleIndex;
  return quant;
}

LogicalResult ProgramPlanner::checkDequantizeUsers(DequantizeOp dequantize) {
  for (OpOperand &use : dequantize.getResult().getUses()) {
    Operation *user = use.getOwner();
    bool isWeight = false;
    if (auto linear = dyn_cast<LinearOp>(user))
      isWeight = &use == &linear.getWeightMutable();
    else if (auto head = dyn_cast<LMHeadOp>(user))
      isWeight = &use == &head.getWeightMutable();
    if (!isWeight)
      return dequantize.emitError()
             << "codegen: cannot compile 'sits.dequantize' read by "
             << describeOp(user)
             << ": no GPU kernel implements it; it compiles only as the "
                "weight of a sits.linear or sits.lm_head";
  }
  return success();
}

LogicalResult ProgramPlanner::takeLinearKernel(Operation *owner,
                                               LinearLaunch &desc) {
  LinearShape shape;
  shape.decode = desc.decode;
  shape.gatherLast = desc.gatherLast;
  shape.gated = desc.epilogue == LinearEpilogue::Glu;
  shape.tensorCores = desc.tensorCores;
  shape.weightType = desc.weightType;
  shape.k = desc.k;
  for (const LinearSegment &segment : desc.segments)
    shape.segmentRows.push_back(segment.rows);
  shape.quantBits = desc.quant.bits;
  shape.quantGroup = desc.quant.group;
  auto config = owner->getAttrOfType<kernel::ConfigAttr>(
      kernel::KernelDialect::kConfigAttrName);
  if (!config)
    return owner->emitError()
           << "codegen: no '" << kernel::KernelDialect::kConfigAttrName
           << "' says which kernel runs this linear launch (the pass "
              "--kernel-select-linear-kernels chooses it)";
  std::string why =
      checkLinearKernel(shape, config.getKernel(), config.getTiles(),
                        config.getTokenGroups(), config.getKSplits());
  if (!why.empty())
    return owner->emitError()
           << "codegen: cannot launch " << config << ": " << why;
  desc.kernel = config.getKernel();
  desc.tiles = config.getTiles();
  desc.tokenGroups = config.getTokenGroups();
  desc.kSplits = config.getKSplits();
  return success();
}

LogicalResult ProgramPlanner::addLinearLaunch(LinearLaunch desc,
                                              ArrayRef<Operation *> ops) {
  Operation *owner = kernel::getEnclosingLaunch(ops.front());
  if (!owner)
    owner = ops.front();
  if (failed(takeLinearKernel(owner, desc)))
    return failure();
  // What the operand-layout producers ask of their readers (hand-written IR
  // can ask it of a kernel that cannot give it).
  const bool quantTensorCore =
      desc.kernel == kernel::KernelKind::GemvQuantTensorCore;
  const bool tensorGemm = desc.kernel == kernel::KernelKind::GemmTensorCore;
  const bool halfTensorCore =
      (desc.kernel == kernel::KernelKind::GemvTensorCore && !desc.norm) ||
      tensorGemm;
  const int readsBits =
      quantTensorCore && desc.quant.interleaved ? desc.quant.bits
      : halfTensorCore ? kernel::KernelDialect::kInputOrderOperandBits
                       : 0;
  if (desc.halfInput() && desc.inputOperandBits != readsBits)
    return owner->emitError()
           << "codegen: its input is written as the 16-bit operands of "
           << desc.inputOperandBits
           << "-bit weights (output_operand_bits), which only gemv_tc and "
              "gemm_tc (16) and gemv_quant_tc over interleaved rows (8, 4) "
              "read, without a fused norm";
  if (desc.outputOperandBits &&
      !(desc.epilogue == LinearEpilogue::Glu &&
        (quantTensorCore || tensorGemm ||
         desc.kernel == kernel::KernelKind::GemvTensorCore)))
    return owner->emitError()
           << "codegen: output_operand_bits needs a gate/up launch on a "
              "tensor-core GEMV or GEMM";
  if (desc.outputOperandBits && tensorGemm &&
      desc.outputOperandBits != kernel::KernelDialect::kInputOrderOperandBits)
    return owner->emitError()
           << "codegen: a gate/up gemm_tc writes its output as the operands "
              "of 16-bit weights, not of "
           << desc.outputOperandBits << "-bit ones (output_operand_bits)";
  if (desc.quant.bits && !desc.decode) {
    SmallVector<unsigned> scratches;
    for (LinearSegment &segment : desc.segments) {
      FailureOr<ArgBinding> dequantized =
          scratch("dequantized weight of " + describeOp(ops.front()),
                  static_cast<uint64_t>(desc.k),
                  static_cast<uint64_t>(segment.rows) * desc.k *
                      format::dtypeBytes(desc.weightType));
      if (failed(dequantized))
        return failure();
      scratches.push_back(dequantized->index);
      DequantizeLaunch dequantize;
      dequantize.quant = desc.quant;
      dequantize.rows = segment.rows;
      dequantize.k = desc.k;
      dequantize.weightType = desc.weightType;
      dequantize.data = segment.weight;
      dequantize.scales = *segment.scales;
      dequantize.out = *dequantized;
      segment.weightArg = dequantize.out;
      addLaunch(planDequantize(dequantize), ops);
    }
    // The dequantized weights and the GEMM's inputs (bound before the
    // dequantize launches were added) live until the GEMM, the next launch.
    // Its outputs were defined earlier than they are written, which only
    // makes their lifetimes longer.
    for (const ArgBinding *arg :
         {&desc.input, desc.residual ? &*desc.residual : nullptr})
      if (arg && arg->kind == ArgBinding::Kind::Buffer &&
          arg->buffer == BufferKind::Workspace)
        scratches.push_back(arg->index);
    for (unsigned index : scratches)
      program.values[index].lastLaunch =
          std::max(program.values[index].lastLaunch, currentLaunch());
    desc.quant = LinearQuant();
  }
  if (desc.kSplits > 1) {
    // The split sums of at most kSplits token tiles' slabs, live for this
    // launch; the counters are the engine's (zero between launches).
    std::vector<int64_t> rows;
    for (const LinearSegment &segment : desc.segments)
      rows.push_back(segment.rows);
    const int64_t columnTiles =
        gemmTensorCoreColumnTiles(rows, desc.epilogue == LinearEpilogue::Glu);
    FailureOr<ArgBinding> partial =
        scratch("split sums of " + describeOp(ops.front()),
                static_cast<uint64_t>(columnTiles * 128),
                static_cast<uint64_t>(
                    gemmSplitPartialBytes(desc.kSplits, columnTiles)));
    if (failed(partial))
      return failure();
    desc.partial = *partial;
    desc.counters = ArgBinding::bufferArg(BufferKind::Counters);
    observed.counterInts =
        std::max<uint64_t>(observed.counterInts,
                           static_cast<uint64_t>(desc.kSplits * columnTiles));
  }
  if (!desc.norm) {
    addLaunch(planLinear(desc), ops);
    return success();
  }
  // The fused rms_norm is part of what the launch runs (audit, comments).
  SmallVector<Operation *> withNorm{fusedNormOp};
  withNorm.append(ops.begin(), ops.end());
  fusedNormOp = nullptr;
  addLaunch(planLinear(desc), withNorm);
  return success();
}

} // namespace sits::codegen::detail
