// `cujax bench ...`: benchmarks that print tables; never part of the tests.
#pragma once

namespace cujax::cli {

int bench_dispatch();

}  // namespace cujax::cli
