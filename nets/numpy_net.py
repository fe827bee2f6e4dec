"""Torch-free forward pass of :class:`nets.model.Net` for the Saiblo player.

This module imports only numpy, json and :mod:`nets.config` (never torch, never numba),
so ``import nets.numpy_net`` plus :meth:`NumpyNet.load` takes well under 0.5 s.

:func:`export_numpy` (which imports torch lazily) writes an uncompressed ``.npz`` whose
arrays hold the eval-mode network with every BatchNorm that follows a conv folded into
that conv's weights and bias; BatchNorms that act on a residual sum (and so cannot be
folded) are stored as per-channel ``scale``/``shift`` pairs. The npz also stores
``__config__`` (NetConfig JSON) and ``__meta__`` (format, encoding version, planes, step).

Internally activations are NHWC float32; 3x3 convs are im2col (nine shifted copies) +
one matmul. Numpy's BLAS may use several threads; under CPU contention set
``OPENBLAS_NUM_THREADS=1`` (before importing numpy) for steadier single-position latency.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from typing import Any

import numpy as np

from nets.config import ENCODING_VERSION, NetConfig, encoding_mismatch, export_shapes

__all__ = ["NUMPY_FORMAT", "NUMPY_FORMAT_VERSION", "NumpyNet", "export_numpy"]

NUMPY_FORMAT = "c4fast-numpy-net"
NUMPY_FORMAT_VERSION = 1


# --------------------------------------------------------------------------- export


def _fold_bn(bn) -> tuple[np.ndarray, np.ndarray]:
    """Eval-mode BatchNorm2d as y = x * scale + shift (per channel)."""
    var = bn.running_var.detach().cpu().double()
    mean = bn.running_mean.detach().cpu().double()
    gamma = bn.weight.detach().cpu().double() if bn.weight is not None else 1.0
    beta = bn.bias.detach().cpu().double() if bn.bias is not None else 0.0
    scale = gamma / (var + bn.eps).sqrt()
    shift = beta - mean * scale
    return scale.numpy(), shift.numpy()


def _conv_mat(conv, scale=None) -> np.ndarray:
    """Conv2d weight (Cout, Cin, k, k) -> matrix (k*k*Cin, Cout) in (ky, kx, cin) row order,
    output columns multiplied by `scale` (a folded following BatchNorm)."""
    w = conv.weight.detach().cpu().double().numpy()
    if scale is not None:
        w = w * scale[:, None, None, None]
    cout, cin, kh, kw = w.shape
    return w.transpose(2, 3, 1, 0).reshape(kh * kw * cin, cout)


def _linear_mat(lin, scale=None) -> np.ndarray:
    """Linear weight (out, in) -> (in, out), output columns scaled by `scale`."""
    w = lin.weight.detach().cpu().double().numpy()
    if scale is not None:
        w = w * scale[:, None]
    return w.T


def _export_arrays(model) -> dict[str, np.ndarray]:
    a: dict[str, np.ndarray] = {}
    a["input.w"] = _conv_mat(model.input_conv)
    a["input.b"] = model.input_conv.bias.detach().cpu().double().numpy()
    for i, blk in enumerate(model.blocks):
        p = f"b{i}."
        a[p + "in.s"], a[p + "in.t"] = _fold_bn(blk.norm_in)
        a[p + "reduce.w"] = _conv_mat(blk.reduce)
        for j, rb in enumerate(blk.inner):
            q = f"{p}r{j}."
            a[q + "n1.s"], a[q + "n1.t"] = _fold_bn(rb.norm1)
            s2, t2 = _fold_bn(rb.norm2)
            a[q + "conv1.w"] = _conv_mat(rb.conv1, s2)
            a[q + "conv1.b"] = t2
            if rb.c_gpool:
                sg, tg = _fold_bn(rb.gnorm)
                a[q + "gconv.w"] = _conv_mat(rb.gconv, sg)
                a[q + "gconv.b"] = tg
                a[q + "glin.w"] = _linear_mat(rb.glinear, s2)
            a[q + "conv2.w"] = _conv_mat(rb.conv2)
        a[p + "out.s"], a[p + "out.t"] = _fold_bn(blk.norm_out)
        a[p + "expand.w"] = _conv_mat(blk.expand)
    a["trunk.s"], a["trunk.t"] = _fold_bn(model.trunk_norm)
    ph = model.policy_head
    s, t = _fold_bn(ph.norm)
    a["p.conv.w"], a["p.conv.b"] = _conv_mat(ph.conv_p, s), t
    a["p.glin.w"] = _linear_mat(ph.glinear, s)
    sg, tg = _fold_bn(ph.norm_g)
    a["p.gconv.w"], a["p.gconv.b"] = _conv_mat(ph.conv_g, sg), tg
    a["p.out.w"] = _conv_mat(ph.conv_out)
    vh = model.value_head
    s, t = _fold_bn(vh.norm)
    a["v.conv.w"], a["v.conv.b"] = _conv_mat(vh.conv, s), t
    a["v.fc1.w"], a["v.fc1.b"] = _linear_mat(vh.fc1), vh.fc1.bias.detach().cpu().double().numpy()
    a["v.fc2.w"], a["v.fc2.b"] = _linear_mat(vh.fc2), vh.fc2.bias.detach().cpu().double().numpy()
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in a.items()}


def export_numpy(model_or_checkpoint_path, out_path: str | os.PathLike) -> str:
    """Write the torch-free ``.npz`` for a :class:`nets.model.Net` or a checkpoint path.

    Imports torch lazily. The file is written atomically; returns `out_path`.
    """
    import torch  # noqa: F401  (lazy: only the exporter needs torch)

    from c4fast.runtime import atomic_write
    from nets.checkpoint import load_checkpoint

    step = None
    if isinstance(model_or_checkpoint_path, (str, os.PathLike)):
        model, config, meta = load_checkpoint(model_or_checkpoint_path)
        step = meta.get("step")
    else:
        model = model_or_checkpoint_path
        model = getattr(model, "_orig_mod", model)
        config = model.config
    arrays = _export_arrays(model)  # tensors are copied to CPU; the model is not moved
    meta = {
        "format": NUMPY_FORMAT,
        "format_version": NUMPY_FORMAT_VERSION,
        "encoding_version": ENCODING_VERSION,
        "num_planes": int(config.in_planes),
        "step": step,
    }
    arrays["__config__"] = np.array(json.dumps(config.to_dict()))
    arrays["__meta__"] = np.array(json.dumps(meta))
    atomic_write(out_path, lambda f: np.savez(f, **arrays))
    return os.fspath(out_path)


# --------------------------------------------------------------------------- reading

_TEXT_MEMBER_BYTES = 65_536  # bound of the __config__ and __meta__ members (JSON text)
_NPY_HEADER_BYTES = 4_096  # room for a .npy member's header beyond its data


def _member(zf: zipfile.ZipFile, name: str, shape: tuple, dtype: np.dtype, path: str) -> np.ndarray:
    """Array `name` of an export, refused unless its zip entry's declared size and its .npy
    header's shape and dtype are the expected ones (checked before its data is read)."""
    info = zf.getinfo(name + ".npy")
    nbytes = math.prod(shape) * dtype.itemsize
    if info.file_size > nbytes + _NPY_HEADER_BYTES:
        raise ValueError(f"{path!r} member {name!r} declares {info.file_size:,} bytes; "
                         f"at most {nbytes + _NPY_HEADER_BYTES:,} expected")
    with zf.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"{path!r} member {name!r} has .npy version {version}, not 1.0 or 2.0")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        got_shape, fortran, got_dtype = read_header(f)
        if tuple(got_shape) != tuple(shape) or got_dtype != dtype or fortran:
            raise ValueError(f"{path!r} member {name!r} is {got_dtype}{list(got_shape)}, "
                             f"expected {dtype}{list(shape)}")
        data = bytearray(nbytes)
        got = f.readinto(data)
        if got != nbytes or f.read(1):
            raise ValueError(f"{path!r} member {name!r} does not hold the {nbytes} bytes of its header's shape")
    return np.frombuffer(data, dtype).reshape(shape)


def _read_export(path: str) -> tuple[NetConfig, dict, dict[str, np.ndarray]]:
    """(config, meta, arrays) of an export; ValueError unless its members are exactly
    ``__config__``, ``__meta__`` (small JSON strings) and the arrays of
    :func:`nets.config.export_shapes` for that config (float32, their shapes)."""
    with zipfile.ZipFile(path) as zf:
        members = {i.filename[:-4] for i in zf.infolist() if i.filename.endswith(".npy")}
        if len(members) != len(zf.infolist()):
            raise ValueError(f"{path!r} is not a c4fast numpy net: it holds members other than .npy arrays")
        texts = {}
        for key in ("__config__", "__meta__"):
            if key not in members:
                raise ValueError(f"{path!r} is not a c4fast numpy net: no {key} member")
            info = zf.getinfo(key + ".npy")
            if info.file_size > _TEXT_MEMBER_BYTES:
                raise ValueError(f"{path!r} member {key!r} declares {info.file_size:,} bytes; "
                                 f"at most {_TEXT_MEMBER_BYTES:,} expected")
            with zf.open(info) as f:
                a = np.lib.format.read_array(f, allow_pickle=False)
            if a.shape != () or a.dtype.kind != "U":
                raise ValueError(f"{path!r} member {key!r} is not a JSON string")
            texts[key] = str(a)
        try:
            stored = json.loads(texts["__config__"])
            meta = json.loads(texts["__meta__"])
        except ValueError as e:
            raise ValueError(f"{path!r} is not a c4fast numpy net: {e}") from None
        if not isinstance(meta, dict) or not isinstance(stored, dict):
            raise ValueError(f"{path!r} is not a c4fast numpy net: __meta__ or __config__ is not a JSON object")
        # the encoding first: a file of another version is refused by name, not by a field bound
        why = encoding_mismatch(meta.get("encoding_version"), meta.get("num_planes"), stored.get("in_planes"))
        if why and meta.get("format") == NUMPY_FORMAT:
            raise ValueError(f"{path!r} does not fit: {why}")
        try:
            config = NetConfig.from_dict(stored)
        except ValueError as e:
            raise ValueError(f"{path!r} is not a c4fast numpy net: {e}") from None
        shapes = export_shapes(config)
        extra = sorted(members - set(shapes) - set(texts))
        missing = sorted(set(shapes) - members)
        if extra or missing:
            raise ValueError(f"{path!r} does not hold the arrays of its config {config.name!r}: "
                             f"missing {missing[:8]}, unexpected {extra[:8]}")
        f32 = np.dtype(np.float32)
        arrays = {k: _member(zf, k, shape, f32, path) for k, shape in shapes.items()}
    return config, meta, arrays


# --------------------------------------------------------------------------- forward


def _conv3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """NHWC (B,H,W,C) 'same' 3x3 conv with matrix w (9C, Cout) -> (B,H,W,Cout)."""
    bsz, h, wd, c = x.shape
    xp = np.zeros((bsz, h + 2, wd + 2, c), np.float32)
    xp[:, 1:-1, 1:-1] = x
    cols = np.empty((bsz, h, wd, 9, c), np.float32)
    for dy in range(3):
        for dx in range(3):
            cols[:, :, :, dy * 3 + dx] = xp[:, dy:dy + h, dx:dx + wd]
    out = cols.reshape(bsz * h * wd, 9 * c) @ w
    if b is not None:
        out += b
    return out.reshape(bsz, h, wd, -1)


def _conv1x1(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    out = x.reshape(-1, x.shape[-1]) @ w
    if b is not None:
        out += b
    return out.reshape(x.shape[:-1] + (w.shape[1],))


def _affine_relu(x: np.ndarray, s: np.ndarray, t: np.ndarray) -> np.ndarray:
    y = x * s
    y += t
    return np.maximum(y, 0.0, out=y)


def _relu_(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def _gpool(x: np.ndarray) -> np.ndarray:
    """NHWC (B,H,W,C) -> (B,3C): mean, mean*(sqrt(H*W)-10)/10, max."""
    h, w = x.shape[1], x.shape[2]
    mean = x.mean(axis=(1, 2), dtype=np.float32)
    mx = x.max(axis=(1, 2))
    return np.concatenate([mean, mean * np.float32((math.sqrt(h * w) - 10.0) / 10.0), mx], axis=1)


class NumpyNet:
    """Eval-mode network from an :func:`export_numpy` file; ``forward`` uses numpy only."""

    def __init__(self, config: NetConfig, arrays: dict[str, np.ndarray], meta: dict[str, Any]):
        self.config = config
        self.meta = meta
        self.p = arrays
        self.encoding_version = meta.get("encoding_version")
        self.num_planes = meta.get("num_planes")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "NumpyNet":
        """Read an exported ``.npz``; ValueError if it is not one or does not fit c4fast.

        The file's encoding version and plane count must be c4fast's and fit the stored
        net's ``in_planes`` (``nets.config.encoding_mismatch``, which does not import numba;
        version 2, the removed parity planes, is refused with a message saying so). Every member is checked before it is read (:func:`_read_export`), so
        a small file that would inflate to gigabytes is refused without allocating them.
        """
        path = os.fspath(path)
        try:
            config, meta, arrays = _read_export(path)
        except (OSError, zipfile.BadZipFile, EOFError) as e:
            raise ValueError(f"{path!r} is not a readable numpy net ({type(e).__name__}: {e})") from None
        if meta.get("format") != NUMPY_FORMAT or meta.get("format_version") != NUMPY_FORMAT_VERSION:
            raise ValueError(
                f"{path!r} has format {meta.get('format')!r} v{meta.get('format_version')!r}; "
                f"expected {NUMPY_FORMAT!r} v{NUMPY_FORMAT_VERSION}"
            )
        why = encoding_mismatch(meta.get("encoding_version"), meta.get("num_planes"), config.in_planes)
        if why:
            raise ValueError(f"{path!r} does not fit: {why}")
        for k, a in arrays.items():
            if not np.isfinite(a).all():
                raise ValueError(f"{path!r} array {k!r} holds non-finite values (NaN or inf)")
        return cls(config, arrays, meta)

    def forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """planes (B, C, H, W) float32 (or 0/1 uint8) -> (policy_logits (B, H, W) float32,
        value_logits (B, 3) float32 = (win, draw, loss) for the side to move; (B, 4) with the
        moves-left head, its 4th column in plies / (H * W): ``nets.config.wdl_outputs``)."""
        planes = np.asarray(planes)
        cfg, p = self.config, self.p
        if planes.ndim != 4 or planes.shape[1] != cfg.in_planes:
            raise ValueError(f"expected planes of shape (B, {cfg.in_planes}, H, W), got {planes.shape}")
        x = np.ascontiguousarray(planes.transpose(0, 2, 3, 1), dtype=np.float32)
        x = _conv3x3(x, p["input.w"], p["input.b"])
        for i in range(cfg.blocks):
            q = f"b{i}."
            h = _conv1x1(_affine_relu(x, p[q + "in.s"], p[q + "in.t"]), p[q + "reduce.w"])
            for j in range(cfg.inner_blocks):
                r = f"{q}r{j}."
                t = _affine_relu(h, p[r + "n1.s"], p[r + "n1.t"])
                a = _conv3x3(t, p[r + "conv1.w"], p[r + "conv1.b"])
                if r + "gconv.w" in p:
                    g = _relu_(_conv3x3(t, p[r + "gconv.w"], p[r + "gconv.b"]))
                    a += (_gpool(g) @ p[r + "glin.w"])[:, None, None, :]
                h = h + _conv3x3(_relu_(a), p[r + "conv2.w"])
            x = x + _conv1x1(_affine_relu(h, p[q + "out.s"], p[q + "out.t"]), p[q + "expand.w"])
        x = _affine_relu(x, p["trunk.s"], p["trunk.t"])
        # policy head
        g = _relu_(_conv1x1(x, p["p.gconv.w"], p["p.gconv.b"]))
        a = _conv1x1(x, p["p.conv.w"], p["p.conv.b"])
        a += (_gpool(g) @ p["p.glin.w"])[:, None, None, :]
        policy = _conv1x1(_relu_(a), p["p.out.w"])[..., 0]
        # value head
        v = _gpool(_relu_(_conv1x1(x, p["v.conv.w"], p["v.conv.b"])))
        v = _relu_(v @ p["v.fc1.w"] + p["v.fc1.b"])
        value = v @ p["v.fc2.w"] + p["v.fc2.b"]
        return np.ascontiguousarray(policy, np.float32), np.ascontiguousarray(value, np.float32)

    __call__ = forward
