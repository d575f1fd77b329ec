// `xpd view OUT`: serves the browser viewer for a run folder (http_server.hpp) until Ctrl-C: the
// bundled viewer (viewer_assets.hpp) at /, the run folder at /data/ with a generated
// /data/index.json (run_folder.hpp).
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "http_server.hpp"
#include "run_folder.hpp"
#include "viewer_assets.hpp"

namespace xpd::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

struct ViewOptions {
  std::string run;
  std::string host = "127.0.0.1";
  int port = 8000;
  bool verbose = false;
};

void run_view(const ViewOptions& o) {
  const fs::path run = check_run_folder(o.run);
  const fs::path dist = find_viewer_dist();
  http::HttpServer server(
      {dist, run}, [run] { return run_index_json(run); }, o.host, o.port, !o.verbose);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  std::cout << fmt::format("xpd view: serving {} ({} frames) at {}\n", run.string(), list_frames(run).size(),
                           server.url())
            << "Press Ctrl-C to stop." << std::endl;
  server.serve(&g_interrupted);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  std::cout << "xpd view: stopped" << std::endl;
}

}  // namespace

void add_view_command(CLI::App& app) {
  auto o = std::make_shared<ViewOptions>();
  CLI::App* cmd = app.add_subcommand("view", "Serve the browser viewer for a run folder (OUT of `xpd run`)");
  cmd->add_option("out", o->run, "Run folder with frames/NNNN.vtu and stats.json")->required();
  cmd->add_option("--port", o->port, "TCP port (0 = any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_flag("-v,--verbose", o->verbose, "Log every request to stderr");
  cmd->callback([o] { run_view(*o); });
}

}  // namespace xpd::cli
