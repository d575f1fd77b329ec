// The request-path rules of the `xpd view` / `xpd render` HTTP server (cli/http_server.hpp),
// without a socket: percent-decoding, the refusal of anything that could leave a served folder
// (`..`, also percent-encoded, NUL bytes, backslashes, targets that are not absolute paths,
// symbolic links leading outside), and which file a normal path maps to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "http_server.hpp"
#include "test_util.hpp"

namespace xpd::cli::http {
namespace {

namespace fs = std::filesystem;
using Segments = std::vector<std::string>;

// ---------------------------------------------------------------------------------------------
// percent_decode, query_value

TEST(HttpPercentDecode, DecodesEscapesOfEitherCaseAndPlus) {
  EXPECT_EQ(percent_decode("/frames/0001.vtu"), "/frames/0001.vtu");
  EXPECT_EQ(percent_decode("a%20b"), "a b");
  EXPECT_EQ(percent_decode("%2e%2E%2f%2F"), "..//");
  EXPECT_EQ(percent_decode("%41%7a"), "Az");
  EXPECT_EQ(percent_decode("a+b"), "a b");
  EXPECT_EQ(percent_decode("%2B"), "+");
  EXPECT_EQ(percent_decode(""), "");
  EXPECT_EQ(percent_decode("%00"), std::string(1, '\0'));
  EXPECT_EQ(percent_decode("%ff"), std::string(1, '\xff'));
}

TEST(HttpPercentDecode, DecodesOnlyOnce) {
  // %25 is '%': "%252e" is the three characters "%2e", not a dot.
  EXPECT_EQ(percent_decode("%252e%252e"), "%2e%2e");
}

TEST(HttpPercentDecode, RejectsMalformedEscapes) {
  for (const char* bad : {"%", "%2", "a%", "a%4", "%g0", "%0g", "%%", "%%41", "%-1", "% 1", "/x/%2", "%2e%2"})
    EXPECT_FALSE(percent_decode(bad).has_value()) << bad;
}

TEST(HttpQueryValue, FindsDecodedValues) {
  EXPECT_EQ(query_value("ok=1", "ok"), "1");
  EXPECT_EQ(query_value("render=1&error=no%20WebGL+context", "error"), "no WebGL context");
  EXPECT_EQ(query_value("a=1&b=2", "b"), "2");
  EXPECT_EQ(query_value("a=1&b=2", "c"), "");
  EXPECT_EQ(query_value("flag&x=1", "flag"), "");
  EXPECT_EQ(query_value("error=%zz", "error"), "");  // malformed: empty, not garbage
  EXPECT_EQ(query_value("", "ok"), "");
  EXPECT_EQ(query_value("okay=1", "ok"), "");  // whole keys only
}

// ---------------------------------------------------------------------------------------------
// parse_request_line, parse_target

TEST(HttpRequestLine, SplitsTheFirstLine) {
  const RequestLine r = parse_request_line("GET /data/index.json HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/data/index.json");
  EXPECT_EQ(r.version, "HTTP/1.1");
  EXPECT_EQ(parse_request_line("HEAD / HTTP/1.0\r\n\r\n").method, "HEAD");
  EXPECT_EQ(parse_request_line("\r\n\r\n").target, "");
}

TEST(HttpTarget, SplitsNormalPathsIntoSegments) {
  const Target t = parse_target("/data/frames/0003.vtu?x=1");
  ASSERT_TRUE(t.ok()) << t.reason;
  EXPECT_EQ(t.path, "/data/frames/0003.vtu");
  EXPECT_EQ(t.query, "x=1");
  EXPECT_EQ(t.segments, (Segments{"data", "frames", "0003.vtu"}));

  EXPECT_EQ(parse_target("/").segments, Segments{});
  EXPECT_EQ(parse_target("/?render=1&frame=3").query, "render=1&frame=3");
  // Empty and "." segments are dropped; a '?' ends the path even after an escape.
  EXPECT_EQ(parse_target("//a/./b//c/.").segments, (Segments{"a", "b", "c"}));
  EXPECT_EQ(parse_target("/a%20b/c%3Fd?e").segments, (Segments{"a b", "c?d"}));
  // Names that merely contain dots are ordinary file names.
  EXPECT_EQ(parse_target("/...").segments, Segments{"..."});
  EXPECT_EQ(parse_target("/a..b/..c/d..").segments, (Segments{"a..b", "..c", "d.."}));
  // Decoded once: %252e%252e is the file name "%2e%2e", not "..".
  EXPECT_EQ(parse_target("/%252e%252e/x").segments, (Segments{"%2e%2e", "x"}));
}

TEST(HttpTarget, RefusesTraversal) {
  for (const char* hostile : {"/..", "/../", "/../etc/passwd", "/data/../../etc/passwd", "/data/..", "/a/b/../../..",
                              "/./../x", "//../x", "/%2e%2e/etc/passwd", "/%2E%2E/x", "/.%2e/x", "/%2e./x",
                              "/data%2f..%2f..%2fetc%2fpasswd", "/a%2F%2E%2E%2Fb", "/data/frames/..?x=1"}) {
    const Target t = parse_target(hostile);
    EXPECT_EQ(t.status, 403) << hostile;
    EXPECT_TRUE(t.segments.empty()) << hostile;
  }
  EXPECT_EQ(parse_target("/../x").reason, "path traversal refused");
}

TEST(HttpTarget, RefusesNulAndBackslash) {
  for (const char* hostile :
       {"/index.html%00.png", "/%00", "/data/frames%00/x", "/..%5c..%5cetc", "/a%5Cb", "/a\\b", "/\\..\\x", "/%5c"}) {
    const Target t = parse_target(hostile);
    EXPECT_EQ(t.status, 403) << hostile;
    EXPECT_EQ(t.reason, "forbidden path") << hostile;
    EXPECT_TRUE(t.segments.empty()) << hostile;
  }
  // A raw NUL in the target (string_view keeps it).
  EXPECT_EQ(parse_target(std::string_view("/a\0b", 4)).status, 403);
}

TEST(HttpTarget, RefusesTargetsThatAreNotAbsolutePaths) {
  for (const char* bad :
       {"", "index.html", "../etc/passwd", "%2f..%2fetc", "*", "http://localhost/../x", "file:///etc/passwd", "?x=1"}) {
    const Target t = parse_target(bad);
    EXPECT_EQ(t.status, 400) << bad;
    EXPECT_EQ(t.reason, "bad request target") << bad;
  }
}

TEST(HttpTarget, RefusesMalformedEscapes) {
  for (const char* bad : {"/%", "/a%2", "/%zz", "/frames/%g1.vtu", "/%2e%2"}) {
    const Target t = parse_target(bad);
    EXPECT_EQ(t.status, 400) << bad;
    EXPECT_EQ(t.reason, "bad percent-encoding") << bad;
  }
  // The query is not decoded here: a bad escape in it does not refuse the path.
  EXPECT_TRUE(parse_target("/api/ready?error=%zz").ok());
}

// ---------------------------------------------------------------------------------------------
// map_url_path, is_within

TEST(HttpMapUrlPath, MapsViewerAndRunPaths) {
  const ServedFolders folders{"/srv/viewer", "/srv/runs/demo"};
  const UrlTarget nested = map_url_path(folders, parse_target("/data/surfaces/0012.obj").segments);
  EXPECT_TRUE(nested.in_run);
  EXPECT_FALSE(nested.run_index);
  EXPECT_EQ(nested.root, fs::path("/srv/runs/demo"));
  EXPECT_EQ(nested.file, fs::path("/srv/runs/demo/surfaces/0012.obj"));

  const UrlTarget js = map_url_path(folders, parse_target("/assets/viewer.js").segments);
  EXPECT_FALSE(js.in_run);
  EXPECT_EQ(js.root, fs::path("/srv/viewer"));
  EXPECT_EQ(js.file, fs::path("/srv/viewer/assets/viewer.js"));

  const UrlTarget root = map_url_path(folders, parse_target("/").segments);
  EXPECT_EQ(root.file, fs::path("/srv/viewer"));

  const UrlTarget index = map_url_path(folders, parse_target("/data/index.json").segments);
  EXPECT_TRUE(index.run_index);
  EXPECT_FALSE(map_url_path(folders, parse_target("/data/frames/index.json").segments).run_index);
  EXPECT_FALSE(map_url_path(folders, parse_target("/index.json").segments).run_index);

  // Only a first segment "data" selects the run folder.
  EXPECT_FALSE(map_url_path(folders, parse_target("/x/data/a").segments).in_run);
  EXPECT_EQ(map_url_path(folders, parse_target("/x/data/a").segments).file, fs::path("/srv/viewer/x/data/a"));
  EXPECT_TRUE(map_url_path(folders, parse_target("//data/a").segments).in_run);

  // An encoded slash splits like a real one, and every mapped file stays below its root.
  const UrlTarget encoded = map_url_path(folders, parse_target("/data%2fframes%2F0001.vtu").segments);
  EXPECT_EQ(encoded.file, fs::path("/srv/runs/demo/frames/0001.vtu"));
  for (const char* t : {"/a/b/c", "/data/x/y", "//%2f/x", "/data", "/%2Fetc%2Fpasswd"}) {
    const UrlTarget u = map_url_path(folders, parse_target(t).segments);
    EXPECT_TRUE(is_within(u.root, u.file)) << t << " -> " << u.file;
  }
  // "/%2Fetc/passwd" is a path below the viewer folder, never the absolute /etc/passwd.
  EXPECT_EQ(map_url_path(folders, parse_target("/%2Fetc/passwd").segments).file, fs::path("/srv/viewer/etc/passwd"));
}

TEST(HttpIsWithin, ComparesWholeComponents) {
  EXPECT_TRUE(is_within("/srv/run", "/srv/run"));
  EXPECT_TRUE(is_within("/srv/run", "/srv/run/frames/0001.vtu"));
  EXPECT_TRUE(is_within("/srv/run/", "/srv/run/a"));
  EXPECT_TRUE(is_within("/", "/etc/passwd"));
  EXPECT_FALSE(is_within("/srv/run", "/srv/run2/a"));  // a shared prefix is not a parent
  EXPECT_FALSE(is_within("/srv/run", "/srv/ru"));
  EXPECT_FALSE(is_within("/srv/run", "/srv"));
  EXPECT_FALSE(is_within("/srv/run", "/etc/passwd"));
  EXPECT_FALSE(is_within("/srv/run", "/srv/run/../run2/a"));  // normalized before comparing
  EXPECT_FALSE(is_within("/srv/run", "srv/run/a"));           // relative: never within
  EXPECT_FALSE(is_within("", "/srv/run"));
}

// ---------------------------------------------------------------------------------------------
// resolve_file: the file-system side, on a scratch tree
//
//   scratch/viewer/{index.html, viewer.js, sub/index.html, escape -> ../secret.txt,
//                   escape_dir -> ../outside}
//   scratch/run/{frames/0001.vtu, frames/link.vtu -> 0001.vtu}
//   scratch/run2/x.vtu, scratch/secret.txt, scratch/outside/index.html

class HttpResolveFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::canonical(test::scratch_dir("http_resolve"));
    for (const char* d : {"viewer/sub", "run/frames", "run2", "outside"}) fs::create_directories(dir_ / d);
    for (const char* f : {"viewer/index.html", "viewer/viewer.js", "viewer/sub/index.html", "run/frames/0001.vtu",
                          "run2/x.vtu", "secret.txt", "outside/index.html"})
      std::ofstream(dir_ / f) << f;
    fs::create_symlink("../secret.txt", dir_ / "viewer/escape");
    fs::create_symlink("../outside", dir_ / "viewer/escape_dir");
    fs::create_symlink("0001.vtu", dir_ / "run/frames/link.vtu");
    fs::create_symlink("../../run2/x.vtu", dir_ / "run/frames/0002.vtu");
    folders_ = {dir_ / "viewer", dir_ / "run"};
  }
  void TearDown() override { fs::remove_all(dir_); }

  ResolvedFile resolve(const char* target) const {
    const Target t = parse_target(target);
    EXPECT_TRUE(t.ok()) << target << ": " << t.reason;
    return resolve_file(map_url_path(folders_, t.segments));
  }

  fs::path dir_;
  ServedFolders folders_;
};

TEST_F(HttpResolveFile, NestedPathsMapToTheirFile) {
  const ResolvedFile frame = resolve("/data/frames/0001.vtu");
  ASSERT_TRUE(frame.ok()) << frame.reason;
  EXPECT_EQ(frame.real, dir_ / "run/frames/0001.vtu");
  EXPECT_EQ(resolve("/viewer.js").real, dir_ / "viewer/viewer.js");
  EXPECT_EQ(resolve("/data/frames/%30001.vtu").real, dir_ / "run/frames/0001.vtu");
  // A symbolic link that stays inside the folder is followed.
  EXPECT_EQ(resolve("/data/frames/link.vtu").real, dir_ / "run/frames/0001.vtu");
  // A missing file resolves (inside the root); opening it gives 404.
  const ResolvedFile missing = resolve("/data/frames/9999.vtu");
  EXPECT_TRUE(missing.ok());
  EXPECT_EQ(missing.real, dir_ / "run/frames/9999.vtu");
}

TEST_F(HttpResolveFile, ViewerDirectoriesServeTheirIndex) {
  EXPECT_EQ(resolve("/").real, dir_ / "viewer/index.html");
  EXPECT_EQ(resolve("/sub/").real, dir_ / "viewer/sub/index.html");
  EXPECT_EQ(resolve("/sub").real, dir_ / "viewer/sub/index.html");
}

TEST_F(HttpResolveFile, RunDirectoriesAreNotListed) {
  for (const char* t : {"/data", "/data/", "/data/frames", "/data/frames/"}) {
    const ResolvedFile f = resolve(t);
    EXPECT_EQ(f.status, 403) << t;
    EXPECT_EQ(f.reason, "directory listing is not served") << t;
  }
}

TEST_F(HttpResolveFile, SymbolicLinksLeadingOutsideAreRefused) {
  for (const char* t : {"/escape", "/escape_dir", "/escape_dir/", "/escape_dir/index.html", "/data/frames/0002.vtu"}) {
    const ResolvedFile f = resolve(t);
    EXPECT_EQ(f.status, 403) << t << " -> " << f.real;
    EXPECT_EQ(f.reason, "path outside the served folder") << t;
  }
}

TEST(HttpContentLength, ReadsTheHeaderOfAnyCaseAndRefusesOddValues) {
  EXPECT_EQ(content_length("POST /api/event HTTP/1.1\r\nHost: x\r\nContent-Length: 42\r\n\r\n"), 42);
  EXPECT_EQ(content_length("POST / HTTP/1.1\r\ncontent-length:7\r\n\r\n"), 7);
  EXPECT_EQ(content_length("POST / HTTP/1.1\r\nCONTENT-LENGTH: \t0 \r\n\r\n"), 0);
  EXPECT_FALSE(content_length("POST / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(content_length("POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n"));
  EXPECT_FALSE(content_length("POST / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n"));
  EXPECT_FALSE(content_length("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"));
  EXPECT_EQ(header_value("POST / HTTP/1.1\r\ncontent-TYPE:  application/json \r\n\r\n", "Content-Type"),
            "application/json");
  EXPECT_EQ(header_value("POST / HTTP/1.1\r\nOrigin: http://a:1\r\n\r\n", "origin"), "http://a:1");
  EXPECT_FALSE(header_value("POST / HTTP/1.1\r\nOrigins: x\r\n\r\n", "origin"));
  // A body line that looks like the header is not read.
  EXPECT_FALSE(content_length("POST / HTTP/1.1\r\nHost: x\r\n\r\nContent-Length: 5"));
}

}  // namespace
}  // namespace xpd::cli::http
