// CUDA kernels, one per op, over problems validated and planned by binding/problems.h. Each launches on
// the current stream of the current device (the entry point in ops.cu guards the device).
#pragma once

#include "binding/problems.h"

namespace tiles::cuda {

void map(const MapProblem& p);
void zip(const ZipProblem& p);
void reduce(const ReduceProblem& p);
void bmm(const BmmProblem& p);
void map_grad(const MapGradProblem& p);
void zip_grad(const ZipGradProblem& p);

}  // namespace tiles::cuda
