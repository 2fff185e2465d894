// The body every backend's operator entry point shares: validate and plan (binding/problems.h), run the
// backend's kernel unless there is nothing to compute, return the new output. Host-only.
#pragma once

#include "binding/problems.h"

namespace tiles {

template <void (*Kernel)(const MapProblem&)>
at::Tensor map_entry(const at::Tensor& x, c10::string_view fn) {
  MapProblem p = make_map_problem(x, fn);
  if (p.numel > 0) Kernel(p);
  return p.out;
}

template <void (*Kernel)(const ZipProblem&)>
at::Tensor zip_entry(const at::Tensor& a, const at::Tensor& b, c10::string_view fn) {
  ZipProblem p = make_zip_problem(a, b, fn);
  if (p.numel > 0) Kernel(p);
  return p.out;
}

template <void (*Kernel)(const ReduceProblem&)>
at::Tensor reduce_entry(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn,
                        bool keepdim) {
  ReduceProblem p = make_reduce_problem(x, dim, fn, keepdim);
  if (p.num_out > 0) Kernel(p);
  return p.out;
}

template <void (*Kernel)(const BmmProblem&)>
at::Tensor bmm_entry(const at::Tensor& a, const at::Tensor& b) {
  BmmProblem p = make_bmm_problem(a, b);
  if (p.out.numel() > 0) Kernel(p);  // k == 0 still writes zeros
  return p.out;
}

template <void (*Kernel)(const MapGradProblem&)>
at::Tensor map_grad_entry(const at::Tensor& grad, const at::Tensor& saved, c10::string_view fn) {
  MapGradProblem p = make_map_grad_problem(grad, saved, fn);
  if (p.numel > 0) Kernel(p);
  return p.out;
}

template <void (*Kernel)(const ZipGradProblem&)>
at::Tensor zip_grad_entry(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, c10::string_view fn,
                          int64_t which) {
  ZipGradProblem p = make_zip_grad_problem(grad, a, b, fn, which);
  if (p.numel > 0) Kernel(p);
  return p.out;
}

}  // namespace tiles
