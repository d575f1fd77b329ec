"""Learn facial expressions as muscle actuation of a flesh volume behind the ICT face (Wang 2025, §6.5).

The ICT Face Model (../shared/data/ict-facekit: a neutral face and 57 expression blendshapes of one
topology) gives the skin. Behind its face region (vertices 0–9408) the example cuts a flesh volume
of thickness --thickness out of a BCC lattice of cell --cell (xpd.bcc_lattice); the lattice nodes of
the deepest layer are attached (the skull), every tet is shape-targeted (the thesis's muscles), and
the skin is embedded in the tets by barycentric weights (mesh.embedded_surface), so the simulated
skin is W x. Then, all through xpd.torch.QuasistaticLayer and its adjoint gradients:

1. Fit: for every expression, the shape targets a_e (6 numbers per tet) that make the simulated skin
   match the expression (L-BFGS on the skin's squared error plus a small ||a||² regularization);
   prints the RMS vertex error in mm per expression.
2. Decoder: the expressions are split into a training and a held-out set (fixed seed). A linear
   decoder a(z) = mean + z B (code z of --code numbers) starts as the PCA of the training set's
   fitted actuations and is then trained end to end through the simulator (B, mean and the training
   codes); for a held-out expression only its code is fitted, through the decoder and the simulator
   (from the mean code, or with --code-init fit from the least-squares code of its own fitted actuation).
3. Baseline: PCA of the training expressions' vertex positions with the same number of components
   (the thesis's data-only baseline); a held-out expression is projected onto it.
   Prints the held-out RMS vertex error (mm) of both.
4. With --out: a run folder of the held-out expressions as reproduced by the decoder (frames 1..K,
   written by the library's run writer; render them with `xpd render OUT --frames 1:K --sheet S.png`)
   and results.json with every figure.

Small form (the default; under two minutes on 2 cores): a 1.2 cm lattice and 12 expressions, 9
for training and 3 held out, code 4. Full form: --full (every expression, 47 / 10, code 16, finer
lattice; tens of minutes).

--protocol performance follows the thesis's set-up instead (§6.5: a performance whose mandible
motion is known, frames held out): the frames of a performance through mixtures of the blendshapes
(random key expressions, frames interpolated between them), the deep nodes behind the chin on a
rigid mandible that follows the jaw blendshapes' weights (the small rigid motion fitted to the
chin's displacement per jaw blendshape), per-frame fits, the decoder trained on the first frames
and tested on the frames of the last key expressions with the mandible's pose given; baselines:
PCA of vertex positions (the thesis's) and PCA given the jaw weights as well (a linear map of
them, then PCA of the rest). Small form: 8 key expressions of 12 blendshapes, 24 frames (18 / 6),
code 4, about three minutes; --full: 24 of 57, 72 frames (54 / 18), code 16, about 45 minutes.

--cut-mouth cuts the lattice along the mouth's slit (the virtual node algorithm, Molino, Bao and
Fedkiw 2004): at the neutral rest the lips touch, so upper and lower lip lie in the same lattice
tets and move together; cut, each tet the slit crosses becomes two copies, one per lip, that share
only the nodes where the slit ends (the mouth corners), and each skin vertex binds to its own lip's
copy (the scene's mesh.embedded_tets). The lips are told apart by the mouth's boundary loop of the
face region: its corners split it into an upper and a lower chain, and each skin vertex, then each
lattice node (by its nearest skin vertex), takes the side of the chain nearest to it along the skin.

--volume shell replaces the lattice by the library's prism shell (mesh generator "shell", --layers
layers through --thickness) grown behind the skin's own triangles: the skin vertices are the first
nodes, so the mouth's slit stays open and the lips move apart. The neutral ICT face folds at both
mouth corners, where a shell has no positive tets; the example smooths the skin there (58 vertices,
at most 0.34 mm) and says how many it moved. The shell is slower and fits worse than the lattice
(docs/python.md gives the measured figures).

    PYTHONPATH=build/python python3 python/examples/face_expressions.py [--full] [--protocol performance] [--out DIR]
"""
import argparse
import json
import pathlib
import re
import sys
import tarfile
import tempfile
import time

import numpy as np
import torch

import xpd
import xpd.torch

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parents[1] / ".." / "shared" / "data" / "ict-facekit"
FACE_VERTICES = 9409  # vertices 0..9408 are the face region (ICT-FaceKit README)
MOUTH_REACH = 0.05  # --cut-mouth: skin within 5 cm of the mouth's slit (along the skin) takes a side
MOUTH_CORNER = 0.003  # ... except within 3 mm of a mouth corner, where the slit ends
CM = 0.01  # the model is in centimetres; xpd scenes are in metres


# ---------------------------------------------------------------------------------------------
# Data


def _obj_vertices(text):
    rows = [line[2:] for line in text.splitlines() if line.startswith("v ")]
    return np.array(" ".join(rows).split(), dtype=np.float64).reshape(-1, 3)


def _obj_faces(text):
    faces = []
    for line in text.splitlines():
        if line.startswith("f "):
            faces.append([int(tok.split("/")[0]) - 1 for tok in line.split()[1:]])
    return faces


def expression_names(data_dir):
    """The 57 expression blendshapes of the archive (every OBJ but the neutral mesh), sorted."""
    archive = pathlib.Path(data_dir) / "FaceXModel_neutral_and_expressions.tar.xz"
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: the ICT face model is missing (../shared/data, SOURCES.md)")
    with tarfile.open(archive) as tar:
        names = [pathlib.PurePosixPath(m.name).stem for m in tar.getmembers() if m.name.endswith(".obj")]
    return sorted(n for n in names if n != "generic_neutral_mesh")


def load_ict(data_dir, names):
    """Neutral positions [V, 3] (m), its polygons, and {name: positions [V, 3]} of the expressions."""
    archive = pathlib.Path(data_dir) / "FaceXModel_neutral_and_expressions.tar.xz"
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: the ICT face model is missing (../shared/data, SOURCES.md)")
    expressions = {}
    with tarfile.open(archive) as tar:
        neutral_text = tar.extractfile("FaceXModel/generic_neutral_mesh.obj").read().decode()
        for name in names:
            expressions[name] = _obj_vertices(tar.extractfile(f"FaceXModel/{name}.obj").read().decode()) * CM
    return _obj_vertices(neutral_text) * CM, _obj_faces(neutral_text), expressions


def face_region(neutral, polygons):
    """The face region's skin: the vertices 0..9408 used by its polygons (renumbered), its triangles
    (quads split) and the original index of every skin vertex."""
    tris = []
    for p in polygons:
        if max(p) < FACE_VERTICES:
            tris.extend([p[0], p[k], p[k + 1]] for k in range(1, len(p) - 1))
    tris = np.array(tris, dtype=np.int64)
    used = np.unique(tris)
    renumber = np.full(FACE_VERTICES, -1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    return neutral[used], renumber[tris], used


def vertex_normals(x, tris):
    n = np.zeros_like(x)
    fn = np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]])
    for k in range(3):
        np.add.at(n, tris[:, k], fn)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    return n


# ---------------------------------------------------------------------------------------------
# The flesh volume


def nearest(points, sites, chunk=2048):
    """Index of the nearest site of every point (brute force in chunks; a few thousand sites)."""
    out = np.empty(len(points), dtype=np.int64)
    s2 = (sites ** 2).sum(1)
    for i in range(0, len(points), chunk):
        p = points[i:i + chunk]
        out[i:i + chunk] = np.argmin(s2[None, :] - 2.0 * p @ sites.T, axis=1)
    return out


def largest_component(tets, num_nodes):
    """Mask of the tets in the largest node-connected component."""
    label = np.arange(num_nodes)
    while True:
        m = label[tets].min(axis=1)
        new = label.copy()
        for k in range(4):
            np.minimum.at(new, tets[:, k], m)
        new = new[new]  # pointer jumping
        if np.array_equal(new, label):
            break
        label = new
    comp = label[tets[:, 0]]
    values, counts = np.unique(comp, return_counts=True)
    return comp == values[np.argmax(counts)]


def build_flesh(skin, tris, thickness, cell):
    """BCC tets within `thickness` behind the skin (depth along the nearest skin vertex's normal),
    the nodes of the deepest layer to attach. Returns nodes [V, 3], tets [T, 4], attached nodes."""
    normals = vertex_normals(skin, tris)
    lo, hi = skin.min(0) - thickness, skin.max(0) + thickness
    nodes, tets = xpd.bcc_lattice(lo, hi, cell)
    q = nearest(nodes, skin)
    rel = skin[q] - nodes
    depth = (rel * normals[q]).sum(1)  # > 0 behind the skin
    lateral = np.linalg.norm(rel - depth[:, None] * normals[q], axis=1)
    centre_depth = depth[tets].mean(1)
    keep = (centre_depth > -0.5 * cell) & (centre_depth < thickness) & (lateral[tets].max(1) < cell)
    tets = tets[keep]
    tets = tets[largest_component(tets, len(nodes))]
    used = np.unique(tets)
    renumber = np.full(len(nodes), -1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    deep = np.flatnonzero(depth[used] > thickness - 0.75 * cell)
    return nodes[used], renumber[tets], deep


def boundary_loops(tris):
    """The boundary loops of a triangle mesh: lists of vertex indices in order along each loop."""
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    key = np.sort(edges, axis=1)
    _, inverse, count = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    boundary = edges[count[inverse.reshape(-1)] == 1]
    nxt = {int(a): int(b) for a, b in boundary}  # each boundary vertex of a manifold mesh starts one edge
    loops, seen = [], set()
    for start in nxt:
        if start in seen:
            continue
        loop, v = [], start
        while v not in seen:
            seen.add(v)
            loop.append(v)
            v = nxt[v]
        loops.append(loop)
    return loops


def graph_distance(x, edges, sources):
    """Shortest path length along `edges` [E, 2] between points x from the nearest of `sources` to
    every point, and which source it is (Dijkstra; np.inf and -1 where no path leads)."""
    import heapq
    edges = np.unique(np.sort(edges, axis=1), axis=0)
    length = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
    neighbours = [[] for _ in range(len(x))]
    for (a, b), w in zip(edges.tolist(), length.tolist()):
        neighbours[a].append((b, w))
        neighbours[b].append((a, w))
    dist = np.full(len(x), np.inf)
    origin = np.full(len(x), -1, dtype=np.int64)
    heap = [(0.0, int(s), int(s)) for s in sources]
    while heap:
        d, v, s = heapq.heappop(heap)
        if d >= dist[v]:
            continue
        dist[v], origin[v] = d, s
        for u, w in neighbours[v]:
            if d + w < dist[u]:
                heapq.heappush(heap, (d + w, u, s))
    return dist, origin


UPPER, LOWER = 1, 2


def mouth_sides(skin, tris, reach, corner):
    """The side of the mouth's slit of every skin vertex: UPPER (upper lip), LOWER or 0. The mouth is
    the boundary loop of the face region lowest on the face (the eyes' loops are higher, the outer
    border is the longest loop); its leftmost and rightmost vertices are its corners, which split
    it into an upper and a lower chain. A vertex takes the side of the loop vertex nearest to it
    along the surface when that is within `reach` [m] and farther than `corner` [m] along the loop
    from both corners (so the slit ends at the corners instead of running on into the cheeks)."""
    loops = boundary_loops(tris)
    if len(loops) < 2:
        raise RuntimeError(f"the skin has {len(loops)} boundary loop(s); the mouth needs its own")
    inner = sorted(loops, key=len)[:-1]  # the longest loop is the outer border
    mouth = np.array(min(inner, key=lambda loop: skin[loop, 1].mean()))
    left, right = int(np.argmin(skin[mouth, 0])), int(np.argmax(skin[mouth, 0]))
    a, b = sorted((left, right))
    chain1, chain2 = mouth[a:b + 1], np.concatenate([mouth[b:], mouth[:a + 1]])
    upper, lower = (chain1, chain2) if skin[chain1, 1].mean() > skin[chain2, 1].mean() else (chain2, chain1)
    loop_side = {}
    for chain, side in ((upper, UPPER), (lower, LOWER)):
        step = np.linalg.norm(np.diff(skin[chain], axis=0), axis=1)
        along = np.concatenate([[0.0], np.cumsum(step)])  # arc length from one corner
        away = np.minimum(along, along[-1] - along)  # ... to the nearer corner
        for v, d in zip(chain.tolist(), away.tolist()):
            loop_side[v] = side if d > corner else 0
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    dist, origin = graph_distance(skin, edges, list(loop_side))
    sides = np.array([loop_side[int(o)] for o in origin], dtype=np.int64)
    sides[dist > reach] = 0
    return sides


def cut_slit(nodes, tets, node_side, skin_tet, skin_side):
    """Cuts a tet mesh along a slit by duplicating nodes (the virtual node algorithm, Molino, Bao and
    Fedkiw 2004), given the slit's side of every node (UPPER, LOWER, 0 = off the slit). A tet with
    nodes on both sides is cut: it becomes two copies, the upper one keeping its upper and off-slit
    nodes and using a duplicate ("ghost") of each lower node, shared by every upper copy, the lower
    one the mirror image; the off-slit nodes (where the slit ends) stay shared. The two sides then
    meet only at the slit's ends. Each copy has the whole tet's volume (the cut tets count twice).
    A skin vertex of a cut tet binds to the copy of its own side (`skin_tet`: the containing tet of
    every skin vertex in the uncut mesh). Returns nodes, tets (copies: the upper one in place, the
    lower ones appended), the bound tet of every skin vertex, and the number of cut tets."""
    side = node_side[tets]
    cut = np.flatnonzero((side == UPPER).any(1) & (side == LOWER).any(1))
    sub, sub_side = tets[cut], side[cut]
    lower_nodes = np.unique(sub[sub_side == LOWER])  # get an upper ghost
    upper_nodes = np.unique(sub[sub_side == UPPER])  # get a lower ghost
    V, T = len(nodes), len(tets)
    ghost_up = np.full(V, -1, dtype=np.int64)
    ghost_up[lower_nodes] = V + np.arange(len(lower_nodes))
    ghost_low = np.full(V, -1, dtype=np.int64)
    ghost_low[upper_nodes] = V + len(lower_nodes) + np.arange(len(upper_nodes))
    up, low = sub.copy(), sub.copy()
    up[sub_side == LOWER] = ghost_up[sub[sub_side == LOWER]]
    low[sub_side == UPPER] = ghost_low[sub[sub_side == UPPER]]
    out = tets.copy()
    out[cut] = up
    lower_copy = np.full(T, -1, dtype=np.int64)
    lower_copy[cut] = T + np.arange(len(cut))
    bound = skin_tet.copy()
    moved = (skin_side == LOWER) & (lower_copy[skin_tet] >= 0)
    bound[moved] = lower_copy[skin_tet[moved]]
    return (np.concatenate([nodes, nodes[lower_nodes], nodes[upper_nodes]]), np.concatenate([out, low]), bound,
            len(cut))


SHELL_OPTIONS = {}


def smooth_fold(x, tris, triangle, rings=2, sweeps=5):
    """Smooths x (in place) around a fold of the surface: the vertices within `rings` edge rings of
    `triangle` move to their neighbours' mean, `sweeps` times. The neutral ICT face folds at both
    mouth corners, where no prism shell has positive tets; this moves 58 vertices by at most 0.34 mm
    (0.016 mm RMS over the face). Returns the number of vertices moved."""
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    edges = np.concatenate([edges, edges[:, ::-1]])
    ring = set(tris[triangle].tolist())
    for _ in range(rings):
        ring |= set(edges[np.isin(edges[:, 0], list(ring)), 1].tolist())
    ring = np.array(sorted(ring))
    inner = edges[np.isin(edges[:, 0], ring)]
    for _ in range(sweeps):
        total = np.zeros((len(x), 3))
        count = np.zeros(len(x))
        np.add.at(total, inner[:, 0], x[inner[:, 1]])
        np.add.at(count, inner[:, 0], 1.0)
        x[ring] = total[ring] / count[ring, None]
    return len(ring)


class Volume:
    """The flesh volume behind the skin, in one of two forms:

    - "lattice": BCC tets cut out behind the skin (build_flesh), the skin embedded in them by
      barycentric weights. The tets do not follow the skin, so where two parts of the skin are closer
      than a cell (the lips of a closed mouth) both lie in the same tets and move together.
    - "shell": the scene's prism-shell generator (mesh/shell.hpp) grows `layers` layers of prisms
      behind the skin's own triangles, 3 tets each; the skin vertices are the nodes of layer 0 (node
      v is skin vertex v) and the deep side is layer `layers` (node layers·S + v under skin vertex v).
      The skin's own slits (the mouth) stay open, as in the thesis's conforming face mesh.

    nodes [V, 3] (rest), deep: the deep-side node indices, deep_skin: the skin vertex under or nearest
    each of them, `mesh`: the scene's mesh entry once `write` has put its files in a folder."""

    def __init__(self, kind, skin, tris, thickness, cell, layers=1, cut_mouth=False):
        self.kind, self.skin, self.tris, self.thickness, self.cell, self.layers = kind, skin, tris, thickness, cell, layers
        self.skin_tets, self.cut_tets = None, 0
        if cut_mouth and kind != "lattice":
            raise ValueError("--cut-mouth: only with --volume lattice (the shell's mouth is open already)")
        if kind == "lattice":
            self.nodes, self.tets, self.deep = build_flesh(skin, tris, thickness, cell)
            if cut_mouth:
                # The lips' skin sides, the lattice nodes' sides by their nearest skin vertex; the
                # ghosts are left off the attachments (they belong to the other side's material).
                skin_side = mouth_sides(skin, tris, reach=MOUTH_REACH, corner=MOUTH_CORNER)
                node_side = skin_side[nearest(self.nodes, skin)]
                skin_tet, _, _ = xpd.embed_points(self.nodes, self.tets, skin)
                self.nodes, self.tets, self.skin_tets, self.cut_tets = cut_slit(
                    self.nodes, self.tets, node_side, skin_tet.astype(np.int64), skin_side)
            self.deep_skin = nearest(self.nodes[self.deep], skin)
            # A fixed attachment is a stiff spring; 1e3 mu h keeps it stiff next to the flesh without
            # the PD residual floor that much stiffer springs bring (docs/validation.md §1).
            self.length = float(np.cbrt((self.nodes.max(0) - self.nodes.min(0)).prod() / len(self.tets)))
        elif kind == "shell":
            S = len(skin)
            self.skin = skin = skin.copy()
            self.smoothed = 0  # vertices moved by smooth_fold (with repeats)
            for _ in range(20):
                try:
                    self.nodes, self.tets = self._build_shell()
                    break
                except xpd.Error as e:  # a fold of the skin: smooth it and try again
                    fold = re.search(r"shell: the tets under triangle (\d+)", str(e))
                    if not fold:
                        raise
                    self.smoothed += smooth_fold(skin, tris, int(fold.group(1)))
            else:
                raise RuntimeError("shell: the skin still folds after 20 rounds of smoothing")
            if len(self.nodes) != (layers + 1) * S:
                raise RuntimeError(f"shell: {len(self.nodes)} nodes, expected {(layers + 1) * S}")
            self.deep = layers * S + np.arange(S)
            self.deep_skin = np.arange(S)
            edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
            self.length = float(np.linalg.norm(skin[edges[:, 0]] - skin[edges[:, 1]], axis=1).mean())
        else:
            raise ValueError(f"--volume: lattice or shell, got {kind!r}")
        if kind == "lattice":
            self.smoothed = 0

    def _build_shell(self):
        """The library's shell behind self.skin: rest nodes and tets."""
        S = len(self.skin)
        with tempfile.TemporaryDirectory(prefix="xpd-shell-") as folder:
            self.write(folder)
            (pathlib.Path(folder) / "deep.txt").write_text(" ".join(map(str, self.layers * S + np.arange(S))))
            scene = pathlib.Path(folder) / "shell.json"
            scene.write_text(json.dumps({
                "mesh": self.mesh, "materials": [{"mu": 1.0}],
                "selections": {"deep": {"type": "indices", "file": "deep.txt"}},
                "attachments": [{"selection": "deep", "type": "fixed", "stiffness": 1.0}],
                "solver": {"type": "quasistatic", "frames": 1}}))
            sim = xpd.Simulation(str(scene))
            return np.array(sim.rest_positions), np.array(sim.tets)

    def write(self, folder):
        folder = pathlib.Path(folder)
        write_obj(folder / "skin.obj", self.skin, self.tris)
        if self.kind == "lattice":
            write_medit(folder / "flesh.mesh", self.nodes, self.tets)
            self.mesh = {"file": "flesh.mesh", "embedded_surface": "skin.obj"}
            if self.skin_tets is not None:  # cut: the copies overlap, so the skin's tets are given
                (folder / "skin_tets.txt").write_text("\n".join(map(str, self.skin_tets)) + "\n")
                self.mesh.update({"embedded_tets": "skin_tets.txt", "coincident_nodes": True})
        else:
            self.mesh = {"generator": "shell", "surface": "skin.obj", "thickness": self.thickness,
                         "layers": self.layers, **SHELL_OPTIONS}

    def describe(self):
        if self.kind == "lattice":
            form = f"cell {self.cell * 100:.2f} cm"
            if self.skin_tets is not None:
                form += f", cut along the mouth's slit ({self.cut_tets} tets doubled)"
        else:
            form = f"prism shell, {self.layers} layer(s), depth up to {self.thickness * 100:.2f} cm"
            if self.smoothed:
                form += f", {self.smoothed} skin vertices smoothed at folds"
        return f"flesh {len(self.nodes)} nodes / {len(self.tets)} tets ({form})"


def write_medit(path, nodes, tets):
    with open(path, "w") as f:
        f.write(f"MeshVersionFormatted 2\nDimension 3\nVertices\n{len(nodes)}\n")
        f.writelines(f"{p[0]:.12g} {p[1]:.12g} {p[2]:.12g} 0\n" for p in nodes)
        f.write(f"Tetrahedra\n{len(tets)}\n")
        f.writelines(f"{t[0] + 1} {t[1] + 1} {t[2] + 1} {t[3] + 1} 0\n" for t in tets)
        f.write("End\n")


def write_obj(path, x, tris):
    with open(path, "w") as f:
        f.writelines(f"v {p[0]:.12g} {p[1]:.12g} {p[2]:.12g}\n" for p in x)
        f.writelines(f"f {t[0] + 1} {t[1] + 1} {t[2] + 1}\n" for t in tris)


def write_scene(folder, volume, mu, frames, mandible=None, name="face.json"):
    """The scene of the flesh volume: every tet actuated, the deep layer attached. With `mandible`
    = (mask over `volume.deep`, keys) the masked deep nodes form a second, rigid attachment (the jaw)
    whose keyframes are (frame, R, p, t): x ↦ R(x − p) + p + t; the others stay fixed (the skull)."""
    folder = pathlib.Path(folder)
    volume.write(folder)
    deep = volume.deep
    skull = deep if mandible is None else deep[~mandible[0]]
    (folder / "deep.txt").write_text(" ".join(map(str, skull)) + "\n")
    w = 1e3 * mu * volume.length
    scene = {
        "description": f"ICT face region over a flesh volume ({volume.kind}); deep layer attached; every tet actuated",
        "mesh": volume.mesh,
        "selections": {"skull": {"type": "indices", "file": "deep.txt"}},
        "materials": [{"mu": mu, "density": 1000}],
        "actuation": [{"region": "all"}],
        "attachments": [{"selection": "skull", "type": "fixed", "stiffness": w}],
        # The replays of learned frames (Simulation) solve as far as the layer does.
        "solver": {"type": "quasistatic", "frames": max(frames, 1), "accelerator": "anderson",
                   "tolerance": 1e-8, "max_iterations": 5000},
        "outputs": {"surface": "obj"},
    }
    if mandible is not None:
        mask, keys = mandible
        (folder / "jaw.txt").write_text(" ".join(map(str, deep[mask])) + "\n")
        scene["selections"]["jaw"] = {"type": "indices", "file": "jaw.txt"}
        keyframes = [{"frame": frame, "translation": [float(c) for c in t],
                      "rotation": {"quaternion": quaternion(R).tolist()}, "pivot": [float(c) for c in pivot]}
                     for frame, R, pivot, t in keys]
        scene["attachments"].append({"selection": "jaw", "type": "rigid", "stiffness": w, "keyframes": keyframes})
    path = folder / name
    path.write_text(json.dumps(scene, indent=2))
    return path


# ---------------------------------------------------------------------------------------------
# Learning


class Skin:
    """Simulated skin W x of an embedded surface, differentiable in x."""

    def __init__(self, model, volume):
        self.count = None
        if volume.kind == "shell":  # the skin vertices are the nodes 0..S-1
            self.count = len(volume.skin)
            return
        nodes, weights = model.embedding
        self.nodes = torch.from_numpy(nodes.astype(np.int64))
        self.weights = torch.from_numpy(weights)

    def __call__(self, x):  # x [B, n, 3] -> [B, S, 3]
        if self.count is not None:
            return x[:, :self.count]
        return (x[:, self.nodes] * self.weights[None, :, :, None]).sum(2)


def rms_mm(a, b):
    """RMS vertex distance in mm of [.., S, 3] arrays in metres, per leading index."""
    return ((a - b) ** 2).sum(-1).mean(-1).sqrt() / 1e-3


def lbfgs(params, loss_fn, steps, log=None, layer=None):
    """L-BFGS with a strong-Wolfe line search, about `steps` evaluations of loss_fn in all. A trial
    step whose equilibrium the layer refuses (a frame unconverged, or unstable: its Hessian not
    positive definite, so it has no gradient) counts as a loss 1e3 times the first one with a zero
    gradient, so the line search falls back towards the last accepted point; the refusal at the
    starting point is raised. When L-BFGS stops early (a line search that had to back off leaves a
    step too short for it), it restarts from where it is, with a fresh history, while the restarts
    still lower the loss. With `layer` given, a refused step also returns the layer's warm start to
    the equilibria of the last accepted evaluation: warm-started from the refused (unstable) ones,
    the next trial would be drawn back to the same branch; and a refused starting point is solved
    once more from the rest shape (the replay's start; the warm start left by an earlier phase
    may lead to an unstable equilibrium), raised only when that is refused too."""
    count, first, refused, accepted, cold = [0], [None], [0], [None], [False]

    def closure():
        opt.zero_grad()
        try:
            loss = loss_fn()
            loss.backward()
        except xpd.SolverError as e:
            if first[0] is None:
                if layer is None or cold[0]:
                    raise
                cold[0] = True
                if log:
                    log(f"    the starting point refused ({e}); solved again from the rest shape")
                rest = np.asarray(layer.model.rest_positions)
                layer.warm_start = np.ascontiguousarray(np.repeat(rest[None], layer.warm_start.shape[0], axis=0))
                return closure()
            refused[0] += 1
            if log and refused[0] == 1:
                log(f"    a trial step refused ({e}); the line search backs off")
            if layer is not None and accepted[0] is not None:
                layer.warm_start = accepted[0]
            for p in params:
                p.grad = torch.zeros_like(p)
            count[0] += 1
            return torch.tensor(1e3 * first[0], dtype=torch.float64)
        for p in params:  # L-BFGS flattens with view(); a matmul's gradient may be transposed
            p.grad = p.grad.contiguous()
        count[0] += 1
        if layer is not None:
            accepted[0] = layer.warm_start
        if first[0] is None:
            first[0] = loss.item()
        if log and (count[0] == 1 or count[0] % 10 == 0):
            log(f"    evaluation {count[0]:3d}: loss {loss.item():.4e}")
        return loss

    previous = None
    while count[0] < steps:
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=steps - count[0], history_size=20, tolerance_grad=1e-12,
                                tolerance_change=1e-14, line_search_fn="strong_wolfe")
        start = float(opt.step(closure))  # the loss where this round starts
        if previous is not None and start >= previous * (1.0 - 1e-6):
            break  # the last round did not lower the loss: done
        previous = start
    if log and refused[0]:
        log(f"    {refused[0]} of {count[0]} evaluations refused")
    return count[0]


def fit_expressions(layer, skin, targets, scale, reg, steps, log, t=None):
    """Per-expression actuation [E, u, 6] fitted to targets [E, S, 3] (attachment targets t [E, m, 3]
    when given, else the scene's)."""
    E, u = targets.shape[0], layer.model.num_actuated_tets
    a = torch.zeros(E, u, 6, dtype=torch.float64, requires_grad=True)

    def loss_fn():
        s = skin(layer(a) if t is None else layer(a, t))
        return ((s - targets) ** 2).sum(-1).mean(-1).sum() / scale ** 2 + reg * (a ** 2).mean(-1).mean(-1).sum()

    evaluations = lbfgs([a], loss_fn, steps, log, layer)
    return a.detach(), evaluations


class Decoder(torch.nn.Module):
    """a(z) = mean + z B: a code of `code` numbers to the actuation of every tet (B: code x 6u).
    Initialized by PCA of fitted actuations (the codes then are their projections), then trained
    through the simulator."""

    def __init__(self, actuations, code):
        super().__init__()
        A = actuations.reshape(len(actuations), -1)
        mean = A.mean(0)
        _, _, vt = torch.linalg.svd(A - mean, full_matrices=False)
        self.shape = actuations.shape[1:]
        self.mean = torch.nn.Parameter(mean.clone(memory_format=torch.contiguous_format))
        self.basis = torch.nn.Parameter(vt[:code].clone(memory_format=torch.contiguous_format))

    def encode(self, actuations):
        return (actuations.reshape(len(actuations), -1) - self.mean) @ self.basis.T

    def forward(self, z):
        return (self.mean + z @ self.basis).reshape(-1, *self.shape)


def pca_heldout_rms(train, test, k, train_known=None, test_known=None):
    """RMS (mm) of the held-out shapes projected on the mean + k principal components of train. Given
    known inputs too (the jaw weights [N, J]): x ≈ mean + known G + z P, G by least squares on the
    training set and P the k principal components of what G leaves."""
    X = train.reshape(len(train), -1)
    Y = test.reshape(len(test), -1)
    mean = X.mean(0)
    X, Y = X - mean, Y - mean
    if train_known is not None:
        kc = train_known.mean(0)
        G = np.linalg.lstsq(train_known - kc, X, rcond=None)[0]
        X, Y = X - (train_known - kc) @ G, Y - (test_known - kc) @ G
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    P = vt[:k]
    d = ((Y @ P.T) @ P - Y).reshape(test.shape)
    return np.sqrt((d ** 2).sum(-1).mean(-1)) / 1e-3


# ---------------------------------------------------------------------------------------------
# The performance protocol (the set-up of the thesis's §6.5)

JAW = ("jawOpen", "jawLeft", "jawRight", "jawForward")


def performance_weights(pool, rng, keyposes, per_segment):
    """Blendshape weights [F, len(pool)] of a performance: from the neutral face through `keyposes`
    random key expressions (two or three facial expressions at weights 0.3–1, jawOpen in six of ten
    keyposes at 0.2–1, a sideways or forward jaw in one of five at 0.2–0.8), `per_segment` frames
    linearly interpolated from one key expression to the next."""
    face = [k for k, n in enumerate(pool) if n not in JAW]
    side = [pool.index(n) for n in JAW[1:] if n in pool]
    keys = np.zeros((keyposes + 1, len(pool)))
    for k in range(1, keyposes + 1):
        chosen = rng.choice(face, size=int(rng.integers(2, 4)), replace=False)
        keys[k, chosen] = rng.uniform(0.3, 1.0, size=len(chosen))
        if "jawOpen" in pool and rng.random() < 0.6:
            keys[k, pool.index("jawOpen")] = rng.uniform(0.2, 1.0)
        if side and rng.random() < 0.2:
            keys[k, rng.choice(side)] = rng.uniform(0.2, 0.8)
    steps = np.arange(1, per_segment + 1) / per_segment
    return np.concatenate([keys[k - 1] + np.outer(steps, keys[k] - keys[k - 1]) for k in range(1, keyposes + 1)])


def rotation(omega):
    """exp([ω]×) by Rodrigues' formula."""
    angle = np.linalg.norm(omega)
    if angle == 0.0:
        return np.eye(3)
    k = omega / angle
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def quaternion(R):
    """The unit quaternion [w, x, y, z] of a rotation matrix (from its largest diagonal term)."""
    trace = np.trace(R)
    k = int(np.argmax([trace, R[0, 0], R[1, 1], R[2, 2]]))
    if k == 0:
        w = 0.5 * np.sqrt(1.0 + trace)
        q = [w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)]
    else:
        i, j, m = k - 1, k % 3, (k + 1) % 3
        v = np.zeros(3)
        v[i] = 0.5 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[m, m])
        v[j] = (R[j, i] + R[i, j]) / (4 * v[i])
        v[m] = (R[m, i] + R[i, m]) / (4 * v[i])
        q = [(R[m, j] - R[j, m]) / (4 * v[i]), *v]
    return np.array(q)


def mandible_twists(skin, deltas, chin_share=0.5):
    """The mandible's motion per jaw blendshape: the twist (ω, v) of the small rigid motion
    ω × (p − c) + v fitted by least squares to the blendshape's skin displacement on the chin (the
    skin vertices that the first blendshape, jawOpen, moves by more than `chin_share` of its largest
    displacement; c their centroid). Returns c and the twists [J, 6]."""
    magnitude = np.linalg.norm(deltas[0], axis=1)
    chin = magnitude > chin_share * magnitude.max()
    c = skin[chin].mean(0)
    r = skin[chin] - c
    A = np.zeros((len(r), 3, 6))  # ω × r + v = [−[r]×, I] (ω, v)
    A[:, 0, 1], A[:, 0, 2] = r[:, 2], -r[:, 1]
    A[:, 1, 0], A[:, 1, 2] = -r[:, 2], r[:, 0]
    A[:, 2, 0], A[:, 2, 1] = r[:, 1], -r[:, 0]
    A[:, :, 3:] = np.eye(3)
    A = A.reshape(-1, 6)
    return c, np.array([np.linalg.lstsq(A, d[chin].reshape(-1), rcond=None)[0] for d in deltas])


def performance(args, log):
    """The thesis's protocol (§6.5): a performance of F frames with the mandible's motion known; the
    last quarter of its key expressions held out."""
    full = args.full
    cell = args.cell or (0.008 if full else 0.012)
    count = args.expressions or (57 if full else 12)
    code = args.code or (16 if full else 4)
    keyposes = args.keyposes or (24 if full else 8)
    per_segment = args.segment_frames
    held_keys = args.heldout or max(1, keyposes // 4)
    if per_segment < 1:
        raise SystemExit(f"--segment-frames: must be >= 1, got {per_segment}")
    if not 0.0 <= args.skull_share < args.mandible_share < 1.0:
        raise SystemExit(f"--skull-share / --mandible-share: need 0 <= skull < mandible < 1, got "
                         f"{args.skull_share} / {args.mandible_share}")
    if not 1 <= held_keys < keyposes:
        raise SystemExit(f"--heldout: must be 1 .. {keyposes - 1} key expressions, got {held_keys}")
    rng = np.random.default_rng(args.seed)
    others = [n for n in expression_names(args.data) if n != "jawOpen"]
    if not 3 <= count <= len(others) + 1:
        raise SystemExit(f"--expressions: must be 3 .. {len(others) + 1}, got {count}")
    pool = ["jawOpen"] + sorted(rng.choice(others, size=count - 1, replace=False).tolist())
    neutral, polygons, expr = load_ict(args.data, pool)
    skin_neutral, tris, used = face_region(neutral, polygons)
    # The rest shape: the neutral face, or jawOpen (the lips apart, so that the lattice does not bind
    # them together; the neutral frames then close the mouth).
    skin_rest = skin_neutral if args.rest == "neutral" else expr["jawOpen"][used]
    volume = Volume(args.volume, skin_rest, tris, args.thickness, cell, args.layers, args.cut_mouth)
    nodes = volume.nodes

    W = performance_weights(pool, rng, keyposes, per_segment)
    n_test = held_keys * per_segment
    n_train = len(W) - n_test
    deltas = np.stack([expr[n][used] - skin_neutral for n in pool])
    shapes = skin_neutral + np.einsum("fp,psc->fsc", W, deltas)
    jaw = [k for k, n in enumerate(pool) if n in JAW]  # jawOpen first
    centre, twists = mandible_twists(skin_neutral, deltas[jaw])
    magnitude = np.linalg.norm(deltas[0], axis=1)
    share = magnitude[volume.deep_skin] / magnitude.max()
    mandible = share > args.mandible_share
    attached = (share <= args.skull_share) | mandible
    volume.deep, volume.deep_skin, mandible = volume.deep[attached], volume.deep_skin[attached], mandible[attached]
    deep = volume.deep
    # The mandible's pose per frame, x ↦ R(ω)(x − c) + c + v with (ω, v) = Σ_j w_j twist_j from the
    # neutral; relative to the rest pose (R_r, v_r): x ↦ R R_rᵀ (x − c − v_r) + c + v.
    twist_of = W[:, jaw] @ twists
    rest_twist = np.zeros(6) if args.rest == "neutral" else twists[0]
    R_rest = rotation(rest_twist[:3])
    pivot = centre + rest_twist[3:]
    moves = [(rotation(tw[:3]) @ R_rest.T, tw[3:] - rest_twist[3:]) for tw in twist_of]
    log(f"skin {len(skin_rest)} vertices, {volume.describe()}, "
        f"{len(deep)} attached ({int(mandible.sum())} on the mandible: {', '.join(pool[k] for k in jaw)}); "
        f"performance of {len(W)} frames through {keyposes} key expressions of {count} blendshapes, "
        f"{n_train} training / {n_test} held-out frames (the last {held_keys} key expressions), code {code}")

    work = tempfile.TemporaryDirectory(prefix="xpd-face-")
    scene = write_scene(work.name, volume, mu=1e4, frames=n_test,
                        mandible=(mandible, [(0, np.eye(3), pivot, np.zeros(3))]))
    model = xpd.Model.from_scene(str(scene))
    layer = xpd.torch.QuasistaticLayer(model, tolerance=1e-8)
    skin = Skin(model, volume)
    rest_t = model.attachment_targets
    on_jaw = mandible[nearest(rest_t, nodes[deep])]

    def attachment_targets(move):
        R, t = move
        out = rest_t.copy()
        out[on_jaw] = (rest_t[on_jaw] - pivot) @ R.T + pivot + t
        return out

    T_att = torch.from_numpy(np.stack([attachment_targets(m) for m in moves]))
    T_all = torch.from_numpy(shapes)
    tr, te = slice(0, n_train), slice(n_train, None)
    neutral_rms = rms_mm(torch.from_numpy(skin_neutral)[None], T_all).numpy()

    # 1. Per-frame fit with the mandible where the data put it (every frame: the held-out fits are
    #    the best the model can do).
    log(f"fitting {len(W)} frames ({model.num_actuated_tets} tets x 6 shape-target entries each)")
    a_fit, n_eval = fit_expressions(layer, skin, T_all, scale=cell, reg=1e-4, steps=args.fit_steps, log=log, t=T_att)
    with torch.no_grad():
        x_fit = layer(a_fit, T_att)
        fit_rms = rms_mm(skin(x_fit), T_all).numpy()
    log(f"fit: median {np.median(fit_rms):.3f} mm, max {fit_rms.max():.3f} mm RMS after {n_eval} evaluations")

    # 2. Decoder from the training frames' fitted actuation, then end to end through the simulator,
    #    each frame's solves starting from its own fitted equilibrium.
    layer.warm_start = x_fit[tr]
    decoder = Decoder(a_fit[tr], min(code, n_train - 1))
    codes = torch.nn.Parameter(decoder.encode(a_fit[tr]).detach())

    def train_loss():  # the fit's loss, its regularization included
        a = decoder(codes)
        return (((skin(layer(a, T_att[tr])) - T_all[tr]) ** 2).sum(-1).mean(-1).sum() / cell ** 2
                + 1e-4 * (a ** 2).mean(-1).mean(-1).sum())

    n_train_eval = lbfgs(list(decoder.parameters()) + [codes], train_loss, args.train_steps, log, layer)
    with torch.no_grad():
        train_rms = rms_mm(skin(layer(decoder(codes), T_att[tr])), T_all[tr]).numpy()
    log(f"decoder end to end: training RMS median {np.median(train_rms):.3f} mm after {n_train_eval} evaluations")

    # Held-out frames: only the code is fitted (from 0), the mandible's pose is known; their solves
    # start from the rest shape, as the replay scene's do (their fitted equilibria used the targets).
    for p in decoder.parameters():
        p.requires_grad_(False)
    rest = np.asarray(model.rest_positions)
    layer.warm_start = np.ascontiguousarray(np.repeat(rest[None], n_test, axis=0))
    z = torch.nn.Parameter(torch.zeros(n_test, codes.shape[1], dtype=torch.float64))

    def test_loss():
        return ((skin(layer(decoder(z), T_att[te])) - T_all[te]) ** 2).sum(-1).mean(-1).sum() / cell ** 2

    lbfgs([z], test_loss, args.code_steps, log, layer)
    with torch.no_grad():
        test_rms = rms_mm(skin(layer(decoder(z), T_att[te])), T_all[te]).numpy()

    # 3. PCA of the training frames' vertex positions at the same code size (the thesis's baseline),
    #    and PCA given the jaw weights too (a linear map of them, then PCA of what it leaves).
    k = min(code, n_train - 1)
    pca_rms = pca_heldout_rms(shapes[tr], shapes[te], k)
    pca_jaw_rms = pca_heldout_rms(shapes[tr], shapes[te], k, W[tr][:, jaw], W[te][:, jaw])
    print(f"  {'held-out frame':>14s} {'jawOpen':>8s} {'neutral':>8s} {'fit':>8s} {'decoder':>8s} {'PCA':>8s} {'PCA+jaw':>8s}   (RMS mm)")
    for i in range(n_test):
        f = n_train + i
        print(f"  {f + 1:14d} {W[f, 0]:8.2f} {neutral_rms[f]:8.3f} {fit_rms[f]:8.3f} {test_rms[i]:8.3f} "
              f"{pca_rms[i]:8.3f} {pca_jaw_rms[i]:8.3f}")
    summary = {
        "protocol": "performance", "rest": args.rest, "volume": volume.kind, "cell_m": cell,
        "layers": args.layers, "thickness_m": args.thickness, "nodes": len(nodes), "tets": len(volume.tets),
        "skin_vertices": len(skin_rest), "code": code, "blendshapes": pool,
        "keyposes": keyposes, "frames": len(W), "train_frames": n_train, "heldout_frames": n_test,
        "mandible_nodes": int(mandible.sum()), "weights": W.tolist(),
        "neutral_rms_mm": neutral_rms.tolist(), "fit_rms_mm": fit_rms.tolist(),
        "train_decoder_rms_mm": train_rms.tolist(),
        "heldout_decoder_rms_mm": test_rms.tolist(), "heldout_pca_rms_mm": pca_rms.tolist(),
        "heldout_pca_jaw_rms_mm": pca_jaw_rms.tolist(),
        "heldout_neutral_mean_mm": float(neutral_rms[te].mean()),
        "heldout_fit_mean_mm": float(fit_rms[te].mean()),
        "heldout_decoder_mean_mm": float(test_rms.mean()), "heldout_pca_mean_mm": float(pca_rms.mean()),
        "heldout_pca_jaw_mean_mm": float(pca_jaw_rms.mean()),
    }
    elapsed = time.perf_counter() - args.start
    summary["seconds"] = elapsed
    print(f"held-out mean RMS: decoder {summary['heldout_decoder_mean_mm']:.3f} mm, PCA {summary['heldout_pca_mean_mm']:.3f} mm, "
          f"PCA given the jaw weights {summary['heldout_pca_jaw_mean_mm']:.3f} mm (code {k}); neutral "
          f"{summary['heldout_neutral_mean_mm']:.3f} mm, per-frame fit {summary['heldout_fit_mean_mm']:.3f} mm; {elapsed:.1f} s")

    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(summary, indent=2))
        keys = [(0, np.eye(3), pivot, np.zeros(3))]
        keys += [(i + 1, moves[n_train + i][0], pivot, moves[n_train + i][1]) for i in range(n_test)]
        replay = write_scene(work.name, volume, mu=1e4, frames=n_test,
                             mandible=(mandible, keys), name="heldout.json")
        a_te = np.ascontiguousarray(decoder(z).detach().numpy())
        sim = xpd.Simulation(str(replay))
        sim.set_actuation(a_te)
        sim.write(str(out / "heldout"))
        # The replay scene's rigid keyframes put the mandible where the layer's targets did: the
        # scene's frames equal the layer's equilibria (to the solvers' tolerances).
        check = xpd.Simulation(str(replay))
        check.set_actuation(a_te)
        with torch.no_grad():
            x_te = layer(decoder(z), T_att[te]).numpy()
        replay_diff = 0.0
        for i in range(n_test):
            check.advance(1)
            replay_diff = max(replay_diff, float(np.abs(check.positions - x_te[i]).max()))
        summary["replay_max_difference_m"] = replay_diff
        (out / "results.json").write_text(json.dumps(summary, indent=2))
        log(f"the replay scene reproduces the layer's held-out equilibria to {replay_diff:.2e} m")
        for i in range(n_test):
            write_obj(out / f"target_{n_train + i + 1:04d}.obj", shapes[n_train + i], tris)
        log(f"wrote {out}/results.json and the run folder {out}/heldout (frames 1..{n_test}: performance frames "
            f"{n_train + 1}..{len(W)})")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every expression, 47 / 10 split, code 16, cell 0.8 cm")
    ap.add_argument("--data", default=str(DATA), help="the ict-facekit folder")
    ap.add_argument("--cell", type=float, help="lattice cell [m] (small 0.012, full 0.008)")
    ap.add_argument("--thickness", type=float, default=0.015, help="flesh thickness behind the skin [m]")
    ap.add_argument("--volume", choices=["lattice", "shell"], default="lattice",
                    help="the flesh volume: BCC lattice tets with the skin embedded (--cell), or a prism shell "
                         "grown behind the skin's own triangles (--layers; the skin vertices are its nodes, the "
                         "mouth's slit stays open)")
    ap.add_argument("--layers", type=int, default=1, help="--volume shell: prism layers through the thickness")
    ap.add_argument("--cut-mouth", action="store_true",
                    help="--volume lattice: cut the lattice along the mouth's slit (duplicated nodes, Molino et "
                         "al. 2004) so that the lips can part; the skin is bound to its side's tets")
    ap.add_argument("--expressions", type=int, help="number of expressions (small 12, full 57)")
    ap.add_argument("--protocol", choices=["expressions", "performance"], default="expressions",
                    help="expressions: the blendshapes themselves, some held out; performance: frames of a "
                         "performance through mixtures of them with the mandible's motion known, the last "
                         "key expressions held out (the thesis's set-up)")
    ap.add_argument("--heldout", type=int,
                    help="held-out expressions (small 3, full 10); with --protocol performance, held-out key "
                         "expressions at the end (default a quarter)")
    ap.add_argument("--keyposes", type=int, help="--protocol performance: key expressions (small 8, full 24)")
    ap.add_argument("--segment-frames", type=int, default=3,
                    help="--protocol performance: frames from one key expression to the next")
    ap.add_argument("--mandible-share", type=float, default=0.5,
                    help="--protocol performance: deep nodes whose nearest skin vertex jawOpen moves by more "
                         "than this share of its largest displacement follow the mandible")
    ap.add_argument("--rest", choices=["neutral", "jawOpen"], default="neutral",
                    help="--protocol performance: the rest shape the flesh volume is built around")
    ap.add_argument("--skull-share", type=float, default=0.1,
                    help="--protocol performance: deep nodes whose nearest skin vertex jawOpen moves by at most "
                         "this share are attached to the skull; those between the shares are free")
    ap.add_argument("--code", type=int, help="code size (small 4, full 16)")
    ap.add_argument("--fit-steps", type=int, default=40, help="L-BFGS evaluations of the per-expression fit")
    ap.add_argument("--train-steps", type=int, default=20, help="L-BFGS evaluations of the end-to-end decoder refinement")
    ap.add_argument("--code-steps", type=int, default=20, help="L-BFGS evaluations of the held-out code fit")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--code-init", choices=["mean", "fit"], default="mean",
                    help="start of a held-out code: the mean (0) or the projection of the expression's own "
                         "fitted actuation onto the decoder")
    ap.add_argument("--out", help="folder for results.json and the run folder of the held-out expressions")
    args = ap.parse_args(argv)
    full = args.full
    cell = args.cell or (0.008 if full else 0.012)
    count = args.expressions or (57 if full else 12)
    heldout = args.heldout or (10 if full else 3)
    code = args.code or (16 if full else 4)
    torch.set_num_threads(1)  # xpd's threads do the work; avoid oversubscribing 2 cores
    t0 = args.start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", flush=True)

    if args.protocol == "performance":
        return performance(args, log)

    rng = np.random.default_rng(args.seed)
    names = sorted(rng.choice(expression_names(args.data), size=count, replace=False).tolist())
    test_names = sorted(rng.choice(names, size=heldout, replace=False).tolist())
    train_names = [n for n in names if n not in test_names]
    neutral, polygons, expr = load_ict(args.data, names)
    skin_rest, tris, used = face_region(neutral, polygons)
    volume = Volume(args.volume, skin_rest, tris, args.thickness, cell, args.layers, args.cut_mouth)
    log(f"skin {len(skin_rest)} vertices, {volume.describe()}, "
        f"{len(volume.deep)} attached; {len(train_names)} training / {len(test_names)} held-out expressions, code {code}")

    work = tempfile.TemporaryDirectory(prefix="xpd-face-")
    scene = write_scene(work.name, volume, mu=1e4, frames=heldout)
    model = xpd.Model.from_scene(str(scene))
    layer = xpd.torch.QuasistaticLayer(model, tolerance=1e-8)
    skin = Skin(model, volume)
    target = {n: torch.from_numpy(expr[n][used]) for n in names}
    with torch.no_grad():
        rest_skin = skin(torch.from_numpy(model.rest_positions)[None])[0]
    embed_err = float(rms_mm(rest_skin, torch.from_numpy(skin_rest)))
    log(f"embedding reproduces the neutral skin to {embed_err:.2e} mm RMS")
    neutral_rms = {n: float(rms_mm(torch.from_numpy(skin_rest), target[n])) for n in names}

    # 1. Per-expression fit (all expressions: the held-out fits are the best the model can do).
    log(f"fitting {len(names)} expressions ({model.num_actuated_tets} tets x 6 shape-target entries each)")
    T_all = torch.stack([target[n] for n in names])
    a_fit, n_eval = fit_expressions(layer, skin, T_all, scale=cell, reg=1e-4, steps=args.fit_steps, log=log)
    with torch.no_grad():
        fit_rms = rms_mm(skin(layer(a_fit)), T_all).numpy()
    for n, r in zip(names, fit_rms):
        print(f"  {n:22s} fit {r:6.3f} mm RMS (neutral {neutral_rms[n]:6.3f})")
    log(f"fit: median {np.median(fit_rms):.3f} mm, max {fit_rms.max():.3f} mm RMS after {n_eval} evaluations")

    # 2. Decoder: trained on the training expressions' fitted actuation, then end to end.
    tr = [names.index(n) for n in train_names]
    te = [names.index(n) for n in test_names]
    decoder = Decoder(a_fit[tr], min(code, len(tr) - 1))
    codes = torch.nn.Parameter(decoder.encode(a_fit[tr]).detach())
    T_tr, T_te = T_all[tr], T_all[te]

    def train_loss():
        return ((skin(layer(decoder(codes))) - T_tr) ** 2).sum(-1).mean(-1).sum() / cell ** 2

    n_train = lbfgs(list(decoder.parameters()) + [codes], train_loss, args.train_steps, log, layer)
    with torch.no_grad():
        train_rms = rms_mm(skin(layer(decoder(codes))), T_tr).numpy()
    log(f"decoder end to end: training RMS median {np.median(train_rms):.3f} mm after {n_train} evaluations")

    # Held-out: only the code is fitted, through decoder and simulator, from the mean code (0).
    for p in decoder.parameters():
        p.requires_grad_(False)
    if args.code_init == "fit":  # least-squares code of the held-out fits: z B ≈ a_fit − mean
        with torch.no_grad():
            B = decoder.basis
            rhs = B @ (a_fit[te].reshape(len(te), -1) - decoder.mean).T
            z = torch.nn.Parameter(torch.linalg.solve(B @ B.T, rhs).T.contiguous())
    else:
        z = torch.nn.Parameter(torch.zeros(len(te), codes.shape[1], dtype=torch.float64))

    def test_loss():
        return ((skin(layer(decoder(z))) - T_te) ** 2).sum(-1).mean(-1).sum() / cell ** 2

    n_test = lbfgs([z], test_loss, args.code_steps, log, layer)
    with torch.no_grad():
        x_te = layer(decoder(z))
        test_rms = rms_mm(skin(x_te), T_te).numpy()

    # 3. PCA of vertex positions at the same code size.
    pca_rms = pca_heldout_rms(T_tr.numpy(), T_te.numpy(), min(code, len(tr) - 1))
    print(f"  {'held-out expression':22s} {'neutral':>8s} {'fit':>8s} {'decoder':>8s} {'PCA':>8s}   (RMS mm)")
    for k, n in enumerate(test_names):
        print(f"  {n:22s} {neutral_rms[n]:8.3f} {fit_rms[te[k]]:8.3f} {test_rms[k]:8.3f} {pca_rms[k]:8.3f}")
    elapsed = time.perf_counter() - t0
    summary = {
        "volume": volume.kind, "cell_m": cell, "layers": args.layers, "thickness_m": args.thickness,
        "nodes": len(volume.nodes), "tets": len(volume.tets),
        "skin_vertices": len(skin_rest), "code": code, "train": train_names, "heldout": test_names,
        "fit_rms_mm": dict(zip(names, map(float, fit_rms))),
        "neutral_rms_mm": neutral_rms,
        "heldout_decoder_rms_mm": dict(zip(test_names, map(float, test_rms))),
        "heldout_pca_rms_mm": dict(zip(test_names, map(float, pca_rms))),
        "heldout_decoder_mean_mm": float(test_rms.mean()), "heldout_pca_mean_mm": float(pca_rms.mean()),
        "seconds": elapsed,
    }
    print(f"held-out mean RMS: decoder {summary['heldout_decoder_mean_mm']:.3f} mm, "
          f"PCA {summary['heldout_pca_mean_mm']:.3f} mm (code {code}); {elapsed:.1f} s")

    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(summary, indent=2))
        sim = xpd.Simulation(str(scene))
        sim.set_actuation(np.ascontiguousarray(decoder(z).detach().numpy()))
        sim.write(str(out / "heldout"))
        for k, n in enumerate(test_names):
            write_obj(out / f"target_{n}.obj", T_te[k].numpy(), tris)
        log(f"wrote {out}/results.json and the run folder {out}/heldout (frames 1..{len(te)}: {', '.join(test_names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
