// Turns a run-time fn (and dtype) into compile-time template arguments. Host-only.
//
//   dispatch_fn(problem.fn, [&](auto fn) { launch<decltype(fn)::value>(...); });
#pragma once

#include <type_traits>
#include <utility>

#include <ATen/Dispatch.h>

#include "tiles/functions.h"

namespace tiles {

template <class Enum, Enum V>
using FnTag = std::integral_constant<Enum, V>;

namespace detail {
template <class Enum, int... I, class F>
void dispatch_fn(Enum fn, F&& f, std::integer_sequence<int, I...>) {
  // Calls f with the one tag whose value equals fn.
  ((int(fn) == I ? (f(FnTag<Enum, Enum(I)>{}), true) : false) || ...);
}
}  // namespace detail

template <class Enum, class F>
void dispatch_fn(Enum fn, F&& f) {
  detail::dispatch_fn(fn, std::forward<F>(f), std::make_integer_sequence<int, int(Enum::kCount)>{});
}

}  // namespace tiles

// The four dtypes every op accepts.
#define TILES_DISPATCH_FLOAT_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)
