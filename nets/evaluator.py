"""In-process evaluators that fulfil :class:`c4fast.protocols.Evaluator` with a network.

``evaluate(planes (B, C, H, W), positions) -> (policy logits (B, H, W) float32,
win/draw/loss probabilities (B, 3) float32)`` for the side to move; a net with the
moves-left head (``NetConfig.moves_left``) gives (B, 4), the 4th column its estimate of
the plies left (:func:`nets.config.wdl_outputs`). torch is imported only by
TorchEvaluator and by the :class:`nets.backends.CpuBackend` a BackendEvaluator wraps, so
NumpyEvaluator works where torch is absent. Use these where no
inference server is running (tests, the arena, single-process play); self-play workers use
:class:`nets.shm_queue.InferenceClient`, which has the same method.
"""

from __future__ import annotations

import numpy as np

from nets.config import wdl_outputs


class TorchEvaluator:
    """Runs a torch model in this process (eval mode, inference_mode)."""

    def __init__(self, model, device="cpu"):
        import torch

        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.evals = 0

    def evaluate(self, planes: np.ndarray, positions=None):
        import torch

        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(planes)).to(self.device).float()
            pol, val = self.model(x)
            self.evals += x.shape[0]
            return pol.float().cpu().numpy(), wdl_outputs(val.float().cpu().numpy(), x.shape[2] * x.shape[3])


class NumpyEvaluator:
    """Runs a :class:`nets.numpy_net.NumpyNet` (no torch needed at play time)."""

    def __init__(self, net):
        self.net = net
        self.evals = 0

    def evaluate(self, planes: np.ndarray, positions=None):
        pol, val = self.net.forward(np.asarray(planes, dtype=np.float32))
        self.evals += planes.shape[0]
        return pol.astype(np.float32), wdl_outputs(val, planes.shape[2] * planes.shape[3])


class BackendEvaluator:
    """Runs a :class:`nets.backends.CpuBackend` (ONNX Runtime, BN-folded torch, ...): the
    net players' fast path (``nets.netplayer.load_evaluator``)."""

    def __init__(self, backend):
        self.backend = backend
        self.kind = backend.kind
        self.evals = 0

    def evaluate(self, planes: np.ndarray, positions=None):
        x = np.ascontiguousarray(planes, dtype=np.float32)
        pol, val = self.backend(x)
        self.evals += x.shape[0]
        return pol.reshape(x.shape[0], x.shape[2], x.shape[3]), wdl_outputs(val, x.shape[2] * x.shape[3])
