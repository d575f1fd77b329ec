#pragma once
// Second-order forward-mode numbers: a value with its gradient and Hessian with respect to N
// inputs. The contact distances (distance.cpp) are short rational expressions in 6–12 coordinates;
// writing each once on Jet2 gives their exact first and second derivatives (up to rounding) for
// every distance type and for products with the mollifier and the barrier, without 16 hand-expanded
// Hessians to keep consistent. Private to the collision area.
#include <Eigen/Core>
#include <array>

namespace xpd::detail {

template <int N>
struct Jet2 {
  using Vector = Eigen::Matrix<double, N, 1>;
  using Matrix = Eigen::Matrix<double, N, N>;
  double v = 0;
  Vector g = Vector::Zero();
  Matrix h = Matrix::Zero();

  static Jet2 constant(double value) {
    Jet2 j;
    j.v = value;
    return j;
  }
  static Jet2 variable(double value, int index) {
    Jet2 j;
    j.v = value;
    j.g[index] = 1;
    return j;
  }
};

template <int N>
Jet2<N> operator+(const Jet2<N>& a, const Jet2<N>& b) {
  Jet2<N> r;
  r.v = a.v + b.v;
  r.g = a.g + b.g;
  r.h = a.h + b.h;
  return r;
}

template <int N>
Jet2<N> operator-(const Jet2<N>& a, const Jet2<N>& b) {
  Jet2<N> r;
  r.v = a.v - b.v;
  r.g = a.g - b.g;
  r.h = a.h - b.h;
  return r;
}

template <int N>
Jet2<N> operator*(const Jet2<N>& a, const Jet2<N>& b) {
  Jet2<N> r;
  r.v = a.v * b.v;
  r.g = a.v * b.g + b.v * a.g;
  r.h = a.v * b.h + b.v * a.h + a.g * b.g.transpose() + b.g * a.g.transpose();
  return r;
}

template <int N>
Jet2<N> operator*(double s, const Jet2<N>& a) {
  Jet2<N> r;
  r.v = s * a.v;
  r.g = s * a.g;
  r.h = s * a.h;
  return r;
}

/// f(a) for a scalar function with value f0, first derivative f1 and second f2 at a.v.
template <int N>
Jet2<N> chain(const Jet2<N>& a, double f0, double f1, double f2) {
  Jet2<N> r;
  r.v = f0;
  r.g = f1 * a.g;
  r.h = f1 * a.h + f2 * a.g * a.g.transpose();
  return r;
}

template <int N>
Jet2<N> operator/(const Jet2<N>& a, const Jet2<N>& b) {
  const double inv = 1.0 / b.v;
  return a * chain(b, inv, -inv * inv, 2 * inv * inv * inv);
}

/// 3-vectors of doubles or of Jet2: the distance formulas are written once for both.
template <typename S>
using Vec = std::array<S, 3>;

template <typename S>
Vec<S> operator-(const Vec<S>& a, const Vec<S>& b) {
  return {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
}

template <typename S>
S dot(const Vec<S>& a, const Vec<S>& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

template <typename S>
Vec<S> cross(const Vec<S>& a, const Vec<S>& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

/// The 3 coordinates of point k as inputs 3k, 3k+1, 3k+2.
template <int N>
Vec<Jet2<N>> point_variable(const Eigen::Vector3d& x, int k) {
  return {Jet2<N>::variable(x[0], 3 * k), Jet2<N>::variable(x[1], 3 * k + 1), Jet2<N>::variable(x[2], 3 * k + 2)};
}

inline Vec<double> point_value(const Eigen::Vector3d& x) { return {x[0], x[1], x[2]}; }

}  // namespace xpd::detail
