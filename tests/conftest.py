"""Shared pytest setup: hypothesis profiles (no deadline: first calls JIT-compile)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.register_profile(
    "thorough", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=600
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def skip_without_instructions(kind: str) -> None:
    """Skip the calling test when this CPU lacks the instructions of engine `kind`'s
    precision (bf16: AVX512-BF16/AMX; int8: VNNI/AMX-INT8): such engines are refused there."""
    import pytest

    from nets.precision import PRECISION_OF, cpu_info

    need = PRECISION_OF.get(kind, "fp32")
    if not cpu_info().has(need):
        pytest.skip(f"this CPU has no {need} instructions (engine {kind})")


def contiguous_trainer(tr) -> None:
    """Trainer `tr`'s net (and ownership head) and inputs in the contiguous layout, its layout
    before channels_last: tests comparing two steps exactly run both in one layout (oneDNN's
    channels_last kernels round differently per shape)."""
    import torch

    tr.channels_last = False
    tr.model.to(memory_format=torch.contiguous_format)
    if tr.own_head is not None:
        tr.own_head.to(memory_format=torch.contiguous_format)
