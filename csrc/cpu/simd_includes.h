// Everything simd_body.h and bmm_body.h use, included by each simd_*.cpp before it switches target
// options: these headers' inline functions must keep the baseline target in every translation unit.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "cpu/loops.h"
#include "cpu/simd.h"
#include "tiles/functions.h"
#include "tiles/loads.h"
