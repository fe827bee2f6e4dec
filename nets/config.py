"""Network architecture configuration (no torch, no numba: cheap to import).

A :class:`NetConfig` fully determines the parameter shapes of :class:`nets.model.Net`;
checkpoints and numpy exports store it as a plain dict (``to_dict``/``from_dict``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

#: The input encoding every net reads: ``c4fast.ENCODING_VERSION`` and ``c4fast.NUM_PLANES``,
#: mirrored here so that the torch-free player does not pay for importing numba (a test
#: keeps them equal).
ENCODING_VERSION = 1
NUM_PLANES = 9
#: Encoding version 2 appended two parity planes (11 in all); it lost its ablation and was
#: removed after commit 0f5c532 (docs/ABLATIONS.md). Files that record it are refused.
_REMOVED_ENCODINGS = {2: "encoding version 2 (the parity planes, an ablation that was not kept; "
                         "last read by c4fast at commit 0f5c532)"}


def encoding_mismatch(encoding, num_planes, in_planes: int) -> str | None:
    """Why a file recording `encoding` (version) and `num_planes` cannot hold a net that
    reads `in_planes` planes, or None when they fit (checkpoints and ``.npz`` exports)."""
    if encoding in _REMOVED_ENCODINGS:
        return f"it was made for {_REMOVED_ENCODINGS[encoding]}; c4fast reads encoding version {ENCODING_VERSION}"
    if encoding != ENCODING_VERSION:
        return f"encoding version {encoding!r} but c4fast reads version {ENCODING_VERSION}"
    if num_planes != NUM_PLANES:
        return f"num_planes {num_planes!r} but encoding version {ENCODING_VERSION} has {NUM_PLANES}"
    if in_planes != num_planes:
        return f"config in_planes {in_planes} but num_planes {num_planes}"
    return None


#: The moves-left output's unit (``NetConfig.moves_left``): the net's 4th value output m is
#: plies left divided by the board's cells, so its target lies in [0, 1) on every board size;
#: every forward path reports ``max(m, 0) * H * W`` plies (:func:`wdl_outputs`,
#: ``nets.model.torch_wdl_outputs``).
MOVES_LEFT_UNIT = "plies / (H * W)"


def wdl_outputs(value, cells: int):
    """Value-head logits (B, 3) or (B, 4) (numpy) -> what evaluators return: (win, draw,
    loss) probabilities (B, 3) float32 (the row softmax, computed exactly as
    ``c4fast.evaluators.softmax_rows``), or (B, 4) with the moves-left estimate in plies,
    ``max(m, 0) * cells``, as a 4th column (`cells`: H * W of the board)."""
    import numpy as np

    v = np.asarray(value)
    if v.ndim != 2 or v.shape[1] not in (3, 4):
        raise ValueError(f"value logits must be (B, 3) or (B, 4), got {v.shape}")
    x = v[:, :3]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    wdl = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    if v.shape[1] == 3:
        return wdl
    plies = np.maximum(v[:, 3:].astype(np.float32), np.float32(0.0)) * np.float32(cells)
    return np.concatenate([wdl, plies], axis=1)


#: Upper bounds of the :class:`NetConfig` fields, generous (the largest preset has 128
#: channels, 3 blocks and a 128-unit value MLP) but finite, and of the whole net's weights
#: (:func:`export_shapes`; 32 M floats, 128 MB): a checkpoint or an export read from disk
#: cannot make a loader allocate gigabytes before its weights are checked.
NET_LIMITS = {"channels": 512, "blocks": 64, "bottleneck_channels": 512, "inner_blocks": 8,
              "gpool_channels": 256, "policy_channels": 256, "value_channels": 256, "value_hidden": 1024}
MAX_WEIGHTS = 32_000_000


def _check_int(name: str, value: Any, minimum: int = 1) -> None:
    maximum = NET_LIMITS.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"NetConfig.{name} must be an int >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"NetConfig.{name} must be at most {maximum}, got {value}")


@dataclass(frozen=True)
class NetConfig:
    """Shape of a KataGo-style nested-bottleneck policy/value network.

    Fields (all channel counts are feature maps per board cell):

    - ``name``: preset name or "custom" (informational, but compared by checkpoints).
    - ``in_planes``: input planes C of the (B, C, H, W) input (9 for encoding version 1).
    - ``channels``: trunk width.
    - ``blocks``: number of nested-bottleneck blocks in the trunk.
    - ``bottleneck_channels``: width inside each block (default ``channels // 2``).
    - ``inner_blocks``: residual blocks (two 3x3 convs each) inside each bottleneck.
    - ``gpool_channels``: channels of the global-pooling branch in the trunk; taken out of
      ``bottleneck_channels`` in the first inner residual block of each block listed in
      ``gpool_blocks``.
    - ``gpool_blocks``: indices of trunk blocks with global pooling (default: the middle).
    - ``policy_channels``: policy head width (also its global-pooling width).
    - ``value_channels``: value head 1x1 conv width before pooling.
    - ``value_hidden``: hidden units of the value MLP.
    - ``moves_left``: a moves-left output (issue 35, a switch, default off): the value head's
      last layer has 4 outputs instead of 3 — (win, draw, loss) logits, then the expected
      plies until the game ends from the side to move's position, divided by the board's
      H * W cells (:data:`MOVES_LEFT_UNIT`). Off, the net, its checkpoints and exports are
      exactly those of before the switch (``to_dict`` leaves the field out).
    """

    channels: int
    blocks: int
    name: str = "custom"
    in_planes: int = NUM_PLANES
    bottleneck_channels: int | None = None
    inner_blocks: int = 2
    gpool_channels: int = 16
    gpool_blocks: tuple[int, ...] | None = None
    policy_channels: int = 32
    value_channels: int = 32
    value_hidden: int = 64
    moves_left: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"NetConfig.name must be a non-empty str, got {self.name!r}")
        for f in ("in_planes", "channels", "blocks", "inner_blocks", "gpool_channels",
                  "policy_channels", "value_channels", "value_hidden"):
            _check_int(f, getattr(self, f))
        if not isinstance(self.moves_left, bool):
            raise ValueError(f"NetConfig.moves_left must be a bool, got {self.moves_left!r}")
        if self.in_planes != NUM_PLANES:
            raise ValueError(f"NetConfig.in_planes must be {NUM_PLANES} (encoding version {ENCODING_VERSION}), "
                             f"got {self.in_planes}")
        if self.bottleneck_channels is None:
            object.__setattr__(self, "bottleneck_channels", max(1, self.channels // 2))
        _check_int("bottleneck_channels", self.bottleneck_channels)
        if self.gpool_channels >= self.bottleneck_channels:
            raise ValueError(
                f"NetConfig.gpool_channels ({self.gpool_channels}) must be smaller than "
                f"bottleneck_channels ({self.bottleneck_channels})"
            )
        gb = self.gpool_blocks
        if gb is None:
            gb = (self.blocks // 2,)
        try:
            gb = tuple(gb)
        except TypeError:
            raise ValueError(f"NetConfig.gpool_blocks must be a sequence of ints, got {gb!r}") from None
        if not gb:
            raise ValueError("NetConfig.gpool_blocks must name at least one block")
        for i in gb:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.blocks:
                raise ValueError(
                    f"NetConfig.gpool_blocks entry {i!r} is not a block index in 0..{self.blocks - 1}"
                )
        if len(set(gb)) != len(gb):
            raise ValueError(f"NetConfig.gpool_blocks has duplicates: {gb!r}")
        object.__setattr__(self, "gpool_blocks", tuple(sorted(gb)))
        n = sum(math.prod(shape) for shape in export_shapes(self).values())
        if n > MAX_WEIGHTS:
            raise ValueError(f"NetConfig {self.name!r} has {n:,} weights, over the bound of {MAX_WEIGHTS:,}")

    @property
    def value_outputs(self) -> int:
        """Outputs of the value head: 3 (win, draw, loss logits), 4 with ``moves_left``."""
        return 4 if self.moves_left else 3

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible dict (``gpool_blocks`` as a list; ``moves_left`` only when
        on, so that a net without the head records exactly what it did before the switch)."""
        d = dataclasses.asdict(self)
        d["gpool_blocks"] = list(self.gpool_blocks)
        if not self.moves_left:
            del d["moves_left"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NetConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise ValueError."""
        if not isinstance(d, Mapping):
            raise ValueError(f"NetConfig.from_dict needs a mapping, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown NetConfig fields: {unknown}")
        kw = dict(d)
        if kw.get("gpool_blocks") is not None:
            kw["gpool_blocks"] = tuple(kw["gpool_blocks"])
        try:
            return cls(**kw)
        except TypeError as e:  # missing required fields
            raise ValueError(f"bad NetConfig dict: {e}") from None

    def diff(self, other: "NetConfig") -> dict[str, tuple[Any, Any]]:
        """Fields that differ: {field: (self value, other value)}."""
        a, b = self.to_dict(), other.to_dict()
        return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


def export_shapes(config: NetConfig) -> dict[str, tuple[int, ...]]:
    """The arrays of a net's numpy export (:mod:`nets.numpy_net`, BN folded) and their
    shapes, computed from `config` alone (nothing allocated): what a ``.npz`` must hold,
    and the size of the net (its weights, BatchNorm statistics folded away)."""
    c, m, pc, vc = config.channels, config.bottleneck_channels, config.policy_channels, config.value_channels
    s: dict[str, tuple[int, ...]] = {"input.w": (9 * config.in_planes, c), "input.b": (c,)}
    for i in range(config.blocks):
        p = f"b{i}."
        s[p + "in.s"] = s[p + "in.t"] = (c,)
        s[p + "reduce.w"] = (c, m)
        for j in range(config.inner_blocks):
            q = f"{p}r{j}."
            g = config.gpool_channels if j == 0 and i in config.gpool_blocks else 0
            s[q + "n1.s"] = s[q + "n1.t"] = (m,)
            s[q + "conv1.w"], s[q + "conv1.b"] = (9 * m, m - g), (m - g,)
            if g:
                s[q + "gconv.w"], s[q + "gconv.b"], s[q + "glin.w"] = (9 * m, g), (g,), (3 * g, m - g)
            s[q + "conv2.w"] = (9 * (m - g), m)
        s[p + "out.s"] = s[p + "out.t"] = (m,)
        s[p + "expand.w"] = (m, c)
    s["trunk.s"] = s["trunk.t"] = (c,)
    s.update({"p.conv.w": (c, pc), "p.conv.b": (pc,), "p.glin.w": (3 * pc, pc), "p.gconv.w": (c, pc),
              "p.gconv.b": (pc,), "p.out.w": (pc, 1), "v.conv.w": (c, vc), "v.conv.b": (vc,),
              "v.fc1.w": (3 * vc, config.value_hidden), "v.fc1.b": (config.value_hidden,),
              "v.fc2.w": (config.value_hidden, config.value_outputs), "v.fc2.b": (config.value_outputs,)})
    return s


#: Forward paths of an inference server (:mod:`nets.server`, :mod:`nets.backends`);
#: "auto": on the CPU the fastest engine that passes its self-check, measured at start-up
#: (:func:`nets.precision.choose_forward`; fp32, bf16 and int8 engines where the CPU has the
#: instructions), on CUDA BN-folded (``fused``) graphs.
FORWARDS = ("auto", "eager", "fused", "compiled", "numpy", "ort", "ort_int8", "bf16", "ov", "ov_bf16")
CPU_ONLY_FORWARDS = ("numpy", "ort", "ort_int8", "bf16", "ov", "ov_bf16")

#: Forward paths of a network player (:func:`nets.netplayer.load_evaluator`): "auto" is the
#: torch-free numpy forward for a ``.npz`` export, and for a ``.pt`` checkpoint OpenVINO bf16
#: on CPUs with bf16 units, else ONNX Runtime (plain torch, ``eager``, where neither is
#: installed; :func:`nets.netplayer.auto_play_forward`). At 0.2 s per move ONNX Runtime runs
#: ~2x the playouts of eager torch on the 2-core CPU, OpenVINO bf16 1.7x ONNX Runtime on the
#: AMX machine (docs/PERFORMANCE.md).
PLAY_FORWARDS = ("auto", "eager", "fused", "numpy", "ort", "ort_int8", "bf16", "ov", "ov_bf16")


PRESETS: dict[str, NetConfig] = {
    # katac4's size: 3 nested-bottleneck blocks of 128 channels (~0.55M parameters).
    "b3c128nbt": NetConfig(
        name="b3c128nbt", channels=128, blocks=3, bottleneck_channels=64, gpool_channels=32,
        gpool_blocks=(1,), policy_channels=32, value_channels=32, value_hidden=128,
    ),
    # Fast on a 2-core CPU (~0.1M parameters).
    "cpu_small": NetConfig(
        name="cpu_small", channels=64, blocks=2, bottleneck_channels=32, gpool_channels=16,
        gpool_blocks=(1,), policy_channels=24, value_channels=24, value_hidden=64,
    ),
    # cpu_small with the moves-left head (NetConfig.moves_left; issue 35, not yet measured).
    "cpu_small_ml": NetConfig(
        name="cpu_small_ml", channels=64, blocks=2, bottleneck_channels=32, gpool_channels=16,
        gpool_blocks=(1,), policy_channels=24, value_channels=24, value_hidden=64, moves_left=True,
    ),
    # For tests (a few thousand parameters).
    "tiny": NetConfig(
        name="tiny", channels=16, blocks=1, bottleneck_channels=8, gpool_channels=4,
        gpool_blocks=(0,), policy_channels=8, value_channels=8, value_hidden=16,
    ),
}


def get_preset(name: str) -> NetConfig:
    """The preset called `name`; ValueError listing the valid names otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown network preset {name!r}; valid presets: {', '.join(sorted(PRESETS))}"
        ) from None
