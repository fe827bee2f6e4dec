"""The player registry and the board rules: docs/EXTENDING.md's one-file player really is
one file, every command's spec list comes from the registry, and BoardRules keeps the
facts (and the RNG order) the arena's saved games depend on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import c4fast
from c4fast.board import RULES, BoardRules
from c4fast.players import registry
from c4fast.players.bots import RandomPlayer, play_game
from nets.players import make_player

REPO = Path(__file__).resolve().parents[1]


def _extending_example() -> str:
    text = (REPO / "docs" / "EXTENDING.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A directory added to c4fast.players' search path holding docs/EXTENDING.md's
    example as ``leftmost.py``; the registry forgets it afterwards."""
    import c4fast.players as pkg

    (tmp_path / "leftmost.py").write_text(_extending_example())
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    yield tmp_path
    sys.modules.pop("c4fast.players.leftmost", None)


def test_the_documented_player_is_one_file(plugin_dir):
    assert "leftmost" in registry.kinds()
    assert "leftmost[:SKIP]" in registry.spec_help() and "leftmost[:SKIP]" in registry.spec_forms()
    p = make_player("leftmost:1")
    assert p.name == "leftmost:1" and make_player(p.name).name == "leftmost:1"
    game = c4fast.Game(6, 7)
    p.reset(game)
    assert p.choose(game) == 1
    g = play_game(make_player("leftmost"), RandomPlayer(seed=3), c4fast.Game(6, 7))
    assert g.result is not None and g.moves[0] == 0
    with pytest.raises(ValueError, match="SKIP must be >= 0"):
        make_player("leftmost:-1")
    with pytest.raises(ValueError, match="too many parameters"):
        make_player("leftmost:1:2")


def test_every_command_lists_the_registered_kinds():
    help_text = subprocess.run([sys.executable, "-m", "selfplay.cli", "players"], capture_output=True, text=True,
                               timeout=300, check=True).stdout
    for kind in registry.kinds().values():
        assert kind.grammar in help_text
    arena = subprocess.run([sys.executable, "-m", "selfplay.evaluation.arena", "--help"], capture_output=True, text=True,
                           timeout=300, check=True).stdout
    assert all(k.grammar in arena for k in registry.kinds().values())
    readme = (REPO / "README.md").read_text()
    assert all(line in readme for line in registry.spec_help().splitlines()), "README's spec list is stale"


def test_unknown_command_exits_2():
    bad = subprocess.run([sys.executable, "-m", "selfplay.cli", "nonsense"], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "unknown command" in bad.stderr


def test_register_refuses_a_second_builder_for_a_name():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.PlayerKind("uct", "uct", "another", lambda spec, args, ctx: None))
    with pytest.raises(ValueError, match="lower-case word"):
        registry.register(registry.PlayerKind("Bad Name", "x", "x", lambda spec, args, ctx: None))


@pytest.mark.parametrize("spec, why", [
    ("uct:5000001", "over the limit of 5000000"),
    ("alphabeta:3601", "over the limit of 3600"),
    ("alphabeta:1:65", "over the limit of 64"),
    ("net:models/c4fast_cpu.npz:5000001", "over the limit of 5000000"),
    ("net:models/c4fast_cpu.npz:3601s", "over the limit of 3600"),
    ("net:models/c4fast_cpu.npz:leaves_per_step=257", "over the limit of 256"),
])
def test_budgets_are_bounded_per_kind(spec, why):
    with pytest.raises(registry.SpecError, match=why):
        make_player(spec)


def test_smaller_limits_apply():
    small = registry.SpecLimits(playouts=1000, rollouts=1000, seconds=1.0)
    with pytest.raises(registry.SpecError, match="over the limit of 1000"):
        make_player("uct:1001", limits=small)
    with pytest.raises(registry.SpecError, match="over the limit of 1000"):
        make_player("net:models/c4fast_cpu.npz:1001", limits=small)
    assert make_player("uct:1000", limits=small).name == "uct:1000"


# ------------------------------------------------------------------------ board rules
def test_board_rules_facts():
    assert RULES.saiblo_sizes == tuple((h, w) for h in range(9, 13) for w in range(9, 13))
    assert c4fast.SAIBLO_SIZES == RULES.saiblo_sizes and RULES.sides == "4..12"
    assert RULES.parse_sizes("saiblo") == RULES.saiblo_sizes
    assert RULES.parse_sizes("6x7, 12x4") == ((6, 7), (12, 4))
    for bad in ("3x7", "6x13", "6by7", "6x"):
        with pytest.raises(ValueError):
            RULES.parse_sizes(bad)
    with pytest.raises(ValueError, match="4..12"):
        RULES.check_size(13, 7)
    with pytest.raises(ValueError):
        BoardRules(saiblo_sides=(9, 13))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), forbidden=st.booleans())
def test_draw_keeps_the_arena_rng_order(seed, forbidden):
    """Reference: the order the arena used before BoardRules (size index, row, column)."""
    sizes = ((6, 7), (9, 12), (12, 12))
    ref = np.random.default_rng(seed)
    h, w = sizes[int(ref.integers(len(sizes)))]
    cell = (int(ref.integers(h)), int(ref.integers(w)))
    got = RULES.draw(np.random.default_rng(seed), sizes, forbidden)
    assert got == (h, w, cell if forbidden else None)
    game = c4fast.Game(*got)  # always a legal setup
    assert (game.height, game.width) == (h, w)
