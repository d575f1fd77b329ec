#pragma once
// Whole-file reading with transparent gzip, and crash-safe writing.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

namespace xpd::io {

/// Largest decompressed input xpd reads (bytes). Guards against gzip bombs and absurd files;
/// a 1M-tet ASCII mesh is ~60 MB, so 4 GiB leaves ample room.
inline constexpr std::uint64_t kMaxInputBytes = std::uint64_t{4} << 30;

/// Reads the whole file into memory. Files starting with the gzip magic (1f 8b) are decompressed,
/// whatever their name. Throws IoError naming the path when the file is missing, unreadable,
/// a corrupt/truncated gzip stream, or larger than `max_bytes` once decompressed.
std::string read_file_bytes(const std::string& path, std::uint64_t max_bytes = kMaxInputBytes);

/// True when `data` starts with the gzip magic bytes.
bool is_gzip(const std::string& data);

/// Decompresses a gzip buffer in memory (`name` is used in error messages).
std::string gunzip(const std::string& data, const std::string& name, std::uint64_t max_bytes = kMaxInputBytes);

/// Writes a file atomically: `write` fills a stream for a temporary file in the same directory,
/// which is flushed, closed and renamed over `path` only if `write` returned without throwing
/// and the stream is good. A failure leaves any previous `path` untouched and removes the
/// temporary. Throws IoError on failure.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

/// Lower-cased extension of `path` without ".gz" and without the dot ("mesh" for "a.mesh.gz").
std::string format_extension(const std::string& path);

}  // namespace xpd::io
