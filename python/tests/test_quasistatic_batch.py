"""xpd.Model and xpd.QuasistaticBatch (numpy level): shapes, strict input checks, and the adjoint
gradient against central differences of the forward solve."""
import numpy as np
import pytest

import xpd


def test_model_counts(bar_scene):
    model = xpd.Model.from_scene(bar_scene)
    assert model.num_actuated_tets == model.num_tets > 0
    assert model.num_attachment_targets == 9  # the x = 0 face of a 5 × 3 × 3 box
    assert model.actuation.shape == (model.num_actuated_tets, 6) and not model.actuation.any()
    assert model.attachment_targets.shape == (9, 3)


def test_forward_backward_match_central_differences(bar_scene):
    model = xpd.Model.from_scene(bar_scene)
    batch = xpd.QuasistaticBatch(model, tolerance=1e-10, newton_polish=True)
    rng = np.random.default_rng(1)
    B, u, k = 2, model.num_actuated_tets, model.num_attachment_targets
    a = 0.05 * rng.standard_normal((B, u, 6))
    t = np.repeat(model.attachment_targets[None], B, axis=0) + 0.01 * rng.standard_normal((B, k, 3))
    w = rng.standard_normal((B, model.num_nodes, 3))

    def loss(a_, t_):
        x, stats = batch.forward(a_, t_)
        assert all(s["converged"] for s in stats)
        return (w * x).sum(axis=(1, 2)), x

    L0, x = loss(a, t)
    ga, gt, stats = batch.backward(x, a, t, w)
    assert ga.shape == a.shape and gt.shape == t.shape and len(stats) == B
    assert all(s["residual"] <= 1e-10 for s in stats)
    da, dt = rng.standard_normal(a.shape), 0.01 * rng.standard_normal(t.shape)
    eps = 1e-5
    fd = (loss(a + eps * da, t + eps * dt)[0] - loss(a - eps * da, t - eps * dt)[0]) / (2 * eps)
    an = (ga * da).sum(axis=(1, 2)) + (gt * dt).sum(axis=(1, 2))
    np.testing.assert_allclose(an, fd, rtol=1e-6)


def test_inputs_are_checked_not_converted(bar_scene):
    model = xpd.Model.from_scene(bar_scene)
    batch = xpd.QuasistaticBatch(model)
    u = model.num_actuated_tets
    with pytest.raises(TypeError, match="a: expected dtype float64"):
        batch.forward(np.zeros((1, u, 6), dtype=np.float32))
    with pytest.raises(TypeError, match="a: expected a numpy"):
        batch.forward([[0.0] * 6] * u)
    with pytest.raises(ValueError, match=rf"a: expected shape \[\*, {u}, 6\], got \[1, {u}, 5\]"):
        batch.forward(np.zeros((1, u, 5)))
    bad = np.zeros((2, u, 6))
    bad[1, 3, 2] = np.nan
    with pytest.raises(ValueError, match="a: contains NaN or Inf"):
        batch.forward(bad)
    with pytest.raises(ValueError, match="t: expected shape"):
        batch.forward(np.zeros((1, u, 6)), np.zeros((2, model.num_attachment_targets, 3)))
    with pytest.raises(ValueError, match="must be C-contiguous"):
        batch.forward(np.zeros((1, 6, u)).transpose(0, 2, 1))
    with pytest.raises(ValueError, match="adjoint_method"):
        xpd.QuasistaticBatch(model, adjoint_method="lbfgs")


def test_implicit_euler_scene_is_refused(tmp_path, bar_scene):
    import json
    scene = json.loads(open(bar_scene).read())
    scene["solver"]["type"] = "implicit_euler"
    p = tmp_path / "ie.json"
    p.write_text(json.dumps(scene))
    with pytest.raises(ValueError, match="quasistatic"):
        xpd.Model.from_scene(str(p))
