#!/usr/bin/env python3
"""Writes a synthetic `xpd run` output folder for the viewer tests (standard library only).

OUT/frames/NNNN.vtu: a box of NX*NY*NZ cells, 6 tets per cell, bending and twisting over the
frames, in exactly the layout `xpd run` writes (VTK XML UnstructuredGrid 1.0, LittleEndian,
header_type UInt64, one raw AppendedData block; Points Float64, connectivity/offsets Int64,
types UInt8, PointData "displacement" (3) and "active" (1), CellData "volume_ratio" (1)).
OUT/surfaces/NNNN.obj: an embedded octahedron carried with the box (with --surface).
OUT/stats.json: {"frames": [...], metadata}.
OUT/scene.json: the overlay `xpd run` writes (docs/output-format.md): a fixed attachment on the
x = -1 face (which the deformation leaves in place), a rigid one on the x = +1 face, the named
selections "clamp", "tip" and "top", and, with --obstacles, a sphere, a box and a plane (without,
"obstacles" is empty as in `xpd run` today). --no-scene leaves scene.json out (an older run).

usage: make_run.py OUT [--cells N | --cells NX,NY,NZ] [--frames F] [--surface] [--obstacles | --no-scene]
"""
import argparse
import json
import math
import os
import struct


def box(nx, ny, nz, size=(2.0, 1.0, 1.0)):
    pts = []
    for k in range(nz + 1):
        for j in range(ny + 1):
            for i in range(nx + 1):
                pts.append((size[0] * i / nx - size[0] / 2, size[1] * j / ny, size[2] * k / nz - size[2] / 2))
    def v(i, j, k):
        return i + (nx + 1) * (j + (ny + 1) * k)
    tets = []
    for k in range(nz):
        for j in range(ny):
            for i in range(nx):
                c = [v(i, j, k), v(i + 1, j, k), v(i + 1, j + 1, k), v(i, j + 1, k),
                     v(i, j, k + 1), v(i + 1, j, k + 1), v(i + 1, j + 1, k + 1), v(i, j + 1, k + 1)]
                # Kuhn subdivision of the cube along the 0-6 diagonal: 6 tets, conforming.
                for a, b in ((1, 2), (2, 3), (3, 7), (7, 4), (4, 5), (5, 1)):
                    tets.append((c[0], c[a], c[b], c[6]))
    return pts, tets


def deform(p, t):
    # Bend around z and twist around x, growing with t in [0, 1].
    x, y, z = p
    s = (x + 1.0) / 2.0
    bend = 0.6 * t * s * s
    twist = 0.8 * t * s
    cy, cz = y - 0.5, z
    y2 = cy * math.cos(twist) - cz * math.sin(twist) + 0.5
    z2 = cy * math.sin(twist) + cz * math.cos(twist)
    return (x, y2 - bend, z2)


def appended_array(blob, offsets, data):
    offsets.append(len(blob))
    blob += struct.pack('<Q', len(data)) + data
    return blob


def write_vtu(path, pts, rest, tets, active, ratio):
    blob = bytearray()
    offs = []
    blob = appended_array(blob, offs, struct.pack('<%dd' % (3 * len(pts)), *[c for p in pts for c in p]))
    blob = appended_array(blob, offs, struct.pack('<%dq' % (4 * len(tets)), *[i for t in tets for i in t]))
    blob = appended_array(blob, offs, struct.pack('<%dq' % len(tets), *range(4, 4 * len(tets) + 1, 4)))
    blob = appended_array(blob, offs, bytes([10]) * len(tets))
    disp = [c - r for p, q in zip(pts, rest) for c, r in zip(p, q)]
    blob = appended_array(blob, offs, struct.pack('<%dd' % len(disp), *disp))
    blob = appended_array(blob, offs, struct.pack('<%dd' % len(active), *active))
    blob = appended_array(blob, offs, struct.pack('<%dd' % len(ratio), *ratio))
    xml = (
        '<?xml version="1.0"?>\n'
        '<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian" header_type="UInt64">\n'
        '  <UnstructuredGrid>\n'
        f'    <Piece NumberOfPoints="{len(pts)}" NumberOfCells="{len(tets)}">\n'
        '      <Points>\n'
        f'        <DataArray type="Float64" Name="Points" NumberOfComponents="3" format="appended" offset="{offs[0]}"/>\n'
        '      </Points>\n'
        '      <Cells>\n'
        f'        <DataArray type="Int64" Name="connectivity" format="appended" offset="{offs[1]}"/>\n'
        f'        <DataArray type="Int64" Name="offsets" format="appended" offset="{offs[2]}"/>\n'
        f'        <DataArray type="UInt8" Name="types" format="appended" offset="{offs[3]}"/>\n'
        '      </Cells>\n'
        '      <PointData>\n'
        f'        <DataArray type="Float64" Name="displacement" NumberOfComponents="3" format="appended" offset="{offs[4]}"/>\n'
        f'        <DataArray type="Float64" Name="active" NumberOfComponents="1" format="appended" offset="{offs[5]}"/>\n'
        '      </PointData>\n'
        '      <CellData>\n'
        f'        <DataArray type="Float64" Name="volume_ratio" NumberOfComponents="1" format="appended" offset="{offs[6]}"/>\n'
        '      </CellData>\n'
        '    </Piece>\n'
        '  </UnstructuredGrid>\n'
        '  <AppendedData encoding="raw">\n   _'
    ).encode()
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(xml + bytes(blob) + b'\n  </AppendedData>\n</VTKFile>\n')
    os.replace(tmp, path)


def write_obj(path, center, r, t):
    verts = [(r, 0, 0), (-r, 0, 0), (0, r, 0), (0, -r, 0), (0, 0, r), (0, 0, -r)]
    faces = [(1, 3, 5), (3, 2, 5), (2, 4, 5), (4, 1, 5), (3, 1, 6), (2, 3, 6), (4, 2, 6), (1, 4, 6)]
    with open(path, 'w') as f:
        f.write('# embedded surface\n')
        for v in verts:
            x, y, z = deform((center[0] + v[0], center[1] + v[1], center[2] + v[2]), t)
            f.write(f'v {x:.6f} {y:.6f} {z:.6f}\n')
        for a, b, c in faces:
            f.write(f'f {a} {b} {c}\n')


def write_scene(path, nx, ny, nz, obstacles):
    def v(i, j, k):
        return i + (nx + 1) * (j + (ny + 1) * k)
    def face(pred):
        return sorted(v(i, j, k) for k in range(nz + 1) for j in range(ny + 1) for i in range(nx + 1) if pred(i, j, k))
    clamp = face(lambda i, j, k: i == 0)
    tip = face(lambda i, j, k: i == nx)
    top = face(lambda i, j, k: j == ny)
    scene = {
        'attachments': [{'type': 'fixed', 'selection': 'clamp', 'nodes': clamp},
                        {'type': 'rigid', 'selection': 'tip', 'nodes': tip}],
        'selections': {'clamp': clamp, 'tip': tip, 'top': top},
        'obstacles': [],
    }
    if obstacles:
        scene['obstacles'] = [{'type': 'sphere', 'center': [1.4, -0.4, 0.0], 'radius': 0.25},
                              {'type': 'box', 'min': [-1.3, -0.5, -0.3], 'max': [-1.1, 1.2, 0.3]},
                              {'type': 'plane', 'point': [0.0, -0.9, 0.0], 'normal': [0.0, 1.0, 0.0]}]
    tmp = path + '.tmp'
    with open(tmp, 'w') as fh:
        json.dump(scene, fh)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--cells', default='8,4,4')
    ap.add_argument('--frames', type=int, default=10)
    ap.add_argument('--surface', action='store_true')
    ap.add_argument('--obstacles', action='store_true')
    ap.add_argument('--no-scene', action='store_true')
    a = ap.parse_args()
    dims = [int(s) for s in a.cells.split(',')]
    nx, ny, nz = dims if len(dims) == 3 else (dims[0] * 2, dims[0], dims[0])
    rest, tets = box(nx, ny, nz)
    os.makedirs(os.path.join(a.out, 'frames'), exist_ok=True)
    if a.surface:
        os.makedirs(os.path.join(a.out, 'surfaces'), exist_ok=True)
    frames = []
    for f in range(a.frames):
        t = f / max(a.frames - 1, 1)
        pts = [deform(p, t) for p in rest]
        active = [1.0 if (p[0] > 1.0 - 2.0 * t and p[1] < 0.05) else 0.0 for p in rest]
        ratio = [1.0 + 0.01 * t] * len(tets)
        write_vtu(os.path.join(a.out, 'frames', f'{f:04d}.vtu'), pts, rest, tets, active, ratio)
        if a.surface:
            write_obj(os.path.join(a.out, 'surfaces', f'{f:04d}.obj'), (0.3, 0.5, 0.0), 0.3, t)
        st = {'frame': f, 'energy': 10.0 * t * t + 0.5, 'residual': 10.0 ** (-3 - 3 * t),
              'iterations': 10 + (f % 5), 'wall_ms': 20.0 + f,
              'timings_ms': {'local': 8.0 + 0.1 * f, 'rhs': 2.0, 'solve': 9.0 + 0.05 * f, 'other': 1.0}}
        if f > 0:
            st['active_proxies'] = sum(1 for x in active if x > 0.5)
            st['max_penetration'] = 0.001 * f
            # An interactive run (solver.interactive): frames per second and the residual left.
            st['relative_residual'] = 0.001 * f
            st['fps'] = 1000.0 / st['wall_ms']
        frames.append(st)
    with open(os.path.join(a.out, 'stats.json'), 'w') as fh:
        json.dump({'frames': frames, 'scene': 'synthetic-box', 'nodes': len(rest), 'tets': len(tets),
                   'interactive': {'iterations_per_frame': 1, 'fps': 40.0, 'mean_relative_residual': 0.01,
                                   'max_relative_residual': 0.02}}, fh)
    if not a.no_scene:
        write_scene(os.path.join(a.out, 'scene.json'), nx, ny, nz, a.obstacles)
    print(f'{a.out}: {len(rest)} nodes, {len(tets)} tets, {a.frames} frames')


if __name__ == '__main__':
    main()
