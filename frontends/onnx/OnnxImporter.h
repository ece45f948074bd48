//===- OnnxImporter.h - ONNX model to the onnx dialect ----------*- C++ -*-===//
//
// Imports an ONNX model file into one `func.func` named after the graph:
// graph inputs are arguments (with `sits.input_name` and `sits.dim_names`),
// graph outputs are results (`sits.output_name`), every initializer is a
// `sits.weight` (location: the initializer name), every node one `onnx.*` op
// (location: the node name) whose result types come from the symbolic shape
// analysis. Unsupported ops get one error each, all in one run.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FRONTENDS_ONNX_ONNXIMPORTER_H
#define SITS_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

namespace sits {

struct OnnxImportOptions {
  /// Cross-check inferred dims and element types against the model's
  /// value_info and graph outputs, and report contradictions as errors
  /// naming the node. The inferred types are used either way.
  bool checkValueInfo = true;
};

/// Function argument / result attributes the importer sets.
constexpr llvm::StringLiteral kInputNameAttr = "sits.input_name";
constexpr llvm::StringLiteral kOutputNameAttr = "sits.output_name";
/// Function attribute of a merged decoder taken apart by the loader: the
/// If node, its condition input (dropped), the branch kept and the node
/// counts of both branches.
constexpr llvm::StringLiteral kMergedDecoderAttr = "sits.merged_decoder";

struct UnmergedDecoder;
/// The kMergedDecoderAttr record of a merged decoder the loader took apart:
/// {node, condition, kept = "then_branch", kept_nodes, dropped_nodes}.
mlir::DictionaryAttr getMergedDecoderRecord(const UnmergedDecoder &unmerged,
                                            mlir::Builder &builder);

/// Imports the ONNX model at `path`. Returns null after emitting
/// diagnostics (on `context`) when the file cannot be read or imported.
/// Loads the dialects it needs into `context`.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxFile(llvm::StringRef path, mlir::MLIRContext &context,
               const OnnxImportOptions &options = {});

/// Registers the dialects the importer creates (onnx, sits, func).
void registerOnnxImportDialects(mlir::DialectRegistry &registry);

} // namespace sits

#endif // SITS_FRONTENDS_ONNX_ONNXIMPORTER_H
