//===- MergedDecoder.cpp - A merged decoder's If taken apart
//---------------===//
//
// Optimum's merged decoder (decoder_model_merged.onnx) is one `If` on a
// boolean graph input (`use_cache_branch`): its then_branch is the decoder
// with past key/values, its else_branch the first-step decoder without
// them, both returning the graph's outputs and reading the outer graph's
// inputs and (deduplicated) initializers by name. The engine's program is
// the cached decoder, whose first step is the same graph at an empty past,
// so the loader replaces the If by its then_branch: the branch's nodes and
// initializers join the outer graph, its outputs are the If's, and the
// condition input goes. Any other use of If (a computed condition, branches
// returning other values, more than one If, nested control flow) is an
// error naming the node and what was expected.
//
// Names are checked before anything moves: a branch that defines a name the
// outer graph defines too would change what a name means once the scopes
// are one.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxLoader.h"

#include "sits_onnx/onnx.pb.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

using namespace sits;
using llvm::StringRef;

namespace {

/// Errors of one If node, named as the importer names nodes.
class IfChecker {
public:
  IfChecker(StringRef path, const ::onnx::NodeProto &node, int index)
      : path(path), node(node), index(index) {}

  llvm::Error fail(const llvm::Twine &message) const {
    // Unnamed nodes are named as the importer names them.
    std::string name =
        node.name().empty() ? "If_" + std::to_string(index) : node.name();
    return llvm::make_error<OnnxFileError>(
        path.str(), ("node '" + name + "' (If): " + message).str());
  }

private:
  StringRef path;
  const ::onnx::NodeProto &node;
  int index;
};

/// True when `node` carries a subgraph (If, Loop, Scan, or a GRAPH
/// attribute of any other op).
bool hasSubgraph(const ::onnx::NodeProto &node) {
  for (const ::onnx::AttributeProto &attr : node.attribute())
    if (attr.has_g() || attr.graphs_size() > 0 ||
        attr.type() == ::onnx::AttributeProto::GRAPH ||
        attr.type() == ::onnx::AttributeProto::GRAPHS)
      return true;
  return false;
}

/// The names `graph` defines: its inputs, initializers and node outputs.
void collectDefinitions(const ::onnx::GraphProto &graph,
                        llvm::StringSet<> &names) {
  for (const ::onnx::ValueInfoProto &input : graph.input())
    names.insert(input.name());
  for (const ::onnx::TensorProto &tensor : graph.initializer())
    names.insert(tensor.name());
  for (const ::onnx::NodeProto &node : graph.node())
    for (const std::string &output : node.output())
      if (!output.empty())
        names.insert(output);
}

/// Checks one branch: no inputs of its own, no sparse initializers, no
/// nested control flow, as many outputs as the If.
llvm::Error checkBranch(const IfChecker &check, const ::onnx::GraphProto &g,
                        StringRef which, int outputs) {
  if (g.input_size() > 0)
    return check.fail(which + " takes input '" + g.input(0).name() +
                      "'; an If's branches take none");
  if (g.sparse_initializer_size() > 0)
    return check.fail(which + " has a sparse initializer, which sits does "
                              "not support");
  for (const ::onnx::NodeProto &inner : g.node())
    if (hasSubgraph(inner))
      return check.fail(which + " holds node '" + inner.name() + "' (" +
                        inner.op_type() +
                        ") with a subgraph: nested control flow is not "
                        "supported (sits takes a merged decoder's one If, "
                        "whose branches are plain decoders)");
  if (g.output_size() != outputs)
    return check.fail(which + " returns " + llvm::Twine(g.output_size()) +
                      " values, but the If has " + llvm::Twine(outputs) +
                      " outputs");
  return llvm::Error::success();
}

} // namespace

llvm::Error sits::unmergeDecoder(::onnx::ModelProto &model, StringRef path,
                                 std::optional<UnmergedDecoder> &result) {
  ::onnx::GraphProto &graph = *model.mutable_graph();
  int ifIndex = -1;
  for (int i = 0; i < graph.node_size(); ++i) {
    const ::onnx::NodeProto &node = graph.node(i);
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!defaultDomain || node.op_type() != "If")
      continue;
    if (ifIndex >= 0)
      return IfChecker(path, node, i)
          .fail(
              "a second If; sits takes a merged decoder, whose one If chooses "
              "between the decoders with and without past key/values");
    ifIndex = i;
  }
  if (ifIndex < 0)
    return llvm::Error::success();
  const ::onnx::NodeProto &node = graph.node(ifIndex);
  IfChecker check(path, node, ifIndex);

  // The condition: a boolean graph input that only the If reads.
  std::string condition = node.input_size() ? node.input(0) : "";
  if (node.input_size() != 1 || condition.empty())
    return check.fail("an If takes one condition input");
  const ::onnx::ValueInfoProto *conditionInput = nullptr;
  for (const ::onnx::ValueInfoProto &input : graph.input())
    if (input.name() == condition)
      conditionInput = &input;
  for (const ::onnx::TensorProto &tensor : graph.initializer())
    if (tensor.name() == condition)
      conditionInput = nullptr;
  if (!conditionInput)
    return check.fail("its condition '" + condition +
                      "' is not a graph input; sits takes a merged "
                      "decoder's If, whose condition is a boolean graph "
                      "input (Optimum's use_cache_branch)");
  const ::onnx::TypeProto &conditionType = conditionInput->type();
  bool oneBool =
      conditionType.has_tensor_type() &&
      conditionType.tensor_type().elem_type() == ::onnx::TensorProto::BOOL;
  if (oneBool && conditionType.tensor_type().has_shape())
    for (const auto &dim : conditionType.tensor_type().shape().dim())
      oneBool &= dim.has_dim_value() && dim.dim_value() == 1;
  if (!oneBool)
    return check.fail("its condition '" + condition +
                      "' is not one boolean (bool or bool[1]), as a merged "
                      "decoder's use_cache_branch is");
  for (const ::onnx::NodeProto &other : graph.node())
    if (&other != &node && llvm::is_contained(other.input(), condition))
      return check.fail("its condition '" + condition +
                        "' is also read by node '" + other.name() +
                        "'; a merged decoder's condition only chooses the "
                        "branch");

  // The outputs: exactly the graph's outputs.
  llvm::StringSet<> graphOutputs, ifOutputs;
  for (const ::onnx::ValueInfoProto &output : graph.output())
    graphOutputs.insert(output.name());
  for (const std::string &output : node.output()) {
    if (output.empty() || !graphOutputs.contains(output))
      return check.fail("output '" + output +
                        "' is not a graph output; a merged decoder's If "
                        "returns the graph's outputs");
    ifOutputs.insert(output);
  }
  for (const ::onnx::ValueInfoProto &output : graph.output())
    if (!ifOutputs.contains(output.name()))
      return check.fail("graph output '" + output.name() +
                        "' is not one of its outputs; a merged decoder's If "
                        "returns every graph output");

  const ::onnx::GraphProto *thenBranch = nullptr, *elseBranch = nullptr;
  for (const ::onnx::AttributeProto &attr : node.attribute()) {
    if ((attr.name() == "then_branch" && thenBranch) ||
        (attr.name() == "else_branch" && elseBranch))
      return check.fail("attribute '" + attr.name() + "' is given twice");
    if (attr.name() == "then_branch" && attr.has_g())
      thenBranch = &attr.g();
    else if (attr.name() == "else_branch" && attr.has_g())
      elseBranch = &attr.g();
    else
      return check.fail("attribute '" + attr.name() +
                        "' is not a then_branch or else_branch graph");
  }
  if (!thenBranch || !elseBranch)
    return check.fail("needs both a then_branch and an else_branch graph");
  int outputs = node.output_size();
  if (llvm::Error error =
          checkBranch(check, *thenBranch, "its then_branch", outputs))
    return error;
  if (llvm::Error error =
          checkBranch(check, *elseBranch, "its else_branch", outputs))
    return error;
  // Both branches return the same values (the same names and element
  // types, position by position), as the two decoders of a merge do.
  for (int i = 0; i < outputs; ++i) {
    const ::onnx::ValueInfoProto &a = thenBranch->output(i);
    const ::onnx::ValueInfoProto &b = elseBranch->output(i);
    if (a.name() != b.name() || a.type().tensor_type().elem_type() !=
                                    b.type().tensor_type().elem_type())
      return check.fail("its branches return different values at output " +
                        llvm::Twine(i) + " ('" + a.name() + "' and '" +
                        b.name() +
                        "'); a merged decoder's branches return the same "
                        "outputs");
  }

  // The then_branch is the decoder with past: it reads every input but the
  // condition (the else_branch, the first step, not the past ones).
  llvm::StringSet<> thenReads;
  for (const ::onnx::NodeProto &inner : thenBranch->node())
    for (const std::string &input : inner.input())
      thenReads.insert(input);
  for (const ::onnx::ValueInfoProto &output : thenBranch->output())
    thenReads.insert(output.name());
  if (thenReads.contains(condition) || graphOutputs.contains(condition))
    return check.fail("its condition '" + condition +
                      "' is read inside its then_branch or returned; a "
                      "merged decoder's condition only chooses the branch");
  llvm::StringSet<> initializers;
  for (const ::onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  for (const ::onnx::ValueInfoProto &input : graph.input())
    if (input.name() != condition && !initializers.contains(input.name()) &&
        !thenReads.contains(input.name()))
      return check.fail("its then_branch (taken when '" + condition +
                        "' is true) does not read input '" + input.name() +
                        "'; sits takes a merged decoder's then_branch as its "
                        "decoder with past key/values, which reads every "
                        "input");

  // One scope: the branch may define no name of the outer graph (a branch
  // reading what the outer graph computes from the If is then a cycle,
  // which the importer reports).
  llvm::StringSet<> outer;
  collectDefinitions(graph, outer);
  llvm::StringSet<> branchDefines;
  for (const ::onnx::TensorProto &tensor : thenBranch->initializer())
    if (!branchDefines.insert(tensor.name()).second)
      return check.fail("its then_branch defines initializer '" +
                        tensor.name() + "' twice");
  for (const ::onnx::NodeProto &inner : thenBranch->node())
    for (const std::string &output : inner.output())
      if (!output.empty() && !branchDefines.insert(output).second)
        return check.fail("its then_branch defines '" + output + "' twice");
  // A name of the If's outputs is defined where the branch returns it.
  for (int o = 0; o < outputs; ++o)
    if (branchDefines.contains(node.output(o)) &&
        thenBranch->output(o).name() != node.output(o))
      return check.fail("its then_branch defines '" + node.output(o) +
                        "' but does not return it as output " + llvm::Twine(o));
  for (const auto &entry : branchDefines) {
    StringRef name = entry.getKey();
    if (outer.contains(name) && !ifOutputs.contains(name))
      return check.fail("its then_branch defines '" + name +
                        "', which the outer graph defines too");
  }
  // Take the then_branch apart: its nodes where the If was, an Identity
  // for each output it returns under another name, its initializers and
  // value_info in the outer graph.
  UnmergedDecoder info;
  info.node =
      node.name().empty() ? "If_" + std::to_string(ifIndex) : node.name();
  info.condition = condition;
  info.keptNodes = thenBranch->node_size();
  info.droppedNodes = elseBranch->node_size();
  ::onnx::GraphProto branch;
  for (::onnx::AttributeProto &attr :
       *graph.mutable_node(ifIndex)->mutable_attribute())
    if (attr.name() == "then_branch")
      branch.Swap(attr.mutable_g());
  std::vector<std::string> ifOutputNames(node.output().begin(),
                                         node.output().end());
  std::string ifName = info.node;
  google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (i != ifIndex) {
      nodes.Add()->Swap(graph.mutable_node(i));
      continue;
    }
    for (::onnx::NodeProto &inner : *branch.mutable_node())
      nodes.Add()->Swap(&inner);
    for (int o = 0; o < outputs; ++o) {
      const std::string &returned = branch.output(o).name();
      if (returned == ifOutputNames[o])
        continue;
      ::onnx::NodeProto *identity = nodes.Add();
      identity->set_op_type("Identity");
      identity->set_name(ifName + "/then_output_" + std::to_string(o));
      identity->add_input(returned);
      identity->add_output(ifOutputNames[o]);
    }
  }
  graph.mutable_node()->Swap(&nodes);
  for (::onnx::TensorProto &tensor : *branch.mutable_initializer())
    graph.add_initializer()->Swap(&tensor);
  for (::onnx::ValueInfoProto &valueInfo : *branch.mutable_value_info())
    graph.add_value_info()->Swap(&valueInfo);
  auto *inputs = graph.mutable_input();
  for (int i = 0; i < inputs->size(); ++i)
    if (inputs->Get(i).name() == condition) {
      inputs->DeleteSubrange(i, 1);
      break;
    }
  result = std::move(info);
  return llvm::Error::success();
}

mlir::DictionaryAttr
sits::getMergedDecoderRecord(const UnmergedDecoder &unmerged,
                             mlir::Builder &b) {
  return b.getDictionaryAttr({
      b.getNamedAttr("node", b.getStringAttr(unmerged.node)),
      b.getNamedAttr("condition", b.getStringAttr(unmerged.condition)),
      b.getNamedAttr("kept", b.getStringAttr("then_branch")),
      b.getNamedAttr("kept_nodes", b.getI64IntegerAttr(unmerged.keptNodes)),
      b.getNamedAttr("dropped_nodes",
                     b.getI64IntegerAttr(unmerged.droppedNodes)),
  });
}
