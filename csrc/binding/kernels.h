// The kernels a backend implements, one per op, over problems validated and planned by
// binding/problems.h: `namespace tiles::<backend> { TILES_BACKEND_KERNELS }` declares them.
#pragma once

#include "binding/problems.h"

#define TILES_BACKEND_KERNELS                 \
  void map(const MapProblem& p);              \
  void zip(const ZipProblem& p);              \
  void reduce(const ReduceProblem& p);        \
  void bmm(const BmmProblem& p);              \
  void map_grad(const MapGradProblem& p);     \
  void zip_grad(const ZipGradProblem& p);
