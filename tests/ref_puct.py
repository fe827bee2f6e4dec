"""A tiny, readable PUCT tree search for ONE game: the reference for ``c4fast.mcts``.

Plain Python objects, one leaf per step, no virtual loss, no Dirichlet noise, no
forced playouts. It uses :class:`c4fast.Game` for the rules only and never imports
``c4fast.mcts``. The conventions are those of the ``c4fast.mcts`` module docstring:

* every node stores ``value_sum`` from the view of the player who moved INTO it;
* a playout descends from the root by the PUCT score
  ``Q + c_puct * P * sqrt(1 + S) / (1 + n)`` (``n`` child visits, ``S`` the sum of
  the siblings' visits), ties to the lowest column; an unvisited child takes the FPU
  value ``Q(parent) - fpu_reduction * sqrt(prior mass of the visited siblings)`` with
  ``Q(parent) = -(parent value_sum / parent visits)``;
* a playout stops at an unexpanded node (evaluated once, expanded, its value
  ``-(win - loss)`` backed up with alternating sign) or at a terminal node (a win for
  the mover backs up ``+1``, a draw ``0``); the leaf value ``win - loss`` is rounded
  to float32 like the Numba kernel's;
* the root's own evaluation is the first playout;
* expansion creates children for the sensible columns (or all legal columns), with
  softmax priors of the logits at each column's landing cell, rounded to float32
  exactly like ``expand_node``; a root policy temperature ``T`` replaces the root
  priors by ``p ** (1 / T)`` renormalised, rounded like ``prepare_root``.

The evaluator is a function ``evaluate(game) -> (logits (H, W), wdl (3,))`` where
``wdl`` is (win, draw, loss) for the side to move, or ``wdl (4,)`` with the estimated plies
to the game's end last. Moves-left utility (``SearchConfig.moves_left_slope`` > 0, Lc0's,
written here from its definition): every node keeps ``ml_sum``, the sum over its playouts
of the plies from its position to the end (the leaf's estimate, 0 at a terminal, one more
per ply up the path); at a node whose ``|Q|`` exceeds the threshold, a visited child c
adds ``u = -Q(c) * clip(slope * (1 + M(c) - M(node)), -cap, cap)`` to its PUCT score
(M = ml_sum / visits, Q(c) for the side choosing).
"""

from __future__ import annotations

import math

import numpy as np

from c4fast import Game

NOT_TERMINAL = 0
TERMINAL_WIN = 1
TERMINAL_DRAW = 2


class Node:
    __slots__ = ("move", "prior", "terminal", "visits", "value_sum", "draw_sum", "ml_sum", "children")

    def __init__(self, move: int, prior, terminal: int = NOT_TERMINAL):
        self.move = move
        self.prior = np.float32(prior)
        self.terminal = terminal
        self.visits = 0
        self.value_sum = 0.0
        self.draw_sum = 0.0
        self.ml_sum = 0.0
        self.children: list[Node] | None = None  # ascending columns once expanded

    def q(self) -> float:
        """Mean value from the view of the player who moved into this node."""
        return self.value_sum / self.visits


def landing_row(game: Game, col: int) -> int:
    """The row a stone dropped into `col` lands on (skips the forbidden cell)."""
    board = game.board()
    for row in range(game.height):
        if board[row, col] == 0:
            return row
    raise ValueError(f"column {col} is full")


def float_sum(values) -> float:
    """Left-to-right float64 sum (Python's sum() compensates rounding since 3.12)."""
    total = 0.0
    for v in values:
        total += v
    return total


def softmax_priors(logits: np.ndarray, game: Game, cols: list[int]) -> list[np.float32]:
    """Priors of `cols` rounded as in expand_node: each exp is stored as float32, then
    divided in float64 by the float64 total of the unrounded exps, stored as float32."""
    vals = [float(np.float32(logits[landing_row(game, c), c])) for c in cols]
    mx = max(vals)
    exps = [math.exp(v - mx) for v in vals]
    total = float_sum(exps)
    return [np.float32(float(np.float32(e)) / total) for e in exps]


def tempered(priors: list[np.float32], temperature: float) -> list[np.float32]:
    """p ** (1 / T) renormalised, rounded as in prepare_root."""
    if temperature == 1.0:
        return list(priors)
    inv = 1.0 / temperature
    powers = [float(p) ** inv if p > 0 else 0.0 for p in priors]
    total = float_sum(powers)
    stored = [np.float32(q) for q in powers]
    if total <= 0.0:
        return stored
    return [np.float32(float(s) / total) for s in stored]


def expand(node: Node, game: Game, logits: np.ndarray, sensible: bool) -> None:
    cols = game.sensible_moves() if sensible else game.legal_moves()
    mover = game.to_move
    node.children = []
    for col, prior in zip(cols, softmax_priors(logits, game, cols)):
        after = game.copy()
        after.play(col)
        if after.result == mover:
            terminal = TERMINAL_WIN
        elif after.result == 0:
            terminal = TERMINAL_DRAW
        else:
            terminal = NOT_TERMINAL
        node.children.append(Node(col, prior, terminal))


def moves_left_utility(q: float, extra_plies: float, slope: float, cap: float) -> float:
    """Lc0's bounded moves-left utility: the chooser's value `q` times the clipped extra
    length, negated (a winner gains by shorter games, a loser by longer ones)."""
    return -q * min(cap, max(-cap, slope * extra_plies))


def select_child(node: Node, c_puct: float, fpu_reduction: float, ml: tuple = (0.0, 0.0, 0.0)) -> Node:
    """`ml`: (slope, cap, threshold) of the moves-left utility (slope 0: off)."""
    slope, cap, threshold = ml
    kids = node.children
    total = float(sum(k.visits for k in kids))
    visited_mass = float_sum(float(k.prior) for k in kids if k.visits > 0)
    parent_q = -node.value_sum / node.visits
    fpu = parent_q - fpu_reduction * math.sqrt(visited_mass)
    sqrt_total = math.sqrt(1.0 + total)
    decisive = slope > 0 and abs(parent_q) > threshold
    best, best_score = None, -math.inf
    for k in kids:  # ascending columns: strict '>' keeps the lowest on ties
        q = k.q() if k.visits > 0 else fpu
        score = q + c_puct * float(k.prior) * sqrt_total / (1.0 + k.visits)
        if decisive and k.visits > 0:
            score += moves_left_utility(k.q(), 1.0 + k.ml_sum / k.visits - node.ml_sum / node.visits, slope, cap)
        if score > best_score:
            best, best_score = k, score
    return best


def backup(path: list[Node], value: float, draw: float, moves_left: float = 0.0) -> None:
    """`value` is from the view of the mover into path[-1]; the sign flips per ply;
    `moves_left` (plies from path[-1]'s position to the end) grows by one per ply."""
    for node in reversed(path):
        node.visits += 1
        node.value_sum += value
        node.draw_sum += draw
        node.ml_sum += moves_left
        value = -value
        moves_left += 1.0


def search(
    game: Game,
    evaluate,
    playouts: int,
    *,
    c_puct: float = 1.1,
    fpu_reduction: float = 0.2,
    sensible: bool = True,
    root_temp: float = 1.0,
    root: Node | None = None,
    moves_left: tuple = (0.0, 0.0, 0.0),
) -> Node:
    """Search `game` (a running game) until the root has `playouts` visits; returns the
    root. `root` continues an earlier tree of this position (tree reuse: its visits
    count, and the root temperature applies to its children's priors now)."""
    if game.result is not None:
        raise ValueError("cannot search a finished game")
    if root is None:
        root = Node(-1, 1.0)
    elif root.children is not None:
        apply_root_temperature(root, root_temp)
    while root.visits < playouts:
        node, pos, path = root, game.copy(), [root]
        while node.children is not None and node.terminal == NOT_TERMINAL:
            node = select_child(node, c_puct, fpu_reduction, moves_left)
            pos.play(node.move)
            path.append(node)
        if node.terminal == TERMINAL_WIN:
            backup(path, 1.0, 0.0)
        elif node.terminal == TERMINAL_DRAW:
            backup(path, 0.0, 1.0)
        else:
            logits, wdl = evaluate(pos)
            expand(node, pos, logits, sensible)
            win, draw, loss = (np.float32(x) for x in wdl[:3])
            # win - loss in float32, as in expand_and_backup_kernel: Numba's float() of a
            # float32 stays float32, so the subtraction there is rounded to float32
            value = float(np.float32(win - loss))
            backup(path, -value, float(draw), float(np.float32(wdl[3])) if len(wdl) > 3 else 0.0)
            if node is root:
                apply_root_temperature(root, root_temp)
    return root


def apply_root_temperature(root: Node, root_temp: float) -> None:
    for kid, p in zip(root.children, tempered([k.prior for k in root.children], root_temp)):
        kid.prior = p


def search_with_config(game: Game, evaluate, playouts: int, config, root_temp: float = 1.0,
                       root: Node | None = None) -> Node:
    """`search` with the fields of a c4fast SearchConfig."""
    return search(
        game,
        evaluate,
        playouts,
        c_puct=config.c_puct,
        fpu_reduction=config.fpu_reduction,
        sensible=config.sensible,
        root_temp=root_temp,
        root=root,
        moves_left=(config.moves_left_slope, config.moves_left_cap, config.moves_left_threshold)
        if len(evaluate_width(evaluate, game)) > 3 else (0.0, 0.0, 0.0),
    )


def evaluate_width(evaluate, game: Game):
    """The wdl of `evaluate` at `game` (its length says whether it has moves left)."""
    return evaluate(game)[1]


def root_visits(root: Node, width: int) -> np.ndarray:
    """Visits per column (float64, like BatchedMCTS.root_visits)."""
    out = np.zeros(width, np.float64)
    for k in root.children or []:
        out[k.move] = k.visits
    return out


def root_q(root: Node) -> float:
    """Search value for the side to move at the root."""
    return -root.value_sum / root.visits
