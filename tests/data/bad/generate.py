#!/usr/bin/env python3
"""Regenerates the hand-broken fixtures of tests/io/test_tet_bad_input.cpp from the valid
two-tet meshes in tests/data/tet/ (each fixture = one defect). Run from this folder."""
import base64, os, struct

def lines(path):
    with open(path) as f:
        return f.read().split("\n")

def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)

def variant(base, edits, cut=None):
    out = list(base)
    for line_no, text in edits.items():
        out[line_no - 1] = text
    if cut is not None:  # keep lines < cut[0], then the partial line cut[1] without newline
        return "\n".join(out[: cut[0] - 1]) + "\n" + cut[1]
    return "\n".join(out)

T = "../tet/two_tets"
msh, mesh, node, ele, vtu = (lines(T + e) for e in (".msh", ".mesh", ".node", ".ele", ".vtu"))

# ---- Gmsh ----
M = {
    "truncated.msh": variant(msh, {}, cut=(14, "1 4 2 1 1 1 2")),
    "count_mismatch.msh": variant(msh, {5: "6"}),
    "absurd_count.msh": variant(msh, {5: "2000000000"}),
    "huge_count.msh": variant(msh, {13: "99999999999"}),
    "bad_token.msh": variant(msh, {8: "3 0 1x 0"}),
    "unknown_version.msh": variant(msh, {2: "3.0 0 8"}),
    "index_out_of_range.msh": variant(msh, {15: "2 4 2 1 1 2 3 4 9"}),
    "nan_coordinate.msh": variant(msh, {10: "5 nan 1 1"}),
    "inverted_tet.msh": variant(msh, {15: "2 4 2 1 1 2 4 3 5"}),
    "zero_volume_tet.msh": variant(msh, {10: "5 1 1 0", 15: "2 4 2 1 1 1 2 5 3"}),
    "duplicate_vertex.msh": variant(msh, {10: "5 1 0 0", 15: "2 4 2 1 1 1 5 3 4"}),
    "unknown_element_type.msh": variant(msh, {15: "2 99 2 1 1 2 3 4 5"}),
    "count_mismatch_v41.msh": "\n".join([
        "$MeshFormat", "4.1 0 8", "$EndMeshFormat", "$Nodes", "1 6 1 6", "3 1 0 5",
        "1", "2", "3", "4", "5", "0 0 0", "1 0 0", "0 1 0", "0 0 1", "1 1 1", "$EndNodes", ""]),
}
pts = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)]
def msh22_binary(marker):
    b = b"$MeshFormat\n2.2 1 8\n" + struct.pack("<i", marker) + b"\n$EndMeshFormat\n$Nodes\n5\n"
    for i, p in enumerate(pts):
        b += struct.pack("<iddd", i + 1, *p)
    b += b"\n$EndNodes\n$Elements\n2\n" + struct.pack("<iii", 4, 2, 0)
    b += struct.pack("<iiiii", 1, 1, 2, 3, 4) + struct.pack("<iiiii", 2, 2, 3, 4, 5) + b"\n$EndElements\n"
    return b
good = msh22_binary(1)
write("msh/truncated_binary.msh", good[: good.index(b"$EndNodes") - 40], "wb")
write("msh/bad_endianness_marker.msh", msh22_binary(7), "wb")
for name, text in M.items():
    write("msh/" + name, text)

# ---- Medit ----
D = {
    "truncated.mesh": variant(mesh, {}, cut=(13, "2 3")),
    "count_mismatch.mesh": variant(mesh, {4: "6"}),
    "absurd_count.mesh": variant(mesh, {11: "2000000000"}),
    "bad_token.mesh": variant(mesh, {7: "0 1 zero 0"}),
    "unknown_version.mesh": variant(mesh, {1: "MeshVersionFormatted 7"}),
    "unsupported_dimension.mesh": variant(mesh, {2: "Dimension 2"}),
    "unknown_keyword.mesh": variant(mesh, {10: "Foo\n1\n1\nTetrahedra"}),
    "index_out_of_range.mesh": variant(mesh, {13: "2 3 4 6 1"}),
    "nan_coordinate.mesh": variant(mesh, {9: "nan 1 1 0"}),
    "inverted_tet.mesh": variant(mesh, {13: "2 4 3 5 1"}),
    "zero_volume_tet.mesh": variant(mesh, {9: "1 1 0 0", 13: "1 2 5 3 1"}),
    "duplicate_vertex.mesh": variant(mesh, {9: "1 0 0 0", 13: "1 5 3 4 1"}),
}
for name, text in D.items():
    write("medit/" + name, text)

# ---- TetGen: each case is a .node/.ele pair; the file without a defect is the valid one ----
G = {
    "truncated": ({}, None, {}, (3, "2 2 3")),
    "count_mismatch": ({2: "6 3 0 0"}, None, {}, None),
    "count_mismatch_ele": ({}, None, {1: "1 4 0"}, None),
    "count_mismatch_long": ({2: "6 3 0 0", 3: "1 0.0 0.0 0.0", 4: "2 1.0 0.0 0.0", 5: "3 0.0 1.0 0.0",
                             6: "4 0.0 0.0 1.0", 7: "5 1.0 1.0 1.0"}, None, {}, None),
    "absurd_count": ({2: "2000000000 3 0 0"}, None, {}, None),
    "bad_token": ({5: "3 0 1 O"}, None, {}, None),
    "unknown_version": ({2: "5 2 0 0"}, None, {}, None),
    "unsupported_nodes_per_tet": ({}, None, {1: "2 6 0"}, None),
    "bad_first_index": ({3: "2 0 0 0"}, None, {}, None),
    "index_out_of_range": ({}, None, {3: "2 2 3 4 6"}, None),
    "nan_coordinate": ({7: "5 nan 1 1"}, None, {}, None),
    "inverted_tet": ({}, None, {3: "2 2 4 3 5"}, None),
    "zero_volume_tet": ({7: "5 1 1 0"}, None, {3: "2 1 2 5 3"}, None),
    "duplicate_vertex": ({7: "5 1 0 0"}, None, {3: "2 1 5 3 4"}, None),
}
for name, (ne, nc, ee, ec) in G.items():
    write("tetgen/%s.node" % name, variant(node, ne, nc))
    write("tetgen/%s.ele" % name, variant(ele, ee, ec))

# ---- VTU ----
V = {
    "truncated.vtu": variant(vtu, {}, cut=(10, "          0 0")),
    "count_mismatch.vtu": variant(vtu, {4: '    <Piece NumberOfPoints="6" NumberOfCells="2">'}),
    "absurd_count.vtu": variant(vtu, {4: '    <Piece NumberOfPoints="5" NumberOfCells="2000000000">'}),
    "huge_count.vtu": variant(vtu, {4: '    <Piece NumberOfPoints="99999999999" NumberOfCells="2">'}),
    "bad_token.vtu": variant(vtu, {9: "          0 1 O"}),
    "unknown_version.vtu": variant(vtu, {2: '<VTKFile type="UnstructuredGrid" version="9.9" byte_order="LittleEndian">'}),
    "not_unstructured.vtu": variant(vtu, {2: '<VTKFile type="PolyData" version="0.1" byte_order="LittleEndian">'}),
    "index_out_of_range.vtu": variant(vtu, {17: "          1 2 3 7"}),
    "nan_coordinate.vtu": variant(vtu, {11: "          nan 1 1"}),
    "inverted_tet.vtu": variant(vtu, {17: "          1 3 2 4"}),
    "zero_volume_tet.vtu": variant(vtu, {11: "          1 1 0", 17: "          0 1 4 2"}),
    "duplicate_vertex.vtu": variant(vtu, {11: "          1 0 0", 17: "          0 4 2 3"}),
    "unsupported_cell_type.vtu": variant(vtu, {23: "          10 12"}),
    "missing_offsets.vtu": variant(vtu, {19: '        <DataArray type="Int32" Name="offs" format="ascii">'}),
}
# Inline base64 points whose byte-count header disagrees with NumberOfPoints.
raw = b"".join(struct.pack("<3d", *p) for p in pts)
b64 = (base64.b64encode(struct.pack("<I", 100)) + base64.b64encode(raw)).decode()
V["binary_count_mismatch.vtu"] = variant(vtu, {6: '        <DataArray type="Float64" NumberOfComponents="3" format="binary">',
                                                7: "          " + b64, 8: "", 9: "", 10: "", 11: ""})
# Zlib header announcing one 120-byte block whose 4 compressed bytes are not a valid stream.
hdr = struct.pack("<IIII", 1, 120, 120, 4)
V["zlib_bad_block.vtu"] = variant(vtu, {
    2: '<VTKFile type="UnstructuredGrid" version="0.1" byte_order="LittleEndian" compressor="vtkZLibDataCompressor">',
    6: '        <DataArray type="Float64" NumberOfComponents="3" format="binary">',
    7: "          " + (base64.b64encode(hdr) + base64.b64encode(b"\x78\x9c\x03\x00")).decode(), 8: "", 9: "", 10: "", 11: ""})
for name, text in V.items():
    write("vtu/" + name, text)
