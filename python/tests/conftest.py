"""Shared fixtures of the Python tests: paths of the source tree and the shared data folder."""
import os
import pathlib

import pytest

SOURCE = pathlib.Path(os.environ.get("XPD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
DATA = pathlib.Path(os.environ.get("XPD_DATA_DIR", SOURCE / ".." / "shared" / "data"))


@pytest.fixture
def source_dir():
    return SOURCE


@pytest.fixture
def data_dir():
    if not DATA.is_dir():
        pytest.skip(f"shared data folder {DATA} not found (set XPD_DATA_DIR)")
    return DATA


def write_actuated_bar(path, nodes=(5, 3, 3), gravity=-2.0):
    """A 2 × 0.5 × 0.5 m bar, fixed at x = 0 by stiff springs, every tet actuated, under gravity."""
    scene = {
        "mesh": {"generator": "box", "nodes": list(nodes), "min": [0, 0, 0], "max": [2, 0.5, 0.5]},
        "selections": {"root": {"type": "half_space", "normal": [1, 0, 0], "offset": 0.01}},
        "materials": [{"mu": 1e4, "density": 1000}],
        "actuation": [{"region": "all"}],
        "attachments": [{"selection": "root", "type": "fixed", "stiffness": 1e7}],
        "loads": [{"type": "gravity", "acceleration": [0, 0, gravity]}],
        "solver": {"type": "quasistatic", "frames": 1},
    }
    path.write_text(__import__("json").dumps(scene))
    return str(path)


@pytest.fixture
def bar_scene(tmp_path):
    return write_actuated_bar(tmp_path / "bar.json")
