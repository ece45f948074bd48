//===- RenderTemplate.cpp - sits-render-template, the lit tests' driver ---===//
//
//   sits-render-template [--now TIME] TEMPLATE VARIABLES.json
//       renders TEMPLATE with the JSON object in VARIABLES.json to stdout
//       (bytes as rendered, no newline added); an error goes to stderr with
//       the exit status 1.
//   sits-render-template --batch TEMPLATE CASES.json
//       renders each case of a JSON array of {"variables": {...}, "now":
//       "..."} and prints a JSON array of {"output": "..."} or
//       {"error": "...", "code": "..."}: one process for a whole comparison.
//       A case with its own "template" renders that template instead.
//
//===----------------------------------------------------------------------===//

#include "sits/ChatTemplate.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

static bool readFile(const char *path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

static int usage() {
  std::fprintf(stderr,
               "usage: sits-render-template [--now TIME] TEMPLATE VARS.json\n"
               "       sits-render-template --batch TEMPLATE CASES.json\n");
  return 2;
}

int main(int argc, char **argv) {
  std::string now;
  bool batch = false;
  std::vector<const char *> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--now" && i + 1 < argc)
      now = argv[++i];
    else if (arg == "--batch")
      batch = true;
    else if (!arg.empty() && arg[0] == '-')
      return usage();
    else
      paths.push_back(argv[i]);
  }
  if (paths.size() != 2)
    return usage();
  std::string source, variables;
  if (!readFile(paths[0], source) || !readFile(paths[1], variables)) {
    std::fprintf(stderr, "error: cannot read %s\n",
                 source.empty() ? paths[0] : paths[1]);
    return 2;
  }
  std::shared_ptr<const sits::ChatTemplate> tmpl;
  std::string parseError;
  try {
    tmpl = sits::ChatTemplate::parse(source);
  } catch (const sits::Error &e) {
    parseError = e.what();
  }
  if (!batch) {
    if (!tmpl) {
      std::fprintf(stderr, "error: %s\n", parseError.c_str());
      return 1;
    }
    try {
      std::string out = tmpl->renderAt(variables, now);
      std::fwrite(out.data(), 1, out.size(), stdout);
      return 0;
    } catch (const sits::Error &e) {
      std::fprintf(stderr, "error: %s (%s)\n", e.what(),
                   sits::errorCodeName(e.code()));
      return 1;
    }
  }
  nlohmann::ordered_json cases = nlohmann::ordered_json::parse(variables);
  nlohmann::json results = nlohmann::json::array();
  for (const auto &c : cases) {
    nlohmann::json result;
    try {
      std::shared_ptr<const sits::ChatTemplate> own = tmpl;
      if (c.contains("template"))
        own = sits::ChatTemplate::parse(c["template"].get<std::string>());
      else if (!tmpl)
        throw sits::Error(sits::ErrorCode::TemplateError, parseError);
      std::string vars = c.contains("variables_json")
                             ? c["variables_json"].get<std::string>()
                             : c.at("variables").dump();
      result["output"] = own->renderAt(vars, c.value("now", std::string()));
    } catch (const sits::Error &e) {
      result["error"] = e.what();
      result["code"] = sits::errorCodeName(e.code());
    }
    results.push_back(result);
  }
  std::cout << results.dump() << "\n";
  return 0;
}
