#include <xpd/energy/term.hpp>

namespace xpd {

double Term::energy(const Points& x, const FrameInputs& in) const {
  std::vector<double> p(static_cast<size_t>(num_constraints()) * static_cast<size_t>(projection_size()));
  project(x, in, p.data());
  return energy_given(x, in, p.data());
}

void Term::add_matrix3(std::vector<Triplet>& triplets) const {
  std::vector<Triplet> scalar;
  add_matrix(scalar);
  triplets.reserve(triplets.size() + 3 * scalar.size());
  for (const Triplet& t : scalar)
    for (int d = 0; d < 3; ++d) triplets.emplace_back(3 * t.row() + d, 3 * t.col() + d, t.value());
}

void Term::add_gradient(const Points& x, const FrameInputs& in, Points& g) const {
  Points f = Points::Zero(x.rows(), 3);
  project_add_force(x, in, f, nullptr);
  g -= f;
}

void Term::add_hessian_product(const Points& x, const FrameInputs& in, const Points& h, Points& out) const {
  std::vector<Triplet> trip;
  add_hessian(x, in, trip, /*psd_project=*/false);
  // Triplets hold DOF indices 3·node + coordinate, i.e. offsets into the row-major #V × 3 arrays.
  const double* hv = h.data();
  double* ov = out.data();
  for (const Triplet& t : trip) ov[t.row()] += t.value() * hv[t.col()];
}

namespace {
struct TripletCache : Term::HessianCache {
  std::vector<Triplet> triplets;
};
}  // namespace

std::unique_ptr<Term::HessianCache> Term::make_hessian_cache(const Points& x, const FrameInputs& in) const {
  auto c = std::make_unique<TripletCache>();
  add_hessian(x, in, c->triplets, /*psd_project=*/false);
  return c;
}

void Term::add_cached_hessian_product(const HessianCache* cache, const Points& x, const FrameInputs& in,
                                      const Points& h, Points& out) const {
  const auto* c = dynamic_cast<const TripletCache*>(cache);
  if (!c) {
    add_hessian_product(x, in, h, out);
    return;
  }
  const double* hv = h.data();
  double* ov = out.data();
  for (const Triplet& t : c->triplets) ov[t.row()] += t.value() * hv[t.col()];
}

void Term::add_input_gradient(const Points&, const FrameInputs&, const Points&, FrameInputs&) const {}

}  // namespace xpd
