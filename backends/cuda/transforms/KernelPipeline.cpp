//===- KernelPipeline.cpp - The fusion passes in sitsc's order ------------===//

#include "backends/cuda/transforms/Passes.h"

using namespace mlir;

void sits::kernel::buildKernelPipeline(OpPassManager &pm,
                                       const codegen::CodegenOptions &options) {
  // The order is part of the decisions: the few-row prefill is copied
  // first so that it is fused as @prefill is, the gated and residual
  // epilogues take their linear layers before grouping sees them, and the
  // norms and operand layouts look at the launches formed by then.
  AddFewRowPrefillOptions fewRows;
  fewRows.fewRowPrefillTokens = options.fewRowPrefillTokens;
  fewRows.maxPrefillTokens = options.maxPrefillTokens;
  pm.addPass(createAddFewRowPrefill(fewRows));
  pm.addPass(createFuseGatedLinears());
  pm.addPass(createFuseResidualLinears());
  pm.addPass(createGroupLinears());
  pm.addPass(createFuseRopeAppend());
  // The passes take these as sitsc's flags (backends/cuda/CodegenOptions.td).
  std::string target = options.target.getName();
  std::string dtype = codegen::weightTypeName(options.weightType);
  FuseNormsOptions fuseNorms;
  fuseNorms.normFusion = options.fuseNorms;
  fuseNorms.target = target;
  fuseNorms.dtype = dtype;
  pm.addPass(createFuseNorms(fuseNorms));
  ChooseWeightLayoutOptions weightLayout;
  weightLayout.target = target;
  weightLayout.dtype = dtype;
  pm.addPass(createChooseWeightLayout(weightLayout));
  ChooseOperandLayoutOptions chooseLayout;
  chooseLayout.target = target;
  chooseLayout.dtype = dtype;
  chooseLayout.halfOperands = options.halfOperands;
  pm.addPass(createChooseOperandLayout(chooseLayout));
  SelectLinearKernelsOptions selectLinear;
  selectLinear.target = target;
  selectLinear.dtype = dtype;
  selectLinear.gemvQuantTiles = options.quantGemvTiles;
  selectLinear.gemvTokenGroups = options.gemvTokenGroups;
  selectLinear.gemmKSplits = options.gemmKSplits;
  pm.addPass(createSelectLinearKernels(selectLinear));
  ChooseKVLayoutOptions kvLayout;
  kvLayout.kvLayout = options.pagedKV ? "paged" : "contiguous";
  kvLayout.kvBlockTokens = options.kvBlockTokens;
  kvLayout.kvPoolBlocks = options.kvPoolBlocks;
  pm.addPass(createChooseKVLayout(kvLayout));
  SelectAttentionKernelsOptions selectAttention;
  selectAttention.target = target;
  selectAttention.dtype = dtype;
  selectAttention.decodeSplitKeys = options.decodeSplitKeys;
  pm.addPass(createSelectAttentionKernels(selectAttention));
  ConfigureLaunchesOptions configureLaunches;
  configureLaunches.dtype = dtype;
  pm.addPass(createConfigureLaunches(configureLaunches));
  // Last: the values' lifetimes are those of the launches chosen above.
  PlanMemoryOptions planMemory;
  planMemory.target = target;
  planMemory.dtype = dtype;
  planMemory.maxPrefillTokens = options.maxPrefillTokens;
  pm.addPass(createPlanMemory(planMemory));
  // After the memory plan: a task waits for the readers of the bytes it
  // reuses.
  ScheduleDecodeTasksOptions schedule;
  schedule.decodeKernels = options.persistentDecode ? "persistent" : "graph";
  schedule.persistentBlocks = options.persistentBlocks;
  for (uint32_t bucket : options.batchBuckets)
    schedule.batchBuckets +=
        (schedule.batchBuckets.empty() ? "" : ",") + std::to_string(bucket);
  schedule.target = target;
  schedule.dtype = dtype;
  schedule.maxPrefillTokens = options.maxPrefillTokens;
  pm.addPass(createScheduleDecodeTasks(schedule));
}
