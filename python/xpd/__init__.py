"""xpd: Projective Dynamics soft bodies from Python.

    import xpd
    sim = xpd.Simulation(xpd.Scene.load("scenes/cantilever.json"))
    sim.advance(3)
    sim.positions            # (num_nodes, 3) float64, a read-only view
    xpd.Simulation("scenes/twist.json").write("out/twist")   # what `xpd run` writes

Learning (docs/python.md): xpd.Model.from_scene(path), xpd.QuasistaticBatch(model) and the
PyTorch layer xpd.torch.QuasistaticLayer(model).
"""


class Error(RuntimeError):
    """Any error raised by the xpd library."""


class SceneError(Error, ValueError):
    """The scene file is invalid (the message names the file and JSON pointer)."""


class IoError(Error, OSError):
    """A file could not be read or written, or is malformed."""


class MeshError(Error, ValueError):
    """The mesh is invalid (inverted or degenerate tets, bad indices)."""


class SolverError(Error):
    """A solve failed: not converged, not positive definite, non-finite values."""


from ._xpd import (  # noqa: E402  (the exception classes above must exist first)
    Model,
    QuasistaticBatch,
    Scene,
    Simulation,
    __version__,
    bcc_lattice,
    embed_points,
)

__all__ = [
    "Error", "SceneError", "IoError", "MeshError", "SolverError",
    "Scene", "Simulation", "Model", "QuasistaticBatch", "bcc_lattice", "embed_points",
    "__version__",
]
