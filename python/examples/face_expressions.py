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

    PYTHONPATH=build/python python3 python/examples/face_expressions.py [--full] [--out DIR]
"""
import argparse
import json
import pathlib
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


def write_scene(folder, skin, tris, nodes, tets, deep, mu, frames):
    folder = pathlib.Path(folder)
    write_medit(folder / "flesh.mesh", nodes, tets)
    write_obj(folder / "skin.obj", skin, tris)
    (folder / "deep.txt").write_text(" ".join(map(str, deep)) + "\n")
    scene = {
        "description": "ICT face region (skin embedded) over a BCC flesh volume; deep layer attached; every tet actuated",
        "mesh": {"file": "flesh.mesh", "embedded_surface": "skin.obj"},
        "selections": {"skull": {"type": "indices", "file": "deep.txt"}},
        "materials": [{"mu": mu, "density": 1000}],
        "actuation": [{"region": "all"}],
        # A fixed attachment is a stiff spring; 1e3 mu h keeps it stiff next to the flesh without
        # the PD residual floor that much stiffer springs bring (docs/validation.md §1).
        "attachments": [{"selection": "skull", "type": "fixed", "stiffness": 1e3 * mu * float(np.cbrt((nodes.max(0) - nodes.min(0)).prod() / len(tets)))}],
        "solver": {"type": "quasistatic", "frames": max(frames, 1)},
        "outputs": {"surface": "obj"},
    }
    path = folder / "face.json"
    path.write_text(json.dumps(scene, indent=2))
    return path


# ---------------------------------------------------------------------------------------------
# Learning


class Skin:
    """Simulated skin W x of an embedded surface, differentiable in x."""

    def __init__(self, model):
        nodes, weights = model.embedding
        self.nodes = torch.from_numpy(nodes.astype(np.int64))
        self.weights = torch.from_numpy(weights)

    def __call__(self, x):  # x [B, n, 3] -> [B, S, 3]
        return (x[:, self.nodes] * self.weights[None, :, :, None]).sum(2)


def rms_mm(a, b):
    """RMS vertex distance in mm of [.., S, 3] arrays in metres, per leading index."""
    return ((a - b) ** 2).sum(-1).mean(-1).sqrt() / 1e-3


def lbfgs(params, loss_fn, steps, log=None):
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=steps, history_size=20, tolerance_grad=1e-12,
                            tolerance_change=1e-14, line_search_fn="strong_wolfe")
    count = [0]

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        for p in params:  # L-BFGS flattens with view(); a matmul's gradient may be transposed
            p.grad = p.grad.contiguous()
        count[0] += 1
        if log and (count[0] == 1 or count[0] % 10 == 0):
            log(f"    evaluation {count[0]:3d}: loss {loss.item():.4e}")
        return loss

    opt.step(closure)
    return count[0]


def fit_expressions(layer, skin, targets, scale, reg, steps, log):
    """Per-expression actuation [E, u, 6] fitted to targets [E, S, 3]."""
    E, u = targets.shape[0], layer.model.num_actuated_tets
    a = torch.zeros(E, u, 6, dtype=torch.float64, requires_grad=True)

    def loss_fn():
        s = skin(layer(a))
        return ((s - targets) ** 2).sum(-1).mean(-1).sum() / scale ** 2 + reg * (a ** 2).mean(-1).mean(-1).sum()

    evaluations = lbfgs([a], loss_fn, steps, log)
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


def pca_heldout_rms(train, test, k):
    """RMS (mm) of the held-out shapes projected on the mean + k principal components of train."""
    X = train.reshape(len(train), -1)
    mean = X.mean(0)
    _, _, vt = np.linalg.svd(X - mean, full_matrices=False)
    P = vt[:k]
    Y = test.reshape(len(test), -1) - mean
    rec = (Y @ P.T) @ P + mean
    d = (rec.reshape(test.shape) - test)
    return np.sqrt((d ** 2).sum(-1).mean(-1)) / 1e-3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every expression, 47 / 10 split, code 16, cell 0.8 cm")
    ap.add_argument("--data", default=str(DATA), help="the ict-facekit folder")
    ap.add_argument("--cell", type=float, help="lattice cell [m] (small 0.012, full 0.008)")
    ap.add_argument("--thickness", type=float, default=0.015, help="flesh thickness behind the skin [m]")
    ap.add_argument("--expressions", type=int, help="number of expressions (small 12, full 57)")
    ap.add_argument("--heldout", type=int, help="held-out expressions (small 3, full 10)")
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
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", flush=True)

    rng = np.random.default_rng(args.seed)
    names = sorted(rng.choice(expression_names(args.data), size=count, replace=False).tolist())
    test_names = sorted(rng.choice(names, size=heldout, replace=False).tolist())
    train_names = [n for n in names if n not in test_names]
    neutral, polygons, expr = load_ict(args.data, names)
    skin_rest, tris, used = face_region(neutral, polygons)
    nodes, tets, deep = build_flesh(skin_rest, tris, args.thickness, cell)
    log(f"skin {len(skin_rest)} vertices, flesh {len(nodes)} nodes / {len(tets)} tets (cell {cell * 100:.2f} cm), "
        f"{len(deep)} attached; {len(train_names)} training / {len(test_names)} held-out expressions, code {code}")

    work = tempfile.TemporaryDirectory(prefix="xpd-face-")
    scene = write_scene(work.name, skin_rest, tris, nodes, tets, deep, mu=1e4, frames=heldout)
    model = xpd.Model.from_scene(str(scene))
    layer = xpd.torch.QuasistaticLayer(model, tolerance=1e-8)
    skin = Skin(model)
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

    n_train = lbfgs(list(decoder.parameters()) + [codes], train_loss, args.train_steps, log)
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

    n_test = lbfgs([z], test_loss, args.code_steps, log)
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
        "cell_m": cell, "thickness_m": args.thickness, "nodes": len(nodes), "tets": len(tets),
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
