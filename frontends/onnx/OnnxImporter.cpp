//===- OnnxImporter.cpp - ONNX model to the onnx dialect ------------------===//

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxLoader.h"
#include "frontends/onnx/OnnxSchema.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOps.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"
#include "dialects/sits/SitsOps.h"
#include "dialects/sits/WeightView.h"

#include "sits_onnx/onnx.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <queue>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using llvm::Expected;

void sits::registerOnnxImportDialects(DialectRegistry &registry) {
  registry.insert<OnnxDialect, SitsDialect, func::FuncDialect>();
}

namespace {

/// Imports one model. Errors are counted so that the importer goes on after
/// an unsupported node and reports every one of them in one run.
class Importer {
public:
  Importer(MLIRContext &context, const OnnxImportOptions &options)
      : context(context), options(options), builder(&context),
        shapes(&context) {}

  OwningOpRef<ModuleOp> run(StringRef path);

private:
  /// An error about `node`, at its location, naming the file and the node.
  InFlightDiagnostic nodeError(const ::onnx::NodeProto &node, Location loc);
  /// An error about the model as a whole.
  InFlightDiagnostic modelError();
  /// Emits a loader error (which names its file).
  void reportError(llvm::Error error);

  LogicalResult importInputs(func::FuncOp function,
                             llvm::StringSet<> &initializerNames);
  LogicalResult importInitializers();
  LogicalResult sortNodes(SmallVectorImpl<int> &order);
  void importNode(const ::onnx::NodeProto &node, int index);
  LogicalResult importOutputs(func::FuncOp function);

  FailureOr<Attribute> convertAttribute(const ::onnx::NodeProto &node,
                                        Location loc,
                                        const ::onnx::AttributeProto &attr,
                                        AttrKind kind);
  FailureOr<ElementsAttr> convertTensor(const TensorData &data, StringRef name);
  void checkValueInfo(const ::onnx::NodeProto *node, Location loc,
                      StringRef name, const TensorFacts &facts);
  void poison(const ::onnx::NodeProto &node) {
    for (const std::string &output : node.output())
      if (!output.empty())
        poisoned.insert(output);
  }

  MLIRContext &context;
  const OnnxImportOptions &options;
  OpBuilder builder;
  SymbolicShapes shapes;
  std::unique_ptr<OnnxModel> model;
  std::string path;
  /// Where errors about the model are reported: `model.onnx:0:0`.
  Location fileLoc = UnknownLoc::get(&context);
  /// ONNX value name -> SSA value.
  llvm::StringMap<Value> values;
  /// Values an earlier error left undefined: their users are skipped
  /// without more errors.
  llvm::StringSet<> poisoned;
  llvm::StringMap<const ::onnx::ValueInfoProto *> valueInfos;
  unsigned errors = 0;
};

InFlightDiagnostic Importer::nodeError(const ::onnx::NodeProto &node,
                                       Location) {
  // Reported at the file (printed `model.onnx:0:0: error: node '...'`): the
  // node's own NameLoc would print without the file.
  ++errors;
  InFlightDiagnostic diag = emitError(fileLoc);
  diag << "node '" << node.name() << "' (";
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    diag << node.domain() << ".";
  diag << node.op_type() << "): ";
  return diag;
}

InFlightDiagnostic Importer::modelError() {
  ++errors;
  return emitError(fileLoc);
}

void Importer::reportError(llvm::Error error) {
  ++errors;
  llvm::handleAllErrors(
      std::move(error),
      [&](const OnnxFileError &fileError) {
        emitError(FileLineColLoc::get(&context, fileError.getFile(), 0, 0))
            << fileError.getMessage();
      },
      [&](const llvm::ErrorInfoBase &other) {
        emitError(fileLoc) << other.message();
      });
}

static std::string describeTensorType(const ::onnx::TypeProto_Tensor &type) {
  std::string text = getOnnxElementTypeName(type.elem_type()) + "[";
  for (int i = 0; i < type.shape().dim_size(); ++i) {
    const ::onnx::TensorShapeProto_Dimension &dim = type.shape().dim(i);
    text += i ? ", " : "";
    text += dim.has_dim_value()   ? std::to_string(dim.dim_value())
            : dim.has_dim_param() ? dim.dim_param()
                                  : "?";
  }
  return text + "]";
}

LogicalResult Importer::importInputs(func::FuncOp function,
                                     llvm::StringSet<> &initializerNames) {
  const ::onnx::GraphProto &graph = model->getProto().graph();
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<std::string> argNames;
  for (const ::onnx::ValueInfoProto &input : graph.input()) {
    const std::string &name = input.name();
    // An input that is also an initializer has a default value: sits
    // compiles it as the constant.
    if (initializerNames.contains(name))
      continue;
    if (name.empty()) {
      modelError() << "a graph input has no name";
      continue;
    }
    if (!input.type().has_tensor_type()) {
      modelError() << "graph input '" << name
                   << "' is not a tensor (sequence, map and optional inputs "
                      "are not supported)";
      continue;
    }
    const ::onnx::TypeProto_Tensor &tensorType = input.type().tensor_type();
    Type elementType = getElementTypeForOnnx(&context, tensorType.elem_type());
    if (!elementType) {
      modelError() << "graph input '" << name << "' has element type "
                   << getOnnxElementTypeName(tensorType.elem_type())
                   << ", which sits does not support";
      continue;
    }
    if (!tensorType.has_shape()) {
      modelError() << "graph input '" << name
                   << "' has no shape; sits needs the rank of every input";
      continue;
    }
    SmallVector<int64_t> dims;
    SmallVector<Attribute> dimNames;
    bool valid = true;
    for (const ::onnx::TensorShapeProto_Dimension &dim :
         tensorType.shape().dim()) {
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) {
          modelError() << "graph input '" << name << "' has negative dimension "
                       << dim.dim_value() << " ("
                       << describeTensorType(tensorType) << ")";
          valid = false;
          break;
        }
        dims.push_back(dim.dim_value());
        dimNames.push_back(builder.getStringAttr(""));
      } else {
        dims.push_back(ShapedType::kDynamic);
        dimNames.push_back(builder.getStringAttr(dim.dim_param()));
      }
    }
    if (!valid)
      continue;
    if (llvm::is_contained(argNames, name)) {
      modelError() << "graph input '" << name << "' is listed twice";
      continue;
    }
    argNames.push_back(name);
    argTypes.push_back(RankedTensorType::get(dims, elementType));
    argAttrs.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr(kInputNameAttr, builder.getStringAttr(name)),
         builder.getNamedAttr(kDimNamesAttr, builder.getArrayAttr(dimNames))}));
  }
  if (errors)
    return failure();
  function.setType(builder.getFunctionType(argTypes, {}));
  Block *entry = function.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    function.setArgAttrs(i, argAttrs[i]);
    entry->getArgument(i).setLoc(NameLoc::get(builder.getStringAttr(name)));
    values[name] = entry->getArgument(i);
  }
  return success();
}

/// A resource key from an initializer name: characters other than letters,
/// digits, '_' and '.' would not print as a bare key.
static std::string getResourceKey(StringRef name) {
  std::string key;
  for (char c : name)
    key += (llvm::isAlnum(c) || c == '_' || c == '.') ? c : '_';
  return key.empty() || llvm::isDigit(key[0]) ? "w" + key : key;
}

FailureOr<ElementsAttr> Importer::convertTensor(const TensorData &data,
                                                StringRef name) {
  Type elementType = getElementTypeForOnnx(&context, data.getElementType());
  if (!elementType)
    return failure(); // The reader refuses these types first.
  auto type = RankedTensorType::get(data.getDims(), elementType);
  ArrayRef<char> bytes = data.getBytes();
  if (const std::shared_ptr<const void> &mapping = data.getMapping()) {
    // Mapped external data: a resource that points into the mapping and
    // keeps it alive (nothing is copied, hashed or read here).
    size_t alignment = std::max<size_t>(
        1, static_cast<size_t>(elementType.getIntOrFloatBitWidth() / 8));
    AsmResourceBlob blob(
        bytes, alignment, [mapping](void *, size_t, size_t) {},
        /*dataIsMutable=*/false);
    return cast<ElementsAttr>(DenseResourceElementsAttr::get(
        type, getResourceKey(name), std::move(blob)));
  }
  if (elementType.isInteger(1)) {
    SmallVector<bool> bools(bytes.begin(), bytes.end());
    return cast<ElementsAttr>(DenseElementsAttr::get(type, bools));
  }
  bool splat = false;
  if (!DenseElementsAttr::isValidRawBuffer(type, bytes, splat))
    return failure();
  return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(type, bytes));
}

LogicalResult Importer::importInitializers() {
  const ::onnx::GraphProto &graph = model->getProto().graph();
  TensorReader &reader = model->getTensorReader();
  // Large weights in external data stay in the file (mapped).
  reader.mapExternalData(kLargeWeightBytes);
  llvm::scope_exit readAgain([&] { reader.mapExternalData(0); });
  for (const ::onnx::TensorProto &tensor : graph.initializer()) {
    const std::string &name = tensor.name();
    Expected<TensorData> data =
        reader.read(tensor, "initializer '" + name + "'");
    if (!data) {
      reportError(data.takeError());
      continue;
    }
    FailureOr<ElementsAttr> value = convertTensor(*data, name);
    if (failed(value)) {
      modelError() << "initializer '" << name << "' has data sits cannot "
                   << "represent";
      continue;
    }
    Location loc = NameLoc::get(builder.getStringAttr(name));
    auto weight = WeightOp::create(builder, loc, value->getType(),
                                   builder.getStringAttr(name), *value);
    values[name] = weight.getResult();
  }
  return success(errors == 0);
}

LogicalResult Importer::sortNodes(SmallVectorImpl<int> &order) {
  // Nodes should come in topological order; sort them (stably) anyway.
  const ::onnx::GraphProto &graph = model->getProto().graph();
  int count = graph.node_size();
  llvm::StringMap<int> producer;
  for (int i = 0; i < count; ++i)
    for (const std::string &output : graph.node(i).output()) {
      if (output.empty())
        continue;
      if (values.count(output) || !producer.try_emplace(output, i).second) {
        const ::onnx::NodeProto &node = graph.node(i);
        nodeError(node, NameLoc::get(builder.getStringAttr(node.name())))
            << "output '" << output
            << "' is already defined (by another node, an initializer or a "
               "graph input)";
      }
    }
  if (errors)
    return failure();
  std::vector<std::vector<int>> users(count);
  std::vector<int> pending(count, 0);
  for (int i = 0; i < count; ++i) {
    llvm::StringSet<> seen;
    for (const std::string &input : graph.node(i).input()) {
      auto it = producer.find(input);
      if (input.empty() || it == producer.end() || !seen.insert(input).second)
        continue;
      users[it->second].push_back(i);
      ++pending[i];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < count; ++i)
    if (pending[i] == 0)
      ready.push(i);
  while (!ready.empty()) {
    int next = ready.top();
    ready.pop();
    order.push_back(next);
    for (int user : users[next])
      if (--pending[user] == 0)
        ready.push(user);
  }
  if (static_cast<int>(order.size()) != count) {
    for (int i = 0; i < count; ++i)
      if (pending[i] > 0) {
        const ::onnx::NodeProto &node = graph.node(i);
        nodeError(node, NameLoc::get(builder.getStringAttr(node.name())))
            << "is on a cycle: the graph is not acyclic";
        break;
      }
    return failure();
  }
  return success();
}

/// The kind of an attribute, from its type field or, in old files without
/// one, from the field that is set.
static std::optional<AttrKind> getAttrKind(const ::onnx::AttributeProto &attr,
                                           std::string &typeName) {
  switch (attr.type()) {
  case ::onnx::AttributeProto::INT:
    return AttrKind::Int;
  case ::onnx::AttributeProto::INTS:
    return AttrKind::Ints;
  case ::onnx::AttributeProto::FLOAT:
    return AttrKind::Float;
  case ::onnx::AttributeProto::FLOATS:
    return AttrKind::Floats;
  case ::onnx::AttributeProto::STRING:
    return AttrKind::String;
  case ::onnx::AttributeProto::TENSOR:
    return AttrKind::Tensor;
  case ::onnx::AttributeProto::UNDEFINED:
    if (attr.has_i())
      return AttrKind::Int;
    if (attr.has_f())
      return AttrKind::Float;
    if (attr.has_s())
      return AttrKind::String;
    if (attr.has_t())
      return AttrKind::Tensor;
    if (attr.ints_size())
      return AttrKind::Ints;
    if (attr.floats_size())
      return AttrKind::Floats;
    typeName = "UNDEFINED";
    return std::nullopt;
  default:
    typeName = ::onnx::AttributeProto::AttributeType_Name(attr.type());
    if (typeName.empty())
      typeName = "type " + std::to_string(attr.type());
    return std::nullopt;
  }
}

FailureOr<Attribute>
Importer::convertAttribute(const ::onnx::NodeProto &node, Location loc,
                           const ::onnx::AttributeProto &attr, AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case AttrKind::Ints:
    return Attribute(builder.getDenseI64ArrayAttr(
        SmallVector<int64_t>(attr.ints().begin(), attr.ints().end())));
  case AttrKind::Float:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case AttrKind::Floats:
    return Attribute(builder.getDenseF32ArrayAttr(
        SmallVector<float>(attr.floats().begin(), attr.floats().end())));
  case AttrKind::String:
    return Attribute(builder.getStringAttr(attr.s()));
  case AttrKind::Tensor: {
    Expected<TensorData> data = model->getTensorReader().read(
        attr.t(),
        "attribute '" + attr.name() + "' of node '" + node.name() + "'");
    if (!data) {
      reportError(data.takeError());
      return failure();
    }
    FailureOr<ElementsAttr> value = convertTensor(*data, attr.name());
    if (failed(value)) {
      nodeError(node, loc) << "attribute '" << attr.name()
                           << "' holds a tensor sits cannot represent";
      return failure();
    }
    return Attribute(*value);
  }
  }
  return failure();
}

void Importer::checkValueInfo(const ::onnx::NodeProto *node, Location loc,
                              StringRef name, const TensorFacts &facts) {
  if (!options.checkValueInfo)
    return;
  const ::onnx::ValueInfoProto *info = valueInfos.lookup(name);
  if (!info || !info->type().has_tensor_type())
    return;
  const ::onnx::TypeProto_Tensor &declared = info->type().tensor_type();
  auto report = [&]() -> InFlightDiagnostic {
    if (node)
      return nodeError(*node, loc);
    return modelError();
  };
  if (declared.elem_type() != 0) {
    Type type = getElementTypeForOnnx(&context, declared.elem_type());
    if (type && facts.elementType && type != facts.elementType) {
      report() << "'" << name << "' is "
               << getOnnxElementTypeName(declared.elem_type())
               << " in the model's value_info, but its inputs make it "
               << facts.elementType;
      return;
    }
  }
  if (!declared.has_shape() || !facts.ranked)
    return;
  // The GenAI model builder declares the outputs of its Constant nodes as
  // scalars whatever their shape ([1], [2]): a Constant's value is its
  // shape, so the declaration says nothing. Elsewhere a scalar declared for
  // a one-element tensor is the same one value.
  if (declared.shape().dim_size() == 0 &&
      ((node && node->op_type() == "Constant") ||
       facts.getStaticNumElements() == std::optional<int64_t>(1)))
    return;
  if (declared.shape().dim_size() != facts.getRank()) {
    report() << "'" << name << "' has rank " << declared.shape().dim_size()
             << " in the model's value_info (" << describeTensorType(declared)
             << "), but its inputs give rank " << facts.getRank() << " "
             << shapes.print(facts.dims);
    return;
  }
  for (int i = 0; i < declared.shape().dim_size(); ++i) {
    const ::onnx::TensorShapeProto_Dimension &dim = declared.shape().dim(i);
    std::optional<int64_t> inferred = getConstantValue(facts.dims[i]);
    if (dim.has_dim_value() && inferred && *inferred != dim.dim_value()) {
      report() << "'" << name << "' dimension " << i << " is "
               << dim.dim_value() << " in the model's value_info ("
               << describeTensorType(declared) << "), but its inputs make it "
               << *inferred << " " << shapes.print(facts.dims);
      return;
    }
  }
}

void Importer::importNode(const ::onnx::NodeProto &node, int index) {
  std::string nodeName = node.name().empty()
                             ? node.op_type() + "_" + std::to_string(index)
                             : node.name();
  Location loc = NameLoc::get(builder.getStringAttr(nodeName));
  ::onnx::NodeProto named;
  const ::onnx::NodeProto *nodePtr = &node;
  if (node.name().empty()) {
    named = node;
    named.set_name(nodeName);
    nodePtr = &named;
  }
  const ::onnx::NodeProto &n = *nodePtr;

  // Inputs an earlier error left undefined: skip quietly.
  for (const std::string &input : n.input())
    if (!input.empty() && poisoned.contains(input)) {
      poison(n);
      return;
    }

  bool defaultDomain = n.domain().empty() || n.domain() == "ai.onnx";
  bool microsoft = n.domain() == kMicrosoftDomain;
  const OpSchema *schema = defaultDomain ? lookupOpSchema(n.op_type())
                           : microsoft   ? lookupMicrosoftOpSchema(n.op_type())
                                         : nullptr;
  if (!schema) {
    auto diag = nodeError(n, loc);
    if (microsoft)
      diag << "operator " << n.op_type() << " of domain 'com.microsoft' is "
           << "not supported (sits imports GatherBlockQuantized, "
           << "GroupQueryAttention, MatMulNBits, RotaryEmbedding and "
           << "SkipSimplifiedLayerNormalization of it)";
    else if (!defaultDomain)
      diag << "domain '" << n.domain() << "' is not supported (sits imports "
           << "the default ONNX domain and ONNX Runtime's com.microsoft ops)";
    else
      diag << "operator " << n.op_type() << " is not supported";
    poison(n);
    return;
  }
  int64_t opset = model->getOpsetVersion();
  if (!microsoft && schema->sinceOpset > opset) {
    nodeError(n, loc) << n.op_type() << " needs opset " << schema->sinceOpset
                      << " or newer, but the model imports opset " << opset;
    poison(n);
    return;
  }

  // Arity.
  int inputCount = n.input_size();
  while (inputCount > 0 && n.input(inputCount - 1).empty())
    --inputCount;
  if (inputCount < schema->minInputs ||
      (schema->maxInputs >= 0 && inputCount > schema->maxInputs)) {
    auto diag = nodeError(n, loc);
    diag << "takes ";
    if (schema->maxInputs == schema->minInputs)
      diag << schema->minInputs;
    else if (schema->maxInputs < 0)
      diag << "at least " << schema->minInputs;
    else
      diag << schema->minInputs << " to " << schema->maxInputs;
    diag << " inputs, got " << inputCount;
    poison(n);
    return;
  }
  if (!microsoft && schema->lastInputSinceOpset > opset &&
      inputCount == schema->maxInputs) {
    nodeError(n, loc) << n.op_type() << "'s input " << inputCount - 1
                      << " needs opset " << schema->lastInputSinceOpset
                      << " or newer, but the model imports opset " << opset;
    poison(n);
    return;
  }
  int outputCount = n.output_size();
  if (outputCount < schema->minOutputs ||
      (schema->maxOutputs >= 0 && outputCount > schema->maxOutputs)) {
    nodeError(n, loc) << "has " << outputCount << " outputs; " << n.op_type()
                      << " has " << schema->minOutputs << " to "
                      << (schema->maxOutputs < 0
                              ? std::string("any number of")
                              : std::to_string(schema->maxOutputs));
    poison(n);
    return;
  }

  // Operands.
  SmallVector<Value> operands;
  SmallVector<int32_t> segments;
  for (int i = 0; i < inputCount; ++i) {
    const std::string &input = n.input(i);
    if (input.empty()) {
      bool optional = schema->optionalInputs & (1u << i);
      if ((i < schema->minInputs && !optional) || !schema->segmentedInputs) {
        nodeError(n, loc) << "input " << i
                          << " is empty, but it is required here";
        poison(n);
        return;
      }
      segments.push_back(0);
      continue;
    }
    Value value = values.lookup(input);
    if (!value) {
      nodeError(n, loc) << "input '" << input
                        << "' is not produced by any node, initializer or "
                           "graph input";
      poison(n);
      return;
    }
    operands.push_back(value);
    segments.push_back(1);
  }
  if (schema->segmentedInputs)
    segments.resize(schema->maxInputs, 0);

  // Attributes.
  NamedAttrList attributes;
  std::optional<SmallVector<int64_t>> reduceAxesAttr;
  llvm::StringSet<> seenAttributes;
  for (const ::onnx::AttributeProto &attr : n.attribute()) {
    if (!seenAttributes.insert(attr.name()).second) {
      nodeError(n, loc) << "attribute '" << attr.name() << "' is given twice";
      poison(n);
      return;
    }
    if (!attr.ref_attr_name().empty()) {
      nodeError(n, loc) << "attribute '" << attr.name()
                        << "' refers to a function attribute, which sits "
                           "does not support";
      poison(n);
      return;
    }
    const AttrSchema *spec = schema->findAttribute(attr.name());
    if (!spec) {
      nodeError(n, loc) << "has unknown attribute '" << attr.name() << "'";
      poison(n);
      return;
    }
    if (!microsoft && spec->sinceOpset > opset) {
      nodeError(n, loc) << "attribute '" << attr.name() << "' needs opset "
                        << spec->sinceOpset
                        << " or newer, but the model imports opset " << opset;
      poison(n);
      return;
    }
    std::string typeName;
    std::optional<AttrKind> kind = getAttrKind(attr, typeName);
    if (!kind || *kind != spec->kind) {
      nodeError(n, loc) << "attribute '" << attr.name() << "' must be "
                        << getAttrKindName(spec->kind) << ", got "
                        << (kind ? getAttrKindName(*kind).str() : typeName);
      poison(n);
      return;
    }
    FailureOr<Attribute> value = convertAttribute(n, loc, attr, *kind);
    if (failed(value)) {
      poison(n);
      return;
    }
    // The opset-13 `axes` attribute of ReduceMean/ReduceMax becomes the
    // `axes` operand of the newer form.
    if (StringRef(spec->name) == "axes") {
      reduceAxesAttr =
          SmallVector<int64_t>(attr.ints().begin(), attr.ints().end());
      continue;
    }
    attributes.append(spec->name, *value);
  }
  for (const AttrSchema &spec : schema->attributes)
    if (spec.required && !seenAttributes.contains(spec.name)) {
      nodeError(n, loc) << "needs attribute '" << spec.name << "' ("
                        << getAttrKindName(spec.kind) << ")";
      poison(n);
      return;
    }
  if (reduceAxesAttr) {
    if (operands.size() > 1) {
      nodeError(n, loc) << "gives axes both as an attribute and an input";
      poison(n);
      return;
    }
    auto type = RankedTensorType::get(
        {static_cast<int64_t>(reduceAxesAttr->size())}, builder.getI64Type());
    auto axes = ConstantOp::create(
        builder, loc, type,
        DenseElementsAttr::get(type, ArrayRef(*reduceAxesAttr)), nullptr,
        nullptr, nullptr, nullptr);
    shapes.setFacts(
        axes.getResult(),
        shapes.factsFromConstant(cast<ElementsAttr>(*axes.getValue())));
    operands.push_back(axes.getResult());
  }
  if (schema->segmentedInputs)
    attributes.append("operandSegmentSizes",
                      builder.getDenseI32ArrayAttr(segments));

  std::string opName = (microsoft ? "onnx.ms." : "onnx.") + n.op_type();
  // CastLike is the Cast to its second input's element type, which import
  // knows: one op less to run and raise.
  if (defaultDomain && n.op_type() == "CastLike") {
    Type target = cast<TensorType>(operands[1].getType()).getElementType();
    std::optional<int64_t> to = getOnnxElementTypeNumber(target);
    if (!to) {
      nodeError(n, loc) << "target_type has element type " << target
                        << ", which sits does not cast to";
      poison(n);
      return;
    }
    operands.pop_back();
    attributes.append("to", builder.getI64IntegerAttr(*to));
    opName = "onnx.Cast";
  }
  OperationState state(loc, opName);
  state.addOperands(operands);
  state.addAttributes(attributes);
  Type placeholder = UnrankedTensorType::get(builder.getF32Type());
  state.addTypes(SmallVector<Type>(outputCount, placeholder));
  Operation *op = builder.create(state);

  SmallVector<TensorFacts> results;
  std::string message;
  if (failed(shapes.inferResults(op, results, message))) {
    nodeError(n, loc) << message;
    poison(n);
    return;
  }
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    result.setType(shapes.getType(results[i]));
    const std::string &output = n.output(i);
    checkValueInfo(&n, loc, output, results[i]);
    shapes.setFacts(result, std::move(results[i]));
    if (!output.empty())
      values[output] = result;
  }
}

LogicalResult Importer::importOutputs(func::FuncOp function) {
  const ::onnx::GraphProto &graph = model->getProto().graph();
  if (graph.output_size() == 0) {
    modelError() << "the graph has no outputs";
    return failure();
  }
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  llvm::StringSet<> outputNames;
  for (const ::onnx::ValueInfoProto &output : graph.output()) {
    const std::string &name = output.name();
    // Outputs are named by the engine and the tools: each name once.
    if (!outputNames.insert(name).second) {
      modelError() << "graph output '" << name << "' is listed twice";
      continue;
    }
    if (poisoned.contains(name))
      continue;
    Value value = values.lookup(name);
    if (!value) {
      modelError() << "graph output '" << name
                   << "' is not produced by any node, initializer or graph "
                      "input";
      continue;
    }
    checkValueInfo(nullptr, value.getLoc(), name, shapes.getFacts(value));
    results.push_back(value);
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(kOutputNameAttr, builder.getStringAttr(name))));
  }
  if (errors)
    return failure();
  func::ReturnOp::create(builder, function.getLoc(), results);
  function.setType(builder.getFunctionType(function.getArgumentTypes(),
                                           ValueRange(results).getTypes()));
  for (auto [i, attrs] : llvm::enumerate(resultAttrs))
    function.setResultAttrs(i, attrs);
  return success();
}

OwningOpRef<ModuleOp> Importer::run(StringRef modelPath) {
  path = modelPath.str();
  fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  context.loadDialect<OnnxDialect, SitsDialect, func::FuncDialect>();
  Expected<std::unique_ptr<OnnxModel>> loaded = OnnxModel::load(modelPath);
  if (!loaded) {
    reportError(loaded.takeError());
    return nullptr;
  }
  model = std::move(*loaded);
  const ::onnx::GraphProto &graph = model->getProto().graph();
  for (const ::onnx::ValueInfoProto &info : graph.value_info())
    valueInfos[info.name()] = &info;
  for (const ::onnx::ValueInfoProto &info : graph.output())
    valueInfos[info.name()] = &info;

  Location moduleLoc = fileLoc;
  OwningOpRef<ModuleOp> module = ModuleOp::create(moduleLoc);
  builder.setInsertionPointToEnd(module->getBody());
  std::string functionName =
      graph.name().empty() ? std::string("main_graph") : graph.name();
  auto function = func::FuncOp::create(builder, moduleLoc, functionName,
                                       builder.getFunctionType({}, {}));
  // The program is a merged decoder's then_branch: the rest stays on record.
  if (const std::optional<UnmergedDecoder> &unmerged =
          model->getUnmergedDecoder())
    function->setAttr(kMergedDecoderAttr,
                      getMergedDecoderRecord(*unmerged, builder));
  llvm::StringSet<> initializerNames;
  for (const ::onnx::TensorProto &tensor : graph.initializer())
    initializerNames.insert(tensor.name());
  if (failed(importInputs(function, initializerNames)))
    return nullptr;
  builder.setInsertionPointToStart(&function.front());
  if (failed(importInitializers()))
    return nullptr;
  SmallVector<int> order;
  if (failed(sortNodes(order)))
    return nullptr;
  for (int index : order)
    importNode(graph.node(index), index);
  if (errors)
    return nullptr;
  if (failed(importOutputs(function)))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

OwningOpRef<ModuleOp> sits::importOnnxFile(StringRef path, MLIRContext &context,
                                           const OnnxImportOptions &options) {
  return Importer(context, options).run(path);
}
