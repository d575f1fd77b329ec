#pragma once
// Readers of libigl's skeleton and matrix files, used by bone attachments: .tgf ("trivial graph
// format": joint positions and bones) and .dmat (dense matrices: poses, skinning weights,
// animations). Both are looked through gzip (read_file_bytes).
#include <Eigen/Core>
#include <string>
#include <string_view>
#include <xpd/core/skeleton.hpp>

namespace xpd::io {

/// Parses .tgf: a joint section of lines "i x y z [ignored columns...]" with i = 1, 2, ... in
/// order, a line "#", then a bone section of lines "a b [ignored columns...]" with 1-based joint
/// indices, optionally closed by "#" and followed by further sections (ignored). Indices are
/// converted to 0-based. Throws IoError naming `name` and the line on malformed input, joint
/// numbering out of sequence, or a bone referencing a missing joint.
Skeleton parse_tgf(std::string_view data, const std::string& name);
Skeleton read_tgf(const std::string& path);

/// Parses .dmat into a rows × cols matrix. ASCII variant: first line "cols rows", then cols·rows
/// numbers in column-major order. Binary variant: first line "0 0", second line "cols rows", then
/// cols·rows little-endian IEEE doubles, column-major. Throws IoError on a bad header, too few or
/// too many values, or non-numeric values.
Eigen::MatrixXd parse_dmat(std::string_view data, const std::string& name);
Eigen::MatrixXd read_dmat(const std::string& path);

}  // namespace xpd::io
