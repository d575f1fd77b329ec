// Mutation fuzzing of the surface parsers inside the test suite: truncated and byte-mutated
// versions of real files (seeded, so reproducible) must either parse or throw xpd::Error; any
// other exception, crash or sanitizer report (make sanitize) is a bug. The libFuzzer harnesses in
// fuzz/ do the same at a much larger scale.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/surface_formats.hpp>
#include <xpd/mesh/validate.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

using Parser = SurfaceMesh (*)(std::string_view, const std::string&);

constexpr int kMutationsPerFile = 250;

// One random mutation: truncation, byte flips, insertion of format-significant characters,
// deletion or duplication of a chunk.
std::string mutate(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  static const std::string interesting = "0123456789 \n\t-+.eE/#\r\xff\x80";
  switch (rng() % 6) {
    case 0:  // truncate
      s.resize(pick(s.size() + 1));
      break;
    case 1:  // flip up to 8 random bytes
      for (int k = 1 + static_cast<int>(rng() % 8); k > 0 && !s.empty(); --k)
        s[pick(s.size())] ^= static_cast<char>(1 + rng() % 255);
      break;
    case 2:  // overwrite bytes with format-significant characters
      for (int k = 1 + static_cast<int>(rng() % 8); k > 0 && !s.empty(); --k)
        s[pick(s.size())] = interesting[pick(interesting.size())];
      break;
    case 3: {  // delete a chunk
      const std::size_t at = pick(s.size() + 1);
      s.erase(at, pick(64) + 1);
      break;
    }
    case 4: {  // duplicate a chunk
      const std::size_t at = pick(s.size() + 1);
      s.insert(at, s.substr(at, pick(256) + 1));
      break;
    }
    default: {  // set a 4-byte field (counts in binary headers) to an extreme value
      if (s.size() >= 4) {
        const std::uint32_t v = (rng() & 1) ? 0xFFFFFFFFu : static_cast<std::uint32_t>(rng());
        std::memcpy(s.data() + pick(s.size() - 3), &v, 4);
      }
      break;
    }
  }
  return s;
}

struct Outcome {
  int parsed = 0, io_errors = 0, mesh_errors = 0;
};

void fuzz_file(Parser parse, const std::string& label, const std::string& data, std::uint64_t seed, Outcome& out) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kMutationsPerFile; ++i) {
    const std::string m = mutate(data, rng);
    try {
      const SurfaceMesh s = parse(m, label);
      validate_surface(s, label);
      ++out.parsed;
    } catch (const IoError&) {
      ++out.io_errors;
    } catch (const MeshError&) {
      ++out.mesh_errors;
    } catch (const Error&) {
      ++out.io_errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << label << " mutation " << i << " (seed " << seed << "): non-xpd exception " << e.what();
    }
  }
}

std::string data_or_empty(const std::string& rel) {
  const std::string path = test::data_path(rel);
  return std::filesystem::exists(path) ? io::read_file_bytes(path) : std::string();
}

SurfaceMesh knight() {
  const std::string d = data_or_empty("libigl-tutorial-data/decimated-knight.off");
  return d.empty() ? SurfaceMesh{} : io::parse_off(d, "knight.off");
}

void run(Parser parse, const char* format, const std::vector<std::pair<std::string, std::string>>& inputs) {
  Outcome total;
  std::uint64_t seed = 0x5eed0000;
  int files = 0;
  for (const auto& [label, data] : inputs) {
    if (data.empty()) continue;
    ASSERT_NO_THROW((void)parse(data, label)) << "unmutated " << label << " must parse";
    fuzz_file(parse, label, data, seed++, total);
    ++files;
  }
  if (files == 0) GTEST_SKIP() << "shared data missing";
  EXPECT_GE(total.parsed + total.io_errors + total.mesh_errors, 200);
  std::cout << "[ " << format << " ] " << files << " files x " << kMutationsPerFile << " mutations: " << total.parsed
            << " parsed, " << total.io_errors << " IoError, " << total.mesh_errors << " MeshError\n";
}

TEST(IoSurfaceMutation, Obj) {
  std::ostringstream k;
  if (const SurfaceMesh m = knight(); m.nodes.rows() > 0) io::write_obj(k, m);
  run(io::parse_obj, "obj",
      {{"spot.obj", data_or_empty("diffpd-assets/spot.obj")},
       {"liver2.obj", data_or_empty("sofa-meshes/liver2.obj")},
       {"man.obj", data_or_empty("sofa-meshes/man.obj")},
       {"knight.obj", k.str()}});
}

TEST(IoSurfaceMutation, Off) {
  run(io::parse_off, "off",
      {{"knight.off", data_or_empty("libigl-tutorial-data/decimated-knight.off")},
       {"cylinder.off", data_or_empty("fast-projective-skinning/cylinder/cylinder.off")}});
}

TEST(IoSurfaceMutation, Ply) {
  // Real binary little- and big-endian frames plus an ascii rendering of a real mesh.
  std::string ascii;
  if (const SurfaceMesh m = knight(); m.nodes.rows() > 0) {
    std::ostringstream a;
    a << "ply\nformat ascii 1.0\nelement vertex " << m.nodes.rows()
      << "\nproperty float x\nproperty float y\nproperty float z\nelement face " << m.triangles.rows()
      << "\nproperty list uchar int vertex_indices\nend_header\n";
    for (Eigen::Index i = 0; i < m.nodes.rows(); ++i)
      a << m.nodes(i, 0) << ' ' << m.nodes(i, 1) << ' ' << m.nodes(i, 2) << '\n';
    for (Eigen::Index f = 0; f < m.triangles.rows(); ++f)
      a << "3 " << m.triangles(f, 0) << ' ' << m.triangles(f, 1) << ' ' << m.triangles(f, 2) << '\n';
    ascii = a.str();
  }
  run(io::parse_ply, "ply",
      {{"227.ply", data_or_empty("scalable-ccd-sample/cloth-funnel/frames/227.ply")},
       {"balls16_18.ply", data_or_empty("scalable-ccd-sample/n-body-simulation/frames/balls16_18.ply.gz")},
       {"knight_ascii.ply", ascii}});
}

TEST(IoSurfaceMutation, Stl) {
  // No STL in the shared data: real geometry (the knight) written as binary and ascii STL.
  std::string binary, ascii;
  if (const SurfaceMesh m = knight(); m.nodes.rows() > 0) {
    binary = std::string(80, ' ');
    auto put = [&](auto v) { binary.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    put(static_cast<std::uint32_t>(m.triangles.rows()));
    std::ostringstream a;
    a << "solid knight\n";
    for (Eigen::Index f = 0; f < m.triangles.rows(); ++f) {
      for (int c = 0; c < 3; ++c) put(0.0f);
      a << "facet normal 0 0 0\nouter loop\n";
      for (int k = 0; k < 3; ++k) {
        a << "vertex";
        for (int c = 0; c < 3; ++c) {
          put(static_cast<float>(m.nodes(m.triangles(f, k), c)));
          a << ' ' << m.nodes(m.triangles(f, k), c);
        }
        a << '\n';
      }
      put(std::uint16_t{0});
      a << "endloop\nendfacet\n";
    }
    a << "endsolid knight\n";
    ascii = a.str();
  }
  run(io::parse_stl, "stl", {{"knight_binary.stl", binary}, {"knight_ascii.stl", ascii}});
}

}  // namespace
}  // namespace xpd
