//===- AuditLog.cpp - What each pass changed, for reviewers ---------------===//

#include "dialects/sits/AuditLog.h"

#include "dialects/sits/SitsDialect.h"
#include "llvm/ADT/StringExtras.h"

using namespace sits;

AuditLog &AuditLog::get(mlir::MLIRContext *context) {
  return context->getOrLoadDialect<SitsDialect>()->getAuditLog();
}

int64_t &AuditPassRecord::counter(llvm::StringRef name) {
  for (auto &[key, value] : counters)
    if (key == name)
      return value;
  counters.emplace_back(name.str(), 0);
  return counters.back().second;
}

AuditPassRecord &AuditLog::record(llvm::StringRef pass) {
  for (AuditPassRecord &r : records)
    if (r.name == pass)
      return r;
  records.push_back(AuditPassRecord{});
  records.back().name = pass.str();
  return records.back();
}

void AuditLog::declareCounter(llvm::StringRef pass, llvm::StringRef counter) {
  std::lock_guard<std::mutex> lock(mutex);
  record(pass).counter(counter);
}

void AuditLog::addToCounter(llvm::StringRef pass, llvm::StringRef counter,
                            int64_t amount) {
  std::lock_guard<std::mutex> lock(mutex);
  record(pass).counter(counter) += amount;
}

void AuditLog::addChange(llvm::StringRef pass, AuditChange change) {
  std::lock_guard<std::mutex> lock(mutex);
  record(pass).changes.push_back(std::move(change));
}

void AuditLog::noteRun(llvm::StringRef pass,
                       const std::map<std::string, int64_t> &opDelta) {
  std::lock_guard<std::mutex> lock(mutex);
  AuditPassRecord &r = record(pass);
  ++r.runs;
  for (const auto &[name, delta] : opDelta)
    r.opDelta[name] += delta;
}

int64_t AuditLog::getCounter(llvm::StringRef pass,
                             llvm::StringRef counter) const {
  std::lock_guard<std::mutex> lock(mutex);
  for (const AuditPassRecord &r : records)
    if (r.name == pass)
      for (const auto &[key, value] : r.counters)
        if (key == counter)
          return value;
  return 0;
}

std::vector<AuditPassRecord> AuditLog::getRecords() const {
  std::lock_guard<std::mutex> lock(mutex);
  return records;
}

void AuditLog::clear() {
  std::lock_guard<std::mutex> lock(mutex);
  records.clear();
}

llvm::json::Value AuditLog::toJSON() const {
  llvm::json::Array passes;
  for (const AuditPassRecord &r : getRecords()) {
    llvm::json::Object counters;
    for (const auto &[name, value] : r.counters)
      counters[name] = value;
    llvm::json::Object opDelta;
    for (const auto &[name, delta] : r.opDelta)
      if (delta != 0)
        opDelta[name] = delta;
    llvm::json::Array changes;
    for (const AuditChange &c : r.changes) {
      llvm::json::Array sources;
      for (const std::string &s : c.sources)
        sources.push_back(s);
      changes.push_back(llvm::json::Object{{"sources", std::move(sources)},
                                           {"replaced", c.replaced},
                                           {"with", c.with},
                                           {"rule", c.rule}});
    }
    passes.push_back(llvm::json::Object{{"name", r.name},
                                        {"runs", static_cast<int64_t>(r.runs)},
                                        {"counters", std::move(counters)},
                                        {"op_delta", std::move(opDelta)},
                                        {"changes", std::move(changes)}});
  }
  return llvm::json::Object{{"format", "sits-audit-1"},
                            {"passes", std::move(passes)}};
}

void AuditLog::printSummary(llvm::raw_ostream &os) const {
  for (const AuditPassRecord &r : getRecords()) {
    os << "pass " << r.name << "\n";
    for (const auto &[name, value] : r.counters)
      os << "  " << name << ": " << value << "\n";
    bool anyDelta = false;
    for (const auto &[name, delta] : r.opDelta) {
      if (delta == 0)
        continue;
      os << (anyDelta ? ", " : "  ops: ") << name << " "
         << (delta > 0 ? "+" : "") << delta;
      anyDelta = true;
    }
    if (anyDelta)
      os << "\n";
    for (const AuditChange &c : r.changes) {
      os << "  - " << c.replaced << " -> " << c.with << "\n";
      os << "    rule: " << c.rule << "\n";
      if (!c.sources.empty())
        os << "    from: " << llvm::join(c.sources, ", ") << "\n";
    }
  }
}

