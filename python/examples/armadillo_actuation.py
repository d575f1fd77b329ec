"""Recover a known low-dimensional actuation of the armadillo through xpd.torch.QuasistaticLayer.

A ground-truth actuation a* = Σ_k z*_k B_k (4 smooth fields B_k over the tets: stretches and shears
that vary with height and width) gives target positions x* = layer(a*). Starting from z = 0, L-BFGS
minimises ||layer(a(z)) − x*||² through the adjoint gradients and must recover the shape to 1e-4 of
the bounding-box diagonal.

    PYTHONPATH=build/python python3 python/examples/armadillo_actuation.py [--steps 60] [--out DIR]

Prints the loss per step, the recovered z against z*, the surface error relative to the bounding-box
diagonal and the time; with --out writes target.obj and recovered.obj (surface meshes).
"""
import argparse
import pathlib
import sys
import time

import numpy as np
import torch

import xpd
import xpd.torch

HERE = pathlib.Path(__file__).resolve().parent


def basis(model):
    """4 smooth actuation fields [4, u, 6] over the actuated tets (all tets, in tet order)."""
    X, T = model.rest_positions, model.tets
    c = X[T].mean(axis=1)
    c = (c - c.mean(axis=0)) / (c.max(axis=0) - c.min(axis=0))
    B = np.zeros((4, len(T), 6))
    B[0, :, 0] = 0.5 + c[:, 1]     # x stretch growing with height
    B[1, :, 3] = c[:, 0]           # y stretch varying across the width
    B[2, :, 1] = 1.0 - c[:, 1]     # xy shear, strongest low
    B[3, :, 5] = c[:, 1] * c[:, 0]  # z stretch, antisymmetric
    return torch.from_numpy(0.1 * B)  # z of order 1 gives targets b of order 0.1


def write_obj(path, x, tri):
    with open(path, "w") as f:
        for p in x:
            f.write(f"v {p[0]:.9g} {p[1]:.9g} {p[2]:.9g}\n")
        for t in tri:
            f.write(f"f {t[0] + 1} {t[1] + 1} {t[2] + 1}\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default=str(HERE / "armadillo.json"))
    ap.add_argument("--steps", type=int, default=60, help="L-BFGS iterations at most")
    ap.add_argument("--out", help="folder for target.obj / recovered.obj")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # xpd's own threads do the work; avoid oversubscribing 2 cores

    t0 = time.perf_counter()
    model = xpd.Model.from_scene(args.scene)
    layer = xpd.torch.QuasistaticLayer(model, tolerance=1e-10)
    B = basis(model)
    z_true = torch.tensor([1.2, -1.0, 0.8, 1.5], dtype=torch.float64)
    actuation = lambda z: torch.einsum("k,kuc->uc", z, B)[None]  # noqa: E731
    with torch.no_grad():
        x_true = layer(actuation(z_true))
    diag = float(np.linalg.norm(model.rest_positions.max(0) - model.rest_positions.min(0)))
    surface = np.unique(model.surface_triangles)
    print(f"armadillo: {model.num_nodes} nodes, {model.num_actuated_tets} actuated tets, "
          f"target max displacement {float((x_true[0] - torch.from_numpy(model.rest_positions)).norm(dim=1).max()) / diag:.3f} of the diagonal")

    z = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([z], lr=1.0, max_iter=args.steps, tolerance_grad=1e-14, tolerance_change=1e-16,
                            history_size=10, line_search_fn="strong_wolfe")
    evaluations = [0]

    def closure():
        opt.zero_grad()
        loss = ((layer(actuation(z)) - x_true) ** 2).sum() / diag ** 2
        loss.backward()
        evaluations[0] += 1
        print(f"  evaluation {evaluations[0]:3d}: loss {loss.item():.3e}")
        return loss

    opt.step(closure)
    with torch.no_grad():
        x = layer(actuation(z))
    err = float((x[0] - x_true[0])[surface].norm(dim=1).max()) / diag
    elapsed = time.perf_counter() - t0
    print(f"z recovered {z.detach().numpy().round(6)}  true {z_true.numpy()}")
    print(f"surface error (max over surface nodes) {err:.2e} of the bounding-box diagonal; "
          f"{evaluations[0]} evaluations, {elapsed:.1f} s")
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_obj(out / "target.obj", x_true[0].numpy(), model.surface_triangles)
        write_obj(out / "recovered.obj", x[0].numpy(), model.surface_triangles)
    return 0 if err <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
