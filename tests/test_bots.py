"""The baseline players of c4fast.players.bots: tactics, legality, determinism, strength."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from c4fast import Game
from c4fast.players import bots
from nets.players import make_player
from c4fast.players import solver as sv


def landing_row(g: Game, col: int) -> int:
    """Row where a stone dropped into `col` lands (the forbidden cell shows as -1)."""
    return g.board()[:, col].tolist().index(0)


def winning_columns(g: Game, player: int) -> list[int]:
    cells = g.winning_cells(player)
    return [c for c in g.legal_moves() if (landing_row(g, c), c) in cells]


def random_game_positions(seed: int, sizes=None) -> list[Game]:
    """Every running position of one random game (Saiblo setup by default)."""
    rng = np.random.default_rng(seed)
    if sizes is None:
        g = Game.random(rng)
    else:
        h, w = int(rng.integers(sizes[0], sizes[1] + 1)), int(rng.integers(sizes[0], sizes[1] + 1))
        f = (int(rng.integers(h)), int(rng.integers(w))) if rng.random() < 0.7 else None
        g = Game(h, w, f)
    out = []
    while g.result is None:
        out.append(g.copy())
        g.play(int(rng.choice(g.legal_moves())))
    return out


def proven_value(g: Game, depth: int) -> int:
    """Alpha-beta value of `g` for the side to move, searched `depth` plies."""
    p = bots.AlphaBetaPlayer(time_budget_s=60, max_depth=depth, seed=0, tt_log2=16)
    p.choose(g)
    return p.analysis().get("value", sv.WIN_BASE)  # no analysis: an immediate win


# ------------------------------------------------------------------------------ greedy
@settings(deadline=None, max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), player_seed=st.integers(0, 1000))
def test_greedy_takes_wins_and_blocks(seed, player_seed):
    greedy = bots.GreedyPlayer(player_seed)
    for g in random_game_positions(seed):
        me, opp = g.to_move, 3 - g.to_move
        col = greedy.choose(g)
        assert col in g.legal_moves()
        wins = winning_columns(g, me)
        if wins:
            assert col in wins, (repr(g), col, wins)
            continue
        threats = winning_columns(g, opp)
        if len(threats) == 1:
            assert col == threats[0], (repr(g), col, threats)


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**32 - 1))
def test_greedy_avoids_giving_a_win_on_top(seed):
    greedy = bots.GreedyPlayer(seed)
    for g in random_game_positions(seed):
        me, opp = g.to_move, 3 - g.to_move
        if winning_columns(g, me) or winning_columns(g, opp):
            continue
        col = greedy.choose(g)
        opp_cells = g.winning_cells(opp)

        def gives(c):
            g2 = g.copy()
            g2.play(c)
            return c in g2.legal_moves() and (landing_row(g2, c), c) in opp_cells

        safe = [c for c in g.legal_moves() if not gives(c)]
        if safe:
            assert col in safe, (repr(g), col, safe)


def test_greedy_prefers_the_centre():
    g = Game(9, 11)
    counts = np.zeros(11, int)
    p = bots.GreedyPlayer(1)
    for _ in range(2000):
        counts[p.choose(g)] += 1
    assert counts.argmax() == 5 and counts[5] > 3 * counts[0] > 0


# --------------------------------------------------------------------------------- UCT
@pytest.mark.parametrize("seed", [1, 2])
def test_uct_finds_a_double_threat(seed):
    # 9x9, X on columns 3 and 4 of the bottom row, O twice on column 8: X to move
    # wins by making an open three (columns 2 or 5), which no single move can stop
    g = Game.from_moves(9, 9, (8, 0), [3, 8, 4, 8])
    col = bots.UCTPlayer(4000, seed=seed).choose(g)
    assert col in (2, 5)
    g2 = g.copy()
    g2.play(col)
    assert proven_value(g2, 4) <= -sv.WIN_BASE  # the opponent is lost
    # and the alpha-beta verification is not vacuous: a quiet move is not winning
    g3 = g.copy()
    g3.play(0)
    assert proven_value(g3, 4) > -sv.WIN_BASE


def test_uct_analysis():
    g = Game.from_moves(9, 10, (0, 0), [4, 5])
    p = bots.UCTPlayer(300, seed=3)
    assert p.analysis() == {}
    col = p.choose(g)
    a = p.analysis()
    assert set(a["visits"]) == set(g.legal_moves())
    assert sum(a["visits"].values()) == 300  # every rollout goes through a root child
    assert a["visits"][col] == max(a["visits"].values())
    assert abs(sum(a["wdl"]) - 1) < 1e-9 and min(a["wdl"]) >= 0


# -------------------------------------------------------------------------- alpha-beta
def _forced_win_positions(n: int, seed: int):
    """Small-board positions where the side to move wins with its 2nd or 3rd stone."""
    rng = np.random.default_rng(seed)
    solver = sv.Solver(20)
    out = []
    while len(out) < n:
        h, w = int(rng.integers(4, 7)), int(rng.integers(4, 8))
        if not sv.fits_one_word(h, w):
            continue
        f = (int(rng.integers(h)), int(rng.integers(w))) if rng.random() < 0.5 else None
        g = Game(h, w, f)
        cells = h * w - (f is not None)
        target = int(rng.integers(cells // 3, cells - 4))
        while g.result is None and g.ply < target:
            g.play(int(rng.choice(g.legal_moves())))
        if g.result is not None or winning_columns(g, g.to_move):
            continue
        s = solver.solve(g)
        top = (cells + 1 - g.ply) // 2  # an immediate win
        if top - 2 <= s < top:
            out.append((g, solver.best_moves(g)))
    return out


def test_alphabeta_finds_forced_wins_in_three():
    for g, best in _forced_win_positions(20, seed=4):
        p = bots.AlphaBetaPlayer(time_budget_s=10, max_depth=12, seed=0, tt_log2=16)
        col = p.choose(g)
        assert col in best, (repr(g), col, best)
        a = p.analysis()
        assert a["exact"] and a["value"] >= sv.WIN_BASE


def test_alphabeta_is_exact_at_full_depth():
    """Near the end of 6x7 games the iterative deepening reaches every leaf: its root
    value is then Pons's score and its move is optimal."""
    solver = sv.Solver(20)
    path = Path(__file__).resolve().parents[1] / "data" / "pons-connect4" / "Test_L3_R1"
    if not path.is_file():
        pytest.skip("no Pons data")
    for moves, score in sv.read_pons_file(path)[:40:2]:
        g = sv.pons_game(moves)
        p = bots.AlphaBetaPlayer(time_budget_s=10, seed=0, tt_log2=16)
        col = p.choose(g)
        assert col in solver.best_moves(g), moves
        a = p.analysis()
        if a.get("exact"):
            assert a["score"] == score, moves


def test_alphabeta_respects_time_budget():
    p = bots.AlphaBetaPlayer(time_budget_s=0.2, seed=0)
    g = Game.from_moves(12, 12, (3, 5), [5, 6, 5])
    p.choose(g)  # load the kernels
    t = time.perf_counter()
    p.choose(g)
    assert time.perf_counter() - t < 1.0
    assert p.analysis()["depth"] >= 2


# -------------------------------------------------------------------- every player
FAST_SPECS = ["random", "greedy", "uct:200", "uct:100:1:sensible", "alphabeta:0.01"]


@settings(deadline=None, max_examples=15)
@given(seed=st.integers(0, 2**32 - 1))
def test_players_return_legal_moves(seed):
    rng = np.random.default_rng(seed)
    positions = random_game_positions(seed, sizes=(4, 12))
    picks = rng.choice(len(positions), size=min(4, len(positions)), replace=False)
    for spec in FAST_SPECS:
        p = make_player(spec, seed=seed)
        assert isinstance(p, bots.Player)
        p.reset(positions[0])
        for i in picks:
            g = positions[i]
            before = g.state.copy()
            col = p.choose(g)
            assert isinstance(col, int) and col in g.legal_moves(), (spec, repr(g), col)
            assert np.array_equal(g.state, before)  # the game is not modified


def test_solver_player_on_small_endgames():
    p = make_player("solver", seed=1)
    solver = sv.Solver(18)
    for g in [x for s in range(6) for x in random_game_positions(s, sizes=(4, 5))][::3]:
        col = p.choose(g)
        assert col in solver.best_moves(g)
        assert p.analysis()["score"] == solver.solve(g)


def test_solver_player_falls_back_on_large_boards():
    p = bots.SolverPlayer(seed=0, fallback_seconds=0.05)
    g = Game.from_moves(9, 9, (0, 4), [4, 4])
    col = p.choose(g)
    assert col in g.legal_moves()
    a = p.analysis()
    assert a["fallback"] and not a["exact"]
    # with max_empty given, small boards fall back too
    p = bots.SolverPlayer(seed=0, max_empty=3, fallback_seconds=0.05)
    p.choose(Game(5, 6))
    assert p.analysis()["fallback"]


def test_finished_game_is_refused():
    g = Game.from_moves(6, 7, None, [0, 1, 0, 1, 0, 1, 0])
    for spec in FAST_SPECS + ["solver"]:
        with pytest.raises(ValueError, match="over"):
            make_player(spec, seed=0).choose(g)


@pytest.mark.parametrize("spec", ["random", "greedy", "uct:300", "alphabeta:30:3"])
def test_determinism_for_a_seed(spec):
    positions = [g for s in range(3) for g in random_game_positions(100 + s)][::4]
    a = make_player(spec, seed=42)
    b = make_player(spec, seed=42)
    moves_a = [a.choose(g) for g in positions]
    moves_b = [b.choose(g) for g in positions]
    assert moves_a == moves_b
    if spec != "alphabeta:30:3":  # alpha-beta only randomises between equal values
        c = make_player(spec, seed=43)
        assert [c.choose(g) for g in positions] != moves_a


# ------------------------------------------------------------------------- factory
@pytest.mark.parametrize(
    "spec, cls, name",
    [
        ("random", bots.RandomPlayer, "random"),
        ("greedy", bots.GreedyPlayer, "greedy"),
        (" Greedy ", bots.GreedyPlayer, "greedy"),
        ("uct", bots.UCTPlayer, "uct:2000"),
        ("uct:500", bots.UCTPlayer, "uct:500"),
        ("uct:500:2", bots.UCTPlayer, "uct:500:2"),
        ("uct:500:1.4:sensible", bots.UCTPlayer, "uct:500:1.4:sensible"),
        ("alphabeta", bots.AlphaBetaPlayer, "alphabeta:0.5"),
        ("alphabeta:0.25", bots.AlphaBetaPlayer, "alphabeta:0.25"),
        ("alphabeta:1:8", bots.AlphaBetaPlayer, "alphabeta:1:8"),
        ("solver", bots.SolverPlayer, "solver"),
    ],
)
def test_make_player(spec, cls, name):
    p = make_player(spec, seed=0)
    assert isinstance(p, cls) and p.name == name
    assert make_player(p.name, seed=0).name == name  # names are specs again


@pytest.mark.parametrize(
    "spec, why",
    [
        ("", "unknown"),
        ("minimax", "unknown"),
        ("random:3", "no parameters"),
        ("uct:abc", "integer"),
        ("uct:0", ">= 1"),
        ("uct:1.5", "integer"),
        ("uct:10:-1", ">= 0"),
        ("uct:1:2:3", "sensible"),
        ("uct:1:2:sensible:4", "too many"),
        ("alphabeta:-1", "> 0"),
        ("alphabeta:nan", "finite"),
        ("alphabeta:x", "number"),
        ("alphabeta:1:0", ">= 1"),
        (None, "string"),
    ],
)
def test_make_player_errors(spec, why):
    with pytest.raises(ValueError, match=why) as e:
        make_player(spec)
    assert "valid forms" in str(e.value)


def test_constructor_errors():
    with pytest.raises(ValueError):
        bots.UCTPlayer(0)
    with pytest.raises(ValueError):
        bots.AlphaBetaPlayer(0)
    with pytest.raises(ValueError):
        bots.AlphaBetaPlayer(1, max_depth=0)


# --------------------------------------------------------------------------- matches
def _match_score(a_spec: str, b_spec: str, games: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    a = make_player(a_spec, seed=seed)
    b = make_player(b_spec, seed=seed + 1)
    score = 0.0
    for i in range(games):
        g0 = Game.random(rng)
        if i % 2 == 0:
            r = bots.play_game(a, b, g0).result
            score += {1: 1.0, 0: 0.5, 2: 0.0}[r]
        else:
            r = bots.play_game(b, a, g0).result
            score += {2: 1.0, 0: 0.5, 1: 0.0}[r]
    return score / games


def test_greedy_beats_random():
    assert _match_score("greedy", "random", 40, seed=1) >= 0.9


def test_uct_beats_random():
    assert _match_score("uct:500", "random", 40, seed=2) >= 0.9


def test_alphabeta_beats_greedy():
    assert _match_score("alphabeta:0.02", "greedy", 6, seed=3) >= 5 / 6


def test_play_game_plays_to_the_end():
    g0 = Game(6, 7)
    g = bots.play_game(bots.RandomPlayer(0), bots.RandomPlayer(1), g0)
    assert g.result is not None and g0.ply == 0
    assert Game.from_moves(6, 7, None, g.moves).result == g.result


# ----------------------------------------------------------------------------- bench
def test_bench_entry(capsys):
    from selfplay.bench import rules as bench

    assert bench.main(["bots", "--seconds", "0.02"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["bench"] == "bots"
    assert set(rec["choose_per_s"]) == {"random", "greedy", "uct:500", "uct:2000", "alphabeta:0.1"}
    assert rec["greedy_vs_random_games_per_s"] > 0
