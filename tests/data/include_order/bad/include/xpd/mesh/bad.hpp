#pragma once
// Fixture of the include-order check: a mesh header that includes a solver header (forbidden).
#include <xpd/core/types.hpp>
#include <xpd/solver/model.hpp>
