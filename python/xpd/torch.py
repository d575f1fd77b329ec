"""PyTorch layer of xpd: quasistatic equilibria as a differentiable function (Wang 2025, ch. 6).

    import torch, xpd, xpd.torch
    model = xpd.Model.from_scene("face.json")          # a scene with "actuation"
    layer = xpd.torch.QuasistaticLayer(model)
    a = torch.zeros(8, model.num_actuated_tets, 6, dtype=torch.float64, requires_grad=True)
    x = layer(a)                                        # [8, num_nodes, 3] equilibria
    loss = ((x - target) ** 2).sum(); loss.backward()   # a.grad by the adjoint method

Forward solves every frame of the batch to its equilibrium (PD with Anderson acceleration, warm
started from the previous call's equilibria); backward solves the adjoint systems of all frames at
once with the prefactored PD matrix (solver/adjoint.hpp) and returns dL/da (and dL/dt). Works with
torch 1.13 and 2.x (the combined forward(ctx, ...) form, no setup_context/vmap).
"""
import numpy as np
import torch
from torch.autograd.function import once_differentiable

from . import SolverError
from ._xpd import QuasistaticBatch


def _as_numpy(tensor, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype != torch.float64:
        raise TypeError(f"{name}: expected dtype torch.float64, got {tensor.dtype} "
                        "(convert explicitly; gradients need double precision)")
    return np.ascontiguousarray(tensor.detach().cpu().numpy())


class _QuasistaticFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, t, layer):
        a_np = _as_numpy(a, "a")
        t_np = None if t is None else _as_numpy(t, "t")
        x, stats = layer.batch.forward(a_np, t_np)
        layer.last_forward_stats = stats
        bad = [i for i, s in enumerate(stats) if not s["converged"]]
        if bad and not layer.allow_unconverged:
            worst = max(stats[i]["residual"] for i in bad)
            raise SolverError(
                f"forward: frame(s) {bad} did not converge in {layer.max_iterations} iterations "
                f"(largest residual |f| = {worst:.2e}, tolerance {layer.tolerance:.1e} relative to the "
                "rest shape's); raise max_iterations, or pass allow_unconverged=True to accept "
                "approximate equilibria and gradients")
        ctx.layer = layer
        ctx.has_t = t is not None
        x_t = torch.from_numpy(x).to(a.device)
        ctx.save_for_backward(a, t, x_t)
        return x_t

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_x):
        a, t, x = ctx.saved_tensors
        layer = ctx.layer
        ga, gt, stats = layer.batch.backward(
            _as_numpy(x, "x"), _as_numpy(a, "a"), None if t is None else _as_numpy(t, "t"),
            _as_numpy(grad_x, "grad_x"))
        layer.last_backward_stats = stats
        grad_a = torch.from_numpy(ga).to(a.device) if ctx.needs_input_grad[0] else None
        grad_t = torch.from_numpy(gt).to(t.device) if ctx.has_t and ctx.needs_input_grad[1] else None
        return grad_a, grad_t, None


class QuasistaticLayer(torch.nn.Module):
    """x = argmin_x E(x; a, t) for a batch of frames of one xpd.Model.

    forward(a) with a: float64 [B, num_actuated_tets, 6] (0 = the rest shape) returns positions
    [B, num_nodes, 3]; forward(a, t) also takes the attachment targets, float64
    [B, num_attachment_targets, 3]. Options: tolerance (relative residual of the forward solve),
    max_iterations, newton_polish (Newton to round-off after PD: for gradient checks),
    adjoint_method ('cg', 'fixed_point', 'direct'), adjoint_tolerance, allow_unconverged.
    Each frame's solve starts from that frame's last equilibrium (`warm_start`).
    """

    def __init__(self, model, tolerance=1e-8, max_iterations=5000, newton_polish=False,
                 adjoint_method="cg", adjoint_tolerance=1e-10, adjoint_max_iterations=5000,
                 allow_unconverged=False):
        super().__init__()
        self.model = model
        self.tolerance = tolerance
        self.max_iterations = max_iterations
        self.allow_unconverged = allow_unconverged
        self.batch = QuasistaticBatch(model, tolerance=tolerance, max_iterations=max_iterations,
                                      newton_polish=newton_polish, adjoint_method=adjoint_method,
                                      adjoint_tolerance=adjoint_tolerance,
                                      adjoint_max_iterations=adjoint_max_iterations)
        self.last_forward_stats = None
        self.last_backward_stats = None

    def forward(self, a, t=None):
        return _QuasistaticFunction.apply(a, t, self)

    @property
    def warm_start(self):
        """A copy of the positions each frame's next forward solve starts from, float64 tensor
        [slots, num_nodes, 3] (slots: the largest batch so far). Assign a float64 tensor (or numpy
        array) [B, num_nodes, 3] to set frames 0..B-1: an optimizer keeps the warm start of its last
        accepted step and assigns it back after a refused one, whose equilibria may be unstable and
        would draw the next solves back to them."""
        return torch.from_numpy(self.batch.warm_start())

    @warm_start.setter
    def warm_start(self, x):
        if isinstance(x, torch.Tensor):
            x = _as_numpy(x, "warm_start")
        self.batch.set_warm_start(x)


# ---- several processes (torch.distributed) -------------------------------------------------------
# Training over many frames scales out with PyTorch's own torch.distributed (the gloo backend works on
# CPU): every process builds its own Model from the same scene and a QuasistaticLayer for its share
# of the frames, computes the loss of its frames, and sums the gradients of the shared parameters
# over the processes before the optimizer step. docs/python.md, "Several processes".

def frames_of_rank(num_frames, rank=None, world_size=None):
    """The frame indices process `rank` of `world_size` owns: a contiguous block, sizes differing by
    at most one (defaults: the current torch.distributed process group)."""
    import torch.distributed as dist
    if rank is None:
        rank = dist.get_rank()
    if world_size is None:
        world_size = dist.get_world_size()
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    base, extra = divmod(num_frames, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def all_reduce_gradients(parameters, average=False):
    """Sums (or averages) the .grad of every parameter over the processes of the default group, so
    that each process steps with the gradient of the whole loss. Parameters without a gradient
    contribute zeros (every process must pass the same parameters in the same order)."""
    import torch.distributed as dist
    world = dist.get_world_size()
    for p in parameters:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        if average:
            p.grad /= world
