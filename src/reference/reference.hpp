// The reference: plain loops over the definition, fp64 accumulation, every
// output element computed on its own and rounded once. It is the oracle of
// the tests and the last entry of every implementation list.
#pragma once

#include "problem/spec.hpp"

namespace convbwd::detail {

// a, b: operand storage (see OpSpec); dst: output storage. Views' offsets and
// strides are applied here.
void reference_run(const OpSpec& op, const void* a, const void* b, void* dst);

}  // namespace convbwd::detail
