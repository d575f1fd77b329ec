"""The Python examples in their small forms (each under two minutes on 2 cores)."""
import importlib.util
import json
import os
import pathlib

import numpy as np
import pytest

pytest.importorskip("torch")
EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
# The sanitizer stage (make sanitize) preloads AddressSanitizer into Python.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(UNDER_ASAN, reason="the armadillo example: 14 s optimized, 244 s under AddressSanitizer (with a build beside it); the "
                    "layer's gradients run there in test_torch_layer.py (octopus-low and the small cases)")
def test_armadillo_recovers_its_actuation(data_dir, tmp_path, capsys):
    # Exit status 0 means the surface error is within 1e-4 of the bounding-box diagonal.
    assert load("armadillo_actuation").main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "surface error" in out
    assert (tmp_path / "recovered.obj").stat().st_size > 0


@pytest.mark.skipif(UNDER_ASAN, reason="the face example takes about 2 minutes optimized, far longer under AddressSanitizer")
def test_face_fits_expressions_and_compares_with_pca(data_dir, tmp_path, capsys):
    if not (data_dir / "ict-facekit" / "FaceXModel_neutral_and_expressions.tar.xz").is_file():
        pytest.skip("ict-facekit missing from the shared data")
    assert load("face_expressions").main(["--data", str(data_dir / "ict-facekit"), "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    # Every fit at least halves the expression's distance to the neutral face (PupilDilate_L/R move
    # only the pupils, outside the face region: 0.000 / 0.002 mm, nothing to fit); the run folder
    # has the held-out frames.
    moving = {n: d for n, d in results["neutral_rms_mm"].items() if d > 0.01}
    assert len(moving) >= len(results["neutral_rms_mm"]) - 2
    for name, neutral in moving.items():
        assert results["fit_rms_mm"][name] < 0.5 * neutral, name
    assert (tmp_path / "heldout" / "stats.json").is_file()
    assert len(list((tmp_path / "heldout" / "surfaces").iterdir())) == len(results["heldout"]) + 1


def test_face_mandible_twist_recovers_a_rigid_motion():
    # The chin's displacement under a known small rigid motion ω × (p − q) + u gives back a twist
    # that reproduces it at every vertex (the pivot c differs from q; the twist absorbs it).
    face = load("face_expressions")
    rng = np.random.default_rng(3)
    skin = rng.normal(size=(400, 3)) * 0.05
    omega, q, u = np.array([0.12, -0.03, 0.05]), np.array([0.01, -0.04, 0.02]), np.array([0.002, -0.02, 0.01])
    delta = np.cross(omega, skin - q) + u
    c, twists = face.mandible_twists(skin, delta[None])
    assert twists.shape == (1, 6)
    assert np.abs(twists[0, :3] - omega).max() < 1e-12
    assert np.abs(np.cross(twists[0, :3], skin - c) + twists[0, 3:] - delta).max() < 1e-12
    # rotation() is exp([ω]×): orthonormal, turns about ω by |ω|.
    R = face.rotation(omega)
    assert np.abs(R @ R.T - np.eye(3)).max() < 1e-14 and abs(np.linalg.det(R) - 1) < 1e-14
    assert np.abs(R @ omega - omega).max() < 1e-15
    assert abs(np.arccos((np.trace(R) - 1) / 2) - np.linalg.norm(omega)) < 1e-12
    # quaternion() inverts it, also near a half turn (where w ≈ 0 and another branch is taken).
    for w in (omega, np.array([0.0, 3.1, 0.2]), np.array([-3.0, 0.5, 0.4])):
        angle = np.linalg.norm(w)
        q = face.quaternion(face.rotation(w))
        expected = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * w / angle])
        assert min(np.abs(q - expected).max(), np.abs(q + expected).max()) < 1e-12, (w, q, expected)  # ±q: one rotation


def test_face_pca_given_known_inputs_explains_what_they_drive():
    # Shapes = mean + jaw weights G + 2 latent directions: PCA with 2 components given the jaw
    # weights reproduces held-out shapes exactly; plain PCA with 2 components cannot (the jaw takes one).
    face = load("face_expressions")
    rng = np.random.default_rng(4)
    mean, G, P = rng.normal(size=(50, 3)), rng.normal(size=(1, 50, 3)), rng.normal(size=(2, 50, 3))
    jaw, z = rng.uniform(size=(30, 1)), rng.normal(size=(30, 2))
    shapes = mean + np.einsum("fj,jsc->fsc", jaw, G) + np.einsum("fk,ksc->fsc", z, P)
    known = face.pca_heldout_rms(shapes[:20], shapes[20:], 2, jaw[:20], jaw[20:])
    plain = face.pca_heldout_rms(shapes[:20], shapes[20:], 2)
    assert known.max() < 1e-9
    assert plain.mean() > 1e-2


@pytest.mark.skipif(UNDER_ASAN, reason="tens of seconds optimized, far longer under AddressSanitizer")
def test_face_performance_protocol_replays_its_heldout_frames(data_dir, tmp_path):
    # A tiny performance (coarse lattice, 4 key expressions of 5 blendshapes, one frame each): the
    # mandible's rigid keyframes in the written replay scene reproduce the layer's held-out
    # equilibria, and the comparison with PCA is reported.
    if not (data_dir / "ict-facekit" / "FaceXModel_neutral_and_expressions.tar.xz").is_file():
        pytest.skip("ict-facekit missing from the shared data")
    argv = ["--data", str(data_dir / "ict-facekit"), "--protocol", "performance", "--cell", "0.02",
            "--expressions", "5", "--keyposes", "4", "--segment-frames", "1", "--heldout", "1", "--code", "2",
            "--fit-steps", "8", "--train-steps", "4", "--code-steps", "4", "--out", str(tmp_path)]
    assert load("face_expressions").main(argv) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["protocol"] == "performance" and results["heldout_frames"] == 1
    assert results["mandible_nodes"] > 0
    assert results["replay_max_difference_m"] < 1e-6
    for key in ("heldout_decoder_mean_mm", "heldout_pca_mean_mm", "heldout_pca_jaw_mean_mm"):
        assert np.isfinite(results[key])
    assert len(list((tmp_path / "heldout" / "surfaces").iterdir())) == 2


def test_face_shell_volume_unfolds_the_mouth_corners_and_its_skin_is_its_first_nodes(data_dir):
    # The neutral ICT face folds at both mouth corners, where no prism shell has positive tets: the
    # shell volume smooths the folds (a few vertices, well under a millimetre) and then builds; its
    # skin vertices are the nodes 0..S-1 (Skin reads them directly) and the deep side lies behind.
    if not (data_dir / "ict-facekit" / "FaceXModel_neutral_and_expressions.tar.xz").is_file():
        pytest.skip("ict-facekit missing from the shared data")
    face = load("face_expressions")
    neutral, polygons, _ = face.load_ict(str(data_dir / "ict-facekit"), [])
    skin, tris, _ = face.face_region(neutral, polygons)
    import xpd

    S = len(skin)
    raw = face.Volume.__new__(face.Volume)  # the folds are real: unsmoothed, the library refuses the shell
    raw.kind, raw.skin, raw.tris, raw.thickness, raw.layers = "shell", skin, tris, 0.012, 1
    with pytest.raises(xpd.Error, match="triangle"):
        raw._build_shell()
    volume = face.Volume("shell", skin, tris, 0.012, 0.012, 1)
    moved = np.linalg.norm(volume.skin - skin, axis=1)
    assert 0 < np.count_nonzero(moved) <= 200
    assert moved.max() < 1e-3
    assert len(volume.nodes) == 2 * S and len(volume.tets) == 3 * len(tris)
    assert np.abs(volume.nodes[:S] - volume.skin).max() < 1e-12  # the skin written with 12 digits
    depth = np.linalg.norm(volume.nodes[volume.deep] - volume.nodes[volume.deep_skin], axis=1)
    assert depth.min() > 0 and depth.max() <= 0.012 + 1e-12
    x = np.asarray(volume.nodes)[None]
    import torch

    skin_of = face.Skin(None, volume)
    assert np.array_equal(skin_of(torch.from_numpy(x))[0].numpy(), volume.nodes[:S])


def test_face_cut_mouth_parts_the_lips_only_along_the_slit(data_dir, tmp_path):
    # The lattice cut along the mouth's slit: the skin at the middle of the upper lip and the middle
    # of the lower lip share tets in the uncut lattice (the closed lips lie in the same cells) and
    # are joined only around the slit's ends once cut; the scene binds the skin to its side's copy
    # (embedded_tets), which reproduces the rest skin exactly.
    if not (data_dir / "ict-facekit" / "FaceXModel_neutral_and_expressions.tar.xz").is_file():
        pytest.skip("ict-facekit missing from the shared data")
    face = load("face_expressions")
    import xpd

    neutral, polygons, _ = face.load_ict(str(data_dir / "ict-facekit"), [])
    skin, tris, _ = face.face_region(neutral, polygons)
    sides = face.mouth_sides(skin, tris, reach=face.MOUTH_REACH, corner=face.MOUTH_CORNER)
    assert (sides == face.UPPER).sum() > 100 and (sides == face.LOWER).sum() > 100
    assert skin[sides == face.UPPER, 1].min() > skin[sides == face.LOWER, 1].max() - 0.005  # upper above lower

    uncut = face.Volume("lattice", skin, tris, 0.015, 0.012)
    cut = face.Volume("lattice", skin, tris, 0.015, 0.012, cut_mouth=True)
    assert cut.cut_tets > 0 and len(cut.tets) == len(uncut.tets) + cut.cut_tets
    assert np.array_equal(cut.nodes[:len(uncut.nodes)], uncut.nodes)  # ghosts appended, originals kept

    # The lips' middles: the skin vertices of each side within 5 mm of the mouth's centre line.
    centre = np.abs(skin[:, 0]) < 0.005
    lips = {}
    for volume, name in ((uncut, "uncut"), (cut, "cut")):
        (tmp_path / name).mkdir()
        scene = face.write_scene(tmp_path / name, volume, mu=1e4, frames=1)
        model = xpd.Model.from_scene(str(scene))
        nodes, weights = model.embedding
        reproduced = np.einsum("sk,skc->sc", weights, model.rest_positions[nodes])
        assert np.abs(reproduced - skin).max() < 1e-9, name
        upper = np.unique(nodes[(sides == face.UPPER) & centre])
        lower = np.unique(nodes[(sides == face.LOWER) & centre])
        tets = np.asarray(model.tets)
        edges = np.concatenate([tets[:, [a, b]] for a in range(4) for b in range(a + 1, 4)])
        dist, _ = face.graph_distance(model.rest_positions, edges, upper)  # along the tets' edges
        lips[name] = dist[lower].min()
    assert lips["uncut"] < 0.5 * 0.012, lips  # within one cell: bound together
    assert lips["cut"] > 0.02, lips  # around a mouth corner (the mouth is 4.6 cm wide)


def test_face_lbfgs_returns_to_accepted_equilibria_and_retries_a_refused_start_from_rest():
    # A stand-in for the layer: the "solve" refuses while the warm start is the unstable branch
    # (marked −1), and records the warm start each evaluation began from. The example's L-BFGS
    # must (1) solve a refused starting point once more from the rest shape, (2) after a refused
    # trial step give the layer back the warm start of the last accepted evaluation, and (3) raise
    # when the start is refused from rest too.
    import torch
    import xpd

    face = load("face_expressions")
    rest = np.zeros((4, 3))

    class Layer:
        model = type("Model", (), {"rest_positions": rest})
        warm_start = torch.full((2, 4, 3), -1.0, dtype=torch.float64)

    layer, starts = Layer(), []
    p = torch.tensor([3.0, -2.0], dtype=torch.float64, requires_grad=True)

    def loss_fn():
        start = torch.as_tensor(np.asarray(layer.warm_start)).clone()
        starts.append(float(start.max()))
        if starts[-1] == -1.0 or (len(starts) == 4 and p.detach().abs().max() > 0):
            layer.warm_start = torch.full((2, 4, 3), -1.0, dtype=torch.float64)  # the refused branch
            raise xpd.SolverError("unstable")
        layer.warm_start = torch.full((2, 4, 3), float(len(starts)), dtype=torch.float64)  # its equilibria
        return (p ** 2).sum()

    face.lbfgs([p], loss_fn, 12, None, layer)
    # Refused at the start, then solved from rest (0); evaluations 2 and 3 accepted (their
    # equilibria marked 2 and 3); evaluation 4 refused, so evaluation 5 began from evaluation 3's.
    assert starts[:5] == [-1.0, 0.0, 2.0, 3.0, 3.0]
    assert -1.0 not in starts[1:]
    assert p.detach().abs().max() < 1e-6

    layer.warm_start = torch.full((2, 4, 3), -1.0, dtype=torch.float64)

    def always_refused():
        raise xpd.SolverError("unstable from anywhere")

    with pytest.raises(xpd.SolverError, match="unstable from anywhere"):
        face.lbfgs([p], always_refused, 5, None, layer)
