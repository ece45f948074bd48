//===- WeightViewAttr.cpp - #sits.weight_view -----------------------------===//
//
// Making views (getWeightView, getWeightSlice) and the attribute's checks,
// parser and printer; WeightView.cpp reads them.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/WeightView.h"
#include "dialects/sits/SitsDialect.h"

#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace sits;

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

static std::string checkView(ShapedType type, ElementsAttr source,
                             bool transposed, ArrayRef<int64_t> offsets);

/// The shape a view of `source` slices: `source`'s, transposed or not.
static SmallVector<int64_t> getViewedShape(ShapedType source, bool transposed) {
  SmallVector<int64_t> shape(source.getShape());
  if (transposed)
    std::reverse(shape.begin(), shape.end());
  return shape;
}

/// A view of `source` (not a view) as `type`; `source` itself when that
/// changes nothing; null when it cannot be one.
static ElementsAttr makeView(ElementsAttr source, ShapedType type,
                             bool transposed, ArrayRef<int64_t> offsets) {
  auto from = cast<ShapedType>(source.getType());
  // A slice that takes the whole is no slice.
  if (llvm::all_of(offsets, [](int64_t offset) { return offset == 0; }) &&
      ArrayRef<int64_t>(getViewedShape(from, transposed)) == type.getShape())
    offsets = {};
  if (!transposed && offsets.empty() &&
      from.getElementType() == type.getElementType())
    return from.getShape() == type.getShape() ? source : nullptr;
  if (!checkView(type, source, transposed, offsets).empty())
    return nullptr;
  // Any block of a splat is the splat.
  auto dense = dyn_cast<DenseElementsAttr>(source);
  if (!offsets.empty() && dense && dense.isSplat() &&
      from.getElementType() == type.getElementType())
    return DenseElementsAttr::get(type, dense.getSplatValue<Attribute>());
  return WeightViewAttr::get(type.getContext(), type, source, transposed,
                             offsets);
}

ElementsAttr sits::getWeightView(ElementsAttr source, ShapedType type,
                                 bool transposed) {
  SmallVector<int64_t> offsets;
  if (auto view = dyn_cast<WeightViewAttr>(source)) {
    Type inner = view.getSource().getElementType();
    Type middle = view.getType().getElementType();
    bool exact = inner == middle ||
                 (middle.isF32() && (inner.isF16() || inner.isBF16()));
    if (exact) {
      // The transpose of a slice is the transposed block.
      offsets.assign(view.getOffsets().begin(), view.getOffsets().end());
      if (transposed)
        std::reverse(offsets.begin(), offsets.end());
      if (!offsets.empty() &&
          ArrayRef<int64_t>(getViewedShape(view.getType(), transposed)) !=
              type.getShape())
        return nullptr;
      return makeView(view.getSource(), type,
                      transposed != view.getTransposed(), offsets);
    }
    source = materializeWeight(view);
    if (!source)
      return nullptr;
  }
  return makeView(source, type, transposed, offsets);
}

ElementsAttr sits::getWeightSlice(ElementsAttr source, ShapedType type,
                                  ArrayRef<int64_t> offsets) {
  auto from = cast<ShapedType>(source.getType());
  if (!from.hasStaticShape() || !type.hasStaticShape() ||
      from.getElementType() != type.getElementType() ||
      from.getRank() != type.getRank() ||
      static_cast<int64_t>(offsets.size()) != type.getRank())
    return nullptr;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (offsets[d] < 0 || offsets[d] + type.getDimSize(d) > from.getDimSize(d))
      return nullptr;
  auto view = dyn_cast<WeightViewAttr>(source);
  if (!view)
    return makeView(source, type, /*transposed=*/false, offsets);
  // A block of a view is a block of its source, read the same way.
  SmallVector<int64_t> combined(offsets);
  for (auto [offset, inner] : llvm::zip(combined, view.getOffsets()))
    offset += inner;
  return makeView(view.getSource(), type, view.getTransposed(), combined);
}

//===----------------------------------------------------------------------===//
// #sits.weight_view
//===----------------------------------------------------------------------===//

/// Why the block of `viewed` (the source as the view reads it, transposed
/// or not) at `offsets` cannot have `type`'s shape, or "".
static std::string checkSlice(ShapedType viewed, ShapedType type,
                              ArrayRef<int64_t> offsets) {
  std::string message;
  llvm::raw_string_ostream os(message);
  auto list = [&] {
    os << "[";
    llvm::interleaveComma(offsets, os);
    os << "]";
  };
  int64_t rank = viewed.getRank();
  if (type.getRank() != rank || static_cast<int64_t>(offsets.size()) != rank) {
    os << "a weight view slice of " << viewed
       << " needs one offset per dimension and the same rank, got offsets ";
    list();
    os << " and " << type;
    return message;
  }
  bool whole = true;
  for (int64_t d = 0; d < rank; ++d) {
    if (offsets[d] < 0 ||
        offsets[d] + type.getDimSize(d) > viewed.getDimSize(d)) {
      os << "a weight view slice at ";
      list();
      os << " of shape " << type << " is not inside " << viewed;
      return message;
    }
    bool cut = type.getDimSize(d) != viewed.getDimSize(d);
    whole &= !cut && offsets[d] == 0;
    if (cut && d > 0 && d + 1 < rank) {
      os << "a weight view slice cuts only the first and last dimensions of "
         << viewed << " (its rows must be evenly spaced), got " << type;
      return message;
    }
  }
  if (whole)
    os << "a weight view slice that takes the whole of " << viewed
       << " (leave out the offsets)";
  return message;
}

/// Why `source` cannot be viewed as `type`, or "".
static std::string checkView(ShapedType type, ElementsAttr source,
                             bool transposed, ArrayRef<int64_t> offsets) {
  std::string message;
  llvm::raw_string_ostream os(message);
  if (!source) {
    os << "a weight view needs a source constant";
    return message;
  }
  if (isa<WeightViewAttr>(source)) {
    os << "a weight view cannot view another view (view its source once)";
    return message;
  }
  auto from = dyn_cast<ShapedType>(source.getType());
  if (!from || !from.hasStaticShape() || !type.hasStaticShape()) {
    os << "a weight view needs static shapes";
    return message;
  }
  if (!offsets.empty()) {
    if (transposed && from.getRank() != 2)
      os << "a transposing weight view needs a source of rank 2, got " << from;
    else
      os << checkSlice(RankedTensorType::get(getViewedShape(from, transposed),
                                             from.getElementType()),
                       type, offsets);
  } else if (transposed) {
    if (from.getRank() != 2 || type.getRank() != 2 ||
        from.getDimSize(0) != type.getDimSize(1) ||
        from.getDimSize(1) != type.getDimSize(0))
      os << "a transposing weight view of " << from
         << " must be its transpose, got " << type;
  } else if (from.getShape() != type.getShape()) {
    os << "a weight view of " << from << " must have its shape, got " << type;
  }
  if (!message.empty())
    return message;
  Type a = from.getElementType(), b = type.getElementType();
  auto isFloat = [](Type t) { return t.isF32() || t.isF16() || t.isBF16(); };
  if (a != b && !(isFloat(a) && isFloat(b)))
    os << "a weight view converts between f16, bf16 and f32 only, got " << a
       << " to " << b;
  else if (a == b && !transposed && offsets.empty())
    os << "a weight view that neither transposes, slices nor converts its "
          "source";
  return message;
}

LogicalResult
WeightViewAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ShapedType type, ElementsAttr source, bool transposed,
                       ArrayRef<int64_t> offsets) {
  std::string message = checkView(type, source, transposed, offsets);
  if (!message.empty())
    return emitError() << message;
  return success();
}

Attribute WeightViewAttr::parse(AsmParser &parser, Type type) {
  ElementsAttr source;
  bool transposed = false;
  SmallVector<int64_t> offsets;
  if (parser.parseLess() || parser.parseAttribute(source))
    return {};
  // `, transposed` and `, offsets = [...]`, in this order.
  bool comma = succeeded(parser.parseOptionalComma());
  if (comma && succeeded(parser.parseOptionalKeyword("transposed"))) {
    transposed = true;
    comma = succeeded(parser.parseOptionalComma());
  }
  if (comma) {
    auto parseOffset = [&] {
      return parser.parseInteger(offsets.emplace_back());
    };
    if (parser.parseKeyword("offsets") || parser.parseEqual() ||
        parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                       parseOffset))
      return {};
    if (offsets.empty()) {
      parser.emitError(parser.getCurrentLocation(),
                       "a weight view's offsets need one per dimension");
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  auto shaped = dyn_cast_or_null<ShapedType>(type);
  if (!shaped) {
    parser.emitError(parser.getNameLoc(),
                     "a weight view needs its type (`: tensor<...>`)");
    return {};
  }
  return parser.getChecked<WeightViewAttr>(parser.getContext(), shaped, source,
                                           transposed,
                                           ArrayRef<int64_t>(offsets));
}

void WeightViewAttr::print(AsmPrinter &printer) const {
  printer << "<" << getSource();
  if (getTransposed())
    printer << ", transposed";
  if (!getOffsets().empty()) {
    printer << ", offsets = [";
    llvm::interleaveComma(getOffsets(), printer);
    printer << "]";
  }
  printer << ">";
}
