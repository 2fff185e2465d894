// The functions behind each op's `fn` argument, as host+device functors over the op-math type
// (float for half types, else the dtype itself). CPU and CUDA kernels instantiate the same code.
#pragma once

#include <cmath>

#include "tiles/common.h"

namespace tiles {

enum class MapFn : int {
  Id, Neg, Abs, Exp, Log, Sqrt, Inv, Square, Sigmoid, Relu, Tanh, Gelu, Silu, Sin, Cos, Erf, kCount
};
enum class ZipFn : int {
  Add, Sub, Mul, Div, Max, Min, Pow, Lt, Le, Gt, Ge, Eq, Ne, kCount
};
enum class ReduceFn : int { Sum, Mean, Prod, Max, Min, LogSumExp, kCount };

// Names in enum order: the strings users pass as `fn`.
inline constexpr const char* kMapFnNames[] = {
    "id", "neg", "abs", "exp", "log", "sqrt", "inv", "square",
    "sigmoid", "relu", "tanh", "gelu", "silu", "sin", "cos", "erf"};
inline constexpr const char* kZipFnNames[] = {
    "add", "sub", "mul", "div", "max", "min", "pow", "lt", "le", "gt", "ge", "eq", "ne"};
inline constexpr const char* kReduceFnNames[] = {"sum", "mean", "prod", "max", "min", "logsumexp"};

static_assert(sizeof(kMapFnNames) / sizeof(char*) == int(MapFn::kCount));
static_assert(sizeof(kZipFnNames) / sizeof(char*) == int(ZipFn::kCount));
static_assert(sizeof(kReduceFnNames) / sizeof(char*) == int(ReduceFn::kCount));

// libm / CUDA math overloads by precision, so functors can be written once for float and double.
namespace math {
TILES_HD float exp(float x) { return ::expf(x); }
TILES_HD double exp(double x) { return ::exp(x); }
TILES_HD float log(float x) { return ::logf(x); }
TILES_HD double log(double x) { return ::log(x); }
TILES_HD float sqrt(float x) { return ::sqrtf(x); }
TILES_HD double sqrt(double x) { return ::sqrt(x); }
TILES_HD float tanh(float x) { return ::tanhf(x); }
TILES_HD double tanh(double x) { return ::tanh(x); }
TILES_HD float erf(float x) { return ::erff(x); }
TILES_HD double erf(double x) { return ::erf(x); }
TILES_HD float sin(float x) { return ::sinf(x); }
TILES_HD double sin(double x) { return ::sin(x); }
TILES_HD float cos(float x) { return ::cosf(x); }
TILES_HD double cos(double x) { return ::cos(x); }
TILES_HD float pow(float x, float y) { return ::powf(x, y); }
TILES_HD double pow(double x, double y) { return ::pow(x, y); }
TILES_HD float abs(float x) { return ::fabsf(x); }
TILES_HD double abs(double x) { return ::fabs(x); }
template <class T> TILES_HD bool isnan(T x) { return x != x; }
}  // namespace math

template <MapFn F, class T>
TILES_HD T apply_map(T x) {
  if constexpr (F == MapFn::Id) return x;
  else if constexpr (F == MapFn::Neg) return -x;
  else if constexpr (F == MapFn::Abs) return math::abs(x);
  else if constexpr (F == MapFn::Exp) return math::exp(x);
  else if constexpr (F == MapFn::Log) return math::log(x);
  else if constexpr (F == MapFn::Sqrt) return math::sqrt(x);
  else if constexpr (F == MapFn::Inv) return T(1) / x;
  else if constexpr (F == MapFn::Square) return x * x;
  else if constexpr (F == MapFn::Sigmoid) return T(1) / (T(1) + math::exp(-x));
  else if constexpr (F == MapFn::Relu) return x < T(0) ? T(0) : x;  // NaN < 0 is false: NaN stays
  else if constexpr (F == MapFn::Tanh) return math::tanh(x);
  else if constexpr (F == MapFn::Gelu) return T(0.5) * x * (T(1) + math::erf(x * T(M_SQRT1_2)));
  else if constexpr (F == MapFn::Silu) return x / (T(1) + math::exp(-x));
  else if constexpr (F == MapFn::Sin) return math::sin(x);
  else if constexpr (F == MapFn::Cos) return math::cos(x);
  else if constexpr (F == MapFn::Erf) return math::erf(x);
  else static_assert(F != F, "unhandled MapFn");
}

template <ZipFn F, class T>
TILES_HD T apply_zip(T a, T b) {
  if constexpr (F == ZipFn::Add) return a + b;
  else if constexpr (F == ZipFn::Sub) return a - b;
  else if constexpr (F == ZipFn::Mul) return a * b;
  else if constexpr (F == ZipFn::Div) return a / b;
  // NaN-propagating, as torch.maximum / torch.minimum.
  else if constexpr (F == ZipFn::Max) return math::isnan(a) ? a : (math::isnan(b) || b > a ? b : a);
  else if constexpr (F == ZipFn::Min) return math::isnan(a) ? a : (math::isnan(b) || b < a ? b : a);
  else if constexpr (F == ZipFn::Pow) return math::pow(a, b);
  else if constexpr (F == ZipFn::Lt) return T(a < b);
  else if constexpr (F == ZipFn::Le) return T(a <= b);
  else if constexpr (F == ZipFn::Gt) return T(a > b);
  else if constexpr (F == ZipFn::Ge) return T(a >= b);
  else if constexpr (F == ZipFn::Eq) return T(a == b);
  else if constexpr (F == ZipFn::Ne) return T(a != b);
  else static_assert(F != F, "unhandled ZipFn");
}

// ---- derivatives (the backward kernels, tiles::_map_backward and tiles::_zip_backward) -----------

// Whether map fn F's derivative is written in terms of its output y = f(x) rather than its input x;
// autograd then saves y instead of x, and the backward kernel reads that one tensor.
constexpr bool map_grad_uses_output(MapFn f) {
  return f == MapFn::Exp || f == MapFn::Sqrt || f == MapFn::Inv || f == MapFn::Sigmoid || f == MapFn::Tanh;
}

// grad * f'(x), given `v`: y = f(x) where map_grad_uses_output(F), else x.
template <MapFn F, class T>
TILES_HD T map_grad(T g, T v) {
  if constexpr (F == MapFn::Id) return g;
  else if constexpr (F == MapFn::Neg) return -g;
  else if constexpr (F == MapFn::Abs) return g * (T(v > T(0)) - T(v < T(0)));  // sign(0) = 0, as torch.abs
  else if constexpr (F == MapFn::Exp) return g * v;
  else if constexpr (F == MapFn::Log) return g / v;
  else if constexpr (F == MapFn::Sqrt) return g / (T(2) * v);
  else if constexpr (F == MapFn::Inv) return -(g * (v * v));
  else if constexpr (F == MapFn::Square) return g * (T(2) * v);
  else if constexpr (F == MapFn::Sigmoid) return g * (v * (T(1) - v));
  // As torch's threshold_backward: a select, not a product, so an inactive input (x <= 0) drops even an
  // inf or NaN gradient, and a NaN x (which relu passes) passes g.
  else if constexpr (F == MapFn::Relu) return v <= T(0) ? T(0) : g;
  else if constexpr (F == MapFn::Tanh) return g * (T(1) - v * v);
  else if constexpr (F == MapFn::Gelu) {  // d/dx x Φ(x) = Φ(x) + x φ(x)
    const T cdf = T(0.5) * (T(1) + math::erf(v * T(M_SQRT1_2)));
    const T pdf = math::exp(T(-0.5) * v * v) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);  // 1 / √(2π)
    return g * (cdf + v * pdf);
  } else if constexpr (F == MapFn::Silu) {  // d/dx x s(x) = s (1 + x (1 - s))
    const T s = T(1) / (T(1) + math::exp(-v));
    return g * (s * (T(1) + v * (T(1) - s)));
  } else if constexpr (F == MapFn::Sin) return g * math::cos(v);
  else if constexpr (F == MapFn::Cos) return -(g * math::sin(v));
  else if constexpr (F == MapFn::Erf) return g * (T(M_2_SQRTPI) * math::exp(-(v * v)));
  else static_assert(F != F, "unhandled MapFn");
}

// The zip fns whose gradients take a kernel of their own; add, sub and mul need only a sign or one
// product (tiles ops), and comparisons have none.
constexpr bool has_zip_grad_kernel(ZipFn f) {
  return f == ZipFn::Div || f == ZipFn::Max || f == ZipFn::Min || f == ZipFn::Pow;
}

// grad * ∂zip(a, b)/∂a (Which = 0) or ∂/∂b (Which = 1), at the broadcast position.
template <ZipFn F, int Which, class T>
TILES_HD T zip_grad(T g, T a, T b) {
  if constexpr (F == ZipFn::Div) {
    if constexpr (Which == 0) return g / b;
    else return -((g / b) * (a / b));  // -g a / b², without squaring b (overflow)
  } else if constexpr (F == ZipFn::Max || F == ZipFn::Min) {
    // As torch.maximum / torch.minimum: the whole gradient to the winner, half each at a tie, and
    // the whole to both where either is NaN (the comparisons are then false).
    const T self = Which == 0 ? a : b, other = Which == 0 ? b : a;
    const bool loses = F == ZipFn::Max ? self < other : self > other;
    return g * (T(1) - T(loses) - T(0.5) * T(self == other));
  } else if constexpr (F == ZipFn::Pow) {
    if constexpr (Which == 0) return g * (b * math::pow(a, b - T(1)));
    else return g * (math::pow(a, b) * math::log(a));
  } else {
    static_assert(F != F, "no gradient kernel for this ZipFn (has_zip_grad_kernel)");
  }
}

// A reduction as (identity, lift, combine, finish) over an accumulator `Acc`: lift turns an element
// (op-math type T) into an accumulator, finish an accumulator into the result. Mean accumulates like
// Sum and divides at the end; Max/Min propagate NaN like torch.amax / torch.amin. `combine` must be
// associative for the split (tree / chunked) evaluation orders the kernels use; it is, up to rounding.
template <ReduceFn F, class T>
struct Reducer {
  using Acc = T;
  static TILES_HD Acc identity() {
    if constexpr (F == ReduceFn::Prod) return Acc(1);
    else if constexpr (F == ReduceFn::Max) return -INFINITY;
    else if constexpr (F == ReduceFn::Min) return INFINITY;
    else return Acc(0);
  }
  template <class X>
  static TILES_HD Acc lift(X x) { return Acc(x); }
  static TILES_HD Acc combine(Acc a, Acc b) {
    if constexpr (F == ReduceFn::Prod) return a * b;
    else if constexpr (F == ReduceFn::Max) return apply_zip<ZipFn::Max>(a, b);
    else if constexpr (F == ReduceFn::Min) return apply_zip<ZipFn::Min>(a, b);
    else return a + b;
  }
  static TILES_HD T finish(Acc a, int64_t count) {
    if constexpr (F == ReduceFn::Mean) return a / Acc(count);  // 0 / 0 = NaN for an empty mean
    else return a;
  }
};

// log(sum(exp(x))) in one pass: the largest element so far and the sum of exp(element - largest).
template <class T>
struct MaxSum {
  T max, sum;
};

template <class T>
struct Reducer<ReduceFn::LogSumExp, T> {
  using Acc = MaxSum<T>;
  static TILES_HD Acc identity() { return {T(-INFINITY), T(0)}; }
  template <class X>
  static TILES_HD Acc lift(X x) { return {T(x), T(1)}; }
  // Rescales the smaller state to the larger max: one exp per element. Equal maxes (also two infinities
  // of one sign, whose difference would be NaN) add; a NaN max wins neither compare and stays NaN.
  static TILES_HD Acc combine(Acc a, Acc b) {
    if (a.max == b.max) return {a.max, a.sum + b.sum};
    const bool b_larger = b.max > a.max;
    const Acc hi = b_larger ? b : a, lo = b_larger ? a : b;
    return {hi.max, hi.sum + lo.sum * math::exp(lo.max - hi.max)};
  }
  // Over no elements: log(0) + -inf = -inf, as torch.logsumexp.
  static TILES_HD T finish(Acc a, int64_t) { return math::log(a.sum) + a.max; }
};

}  // namespace tiles
