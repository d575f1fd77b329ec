#pragma once
// Reader of continuous-collision query files in the format of the CCD benchmark of Wang et al. 2021
// ("A Large Scale Benchmark and an Inclusion-Based Algorithm for Continuous Collision Detection")
// and of the scalable-CCD data of Belgrod et al. 2023 (../shared/data/ccd-sample-queries,
// ../shared/data/scalable-ccd-sample).
//
// A file is CSV (optionally gzip-compressed), 8 rows per query, one point per row:
//   x_num, x_den, y_num, y_den, z_num, z_den [, truth]
// coordinate = num / den with den a power of two (the files are exact rationals); numerators may
// need up to 112 bits. Rows in the order
//   vertex–face: p⁰, a⁰, b⁰, c⁰, p¹, a¹, b¹, c¹      edge–edge: a⁰, b⁰, c⁰, d⁰, a¹, b¹, c¹, d¹
// (superscript: time 0 or 1). The optional 7th column is the ground truth (0/1, the same on all 8
// rows). Files without it take their truth from a JSON array of booleans (the scalable data's
// `mma_bool/<name>_mma_bool.json`).
#include <array>
#include <string>
#include <vector>
#include <xpd/core/types.hpp>

namespace xpd::io {

enum class CcdQueryKind { vertex_face, edge_edge };

/// One query: the 8 points in file order, and the truth (-1 when the file has none).
struct CcdQuery {
  std::array<Vec3, 8> points;
  int truth = -1;
};

/// Reads a query file. Every coordinate must be exactly representable as a double (denominator
/// a power of two, numerator with at most 53 significant bits); anything else (wrong column count,
/// a row count not a multiple of 8, a truth that differs within a query, a number that overflows
/// 127 bits, a zero or non-power-of-two denominator, an inexact value) throws IoError naming the
/// file and line.
std::vector<CcdQuery> read_ccd_queries(const std::string& path);

/// The query kind a path names: "edge-edge" as a folder or a file stem ending in "ee" is
/// edge–edge; "vertex-face" or a stem ending in "vf" is vertex–face. Throws Error when the path
/// says neither (callers then ask the user for the kind).
CcdQueryKind ccd_query_kind_from_path(const std::string& path);

/// Reads a JSON array of booleans (one per query). Throws IoError on anything else.
std::vector<int> read_ccd_truth_json(const std::string& path);

/// The truth file that belongs to a scalable-CCD query file `D/queries/NAME.csv[.gz]`:
/// `D/mma_bool/NAME_mma_bool.json`, or "" when the path does not have that layout.
std::string ccd_truth_path_for(const std::string& query_path);

}  // namespace xpd::io
