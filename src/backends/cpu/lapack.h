// LAPACK's Fortran entry points (OpenBLAS exports them), one typed call per routine.
//
// Fortran passes every argument by reference; gfortran appends the length of each CHARACTER
// argument after the others, so the declarations take them (as `size_t`, always 1) to stay
// correct whichever compiler built the library. INTEGER is 32 bits (Debian's OpenBLAS is LP64).
// A workspace query (lwork = -1) precedes each call that takes a workspace.
#pragma once

#include <algorithm>
#include <complex>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace cujax::cpu::lapack {

using c64 = std::complex<float>;
using c128 = std::complex<double>;
using fchar = char;  // CHARACTER*1
using fint = int;    // INTEGER
// LOGICAL FUNCTION SELECT(...) of gees; never called (sort = 'N').
using select_fn = fint (*)(...);

extern "C" {
#define CUJAX_LAPACK_PER_TYPE(p, T, R)                                                        \
  void p##potrf_(const fchar*, const fint*, T*, const fint*, fint*, size_t);                  \
  void p##getrf_(const fint*, const fint*, T*, const fint*, fint*, fint*);                    \
  void p##geqrf_(const fint*, const fint*, T*, const fint*, T*, T*, const fint*, fint*);      \
  void p##gehrd_(const fint*, const fint*, const fint*, T*, const fint*, T*, T*, const fint*, \
                 fint*);                                                                      \
  void p##gtsv_(const fint*, const fint*, T*, T*, T*, T*, const fint*, fint*);
CUJAX_LAPACK_PER_TYPE(s, float, float)
CUJAX_LAPACK_PER_TYPE(d, double, double)
CUJAX_LAPACK_PER_TYPE(c, c64, float)
CUJAX_LAPACK_PER_TYPE(z, c128, double)
#undef CUJAX_LAPACK_PER_TYPE

#define CUJAX_LAPACK_REAL(p, T)                                                                    \
  void p##orgqr_(const fint*, const fint*, const fint*, T*, const fint*, const T*, T*,             \
                 const fint*, fint*);                                                              \
  void p##syevd_(const fchar*, const fchar*, const fint*, T*, const fint*, T*, T*, const fint*,    \
                 fint*, const fint*, fint*, size_t, size_t);                                       \
  void p##gesdd_(const fchar*, const fint*, const fint*, T*, const fint*, T*, T*, const fint*, T*, \
                 const fint*, T*, const fint*, fint*, fint*, size_t);                              \
  void p##gesvd_(const fchar*, const fchar*, const fint*, const fint*, T*, const fint*, T*, T*,    \
                 const fint*, T*, const fint*, T*, const fint*, fint*, size_t, size_t);            \
  void p##geev_(const fchar*, const fchar*, const fint*, T*, const fint*, T*, T*, T*, const fint*, \
                T*, const fint*, T*, const fint*, fint*, size_t, size_t);                          \
  void p##gees_(const fchar*, const fchar*, select_fn, const fint*, T*, const fint*, fint*, T*,    \
                T*, T*, const fint*, T*, const fint*, fint*, fint*, size_t, size_t);               \
  void p##sytrd_(const fchar*, const fint*, T*, const fint*, T*, T*, T*, T*, const fint*, fint*,   \
                 size_t);                                                                          \
  void p##geqp3_(const fint*, const fint*, T*, const fint*, fint*, T*, T*, const fint*, fint*);
CUJAX_LAPACK_REAL(s, float)
CUJAX_LAPACK_REAL(d, double)
#undef CUJAX_LAPACK_REAL

#define CUJAX_LAPACK_COMPLEX(p, T, R)                                                              \
  void p##ungqr_(const fint*, const fint*, const fint*, T*, const fint*, const T*, T*,             \
                 const fint*, fint*);                                                              \
  void p##heevd_(const fchar*, const fchar*, const fint*, T*, const fint*, R*, T*, const fint*,    \
                 R*, const fint*, fint*, const fint*, fint*, size_t, size_t);                      \
  void p##gesdd_(const fchar*, const fint*, const fint*, T*, const fint*, R*, T*, const fint*, T*, \
                 const fint*, T*, const fint*, R*, fint*, fint*, size_t);                          \
  void p##gesvd_(const fchar*, const fchar*, const fint*, const fint*, T*, const fint*, R*, T*,    \
                 const fint*, T*, const fint*, T*, const fint*, R*, fint*, size_t, size_t);        \
  void p##geev_(const fchar*, const fchar*, const fint*, T*, const fint*, T*, T*, const fint*, T*, \
                const fint*, T*, const fint*, R*, fint*, size_t, size_t);                          \
  void p##gees_(const fchar*, const fchar*, select_fn, const fint*, T*, const fint*, fint*, T*,    \
                T*, const fint*, T*, const fint*, R*, fint*, fint*, size_t, size_t);               \
  void p##hetrd_(const fchar*, const fint*, T*, const fint*, R*, R*, T*, T*, const fint*, fint*,   \
                 size_t);                                                                          \
  void p##geqp3_(const fint*, const fint*, T*, const fint*, fint*, T*, T*, const fint*, R*, fint*);
CUJAX_LAPACK_COMPLEX(c, c64, float)
CUJAX_LAPACK_COMPLEX(z, c128, double)
#undef CUJAX_LAPACK_COMPLEX
}

template <class T>
struct real_of {
  using type = T;
};
template <class R>
struct real_of<std::complex<R>> {
  using type = R;
};
template <class T>
using real_t = typename real_of<T>::type;
template <class T>
constexpr bool is_complex_v = !std::is_same_v<T, real_t<T>>;

// The optimal workspace size a query wrote into `w` (at least 1).
template <class T>
fint work_size(const T& w) {
  if constexpr (is_complex_v<T>) {
    return std::max<fint>(1, static_cast<fint>(w.real()));
  } else {
    return std::max<fint>(1, static_cast<fint>(w));
  }
}

// Picks the routine of T's precision: s, d, c or z.
#define CUJAX_LAPACK_PICK(T, name, ...)                              \
  do {                                                               \
    if constexpr (std::is_same_v<T, float>)                          \
      ::cujax::cpu::lapack::s##name(__VA_ARGS__);                    \
    else if constexpr (std::is_same_v<T, double>)                    \
      ::cujax::cpu::lapack::d##name(__VA_ARGS__);                    \
    else if constexpr (std::is_same_v<T, ::cujax::cpu::lapack::c64>) \
      ::cujax::cpu::lapack::c##name(__VA_ARGS__);                    \
    else                                                             \
      ::cujax::cpu::lapack::z##name(__VA_ARGS__);                    \
  } while (0)
#define CUJAX_LAPACK_PICK_REAL(T, name, ...)      \
  do {                                            \
    if constexpr (std::is_same_v<T, float>)       \
      ::cujax::cpu::lapack::s##name(__VA_ARGS__); \
    else                                          \
      ::cujax::cpu::lapack::d##name(__VA_ARGS__); \
  } while (0)
#define CUJAX_LAPACK_PICK_COMPLEX(T, name, ...)                 \
  do {                                                          \
    if constexpr (std::is_same_v<T, ::cujax::cpu::lapack::c64>) \
      ::cujax::cpu::lapack::c##name(__VA_ARGS__);               \
    else                                                        \
      ::cujax::cpu::lapack::z##name(__VA_ARGS__);               \
  } while (0)

}  // namespace cujax::cpu::lapack
