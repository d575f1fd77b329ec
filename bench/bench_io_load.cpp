// Loader throughput: parse time against file size, per format, on real meshes of increasing size.
// Linear-time loading shows as a constant bytes_per_second across the sizes of one format.
// Files are read (and gunzipped) once outside the timed loop; the loop times parse + validation.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <xpd/io/file.hpp>
#include <xpd/io/tet_formats.hpp>
#include <xpd/mesh/validate.hpp>

namespace {

std::string data_path(const std::string& rel) {
  const char* env = std::getenv("XPD_DATA_DIR");
  return std::string(env && *env ? env : XPD_DEFAULT_DATA_DIR) + "/" + rel;
}

template <class Parse>
void bench_parse(benchmark::State& state, const std::string& rel, Parse parse) {
  const std::string path = data_path(rel);
  const std::string bytes = xpd::io::read_file_bytes(path);
  std::int64_t tets = 0;
  for (auto _ : state) {
    xpd::TetMesh mesh = parse(bytes, path);
    xpd::validate_tet_mesh(mesh, {}, path);
    tets = mesh.tets.rows();
    benchmark::DoNotOptimize(mesh.nodes.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
  state.counters["file_bytes"] = static_cast<double>(bytes.size());
  state.counters["tets"] = static_cast<double>(tets);
}

void register_all() {
  const auto msh = [](const std::string& b, const std::string& n) { return xpd::io::parse_msh(b, n); };
  const auto medit = [](const std::string& b, const std::string& n) { return xpd::io::parse_medit(b, n); };
  for (const char* f : {"ipc-tetmeshes/bar-2523.msh", "ipc-tetmeshes/bar-14114.msh", "ipc-tetmeshes/sphere5K.msh.gz",
                        "ipc-tetmeshes/Armadillo13K.msh.gz", "ipc-tetmeshes/mat100x100t40.msh.gz"})
    benchmark::RegisterBenchmark((std::string("msh41/") + f).c_str(), [=](benchmark::State& s) {
      bench_parse(s, f, msh);
    })->Unit(benchmark::kMillisecond);
  for (const char* f :
       {"flip-free-tetwild/fish.mesh", "flip-free-tetwild/cow.mesh", "flip-free-tetwild/stuffedtoy.mesh.gz",
        "flip-free-tetwild/armadillo.mesh.gz", "flip-free-tetwild/monkey.mesh.gz"})
    benchmark::RegisterBenchmark((std::string("medit/") + f).c_str(), [=](benchmark::State& s) {
      bench_parse(s, f, medit);
    })->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
