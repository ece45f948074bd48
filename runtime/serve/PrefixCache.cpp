//===- PrefixCache.cpp - Which pool block holds which prompt prefix -------===//

#include "PrefixCache.h"

#include "sits/Error.h"

using namespace sits;
using namespace sits::serve;

PrefixCache::PrefixCache(uint32_t blockTokens, uint32_t blocks)
    : tokensPerBlock(blockTokens) {
  if (blockTokens == 0 || blocks == 0)
    throw Error(ErrorCode::InvalidArgument,
                "a prefix cache needs blocks of at least one token");
  nodes.resize(uint64_t(blocks) + 1);
  nodes[0].live = true;
  // Lowest pool blocks first.
  for (uint32_t id = blocks; id >= 1; --id)
    freeNodes.push_back(id);
}

std::vector<int32_t> PrefixCache::blockOf(const std::vector<int32_t> &tokens,
                                          uint32_t index) const {
  auto first = tokens.begin() + uint64_t(index) * tokensPerBlock;
  return std::vector<int32_t>(first, first + tokensPerBlock);
}

void PrefixCache::unlist(uint32_t id) {
  evictable.erase({nodes[id].lastUse, id});
}

void PrefixCache::list(uint32_t id) {
  const Node &node = nodes[id];
  if (id != 0 && node.live && node.refs == 0 && node.children.empty())
    evictable.insert({node.lastUse, id});
}

PrefixCache::Path PrefixCache::match(const std::vector<int32_t> &tokens,
                                     uint32_t maxBlocks) {
  Path path;
  uint32_t at = 0;
  for (uint32_t i = 0;
       i < maxBlocks && uint64_t(i + 1) * tokensPerBlock <= tokens.size();
       ++i) {
    auto found = nodes[at].children.find(blockOf(tokens, i));
    if (found == nodes[at].children.end())
      break;
    at = found->second;
    unlist(at);
    ++nodes[at].refs;
    nodes[at].lastUse = ++tick;
    path.push_back(at);
  }
  return path;
}

std::vector<uint32_t> PrefixCache::poolIds(const Path &path) const {
  std::vector<uint32_t> ids;
  ids.reserve(path.size());
  for (uint32_t id : path)
    ids.push_back(id - 1);
  return ids;
}

void PrefixCache::remove(uint32_t id) {
  Node &node = nodes[id];
  unlist(id);
  Node &parent = nodes[node.parent];
  parent.children.erase(node.tokens);
  list(node.parent); // it may have become an unreferenced leaf
  node = Node();
  freeNodes.push_back(id);
}

uint32_t PrefixCache::take() {
  if (freeNodes.empty()) {
    if (evictable.empty())
      return 0;
    uint32_t victim = evictable.begin()->second;
    remove(victim);
    ++evicted;
  }
  uint32_t id = freeNodes.back();
  freeNodes.pop_back();
  return id;
}

std::vector<PrefixCache::NewBlock>
PrefixCache::extend(Path &path, const std::vector<int32_t> &tokens,
                    uint32_t maxBlocks) {
  std::vector<NewBlock> added;
  for (uint32_t i = uint32_t(path.size());
       i < maxBlocks && uint64_t(i + 1) * tokensPerBlock <= tokens.size();
       ++i) {
    uint32_t parent = path.empty() ? 0 : path.back();
    std::vector<int32_t> key = blockOf(tokens, i);
    auto found = nodes[parent].children.find(key);
    uint32_t id;
    if (found != nodes[parent].children.end()) {
      id = found->second;
      unlist(id);
    } else {
      // The parent is referenced (on the path) or the root: never evicted.
      id = take();
      if (id == 0)
        break;
      Node &node = nodes[id];
      node.tokens = key;
      node.parent = parent;
      node.live = true;
      unlist(parent);
      nodes[parent].children.emplace(std::move(key), id);
      added.push_back({i, id - 1});
    }
    ++nodes[id].refs;
    nodes[id].lastUse = ++tick;
    path.push_back(id);
  }
  return added;
}

void PrefixCache::discard(Path &path, size_t from) {
  while (path.size() > from) {
    uint32_t id = path.back();
    path.pop_back();
    nodes[id].refs = 0;
    nodes[id].children.clear(); // only blocks of this path hang below it
    remove(id);
  }
}

void PrefixCache::release(Path &path) {
  for (uint32_t id : path) {
    if (nodes[id].refs > 0)
      --nodes[id].refs;
    list(id);
  }
  path.clear();
}
