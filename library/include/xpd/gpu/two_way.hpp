#pragma once
// Two-way continuous collision handling on the GPU (Wang, Chen, Li, Liu, Wang, Zhou 2023, "Fast
// GPU-Based Two-Way Continuous Collision Handling", Alg. 1): the proximity search, the backward
// step and the forward step of collision/two_way.hpp run on one CUDA device with the positions
// resident for the whole projection. The CPU projector (TwoWayProjector::project) is the
// reference: the same setup (contact surface, embedding, masses, edge-length constraints, volume
// floors, options) is read from it, the same formulas are evaluated in FP64, and the tests compare
// the two (tests/gpu/test_device_two_way.cpp).
//
// What differs from the CPU, and why it keeps the guarantees:
// - Proximity search: the cells of a uniform grid (cell size max(D^max, the rest mean edge length
//   of the contact surface)) are 63-bit codes; each triangle's (each edge's) box grown by D is
//   registered in the cells it overlaps, the (code, primitive) entries are radix-sorted (CUB), and a
//   point (an edge) finds its cells' entries by binary search. A primitive whose grown box covers
//   more than 4,096 cells (an obstacle plate beside a fine body) is kept in a list that every query
//   scans instead. Candidates pass the same box, plane/line and distance tests as the CPU's; the
//   pairs come back sorted, as on the CPU, so pair q means the same pair on both (up to pairs whose
//   distance rounds differently across D).
// - Colouring: the CPU colours greedily in a seeded random order; the device colours by rounds of
//   independent sets (Jones & Plassmann 1993): a constraint takes the round's colour when its
//   seeded random priority is the largest among the uncoloured constraints sharing a movable node
//   with it. Every colour is still a set of constraints without a shared movable node, so a colour
//   relaxes in parallel exactly as it would serially. The soft constraints go first and the
//   contacts last, as on the CPU, but where the CPU colours edge lengths and volume floors together
//   every step, the device colours them as two families, the edge lengths once per projection, the
//   floors and contacts every step. Results equal the CPU's up to the order of the sweep.
// - Forward step: the per-node α is the minimum of the same bounds, taken with an integer atomicMin
//   on the bits of non-negative doubles (exact and order-independent); every maximum (‖r‖∞, the
//   largest point motion) likewise. Two runs are bitwise equal.
// - Impact zones (forward = Zones): the CPU's union–find becomes hooking passes (each pair closer
//   than δ hooks the larger root of its nodes under the smaller with atomicMin, then every node
//   jumps to its root; repeated until a pass hooks nothing), and the rounds over the pairs across
//   zones read the zones' α of the round's start (Jacobi, where the CPU goes pair by pair): a round
//   that lowers nothing ends them, so the last check saw the final α; the 33rd round applies the
//   per-node bound to every such pair, which holds in any order.
// All three forward rules (planes, zones, per-vertex) run on the device.
//
// Device memory: the setup is uploaded once; the pair list, the grid's entries and the constraint
// slots grow (never shrink) when a search finds more than they hold, so later projections of a
// similar state allocate nothing.
#include <functional>
#include <memory>
#include <xpd/collision/proximity.hpp>
#include <xpd/collision/two_way.hpp>
#include <xpd/core/types.hpp>

namespace xpd::gpu {

class DeviceTwoWay {
 public:
  /// Uploads the projector's setup (read once: a later set_volume_tets on the projector is not
  /// seen). The projector must outlive this object. Throws GpuError without the CUDA backend or a
  /// device.
  explicit DeviceTwoWay(const TwoWayProjector& projector);
  ~DeviceTwoWay();
  DeviceTwoWay(const DeviceTwoWay&) = delete;
  DeviceTwoWay& operator=(const DeviceTwoWay&) = delete;

  const TwoWayProjector& projector() const;

  /// The device proximity search of the projector's contact surface at contact-point positions s
  /// (#P × 3) for the distance D > 0: the pairs of xpd::proximity_search, sorted the same way.
  ProximityPairs proximity_search(const Points& s, double D);

  /// TwoWayProjector::project on the device (same arguments, same statistics). With an observer,
  /// every step's state is downloaded for it (slow: for tests and diagnostics).
  TwoWayStats project(const Points& x_safe, const Points& y, Points& x,
                      const std::function<void(const TwoWayStepInfo&)>& observe = {});

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd::gpu
