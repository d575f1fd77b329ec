// Deterministic mutation fuzzing of the tet readers: truncated and byte-mutated versions of real
// files (and of generated binary/appended variants) must either parse and validate or throw an
// xpd::Error; any other exception (or a crash, caught under ASan by `make sanitize`) fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/tet_formats.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/validate.hpp>

#include "io/tet_fixture_writers.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

constexpr int kMutantsPerFormat = 1000;

/// splitmix64: a tiny RNG whose sequence is the same on every platform and standard library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t s_;
};

/// One mutation of `s`: truncation, byte flips, digit edits, huge numbers, deletions,
/// duplications or insertions of random bytes.
std::string mutate(std::string s, Rng& rng) {
  static const char* kTokens[] = {
      "99999999999", "-1", "2147483648",           "nan", "inf", "1e999", "$EndNodes", "End", "<", ">", "\"", "=",
      "0",           "-0", "18446744073709551615", "\n",  "#"};
  const int kind = static_cast<int>(rng.below(8));
  const std::size_t n = s.size();
  if (n == 0) return s;
  switch (kind) {
    case 0:  // truncate
      s.resize(rng.below(n));
      break;
    case 1:  // flip 1..8 random bytes
      for (std::size_t k = 0, m = 1 + rng.below(8); k < m; ++k) s[rng.below(n)] = static_cast<char>(rng.next());
      break;
    case 2: {  // change a digit
      for (int tries = 0; tries < 64; ++tries) {
        const std::size_t i = rng.below(n);
        if (s[i] >= '0' && s[i] <= '9') {
          s[i] = static_cast<char>('0' + rng.below(10));
          break;
        }
      }
      break;
    }
    case 3:  // insert a hostile token
      s.insert(rng.below(n), kTokens[rng.below(std::size(kTokens))]);
      break;
    case 4: {  // delete a range
      const std::size_t at = rng.below(n);
      s.erase(at, 1 + rng.below(std::min<std::size_t>(64, n - at)));
      break;
    }
    case 5: {  // duplicate a range
      const std::size_t at = rng.below(n);
      s.insert(rng.below(n), s.substr(at, 1 + rng.below(256)));
      break;
    }
    case 6: {  // random bytes
      std::string junk(1 + rng.below(16), '\0');
      for (auto& ch : junk) ch = static_cast<char>(rng.next());
      s.insert(rng.below(n), junk);
      break;
    }
    default:  // truncate and flip
      s.resize(n / 2 + rng.below(n / 2 + 1));
      if (!s.empty()) s[rng.below(s.size())] ^= static_cast<char>(1 + rng.below(255));
      break;
  }
  return s;
}

struct Outcome {
  int accepted = 0;
  int rejected = 0;
};

/// Runs `parse` + validation on `count` mutants of the seeds; only xpd::Error may escape.
Outcome run_mutants(const std::vector<std::string>& seeds, int count, std::uint64_t seed,
                    const std::function<TetMesh(const std::string&)>& parse) {
  Rng rng(seed);
  Outcome out;
  for (int i = 0; i < count; ++i) {
    const std::string& base = seeds[static_cast<std::size_t>(i) % seeds.size()];
    std::string data = mutate(base, rng);
    if (rng.below(4) == 0) data = mutate(std::move(data), rng);  // sometimes two mutations
    try {
      TetMesh m = parse(data);
      validate_tet_mesh(m, {}, "mutant");
      ++out.accepted;
    } catch (const Error&) {
      ++out.rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << i << " threw a non-xpd exception: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "mutant " << i << " threw a non-exception";
    }
  }
  return out;
}

std::string shared(const char* rel) { return io::read_file_bytes(test::data_path(rel)); }

TetMesh sample() {
  TetMesh m = make_box(2, 2, 2, Vec3::Zero(), Vec3::Ones());
  m.boundary.resize(2, 3);
  m.boundary << 0, 1, 2, 1, 2, 3;
  return m;
}

TEST(IoTetFuzzMutations, Msh) {
  const TetMesh m = sample();
  const std::vector<std::string> seeds = {
      shared("ipc-tetmeshes/tet.msh"), shared("ipc-tetmeshes/bar-186.msh"), shared("sofa-meshes/liver.msh"),
      test::write_msh22(m, false),     test::write_msh22(m, true),          test::write_msh22(m, true, true),
      test::write_msh41(m, true),      test::write_msh41(m, false),         test::write_msh1(m)};
  const Outcome o =
      run_mutants(seeds, kMutantsPerFormat * 2, 1, [](const std::string& d) { return io::parse_msh(d, "m.msh"); });
  std::printf("[ mutants  ] msh: %d accepted, %d rejected with xpd::Error\n", o.accepted, o.rejected);
  EXPECT_GT(o.rejected, 0);
}

TEST(IoTetFuzzMutations, Medit) {
  const std::vector<std::string> seeds = {shared("libigl-tutorial-data/octopus-low.mesh"), test::write_medit(sample())};
  const Outcome o =
      run_mutants(seeds, kMutantsPerFormat, 2, [](const std::string& d) { return io::parse_medit(d, "m.mesh"); });
  std::printf("[ mutants  ] medit: %d accepted, %d rejected with xpd::Error\n", o.accepted, o.rejected);
  EXPECT_GT(o.rejected, 0);
}

TEST(IoTetFuzzMutations, TetGen) {
  const std::string node = shared("pbd-models/armadillo_4k.node"), ele = shared("pbd-models/armadillo_4k.ele");
  const auto [gnode, gele] = test::write_tetgen(sample(), 1);
  // Mutate the .node or the .ele of a pair (the other stays intact).
  const std::vector<std::string> seeds = {"N" + node, "E" + ele, "n" + gnode, "e" + gele};
  const Outcome o = run_mutants(seeds, kMutantsPerFormat, 3, [&](const std::string& d) {
    if (d.empty()) throw Error("empty mutant");
    const std::string body = d.substr(1);
    switch (d[0]) {
      case 'N':
        return io::parse_tetgen(body, ele, "m.node", "m.ele");
      case 'E':
        return io::parse_tetgen(node, body, "m.node", "m.ele");
      case 'n':
        return io::parse_tetgen(body, gele, "m.node", "m.ele");
      case 'e':
        return io::parse_tetgen(gnode, body, "m.node", "m.ele");
      default:
        throw Error("mutated selector");
    }
  });
  std::printf("[ mutants  ] tetgen: %d accepted, %d rejected with xpd::Error\n", o.accepted, o.rejected);
  EXPECT_GT(o.rejected, 0);
}

TEST(IoTetFuzzMutations, Vtu) {
  const TetMesh m = sample();
  using test::VtuMode;
  std::vector<std::string> seeds = {shared("sofa-meshes/Armadillo_Tetra_4406.vtu")};
  for (VtuMode mode : {VtuMode::Ascii, VtuMode::Binary, VtuMode::BinaryZlib, VtuMode::AppendedRaw,
                       VtuMode::AppendedBase64, VtuMode::AppendedRawZlib})
    seeds.push_back(test::write_vtu(m, mode, mode == VtuMode::AppendedRaw, mode == VtuMode::Binary));
  const Outcome o =
      run_mutants(seeds, kMutantsPerFormat * 2, 4, [](const std::string& d) { return io::parse_vtu(d, "m.vtu"); });
  std::printf("[ mutants  ] vtu: %d accepted, %d rejected with xpd::Error\n", o.accepted, o.rejected);
  EXPECT_GT(o.rejected, 0);
}

// Writes the generated part of the seed corpora (fuzz/corpus/<harness>/gen_*) when
// XPD_WRITE_FUZZ_CORPUS names the corpus folder; skipped otherwise.
TEST(IoTetFuzzMutations, WriteSeedCorpus) {
  const char* dir = std::getenv("XPD_WRITE_FUZZ_CORPUS");
  if (!dir || !*dir) GTEST_SKIP() << "set XPD_WRITE_FUZZ_CORPUS=fuzz/corpus to regenerate the generated seeds";
  const std::filesystem::path root(dir);
  const auto write = [&](const std::string& rel, const std::string& data) {
    std::filesystem::create_directories((root / rel).parent_path());
    std::ofstream(root / rel, std::ios::binary) << data;
  };
  const TetMesh m = sample();
  write("msh/gen_v1.msh", test::write_msh1(m));
  write("msh/gen_v22_ascii.msh", test::write_msh22(m, false));
  write("msh/gen_v22_binary.msh", test::write_msh22(m, true));
  write("msh/gen_v22_binary_bigendian.msh", test::write_msh22(m, true, true));
  write("msh/gen_v41_ascii.msh", test::write_msh41(m, false));
  write("msh/gen_v41_binary.msh", test::write_msh41(m, true));
  write("medit/gen_box.mesh", test::write_medit(m));
  for (int base : {0, 1}) {
    const auto [node, ele] = test::write_tetgen(m, base);
    write("tetgen/gen_box_base" + std::to_string(base), node + std::string(1, '\0') + ele);
  }
  using test::VtuMode;
  const char* names[] = {"ascii", "binary", "binary_zlib", "appended_raw", "appended_base64", "appended_raw_zlib"};
  for (int k = 0; k < 6; ++k) {
    const auto mode = static_cast<VtuMode>(k);
    write(std::string("vtu/gen_") + names[k] + ".vtu", test::write_vtu(m, mode));
    write(std::string("vtu/gen_") + names[k] + "_u64_bigendian_f32.vtu", test::write_vtu(m, mode, true, true, true));
  }
}

}  // namespace
}  // namespace xpd
