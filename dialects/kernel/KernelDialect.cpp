//===- KernelDialect.cpp - The kernel dialect -----------------------------===//

#include "dialects/kernel/KernelDialect.h"
#include "dialects/kernel/KernelOps.h"
#include "dialects/sits/SitsOps.h"

#include "sits/EngineFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace sits::kernel;

#include "dialects/kernel/KernelDialect.cpp.inc"
#include "dialects/kernel/KernelEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kernel/KernelAttrs.cpp.inc"

void KernelDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/kernel/KernelOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/kernel/KernelAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The persistent decode schedule's syntax (checks: KernelSchedule.cpp)
//===----------------------------------------------------------------------===//

/// `[a, b, ...]`, possibly empty.
static ParseResult parseList(AsmParser &parser, SmallVectorImpl<int64_t> &out) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    int64_t value = 0;
    if (parser.parseInteger(value))
      return failure();
    out.push_back(value);
    return success();
  });
}

static void printList(AsmPrinter &printer, ArrayRef<int64_t> values) {
  printer << "[";
  llvm::interleaveComma(values, printer);
  printer << "]";
}

/// `name = ` then an integer or a list.
static ParseResult parseField(AsmParser &parser, StringRef name) {
  return failure(parser.parseKeyword(name) || parser.parseEqual());
}

Attribute DecodeScheduleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t blocks = 0;
  SmallVector<int64_t> buckets;
  if (parser.parseLess() || parseField(parser, "blocks") ||
      parser.parseInteger(blocks) || parser.parseComma() ||
      parseField(parser, "buckets") || parseList(parser, buckets) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    blocks, buckets);
}

void DecodeScheduleAttr::print(AsmPrinter &printer) const {
  printer << "<blocks = " << getBlocks() << ", buckets = ";
  printList(printer, getBuckets());
  printer << ">";
}

Attribute TaskAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t id = 0;
  SmallVector<int64_t> tiles, firstBlock, deps;
  if (parser.parseLess() || parseField(parser, "id") ||
      parser.parseInteger(id) || parser.parseComma() ||
      parseField(parser, "tiles") || parseList(parser, tiles) ||
      parser.parseComma() || parseField(parser, "first_block") ||
      parseList(parser, firstBlock) || parser.parseComma() ||
      parseField(parser, "deps") || parseList(parser, deps))
    return {};
  bool prefetch = succeeded(parser.parseOptionalComma());
  if ((prefetch && parser.parseKeyword("prefetch")) || parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    id, tiles, firstBlock, deps, prefetch);
}

void TaskAttr::print(AsmPrinter &printer) const {
  printer << "<id = " << getId() << ", tiles = ";
  printList(printer, getTiles());
  printer << ", first_block = ";
  printList(printer, getFirstBlock());
  printer << ", deps = ";
  printList(printer, getDeps());
  if (getPrefetch())
    printer << ", prefetch";
  printer << ">";
}

/// Whether `op` becomes one launch of a linear kernel (GEMV or GEMM).
static bool isLinearLaunch(Operation *op) {
  if (auto launch = dyn_cast<LaunchOp>(op))
    return launch.getFusion() != FusionKind::RopeKVAppend &&
           launch.getFusion() != FusionKind::Norm;
  return isa<sits::LinearOp, sits::LMHeadOp, sits::TVCLMHeadOp>(op) &&
         !getEnclosingLaunch(op);
}

static bool isAttentionKernel(KernelKind kernel) {
  return kernel >= KernelKind::Attention &&
         kernel <= KernelKind::AttentionKVQMma;
}

/// The one-kernel launches (block size in `threads`).
static bool isRowKernel(KernelKind kernel) {
  return kernel >= KernelKind::Embedding;
}

/// Whether `op` becomes one launch of the one-kernel `kernel`; names the op
/// it runs in `what`.
static bool runsRowKernel(Operation *op, KernelKind kernel, const char **what) {
  auto launch = dyn_cast<LaunchOp>(op);
  switch (kernel) {
  case KernelKind::Embedding:
    *what = "a sits.embedding";
    return isa<sits::EmbeddingOp>(op);
  case KernelKind::RMSNorm:
    *what = "a sits.rms_norm (or a <norm> kernel.launch)";
    return isa<sits::RMSNormOp>(op) ||
           (launch && launch.getFusion() == FusionKind::Norm);
  case KernelKind::LayerNorm:
    *what = "a sits.layer_norm";
    return isa<sits::LayerNormOp>(op);
  case KernelKind::Rope:
    *what = "a sits.rope";
    return isa<sits::RopeOp>(op);
  case KernelKind::AppendKV:
    *what = "a sits.kv_cache.append (or a <rope_kv_append> kernel.launch)";
    return isa<sits::KVAppendOp>(op) ||
           (launch && launch.getFusion() == FusionKind::RopeKVAppend);
  case KernelKind::Elementwise:
    *what = "a sits.add, sits.activation or sits.glu";
    return isa<sits::AddOp, sits::ActivationOp, sits::GLUOp>(op);
  default:
    *what = "";
    return false;
  }
}

static bool isSplitAttentionKernel(KernelKind kernel) {
  return kernel == KernelKind::AttentionSplit ||
         kernel == KernelKind::AttentionKVQSplit ||
         kernel == KernelKind::AttentionKVQMma;
}

/// kernel.buffers (a slice or unit per result) and kernel.scratch (slices).
static LogicalResult verifySlices(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  bool perResult = name == KernelDialect::kBuffersAttrName;
  auto entries = dyn_cast<ArrayAttr>(attr.getValue());
  if (!entries)
    return op->emitError() << "'" << name << "' must be an array of "
                           << (perResult ? "#kernel.slice or unit, one per "
                                           "result"
                                         : "#kernel.slice")
                           << ", got " << attr.getValue();
  if (getEnclosingLaunch(op))
    return op->emitError() << "'" << name
                           << "' belongs on the kernel.launch, not on the ops "
                              "of its region";
  if (perResult && entries.size() != op->getNumResults())
    return op->emitError() << "'" << name << "' has " << entries.size()
                           << " entries for " << op->getNumResults()
                           << " results";
  for (Attribute entry : entries) {
    if (perResult && isa<UnitAttr>(entry))
      continue;
    auto slice = dyn_cast<SliceAttr>(entry);
    if (!slice)
      return op->emitError()
             << "'" << name << "' holds " << entry << ", not a #kernel.slice"
             << (perResult ? " or unit" : "");
    if (slice.getOffset() < 0 ||
        slice.getOffset() % KernelDialect::kWorkspaceAlignment != 0)
      return op->emitError()
             << slice << ": the offset must be a non-negative multiple of "
             << KernelDialect::kWorkspaceAlignment;
    if (slice.getBytes() <= 0)
      return op->emitError() << slice << ": a slice holds at least one byte";
  }
  return success();
}

/// A step function's integer attribute of at least `least` (`what`
/// integer).
static LogicalResult verifyStepInteger(Operation *op, NamedAttribute attr,
                                       int64_t least, llvm::StringRef what) {
  auto value = dyn_cast<IntegerAttr>(attr.getValue());
  if (!value || value.getInt() < least)
    return op->emitError() << "'" << attr.getName().getValue() << "' must be "
                           << what << " integer, got " << attr.getValue();
  if (!isa<FunctionOpInterface>(op))
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' belongs on a step function";
  return success();
}

LogicalResult KernelDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  if (attr.getName() == kWeightLayoutAttrName) {
    if (!isa<WeightLayoutAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kWeightLayoutAttrName
             << "' must be a #kernel.weight_layout, got " << attr.getValue();
    if (!isa<sits::DequantizeOp>(op))
      return op->emitError() << "'" << kWeightLayoutAttrName
                             << "' belongs on the sits.dequantize of a "
                                "quantized weight";
    return success();
  }
  if (attr.getName() == kBuffersAttrName || attr.getName() == kScratchAttrName)
    return verifySlices(op, attr);
  if (attr.getName() == kKVPagesAttrName) {
    auto pages = dyn_cast<KVPagesAttr>(attr.getValue());
    if (!pages)
      return op->emitError()
             << "'" << kKVPagesAttrName << "' must be a #kernel.kv_pages, got "
             << attr.getValue();
    if (!isa<FunctionOpInterface>(op))
      return op->emitError()
             << "'" << kKVPagesAttrName << "' belongs on a step function";
    if (!format::KVCacheConfig::validBlockTokens(pages.getBlockTokens()))
      return op->emitError() << "block_tokens = " << pages.getBlockTokens()
                             << ": a paged KV cache's blocks hold a power of "
                                "two from 16 to 1024 tokens";
    if (pages.getBlocks() < 1 || pages.getBlocks() > (int64_t(1) << 30))
      return op->emitError() << "blocks = " << pages.getBlocks()
                             << ": a paged KV cache has 1 to 2^30 blocks";
    return success();
  }
  if (attr.getName() == kWorkspaceBytesAttrName)
    return verifyStepInteger(op, attr, 0, "a non-negative");
  if (attr.getName() == kFewRowTokensAttrName)
    return verifyStepInteger(op, attr, 1, "a positive");
  if (attr.getName() == kDecodeScheduleAttrName) {
    auto schedule = dyn_cast<DecodeScheduleAttr>(attr.getValue());
    if (!schedule)
      return op->emitError()
             << "'" << kDecodeScheduleAttrName
             << "' must be a #kernel.decode_schedule, got " << attr.getValue();
    return verifyDecodeSchedule(op, schedule);
  }
  if (attr.getName() == kTaskAttrName) {
    if (!isa<TaskAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kTaskAttrName << "' must be a #kernel.task, got "
             << attr.getValue();
    if (getEnclosingLaunch(op))
      return op->emitError() << "'" << kTaskAttrName
                             << "' belongs on the kernel.launch, not on the "
                                "ops of its region";
    if (!op->hasAttr(kConfigAttrName) && !op->hasAttr(kBuffersAttrName))
      return op->emitError() << "'" << kTaskAttrName
                             << "' belongs on an op that becomes a launch";
    return success();
  }
  if (attr.getName() != kConfigAttrName)
    return op->emitError() << "unknown kernel dialect attribute "
                           << attr.getName();
  auto config = dyn_cast<ConfigAttr>(attr.getValue());
  if (!config)
    return op->emitError() << "'" << kConfigAttrName
                           << "' must be a #kernel.config, got "
                           << attr.getValue();
  if (getEnclosingLaunch(op))
    return op->emitError() << "'" << kConfigAttrName
                           << "' belongs on the kernel.launch, not on the "
                              "ops of its region";
  const KernelKind kernel = config.getKernel();
  if (isRowKernel(kernel)) {
    const char *what = "";
    if (!runsRowKernel(op, kernel, &what))
      return op->emitError() << "the " << stringifyKernelKind(kernel)
                             << " kernel runs " << what;
    int64_t threads = config.getThreads();
    if (threads < 32 || threads > 1024 || threads % 32 != 0)
      return op->emitError() << "threads = " << threads << ": the "
                             << stringifyKernelKind(kernel)
                             << " kernel takes whole warps, 32 to 1024";
  } else if (config.getThreads() != 0) {
    return op->emitError() << "threads = " << config.getThreads() << ": the "
                           << stringifyKernelKind(kernel)
                           << " kernel has its own block size (0)";
  }
  if (!isRowKernel(kernel) &&
      (isAttentionKernel(kernel) ? !isa<sits::AttentionOp>(op)
                                 : !isLinearLaunch(op)))
    return op->emitError()
           << "the " << stringifyKernelKind(kernel)
           << (isAttentionKernel(kernel)
                   ? " kernel runs a sits.attention"
                   : " kernel runs linear layers: a linear kernel.launch, a "
                     "sits.linear or a sits.lm_head");
  bool tensorCoreGemv = kernel == KernelKind::GemvTensorCore ||
                        kernel == KernelKind::GemvQuantTensorCore;
  int64_t tiles = config.getTiles();
  if (tiles != 1 && !(tensorCoreGemv && (tiles == 2 || tiles == 4)))
    return op->emitError() << "tiles = " << tiles
                           << ": only the tensor-core GEMVs take 2 or 4 "
                              "tiles per block (1 otherwise)";
  int64_t tokenGroups = config.getTokenGroups();
  if (tokenGroups != 1 &&
      !(kernel == KernelKind::GemvTensorCore && tokenGroups >= 2 &&
        tokenGroups <= KernelDialect::kMaxTokenGroups))
    return op->emitError() << "token_groups = " << tokenGroups
                           << ": only gemv_tc takes 2 to "
                           << KernelDialect::kMaxTokenGroups
                           << " groups of 8 tokens a pass (1 otherwise)";
  int64_t splitKeys = config.getSplitKeys();
  if (isSplitAttentionKernel(kernel)
          ? splitKeys < 16 || splitKeys > 4096 || splitKeys % 16 != 0
          : splitKeys != 0)
    return op->emitError() << "split_keys = " << splitKeys << ": "
                           << stringifyKernelKind(kernel)
                           << (isSplitAttentionKernel(kernel)
                                   ? " takes a multiple of 16 from 16 to 4096"
                                   : " does not split the keys");
  if (config.getWeightBytes() < 0)
    return op->emitError() << "weight_bytes must not be negative";
  return success();
}
