#pragma once
// VTK XML UnstructuredGrid writer (ParaView-ready): binary appended raw data, tetra cells.
#include <string>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::io {

/// A named data array attached to points or cells: `values` holds #rows × components, row-major.
struct VtuField {
  std::string name;
  int components = 1;
  std::vector<double> values;
};

/// Writes nodes (#V × 3) and tets (#T × 4) with optional point/cell fields, atomically
/// (temporary file + rename). Throws IoError.
void write_vtu(const std::string& path, const Points& nodes, const Tets& tets,
               const std::vector<VtuField>& point_fields = {}, const std::vector<VtuField>& cell_fields = {});

}  // namespace xpd::io
