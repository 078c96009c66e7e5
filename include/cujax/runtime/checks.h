// The conformance suite's comparisons, as the StableHLO reference interpreter defines them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cujax/core/host_tensor.h"

namespace cujax::runtime {

enum class CheckKind {
  ExpectEq,        // bitwise equal element by element (NaN equals NaN)
  ExpectClose,     // finite elements at most 3 ULP apart; non-finite bitwise equal or both NaN
  ExpectAlmostEq,  // |a - b| <= tolerance element by element
};

// "check.expect_eq" -> ExpectEq; nullopt for an unknown target. The interpreter suite's op
// forms map the same way: "check.expect_eq_const" -> ExpectEq, "check.expect_almost_eq_const"
// -> ExpectAlmostEq.
std::optional<CheckKind> check_kind_from_name(std::string_view target);

// nullopt when the check holds; otherwise why not ("index [1,2]: got 1.5, expected 1.25", or a
// type mismatch).
// `tolerance` is ExpectAlmostEq's: 0.001 for JAX's custom calls, 1e-4 by default for the
// interpreter's check ops (its CheckOps.td).
std::optional<std::string> check_values(CheckKind kind, const HostTensor& actual,
                                        const HostTensor& expected, double tolerance = 1e-3);

// One element formatted for messages, exactly enough digits to tell values apart.
std::string format_element(const HostTensor& t, int64_t flat_index);

}  // namespace cujax::runtime
