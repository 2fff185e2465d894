// CPU kernels, one per op, over problems validated and planned by binding/problems.h.
#pragma once

#include "binding/problems.h"

namespace tiles::cpu {

void map(const MapProblem& p);
void zip(const ZipProblem& p);
void reduce(const ReduceProblem& p);
void bmm(const BmmProblem& p);
void map_grad(const MapGradProblem& p);
void zip_grad(const ZipGradProblem& p);

}  // namespace tiles::cpu
