"""The Python examples in their small forms (each under two minutes on 2 cores)."""
import importlib.util
import pathlib

import pytest

pytest.importorskip("torch")
EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_armadillo_recovers_its_actuation(data_dir, tmp_path, capsys):
    # Exit status 0 means the surface error is within 1e-4 of the bounding-box diagonal.
    assert load("armadillo_actuation").main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "surface error" in out
    assert (tmp_path / "recovered.obj").stat().st_size > 0
