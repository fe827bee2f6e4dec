"""The c4fast rules engine against the plain-Python reference in ``reference.py``.

* Differential tests: random setups (4..12 rows and columns, Saiblo's 9..12
  most often, with or without a forbidden cell) and random games, compared
  with ``RefGame`` after every move.
* Golden values: perft counts computed once with ``ref_perft`` and written
  here as literals, and Pascal Pons' 6000 benchmark positions.
* Properties: hash (transpositions, no collisions), mirror, copy, errors,
  text display, ``Game.random`` and the Saiblo coordinate conversions.

Hypothesis tests use ``deadline=None`` because first calls JIT-compile.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import c4fast
from reference import NUM_PLANES, RefGame, ref_from_moves, ref_perft

REPO_ROOT = Path(__file__).resolve().parents[1]
PONS_DIR = Path(__file__).resolve().parents[1] / "data" / "pons-connect4"  # the repository copy

MIN_SIZE, MAX_SIZE = 4, 12
SAIBLO_MIN, SAIBLO_MAX = 9, 12
HASH_LIMIT = 2**64

SLOW_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def examples(factor: float) -> int:
    """Example count relative to the loaded hypothesis profile (tests/conftest.py: 60, "thorough" 600)."""
    return max(10, round(settings.default.max_examples * factor))


# --------------------------------------------------------------------------- strategies
# Saiblo's sizes 9..12 come up about two times out of three.
sizes = st.one_of(st.integers(SAIBLO_MIN, SAIBLO_MAX), st.integers(MIN_SIZE, MAX_SIZE))


@st.composite
def setups(draw):
    """(height, width, forbidden): forbidden is None one time in four (shrinks to None)."""
    height = draw(sizes)
    width = draw(sizes)
    forbidden = None
    if draw(st.integers(0, 3)) != 0:
        forbidden = (draw(st.integers(0, height - 1)), draw(st.integers(0, width - 1)))
    return height, width, forbidden


def candidate_moves(ref: RefGame, avoid_wins: bool) -> list[int]:
    """Legal moves; with ``avoid_wins`` the ones that do not win at once, while there are any.

    Avoiding wins makes long games: the board fills up with threats, full
    columns and, now and then, a draw on a big board.
    """
    legal = ref.legal_moves()
    if avoid_wins:
        quiet = [col for col in legal if col not in ref.immediate_wins(ref.to_move)]
        if quiet:
            return quiet
    return legal


@st.composite
def ref_games(draw):
    """A reference game: a random setup, then random legal moves until it ends or a drawn length."""
    height, width, forbidden = draw(setups())
    ref = RefGame(height, width, forbidden)
    avoid_wins = draw(st.booleans())
    length = draw(st.integers(0, height * width))
    for _ in range(length):
        if ref.result is not None:
            break
        ref.play(draw(st.sampled_from(candidate_moves(ref, avoid_wins))))
    return ref


def random_ref_game(
    rng: np.random.Generator, height: int, width: int, forbidden, avoid_wins: bool = False
) -> RefGame:
    """A random game played to its end."""
    ref = RefGame(height, width, forbidden)
    while ref.result is None:
        moves = candidate_moves(ref, avoid_wins)
        ref.play(int(moves[rng.integers(len(moves))]))
    return ref


def random_setup(rng: np.random.Generator, low: int = MIN_SIZE, high: int = MAX_SIZE):
    height = int(rng.integers(low, high + 1))
    width = int(rng.integers(low, high + 1))
    forbidden = None
    if rng.random() < 0.75:
        forbidden = (int(rng.integers(height)), int(rng.integers(width)))
    return height, width, forbidden


# --------------------------------------------------------------------------- helpers
def describe(ref: RefGame) -> str:
    """A copy-pasteable repro of the reference game's position."""
    return f"c4fast.Game.from_moves({ref.height}, {ref.width}, {ref.forbidden}, {ref.moves})"


def c4_game(ref: RefGame) -> "c4fast.Game":
    return c4fast.Game.from_moves(ref.height, ref.width, ref.forbidden, list(ref.moves))


def plane_diff(got: np.ndarray, expected: np.ndarray) -> str:
    lines = []
    for plane in range(expected.shape[0]):
        if not np.array_equal(got[plane], expected[plane]):
            cells = [tuple(int(v) for v in rc) for rc in np.argwhere(got[plane] != expected[plane])]
            lines.append(f"plane {plane}: differs at (row, col) {cells[:8]}")
    return "; ".join(lines)


def assert_matches_reference(game, ref: RefGame) -> None:
    """Every observable of ``game`` equals the reference's (planes etc. only while running)."""
    where = describe(ref)
    assert (game.height, game.width) == (ref.height, ref.width), where
    assert game.forbidden is None or isinstance(game.forbidden, tuple), f"{where}: forbidden {game.forbidden!r}"
    assert game.forbidden == ref.forbidden, where
    assert list(game.moves) == ref.moves, where

    board = game.board()
    assert board.shape == (ref.height, ref.width) and board.dtype == np.int8, where
    assert np.array_equal(board, ref.board()), f"{where}: board\n{board[::-1]}\nexpected\n{ref.board()[::-1]}"
    assert game.result == ref.result, f"{where}: result {game.result} expected {ref.result}"
    for player in (1, 2):
        got = game.winning_cells(player)
        expected = ref.winning_cells(player)
        assert got == expected, (
            f"{where}: winning_cells({player}) extra {sorted(set(got) - expected)}"
            f" missing {sorted(expected - set(got))}"
        )
    assert isinstance(game.hash, int) and 0 <= game.hash < HASH_LIMIT, f"{where}: hash {game.hash!r}"

    if ref.result is None:
        assert game.to_move == ref.to_move, where
        legal = game.legal_moves()
        assert legal == ref.legal_moves(), f"{where}: legal_moves"
        assert isinstance(legal, list) and all(isinstance(col, int) for col in legal), f"{where}: {legal!r}"
        assert game.sensible_moves() == ref.sensible_moves(), (
            f"{where}: sensible_moves {game.sensible_moves()} expected {ref.sensible_moves()}"
        )
        planes = game.planes()
        expected = ref.planes()
        assert planes.shape == (NUM_PLANES, ref.height, ref.width) and planes.dtype == np.float32, where
        assert np.array_equal(planes, expected), f"{where}: {plane_diff(planes, expected)}"


def replay_and_compare(ref: RefGame) -> "c4fast.Game":
    """Play ``ref``'s moves on a fresh c4fast game, comparing after every move."""
    game = c4fast.Game(ref.height, ref.width, ref.forbidden)
    shadow = RefGame(ref.height, ref.width, ref.forbidden)
    assert_matches_reference(game, shadow)
    for col in ref.moves:
        game.play(col)
        shadow.play(col)
        assert_matches_reference(game, shadow)
    return game


def state_of(game) -> tuple:
    """Everything observable about ``game``, for checks that it did not change."""
    return (
        game.board().tobytes(),
        tuple(game.moves),
        game.result,
        game.hash,
        tuple(game.legal_moves()),
    )


def landing_row(board: np.ndarray, col: int) -> int | None:
    empty = np.flatnonzero(board[:, col] == 0)
    return int(empty[0]) if empty.size else None


def immediate_wins(game, player: int) -> list[int]:
    """Columns where ``player``'s stone would land on one of ``game``'s winning cells."""
    board = game.board()
    cells = game.winning_cells(player)
    return [col for col in game.legal_moves() if (landing_row(board, col), col) in cells]


# --------------------------------------------------------------------------- constants
def test_encoding_constants():
    assert c4fast.NUM_PLANES == NUM_PLANES == 9
    assert c4fast.ENCODING_VERSION == 1


def test_illegal_move_is_a_value_error():
    assert issubclass(c4fast.IllegalMove, ValueError)


# --------------------------------------------------------------------------- differential
@settings(max_examples=examples(2.5), **SLOW_SETTINGS)
@given(ref_games())
def test_random_games_match_reference_after_every_move(ref):
    replay_and_compare(ref)


@pytest.mark.parametrize("height", range(SAIBLO_MIN, SAIBLO_MAX + 1))
def test_seeded_games_on_every_saiblo_size_match_reference(height):
    rng = np.random.default_rng(1000 + height)
    for width in range(SAIBLO_MIN, SAIBLO_MAX + 1):
        for avoid_wins in (False, True):
            forbidden = (int(rng.integers(height)), int(rng.integers(width)))
            replay_and_compare(random_ref_game(rng, height, width, forbidden, avoid_wins))


def test_seeded_games_on_small_boards_reach_draws_and_full_columns():
    """Small boards fill up: full columns, forbidden top cells and draws get exercised."""
    rng = np.random.default_rng(7)
    results = set()
    for _ in range(60):
        height, width, forbidden = random_setup(rng, MIN_SIZE, 5)
        game = replay_and_compare(random_ref_game(rng, height, width, forbidden, avoid_wins=bool(rng.integers(2))))
        results.add(game.result)
    assert results == {0, 1, 2}


@settings(max_examples=examples(1), **SLOW_SETTINGS)
@given(ref_games())
def test_from_moves_equals_playing_one_by_one(ref):
    stepwise = c4fast.Game(ref.height, ref.width, ref.forbidden)
    for col in ref.moves:
        stepwise.play(col)
    at_once = c4_game(ref)
    assert state_of(at_once) == state_of(stepwise), describe(ref)
    assert_matches_reference(at_once, ref)


def test_game_over_has_no_legal_moves():
    for moves, result in (([0, 1, 0, 1, 0, 1, 0], 1), ([0, 1, 0, 1, 0, 1, 2, 1], 2)):
        game = c4fast.Game.from_moves(9, 9, None, moves)
        assert game.result == result
        assert game.legal_moves() == []


def test_outcome_for_scores_every_ply_by_who_placed_the_last_stone():
    """A decided game's last stone is the winner's, so the side to move at ply p wins (0) when
    n - 1 - p is even and loses (2) when odd; every ply of a draw scores 1. Reference games."""
    rng = np.random.default_rng(11)
    results = set()
    for _ in range(60):
        height, width, forbidden = random_setup(rng, MIN_SIZE, 5)
        ref = random_ref_game(rng, height, width, forbidden, avoid_wins=bool(rng.integers(2)))
        n = len(ref.moves)
        results.add(ref.result)
        for ply in range(n):
            expect = 1 if ref.result == 0 else (0 if (n - 1 - ply) % 2 == 0 else 2)
            assert c4fast.outcome_for(ref.result, ply) == expect, (describe(ref), ply)
    assert results == {0, 1, 2}


# --------------------------------------------------------------------------- rules by example
def test_stone_passes_over_forbidden_cell():
    game = c4fast.Game(9, 9, (0, 4))
    game.play(4)
    board = game.board()
    assert board[0, 4] == -1 and board[1, 4] == 1


def test_forbidden_top_cell_makes_column_one_shorter():
    game = c4fast.Game(4, 4, (3, 1))
    for _ in range(3):
        assert 1 in game.legal_moves()
        game.play(1)
    assert game.legal_moves() == [0, 2, 3]
    with pytest.raises(c4fast.IllegalMove):
        game.play(1)


def test_forbidden_cell_breaks_a_line():
    # Player 1 holds row 0, columns 2 3 _ 5 6 around the forbidden cell (0, 4).
    game = c4fast.Game.from_moves(9, 9, (0, 4), [2, 8, 3, 8, 5, 8, 6])
    assert game.result is None
    assert (0, 4) not in game.winning_cells(1)


def test_five_in_a_row_wins():
    game = c4fast.Game.from_moves(9, 9, None, [0, 0, 1, 1, 3, 3, 4, 8])
    assert game.result is None
    game.play(2)  # row 0, columns 0..4
    assert game.result == 1


@pytest.mark.parametrize(
    "moves, winner",
    [
        ([0, 1, 0, 1, 0, 1, 0], 1),  # vertical
        ([0, 0, 1, 1, 2, 2, 3], 1),  # horizontal
        ([0, 1, 1, 2, 2, 3, 2, 3, 3, 8, 3], 1),  # diagonal /
        ([3, 2, 2, 1, 1, 0, 1, 0, 0, 8, 0], 1),  # diagonal \
        ([8, 0, 1, 0, 1, 0, 1, 0], 2),  # vertical, player 2
    ],
)
def test_each_direction_wins(moves, winner):
    game = c4fast.Game.from_moves(9, 9, None, moves)
    assert game.result == winner
    assert ref_from_moves(9, 9, None, moves).result == winner


def test_sensible_moves_by_example():
    # Player 1 to move with row 0 columns 3 4 5: wins in columns 2 and 6.
    game = c4fast.Game.from_moves(10, 11, None, [4, 4, 5, 5, 3, 3, 0, 10])
    assert game.sensible_moves() == [2, 6]
    # Player 2 to move must block both ends of player 1's open three.
    game = c4fast.Game.from_moves(9, 9, None, [4, 8, 5, 8, 3])
    assert game.sensible_moves() == [2, 6]
    # Own win first: both players threaten vertically, player 1 to move.
    game = c4fast.Game.from_moves(9, 9, None, [0, 1, 0, 1, 0, 1])
    assert game.sensible_moves() == [0]
    # Block through the forbidden cell: player 2 threatens (1, 4), reached over (0, 4).
    game = c4fast.Game.from_moves(9, 9, (0, 4), [3, 3, 5, 5, 2, 2, 6, 8])
    assert game.sensible_moves() == [4]


def test_winning_cells_include_unplayable_cells():
    # Player 2 holds row 1 columns 3 4 5 above player 1's row 0: cells (1, 2) and (1, 6) float.
    game = c4fast.Game.from_moves(10, 11, None, [4, 4, 5, 5, 3, 3, 0, 10])
    assert game.winning_cells(2) == {(1, 2), (1, 6)}
    assert game.winning_cells(1) == {(0, 2), (0, 6)}


def test_draw_on_full_board():
    moves = _full_board_draw_4x4()
    game = c4fast.Game.from_moves(4, 4, None, moves)
    assert game.result == 0
    assert game.legal_moves() == []


def _full_board_draw_4x4() -> list[int]:
    # Columns filled bottom-up as X O X O / X O X O / O X O X / O X O X: no four anywhere.
    return [0, 0, 1, 1, 0, 0, 1, 1, 3, 2, 2, 3, 3, 2, 2, 3]


def test_full_board_draw_literal_is_a_draw_in_reference():
    ref = ref_from_moves(4, 4, None, _full_board_draw_4x4())
    assert ref.result == 0 and len(ref.moves) == 16


# --------------------------------------------------------------------------- hash
def _replay_if_legal(height: int, width: int, forbidden, moves: list[int]) -> RefGame | None:
    """The reference game after ``moves``, or None if a move is illegal or comes after the end."""
    ref = RefGame(height, width, forbidden)
    for col in moves:
        if col not in ref.legal_moves():
            return None
        ref.play(col)
    return ref


def _transpositions(moves: list[int], height: int, width: int, forbidden, limit: int = 3) -> list[list[int]]:
    """Orders of ``moves`` with two moves of one player swapped that legally reach the same stones."""
    target = ref_from_moves(height, width, forbidden, moves)
    found = []
    for i in range(len(moves)):
        for j in range(i + 2, len(moves), 2):  # same parity: same player
            if moves[i] == moves[j]:
                continue
            swapped = list(moves)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            ref = _replay_if_legal(height, width, forbidden, swapped)
            if ref is not None and ref.key() == target.key() and ref.result == target.result:
                found.append(swapped)
                if len(found) == limit:
                    return found
    return found


@settings(max_examples=examples(4 / 3), **SLOW_SETTINGS)
@given(ref_games())
def test_hash_equal_for_transpositions(ref):
    base = c4_game(ref)
    for other_moves in _transpositions(ref.moves, ref.height, ref.width, ref.forbidden):
        other = c4fast.Game.from_moves(ref.height, ref.width, ref.forbidden, other_moves)
        assert np.array_equal(other.board(), base.board())
        assert other.hash == base.hash, f"{describe(ref)} vs moves {other_moves}"


def test_hash_equal_for_fixed_transposition():
    a = c4fast.Game.from_moves(9, 9, (0, 4), [0, 8, 1, 8])
    b = c4fast.Game.from_moves(9, 9, (0, 4), [1, 8, 0, 8])
    assert np.array_equal(a.board(), b.board())
    assert a.hash == b.hash
    assert a.hash != c4fast.Game.from_moves(9, 9, (0, 4), [0, 8, 1]).hash


def _collect_hashes(setup_iter, rng, games_per_setup):
    """Map every reached position's key to the set of hashes seen for it."""
    seen: dict[tuple, set[int]] = {}
    for height, width, forbidden in setup_iter:
        for _ in range(games_per_setup):
            game = c4fast.Game(height, width, forbidden)
            while True:
                key = (height, width, forbidden, game.board().tobytes())
                seen.setdefault(key, set()).add(game.hash)
                legal = game.legal_moves()
                if game.result is not None or not legal:
                    break
                game.play(int(legal[rng.integers(len(legal))]))
    return seen


def _assert_hash_is_a_function_without_collisions(seen: dict[tuple, set[int]]) -> None:
    by_hash: dict[int, tuple] = {}
    for key, hashes in seen.items():
        assert len(hashes) == 1, f"one position, several hashes: {key[:3]} {hashes}"
        (value,) = hashes
        assert 0 <= value < HASH_LIMIT
        other = by_hash.setdefault(value, key)
        assert other == key, f"hash {value} shared by {other[:3]} and {key[:3]} (different boards)"


def test_hash_of_positions_within_a_setup():
    """Same stones -> same hash (small boards transpose a lot); different stones -> different hash."""
    rng = np.random.default_rng(11)
    setups_ = [(4, 4, None), (4, 5, (0, 2)), (5, 4, (4, 3)), (9, 9, (0, 4)), (12, 12, None), (10, 11, (5, 7))]
    seen = _collect_hashes(setups_, rng, games_per_setup=40)
    assert len(seen) > 3000
    for setup in setups_:
        _assert_hash_is_a_function_without_collisions({k: v for k, v in seen.items() if k[:3] == setup})


def test_hash_distinct_across_setups():
    """Positions keyed by (height, width, forbidden, board) never share a hash, across setups too."""
    rng = np.random.default_rng(12)
    all_setups = [(h, w, None) for h in range(MIN_SIZE, MAX_SIZE + 1) for w in range(MIN_SIZE, MAX_SIZE + 1)]
    all_setups += [random_setup(rng, SAIBLO_MIN, SAIBLO_MAX) for _ in range(60)]
    all_setups += [(9, 9, (r, c)) for r in range(9) for c in range(9)]
    all_setups = list(dict.fromkeys(all_setups))
    seen = _collect_hashes(all_setups, rng, games_per_setup=1)
    # The same short move list on every setup: stones at identical (row, col) on different boards.
    for height, width, forbidden in all_setups:
        for moves in ([], [0], [0, 1], [1, 0, 1]):
            game = c4fast.Game.from_moves(height, width, forbidden, moves)
            seen.setdefault((height, width, forbidden, game.board().tobytes()), set()).add(game.hash)
    _assert_hash_is_a_function_without_collisions(seen)


# --------------------------------------------------------------------------- mirror
@settings(max_examples=examples(4 / 3), **SLOW_SETTINGS)
@given(ref_games())
def test_mirror_matches_reference_and_is_an_involution(ref):
    game = c4_game(ref)
    before = state_of(game)
    mirrored = game.mirror()
    assert state_of(game) == before, "mirror() changed the original"
    assert list(mirrored.moves) == [ref.width - 1 - c for c in ref.moves]
    assert np.array_equal(mirrored.board(), game.board()[:, ::-1])
    assert_matches_reference(mirrored, ref.mirrored())
    twice = mirrored.mirror()
    assert state_of(twice) == state_of(game), describe(ref)
    assert twice.forbidden == game.forbidden


@settings(max_examples=examples(5 / 6), **SLOW_SETTINGS)
@given(ref_games())
def test_mirror_commutes_with_play(ref):
    game = c4_game(ref)
    width = ref.width
    for col in ref.legal_moves():
        mirror_then_play = game.mirror()
        mirror_then_play.play(width - 1 - col)
        play_then_mirror = game.copy()
        play_then_mirror.play(col)
        play_then_mirror = play_then_mirror.mirror()
        where = f"{describe(ref)} then column {col}"
        assert np.array_equal(mirror_then_play.board(), play_then_mirror.board()), where
        assert mirror_then_play.result == play_then_mirror.result, where
        assert mirror_then_play.hash == play_then_mirror.hash, where
        assert list(mirror_then_play.moves) == list(play_then_mirror.moves), where
        assert mirror_then_play.legal_moves() == play_then_mirror.legal_moves(), where
        if mirror_then_play.result is None:
            assert np.array_equal(mirror_then_play.planes(), play_then_mirror.planes()), where


# --------------------------------------------------------------------------- copy
@settings(max_examples=examples(5 / 6), **SLOW_SETTINGS)
@given(ref_games())
def test_copy_is_independent(ref):
    game = c4_game(ref)
    if game.result is not None:
        copy = game.copy()
        assert state_of(copy) == state_of(game)
        return
    before = state_of(game)
    copy = game.copy()
    assert state_of(copy) == before
    legal = ref.legal_moves()
    copy.play(legal[0])
    assert state_of(game) == before, f"{describe(ref)}: playing on the copy changed the original"
    copy_state = state_of(copy)
    game.play(legal[-1])
    assert state_of(copy) == copy_state, f"{describe(ref)}: playing on the original changed the copy"


def test_moves_returns_a_copy():
    game = c4fast.Game.from_moves(9, 9, None, [4, 4])
    game.moves.append(0)
    assert list(game.moves) == [4, 4]


def test_numpy_integer_columns_are_accepted():
    game = c4fast.Game.from_moves(9, 9, (0, 4), np.array([3, 4], dtype=np.int64))
    game.play(np.int64(5))
    assert list(game.moves) == [3, 4, 5]
    assert np.array_equal(game.board(), ref_from_moves(9, 9, (0, 4), [3, 4, 5]).board())


# --------------------------------------------------------------------------- perft golden values
# (height, width, forbidden, moves, depth, count); counts computed with reference.ref_perft.
PERFT_GOLDEN = [
    (4, 4, None, [], 5, 1020),
    (4, 4, None, [], 8, 57504),
    (6, 7, None, [], 5, 16807),
    (9, 9, (0, 4), [], 4, 6561),
    (12, 12, (11, 0), [], 3, 1728),
    (5, 4, (2, 1), [], 6, 4074),
    # Player 2 threatens (1, 4) over the forbidden cell (0, 4); player 1 to move.
    (9, 9, (0, 4), [3, 3, 5, 5, 2, 2, 6, 8], 4, 5787),
    # Player 1 to move wins in column 2 or 6.
    (10, 11, None, [4, 4, 5, 5, 3, 3, 0, 10], 4, 9999),
]
PERFT_IDS = [f"{h}x{w}-{f}-{len(m)}moves-d{d}" for h, w, f, m, d, _ in PERFT_GOLDEN]


@pytest.mark.parametrize("height, width, forbidden, moves, depth, count", PERFT_GOLDEN, ids=PERFT_IDS)
def test_perft_golden(height, width, forbidden, moves, depth, count):
    game = c4fast.Game.from_moves(height, width, forbidden, moves)
    before = state_of(game)
    assert c4fast.perft(game, depth) == count
    assert state_of(game) == before, "perft changed the game"


@pytest.mark.parametrize("height, width, forbidden, moves, depth, count", PERFT_GOLDEN, ids=PERFT_IDS)
def test_reference_perft_gives_golden_values(height, width, forbidden, moves, depth, count):
    assert ref_perft(ref_from_moves(height, width, forbidden, moves), depth) == count


def test_perft_of_small_depths_and_finished_games():
    game = c4fast.Game(9, 10, (3, 3))
    assert c4fast.perft(game, 0) == 1
    assert c4fast.perft(game, 1) == 10
    finished = c4fast.Game.from_moves(9, 9, None, [0, 1, 0, 1, 0, 1, 0])
    assert c4fast.perft(finished, 0) == 1
    assert c4fast.perft(finished, 1) == 0
    assert c4fast.perft(finished, 3) == 0
    drawn = c4fast.Game.from_moves(4, 4, None, _full_board_draw_4x4())
    assert (c4fast.perft(drawn, 0), c4fast.perft(drawn, 2)) == (1, 0)


@settings(max_examples=examples(0.5), **SLOW_SETTINGS)
@given(ref_games(), st.integers(0, 3))
def test_perft_matches_reference_on_random_positions(ref, depth):
    assert c4fast.perft(c4_game(ref), depth) == ref_perft(ref, depth), describe(ref)


def test_perft_command_line():
    completed = subprocess.run(
        [sys.executable, "-m", "c4fast.perft"]
        + ["--height", "9", "--width", "9", "--forbidden", "0,4", "--depth", "4"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert re.search(r"(?<!\d)6561(?!\d)", completed.stdout), completed.stdout


# --------------------------------------------------------------------------- Pons positions
def _pons_lines():
    if not PONS_DIR.is_dir():
        pytest.skip(f"Pons benchmark data not found at {PONS_DIR}")
    files = sorted(PONS_DIR.glob("Test_L*"))
    if not files:
        pytest.skip(f"no Test_L* files in {PONS_DIR}")
    lines = []
    for path in files:
        for line in path.read_text().splitlines():
            if line.strip():
                moves, score = line.split()
                lines.append((path.name, moves, int(score)))
    return lines


def test_pons_positions_replay_legally_and_are_running():
    lines = _pons_lines()
    assert len(lines) == 6000
    for name, digits, _ in lines:
        moves = [int(d) - 1 for d in digits]
        game = c4fast.Game.from_moves(6, 7, None, moves)
        assert game.result is None, f"{name} {digits}"
        assert list(game.moves) == moves
        assert game.to_move == 1 + len(moves) % 2


def test_pons_positions_boards_match_reference():
    for name, digits, _ in _pons_lines()[::3]:
        moves = [int(d) - 1 for d in digits]
        ref = ref_from_moves(6, 7, None, moves)
        game = c4fast.Game.from_moves(6, 7, None, moves)
        assert np.array_equal(game.board(), ref.board()), f"{name} {digits}"


def test_pons_scores_agree_with_immediate_wins():
    """Pons' score says whether the side to move wins at once, or loses at the opponent's next stone.

    With n stones, score == (43 - n) // 2 exactly when the side to move has an
    immediate win, and (for n < 41) score == -((42 - n) // 2) exactly when it
    has none and every move lets the opponent win at once.
    """
    for name, digits, score in _pons_lines():
        moves = [int(d) - 1 for d in digits]
        n = len(moves)
        game = c4fast.Game.from_moves(6, 7, None, moves)
        me = game.to_move
        wins_now = immediate_wins(game, me)
        assert bool(wins_now) == (score == (43 - n) // 2), f"{name} {digits} score {score}: wins {wins_now}"
        if wins_now:
            assert game.sensible_moves() == wins_now, f"{name} {digits}"
            continue
        loses_next = True
        for col in game.legal_moves():
            child = game.copy()
            child.play(col)
            if child.result is not None or not immediate_wins(child, 3 - me):
                loses_next = False
                break
        fastest_loss = (42 - n) // 2  # 0 when n == 41: indistinguishable from a draw
        if fastest_loss > 0:
            assert loses_next == (score == -fastest_loss), f"{name} {digits} score {score}"


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("col", [-1, 9, 10])
def test_play_off_the_board_raises(col):
    game = c4fast.Game(9, 9, None)
    before = state_of(game)
    with pytest.raises(c4fast.IllegalMove, match=re.escape(str(col))):
        game.play(col)
    assert state_of(game) == before


def test_play_full_column_raises():
    game = c4fast.Game.from_moves(4, 5, None, [3, 3, 3, 3])
    before = state_of(game)
    with pytest.raises(c4fast.IllegalMove, match="3"):
        game.play(3)
    assert state_of(game) == before


def test_play_after_game_over_raises():
    game = c4fast.Game.from_moves(9, 9, None, [0, 1, 0, 1, 0, 1, 0])
    assert game.result == 1
    before = state_of(game)
    with pytest.raises(c4fast.IllegalMove):
        game.play(5)
    assert state_of(game) == before
    draw = c4fast.Game.from_moves(4, 4, None, _full_board_draw_4x4())
    with pytest.raises(c4fast.IllegalMove):
        draw.play(0)


@pytest.mark.parametrize(
    "height, forbidden, moves",
    [
        (9, None, [0, 1, 0, 1, 0, 1, 0, 5]),  # move after a win
        (4, None, [0, 0, 0, 0, 0]),  # full column
        (9, None, [9]),  # off the board (width 9)
        (9, None, [-1]),
        (4, (3, 3), [3, 3, 3, 3]),  # the forbidden top cell (3, 3) leaves three cells
    ],
)
def test_from_moves_illegal_raises(height, forbidden, moves):
    with pytest.raises(c4fast.IllegalMove):
        c4fast.Game.from_moves(height, 9, forbidden, moves)


def test_from_moves_after_draw_raises():
    with pytest.raises(c4fast.IllegalMove):
        c4fast.Game.from_moves(4, 4, None, _full_board_draw_4x4() + [0])


@pytest.mark.parametrize(
    "height, width, bad", [(3, 9, 3), (13, 9, 13), (9, 3, 3), (9, 13, 13), (2, 9, 2), (9, 0, 0)]
)
def test_bad_size_raises(height, width, bad):
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        c4fast.Game(height, width, None)
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        c4fast.Game.from_moves(height, width, None, [])


@pytest.mark.parametrize(
    "forbidden, bad", [((-1, 0), -1), ((9, 0), 9), ((0, 10), 10), ((0, -1), -1), ((11, 11), 11)]
)
def test_forbidden_off_the_board_raises(forbidden, bad):
    # 9 rows x 10 columns: row 9 and column 10 are just off the board.
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        c4fast.Game(9, 10, forbidden)


# --------------------------------------------------------------------------- text
def test_str_top_row_first():
    game = c4fast.Game(4, 4, None)
    game.play(0)
    lines = str(game).splitlines()
    assert lines[0].split() == [".", ".", ".", "."]
    assert lines[3].split() == ["X", ".", ".", "."]
    assert lines[-1].split() == ["0", "1", "2", "3"]


def test_str_marks_forbidden_cell_and_both_players():
    game = c4fast.Game.from_moves(5, 6, (1, 4), [4, 4])
    lines = [line.strip() for line in str(game).splitlines()]
    # Rows from the top: row 4, 3, 2 (player 2 at column 4), 1 (forbidden at column 4), 0 (player 1).
    assert lines[0] == ". . . . . ."
    assert lines[2] == ". . . . O ."
    assert lines[3] == ". . . . # ."
    assert lines[4] == ". . . . X ."
    assert lines[-1] == "0 1 2 3 4 5"


@settings(max_examples=examples(0.5), **SLOW_SETTINGS)
@given(ref_games())
def test_str_matches_reference(ref):
    lines = [line.strip() for line in str(c4_game(ref)).splitlines()]
    assert lines[: ref.height] == ref.text_rows(), describe(ref)
    assert lines[-1] == " ".join(str(c % 10) for c in range(ref.width))


# --------------------------------------------------------------------------- random setups
def test_game_random_setups():
    setups_seen = set()
    for seed in range(50):
        game = c4fast.Game.random(np.random.default_rng(seed))
        again = c4fast.Game.random(np.random.default_rng(seed))
        assert (again.height, again.width, again.forbidden) == (game.height, game.width, game.forbidden)
        assert SAIBLO_MIN <= game.height <= SAIBLO_MAX
        assert SAIBLO_MIN <= game.width <= SAIBLO_MAX
        assert game.forbidden is not None
        row, col = game.forbidden
        assert 0 <= row < game.height and 0 <= col < game.width
        assert list(game.moves) == [] and game.result is None and game.to_move == 1
        assert game.board()[row, col] == -1
        setups_seen.add((game.height, game.width, tuple(game.forbidden)))
    assert len(setups_seen) > 10
    games = [c4fast.Game.random(np.random.default_rng(seed)) for seed in range(300)]
    sizes_seen = {(game.height, game.width) for game in games}
    saiblo = range(SAIBLO_MIN, SAIBLO_MAX + 1)
    assert {h for h, _ in sizes_seen} == set(saiblo) and {w for _, w in sizes_seen} == set(saiblo)
    unseeded = c4fast.Game.random()
    assert SAIBLO_MIN <= unseeded.height <= SAIBLO_MAX and unseeded.forbidden is not None


# --------------------------------------------------------------------------- Saiblo coordinates
@settings(max_examples=examples(3), deadline=None)
@given(st.data())
def test_saiblo_conversions(data):
    height = data.draw(st.integers(MIN_SIZE, MAX_SIZE))
    row = data.draw(st.integers(0, height - 1))
    col = data.draw(st.integers(0, MAX_SIZE - 1))
    x, y = c4fast.to_saiblo(row, col, height)
    assert (x, y) == (height - 1 - row, col)
    assert tuple(c4fast.from_saiblo(x, y, height)) == (row, col)
    assert tuple(c4fast.from_saiblo(row, col, height)) == (height - 1 - row, col)
