//===- LaunchBuilder.h - A kernel's spec and launch, built together -*- C++
//-*-===//
//
// The launch planners (Launches.cpp, KVQuantLaunches.cpp, TvcPlan.cpp) build
// each kernel's spec (config lines, parameters, the call) and its launch
// (grid, block, shared memory, argument bindings) through one builder, so
// that a parameter and its binding are always added together.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_LAUNCHBUILDER_H
#define SITS_BACKENDS_CUDA_LAUNCHBUILDER_H

#include "backends/cuda/Launches.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sits::codegen {

/// Adds parameters to the spec and their bindings to the launch in step, so
/// that the two never disagree.
class LaunchBuilder {
public:
  LaunchBuilder(std::string family, std::string header, int threads) {
    planned.spec.family = std::move(family);
    planned.spec.header = std::move(header);
    planned.spec.threads = threads;
    setBlock(format::Expr::constant(threads));
    planned.launch.sharedBytes = format::Expr::constant(0);
  }

  void param(std::string type, std::string name, ArgBinding binding) {
    planned.spec.params.push_back({std::move(type), std::move(name)});
    planned.launch.args.push_back(std::move(binding));
  }
  void constant(const std::string &line) {
    planned.spec.config.push_back(line);
  }
  void setConfig(std::vector<std::string> lines) {
    planned.spec.config = std::move(lines);
  }
  void intConstant(const std::string &name, int64_t value) {
    constant("static constexpr int " + name + " = " + std::to_string(value) +
             ";");
  }
  void boolConstant(const std::string &name, bool value) {
    constant("static constexpr bool " + name + " = " +
             (value ? "true" : "false") + ";");
  }
  void floatConstant(const std::string &name, float value) {
    // Hexadecimal: the constant is exactly the attribute's f32 value.
    char exact[64], readable[64];
    std::snprintf(exact, sizeof(exact), "%a", static_cast<double>(value));
    std::snprintf(readable, sizeof(readable), "%.9g",
                  static_cast<double>(value));
    constant("static constexpr float " + name + " = " + exact + "f; // " +
             readable);
  }
  void typeConstant(const std::string &name, const std::string &type) {
    constant("typedef " + type + " " + name + ";");
  }
  void body(const std::string &line) { planned.spec.body.push_back(line); }
  void call(const std::string &text) { planned.spec.call = text; }
  void setGrid(format::Expr x, format::Expr y = format::Expr::constant(1),
               format::Expr z = format::Expr::constant(1)) {
    planned.launch.grid = {std::move(x), std::move(y), std::move(z)};
  }
  void setBlock(format::Expr x) {
    planned.launch.block = {std::move(x), format::Expr::constant(1),
                            format::Expr::constant(1)};
  }
  void setShared(int64_t bytes) {
    planned.launch.sharedBytes = format::Expr::constant(bytes);
  }
  void setMinBlocks(int blocks) { planned.spec.minBlocks = blocks; }
  void setCallWaits() { planned.spec.callWaitsForPredecessors = true; }
  PlannedLaunch take() { return std::move(planned); }

private:
  PlannedLaunch planned;
};

inline ArgBinding pastArg() {
  return ArgBinding::bufferArg(BufferKind::PastLengths);
}
inline ArgBinding stepArg() {
  return ArgBinding::bufferArg(BufferKind::StepLengths);
}

/// The StepRows a kernel with addStepRows's parameters passes on.
inline std::string stepRowsCall() {
  return "sits::StepRows{step_lengths, seq_len, packed_rows}";
}

/// Adds the parameters of where a step's token rows lie (common.cuh's
/// StepRows): step_lengths, seq_len, and packed_rows, 1 when the step's T
/// is less than B x S (a packed step: no padding rows); returns the
/// expression that builds the StepRows in the kernel's call.
inline std::string addStepRows(LaunchBuilder &b) {
  b.param("const int *", "step_lengths", stepArg());
  b.param("int", "seq_len", ArgBinding::int32(format::Expr::seq()));
  b.param("int", "packed_rows",
          ArgBinding::int32(
              format::min(format::Expr::constant(1),
                          format::Expr::batch() * format::Expr::seq() -
                              format::Expr::tokens())));
  return stepRowsCall();
}

/// The config every split-K decode attention kernel takes: the cache's
/// element struct `cacheStruct`, the heads, head_dim, capacity and window,
/// the split, the scale and softcap (attention_decode.cuh's Cfg).
void addSplitDecodeConfig(LaunchBuilder &b, const AttentionLaunch &desc,
                          const DecodeSplit &split,
                          const std::string &cacheStruct);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_LAUNCHBUILDER_H
