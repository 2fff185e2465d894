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
enum class ReduceFn : int { Sum, Mean, Prod, Max, Min, kCount };

// Names in enum order: the strings users pass as `fn`.
inline constexpr const char* kMapFnNames[] = {
    "id", "neg", "abs", "exp", "log", "sqrt", "inv", "square",
    "sigmoid", "relu", "tanh", "gelu", "silu", "sin", "cos", "erf"};
inline constexpr const char* kZipFnNames[] = {
    "add", "sub", "mul", "div", "max", "min", "pow", "lt", "le", "gt", "ge", "eq", "ne"};
inline constexpr const char* kReduceFnNames[] = {"sum", "mean", "prod", "max", "min"};

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

// A reduction as (identity, combine, finish). Mean accumulates like Sum and divides at the end;
// Max/Min propagate NaN like torch.amax / torch.amin. `combine` must be associative for the split
// (tree / chunked) evaluation orders the kernels use; it is, up to floating-point rounding.
template <ReduceFn F, class Acc>
struct Reducer {
  static TILES_HD Acc identity() {
    if constexpr (F == ReduceFn::Prod) return Acc(1);
    else if constexpr (F == ReduceFn::Max) return -INFINITY;
    else if constexpr (F == ReduceFn::Min) return INFINITY;
    else return Acc(0);
  }
  static TILES_HD Acc combine(Acc a, Acc b) {
    if constexpr (F == ReduceFn::Prod) return a * b;
    else if constexpr (F == ReduceFn::Max) return apply_zip<ZipFn::Max>(a, b);
    else if constexpr (F == ReduceFn::Min) return apply_zip<ZipFn::Min>(a, b);
    else return a + b;
  }
  static TILES_HD Acc finish(Acc a, int64_t count) {
    if constexpr (F == ReduceFn::Mean) return a / Acc(count);  // 0 / 0 = NaN for an empty mean
    else return a;
  }
};

}  // namespace tiles
