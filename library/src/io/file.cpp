#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>

namespace xpd::io {

bool is_gzip(const std::string& data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

std::string gunzip(const std::string& data, const std::string& name, std::uint64_t max_bytes) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header. Concatenated members are handled by resetting below.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw IoError(name, 0, "cannot initialise zlib");
  std::string out;
  out.reserve(std::min<std::uint64_t>(data.size() * 4, max_bytes));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  char buf[1 << 16];
  int rc = Z_OK;
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      throw IoError(name, 0, "corrupt gzip data (" + msg + ")");
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&zs);
      throw IoError(name, 0, "decompressed size exceeds the limit of " + std::to_string(max_bytes) + " bytes");
    }
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw IoError(name, 0, "truncated gzip data");
    }
  }
  inflateEnd(&zs);
  return out;
}

std::string read_file_bytes(const std::string& path, std::uint64_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw IoError(path, 0, "no such file");
  if (std::filesystem::is_directory(path, ec)) throw IoError(path, 0, "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, 0, "cannot open for reading");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(path, 0, "cannot determine file size");
  if (size > max_bytes) throw IoError(path, 0, "file of " + std::to_string(size) + " bytes exceeds the limit");
  std::string data(size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::uint64_t>(in.gcount()) != size) throw IoError(path, 0, "read error");
  if (is_gzip(data)) return gunzip(data, path, max_bytes);
  return data;
}

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::random_device rd;
  const fs::path tmp = target.parent_path() / (target.filename().string() + ".tmp" + std::to_string(rd()));
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw IoError(path, 0, "cannot open for writing");
      write(out);
      out.flush();
      if (!out) throw IoError(path, 0, "write failed (disk full?)");
    }
    std::error_code ec;
    fs::rename(tmp, target, ec);
    if (ec) throw IoError(path, 0, "cannot rename temporary file: " + ec.message());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

std::string format_extension(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(dot + 1);
}

}  // namespace xpd::io
