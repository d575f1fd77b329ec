// The Python module's native part, xpd._xpd (pybind11). The public names are re-exported by
// python/xpd/__init__.py, which also defines the exception classes the library's errors map to;
// docs/python.md documents the API.
//
// Conventions: arrays cross the boundary as C-contiguous float64 numpy arrays (int32 for index
// arrays). Inputs of another dtype, shape or layout are refused with TypeError / ValueError naming
// the argument, never converted silently. Positions of a Simulation are returned without a copy
// (a read-only view that keeps the Simulation alive). Every solve releases the GIL.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/bcc_lattice.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>
#include <xpd/solver/quasistatic_batch.hpp>

namespace py = pybind11;
using namespace xpd;

namespace {

using DoubleArray = py::array_t<double, py::array::c_style>;

py::object to_python(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = to_python(it.value());
      return std::move(d);
    }
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& v : j) l.append(to_python(v));
      return std::move(l);
    }
    case nlohmann::json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<long long>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    default:
      return py::none();
  }
}

// A float64, C-contiguous array of exactly `shape` (−1 = any extent); refuses anything else with a
// message naming `name`. No conversion: a float32 tensor would lose the precision gradients need.
DoubleArray checked(const py::handle& obj, const char* name, std::vector<py::ssize_t> shape, bool finite = true) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(name) + ": expected a numpy float64 array, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  const py::array arr = py::reinterpret_borrow<py::array>(obj);
  if (!arr.dtype().is(py::dtype::of<double>()))
    throw py::type_error(std::string(name) + ": expected dtype float64, got " + std::string(py::str(arr.dtype())) +
                         " (convert explicitly; xpd does not cast)");
  std::vector<std::string> want, have;
  for (const py::ssize_t e : shape) want.push_back(e < 0 ? "*" : std::to_string(e));
  bool ok = arr.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i)
    ok = shape[i] < 0 || arr.shape(static_cast<py::ssize_t>(i)) == shape[i];
  if (!ok) {
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) have.push_back(std::to_string(arr.shape(i)));
    throw py::value_error(
        fmt::format("{}: expected shape [{}], got [{}]", name, fmt::join(want, ", "), fmt::join(have, ", ")));
  }
  if (!(arr.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + ": must be C-contiguous (use numpy.ascontiguousarray)");
  DoubleArray out = py::reinterpret_borrow<DoubleArray>(arr);
  if (finite) {
    const double* p = out.data();
    for (py::ssize_t k = 0; k < out.size(); ++k)
      if (!std::isfinite(p[k]))
        throw py::value_error(std::string(name) + ": contains NaN or Inf (entry " + std::to_string(k) + ")");
  }
  return out;
}

template <class Matrix>
py::array copy_of(const Matrix& m) {
  using T = typename Matrix::Scalar;
  py::array_t<T> a({static_cast<py::ssize_t>(m.rows()), static_cast<py::ssize_t>(m.cols())});
  auto r = a.template mutable_unchecked<2>();
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = m(i, j);
  return std::move(a);
}

py::dict frame_stats(int frame, const FrameStats& s) {
  return py::dict(to_python(frame_stats_json(frame, s, std::nullopt)));
}

py::dict adjoint_stats(const AdjointStats& s) {
  py::dict d;
  d["iterations"] = s.iterations;
  d["residual"] = s.residual;
  return d;
}

// A scene simulation as Python sees it: the simulation plus the frame it has reached.
struct PySimulation {
  std::shared_ptr<SceneSimulation> sim;
  int frame = 0;
  py::object last_stats = py::none();
};

// A model for learning: the scene's simulation owns the model (mesh, materials, attachments come
// from the scene).
struct PyModel {
  std::shared_ptr<SceneSimulation> sim;
};

struct PyBatch {
  std::shared_ptr<SceneSimulation> sim;  // keeps the model alive
  std::unique_ptr<QuasistaticBatch> batch;
};

AdjointMethod adjoint_method(const std::string& name) {
  if (name == "cg") return AdjointMethod::ConjugateGradient;
  if (name == "fixed_point") return AdjointMethod::FixedPoint;
  if (name == "direct") return AdjointMethod::Direct;
  throw py::value_error("adjoint_method: expected 'cg', 'fixed_point' or 'direct', got '" + name + "'");
}

Scene scene_of(const py::object& scene_or_path) {
  if (py::isinstance<py::str>(scene_or_path)) return load_scene(scene_or_path.cast<std::string>());
  if (py::hasattr(scene_or_path, "__fspath__"))
    return load_scene(py::str(scene_or_path.attr("__fspath__")()).cast<std::string>());
  return scene_or_path.cast<Scene>();
}

// The embedded surface's binding as two #S × 4 arrays: node indices (int32) and weights (float64);
// a vertex a surgical excision took (unbound) has nodes −1 and weights 0.
py::tuple embedding_of(const SceneSimulation& sim) {
  if (!sim.embedding())
    throw py::value_error("embedding: the scene has no mesh.embedded_surface (docs/scene-format.md §3)");
  const PointEmbedding& e = *sim.embedding();
  const Tets& tets = sim.mesh().tets;
  const auto S = static_cast<py::ssize_t>(e.tet_of_point.size());
  py::array_t<std::int32_t> nodes({S, py::ssize_t{4}});
  auto r = nodes.mutable_unchecked<2>();
  Eigen::MatrixXd weights = e.weights;
  for (py::ssize_t s = 0; s < S; ++s) {
    const int t = e.tet_of_point[static_cast<size_t>(s)];
    for (int k = 0; k < 4; ++k) r(s, k) = t < 0 ? -1 : tets(t, k);
    if (t < 0) weights.row(s).setZero();
  }
  return py::make_tuple(nodes, copy_of(weights));
}

py::array embedded_triangles_of(const SceneSimulation& sim) {
  if (!sim.rest_embedded_surface())
    throw py::value_error("embedded_surface_triangles: the scene has no mesh.embedded_surface");
  return copy_of(sim.rest_embedded_surface()->triangles);
}

}  // namespace

PYBIND11_MODULE(_xpd, m) {
  m.doc() = "xpd: Projective Dynamics soft bodies (native part; import xpd)";
  m.attr("__version__") = XPD_VERSION_STRING;

  // Library errors → the exception classes defined in xpd/__init__.py (looked up when raised).
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    auto raise = [](const char* cls, const std::exception& e) {
      const py::object type = py::module_::import("xpd").attr(cls);
      PyErr_SetString(type.ptr(), e.what());
    };
    try {
      std::rethrow_exception(p);
    } catch (const SceneError& e) {
      raise("SceneError", e);
    } catch (const IoError& e) {
      raise("IoError", e);
    } catch (const MeshError& e) {
      raise("MeshError", e);
    } catch (const SolverError& e) {
      raise("SolverError", e);
    } catch (const Error& e) {
      raise("Error", e);
    }
  });

  py::class_<Scene>(m, "Scene", "A parsed, validated scene file (docs/scene-format.md).")
      .def_static("load", py::overload_cast<const std::string&>(&load_scene), py::arg("path"),
                  "Reads and validates a scene file.")
      .def_property_readonly("file", [](const Scene& s) { return s.file; })
      .def_property_readonly("description", [](const Scene& s) { return s.description; })
      .def_property_readonly("frames", [](const Scene& s) { return s.solver.frames; })
      .def_property_readonly("num_actuation_entries", [](const Scene& s) { return s.actuation.size(); });

  py::class_<PySimulation>(m, "Simulation", "A scene turned into a running simulation (SceneSimulation).")
      .def(py::init([](const py::object& scene) {
             Scene sc = scene_of(scene);
             py::gil_scoped_release release;
             return PySimulation{std::make_shared<SceneSimulation>(std::move(sc))};
           }),
           py::arg("scene"), "Builds the model of a Scene (or a scene file path): one factorization.")
      .def(
          "advance",
          [](PySimulation& s, int frames) {
            if (frames < 0) throw py::value_error("frames: must be >= 0, got " + std::to_string(frames));
            py::list out;
            for (int k = 0; k < frames; ++k) {
              FrameStats st;
              {
                py::gil_scoped_release release;
                st = s.sim->advance(s.frame + 1);
              }
              ++s.frame;
              s.last_stats = frame_stats(s.frame, st);
              out.append(s.last_stats);
            }
            return out;
          },
          py::arg("frames") = 1, "Solves the next `frames` frames; returns their statistics (stats.json records).")
      .def(
          "set_actuation",
          [](PySimulation& s, const py::object& a_obj) {
            const auto u = static_cast<py::ssize_t>(s.sim->model().initial_inputs().shape_targets.rows());
            const DoubleArray a = checked(a_obj, "a", {-1, u, 6});
            std::vector<ShapeTargetParams> frames(static_cast<size_t>(a.shape(0)));
            for (size_t k = 0; k < frames.size(); ++k)
              frames[k] = Eigen::Map<const ShapeTargetParams>(a.data() + k * static_cast<size_t>(u) * 6, u, 6);
            s.sim->set_actuation_frames(std::move(frames));
          },
          py::arg("a"),
          "Per-frame actuation [F, num_actuated_tets, 6]: frame k = 1..F uses a[k-1] instead of the "
          "scene's actuation (later frames use the scene's again); an empty array [0, u, 6] removes it. "
          "Applies to advance() and write().")
      .def_property_readonly("frame", [](const PySimulation& s) { return s.frame; })
      .def_property_readonly("num_frames", [](const PySimulation& s) { return s.sim->num_frames(); })
      .def_property_readonly(
          "device", [](const PySimulation& s) { return s.sim->compute_device(); },
          "Where the frames run (solver.device): 'cpu', 'cuda (<name>)', or 'cpu (automatic: <why not the GPU>)'.")
      .def_property_readonly(
          "positions",
          [](py::object self) {
            const PySimulation& s = self.cast<const PySimulation&>();
            const Points& x = s.sim->positions();
            py::array a(py::dtype::of<double>(), {x.rows(), Eigen::Index{3}},
                        {static_cast<py::ssize_t>(3 * sizeof(double)), static_cast<py::ssize_t>(sizeof(double))},
                        x.data(), self);
            a.attr("setflags")(py::arg("write") = false);
            return a;
          },
          "Current node positions, #nodes × 3 float64: a read-only view (no copy) valid while the "
          "Simulation lives; it changes when the simulation advances.")
      .def_property_readonly("rest_positions", [](const PySimulation& s) { return copy_of(s.sim->mesh().nodes); })
      .def_property_readonly("tets", [](const PySimulation& s) { return copy_of(s.sim->mesh().tets); })
      .def_property_readonly("surface_triangles",
                             [](const PySimulation& s) { return copy_of(boundary_faces(s.sim->mesh().tets)); })
      .def_property_readonly(
          "stats", [](const PySimulation& s) { return s.last_stats; },
          "Statistics of the last frame (a stats.json frame record), or None.")
      .def(
          "write",
          [](PySimulation& s, const std::string& out_dir, int max_frames) {
            if (s.frame != 0)
              throw py::value_error(
                  "write: runs the scene from frame 1 like `xpd run`; this Simulation has advanced to frame " +
                  std::to_string(s.frame) + " (create a new one)");
            RunOptions o;
            o.max_frames = max_frames;
            RunSummary r;
            {
              py::gil_scoped_release release;
              r = run_scene(*s.sim, out_dir, o);
            }
            s.frame = r.frames;
            py::dict d;
            d["frames"] = r.frames;
            d["iterations"] = r.iterations;
            d["unconverged_frames"] = r.unconverged_frames;
            d["wall_ms"] = r.wall_ms;
            return d;
          },
          py::arg("out_dir"), py::arg("max_frames") = 0,
          "Runs the scene's frames (or the first max_frames) through the library's run writer into "
          "out_dir: the same folder `xpd run` writes (docs/output-format.md).");

  py::class_<PyModel>(m, "Model", "A constant PD model built from a scene, for learning (QuasistaticBatch).")
      .def_static(
          "from_scene",
          [](const py::object& scene) {
            Scene sc = scene_of(scene);
            if (sc.solver.type != Integrator::Quasistatic)
              throw py::value_error("from_scene: the scene must be quasistatic (solver.type) to be differentiated");
            py::gil_scoped_release release;
            return PyModel{std::make_shared<SceneSimulation>(std::move(sc))};
          },
          py::arg("scene"))
      .def_property_readonly("num_nodes", [](const PyModel& p) { return p.sim->model().num_nodes(); })
      .def_property_readonly("num_tets", [](const PyModel& p) { return p.sim->model().num_tets(); })
      .def_property_readonly("num_actuated_tets",
                             [](const PyModel& p) { return p.sim->model().initial_inputs().shape_targets.rows(); })
      .def_property_readonly("num_attachment_targets",
                             [](const PyModel& p) { return p.sim->model().initial_inputs().attachment_targets.rows(); })
      .def_property_readonly("rest_positions", [](const PyModel& p) { return copy_of(p.sim->mesh().nodes); })
      .def_property_readonly("tets", [](const PyModel& p) { return copy_of(p.sim->mesh().tets); })
      .def_property_readonly("surface_triangles",
                             [](const PyModel& p) { return copy_of(boundary_faces(p.sim->mesh().tets)); })
      .def_property_readonly(
          "attachment_targets",
          [](const PyModel& p) { return copy_of(p.sim->model().initial_inputs().attachment_targets); })
      .def_property_readonly(
          "actuation", [](const PyModel& p) { return copy_of(p.sim->model().initial_inputs().shape_targets); },
          "The scene's initial actuation b, #actuated tets × 6.")
      .def_property_readonly(
          "embedding", [](const PyModel& p) { return embedding_of(*p.sim); },
          "The embedded surface's binding (nodes [S, 4] int32, weights [S, 4] float64): surface vertex s "
          "is sum_k weights[s, k] * x[nodes[s, k]]. ValueError without mesh.embedded_surface.")
      .def_property_readonly(
          "embedded_surface_triangles", [](const PyModel& p) { return embedded_triangles_of(*p.sim); },
          "Triangles of the embedded surface [F, 3] (indices into its vertices).");

  m.def(
      "bcc_lattice",
      [](const py::object& lower_obj, const py::object& upper_obj, double cell_size) {
        const DoubleArray lo = checked(lower_obj, "lower", {3}), hi = checked(upper_obj, "upper", {3});
        if (!(cell_size > 0)) throw py::value_error("cell_size: must be > 0");
        const Eigen::AlignedBox3d box(Vec3(lo.at(0), lo.at(1), lo.at(2)), Vec3(hi.at(0), hi.at(1), hi.at(2)));
        if (!(box.sizes().array() >= 0).all()) throw py::value_error("upper: must be >= lower on every axis");
        const BccGrid grid = BccGrid::covering(box, cell_size);
        if (grid.num_cells() > 16'000'000)
          throw py::value_error(fmt::format("cell_size: {} cells, more than 16M; use a larger cell", grid.num_cells()));
        TetMesh mesh;
        {
          py::gil_scoped_release release;
          mesh = make_bcc_lattice(grid);
        }
        return py::make_tuple(copy_of(mesh.nodes), copy_of(mesh.tets));
      },
      py::arg("lower"), py::arg("upper"), py::arg("cell_size"),
      "The body-centred cubic lattice (mesh/bcc_lattice.hpp) of cubes of side cell_size covering the box "
      "[lower, upper] with a cell of margin: (nodes [V, 3] float64, tets [T, 4] int32), every tet "
      "positively oriented with volume cell_size^3 / 12. Cut it to a shape by keeping some tets.");

  m.def(
      "embed_points",
      [](const py::object& nodes_obj, const py::object& tets_obj, const py::object& points_obj, bool snap_outside) {
        const DoubleArray nodes = checked(nodes_obj, "nodes", {-1, 3}), points = checked(points_obj, "points", {-1, 3});
        if (!py::isinstance<py::array>(tets_obj)) throw py::type_error("tets: expected a numpy integer array");
        const py::array tets_arr = py::reinterpret_borrow<py::array>(tets_obj);
        if (tets_arr.dtype().kind() != 'i' && tets_arr.dtype().kind() != 'u')
          throw py::type_error("tets: expected an integer dtype, got " + std::string(py::str(tets_arr.dtype())));
        if (tets_arr.ndim() != 2 || tets_arr.shape(1) != 4) throw py::value_error("tets: expected shape [*, 4]");
        const auto t = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(tets_arr);
        TetMesh mesh;
        mesh.nodes = Eigen::Map<const Points>(nodes.data(), nodes.shape(0), 3);
        mesh.tets.resize(tets_arr.shape(0), 4);
        for (py::ssize_t k = 0; k < t.size(); ++k) {
          const std::int64_t v = t.data()[k];
          if (v < 0 || v >= nodes.shape(0))
            throw py::value_error(fmt::format("tets: tet {} has node {}, outside [0, {})", k / 4, v, nodes.shape(0)));
          mesh.tets.data()[k] = static_cast<int>(v);
        }
        const Points p = Eigen::Map<const Points>(points.data(), points.shape(0), 3);
        PointEmbedding e;
        {
          py::gil_scoped_release release;
          EmbedPointsOptions o;
          o.snap_outside = snap_outside;
          e = embed_points(mesh, p, o);
        }
        py::array_t<std::int32_t> tet_of(static_cast<py::ssize_t>(e.tet_of_point.size()));
        std::copy(e.tet_of_point.begin(), e.tet_of_point.end(), tet_of.mutable_data());
        py::array_t<std::int32_t> outside(static_cast<py::ssize_t>(e.outside.size()));
        std::copy(e.outside.begin(), e.outside.end(), outside.mutable_data());
        return py::make_tuple(tet_of, copy_of(e.weights), outside);
      },
      py::arg("nodes"), py::arg("tets"), py::arg("points"), py::kw_only(), py::arg("snap_outside") = true,
      "Locates points [P, 3] in the tets [T, 4] of nodes [V, 3] (mesh/embedding.hpp embed_points): "
      "(tet [P] int32, weights [P, 4] float64, outside [K] int32), point p = sum_k weights[p, k] * "
      "nodes[tets[tet[p], k]]. A point outside every tet is listed in `outside` and bound to the nearest "
      "tet with extrapolated weights (snap_outside=True) or left unbound (tet -1, weights 0).");

  py::class_<PyBatch>(m, "QuasistaticBatch",
                      "Forward equilibria and adjoint gradients of a batch of frames of one Model "
                      "(solver/quasistatic_batch.hpp).")
      .def(py::init([](const PyModel& model, double tolerance, int max_iterations, bool newton_polish,
                       const std::string& method, double adjoint_tolerance, int adjoint_max_iterations) {
             if (!(tolerance > 0)) throw py::value_error("tolerance: must be > 0");
             if (max_iterations < 1) throw py::value_error("max_iterations: must be >= 1");
             QuasistaticBatchOptions o;
             o.forward.rel_tolerance = tolerance;
             o.forward.max_iterations = max_iterations;
             o.newton_polish = newton_polish;
             o.adjoint.method = adjoint_method(method);
             o.adjoint.tolerance = adjoint_tolerance;
             o.adjoint.max_iterations = adjoint_max_iterations;
             return PyBatch{model.sim, std::make_unique<QuasistaticBatch>(model.sim->model(), o)};
           }),
           py::arg("model"), py::arg("tolerance") = 1e-8, py::arg("max_iterations") = 5000,
           py::arg("newton_polish") = false, py::arg("adjoint_method") = "cg", py::arg("adjoint_tolerance") = 1e-10,
           py::arg("adjoint_max_iterations") = 5000)
      .def(
          "forward",
          [](PyBatch& b, const py::object& a_obj, const py::object& t_obj) {
            const py::ssize_t u = b.batch->num_actuated_tets(), k = b.batch->num_attachment_targets();
            const DoubleArray a = checked(a_obj, "a", {-1, u, 6});
            const py::ssize_t B = a.shape(0);
            std::optional<DoubleArray> t;
            if (!t_obj.is_none()) t = checked(t_obj, "t", {B, k, 3});
            const py::ssize_t n = b.batch->model().num_nodes();
            DoubleArray x({B, n, py::ssize_t{3}});
            std::vector<FrameStats> st;
            {
              const double* tp = t ? t->data() : nullptr;
              double* xp = x.mutable_data();
              py::gil_scoped_release release;
              st = b.batch->forward(static_cast<int>(B), a.data(), tp, xp);
            }
            py::list stats;
            for (size_t i = 0; i < st.size(); ++i) stats.append(frame_stats(static_cast<int>(i), st[i]));
            return py::make_tuple(x, stats);
          },
          py::arg("a"), py::arg("t") = py::none(),
          "a: [B, num_actuated_tets, 6]; t: [B, num_attachment_targets, 3] or None. Returns (x "
          "[B, num_nodes, 3], per-frame statistics with 'converged').")
      .def(
          "backward",
          [](PyBatch& b, const py::object& x_obj, const py::object& a_obj, const py::object& t_obj,
             const py::object& g_obj) {
            const py::ssize_t u = b.batch->num_actuated_tets(), k = b.batch->num_attachment_targets();
            const py::ssize_t n = b.batch->model().num_nodes();
            const DoubleArray a = checked(a_obj, "a", {-1, u, 6});
            const py::ssize_t B = a.shape(0);
            const DoubleArray x = checked(x_obj, "x", {B, n, 3});
            const DoubleArray g = checked(g_obj, "grad_x", {B, n, 3});
            std::optional<DoubleArray> t;
            if (!t_obj.is_none()) t = checked(t_obj, "t", {B, k, 3});
            DoubleArray ga({B, u, py::ssize_t{6}}), gt({B, k, py::ssize_t{3}});
            std::vector<AdjointStats> st;
            {
              const double* tp = t ? t->data() : nullptr;
              double* gap = ga.mutable_data();
              double* gtp = gt.mutable_data();
              py::gil_scoped_release release;
              st = b.batch->backward(static_cast<int>(B), x.data(), a.data(), tp, g.data(), gap, gtp);
            }
            py::list stats;
            for (const AdjointStats& s : st) stats.append(adjoint_stats(s));
            return py::make_tuple(ga, gt, stats);
          },
          py::arg("x"), py::arg("a"), py::arg("t"), py::arg("grad_x"),
          "Gradients of the frames of one forward pass (its x, a, t) given dL/dx: returns (dL/da "
          "[B, u, 6], dL/dt [B, k, 3], per-frame adjoint statistics).")
      .def(
          "warm_start",
          [](const PyBatch& b) {
            const py::ssize_t slots = b.batch->num_slots(), n = b.batch->model().num_nodes();
            DoubleArray x({slots, n, py::ssize_t{3}});
            for (py::ssize_t i = 0; i < slots; ++i)
              Eigen::Map<Points>(x.mutable_data() + i * 3 * n, n, 3) = b.batch->state(static_cast<int>(i)).x;
            return x;
          },
          "A copy of the positions each slot's next forward pass starts from, [slots, num_nodes, 3] "
          "(slots: the largest batch so far; 0 before the first forward pass).")
      .def(
          "set_warm_start",
          [](PyBatch& b, const py::object& x_obj) {
            const DoubleArray x = checked(x_obj, "x", {-1, b.batch->model().num_nodes(), 3});
            b.batch->set_warm_start(static_cast<int>(x.shape(0)), x.data());
          },
          py::arg("x"),
          "x: [B, num_nodes, 3]; the next forward pass starts frame i at x[i] (slots beyond B keep "
          "theirs), e.g. the last accepted equilibria after a refused trial step.")
      .def_property_readonly("num_nodes", [](const PyBatch& b) { return b.batch->model().num_nodes(); })
      .def_property_readonly("num_actuated_tets", [](const PyBatch& b) { return b.batch->num_actuated_tets(); })
      .def_property_readonly("num_attachment_targets",
                             [](const PyBatch& b) { return b.batch->num_attachment_targets(); });
}
