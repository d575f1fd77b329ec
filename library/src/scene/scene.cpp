#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/skeleton.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/scene/scene.hpp>

#include "io/text_cursor.hpp"
#include "scene/json_reader.hpp"

namespace xpd {
namespace {

using io::detail::did_you_mean;
using io::detail::JsonReader;
using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int kMaxBoxNodes = 1024;

std::string fmt_num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out.empty() ? "none" : out;
}

// Everything the struct parsers share: the file name, the base directory, the solver settings
// (keyframe times) and the names of the defined selections (references).
struct Context {
  std::string file;
  std::string base_dir;
  SolverSettings solver;
  std::vector<std::string> selection_names;  // defined names plus "all"
  int shell_layers = 0, shell_vertices = 0;  // a shell mesh's layers and surface vertices (0: not a shell)

  std::string resolve(const std::string& p) const {
    if (base_dir.empty() || fs::path(p).is_absolute()) return p;
    return (fs::path(base_dir) / p).lexically_normal().string();
  }
  // Resolves a path read at `r` and checks that the file exists.
  std::string existing_file(const JsonReader& r) const {
    const std::string given = r.as<std::string>();
    if (given.empty()) r.fail("empty file name");
    const std::string path = resolve(given);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) r.fail("file not found: '" + path + "'");
    return path;
  }
  // Reads a selection reference at `r` and checks it names a defined selection or "all".
  std::string selection_ref(const JsonReader& r) const {
    const std::string name = r.as<std::string>();
    if (std::find(selection_names.begin(), selection_names.end(), name) == selection_names.end())
      r.fail("unknown selection '" + name + "'" + did_you_mean(name, selection_names) +
             " (defined: " + quoted_list(selection_names) + ")");
    return name;
  }
};

double positive(const JsonReader& r) {
  const double v = r.as<double>();
  if (!(v > 0)) r.fail("must be > 0, got " + fmt_num(v));
  return v;
}
double non_negative(const JsonReader& r) {
  const double v = r.as<double>();
  if (v < 0) r.fail("must be >= 0, got " + fmt_num(v));
  return v;
}
int int_at_least(const JsonReader& r, int lo) {
  const int v = r.as<int>();
  if (v < lo) r.fail("must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  return v;
}
Vec3 nonzero_direction(const JsonReader& r) {
  const Vec3 v = r.as<Vec3>();
  if (v.norm() == 0) r.fail("must be a nonzero vector");
  return v.normalized();
}

// ---- mesh ---------------------------------------------------------------------------------------

// Uniform spacing with the longest side 1, as make_box_from_spec.
Vec3 default_box_extent(const std::array<int, 3>& n) {
  const int longest = std::max({n[0], n[1], n[2]});
  const double h = 1.0 / (longest - 1);
  return Vec3((n[0] - 1) * h, (n[1] - 1) * h, (n[2] - 1) * h);
}

void check_box_count(const JsonReader& r, int n) {
  if (n < 2 || n > kMaxBoxNodes)
    r.fail("box node count must be in [2, " + std::to_string(kMaxBoxNodes) + "], got " + std::to_string(n));
}

// "box:N" or "box:NX,NY,NZ".
MeshSource parse_box_string(const JsonReader& r, const std::string& spec) {
  std::vector<int> counts;
  std::string_view rest = std::string_view(spec).substr(4);
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view t = rest.substr(0, comma);
    int v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size())
      r.fail("malformed box generator '" + spec + "' (expected 'box:N' or 'box:NX,NY,NZ')");
    counts.push_back(v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (counts.size() != 1 && counts.size() != 3)
    r.fail("malformed box generator '" + spec + "' (expected 'box:N' or 'box:NX,NY,NZ')");
  MeshSource m;
  m.kind = MeshSource::Kind::Box;
  for (int k = 0; k < 3; ++k)
    m.nodes[static_cast<std::size_t>(k)] = counts[counts.size() == 1 ? 0 : static_cast<std::size_t>(k)];
  for (int n : m.nodes) check_box_count(r, n);
  m.min = Vec3::Zero();
  m.max = default_box_extent(m.nodes);
  return m;
}

// A text file of non-negative integers (whitespace-separated, '#' comments): node indices of a
// selection, or the tets of an embedded surface's vertices (`what`, singular, for the messages).
std::vector<int> read_index_file(const JsonReader& r, const std::string& path, const std::string& what = "node index") {
  std::vector<int> out;
  try {
    const std::string data = io::read_file_bytes(path);
    io::detail::TextCursor in(data, path);
    while (true) {
      in.skip_whitespace_and_comments('#');
      if (in.at_end()) break;
      const std::int64_t v = in.next_int(("a " + what).c_str());
      if (v < 0 || v > std::numeric_limits<int>::max()) in.fail(what + " " + std::to_string(v) + " out of range");
      out.push_back(static_cast<int>(v));
    }
  } catch (const IoError& e) {
    r.fail(std::string("cannot read index file: ") + e.what());
  }
  return out;
}

MeshSource parse_mesh(const JsonReader& r, const Context& ctx) {
  if (r.is_string()) {
    const std::string s = r.as<std::string>();
    if (is_generator_spec(s)) return parse_box_string(r, s);
    MeshSource m;
    m.kind = MeshSource::Kind::File;
    m.file = ctx.existing_file(r);
    return m;
  }
  if (!r.is_object()) r.fail_type("a file name, a generator string 'box:N', or an object");
  const bool file = r.has("file"), generator = r.has("generator");
  if (file == generator) r.fail("give exactly one of 'file' and 'generator'");
  MeshSource m;
  if (file) {
    r.allow_keys({"file", "embedded_surface", "embedded_tets", "coincident_nodes", "fix_orientation"},
                 " (for a mesh file)");
    m.kind = MeshSource::Kind::File;
    m.file = ctx.existing_file(r.child("file"));
  } else if (r.child("generator").one_of({"box", "lattice", "shell"}) == "shell") {
    r.allow_keys({"generator", "surface", "thickness", "layers", "thin_fraction", "min_volume_ratio", "min_depth",
                  "max_slope", "crop", "subdivide"},
                 " (for the shell generator)");
    m.kind = MeshSource::Kind::Shell;
    const JsonReader surface = r.child("surface");
    m.surface = ctx.existing_file(surface);
    m.shell.thickness = positive(r.child("thickness"));
    if (const auto v = r.optional_child("layers")) {
      m.shell.layers = int_at_least(*v, 1);
      if (m.shell.layers > 64) v->fail("must be <= 64, got " + std::to_string(m.shell.layers));
    }
    if (const auto v = r.optional_child("thin_fraction")) {
      m.shell.thin_fraction = positive(*v);
      if (m.shell.thin_fraction > 0.5) v->fail("must be in (0, 0.5]");
    }
    if (const auto v = r.optional_child("min_volume_ratio")) {
      m.shell.min_volume_ratio = positive(*v);
      if (m.shell.min_volume_ratio >= 1) v->fail("must be in (0, 1)");
    }
    if (const auto v = r.optional_child("min_depth")) {
      m.shell.min_depth = positive(*v);
      if (m.shell.min_depth > 1) v->fail("must be in (0, 1]");
    }
    if (const auto v = r.optional_child("max_slope")) m.shell.max_slope = positive(*v);
    if (const auto v = r.optional_child("crop")) {
      v->allow_keys({"center", "radius"});
      m.shell_crop = std::make_pair(v->required<Vec3>("center"), positive(v->child("radius")));
    }
    if (const auto v = r.optional_child("subdivide")) {
      m.shell_subdivide = int_at_least(*v, 0);
      if (m.shell_subdivide > 4) v->fail("at most 4 levels (each multiplies the triangles by 4)");
    }
    try {  // the vertex count numbers the layers (selections of type shell_layer)
      m.shell_surface_vertices = static_cast<int>(shell_skin_surface(m).nodes.rows());
    } catch (const IoError& e) {
      surface.fail(std::string("cannot read the surface: ") + e.what());
    } catch (const MeshError& e) {
      (m.shell_crop ? r.child("crop") : surface).fail(e.what());
    }
  } else if (r.child("generator").as<std::string>() == "lattice") {
    r.allow_keys({"generator", "surface", "resolution", "cell_size", "embedded_surface"},
                 " (for the lattice generator)");
    m.kind = MeshSource::Kind::Lattice;
    m.surface = ctx.existing_file(r.child("surface"));
    if (r.has("resolution") && r.has("cell_size")) r.fail("give at most one of 'resolution' and 'cell_size'");
    if (const auto v = r.optional_child("resolution")) {
      m.resolution = int_at_least(*v, 2);
      if (m.resolution > 1024) v->fail("must be <= 1024, got " + std::to_string(m.resolution));
    }
    if (const auto v = r.optional_child("cell_size")) m.cell_size = positive(*v);
    m.embedded_surface = m.surface;  // the surface rides in its lattice unless another one is given
  } else {
    r.allow_keys({"generator", "nodes", "min", "max", "carve", "embedded_surface", "fix_orientation"},
                 " (for the box generator)");
    m.kind = MeshSource::Kind::Box;
    const JsonReader nodes = r.child("nodes");
    if (nodes.is_array()) {
      if (nodes.size() != 3) nodes.fail_type("an integer or an array of 3 integers");
      for (std::size_t k = 0; k < 3; ++k) {
        m.nodes[k] = nodes.element(k).as<int>();
        check_box_count(nodes.element(k), m.nodes[k]);
      }
    } else {
      const int n = nodes.as<int>();
      check_box_count(nodes, n);
      m.nodes = {n, n, n};
    }
    m.min = r.optional<Vec3>("min", Vec3::Zero());
    m.max = r.optional<Vec3>("max", m.min + default_box_extent(m.nodes));
    if (!(m.min.array() < m.max.array()).all())
      r.fail_at(r.has("max") ? "max" : "min", "box max must exceed min in every component");
    if (const auto c = r.optional_child("carve")) {
      if (!c->is_array() || c->size() == 0) c->fail_type("a non-empty array of boxes {min, max}");
      for (std::size_t i = 0; i < c->size(); ++i) {
        const JsonReader b = c->element(i);
        b.allow_keys({"min", "max"});
        const Vec3 lo = b.required<Vec3>("min"), hi = b.required<Vec3>("max");
        if (!(lo.array() < hi.array()).all()) b.fail_at("max", "carve box max must exceed min in every component");
        m.carve.push_back({lo, hi});
      }
    }
  }
  if (const auto s = r.optional_child("embedded_surface")) m.embedded_surface = ctx.existing_file(*s);
  m.fix_orientation = r.optional<bool>("fix_orientation", false);
  if (const auto s = r.optional_child("embedded_tets")) {
    if (m.embedded_surface.empty()) s->fail("needs 'embedded_surface' (the surface whose vertices it binds)");
    m.embedded_tets_file = ctx.existing_file(*s);
    m.embedded_tets = read_index_file(*s, m.embedded_tets_file, "tet index");
  }
  m.coincident_nodes = r.optional<bool>("coincident_nodes", false);
  return m;
}

// ---- selections ---------------------------------------------------------------------------------

Selection parse_selection(const JsonReader& r, const Context& ctx) {
  r.expect_object();
  const std::string type = r.child("type").one_of({"box", "sphere", "capsule", "half_space", "surface", "indices",
                                                   "shell_layer", "union", "intersection", "difference"});
  const std::string note = " (for a selection of type '" + type + "')";
  if (type == "box") {
    r.allow_keys({"type", "min", "max"}, note);
    BoxSelection b{r.required<Vec3>("min"), r.required<Vec3>("max")};
    if (!(b.min.array() <= b.max.array()).all()) r.fail_at("max", "box max must be >= min in every component");
    return b;
  }
  if (type == "sphere") {
    r.allow_keys({"type", "center", "radius"}, note);
    SphereSelection s;
    s.center = r.required<Vec3>("center");
    const JsonReader radius = r.child("radius");
    s.radius = radius.as<double>();
    if (s.radius < 0) radius.fail("negative radius " + fmt_num(s.radius));
    return s;
  }
  if (type == "capsule") {
    r.allow_keys({"type", "a", "b", "radius"}, note);
    CapsuleSelection c;
    c.a = r.required<Vec3>("a");
    c.b = r.required<Vec3>("b");
    const JsonReader radius = r.child("radius");
    c.radius = radius.as<double>();
    if (c.radius < 0) radius.fail("negative radius " + fmt_num(c.radius));
    return c;
  }
  if (type == "half_space") {
    r.allow_keys({"type", "normal", "offset", "point"}, note);
    HalfSpaceSelection h;
    h.normal = nonzero_direction(r.child("normal"));
    if (r.has("offset") && r.has("point")) r.fail("give at most one of 'offset' and 'point'");
    if (r.has("point")) {
      h.offset = h.normal.dot(r.required<Vec3>("point"));
    } else {
      // `offset` is along the given normal; rescale for the normalised one.
      const Vec3 given = r.required<Vec3>("normal");
      h.offset = r.optional<double>("offset", 0.0) / given.norm();
    }
    return h;
  }
  if (type == "surface") {
    r.allow_keys({"type", "within", "direction", "max_angle_deg"}, note);
    SurfaceSelection s;
    if (const auto w = r.optional_child("within")) s.within = ctx.selection_ref(*w);
    if (r.has("direction")) {
      SurfaceSelection::Cone cone;
      cone.direction = nonzero_direction(r.child("direction"));
      if (const auto a = r.optional_child("max_angle_deg")) {
        cone.max_angle_deg = a->as<double>();
        if (!(cone.max_angle_deg >= 0 && cone.max_angle_deg <= 180))
          a->fail("must be in [0, 180] degrees, got " + fmt_num(cone.max_angle_deg));
      }
      s.cone = cone;
    } else if (r.has("max_angle_deg")) {
      r.fail_at("max_angle_deg", "'max_angle_deg' needs a 'direction'");
    }
    return s;
  }
  if (type == "shell_layer") {
    r.allow_keys({"type", "layer"}, note);
    if (ctx.shell_layers == 0) r.fail("'shell_layer' needs a mesh made by the shell generator");
    const JsonReader l = r.child("layer");
    int layer = 0;
    if (l.value().is_string()) {
      layer = l.one_of({"surface", "deep"}) == "deep" ? ctx.shell_layers : 0;
    } else {
      layer = l.as<int>();
      if (layer < 0 || layer > ctx.shell_layers)
        l.fail("layer " + std::to_string(layer) + " out of [0, " + std::to_string(ctx.shell_layers) + "]");
    }
    // Node (layer, v) of a shell is layer · #surface vertices + v (mesh/shell.hpp).
    IndexSelection s;
    s.nodes.resize(static_cast<std::size_t>(ctx.shell_vertices));
    std::iota(s.nodes.begin(), s.nodes.end(), layer * ctx.shell_vertices);
    return s;
  }
  if (type == "indices") {
    r.allow_keys({"type", "file", "nodes"}, note);
    if (r.has("file") == r.has("nodes")) r.fail("give exactly one of 'file' and 'nodes'");
    IndexSelection s;
    if (r.has("file")) {
      const JsonReader f = r.child("file");
      s.file = ctx.existing_file(f);
      s.nodes = read_index_file(f, s.file);
    } else {
      const JsonReader nodes = r.child("nodes");
      s.nodes = nodes.as<std::vector<int>>();
      for (std::size_t k = 0; k < s.nodes.size(); ++k)
        if (s.nodes[k] < 0) nodes.element(k).fail("negative node index " + std::to_string(s.nodes[k]));
    }
    return s;
  }
  // Set operations.
  r.allow_keys({"type", "of"}, note);
  SetSelection s;
  s.op = type == "union"          ? SetSelection::Op::Union
         : type == "intersection" ? SetSelection::Op::Intersection
                                  : SetSelection::Op::Difference;
  const JsonReader of = r.child("of");
  if (!of.is_array() || of.size() == 0) of.fail_type("a non-empty array of selection names");
  for (std::size_t k = 0; k < of.size(); ++k) s.operands.push_back(ctx.selection_ref(of.element(k)));
  return s;
}

// The names a selection refers to.
std::vector<std::string> references(const Selection& s) {
  if (const auto* surface = std::get_if<SurfaceSelection>(&s))
    return surface->within.empty() ? std::vector<std::string>{} : std::vector<std::string>{surface->within};
  if (const auto* set = std::get_if<SetSelection>(&s)) return set->operands;
  return {};
}

SelectionMap parse_selections(const JsonReader& r, Context& ctx) {
  r.expect_object();
  // Names first, so that references may point forward.
  ctx.selection_names = {"all"};
  for (const auto& item : r.value().items()) {
    if (item.key() == "all") r.fail_at("all", "'all' is a built-in selection and cannot be redefined");
    if (item.key().empty()) r.fail_at("", "empty selection name");
    ctx.selection_names.push_back(item.key());
  }
  SelectionMap out;
  for (const auto& item : r.value().items()) out[item.key()] = parse_selection(r.child(item.key()), ctx);
  // Reject reference cycles (depth-first search; 1 = on the stack, 2 = done).
  std::map<std::string, int> state;
  std::vector<std::string> chain;
  const std::function<void(const std::string&)> visit = [&](const std::string& name) {
    if (name == "all" || state[name] == 2) return;
    if (state[name] == 1) {
      std::string cycle;
      for (auto it = std::find(chain.begin(), chain.end(), name); it != chain.end(); ++it) cycle += *it + " -> ";
      r.fail_at(name, "selection reference cycle: " + cycle + name);
    }
    state[name] = 1;
    chain.push_back(name);
    for (const std::string& ref : references(out.at(name))) visit(ref);
    chain.pop_back();
    state[name] = 2;
  };
  for (const auto& [name, selection] : out) visit(name);
  return out;
}

// ---- materials ----------------------------------------------------------------------------------

Material parse_material(const JsonReader& r, const Context& ctx) {
  r.allow_keys({"region", "mu", "lambda", "youngs_modulus", "poisson_ratio", "density", "strain_limit"});
  Material m;
  if (const auto region = r.optional_child("region")) {
    if (region->value().is_number())
      m.region_tag = region->as<int>();
    else if (region->is_string())
      m.region = ctx.selection_ref(*region);
    else
      region->fail_type("a selection name, \"all\", or an integer region tag");
  }
  const bool lame = r.has("mu") || r.has("lambda");
  const bool engineering = r.has("youngs_modulus") || r.has("poisson_ratio");
  if (lame && engineering)
    r.fail_at(r.has("mu") ? "mu" : "lambda",
              "give either 'mu' (and 'lambda') or 'youngs_modulus' and 'poisson_ratio', not both");
  if (engineering) {
    const double e = positive(r.child("youngs_modulus"));
    const JsonReader nu_reader = r.child("poisson_ratio");
    const double nu = nu_reader.as<double>();
    // nu < 0 would give lambda < 0, which the PD volume term does not support; 0.5 is incompressible.
    if (!(nu >= 0 && nu < 0.5)) nu_reader.fail("must be in [0, 0.5), got " + fmt_num(nu));
    m.mu = e / (2 * (1 + nu));
    m.lambda = e * nu / ((1 + nu) * (1 - 2 * nu));
  } else {
    m.mu = positive(r.child("mu"));
    if (const auto l = r.optional_child("lambda")) m.lambda = non_negative(*l);
  }
  if (const auto d = r.optional_child("density")) m.density = positive(*d);
  if (const auto s = r.optional_child("strain_limit")) {
    s->allow_keys({"stiffness", "sigma_min", "sigma_max"});
    StrainLimit limit;
    limit.stiffness = positive(s->child("stiffness"));
    const JsonReader lo = s->child("sigma_min"), hi = s->child("sigma_max");
    limit.sigma_min = lo.as<double>();
    limit.sigma_max = hi.as<double>();
    if (!(limit.sigma_min >= 0 && limit.sigma_min < 1)) lo.fail("must be in [0, 1), got " + fmt_num(limit.sigma_min));
    if (!(limit.sigma_max > 1)) hi.fail("must be > 1, got " + fmt_num(limit.sigma_max));
    m.strain_limit = limit;
  }
  return m;
}

// ---- actuation ----------------------------------------------------------------------------------

Actuation parse_actuation(const JsonReader& r, const Context& ctx) {
  r.allow_keys({"region", "stiffness", "target", "keyframes"});
  Actuation a;
  if (const auto region = r.optional_child("region")) a.region = ctx.selection_ref(*region);
  if (const auto k = r.optional_child("stiffness")) a.stiffness = positive(*k);
  const auto six = [](const JsonReader& t) {
    const std::vector<double> b = t.as<std::vector<double>>();
    if (b.size() != 6)
      t.fail("must hold the 6 entries b of the symmetric target S(b), got " + std::to_string(b.size()));
    std::array<double, 6> out{};
    for (std::size_t i = 0; i < 6; ++i) {
      if (!std::isfinite(b[i])) t.fail("entries must be finite numbers");
      out[i] = b[i];
    }
    return out;
  };
  if (const auto t = r.optional_child("target")) a.target = six(*t);
  if (const auto keys = r.optional_child("keyframes")) {
    if (r.has("target")) keys->fail("give either 'target' or 'keyframes', not both");
    if (!keys->is_array() || keys->size() == 0) keys->fail_type("a non-empty array of keyframes");
    for (std::size_t i = 0; i < keys->size(); ++i) {
      const JsonReader key = keys->element(i);
      key.allow_keys({"frame", "time", "target"});
      if (key.has("frame") == key.has("time")) key.fail("give exactly one of 'frame' and 'time'");
      const double f =
          key.has("frame") ? non_negative(key.child("frame")) : non_negative(key.child("time")) / ctx.solver.time_step;
      if (i > 0 && !(f > a.keyframes.back().first))
        key.fail_at(key.has("frame") ? "frame" : "time", "keyframes must be in strictly increasing order (frame " +
                                                             fmt_num(f) + " follows frame " +
                                                             fmt_num(a.keyframes.back().first) + ")");
      a.keyframes.emplace_back(f, six(key.child("target")));
    }
    a.target = a.target_at(0.0);
  }
  return a;
}

// ---- attachments --------------------------------------------------------------------------------

Eigen::Quaterniond parse_rotation(const JsonReader& r) {
  r.expect_object();
  const bool axis_angle = r.has("axis") || r.has("angle_deg");
  if (axis_angle == r.has("quaternion")) r.fail("give either 'axis' and 'angle_deg', or 'quaternion'");
  if (axis_angle) {
    r.allow_keys({"axis", "angle_deg"}, " (axis-angle rotation)");
    const Vec3 axis = nonzero_direction(r.child("axis"));
    const double angle = r.required<double>("angle_deg") * M_PI / 180.0;
    return Eigen::Quaterniond(Eigen::AngleAxisd(angle, axis));
  }
  r.allow_keys({"quaternion"}, " (quaternion rotation)");
  const JsonReader q = r.child("quaternion");
  const std::vector<double> v = q.as<std::vector<double>>();
  if (v.size() != 4) q.fail_type("an array of 4 numbers [w, x, y, z]");
  Eigen::Quaterniond quat(v[0], v[1], v[2], v[3]);
  if (quat.norm() == 0) q.fail("zero quaternion");
  return quat.normalized();
}

Keyframe parse_keyframe(const JsonReader& r, const Context& ctx) {
  r.allow_keys({"frame", "time", "translation", "rotation", "pivot"});
  if (r.has("frame") == r.has("time")) r.fail("give exactly one of 'frame' and 'time'");
  Keyframe k;
  k.frame = r.has("frame") ? non_negative(r.child("frame")) : non_negative(r.child("time")) / ctx.solver.time_step;
  k.translation = r.optional<Vec3>("translation", Vec3::Zero());
  if (const auto rot = r.optional_child("rotation")) k.rotation = parse_rotation(*rot);
  k.pivot = r.optional<Vec3>("pivot", Vec3::Zero());
  return k;
}

Attachment parse_attachment(const JsonReader& r, const Context& ctx) {
  r.expect_object();
  const std::string type = r.child("type").one_of({"fixed", "rigid", "bone"});
  const std::string note = " (for an attachment of type '" + type + "')";
  Attachment a;
  if (type == "fixed") {
    r.allow_keys({"type", "selection", "stiffness"}, note);
    a.type = Attachment::Type::Fixed;
  } else if (type == "rigid") {
    r.allow_keys({"type", "selection", "stiffness", "keyframes"}, note);
    a.type = Attachment::Type::Rigid;
    const JsonReader keys = r.child("keyframes");
    if (!keys.is_array() || keys.size() == 0) keys.fail_type("a non-empty array of keyframes");
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const JsonReader key = keys.element(i);
      a.keyframes.push_back(parse_keyframe(key, ctx));
      if (i > 0 && !(a.keyframes[i].frame > a.keyframes[i - 1].frame))
        key.fail_at(key.has("frame") ? "frame" : "time", "keyframes must be in strictly increasing order (frame " +
                                                             fmt_num(a.keyframes[i].frame) + " follows frame " +
                                                             fmt_num(a.keyframes[i - 1].frame) + ")");
    }
  } else {
    r.allow_keys({"type", "selection", "stiffness", "skeleton", "pose", "pose_frame", "bones"}, note);
    a.type = Attachment::Type::Bone;
    const JsonReader skel = r.child("skeleton");
    a.bone.skeleton = ctx.existing_file(skel);
    Skeleton skeleton;
    try {
      skeleton = io::read_tgf(a.bone.skeleton);
    } catch (const IoError& e) {
      skel.fail(std::string("cannot read skeleton: ") + e.what());
    }
    a.bone.pose = ctx.existing_file(r.child("pose"));
    if (const auto v = r.optional_child("pose_frame")) a.bone.pose_frame = int_at_least(*v, 1);
    const JsonReader bones = r.child("bones");
    if (bones.is_array()) {
      if (bones.size() == 0) bones.fail_type("a bone index or a non-empty array of bone indices");
      a.bone.bones = bones.as<std::vector<int>>();
    } else {
      a.bone.bones = {bones.as<int>()};
    }
    const auto count = static_cast<int>(skeleton.bones.rows());
    for (std::size_t k = 0; k < a.bone.bones.size(); ++k) {
      const int b = a.bone.bones[k];
      if (b < 0 || b >= count) {
        const std::string msg = "bone index " + std::to_string(b) + " out of range [0, " + std::to_string(count) +
                                ") of skeleton '" + a.bone.skeleton + "' (bone indices are 0-based)";
        if (bones.is_array()) bones.element(k).fail(msg);
        bones.fail(msg);
      }
    }
  }
  a.selection = ctx.selection_ref(r.child("selection"));
  a.stiffness = positive(r.child("stiffness"));
  return a;
}

// ---- loads --------------------------------------------------------------------------------------

LoadRamp parse_ramp(const JsonReader& r) {
  r.allow_keys({"frames", "scale"});
  if (r.has("frames") == r.has("scale")) r.fail("give exactly one of 'frames' and 'scale'");
  LoadRamp ramp;
  if (r.has("frames")) {
    ramp.frames = int_at_least(r.child("frames"), 1);
  } else {
    const JsonReader s = r.child("scale");
    ramp.scale = s.as<std::vector<double>>();
    if (ramp.scale.empty()) s.fail_type("a non-empty array of numbers");
  }
  return ramp;
}

Load parse_load(const JsonReader& r, const Context& ctx) {
  r.expect_object();
  const std::string type = r.child("type").one_of({"gravity", "node_force", "total_force"});
  const std::string note = " (for a load of type '" + type + "')";
  Load l;
  if (type == "gravity") {
    r.allow_keys({"type", "acceleration", "ramp"}, note);
    l.type = Load::Type::Gravity;
    l.value = r.required<Vec3>("acceleration");
  } else {
    if (type == "node_force") {
      r.allow_keys({"type", "selection", "force", "ramp"}, note);
      l.type = Load::Type::NodeForce;
    } else {
      r.allow_keys({"type", "selection", "force", "distribution", "ramp"}, note);
      l.type = Load::Type::TotalForce;
      if (const auto d = r.optional_child("distribution"))
        l.distribution = d->one_of({"equal", "area"}) == "area" ? Load::Distribution::Area : Load::Distribution::Equal;
    }
    l.selection = ctx.selection_ref(r.child("selection"));
    l.value = r.required<Vec3>("force");
  }
  if (const auto ramp = r.optional_child("ramp")) l.ramp = parse_ramp(*ramp);
  return l;
}

// ---- solver, outputs ----------------------------------------------------------------------------

SolverSettings parse_solver(const JsonReader& r) {
  r.allow_keys({"type", "time_step", "frames", "max_iterations", "min_iterations", "tolerance", "accelerator",
                "threads", "volume_matrix", "stagnation_window", "interactive", "device"});
  SolverSettings s;
  if (const auto t = r.optional_child("type"))
    s.type = t->one_of({"quasistatic", "implicit_euler"}) == "quasistatic" ? Integrator::Quasistatic
                                                                           : Integrator::ImplicitEuler;
  if (const auto v = r.optional_child("time_step")) s.time_step = positive(*v);
  if (const auto v = r.optional_child("frames")) s.frames = int_at_least(*v, 1);
  if (const auto v = r.optional_child("max_iterations")) s.max_iterations = int_at_least(*v, 1);
  if (const auto v = r.optional_child("min_iterations")) {
    s.min_iterations = int_at_least(*v, 0);
    if (s.min_iterations > s.max_iterations)
      v->fail("min_iterations (" + std::to_string(s.min_iterations) + ") exceeds max_iterations (" +
              std::to_string(s.max_iterations) + ")");
  }
  if (const auto v = r.optional_child("tolerance")) s.tolerance = positive(*v);
  if (const auto v = r.optional_child("accelerator")) {
    const std::string a = v->one_of({"none", "anderson", "chebyshev"});
    s.accelerator = a == "none" ? Accelerator::None : a == "anderson" ? Accelerator::Anderson : Accelerator::Chebyshev;
  }
  if (const auto v = r.optional_child("threads")) s.threads = int_at_least(*v, 0);
  if (const auto v = r.optional_child("stagnation_window")) s.stagnation_window = int_at_least(*v, 0);
  if (const auto v = r.optional_child("interactive"))
    s.interactive_iterations = v->value().is_boolean() ? (v->as<bool>() ? 1 : 0) : int_at_least(*v, 1);
  if (const auto v = r.optional_child("device")) {
    const std::string d = v->one_of({"cpu", "cuda", "automatic"});
    s.device = d == "cpu" ? ComputeDevice::Cpu : d == "cuda" ? ComputeDevice::Cuda : ComputeDevice::Automatic;
  }
  if (const auto v = r.optional_child("volume_matrix"))
    s.volume_matrix =
        v->one_of({"coupled", "isotropic"}) == "coupled" ? VolumeMatrix::Coupled : VolumeMatrix::Isotropic;
  return s;
}

const std::vector<std::string> kOutputFields{"displacement", "velocity", "external_force", "material",
                                             "volume_ratio", "active",   "contact_depth"};

OutputSettings parse_outputs(const JsonReader& r) {
  r.allow_keys({"every", "vtu", "surface", "fields"});
  OutputSettings o;
  if (const auto v = r.optional_child("every")) o.every = int_at_least(*v, 1);
  o.vtu = r.optional<bool>("vtu", true);
  if (const auto v = r.optional_child("surface"); v && !v->value().is_null())
    o.surface = v->one_of({"obj", "ply"}) == "obj" ? OutputSettings::Surface::Obj : OutputSettings::Surface::Ply;
  if (const auto f = r.optional_child("fields")) {
    if (!f->is_array()) f->fail_type("an array of field names");
    o.fields.clear();
    for (std::size_t k = 0; k < f->size(); ++k) {
      const JsonReader e = f->element(k);
      const std::string name = e.one_of(kOutputFields);
      if (std::find(o.fields.begin(), o.fields.end(), name) != o.fields.end()) e.fail("duplicate field '" + name + "'");
      o.fields.push_back(name);
    }
  }
  return o;
}

template <class T, class Parse>
std::vector<T> parse_list(const JsonReader& r, Parse parse) {
  if (!r.is_array()) r.fail_type("an array");
  std::vector<T> out;
  for (std::size_t i = 0; i < r.size(); ++i) out.push_back(parse(r.element(i)));
  return out;
}

// Line and column (1-based) of a 0-based byte offset.
std::pair<std::size_t, std::size_t> line_column(const std::string& data, std::size_t offset) {
  offset = std::min(offset, data.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < offset; ++i)
    if (data[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return {line, offset - line_start + 1};
}

// Finds the first key repeated within one JSON object (nlohmann keeps only the last silently) and
// its JSON pointer. A SAX pass over the text, run after the document parsed.
class DuplicateKeyFinder : public nlohmann::json_sax<json> {
 public:
  std::optional<std::string> duplicate;

  bool null() override { return value_done(); }
  bool boolean(bool) override { return value_done(); }
  bool number_integer(number_integer_t) override { return value_done(); }
  bool number_unsigned(number_unsigned_t) override { return value_done(); }
  bool number_float(number_float_t, const string_t&) override { return value_done(); }
  bool string(string_t&) override { return value_done(); }
  bool binary(binary_t&) override { return value_done(); }
  bool start_object(std::size_t) override {
    stack_.push_back(Frame{true, {}, {}, 0});
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return value_done();
  }
  bool start_array(std::size_t) override {
    stack_.push_back(Frame{false, {}, {}, 0});
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return value_done();
  }
  bool key(string_t& k) override {
    Frame& top = stack_.back();
    if (!top.keys.insert(k).second) {
      std::string pointer;
      for (std::size_t i = 0; i + 1 < stack_.size(); ++i) {
        pointer.push_back('/');
        pointer.append(stack_[i].object ? io::detail::escape_pointer_token(stack_[i].key)
                                        : std::to_string(stack_[i].index));
      }
      pointer.push_back('/');
      pointer.append(io::detail::escape_pointer_token(k));
      duplicate = pointer;
      return false;
    }
    top.key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;    // object: the key being read
    std::size_t index;  // array: the element being read
  };
  bool value_done() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }
  std::vector<Frame> stack_;
};

}  // namespace

double Load::scale_at(int frame) const {
  if (!ramp) return 1.0;
  if (ramp->frames > 0) return std::min(1.0, std::max(0.0, static_cast<double>(frame) / ramp->frames));
  if (ramp->scale.empty()) return 1.0;
  const auto k = static_cast<std::size_t>(std::clamp(frame, 1, static_cast<int>(ramp->scale.size())));
  return ramp->scale[k - 1];
}

// ---- collision ----------------------------------------------------------------------------------

std::vector<Keyframe> parse_keyframes(const JsonReader& keys, const Context& ctx) {
  std::vector<Keyframe> out;
  if (!keys.is_array() || keys.size() == 0) keys.fail_type("a non-empty array of keyframes");
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const JsonReader key = keys.element(i);
    out.push_back(parse_keyframe(key, ctx));
    if (i > 0 && !(out[i].frame > out[i - 1].frame))
      key.fail_at(key.has("frame") ? "frame" : "time", "keyframes must be in strictly increasing order (frame " +
                                                           fmt_num(out[i].frame) + " follows frame " +
                                                           fmt_num(out[i - 1].frame) + ")");
  }
  return out;
}

ObstacleSpec parse_obstacle(const JsonReader& r, const Context& ctx) {
  r.expect_object();
  const std::string type = r.child("type").one_of({"plane", "sphere", "capsule", "box", "mesh"});
  const std::string note = " (for an obstacle of type '" + type + "')";
  ObstacleSpec o;
  if (type == "plane") {
    r.allow_keys({"type", "point", "normal", "keyframes"}, note);
    o.type = ObstacleSpec::Type::Plane;
    o.point = r.required<Vec3>("point");
    o.normal = nonzero_direction(r.child("normal"));
  } else if (type == "sphere") {
    r.allow_keys({"type", "center", "radius", "max_edge", "keyframes"}, note);
    o.type = ObstacleSpec::Type::Sphere;
    o.center = r.required<Vec3>("center");
    o.radius = positive(r.child("radius"));
    if (const auto e = r.optional_child("max_edge")) o.max_edge = positive(*e);
  } else if (type == "capsule") {
    r.allow_keys({"type", "a", "b", "radius", "keyframes"}, note);
    o.type = ObstacleSpec::Type::Capsule;
    o.a = r.required<Vec3>("a");
    o.b = r.required<Vec3>("b");
    o.radius = positive(r.child("radius"));
  } else if (type == "box") {
    r.allow_keys({"type", "center", "half_extents", "keyframes"}, note);
    o.type = ObstacleSpec::Type::Box;
    o.center = r.optional<Vec3>("center", Vec3::Zero());
    const JsonReader h = r.child("half_extents");
    o.half_extents = h.as<Vec3>();
    if (!(o.half_extents.array() > 0).all()) h.fail("every half extent must be > 0");
  } else {
    r.allow_keys({"type", "file", "cell_size", "keyframes"}, note);
    o.type = ObstacleSpec::Type::Mesh;
    o.file = ctx.existing_file(r.child("file"));
    if (const auto c = r.optional_child("cell_size")) o.cell_size = positive(*c);
  }
  if (const auto k = r.optional_child("keyframes")) o.keyframes = parse_keyframes(*k, ctx);
  return o;
}

CollisionSettings parse_collision(const JsonReader& r, const Context& ctx, const MeshSource& mesh) {
  r.allow_keys({"proxies", "region", "stiffness", "inner_iterations", "method", "schur_solve", "memory_budget_mb",
                "margin", "self_collision", "obstacles", "start_frame", "dhat", "kappa", "ccd_tolerance",
                "global_solve"});
  CollisionSettings c;
  const std::optional<JsonReader> method = r.optional_child("method");
  c.ipc = method && method->value().is_string() && method->as<std::string>() == "ipc";
  // Keys of one contact model only.
  for (const char* key : {"dhat", "kappa", "ccd_tolerance", "global_solve"})
    if (!c.ipc && r.has(key)) r.fail_at(key, std::string("'") + key + "' applies to \"method\": \"ipc\" only");
  if (c.ipc) {
    for (const char* key : {"stiffness", "inner_iterations", "schur_solve", "margin", "self_collision"})
      if (r.has(key))
        r.fail_at(key, std::string("'") + key + "' applies to the penalty methods, not to \"method\": \"ipc\"");
    if (const auto v = r.optional_child("dhat")) c.dhat = positive(*v);
    if (const auto v = r.optional_child("kappa")) c.kappa = positive(*v);
    if (const auto v = r.optional_child("ccd_tolerance")) c.ccd_tolerance = positive(*v);
    if (const auto v = r.optional_child("global_solve")) {
      const std::string g = v->one_of({"woodbury", "full_sparse", "pcg"});
      c.ipc_global_solve = g == "woodbury"      ? IpcGlobalSolve::Woodbury
                           : g == "full_sparse" ? IpcGlobalSolve::FullSparse
                                                : IpcGlobalSolve::Pcg;
    }
  }
  if (const auto p = r.optional_child("proxies")) {
    const std::string v = p->one_of({"surface", "embedded_surface"});
    c.proxies = v == "surface" ? CollisionSettings::Proxies::Surface : CollisionSettings::Proxies::EmbeddedSurface;
    if (c.proxies == CollisionSettings::Proxies::EmbeddedSurface && mesh.embedded_surface.empty())
      p->fail("'embedded_surface' proxies need mesh.embedded_surface");
  }
  if (const auto v = r.optional_child("region")) c.region = ctx.selection_ref(*v);
  if (const auto v = r.optional_child("stiffness")) c.stiffness = positive(*v);
  if (const auto v = r.optional_child("inner_iterations")) c.inner_iterations = int_at_least(*v, 1);
  if (method && !c.ipc)
    c.method =
        collision_method_from_string(method->one_of({"schur", "full_refactor", "projective_skinning", "pcg", "ipc"}));
  if (const auto v = r.optional_child("schur_solve")) {
    const std::string m = v->one_of({"automatic", "dense_refactor", "woodbury"});
    c.schur_solve = m == "woodbury"         ? SchurSolveMethod::Woodbury
                    : m == "dense_refactor" ? SchurSolveMethod::DenseRefactor
                                            : SchurSolveMethod::Automatic;
  }
  if (const auto v = r.optional_child("memory_budget_mb")) c.memory_budget_mb = positive(*v);
  if (const auto v = r.optional_child("margin")) c.margin = non_negative(*v);
  if (const auto v = r.optional_child("self_collision")) {
    if (v->value().is_boolean()) {
      c.self_collision = v->as<bool>();
    } else {
      v->allow_keys({"exclusion_radius", "sdf_cell_size", "two_sided", "hold_pairing", "half_space", "repair_distance",
                     "repair_rounds", "margin"},
                    " (self_collision is true, false or an object)");
      c.self_collision = true;
      if (const auto e = v->optional_child("exclusion_radius")) c.exclusion_radius = positive(*e);
      if (const auto e = v->optional_child("sdf_cell_size")) c.sdf_cell_size = positive(*e);
      if (const auto e = v->optional_child("two_sided")) c.two_sided_self_contact = e->as<bool>();
      if (const auto e = v->optional_child("hold_pairing")) c.hold_self_contact_pairing = e->as<bool>();
      if (const auto e = v->optional_child("half_space")) c.self_contact_half_space = e->as<bool>();
      if (const auto e = v->optional_child("repair_distance")) c.half_space_repair_distance = non_negative(*e);
      if (const auto e = v->optional_child("repair_rounds")) c.half_space_repair_rounds = int_at_least(*e, 0);
      if (const auto e = v->optional_child("margin")) c.self_margin = non_negative(*e);
    }
  }
  if (const auto v = r.optional_child("start_frame")) c.start_frame = int_at_least(*v, 1);
  if (const auto o = r.optional_child("obstacles"))
    c.obstacles = parse_list<ObstacleSpec>(*o, [&](const JsonReader& e) {
      ObstacleSpec spec = parse_obstacle(e, ctx);
      if (c.ipc && spec.type != ObstacleSpec::Type::Mesh && spec.type != ObstacleSpec::Type::Box &&
          spec.type != ObstacleSpec::Type::Sphere)
        e.fail_at("type",
                  "IPC obstacles are triangle surfaces: \"mesh\" (a surface file), \"box\" or \"sphere\" "
                  "(an icosphere)");
      if (c.ipc && e.has("cell_size"))
        e.fail_at("cell_size", "IPC obstacles use the surface itself, not a distance grid");
      if (!c.ipc && e.has("max_edge"))
        e.fail_at("max_edge", "'max_edge' applies to the spheres of \"method\": \"ipc\" (penalty spheres are exact)");
      return spec;
    });
  return c;
}

TwoWaySettings parse_two_way(const JsonReader& r, const Context& ctx) {
  r.allow_keys({"delta", "d_min", "d_max", "gamma", "sigma", "max_steps", "sweeps", "tolerance", "constraint", "seed",
                "forward", "start_frame", "min_volume", "rest_fraction", "contact_forces", "obstacles", "device"});
  TwoWaySettings t;
  TwoWayOptions& o = t.options;
  if (const auto v = r.optional_child("delta")) o.delta = positive(*v);
  if (const auto v = r.optional_child("d_min")) o.d_min = positive(*v);
  if (const auto v = r.optional_child("d_max")) o.d_max = positive(*v);
  if (const auto v = r.optional_child("gamma")) o.gamma = v->as<double>();
  if (const auto v = r.optional_child("sigma")) o.sigma = v->as<double>();
  if (const auto v = r.optional_child("max_steps")) o.max_steps = int_at_least(*v, 1);
  if (const auto v = r.optional_child("sweeps")) o.sweeps = int_at_least(*v, 1);
  if (const auto v = r.optional_child("tolerance")) o.tolerance = v->as<double>();
  if (const auto v = r.optional_child("constraint"))
    o.constraint = v->one_of({"volume", "gap"}) == "volume" ? TwoWayConstraint::Volume : TwoWayConstraint::Gap;
  if (const auto v = r.optional_child("forward")) {
    const std::string f = v->one_of({"planes", "zones", "vertex"});
    o.forward = f == "planes" ? TwoWayForward::Planes : f == "zones" ? TwoWayForward::Zones : TwoWayForward::Vertex;
  }
  if (const auto v = r.optional_child("seed")) o.seed = static_cast<std::uint64_t>(int_at_least(*v, 0));
  if (const auto v = r.optional_child("start_frame")) t.start_frame = int_at_least(*v, 1);
  if (const auto v = r.optional_child("min_volume")) o.min_volume = v->as<double>();
  if (const auto v = r.optional_child("rest_fraction")) o.rest_fraction = v->as<double>();
  if (const auto v = r.optional_child("contact_forces")) o.contact_forces = v->as<bool>();
  if (const auto v = r.optional_child("device")) t.cuda = v->one_of({"cpu", "cuda"}) == "cuda";
  if (const auto v = r.optional_child("obstacles"))
    t.obstacles = parse_list<ObstacleSpec>(*v, [&](const JsonReader& e) {
      ObstacleSpec spec = parse_obstacle(e, ctx);
      if (spec.type != ObstacleSpec::Type::Mesh && spec.type != ObstacleSpec::Type::Box)
        e.fail_at("type", "two-way obstacles are triangle surfaces: \"mesh\" (a surface file) or \"box\"");
      if (e.has("cell_size")) e.fail_at("cell_size", "two-way obstacles use the surface itself, not a distance grid");
      return spec;
    });
  // Relations between explicit values (automatic ones are checked when the mesh is known).
  if (const auto problem = two_way_option_problem(o)) r.fail_at(problem->first, problem->second);
  return t;
}

// ---- surgery -----------------------------------------------------------------------------------

std::pair<Vec3, Vec3> parse_box(const JsonReader& r) {
  r.allow_keys({"min", "max"});
  const Vec3 lo = r.required<Vec3>("min"), hi = r.required<Vec3>("max");
  if (!(lo.array() < hi.array()).all()) r.fail("min must be below max on every axis");
  return {lo, hi};
}

SurgeryEvent parse_surgery_event(const JsonReader& r, const Context& ctx) {
  r.expect_object();
  const std::string tool =
      r.child("tool").one_of({"cut", "excise", "release", "hook", "suture", "suture_row", "undermine"});
  SurgeryEvent e;
  if (tool == "cut") {
    e.tool = SurgeryEvent::Tool::Cut;
    r.allow_keys({"tool", "frame", "frames", "plane", "advance", "path", "sweep", "box", "mode"});
    if (r.has("plane") == r.has("path")) r.fail("a cut needs exactly one of 'plane' and 'path'");
    if (const auto plane = r.optional_child("plane")) {
      plane->allow_keys({"point", "normal"});
      e.plane_point = plane->required<Vec3>("point");
      e.plane_normal = nonzero_direction(plane->child("normal"));
      if (const auto v = r.optional_child("advance")) e.advance = nonzero_direction(*v);
      if (r.has("sweep")) r.child("sweep").fail("'sweep' belongs to a cut along a 'path'");
    } else {
      const JsonReader path = r.child("path");
      if (!path.is_array() || path.size() < 2) path.fail("must be an array of at least 2 points [x, y, z]");
      for (std::size_t i = 0; i < path.size(); ++i) e.path.points.push_back(path.element(i).as<Vec3>());
      const JsonReader sweep = r.child("sweep");
      if (sweep.is_array() && sweep.size() > 0 && sweep.element(0).is_array()) {
        if (sweep.size() != path.size())
          sweep.fail("one sweep vector per path point (" + std::to_string(path.size()) + "), or a single vector");
        for (std::size_t i = 0; i < sweep.size(); ++i) e.path.sweep.push_back(sweep.element(i).as<Vec3>());
      } else {
        e.path.sweep.push_back(sweep.as<Vec3>());
      }
      for (const Vec3& v : e.path.sweep)
        if (v.norm() == 0) sweep.fail("a sweep vector (the blade's depth direction × depth) must be nonzero");
      if (r.has("advance"))
        r.child("advance").fail("'advance' belongs to a 'plane' cut (a path cut advances along the path)");
    }
    if (const auto v = r.optional_child("box")) e.box = parse_box(*v);
    if (const auto v = r.optional_child("mode")) {
      e.split = v->one_of({"faces", "split"}) == "split";
      if (e.split && e.path.points.empty())
        v->fail("\"split\" cuts along a 'path' (a blade's swept surface), not a 'plane'");
      if (e.split && e.box) v->fail("\"split\" cuts take no 'box' (the path bounds the blade)");
    }
  } else if (tool == "excise") {
    e.tool = SurgeryEvent::Tool::Excise;
    r.allow_keys({"tool", "frame", "sphere", "box", "mode"});
    if (const auto v = r.optional_child("mode")) {
      e.split = v->one_of({"tets", "split"}) == "split";
      if (e.split && !r.has("sphere")) v->fail("\"split\" excises a 'sphere' (a closed surface), not a 'box'");
    }
    if (const auto v = r.optional_child("sphere")) {
      v->allow_keys({"center", "radius"});
      e.sphere = std::make_pair(v->required<Vec3>("center"), positive(v->child("radius")));
    }
    if (const auto v = r.optional_child("box")) e.box = parse_box(*v);
    if (e.sphere.has_value() == e.box.has_value()) r.fail("an excision needs exactly one of 'sphere' and 'box'");
  } else if (tool == "release") {
    e.tool = SurgeryEvent::Tool::Release;
    r.allow_keys({"tool", "frame", "selection", "hook"});
    if (r.has("selection") == r.has("hook")) r.fail("a release needs exactly one of 'selection' and 'hook'");
    if (r.has("hook"))
      e.hook = int_at_least(r.child("hook"), 0);
    else
      e.selection = ctx.selection_ref(r.child("selection"));
  } else if (tool == "hook") {
    e.tool = SurgeryEvent::Tool::Hook;
    r.allow_keys({"tool", "frame", "frames", "point", "target", "stiffness", "release_frame", "grip_radius"});
    e.point = r.required<Vec3>("point");
    e.target = r.required<Vec3>("target");
    e.stiffness = positive(r.child("stiffness"));
    if (r.has("grip_radius")) e.grip_radius = positive(r.child("grip_radius"));
  } else if (tool == "suture_row") {
    e.tool = SurgeryEvent::Tool::SutureRow;
    r.allow_keys({"tool", "frame", "stitches", "between", "stiffness"});
    const JsonReader st = r.child("stitches");
    if (!st.is_array() || st.size() < 2) st.fail("must be an array of at least 2 cardinal stitches {\"a\", \"b\"}");
    for (std::size_t i = 0; i < st.size(); ++i) {
      const JsonReader one = st.element(i);
      one.allow_keys({"a", "b"});
      e.stitches.emplace_back(one.required<Vec3>("a"), one.required<Vec3>("b"));
    }
    if (const auto v = r.optional_child("between")) {
      e.between = int_at_least(*v, 0);
      if (e.between > 1000) v->fail("at most 1000 stitches between two cardinal ones");
    }
    // Each stitch is one factor update and one model rebuild (solver/surgery_session.hpp).
    const std::size_t total = e.stitches.size() + (e.stitches.size() - 1) * static_cast<std::size_t>(e.between);
    if (total > 1000) r.fail("a row of " + std::to_string(total) + " stitches: at most 1000");
    e.stiffness = positive(r.child("stiffness"));
  } else if (tool == "undermine") {
    e.tool = SurgeryEvent::Tool::Undermine;
    r.allow_keys({"tool", "frame", "point", "boundary"});
    if (ctx.shell_layers == 0)
      r.fail("undermining frees a skin shell from the tissue below: it needs mesh.generator \"shell\"");
    e.point = r.required<Vec3>("point");
    if (const auto v = r.optional_child("boundary")) {
      if (!v->is_array() || v->size() < 2) v->fail("must be an array of at least 2 points [x, y, z]");
      for (std::size_t i = 0; i < v->size(); ++i) e.boundary.push_back(v->element(i).as<Vec3>());
    }
  } else {
    e.tool = SurgeryEvent::Tool::Suture;
    r.allow_keys({"tool", "frame", "a", "b", "stiffness"});
    e.a = r.required<Vec3>("a");
    e.b = r.required<Vec3>("b");
    e.stiffness = positive(r.child("stiffness"));
  }
  const int frames = ctx.solver.frames;
  if (r.has("frame") == r.has("frames")) r.fail("give the event's 'frame' (or, for a cut, 'frames': [first, last])");
  if (const auto v = r.optional_child("frame")) {
    e.first_frame = e.last_frame = int_at_least(*v, 1);
    if (e.first_frame > frames)
      v->fail("frame " + std::to_string(e.first_frame) + " is after the last frame (" + std::to_string(frames) + ")");
  } else {
    const JsonReader f = r.child("frames");
    const std::vector<int> ff = f.as<std::vector<int>>();
    if (ff.size() != 2 || ff[0] < 1 || ff[1] < ff[0] || ff[1] > frames)
      f.fail("must be [first, last] with 1 <= first <= last <= " + std::to_string(frames) + " (solver.frames)");
    e.first_frame = ff[0];
    e.last_frame = ff[1];
  }
  if (const auto v = r.optional_child("release_frame")) {
    e.release_frame = int_at_least(*v, e.last_frame + 1);
    if (e.release_frame > frames)
      v->fail("release_frame " + std::to_string(e.release_frame) + " is after the last frame (" +
              std::to_string(frames) + ")");
  }
  return e;
}

SurgerySettings parse_surgery(const JsonReader& r, const Context& ctx) {
  r.allow_keys({"factor_update", "fill_ratio", "fill_check", "events"});
  SurgerySettings s;
  if (const auto v = r.optional_child("factor_update"))
    s.factor_update =
        v->one_of({"progressive", "refactor"}) == "progressive" ? FactorUpdate::Progressive : FactorUpdate::Refactor;
  if (const auto v = r.optional_child("fill_ratio")) {
    s.fill_ratio = v->as<double>();
    if (!(s.fill_ratio >= 1)) v->fail("must be >= 1");
  }
  if (const auto v = r.optional_child("fill_check")) s.fill_check = v->as<bool>();
  s.events =
      parse_list<SurgeryEvent>(r.child("events"), [&](const JsonReader& e) { return parse_surgery_event(e, ctx); });
  return s;
}

SurgeryEvent parse_surgery_event(const nlohmann::json& event, const Scene& scene, int frames,
                                 const std::string& pointer) {
  if (!scene.surgery) throw SceneError(scene.file, pointer, "the scene has no \"surgery\" key");
  if (frames < 1) throw Error("parse_surgery_event: frames must be >= 1");
  Context ctx;
  ctx.file = scene.file;
  ctx.base_dir = scene.base_dir;
  ctx.solver = scene.solver;
  ctx.solver.frames = frames;
  ctx.selection_names = {"all"};
  for (const auto& [name, sel] : scene.selections) ctx.selection_names.push_back(name);
  if (scene.mesh.kind == MeshSource::Kind::Shell) {
    ctx.shell_layers = scene.mesh.shell.layers;
    ctx.shell_vertices = scene.mesh.shell_surface_vertices;
  }
  return parse_surgery_event(JsonReader(event, pointer, ctx.file), ctx);
}

Scene parse_scene(const nlohmann::json& document, const std::string& name, const std::string& base_dir) {
  Context ctx;
  ctx.file = name;
  ctx.base_dir = base_dir;
  const JsonReader root(document, "", ctx.file);
  root.allow_keys({"version", "description", "mesh", "materials", "actuation", "selections", "attachments", "loads",
                   "solver", "outputs", "collision", "two_way", "surgery"});
  if (const auto v = root.optional_child("version"); v && v->as<int>() != 1)
    v->fail("unsupported scene version " + v->value().dump() + " (this xpd reads version 1)");
  Scene scene;
  scene.file = name;
  scene.base_dir = base_dir;
  scene.description = root.optional<std::string>("description", "");
  // Solver first (keyframe times need the time step), selections before anything that names them.
  if (const auto s = root.optional_child("solver")) scene.solver = parse_solver(*s);
  ctx.solver = scene.solver;
  ctx.selection_names = {"all"};
  scene.mesh = parse_mesh(root.child("mesh"), ctx);
  if (scene.mesh.kind == MeshSource::Kind::Shell) {
    ctx.shell_layers = scene.mesh.shell.layers;
    ctx.shell_vertices = scene.mesh.shell_surface_vertices;
  }
  if (const auto s = root.optional_child("selections")) scene.selections = parse_selections(*s, ctx);
  const JsonReader materials = root.child("materials");
  scene.materials = parse_list<Material>(materials, [&](const JsonReader& r) { return parse_material(r, ctx); });
  if (scene.materials.empty()) materials.fail("at least one material is required");
  if (const auto a = root.optional_child("actuation"))
    scene.actuation = parse_list<Actuation>(*a, [&](const JsonReader& r) { return parse_actuation(r, ctx); });
  if (const auto a = root.optional_child("attachments"))
    scene.attachments = parse_list<Attachment>(*a, [&](const JsonReader& r) { return parse_attachment(r, ctx); });
  if (const auto l = root.optional_child("loads"))
    scene.loads = parse_list<Load>(*l, [&](const JsonReader& r) { return parse_load(r, ctx); });
  if (const auto o = root.optional_child("outputs")) scene.outputs = parse_outputs(*o);
  if (const auto c = root.optional_child("collision")) scene.collision = parse_collision(*c, ctx, scene.mesh);
  if (const auto t = root.optional_child("two_way")) {
    if (scene.collision && scene.collision->ipc)
      t->fail(
          "two_way and \"collision\": {\"method\": \"ipc\"} are alternatives (IPC keeps the surface "
          "intersection-free by itself); use one");
    scene.two_way = parse_two_way(*t, ctx);
  }
  if (const auto t = root.optional_child("surgery")) scene.surgery = parse_surgery(*t, ctx);
  return scene;
}

Scene load_scene(const std::string& path) { return load_scene(path, nullptr); }

Scene load_scene(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  const std::string data = io::read_file_bytes(path);
  json document;
  try {
    // Comments (// and /* */) are allowed in scene files.
    document = json::parse(data, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based count of bytes read when the error was detected.
    const auto [line, column] = line_column(data, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line L, column C: " prefix.
    if (const std::size_t p = what.find(": "); p != std::string::npos && what.find("parse error") < p)
      what = what.substr(p + 2);
    throw IoError(path, line, "column " + std::to_string(column) + ": malformed JSON: " + what);
  }
  DuplicateKeyFinder finder;
  (void)json::sax_parse(data, &finder, nlohmann::json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/true);
  if (finder.duplicate) {
    const std::string key = finder.duplicate->substr(finder.duplicate->rfind('/') + 1);
    throw SceneError(path, *finder.duplicate, "duplicate key '" + key + "' (JSON keeps only one; remove the other)");
  }
  if (edit) edit(document);
  return parse_scene(document, path, fs::path(path).parent_path().string());
}

std::array<double, 6> Actuation::target_at(double frame) const {
  if (keyframes.empty()) return target;
  if (frame <= keyframes.front().first) return keyframes.front().second;
  if (frame >= keyframes.back().first) return keyframes.back().second;
  std::size_t k = 1;
  while (keyframes[k].first < frame) ++k;
  const auto& [f0, b0] = keyframes[k - 1];
  const auto& [f1, b1] = keyframes[k];
  const double s = (frame - f0) / (f1 - f0);
  std::array<double, 6> b{};
  for (std::size_t i = 0; i < 6; ++i) b[i] = (1 - s) * b0[i] + s * b1[i];
  return b;
}

std::vector<int> assign_actuation(const Scene& scene, const TetMesh& mesh) {
  std::vector<int> entry(static_cast<std::size_t>(mesh.tets.rows()), -1);
  for (std::size_t i = 0; i < scene.actuation.size(); ++i) {
    const std::string pointer = "/actuation/" + std::to_string(i) + "/region";
    std::vector<int> tets;
    try {
      tets = select_tets(scene.actuation[i].region, scene.selections, mesh);
    } catch (const SceneError&) {
      throw;
    } catch (const Error& e) {
      throw SceneError(scene.file, pointer, e.what());
    }
    if (tets.empty())
      throw SceneError(scene.file, pointer, "region '" + scene.actuation[i].region + "' contains no tets");
    for (int e : tets) entry[static_cast<std::size_t>(e)] = static_cast<int>(i);
  }
  return entry;
}

std::vector<int> assign_materials(const Scene& scene, const TetMesh& mesh) {
  std::vector<int> material(static_cast<std::size_t>(mesh.tets.rows()), -1);
  for (std::size_t i = 0; i < scene.materials.size(); ++i) {
    const Material& m = scene.materials[i];
    const std::string pointer = "/materials/" + std::to_string(i) + "/region";
    std::vector<int> tets;
    if (m.region_tag) {
      if (mesh.region.empty()) throw SceneError(scene.file, pointer, "the mesh has no region tags");
      for (std::size_t e = 0; e < mesh.region.size(); ++e)
        if (mesh.region[e] == *m.region_tag) tets.push_back(static_cast<int>(e));
    } else {
      try {
        tets = select_tets(m.region, scene.selections, mesh);
      } catch (const SceneError&) {
        throw;
      } catch (const Error& e) {
        throw SceneError(scene.file, pointer, e.what());
      }
    }
    if (tets.empty())
      throw SceneError(scene.file, pointer,
                       "region " + (m.region_tag ? "tag " + std::to_string(*m.region_tag) : "'" + m.region + "'") +
                           " contains no tets");
    for (int e : tets) material[static_cast<std::size_t>(e)] = static_cast<int>(i);
  }
  const auto missing = std::find(material.begin(), material.end(), -1);
  if (missing != material.end())
    throw SceneError(scene.file, "/materials",
                     "tet " + std::to_string(missing - material.begin()) + " (and " +
                         std::to_string(std::count(missing, material.end(), -1) - 1) +
                         " more) lies in no material region; start the list with a material for region 'all'");
  return material;
}

void check_scene_against_mesh(const Scene& scene, const TetMesh& mesh) {
  const auto nodes_of = [&](const std::string& name, const std::string& pointer) {
    try {
      return select_nodes(name, scene.selections, mesh);
    } catch (const SceneError&) {
      throw;
    } catch (const Error& e) {
      throw SceneError(scene.file, pointer, e.what());
    }
  };
  for (const auto& [name, selection] : scene.selections)
    (void)nodes_of(name, "/selections/" + io::detail::escape_pointer_token(name));
  const auto require_nodes = [&](const std::string& name, const std::string& pointer) {
    if (nodes_of(name, pointer).empty())
      throw SceneError(scene.file, pointer, "selection '" + name + "' contains no node of the mesh");
  };
  for (std::size_t i = 0; i < scene.attachments.size(); ++i)
    require_nodes(scene.attachments[i].selection, "/attachments/" + std::to_string(i) + "/selection");
  for (std::size_t i = 0; i < scene.loads.size(); ++i)
    if (scene.loads[i].type != Load::Type::Gravity)
      require_nodes(scene.loads[i].selection, "/loads/" + std::to_string(i) + "/selection");
}

}  // namespace xpd
