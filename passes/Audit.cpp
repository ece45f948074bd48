//===- Audit.cpp - What each pass changed, for reviewers ------------------===//

#include "passes/Audit.h"

#include "dialects/sits/SitsDialect.h"
#include "mlir/IR/Operation.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace sits;

static void collectSourceNames(Location loc, std::vector<std::string> &names) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string text = name.getName().str();
    if (!llvm::is_contained(names, text))
      names.push_back(text);
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      collectSourceNames(inner, names);
    return;
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    collectSourceNames(callSite.getCallee(), names);
}

std::vector<std::string> sits::getSourceNames(Location loc) {
  std::vector<std::string> names;
  collectSourceNames(loc, names);
  return names;
}

PassAudit::PassAudit(MLIRContext *context, llvm::StringRef pass,
                     llvm::ArrayRef<llvm::StringRef> counters)
    : log(AuditLog::get(context)), pass(pass.str()) {
  for (llvm::StringRef counter : counters)
    log.declareCounter(pass, counter);
}

void PassAudit::add(llvm::StringRef counter, int64_t amount) {
  log.addToCounter(pass, counter, amount);
}

void PassAudit::change(Location from, std::string replaced, std::string with,
                       std::string rule) {
  change(llvm::ArrayRef<Location>(from), std::move(replaced), std::move(with),
         std::move(rule));
}

void PassAudit::change(llvm::ArrayRef<Location> from, std::string replaced,
                       std::string with, std::string rule) {
  AuditChange c;
  for (Location loc : from)
    for (std::string &name : getSourceNames(loc))
      if (!llvm::is_contained(c.sources, name))
        c.sources.push_back(std::move(name));
  c.replaced = std::move(replaced);
  c.with = std::move(with);
  c.rule = std::move(rule);
  log.addChange(pass, std::move(c));
}

static std::map<std::string, int64_t> countOps(Operation *root) {
  std::map<std::string, int64_t> counts;
  root->walk([&](Operation *op) {
    if (op != root)
      ++counts[op->getName().getStringRef().str()];
  });
  return counts;
}

void AuditInstrumentation::runBeforePass(Pass *pass, Operation *op) {
  auto counts = countOps(op);
  std::lock_guard<std::mutex> lock(mutex);
  before[{pass, op}] = std::move(counts);
}

void AuditInstrumentation::runAfterPass(Pass *pass, Operation *op) {
  std::map<std::string, int64_t> after = countOps(op);
  std::map<std::string, int64_t> delta;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = before.find({pass, op});
    if (it == before.end())
      return;
    delta = after;
    for (const auto &[name, count] : it->second)
      delta[name] -= count;
    before.erase(it);
  }
  llvm::StringRef name = pass->getArgument();
  if (name.empty())
    name = pass->getName();
  AuditLog::get(op->getContext()).noteRun(name, delta);
}
