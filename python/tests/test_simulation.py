"""xpd.Scene and xpd.Simulation: scenes run from Python as from `xpd run`."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import xpd


def test_simulation_advances_and_positions_are_a_live_view(source_dir):
    sim = xpd.Simulation(xpd.Scene.load(str(source_dir / "scenes" / "cantilever.json")))
    x = sim.positions
    assert x.dtype == np.float64 and x.shape == (sim.rest_positions.shape[0], 3)
    assert not x.flags.writeable
    np.testing.assert_array_equal(x, sim.rest_positions)
    assert sim.stats is None and sim.frame == 0
    assert sim.device == "cpu"  # solver.device's default
    stats = sim.advance(1)
    assert len(stats) == 1 and stats[0]["frame"] == 1 and stats[0]["converged"]
    assert sim.stats == stats[0]
    # No copy: the array seen before advancing shows the new positions.
    np.testing.assert_array_equal(x, sim.positions)
    assert np.abs(x - sim.rest_positions).max() > 1e-3
    assert sim.tets.shape[1] == 4 and sim.tets.min() >= 0 and sim.tets.max() < x.shape[0]
    tri = sim.surface_triangles
    assert tri.shape[1] == 3 and len(np.unique(tri)) < x.shape[0]


def _without_clock(j):
    """stats.json with every wall-clock figure zeroed (keys ending in _ms, and timings_ms)."""
    if isinstance(j, dict):
        return {k: (0 if (k == "timings_ms" or k.endswith("_ms")) else _without_clock(v)) for k, v in j.items()}
    if isinstance(j, list):
        return [_without_clock(v) for v in j]
    return j


def test_write_is_what_xpd_run_writes(source_dir, tmp_path):
    scene = str(source_dir / "scenes" / "twist.json")
    summary = xpd.Simulation(scene).write(str(tmp_path / "py"), max_frames=2)
    assert summary["frames"] == 2 and summary["unconverged_frames"] == 0
    cli = os.environ.get("XPD_CLI")
    if not cli:
        pytest.skip("XPD_CLI (the xpd executable) not set: run through ctest")
    subprocess.run([cli, "run", "-q", scene, "-o", str(tmp_path / "cli"), "--frames", "2"], check=True,
                   capture_output=True)
    py_files = sorted(p.relative_to(tmp_path / "py") for p in (tmp_path / "py").rglob("*") if p.is_file())
    cli_files = sorted(p.relative_to(tmp_path / "cli") for p in (tmp_path / "cli").rglob("*") if p.is_file())
    assert py_files == cli_files and len(py_files) > 3
    for rel in py_files:
        a, b = (tmp_path / "py" / rel).read_bytes(), (tmp_path / "cli" / rel).read_bytes()
        if rel.name == "stats.json":
            assert _without_clock(json.loads(a)) == _without_clock(json.loads(b))
        else:
            assert a == b, rel


def test_write_refuses_an_advanced_simulation(source_dir, tmp_path):
    sim = xpd.Simulation(str(source_dir / "scenes" / "cantilever.json"))
    sim.advance(1)
    with pytest.raises(ValueError, match="advanced to frame 1"):
        sim.write(str(tmp_path / "out"))


def test_library_errors_map_to_python_exceptions(tmp_path):
    with pytest.raises(xpd.IoError):
        xpd.Scene.load(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"mesh": "box:3", "materials": [{"mu": -1}]}')
    with pytest.raises(xpd.SceneError, match="/materials/0/mu"):
        xpd.Scene.load(str(bad))
    assert issubclass(xpd.SceneError, ValueError) and issubclass(xpd.SolverError, xpd.Error)
    with pytest.raises(ValueError):
        xpd.Simulation(str(pathlib.Path(bad)))
    unattached = tmp_path / "free.json"
    unattached.write_text('{"mesh": "box:3", "materials": [{"mu": 1000}]}')
    with pytest.raises(xpd.SolverError, match="component"):
        xpd.Simulation(str(unattached))


def test_bcc_lattice_is_the_positive_lattice_of_the_box():
    nodes, tets = xpd.bcc_lattice(np.zeros(3), np.array([1.0, 0.5, 0.5]), 0.25)
    assert nodes.dtype == np.float64 and tets.dtype == np.int32 and tets.shape[1] == 4
    e = nodes[tets[:, 1:]] - nodes[tets[:, :1]]
    vol = np.linalg.det(e) / 6.0
    # Every tet positive with volume h^3 / 12; together they cover the box.
    np.testing.assert_allclose(vol, 0.25 ** 3 / 12, rtol=1e-12)
    assert nodes.min(0).max() <= 0 and (nodes.max(0) >= [1.0, 0.5, 0.5]).all()
    with pytest.raises(ValueError, match="cell_size"):
        xpd.bcc_lattice(np.zeros(3), np.ones(3), 0.0)
    with pytest.raises(TypeError, match="lower"):
        xpd.bcc_lattice(np.zeros(3, dtype=np.float32), np.ones(3), 0.5)


def test_embed_points_reproduces_points_and_reports_those_outside():
    nodes, tets = xpd.bcc_lattice(np.zeros(3), np.array([1.0, 0.5, 0.5]), 0.25)
    rng = np.random.default_rng(3)
    inside = rng.uniform([0.05, 0.05, 0.05], [0.95, 0.45, 0.45], size=(40, 3))
    points = np.vstack([inside, [[3.0, 0.2, 0.2]]])  # the last one beyond the lattice's margin
    tet, weights, outside = xpd.embed_points(nodes, tets, points)
    assert tet.dtype == np.int32 and weights.shape == (41, 4)
    np.testing.assert_array_equal(outside, [40])
    assert weights[:40].min() >= -1e-9 and weights[40].min() < 0  # extrapolated from the nearest tet
    reproduced = np.einsum("pk,pkc->pc", weights, nodes[tets[tet]])
    assert np.abs(reproduced - points).max() < 1e-12
    tet, weights, outside = xpd.embed_points(nodes, tets, points, snap_outside=False)
    assert tet[40] == -1 and not weights[40].any()
    with pytest.raises(TypeError, match="tets"):
        xpd.embed_points(nodes, tets.astype(np.float64), points)
    with pytest.raises(ValueError, match="tet 0 has node"):
        xpd.embed_points(nodes, tets + len(nodes), points)
    with pytest.raises(TypeError, match="points"):
        xpd.embed_points(nodes, tets, points.astype(np.float32))


def _embedded_scene(tmp_path):
    """A 2x1x1 box bar, clamped at x = 0, every tet actuated, with an embedded 'skin' of 3 points."""
    (tmp_path / "skin.obj").write_text("v 1.5 0.5 0.5\nv 1.9 0.1 0.9\nv 0.7 0.8 0.2\nf 1 2 3\n")
    scene = {
        "mesh": {"generator": "box", "nodes": [5, 3, 3], "min": [0, 0, 0], "max": [2, 1, 1],
                 "embedded_surface": "skin.obj"},
        "selections": {"clamp": {"type": "half_space", "normal": [1, 0, 0], "offset": 1e-6}},
        "materials": [{"mu": 1e3, "density": 1000}],
        "actuation": [{"region": "all"}],
        "attachments": [{"selection": "clamp", "type": "fixed", "stiffness": 1e6}],
        "solver": {"type": "quasistatic", "frames": 2, "tolerance": 1e-10, "max_iterations": 20000},
        "outputs": {"surface": "obj"},
    }
    path = tmp_path / "bar.json"
    path.write_text(json.dumps(scene))
    return path


def test_embedding_reproduces_the_embedded_surface(tmp_path):
    path = _embedded_scene(tmp_path)
    model = xpd.Model.from_scene(str(path))
    nodes, weights = model.embedding
    assert nodes.shape == (3, 4) and weights.shape == (3, 4)
    np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-14)
    skin = (model.rest_positions[nodes] * weights[..., None]).sum(1)
    np.testing.assert_allclose(skin, [[1.5, 0.5, 0.5], [1.9, 0.1, 0.9], [0.7, 0.8, 0.2]], atol=1e-14)
    np.testing.assert_array_equal(model.embedded_surface_triangles, [[0, 1, 2]])
    plain = xpd.Model.from_scene(str(pathlib.Path(__file__).resolve().parents[2] / "python" / "examples" / "armadillo.json"))
    with pytest.raises(ValueError, match="embedded_surface"):
        plain.embedding


def test_set_actuation_drives_the_frames_like_the_layer(tmp_path):
    path = _embedded_scene(tmp_path)
    model = xpd.Model.from_scene(str(path))
    u = model.num_actuated_tets
    rng = np.random.default_rng(5)
    a = np.ascontiguousarray(0.05 * rng.standard_normal((2, u, 6)))
    batch = xpd.QuasistaticBatch(model, tolerance=1e-10)
    x_batch, _ = batch.forward(a)
    sim = xpd.Simulation(str(path))
    sim.set_actuation(a)
    sim.advance(2)
    # Frame 2 of the simulation is the equilibrium of a[1] (the same model and inputs).
    scale = np.abs(x_batch[1] - model.rest_positions).max()
    assert scale > 1e-3
    np.testing.assert_allclose(sim.positions, x_batch[1], atol=1e-6 * scale)
    out = tmp_path / "run"
    sim2 = xpd.Simulation(str(path))
    sim2.set_actuation(a)
    assert sim2.write(str(out))["frames"] == 2
    assert (out / "surfaces").is_dir()
    with pytest.raises(ValueError, match=r"a: expected shape \[\*, %d, 6\]" % u):
        sim.set_actuation(np.zeros((1, u + 1, 6)))
