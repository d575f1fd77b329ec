// The HTTP server of `xpd view` and `xpd render` (http_server.hpp).
#include "http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <xpd/core/error.hpp>

namespace xpd::cli::http {

namespace fs = std::filesystem;

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Request parsing and the path rules

std::optional<std::string> percent_decode(std::string_view s) {
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

std::string query_value(std::string_view query, std::string_view key) {
  std::size_t pos = 0;
  while (pos <= query.size()) {
    std::size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view kv = query.substr(pos, amp - pos);
    const std::size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key)
      return percent_decode(eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1)).value_or("");
    pos = amp + 1;
  }
  return {};
}

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
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 503:
      return "Service Unavailable";
    default:
      return "Internal Server Error";
  }
}

RequestLine parse_request_line(std::string_view head) {
  std::istringstream line(std::string(head.substr(0, head.find("\r\n"))));
  RequestLine r;
  line >> r.method >> r.target >> r.version;
  return r;
}

Target parse_target(std::string_view target) {
  Target t;
  const auto refuse = [&t](int status, std::string reason) {
    t.status = status;
    t.reason = std::move(reason);
    t.segments.clear();
    return t;
  };
  if (target.empty() || target[0] != '/') return refuse(400, "bad request target");
  const std::size_t q = target.find('?');
  if (q != std::string_view::npos) t.query = std::string(target.substr(q + 1));
  const auto decoded = percent_decode(target.substr(0, q));
  if (!decoded) return refuse(400, "bad percent-encoding");
  t.path = *decoded;
  // Refuse anything that could leave the served folders before touching the file system.
  if (t.path.find('\0') != std::string::npos || t.path.find('\\') != std::string::npos)
    return refuse(403, "forbidden path");
  for (std::size_t pos = 1; pos <= t.path.size();) {
    std::size_t slash = t.path.find('/', pos);
    if (slash == std::string::npos) slash = t.path.size();
    std::string seg = t.path.substr(pos, slash - pos);
    if (seg == "..") return refuse(403, "path traversal refused");
    if (!seg.empty() && seg != ".") t.segments.push_back(std::move(seg));
    pos = slash + 1;
  }
  return t;
}

UrlTarget map_url_path(const ServedFolders& folders, const std::vector<std::string>& segments) {
  UrlTarget u;
  u.root = folders.viewer;
  std::size_t first = 0;
  if (!segments.empty() && segments[0] == "data") {
    u.root = folders.run;
    u.in_run = true;
    first = 1;
    u.run_index = segments.size() == 2 && segments[1] == "index.json";
  }
  u.file = u.root;
  for (std::size_t i = first; i < segments.size(); ++i) u.file /= segments[i];
  return u;
}

bool is_within(const fs::path& root, const fs::path& p) {
  if (root.empty() || !root.is_absolute() || !p.is_absolute()) return false;
  fs::path r = root.lexically_normal();
  if (r.has_relative_path() && !r.has_filename()) r = r.parent_path();  // "/a/b/" -> "/a/b"
  const fs::path x = p.lexically_normal();
  return std::mismatch(r.begin(), r.end(), x.begin(), x.end()).first == r.end();
}

ResolvedFile resolve_file(const UrlTarget& target) {
  ResolvedFile f;
  fs::path file = target.file;
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    if (target.in_run) {
      f.status = 403;
      f.reason = "directory listing is not served";
      return f;
    }
    file /= "index.html";
  }
  // Symbolic links inside the folders must not lead outside them either.
  f.real = fs::weakly_canonical(file, ec);
  if (ec || !is_within(target.root, f.real)) {
    f.status = 403;
    f.reason = "path outside the served folder";
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// The server

HttpServer::HttpServer(ServedFolders folders, std::function<std::string()> run_index, const std::string& host, int port,
                       bool quiet)
    : folders_(std::move(folders)), run_index_(std::move(run_index)), quiet_(quiet) {
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
      throw Error(fmt::format(
          "port {} on {} is already in use; choose another with --port N (or --port 0 for any free port)", port, host));
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

HttpServer::~HttpServer() {
  stop();
  if (thread_.joinable()) thread_.join();
  // Connection threads hold no reference to `this` beyond their request; wait for them.
  std::unique_lock lock(conn_mutex_);
  conn_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return connections_ == 0; });
  if (fd_ >= 0) ::close(fd_);
}

std::string HttpServer::url() const {
  return fmt::format("http://{}:{}/", host_ == "0.0.0.0" ? "127.0.0.1" : host_, port_);
}

void HttpServer::serve(const std::atomic<bool>* external_stop) {
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

void HttpServer::start_background() {
  thread_ = std::thread([this] { serve(); });
}

void HttpServer::handle(int fd) {
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
  const RequestLine line = parse_request_line(req);
  const bool head = line.method == "HEAD";
  if (line.method == "POST" && post_handler_) {
    const int status = handle_post(fd, req, line);
    if (!quiet_) std::fprintf(stderr, "%s %s %d\n", line.method.c_str(), line.target.c_str(), status);
    return;
  }
  if (line.method != "GET" && !head) {
    send_error(fd, 405,
               post_handler_ ? "only GET, HEAD and POST (to /api/) are served" : "only GET and HEAD are served", false);
    return;
  }
  const Target target = parse_target(line.target);
  if (target.status == 400) {  // a malformed target, like a malformed request, is not logged
    send_error(fd, target.status, target.reason, head);
    return;
  }
  int status = target.status;
  if (target.ok())
    status = route(fd, target, head);
  else
    send_error(fd, target.status, target.reason, head);
  if (!quiet_) std::fprintf(stderr, "%s %s %d\n", line.method.c_str(), line.target.c_str(), status);
}

std::optional<std::string> header_value(std::string_view head, std::string_view name) {
  // Header names are case-insensitive (RFC 9110 §5.1); the value without surrounding blanks.
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const std::size_t start = pos + 2, end = head.find("\r\n", start);
    const std::string_view field = head.substr(start, end == std::string_view::npos ? head.npos : end - start);
    if (field.empty()) break;
    const std::size_t colon = field.find(':');
    if (colon != std::string_view::npos && colon == name.size()) {
      bool same = true;
      for (std::size_t i = 0; i < colon && same; ++i)
        same = std::tolower(static_cast<unsigned char>(field[i])) == std::tolower(static_cast<unsigned char>(name[i]));
      if (same) {
        std::string_view v = field.substr(colon + 1);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        return std::string(v);
      }
    }
    pos = end;
  }
  return std::nullopt;
}

std::optional<long long> content_length(std::string_view head) {
  const auto v = header_value(head, "content-length");
  if (!v || v->empty() || v->size() > 18) return std::nullopt;
  long long n = 0;
  for (const char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

int HttpServer::handle_post(int fd, std::string& req, const RequestLine& line) {
  const Target target = parse_target(line.target);
  if (!target.ok() || target.segments.size() != 2 || target.segments[0] != "api") {
    send_error(fd, 405, "POST is served under /api/ only", false);
    return 405;
  }
  const std::size_t header_end = req.find("\r\n\r\n") + 4;
  const std::string_view head = std::string_view(req).substr(0, header_end);
  // Only JSON, and only from the server's own pages: a JSON POST from another origin needs a CORS
  // preflight (OPTIONS), which is refused, and an Origin that is not this host is refused here.
  const std::string type = header_value(head, "content-type").value_or("");
  if (type.rfind("application/json", 0) != 0) {
    send_error(fd, 415, "a POST body must be JSON (Content-Type: application/json)", false);
    return 415;
  }
  if (const auto origin = header_value(head, "origin")) {
    const std::string host = header_value(head, "host").value_or("");
    if (*origin != "http://" + host) {
      send_error(fd, 403, "POST from another origin (" + *origin + ") refused", false);
      return 403;
    }
  }
  const auto length = content_length(head);
  if (!length) {
    send_error(fd, 411, "a POST needs a Content-Length", false);
    return 411;
  }
  if (*length > kMaxPostBytes) {
    send_error(fd, 413, fmt::format("the body may hold at most {} bytes", kMaxPostBytes), false);
    return 413;
  }
  std::string body = req.substr(header_end);
  char buf[4096];
  while (static_cast<long long>(body.size()) < *length) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {  // the client went away, or timed out, before sending all its body
      send_error(fd, 400, "the body ended before its Content-Length", false);
      return 400;
    }
    body.append(buf, static_cast<std::size_t>(n));
  }
  body.resize(static_cast<std::size_t>(*length));
  PostReply reply;
  try {
    reply = post_handler_(target.path, body);
  } catch (const std::exception& e) {  // never let a handler's exception end the server
    reply = {500, std::string("{\"error\": \"internal error\"}\n"), "application/json"};
    std::fprintf(stderr, "xpd: POST %s failed: %s\n", target.path.c_str(), e.what());
  }
  send_response(fd, reply.status, reply.content_type, reply.body, false);
  return reply.status;
}

int HttpServer::route(int fd, const Target& target, bool head) {
  if (target.path == "/api/ready") {
    {
      std::lock_guard lock(ready_.mutex);
      ready_.reported = true;
      ready_.error = query_value(target.query, "ok") == "1" ? "" : query_value(target.query, "error");
      if (ready_.error.empty() && query_value(target.query, "ok") != "1")
        ready_.error = "the viewer reported an unknown error";
    }
    ready_.cv.notify_all();
    send_response(fd, 204, "text/plain", "", true);
    return 204;
  }
  const UrlTarget url = map_url_path(folders_, target.segments);
  if (url.run_index) {
    send_response(fd, 200, "application/json", run_index_(), head);
    return 200;
  }
  const ResolvedFile file = resolve_file(url);
  if (!file.ok()) {
    send_error(fd, file.status, file.reason, head);
    return file.status;
  }
  const int in = ::open(file.real.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (in < 0 || ::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (in >= 0) ::close(in);
    send_error(fd, 404, target.path, head);
    return 404;
  }
  // Run data may be rewritten by a running `xpd run` and is cached by the viewer itself:
  // no-store also spares the browser writing every frame to its disk cache.
  const char* cache = url.in_run ? "no-store" : "no-cache";
  const std::string h = fmt::format(
      "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: {}\r\n"
      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
      content_type(file.real), static_cast<long long>(st.st_size), cache);
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

}  // namespace xpd::cli::http
