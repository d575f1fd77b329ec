// `xpd render OUT`: renders a frame (--frame N --png FILE) or a contact sheet (--frames a:b --sheet
// FILE) of a run folder to PNG. It serves the viewer and the run folder (http_server.hpp) on an
// ephemeral loopback port and runs headless Chromium with --screenshot on /?render=1&frame=N (or
// &frames=a:b); the page reports its outcome by requesting /api/ready?ok=1 or /api/ready?error=MSG,
// and the PNG is renamed into place only when the page said it was ready.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <xpd/core/error.hpp>

#include "commands.hpp"
#include "http_server.hpp"
#include "run_folder.hpp"
#include "viewer_assets.hpp"

namespace xpd::cli {
namespace {

namespace fs = std::filesystem;

struct RenderOptions {
  std::string run;
  std::optional<int> frame;
  std::string frames;
  std::string png;
  std::string sheet;
  int width = 1280;
  int height = 720;
  int timeout_s = 180;
  std::string chromium;
  std::string up;
  bool no_overlay = false;
  std::vector<double> view;  // camera direction (3 numbers), empty: the default
  bool surface_only = false;
};

std::string find_chromium(const std::string& explicit_path) {
  std::vector<std::string> c;
  if (!explicit_path.empty()) {
    if (::access(explicit_path.c_str(), X_OK) == 0) return explicit_path;
    throw Error(fmt::format("chromium '{}' is not an executable file", explicit_path));
  }
  if (const char* env = std::getenv("XPD_CHROMIUM"); env && *env) {
    if (::access(env, X_OK) == 0) return env;
    throw Error(fmt::format(
        "XPD_CHROMIUM='{}' is not an executable file; unset it or run scripts/setup to install Chromium", env));
  }
  c.emplace_back("/usr/bin/chromium");
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (std::size_t pos = 0; pos <= p.size();) {
      std::size_t colon = p.find(':', pos);
      if (colon == std::string::npos) colon = p.size();
      const std::string dir = p.substr(pos, colon - pos);
      if (!dir.empty())
        for (const char* name : {"chromium", "chromium-browser", "google-chrome", "chrome"})
          c.push_back(dir + "/" + name);
      pos = colon + 1;
    }
  }
  for (const auto& x : c)
    if (::access(x.c_str(), X_OK) == 0) return x;
  throw Error(
      "xpd render needs Chromium (headless) and none was found (/usr/bin/chromium, PATH, $XPD_CHROMIUM): run "
      "scripts/setup");
}

std::string tail_of(const fs::path& file, std::size_t max_chars) {
  std::ifstream in(file, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.size() > max_chars ? s.substr(s.size() - max_chars) : s;
}

/// Runs Chromium headless with --screenshot; returns its exit status (throws on timeout).
int run_chromium(const std::string& chromium, const std::vector<std::string>& args, const fs::path& log,
                 int timeout_s) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(chromium.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(fmt::format("cannot start chromium: {}", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group, so a timeout can end Chromium's helpers too
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(chromium.c_str(), argv.data());
    std::fprintf(stderr, "exec %s: %s\n", chromium.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno != EINTR) throw Error(fmt::format("waiting for chromium: {}", std::strerror(errno)));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw Error(
          fmt::format("chromium did not finish within {} s (--timeout); its log:\n{}", timeout_s, tail_of(log, 2000)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void run_render(const RenderOptions& o) {
  const bool sheet = !o.sheet.empty();
  if (sheet == !o.png.empty())
    throw Error(
        "give exactly one of --png FILE (one frame, with --frame N) or --sheet FILE (contact sheet, with --frames "
        "a:b)");
  if (sheet && o.frames.empty()) throw Error("--sheet needs --frames a:b");
  if (!sheet && !o.frames.empty())
    throw Error("--frames a:b goes with --sheet FILE; for one frame use --frame N --png FILE");
  if (o.width < 16 || o.height < 16 || o.width > 8192 || o.height > 8192)
    throw Error("--width/--height must be between 16 and 8192");
  const fs::path run = check_run_folder(o.run);
  const fs::path dist = find_viewer_dist();
  const std::string chromium = find_chromium(o.chromium);
  const fs::path out = fs::absolute(sheet ? o.sheet : o.png);
  if (!out.parent_path().empty() && !fs::is_directory(out.parent_path()))
    throw Error(fmt::format("cannot write '{}': folder '{}' does not exist", out.string(), out.parent_path().string()));

  http::HttpServer server(
      {dist, run}, [run] { return run_index_json(run); }, "127.0.0.1", 0, true);
  server.start_background();
  std::string url = server.url() + fmt::format("?render=1&w={}&h={}", o.width, o.height);
  if (sheet)
    url += "&frames=" + o.frames;
  else
    url += "&frame=" + std::to_string(o.frame.value_or(0));
  if (!o.up.empty()) url += "&up=" + o.up;
  if (o.no_overlay) url += "&overlay=0";
  if (!o.view.empty()) {
    if (o.view.size() != 3 || !std::all_of(o.view.begin(), o.view.end(), [](double v) { return std::isfinite(v); }) ||
        std::all_of(o.view.begin(), o.view.end(), [](double v) { return v == 0.0; }))
      throw Error("--view takes a direction X,Y,Z: three finite numbers, not all zero");
    url += fmt::format("&view={},{},{}", o.view[0], o.view[1], o.view[2]);
  }
  if (o.surface_only) url += "&tets=0";

  char tmpl[] = "/tmp/xpd-render-XXXXXX";
  if (!::mkdtemp(tmpl)) throw Error(fmt::format("cannot create a temporary folder: {}", std::strerror(errno)));
  const fs::path work = tmpl;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};
  const fs::path shot = work / "shot.png";
  const std::vector<std::string> args = {"--headless",
                                         "--no-sandbox",
                                         "--disable-gpu",
                                         "--disable-quic",
                                         "--no-first-run",
                                         "--disable-background-networking",
                                         "--disable-component-update",
                                         "--disable-sync",
                                         "--disable-extensions",
                                         "--hide-scrollbars",
                                         "--mute-audio",
                                         "--use-angle=swiftshader",
                                         "--enable-unsafe-swiftshader",
                                         "--force-device-scale-factor=1",
                                         "--user-data-dir=" + (work / "profile").string(),
                                         fmt::format("--window-size={},{}", o.width, o.height),
                                         "--virtual-time-budget=600000",
                                         "--run-all-compositor-stages-before-draw",
                                         "--screenshot=" + shot.string(),
                                         url};
  const fs::path log = work / "chromium.log";
  const int rc = run_chromium(chromium, args, log, o.timeout_s);
  server.stop();
  std::string page_error;
  bool reported = false;
  {
    std::lock_guard lock(server.ready().mutex);
    reported = server.ready().reported;
    page_error = server.ready().error;
  }
  if (reported && !page_error.empty()) throw Error("the viewer could not render: " + page_error);
  std::error_code ec;
  if (rc != 0 || !fs::is_regular_file(shot, ec) || fs::file_size(shot, ec) == 0)
    throw Error(
        fmt::format("chromium exited with status {} without a screenshot; its log:\n{}", rc, tail_of(log, 2000)));
  if (!reported) throw Error("the viewer page did not report that it finished drawing before the screenshot was taken");
  // Atomic: copy next to the destination, then rename over it.
  const fs::path tmp = out.string() + fmt::format(".tmp-{}", ::getpid());
  fs::copy_file(shot, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(fmt::format("cannot write '{}': {}", tmp.string(), ec.message()));
  fs::rename(tmp, out, ec);
  if (ec) {
    fs::remove(tmp);
    throw Error(fmt::format("cannot write '{}': {}", out.string(), ec.message()));
  }
  std::cout << fmt::format("xpd render: wrote {} ({}x{})", out.string(), o.width, o.height) << std::endl;
}

}  // namespace

void add_render_command(CLI::App& app) {
  auto o = std::make_shared<RenderOptions>();
  CLI::App* cmd = app.add_subcommand("render", "Render frames of a run folder to PNG with headless Chromium");
  cmd->add_option("out", o->run, "Run folder with frames/NNNN.vtu")->required();
  cmd->add_option("--frame", o->frame, "Frame number to render (with --png; default 0)");
  cmd->add_option("--png", o->png, "PNG file for --frame");
  cmd->add_option("--frames", o->frames, "Frame range a:b for a contact sheet (with --sheet)");
  cmd->add_option("--sheet", o->sheet, "PNG file for the contact sheet of --frames");
  cmd->add_option("--width", o->width, "Image width in pixels")->capture_default_str();
  cmd->add_option("--height", o->height, "Image height in pixels")->capture_default_str();
  cmd->add_option("--up", o->up, "Up axis of the camera: y or z")->check(CLI::IsMember({"y", "z"}));
  cmd->add_flag("--no-overlay", o->no_overlay,
                "Leave out the attachments and obstacles of scene.json (e.g. when attached nodes hide the body)");
  cmd->add_option("--view", o->view,
                  "Camera direction X,Y,Z: from the body's centre towards the camera (default: from the front, "
                  "right and above)")
      ->delimiter(',')
      ->expected(3);
  cmd->add_flag("--surface-only", o->surface_only,
                "Where a frame has an embedded surface, draw only it (not the tet mesh's translucent boundary)");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for Chromium")->capture_default_str();
  cmd->add_option("--chromium", o->chromium, "Chromium executable (default: $XPD_CHROMIUM, /usr/bin/chromium, PATH)");
  cmd->callback([o] { run_render(*o); });
}

}  // namespace xpd::cli
