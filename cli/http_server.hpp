#pragma once
// The small HTTP/1.1 server behind `xpd view` and `xpd render`: POSIX sockets, one thread per
// connection, Connection: close, GET and HEAD (plus POST to /api/NAME where a handler is set, as
// `xpd view --live` does for surgical events). It serves two folders, the bundled viewer at /
// and a run folder at /data/, plus a generated /data/index.json and /api/ready?ok=1|error=MSG, the
// endpoint through which the page tells `xpd render` that it has drawn (or why it could not).
//
// The request-path rules are functions of their own, usable without a socket:
//   parse_target   request target -> percent-decoded path, query and segments, or 400/403: a
//                  malformed escape, a NUL byte, a backslash, a `..` segment (also as %2e%2e) or a
//                  target that is not an absolute path is refused before the file system is touched;
//   map_url_path   segments -> the served folder and the file under it (lexical);
//   resolve_file   the file-system side: directories (index.html under the viewer, 403 under
//                  /data/) and symbolic links that lead outside the served folder (403).
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace xpd::cli::http {

/// Decodes %XX escapes (hex digits of either case) and '+' as a space. nullopt when a '%' is not
/// followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s);

/// The percent-decoded value of `key` in a query string ("ok=1&error=no%20WebGL"); empty when the
/// key is absent or its value is malformed.
std::string query_value(std::string_view query, std::string_view key);

/// Content-Type of a served file, by extension (application/octet-stream when unknown).
std::string content_type(const std::filesystem::path& p);

/// Reason phrase of a status the server sends ("Not Found").
const char* status_text(int status);

/// The first line of a request, split at whitespace: "GET /index.html HTTP/1.1".
struct RequestLine {
  std::string method, target, version;
};
/// Parses the request line of `head` (the text up to the first CRLF).
RequestLine parse_request_line(std::string_view head);

/// A request target checked for serving.
struct Target {
  int status = 200;    ///< 200, or the status it is refused with (400, 403)
  std::string reason;  ///< why it was refused
  std::string path;    ///< percent-decoded path ("/data/frames/0001.vtu")
  std::string query;   ///< the raw query, after '?'
  /// The path's segments, without empty and "." ones; none is "..", none holds '/', '\\' or NUL.
  std::vector<std::string> segments;
  bool ok() const { return status == 200; }
};
/// Splits a request target into path and query, decodes the path and refuses what could leave a
/// served folder: 400 for a target that does not start with '/' or holds a malformed escape,
/// 403 for a NUL byte, a backslash or a `..` segment (after decoding, so %2e%2e and %2f count).
Target parse_target(std::string_view target);

/// The folders a server serves, both absolute and canonical: the viewer at /, the run at /data/.
struct ServedFolders {
  std::filesystem::path viewer;
  std::filesystem::path run;
};

/// Where checked segments lead, lexically (no file-system access).
struct UrlTarget {
  bool run_index = false;      ///< /data/index.json, generated rather than read
  bool in_run = false;         ///< under /data/ (root is the run folder)
  std::filesystem::path root;  ///< folders.viewer or folders.run
  std::filesystem::path file;  ///< root joined with the segments (after "data" for /data/)
};
UrlTarget map_url_path(const ServedFolders& folders, const std::vector<std::string>& segments);

/// True when `p` is `root` or lies below it, compared component by component after lexical
/// normalization (so "/srv/a/../b" is not below "/srv/a"); false unless both are absolute.
bool is_within(const std::filesystem::path& root, const std::filesystem::path& p);

/// The file to open for a mapped target, or the status it is refused with.
struct ResolvedFile {
  int status = 200;            ///< 200, or 403 (directory under /data/, outside the root)
  std::string reason;          ///< why it was refused
  std::filesystem::path real;  ///< the file with symbolic links resolved
  bool ok() const { return status == 200; }
};
/// A directory under the viewer means its index.html, under /data/ it is refused (403); the file
/// with its symbolic links resolved must stay inside the root (403). Whether it exists and is a
/// regular file is checked when it is opened (404).
ResolvedFile resolve_file(const UrlTarget& target);

/// What the page reported on /api/ready; `error` is empty when it reported success.
struct ReadyState {
  std::mutex mutex;
  std::condition_variable cv;
  bool reported = false;
  std::string error;
};

/// The answer of a POST handler.
struct PostReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};
/// Handles a POST to /api/NAME: (request path, body) -> reply. Called on the connection's thread,
/// so it may block (e.g. until a simulation has applied what was posted) and must be thread-safe.
using PostHandler = std::function<PostReply(const std::string& path, const std::string& body)>;

/// The value of header `name` (any case) in a request head, without surrounding blanks; nullopt
/// when absent.
std::optional<std::string> header_value(std::string_view head, std::string_view name);

/// The Content-Length of a request head (the text up to the blank line), or nullopt when it has
/// none or it is not a plain decimal number.
std::optional<long long> content_length(std::string_view head);

class HttpServer {
 public:
  /// Largest POST body accepted (413 above it).
  static constexpr long long kMaxPostBytes = 1 << 20;

  /// Listens on host:port (port 0: any free port); `run_index` makes the body of /data/index.json.
  /// `quiet` off logs every request to stderr. Throws xpd::Error when it cannot listen.
  HttpServer(ServedFolders folders, std::function<std::string()> run_index, const std::string& host, int port,
             bool quiet);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  int port() const { return port_; }
  /// http://HOST:PORT/ (127.0.0.1 for a server on 0.0.0.0).
  std::string url() const;
  ReadyState& ready() { return ready_; }

  /// Accepts connections until `stop()` or `*external_stop` becomes true.
  void serve(const std::atomic<bool>* external_stop = nullptr);
  /// serve() on a thread of its own; stop() ends it and the destructor joins it.
  void start_background();
  void stop() { stop_ = true; }
  /// Accepts POST requests to /api/NAME and hands them to `handler` (without one, POST is refused
  /// with 405). Set before serve().
  void set_post_handler(PostHandler handler) { post_handler_ = std::move(handler); }

 private:
  void handle(int fd);
  int route(int fd, const Target& target, bool head);
  int handle_post(int fd, std::string& req, const RequestLine& line);

  ServedFolders folders_;
  std::function<std::string()> run_index_;
  PostHandler post_handler_;
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

}  // namespace xpd::cli::http
