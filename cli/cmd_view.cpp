// `xpd view OUT` and `xpd render OUT`: the browser viewer of a run folder.
//
// `view` is a small HTTP/1.1 server (POSIX sockets, one thread per connection, Connection: close)
// that serves the bundled viewer (viewer/dist: index.html, viewer.js, ...) at / and the run folder
// at /data/, plus a generated /data/index.json listing the frames and surfaces. `render` serves
// the same on an ephemeral loopback port and runs headless Chromium with --screenshot on
// /?render=1&frame=N (or &frames=a:b for a contact sheet); the page reports its outcome by
// requesting /api/ready?ok=1 or /api/ready?error=MSG, and the PNG is renamed into place only
// when the page said it was ready.
//
// Where the viewer files are looked for, first match wins (a folder with index.html and
// viewer.js): $XPD_VIEWER_DIST; <dir of the xpd executable>/../viewer/dist (the build tree, where
// the xpd_viewer CMake target bundles them); <exe dir>/../share/xpd/viewer (an install);
// XPD_VIEWER_DIST_DIR and XPD_VIEWER_SOURCE_DIR/dist (compile definitions set by
// viewer/CMakeLists.txt: the configured build folder and a `npm run build` in the source tree).
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <xpd/core/error.hpp>

#include "commands.hpp"

namespace xpd::cli {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Locating the viewer and validating the run folder

bool is_viewer_dist(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "index.html", ec) && fs::is_regular_file(p / "viewer.js", ec);
}

std::vector<fs::path> viewer_dist_candidates() {
  std::vector<fs::path> c;
  if (const char* env = std::getenv("XPD_VIEWER_DIST"); env && *env) c.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    c.push_back(exe.parent_path().parent_path() / "viewer" / "dist");
    c.push_back(exe.parent_path().parent_path() / "share" / "xpd" / "viewer");
  }
#ifdef XPD_VIEWER_DIST_DIR
  c.emplace_back(XPD_VIEWER_DIST_DIR);
#endif
#ifdef XPD_VIEWER_SOURCE_DIR
  c.push_back(fs::path(XPD_VIEWER_SOURCE_DIR) / "dist");
#endif
  return c;
}

fs::path find_viewer_dist() {
  if (const char* env = std::getenv("XPD_VIEWER_DIST"); env && *env && !is_viewer_dist(env))
    throw Error(fmt::format("XPD_VIEWER_DIST='{}' does not contain the viewer files (index.html, viewer.js)", env));
  const auto candidates = viewer_dist_candidates();
  for (const auto& p : candidates)
    if (is_viewer_dist(p)) return fs::canonical(p);
  std::string looked;
  for (const auto& p : candidates) looked += "\n  " + p.string();
  throw Error("the viewer files (index.html, viewer.js) were not found; looked in:" + looked +
              "\nRun scripts/setup (which installs the viewer's npm packages) and rebuild, or set XPD_VIEWER_DIST");
}

bool is_frame_name(const std::string& name, const std::string& ext) {
  if (name.size() <= ext.size() + 1 || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return false;
  const std::string stem = name.substr(0, name.size() - ext.size() - 1);
  if (name[stem.size()] != '.') return false;
  return !stem.empty() && std::all_of(stem.begin(), stem.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

/// Frame numbers with a frames/NNNN.vtu file, sorted.
std::vector<std::pair<long, std::string>> list_frames(const fs::path& run) {
  std::vector<std::pair<long, std::string>> frames;
  std::error_code ec;
  for (fs::directory_iterator it(run / "frames", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_frame_name(name, "vtu")) frames.emplace_back(std::stol(name.substr(0, name.size() - 4)), name);
  }
  std::sort(frames.begin(), frames.end());
  return frames;
}

fs::path check_run_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error(fmt::format("run folder '{}' does not exist", dir));
  if (!fs::is_directory(dir, ec))
    throw Error(fmt::format("'{}' is not a directory (expected the OUT folder of `xpd run SCENE -o OUT`)", dir));
  const fs::path run = fs::canonical(dir);
  if (list_frames(run).empty())
    throw Error(fmt::format(
        "'{}' is not an xpd run folder: it has no frames/NNNN.vtu (write one with `xpd run SCENE -o {}`)", dir, dir));
  return run;
}

/// /data/index.json: the frames with their surface file, if any, and whether stats.json and
/// scene.json (the attachment / selection overlay) exist.
std::string run_index_json(const fs::path& run) {
  nlohmann::ordered_json j;
  j["name"] = run.filename().string();
  j["stats"] = fs::is_regular_file(run / "stats.json");
  j["scene"] = fs::is_regular_file(run / "scene.json");
  nlohmann::ordered_json frames = nlohmann::ordered_json::array();
  for (const auto& [number, name] : list_frames(run)) {
    nlohmann::ordered_json f;
    f["frame"] = number;
    f["vtu"] = "frames/" + name;
    const std::string stem = name.substr(0, name.size() - 4);
    f["surface"] = nullptr;
    for (const char* ext : {"obj", "ply"}) {
      if (fs::is_regular_file(run / "surfaces" / (stem + "." + ext))) {
        f["surface"] = "surfaces/" + stem + "." + ext;
        break;
      }
    }
    frames.push_back(f);
  }
  j["frames"] = frames;
  return j.dump();
}

// ---------------------------------------------------------------------------------------------
// HTTP

std::string content_type(const fs::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".txt" || ext == ".obj" || ext == ".log" || ext == ".md") return "text/plain; charset=utf-8";
  if (ext == ".vtu" || ext == ".xml") return "application/octet-stream";
  if (ext == ".wasm") return "application/wasm";
  return "application/octet-stream";
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string query_value(const std::string& query, const std::string& key) {
  std::size_t pos = 0;
  while (pos <= query.size()) {
    std::size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    const std::string kv = query.substr(pos, amp - pos);
    const std::size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key) return percent_decode(eq == std::string::npos ? "" : kv.substr(eq + 1)).value_or("");
    pos = amp + 1;
  }
  return {};
}

bool send_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

const char* status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Internal Server Error";
  }
}

void send_response(int fd, int status, const std::string& type, const std::string& body, bool head_only) {
  std::string h = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\n"
      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
      status, status_text(status), type, body.size());
  if (!head_only) h += body;
  send_all(fd, h.data(), h.size());
}

void send_error(int fd, int status, const std::string& message, bool head_only) {
  send_response(fd, status, "text/plain; charset=utf-8",
                fmt::format("{} {}: {}\n", status, status_text(status), message), head_only);
}

struct ReadyState {
  std::mutex mutex;
  std::condition_variable cv;
  bool reported = false;
  std::string error;  // empty when the page reported success
};

class HttpServer {
 public:
  HttpServer(fs::path dist, fs::path run, const std::string& host, int port, bool quiet)
      : dist_(std::move(dist)), run_(std::move(run)), quiet_(quiet) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port_s = std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res); rc != 0)
      throw Error(fmt::format("cannot resolve host '{}': {}", host, gai_strerror(rc)));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
    fd_ = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd_ < 0) throw Error(fmt::format("cannot create a socket: {}", std::strerror(errno)));
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, res->ai_addr, res->ai_addrlen) != 0) {
      const int e = errno;
      ::close(fd_);
      if (e == EADDRINUSE)
        throw Error(
            fmt::format("port {} on {} is already in use; choose another with --port N (or --port 0 for any free port)",
                        port, host));
      if (e == EACCES)
        throw Error(fmt::format("no permission to listen on {}:{} (ports below 1024 need root)", host, port));
      throw Error(fmt::format("cannot listen on {}:{}: {}", host, port, std::strerror(e)));
    }
    if (::listen(fd_, 64) != 0) {
      const int e = errno;
      ::close(fd_);
      throw Error(fmt::format("cannot listen on {}:{}: {}", host, port, std::strerror(e)));
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    host_ = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer() {
    stop();
    if (thread_.joinable()) thread_.join();
    // Connection threads hold no reference to `this` beyond their request; wait for them.
    std::unique_lock lock(conn_mutex_);
    conn_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return connections_ == 0; });
    if (fd_ >= 0) ::close(fd_);
  }

  int port() const { return port_; }
  std::string url() const { return fmt::format("http://{}:{}/", host_ == "0.0.0.0" ? "127.0.0.1" : host_, port_); }
  ReadyState& ready() { return ready_; }

  /// Accepts connections until `stop()` or `*external_stop` becomes true.
  void serve(const std::atomic<bool>* external_stop = nullptr) {
    while (!stop_ && !(external_stop && external_stop->load())) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, 200);
      if (r <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      {
        std::lock_guard lock(conn_mutex_);
        ++connections_;
      }
      std::thread([this, c] {
        handle(c);
        ::close(c);
        std::lock_guard lock(conn_mutex_);
        --connections_;
        conn_cv_.notify_all();
      }).detach();
    }
  }
  void start_background() {
    thread_ = std::thread([this] { serve(); });
  }
  void stop() { stop_ = true; }

 private:
  void handle(int fd) {
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<std::size_t>(n));
      if (req.size() > 32 * 1024) {
        send_error(fd, 400, "request header too large", false);
        return;
      }
    }
    const std::size_t line_end = req.find("\r\n");
    std::istringstream line(req.substr(0, line_end));
    std::string method, target, version;
    line >> method >> target >> version;
    const bool head = method == "HEAD";
    if (method != "GET" && !head) {
      send_error(fd, 405, "only GET and HEAD are served", false);
      return;
    }
    if (target.empty() || target[0] != '/') {
      send_error(fd, 400, "bad request target", head);
      return;
    }
    const std::size_t q = target.find('?');
    const std::string query = q == std::string::npos ? "" : target.substr(q + 1);
    const auto decoded = percent_decode(target.substr(0, q));
    if (!decoded) {
      send_error(fd, 400, "bad percent-encoding", head);
      return;
    }
    const std::string path = *decoded;
    const int status = route(fd, path, query, head);
    if (!quiet_) std::fprintf(stderr, "%s %s %d\n", method.c_str(), target.c_str(), status);
  }

  int route(int fd, const std::string& path, const std::string& query, bool head) {
    if (path == "/api/ready") {
      {
        std::lock_guard lock(ready_.mutex);
        ready_.reported = true;
        ready_.error = query_value(query, "ok") == "1" ? "" : query_value(query, "error");
        if (ready_.error.empty() && query_value(query, "ok") != "1")
          ready_.error = "the viewer reported an unknown error";
      }
      ready_.cv.notify_all();
      send_response(fd, 204, "text/plain", "", true);
      return 204;
    }
    // Refuse anything that could leave the served folders before touching the file system.
    if (path.find('\0') != std::string::npos || path.find('\\') != std::string::npos) {
      send_error(fd, 403, "forbidden path", head);
      return 403;
    }
    std::vector<std::string> parts;
    for (std::size_t pos = 1; pos <= path.size();) {
      std::size_t slash = path.find('/', pos);
      if (slash == std::string::npos) slash = path.size();
      const std::string seg = path.substr(pos, slash - pos);
      if (seg == "..") {
        send_error(fd, 403, "path traversal refused", head);
        return 403;
      }
      if (!seg.empty() && seg != ".") parts.push_back(seg);
      pos = slash + 1;
    }
    fs::path root = dist_;
    std::size_t first = 0;
    if (!parts.empty() && parts[0] == "data") {
      root = run_;
      first = 1;
      if (parts.size() == 2 && parts[1] == "index.json") {
        send_response(fd, 200, "application/json", run_index_json(run_), head);
        return 200;
      }
    }
    fs::path file = root;
    for (std::size_t i = first; i < parts.size(); ++i) file /= parts[i];
    std::error_code ec;
    if (fs::is_directory(file, ec)) {
      if (root == run_) {
        send_error(fd, 403, "directory listing is not served", head);
        return 403;
      }
      file /= "index.html";
    }
    // Symbolic links inside the folders must not lead outside them either.
    const fs::path real = fs::weakly_canonical(file, ec);
    const std::string real_s = real.string(), root_s = root.string();
    if (ec || real_s.compare(0, root_s.size(), root_s) != 0 ||
        (real_s.size() > root_s.size() && real_s[root_s.size()] != '/')) {
      send_error(fd, 403, "path outside the served folder", head);
      return 403;
    }
    const int in = ::open(real.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (in < 0 || ::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
      if (in >= 0) ::close(in);
      send_error(fd, 404, path, head);
      return 404;
    }
    // Run data may be rewritten by a running `xpd run` and is cached by the viewer itself:
    // no-store also spares the browser writing every frame to its disk cache.
    const char* cache = root == run_ ? "no-store" : "no-cache";
    const std::string h = fmt::format(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: {}\r\n"
        "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        content_type(real), static_cast<long long>(st.st_size), cache);
    if (send_all(fd, h.data(), h.size()) && !head) {
      std::vector<char> chunk(1 << 16);
      for (;;) {
        const ssize_t n = ::read(in, chunk.data(), chunk.size());
        if (n <= 0 || !send_all(fd, chunk.data(), static_cast<std::size_t>(n))) break;
      }
    }
    ::close(in);
    return 200;
  }

  fs::path dist_, run_;
  bool quiet_;
  int fd_ = -1;
  int port_ = 0;
  std::string host_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  ReadyState ready_;
  std::mutex conn_mutex_;
  std::condition_variable conn_cv_;
  int connections_ = 0;
};

// ---------------------------------------------------------------------------------------------
// xpd view

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
  HttpServer server(dist, run, o.host, o.port, !o.verbose);
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

// ---------------------------------------------------------------------------------------------
// xpd render

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

  HttpServer server(dist, run, "127.0.0.1", 0, true);
  server.start_background();
  std::string url = server.url() + fmt::format("?render=1&w={}&h={}", o.width, o.height);
  if (sheet)
    url += "&frames=" + o.frames;
  else
    url += "&frame=" + std::to_string(o.frame.value_or(0));
  if (!o.up.empty()) url += "&up=" + o.up;

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
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for Chromium")->capture_default_str();
  cmd->add_option("--chromium", o->chromium, "Chromium executable (default: $XPD_CHROMIUM, /usr/bin/chromium, PATH)");
  cmd->callback([o] { run_render(*o); });
}

}  // namespace xpd::cli
