// Error-message text built without std::ostream number formatting, and TILES_CHECK, which uses it.
//
// Why not TORCH_CHECK's own formatting: a toolchain that links a private static libstdc++ into the
// extension (seen on the GPU machines, whose default CXX is /opt/gcc/bin/g++) segfaults in
// ostream's num_put the first time our library streams a number into a message, because the stream's
// locale facets belong to the process's shared libstdc++. std::to_string does not touch locales.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

namespace tiles::fmt {

template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
std::string str(T v) { return std::to_string(v); }
inline std::string str(std::string_view s) { return std::string(s); }
inline std::string str(const std::string& s) { return s; }
inline std::string str(const char* s) { return s; }
inline std::string str(c10::ScalarType t) { return c10::toString(t); }
inline std::string str(const c10::Device& d) { return d.str(); }
inline std::string str(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

template <class... Args>
std::string cat(const Args&... args) {
  std::string out;
  (out += ... += str(args));
  return out;
}

}  // namespace tiles::fmt

// TORCH_CHECK with the message built by tiles::fmt::cat (only when the check fails).
#define TILES_CHECK(cond, ...) TORCH_CHECK(cond, ::tiles::fmt::cat(__VA_ARGS__))
