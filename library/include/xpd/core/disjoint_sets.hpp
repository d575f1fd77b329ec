#pragma once
// Disjoint sets (union–find) with path halving (Tarjan & van Leeuwen 1984). The root of a set is
// its smallest element, so the labels find() gives a partition do not depend on the order of the
// unions. Used for connected components: of a contact surface, of impact zones, of a mesh's nodes
// through its elements, of the tets around a node that a cut separates.
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace xpd {

class DisjointSets {
 public:
  DisjointSets() = default;
  explicit DisjointSets(int n) { reset(n); }
  /// n singletons {0}, …, {n − 1} (the storage is kept).
  void reset(int n) {
    parent_.resize(static_cast<std::size_t>(n));
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  int size() const { return static_cast<int>(parent_.size()); }
  /// The smallest element of i's set.
  int find(int i) {
    while (parent_[static_cast<std::size_t>(i)] != i) {
      const int up = parent_[static_cast<std::size_t>(parent_[static_cast<std::size_t>(i)])];
      parent_[static_cast<std::size_t>(i)] = up;
      i = up;
    }
    return i;
  }
  /// Joins the sets of a and b; true when they were apart.
  bool unite(int a, int b) {
    a = find(a), b = find(b);
    if (a == b) return false;
    parent_[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
    return true;
  }

 private:
  std::vector<int> parent_;
};

}  // namespace xpd
