"""Training split over two processes with torch.distributed (gloo) gives the gradient of one process."""
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import xpd  # noqa: E402
import xpd.torch  # noqa: E402
from conftest import write_actuated_bar  # noqa: E402

FRAMES = 5


def problem(scene):
    """A linear decoder W (shared parameter) maps per-frame codes to actuations; targets per frame."""
    model = xpd.Model.from_scene(scene)
    layer = xpd.torch.QuasistaticLayer(model, tolerance=1e-10)
    g = torch.Generator().manual_seed(3)
    u = model.num_actuated_tets
    W = (0.02 * torch.randn(u * 6, 3, generator=g, dtype=torch.float64)).requires_grad_()
    codes = torch.randn(FRAMES, 3, generator=g, dtype=torch.float64)
    targets = torch.from_numpy(model.rest_positions)[None] + 0.01 * torch.randn(
        FRAMES, model.num_nodes, 3, generator=g, dtype=torch.float64)
    return model, layer, W, codes, targets


def loss_of(layer, W, codes, targets, frames, u):
    frames = list(frames)
    if not frames:
        return (W * 0).sum()
    a = (codes[frames] @ W.T).reshape(len(frames), u, 6)
    return ((layer(a) - targets[frames]) ** 2).sum()


def worker(rank, world, scene, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model, layer, W, codes, targets = problem(scene)
    mine = xpd.torch.frames_of_rank(FRAMES)
    loss_of(layer, W, codes, targets, mine, model.num_actuated_tets).backward()
    xpd.torch.all_reduce_gradients([W])
    np.save(pathlib.Path(out_dir) / f"grad{rank}.npy", W.grad.numpy())
    dist.destroy_process_group()


def test_frames_of_rank_partitions():
    parts = [list(xpd.torch.frames_of_rank(7, r, 3)) for r in range(3)]
    assert parts == [[0, 1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError):
        xpd.torch.frames_of_rank(7, 3, 3)


def test_two_processes_give_the_gradient_of_one(tmp_path):
    scene = write_actuated_bar(tmp_path / "bar.json", nodes=(4, 2, 2))
    torch.multiprocessing.spawn(worker, args=(2, scene, str(tmp_path / "init"), str(tmp_path)), nprocs=2,
                                join=True)
    model, layer, W, codes, targets = problem(scene)
    loss_of(layer, W, codes, targets, range(FRAMES), model.num_actuated_tets).backward()
    for rank in range(2):
        g = np.load(tmp_path / f"grad{rank}.npy")
        np.testing.assert_allclose(g, W.grad.numpy(), rtol=1e-10, atol=1e-14 * np.abs(g).max())
