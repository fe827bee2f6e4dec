"""Self-check of an inference path against the eager fp32 forward of the same net.

Every fast path (CUDA graph replay, BN-folded or compiled module, numpy net) is compared
on a random batch with the eager float32 :class:`nets.model.Net` in eval mode. A
mismatch raises :class:`SelfCheckError` naming the path, board size, batch and the
measured error; nothing is ever served silently wrong.

Errors (per batch of n positions on an H x W board):

* ``policy_rel``: RMS of (candidate - reference) policy logits, each row centred on its
  mean (softmax ignores a per-row constant), divided by the RMS of the centred reference
  logits. A graph that replays a constant output (the classic failed capture) scores
  ~1.0 (~1.4 for uncorrelated outputs), so any tolerance below 0.5 catches it.
* ``wdl_abs``: largest absolute difference of the win/draw/loss probabilities and, for a
  net with the moves-left head (a 4th column, in plies), of its estimate divided by the
  board's H * W cells (the net's own unit, :data:`nets.config.MOVES_LEFT_UNIT`; the output
  is a plain linear one, so the probabilities' tolerances hold it too).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["SelfCheckError", "Tolerance", "TOLERANCES", "compare", "random_planes", "self_check"]


class SelfCheckError(RuntimeError):
    """A fast inference path disagrees with the eager fp32 forward."""


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Largest accepted errors (see the module docstring for their definitions)."""

    policy_rel: float
    wdl_abs: float

    def __post_init__(self):
        if not (0 < self.policy_rel < 0.5 and 0 < self.wdl_abs < 1):
            raise ValueError(f"bad tolerance {self}: need 0 < policy_rel < 0.5, 0 < wdl_abs < 1")


#: Per compute precision. "fp32": re-ordered sums only (measured ~1e-6 for the BN-folded
#: net); "tf32": fp32 with cuDNN/cuBLAS TF32 (10 mantissa bits, CUDA's default for
#: convs); "bf16"/"fp16": 8/11 mantissa bits through ~20 layers (measured on the CPU in
#: bf16 for b3c128nbt with perturbed weights and BN statistics: policy_rel 0.024,
#: wdl_abs 0.007; the tolerances leave a 3x margin and stay far below the ~1.0 of a
#: constant output).
TOLERANCES = {
    "fp32": Tolerance(policy_rel=1e-4, wdl_abs=1e-5),
    "tf32": Tolerance(policy_rel=0.01, wdl_abs=0.005),
    "fp16": Tolerance(policy_rel=0.04, wdl_abs=0.03),
    "bf16": Tolerance(policy_rel=0.08, wdl_abs=0.05),
}


def random_planes(n: int, num_planes: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    """(n, C, H, W) uint8 0/1 planes, different in every row (a constant output can't pass)."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, num_planes, height, width)) < 0.3).astype(np.uint8)


def compare(policy, wdl, ref_policy, ref_wdl) -> dict:
    """{'policy_rel', 'wdl_abs', 'finite'} of candidate vs reference outputs.

    policy: (n, H, W) or (n, H*W) logits; wdl: (n, 3) probabilities (numpy or torch), or
    (n, 4) with the moves-left estimate in plies (compared divided by H * W)."""
    n = len(ref_policy)
    pol, ref = np.asarray(policy, np.float64), np.asarray(ref_policy, np.float64).reshape(n, -1)
    w, rw = np.asarray(wdl, np.float64), np.asarray(ref_wdl, np.float64)
    if w.ndim == 2 and w.shape == rw.shape and w.shape[1] == 4 and ref.shape[1] > 0:
        w, rw = w.copy(), rw.copy()
        w[:, 3] /= ref.shape[1]
        rw[:, 3] /= ref.shape[1]
    finite = bool(np.isfinite(pol).all() and np.isfinite(w).all())
    if pol.size != ref.size or len(pol) != n or w.shape != rw.shape:
        return {"policy_rel": float("inf"), "wdl_abs": float("inf"), "finite": finite}
    pol = pol.reshape(n, -1)
    rc = ref - ref.mean(1, keepdims=True)
    dc = (pol - pol.mean(1, keepdims=True)) - rc
    scale = np.sqrt(np.mean(rc * rc))
    rel = float(np.sqrt(np.mean(dc * dc)) / scale) if scale > 0 else float("inf")
    return {"policy_rel": rel, "wdl_abs": float(np.abs(w - rw).max()), "finite": finite}


def self_check(name: str, candidate, reference, height: int, width: int, n: int, num_planes: int,
               tol: Tolerance, seed: int = 0) -> dict:
    """Run `candidate(planes) -> (policy, wdl)` and `reference(planes)` on the same random
    batch; returns the errors of :func:`compare` or raises SelfCheckError.

    Both callables take (n, C, H, W) uint8 numpy planes and return numpy or torch
    (policy logits, wdl probabilities)."""
    x = random_planes(n, num_planes, height, width, seed)
    pol, wdl = candidate(x)
    ref_pol, ref_wdl = reference(x)
    ref_pol, ref_wdl = _np(ref_pol), _np(ref_wdl)
    if not (np.isfinite(ref_pol).all() and np.isfinite(ref_wdl).all()):
        raise SelfCheckError(f"{name}: the eager fp32 reference itself is not finite on "
                             f"{height}x{width} (a diverged checkpoint?)")
    err = compare(_np(pol), _np(wdl), ref_pol, ref_wdl)
    if not (err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs):
        raise SelfCheckError(
            f"{name} disagrees with the eager fp32 forward on {height}x{width}, batch {n}: "
            f"policy_rel {err['policy_rel']:.3g} (tolerance {tol.policy_rel}), wdl_abs "
            f"{err['wdl_abs']:.3g} (tolerance {tol.wdl_abs}), finite {err['finite']}")
    return err


def _np(a):
    if hasattr(a, "detach"):
        a = a.detach().float().cpu().numpy()
    return np.asarray(a)
