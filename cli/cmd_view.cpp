// `xpd view OUT`: serves the browser viewer for a run folder (http_server.hpp) until Ctrl-C: the
// bundled viewer (viewer_assets.hpp) at /, the run folder at /data/ with a generated
// /data/index.json (run_folder.hpp).
// `xpd view --live SCENE -o OUT`: the same for a surgery session computed while it is viewed
// (live_session.hpp): the viewer follows its frames and posts the surgical events a person draws
// to /api/event.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <xpd/core/error.hpp>

#include "commands.hpp"
#include "http_server.hpp"
#include "live_session.hpp"
#include "run_folder.hpp"
#include "viewer_assets.hpp"

namespace xpd::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

struct ViewOptions {
  std::string run;
  std::string live_scene;
  std::string out;
  int settle = 0;
  std::string host = "127.0.0.1";
  int port = 8000;
  bool verbose = false;
};

void install_interrupt_handlers(struct sigaction* old_int, struct sigaction* old_term) {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, old_int);
  ::sigaction(SIGTERM, &sa, old_term);
}

void run_live(const ViewOptions& o) {
  if (!o.run.empty())
    throw xpd::Error("xpd view --live SCENE -o OUT takes no run folder argument ('" + o.run +
                     "'): the session writes its own into OUT");
  if (o.out.empty()) throw xpd::Error("xpd view --live needs -o OUT, the folder the session's frames are written to");
  const fs::path dist = find_viewer_dist();
  LiveOptions lo;
  lo.scene = o.live_scene;
  lo.out = o.out;
  lo.settle_frames = o.settle;
  lo.quiet = !o.verbose;
  LiveSession session(lo);
  http::HttpServer server(
      {dist, session.run_folder()}, [&session] { return session.index_json(); }, o.host, o.port, !o.verbose);
  server.set_post_handler(
      [&session](const std::string& path, const std::string& body) { return session.post(path, body); });
  struct sigaction old_int {
  }, old_term{};
  install_interrupt_handlers(&old_int, &old_term);
  session.start();
  std::cout << fmt::format("xpd view --live: {} into {}, serving at {}\n", o.live_scene, session.run_folder().string(),
                           server.url())
            << "Draw an incision, place hooks and sutures in the browser; press Ctrl-C to stop." << std::endl;
  server.serve(&g_interrupted);
  // A second Ctrl-C while the frame under way finishes ends the program at once.
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  std::cout << "xpd view --live: stopping after the frame under way" << std::endl;
  session.stop();
  std::cout << "xpd view --live: stopped; replay with: xpd run " << o.live_scene << " --events "
            << (session.run_folder() / "events.json").string() << " -o OUT" << std::endl;
}

void run_view(const ViewOptions& o) {
  if (!o.live_scene.empty()) return run_live(o);
  if (o.run.empty()) throw xpd::Error("xpd view needs a run folder (OUT of xpd run), or --live SCENE -o OUT");
  if (!o.out.empty()) throw xpd::Error("-o OUT belongs to xpd view --live SCENE");
  const fs::path run = check_run_folder(o.run);
  const fs::path dist = find_viewer_dist();
  http::HttpServer server(
      {dist, run}, [run] { return run_index_json(run); }, o.host, o.port, !o.verbose);
  struct sigaction old_int {
  }, old_term{};
  install_interrupt_handlers(&old_int, &old_term);
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
  CLI::App* cmd = app.add_subcommand(
      "view", "Serve the browser viewer for a run folder (OUT of `xpd run`), or a live surgery session (--live)");
  cmd->add_option("run", o->run, "Run folder with frames/NNNN.vtu and stats.json");
  cmd->add_option("--live", o->live_scene,
                  "Live mode: run this scene while it is viewed; surgical events drawn in the browser "
                  "(incisions, hooks, sutures) are applied as they come (viewer/README.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", o->out, "Live mode: folder for the session's frames, stats.json and events.json");
  cmd->add_option("--settle", o->settle, "Live mode: frames solved after each event beyond its own")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--port", o->port, "TCP port (0 = any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_flag("-v,--verbose", o->verbose, "Log every request to stderr");
  cmd->callback([o] { run_view(*o); });
}

}  // namespace xpd::cli
