"""scripts/check-surface-penetration on a run folder made here: a unit cube A and a thin spike B
whose apex enters A's top face 0.1 deep in frame 1 (the exact depth), with two unreferenced nodes
between them, as a tet mesh's boundary output lists interior nodes."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check-surface-penetration")

CUBE = [(x, y, z) for z in (0, 1) for y in (0, 1) for x in (0, 1)]  # vertices 0-7
CUBE_FACES = [(0, 2, 3), (0, 3, 1), (4, 5, 7), (4, 7, 6), (0, 1, 5), (0, 5, 4),
              (2, 6, 7), (2, 7, 3), (0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5)]
INTERIOR = [(0.5, 0.5, 0.5), (0.4, 0.6, 0.5)]  # vertices 8-9, in no triangle


def spike(dz):  # vertices 10-13: the apex above A's centre, a small base 1 above it
    return [(0.5, 0.5, 3.0 + dz), (0.45, 0.45, 4.0 + dz), (0.55, 0.45, 4.0 + dz), (0.5, 0.56, 4.0 + dz)]


SPIKE_FACES = [(10, 12, 11), (10, 13, 12), (10, 11, 13), (11, 12, 13)]


def write_obj(path, verts):
    with open(path, "w") as f:
        for v in verts:
            f.write("v {} {} {}\n".format(*v))
        for t in CUBE_FACES + SPIKE_FACES:
            f.write("f {} {} {}\n".format(*(i + 1 for i in t)))


@pytest.fixture
def run(tmp_path):
    os.makedirs(tmp_path / "surfaces")
    write_obj(tmp_path / "surfaces" / "0000.obj", CUBE + INTERIOR + spike(0.0))
    write_obj(tmp_path / "surfaces" / "0001.obj", CUBE + INTERIOR + spike(-2.1))  # apex at z = 0.9
    return tmp_path


def check(run, *args):
    out = run / "figures.json"
    p = subprocess.run([sys.executable, SCRIPT, str(run), "--edge", "1", "--exclusion", "0.5", "--json", str(out),
                        *args], capture_output=True, text=True)
    return p, (json.load(open(out)) if p.returncode in (0, 1) and out.exists() else None)


def test_the_apex_is_found_at_its_exact_depth(run):
    p, fig = check(run)
    assert p.returncode == 1, p.stdout + p.stderr  # 0.1 deep > 1% of the edge
    assert fig["vertices"] == 12  # the interior nodes are not checked
    assert [f["inside"] for f in fig["frames"]] == [0, 1]
    assert fig["frames"][1]["deepest"] == pytest.approx(0.1, abs=1e-12)


def test_center_selects_among_the_triangles_vertices(run):
    # A sphere around the apex's rest position: the apex alone (a mask over all 14 nodes used to
    # index the 12 vertices of the triangles and failed).
    p, fig = check(run, "--center", "0.5", "0.5", "3.0", "--radius", "0.2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert fig["vertices"] == 1
    assert fig["frames"][1]["deepest"] == pytest.approx(0.1, abs=1e-12)


def test_vertices_restricts_the_check_to_an_index_range(run):
    p, fig = check(run, "--vertices", "0:10")  # the cube and the interior nodes: nothing inside
    assert p.returncode == 0, p.stdout + p.stderr
    assert fig["vertices"] == 8
    assert [f["inside"] for f in fig["frames"]] == [0, 0]
    p, fig = check(run, "--vertices", "10:14")
    assert p.returncode == 1, p.stdout + p.stderr
    assert fig["vertices"] == 4 and fig["frames"][1]["inside"] == 1


@pytest.mark.parametrize("bad", ["5:2", "a:b", "3"])
def test_a_bad_vertex_range_is_refused(run, bad):
    p, _ = check(run, "--vertices", bad)
    assert p.returncode not in (0, 1)
    assert "--vertices" in p.stderr
