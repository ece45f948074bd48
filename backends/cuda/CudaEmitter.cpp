//===- CudaEmitter.cpp - The generated CUDA C++ source --------------------===//
//
// One translation unit: the kernel-library headers (kernels/*.cuh, passed to
// NVRTC as named headers), then one config struct of compile-time constants
// and one `extern "C"` entry point per specialized kernel. With
// SITS_EMULATE (the CPU emulator) every entry also gets a wrapper that
// takes its arguments as cuLaunchKernel does, an array of pointers.
//
// With --decode-kernels=persistent the source is two translation units:
// as it is, the graph-mode entries above; with SITS_PERSISTENT_DECODE
// defined (tile.cuh's persistent mode), one persistent kernel per decode
// bucket, which runs the decode launches' kernel calls as its tasks
// (emitPersistentDecode).
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Plan.h"

#include <algorithm>
#include <set>

namespace sits::codegen {

static void emitConfig(const KernelSpec &spec, std::string &out) {
  out += "namespace sits_config {\nstruct " + spec.name + " {\n";
  for (const std::string &line : spec.config)
    out += "  " + line + "\n";
  out += "};\n} // namespace sits_config\n";
}

/// A kernel's statements and call, as its entry and the persistent kernel's
/// task case run them: the wait for what came before first, unless the call
/// waits itself (after starting its weight copies).
static void emitKernelBody(const KernelSpec &spec, const std::string &indent,
                           std::string &out) {
  if (!spec.callWaitsForPredecessors)
    out += indent + "sits::waitForPrecedingKernels();\n";
  for (const std::string &line : spec.body)
    out += indent + line + "\n";
  out += indent + spec.call + ";\n";
}

static void emitKernel(const KernelSpec &spec, std::string &out) {
  out += "\n// " + spec.name + ": ";
  for (size_t i = 0; i < spec.uses.size(); ++i)
    out += (i ? "\n//   " : "") + spec.uses[i];
  out += "\n";
  emitConfig(spec, out);

  out += "extern \"C\" __global__ void __launch_bounds__(" +
         std::to_string(spec.threads) +
         (spec.minBlocks ? ", " + std::to_string(spec.minBlocks) : "") + ")\n" +
         spec.name + "(";
  for (size_t i = 0; i < spec.params.size(); ++i)
    out += (i ? ", " : "") + spec.params[i].type +
           (spec.params[i].type.back() == '*' ? "" : " ") + spec.params[i].name;
  out += ") {\n  typedef sits_config::" + spec.name + " Cfg;\n";
  // Programmatic dependent launch: the next kernel may start now; this one
  // touches no buffer before the previous kernel has finished.
  out += "  sits::allowDependentLaunch();\n";
  emitKernelBody(spec, "  ", out);
  out += "}\n";

  out += "#ifdef SITS_EMULATE\nextern \"C\" void " + spec.name +
         "__emulate(void **args) {\n  " + spec.name + "(";
  for (size_t i = 0; i < spec.params.size(); ++i)
    out += std::string(i ? ",\n      " : "") + "sits_emu::arg<" +
           spec.params[i].type + ">(args[" + std::to_string(i) + "])";
  out += ");\n}\n#endif\n";
}

//===----------------------------------------------------------------------===//
// The persistent decode kernels
//===----------------------------------------------------------------------===//

static std::string str(uint64_t value) { return std::to_string(value); }

/// The kernels the tasks of any bucket run, by index.
/// The kernels a bucket's tasks run, each once.
static std::set<unsigned>
getTaskKernels(const PersistentDecodePlan::Bucket &bucket) {
  std::set<unsigned> kernels;
  for (const PersistentDecodePlan::Task &task : bucket.tasks)
    kernels.insert(task.kernel);
  return kernels;
}

/// The kernels any bucket's tasks run, each once.
static std::set<unsigned> getTaskKernels(const PersistentDecodePlan &plan) {
  std::set<unsigned> kernels;
  for (const PersistentDecodePlan::Bucket &bucket : plan.buckets)
    for (unsigned k : getTaskKernels(bucket))
      kernels.insert(k);
  return kernels;
}

/// A kernel's parameters as its argument block: one struct per kernel.
static void emitArgumentBlock(const KernelSpec &spec, std::string &out) {
  out += "struct " + spec.name + " {\n";
  for (const KernelParam &param : spec.params)
    out += "  " + param.type + (param.type.back() == '*' ? "" : " ") +
           param.name + ";\n";
  out += "};\nstatic_assert(sizeof(" + spec.name +
         ") == " + str(getArgumentBlock(spec)->bytes) +
         ", \"the layout PersistentPlan.cpp planned\");\n";
}

/// The task's kernel body, as the graph-mode entry runs it: its parameters
/// from its argument block at `sits_a`.
static void emitTaskCase(unsigned index, const KernelSpec &spec,
                         std::string &out) {
  const std::string indent = "          ";
  out += "        case " + std::to_string(index) + ": { // " + spec.name +
         "\n" + indent + "typedef sits_config::" + spec.name + " Cfg;\n" +
         indent + "const sits_args::" + spec.name + " &sits_arg =\n" + indent +
         "    *reinterpret_cast<const sits_args::" + spec.name +
         " *>(sits_a);\n";
  for (const KernelParam &param : spec.params)
    out += indent + param.type + (param.type.back() == '*' ? "" : " ") +
           param.name + " = sits_arg." + param.name + ";\n";
  emitKernelBody(spec, indent, out);
  out += indent + "break;\n        }\n";
}

/// sits-emulate's entry: checks the tasks it was given against the table,
/// packs their arguments (cuLaunchKernel's arrays) and runs the kernel.
static void emitEmulation(const EnginePlan &plan,
                          const PersistentDecodePlan::Bucket &bucket,
                          const std::string &name, std::string &out) {
  const std::string ns = name + "_plan";
  out += "#ifdef SITS_EMULATE\nextern \"C\" void " + name +
         "__entry(void **args) {\n  " + name +
         "(sits_emu::arg<const unsigned char *>(args[0]));\n}\n";
  out += "extern \"C\" int " + name +
         "__emulate(void *const *const *sits_task_args,\n"
         "    const char *const *sits_kernels, unsigned sits_count,\n"
         "    unsigned sits_multiprocessors, char *sits_error,\n"
         "    unsigned sits_error_bytes) {\n"
         "  namespace sits_plan = " +
         ns + ";\n  static const char *const kTaskKernels[] = {";
  for (size_t t = 0; t < bucket.tasks.size(); ++t)
    out += std::string(t ? ", " : "") + "\"" +
           plan.kernels[bucket.tasks[t].kernel].name + "\"";
  out += "};\n"
         "  if (!sits_emu::checkTasks(sits_plan::kTaskCount, kTaskKernels,\n"
         "      sits_plan::kBlocks, sits_count, sits_kernels,\n"
         "      sits_multiprocessors, sits_error, sits_error_bytes))\n"
         "    return 1;\n"
         "  alignas(16) static unsigned char sits_table[sits_plan::kArgBytes];"
         "\n  for (unsigned t = 0; t < sits_plan::kTaskCount; ++t) {\n"
         "    void *const *sits_in = sits_task_args[t];\n"
         "    unsigned char *sits_out = sits_table + "
         "sits_plan::kTasks[t].argOffset;\n"
         "    switch (sits_plan::kTasks[t].kernel) {\n";
  for (unsigned k : getTaskKernels(bucket)) {
    const KernelSpec &spec = plan.kernels[k];
    out += "    case " + std::to_string(k) +
           ": {\n      sits_args::" + spec.name +
           " &sits_arg = *reinterpret_cast<sits_args::" + spec.name +
           " *>(sits_out);\n";
    for (size_t i = 0; i < spec.params.size(); ++i)
      out += "      sits_arg." + spec.params[i].name + " = sits_emu::arg<" +
             spec.params[i].type + ">(sits_in[" + std::to_string(i) + "]);\n";
    out += "      break;\n    }\n";
  }
  out += "    }\n  }\n"
         "  const unsigned char *sits_table_arg = sits_table;\n"
         "  void *sits_params[] = {&sits_table_arg};\n"
         "  return sits_emu_launch_resident(" +
         name +
         "__entry, sits_plan::kBlocks,\n"
         "      sits_plan::kThreads, sits_plan::kSharedBytes, sits_params,\n"
         "      sits_error, sits_error_bytes);\n}\n#endif\n";
}

/// The most tiles one block of the persistent kernel runs in a step: its
/// records in a trace. Tile j of a task runs on block (first + j) % blocks.
static uint64_t getTraceSlots(const PersistentDecodePlan::Bucket &bucket,
                              uint64_t blocks) {
  uint64_t most = 0;
  for (uint64_t b = 0; b < blocks; ++b) {
    uint64_t tiles = 0;
    for (const PersistentDecodePlan::Task &task : bucket.tasks) {
      const uint64_t first = (b + blocks - task.firstBlock % blocks) % blocks;
      if (first < task.tiles)
        tiles += (task.tiles - first - 1) / blocks + 1;
    }
    most = std::max(most, tiles);
  }
  return most;
}

/// Registers for two blocks of the persistent kernel per SM (at most 128 a
/// thread at 256 threads), as the graph-mode GEMVs and attention are
/// compiled, so that --persistent-blocks may ask for twice the SMs: more
/// warps to hide latency. Without spills on the test models (ptxas -v).
constexpr unsigned kPersistentMinBlocksPerSM = 2;

static void emitBucket(const EnginePlan &plan,
                       const PersistentDecodePlan::Bucket &bucket,
                       std::string &out) {
  const PersistentDecodePlan &persistent = *plan.persistentDecode;
  const std::string name = "sits_decode_b" + std::to_string(bucket.batch);
  const std::string ns = name + "_plan";
  uint64_t tiles = 0, depCount = 0;
  for (const PersistentDecodePlan::Task &task : bucket.tasks)
    tiles += task.tiles;
  out += "\n// " + name + ": the decode step at batch " +
         std::to_string(bucket.batch) + ", " + str(bucket.tasks.size()) +
         " tasks of " + str(tiles) + " tiles\n" + "namespace " + ns +
         " {\nconstexpr unsigned kBlocks = " + str(persistent.blocks) +
         ", kThreads = " + str(bucket.threads) +
         ", kSharedBytes = " + str(bucket.sharedBytes) +
         ",\n    kArgBytes = " + str(bucket.argBytes) +
         ", kTaskCount = " + str(bucket.tasks.size()) + ";\n" +
         "// kernel, tiles, first block, grid, threads, arguments, deps\n"
         "__constant__ sits::PersistentTask kTasks[kTaskCount] = {\n";
  std::string deps;
  for (size_t t = 0; t < bucket.tasks.size(); ++t) {
    const PersistentDecodePlan::Task &task = bucket.tasks[t];
    out += "    {" + std::to_string(task.kernel) + ", " + str(task.tiles) +
           ", " + str(task.firstBlock) + ", {" + str(task.grid[0]) + ", " +
           str(task.grid[1]) + ", " + str(task.grid[2]) + "}, " +
           str(task.threads) + ", " + str(task.argOffset) + ", " +
           str(depCount) + ", " + str(task.deps.size()) + "}, // " +
           std::to_string(t) + ": " + plan.kernels[task.kernel].name + "\n";
    for (unsigned dep : task.deps)
      deps += (depCount++ ? ", " : "") + std::to_string(dep);
  }
  out += "};\n__constant__ unsigned kDeps[] = {" + (deps.empty() ? "0" : deps) +
         "};\n"
         "// The epoch, the blocks done with it, each task's finished tiles.\n"
         "__device__ unsigned sync[sits::kPersistentSyncHeader + kTaskCount];"
         "\n";
  const std::string trace = name + "_trace";
  if (persistent.trace)
    out += "// --persistent-trace: records of the tiles a block runs.\n"
           "constexpr unsigned kTraceSlots = " +
           str(getTraceSlots(bucket, persistent.blocks)) +
           ";\n} // namespace " + ns +
           "\n// Each block's records of its last step's tiles "
           "(sits::PersistentBlock), read\n// by the runtime by name.\n"
           "static_assert(sits::kPersistentTraceWords == " +
           str(format::kPersistentTraceWords) +
           ", \"the record the runtime reads (EngineFormat.h)\");\n"
           "extern \"C\" {\n__device__ unsigned long long " +
           trace + "[" + str(persistent.blocks) + " * " + ns +
           "::kTraceSlots * sits::kPersistentTraceWords];\n}\n";
  else
    out += "} // namespace " + ns + "\n";

  out += "extern \"C\" __global__ void __launch_bounds__(" +
         str(bucket.threads) + ", " + str(kPersistentMinBlocksPerSM) + ")\n" +
         name +
         "(const unsigned char *sits_args_table) {\n"
         "  namespace sits_plan = " +
         ns +
         ";\n"
         "  sits::PersistentBlock sits_block(sits_plan::kTasks, "
         "sits_plan::kDeps,\n"
         "                                   sits_plan::sync, "
         "sits_plan::kBlocks" +
         (persistent.trace ? ",\n                                   " + trace +
                                 ", sits_plan::kTraceSlots"
                           : std::string()) +
         ");\n"
         "  for (unsigned sits_t = 0; sits_t < sits_plan::kTaskCount; "
         "++sits_t) {\n"
         "    const sits::PersistentTask &sits_task = "
         "sits_plan::kTasks[sits_t];\n"
         "    for (unsigned sits_tile = sits_block.firstTile(sits_task);\n"
         "         sits_tile < sits_task.tiles; sits_tile += "
         "sits_plan::kBlocks) {\n"
         "      sits_block.enterTile(sits_task, sits_t, sits_tile);\n"
         "      if (threadIdx.x < sits_task.threads) {\n"
         "        const unsigned char *sits_a = sits_args_table + "
         "sits_task.argOffset;\n"
         "        switch (sits_task.kernel) {\n";
  for (unsigned k : getTaskKernels(bucket))
    emitTaskCase(k, plan.kernels[k], out);
  out += "        }\n      }\n      sits_block.leaveTile(sits_t);\n    }\n  "
         "}\n  sits_block.finish();\n}\n";
  emitEmulation(plan, bucket, name, out);
}

static void emitPersistentDecode(const EnginePlan &plan, std::string &out) {
  const PersistentDecodePlan &persistent = *plan.persistentDecode;
  out += "// The persistent decode kernels (--decode-kernels=persistent): per "
         "batch bucket\n// B, sits_decode_bB runs the decode step's launches "
         "as tasks on " +
         std::to_string(persistent.blocks) +
         " blocks,\n// all resident (sits/persistent.cuh). Its argument is "
         "the table of the tasks'\n// argument blocks: task t's at "
         "kTasks[t].argOffset, its kernel's parameters\n// as "
         "sits_args::KERNEL lays them out.\n"
         "#include \"sits/persistent.cuh\"\n";
  std::set<unsigned> kernels = getTaskKernels(persistent);
  for (unsigned k : kernels)
    emitConfig(plan.kernels[k], out);
  out += "namespace sits_args {\n";
  for (unsigned k : kernels)
    emitArgumentBlock(plan.kernels[k], out);
  out += "} // namespace sits_args\n";
  for (const PersistentDecodePlan::Bucket &bucket : persistent.buckets)
    emitBucket(plan, bucket, out);
}

std::string emitCudaSource(const EnginePlan &plan,
                           const std::string &modelName) {
  const ModelConfig &model = plan.model;
  std::string out;
  out += "// Generated by sitsc from " + modelName + " for " +
         plan.options.target.getName() + ": weights " +
         weightTypeName(plan.options.weightType) + ", KV cache " +
         format::dtypeName(model.cacheType) + ".\n";
  out += "// " + std::to_string(plan.kernels.size()) + " kernels; " +
         describeLaunches(plan) + ".\n";
  out += "// Activations are f32 [T, width], token t = b * S + i; the launch "
         "plan in the engine\n// binds every pointer (docs/codegen.md).\n";
  std::set<std::string> headers{"sits/common.cuh"};
  for (const KernelSpec &spec : plan.kernels)
    headers.insert(spec.header);
  for (const std::string &header : headers)
    out += "#include \"" + header + "\"\n";
  if (!plan.persistentDecode) {
    for (const KernelSpec &spec : plan.kernels)
      emitKernel(spec, out);
    return out;
  }
  out += "\n#ifndef SITS_PERSISTENT_DECODE\n";
  for (const KernelSpec &spec : plan.kernels)
    emitKernel(spec, out);
  out += "\n#else // SITS_PERSISTENT_DECODE\n";
  emitPersistentDecode(plan, out);
  out += "\n#endif // SITS_PERSISTENT_DECODE\n";
  return out;
}

} // namespace sits::codegen
