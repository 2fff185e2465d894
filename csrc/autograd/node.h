// Creating autograd nodes the way ATen's generated code does, under either of the smart pointers torch
// has held them in: std::shared_ptr up to 2.12 (freed through deleteNode, which releases a long chain
// of nodes without recursing) and c10::intrusive_ptr from 2.13. Edge::function says which.
#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <type_traits>

namespace tiles::autograd {

using torch::autograd::Node;
using NodePtr = decltype(torch::autograd::Edge::function);
inline constexpr bool kSharedNodes = std::is_same_v<NodePtr, std::shared_ptr<Node>>;

// A new node of type N. The calls below depend on N so that only the branch of this torch is compiled.
template <class N>
auto make_node() {
  if constexpr (kSharedNodes) return std::shared_ptr<N>(new N(), [](N* node) { deleteNode(node); });  // ADL
  else return c10::make_intrusive<N>();
}

// The owning pointer to `node`, which SavedVariable::unpack needs for a saved output of that node.
template <class N, class Base = Node>
NodePtr owning_ptr(N* node) {
  if constexpr (kSharedNodes) return node->shared_from_this();
  else return c10::intrusive_ptr<Base>::unsafe_reclaim_from_nonowning(node);
}

}  // namespace tiles::autograd
