// What every tiles autograd kernel shares: whether a call records a graph, the refusal of forward-mode
// tangents, the node base with its saved values, and hooking a node to its output.
#pragma once

#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <initializer_list>
#include <mutex>
#include <string>

#include "autograd/node.h"

namespace tiles::autograd {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// Forward-mode AD (dual tensors) has no formulas here: refuse a tangent rather than drop it, as ATen does
// for its ops without forward derivatives.
inline void check_no_tangent(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(!t._fw_grad(/*level=*/0).defined(), op, ": forward-mode AD is not supported: argument '",
                              arg, "' has a tangent (a dual tensor)");
}

inline bool records_graph(std::initializer_list<const at::Tensor*> inputs) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

// A node's common part: its name, and the saved values released after a backward that does not retain
// the graph (a second backward then fails in SavedVariable::unpack, as it does for ATen's nodes).
template <size_t kSaved>
struct TilesNode : Node {
  explicit TilesNode(const char* name) : name_(name) {}
  std::string name() const override { return name_; }
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (SavedVariable& s : saved_) s.reset_data();
  }

  // Saved value k, or an undefined tensor where none was saved.
  at::Tensor saved(size_t k) {
    return saved_output_[k] ? saved_[k].unpack(owning_ptr(this)) : saved_[k].unpack();
  }
  void save(size_t k, const at::Tensor& t, bool is_output) {
    saved_[k] = SavedVariable(t, is_output);
    saved_output_[k] = is_output;
  }

 private:
  const char* name_;
  SavedVariable saved_[kSaved];
  bool saved_output_[kSaved] = {};
};

// Hands `out` to `node` as its output (history) after pointing the node at its inputs' gradient edges.
template <class NodeT, class... Inputs>
at::Tensor recorded(const NodeT& node, at::Tensor out, const Inputs&... inputs) {
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace tiles::autograd
