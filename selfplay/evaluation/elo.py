"""Elo ratings, score intervals and SPRT from arena game records.

Units and conventions
---------------------
* Elo = 400·log10(odds). A player D Elo above another wins 10**(D/400) decisive games
  for each one it loses. Internally strengths are in natural units (nats,
  1 nat = 400/ln 10 ≈ 173.7 Elo); everything returned is in Elo.
* A game record is a dict with ``"first"`` (name of the player who moved first),
  ``"second"`` and ``"result"``: 1 first player won, 2 second player won, 0 draw.
  Other keys are ignored. The arena writes one record per line (JSON lines).
* Ratings are relative: the anchor player reads exactly 0 and every standard error is
  that of the difference to the anchor.

Model (Davidson 1970 with a first-move advantage)
--------------------------------------------------
With ratings r (Elo), first-move advantage a (Elo), draw parameter ν ≥ 0 and

    x = (r_first + a − r_second) · ln(10)/400,     Z = e^{x/2} + e^{−x/2} + ν,

    P(first wins) = e^{x/2}/Z,   P(second wins) = e^{−x/2}/Z,   P(draw) = ν/Z.

So P(win)/P(loss) = 10^{Δ/400} exactly (Elo is defined on the decisive games), draws
are most frequent between equal players, who draw with probability ν/(2+ν) (colours
aside), and ν = 0 is plain Bradley–Terry. In the natural parameters (x, θ = ln ν) this is
an exponential family, so the log-likelihood is concave and Newton's method with a
backtracking line search finds the maximum-likelihood estimate. With no draws in the
data ν is fixed at 0; when the colour assignments cannot separate a from the ratings
(e.g. every pair always met with the same player moving first) a is fixed at 0; both
cases are reported in ``Ratings.notes``.

Divergent estimates
-------------------
The MLE does not exist when a player (or a group of players) never lost, or never won,
against the rest, or when e.g. the first player won every game. Such parameters are
detected by fitting twice with tiny ridge penalties (1e-4 and 1e-9 per parameter):
bounded estimates do not move, divergent ones move by many nats. Divergent ratings are
listed in ``Ratings.unbounded`` (divergent first-move advantage / draw parameter in
``Ratings.unbounded_params``), reported at the large finite value of the 1e-9 fit
(thousands of Elo; the number itself means nothing) with an infinite standard error,
and a note is added; the remaining parameters are the MLE with the divergent ones at
that value (when several parameters diverge together, as in tiny data sets, the others can
still depend on it: their values and errors are then only indicative). ``prior_games > 0`` (KataGo-style prior: that many virtual games, half won
and half lost, of every player against a virtual opponent at the origin, under the plain
logistic model) keeps all ratings finite; it shrinks ratings towards each other, and the
result is still reported relative to the anchor. A prior too weak for the data (tiny
prior_games, or estimates beyond ~10 000 Elo) can still leave ratings flagged unbounded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

ELO_PER_NAT = 400.0 / math.log(10.0)
FIRST_WINS, SECOND_WINS, DRAW = 1, 2, 0

_EPS_PROBE = 1e-4      # ridge of the first (probing) fit, per parameter, in nats^-2
_EPS_FINAL = 1e-9      # ridge of the second fit; divergent parameters stop around log(N/eps)
_DIVERGED_NATS = 1.0   # a parameter moving more than this between the two fits diverges


# --------------------------------------------------------------------------- records

def _check_record(rec) -> tuple[str, str, int]:
    if type(rec) is not dict and not isinstance(rec, Mapping):
        raise ValueError(f"record must be a JSON object, got {type(rec).__name__}")
    for key in ("first", "second", "result"):
        if key not in rec:
            raise ValueError(f"record lacks key {key!r}")
    first, second, result = rec["first"], rec["second"], rec["result"]
    if not isinstance(first, str) or not isinstance(second, str) or not first or not second:
        raise ValueError(f"'first' and 'second' must be non-empty strings, got {first!r}, {second!r}")
    if isinstance(result, bool) or result not in (0, 1, 2):
        raise ValueError(f"'result' must be 0 (draw), 1 (first won) or 2 (second won), got {result!r}")
    return first, second, int(result)


def games_between(records, a: str, b: str) -> int:
    """How many of `records` are games between players `a` and `b` (either colour)."""
    return sum(1 for r in records if {r["first"], r["second"]} == {a, b})


def parse_record_line(raw: bytes) -> dict | None:
    """The game record on one line of a JSON-lines file (None for a blank line); ValueError
    with the reason for a line that is not UTF-8, not JSON, or not a valid record."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"malformed JSON line ({e.msg})") from None
    _check_record(rec)
    return rec


def load_records(paths) -> list[dict]:
    """Read game records from one path or an iterable of paths (JSON lines).

    Blank lines are skipped. A line that is not JSON, or not a valid record, raises
    ValueError naming the file and the 1-based line number (the first such line).
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    out: list[dict] = []
    for path in paths:
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    rec = parse_record_line(raw)
                except ValueError as e:
                    raise ValueError(f"{os.fsdecode(path)}:{lineno}: {e}") from None
                if rec is not None:
                    out.append(rec)
    return out


# --------------------------------------------------------------------------- model

class _Davidson:
    """Log-likelihood of aggregated games; parameters p = [s_0..s_{n-1}, eta?, theta?] in nats."""

    def __init__(self, fi, si, nw, nd, nl, n, fit_eta, fit_theta, prior):
        self.fi, self.si = fi, si
        self.nw, self.nd, self.nl = nw, nd, nl
        self.N = nw + nd + nl
        self.n = n
        self.ieta = n if fit_eta else None
        self.itheta = n + int(fit_eta) if fit_theta else None
        self.dim = n + int(fit_eta) + int(fit_theta)
        self.prior = prior

    def _probs(self, p):
        x = p[self.fi] - p[self.si]
        if self.ieta is not None:
            x = x + p[self.ieta]
        half = 0.5 * x
        logz = np.logaddexp(half, -half)
        if self.itheta is not None:
            theta = p[self.itheta]
            logz = np.logaddexp(logz, theta)
            pd = np.exp(theta - logz)
        else:
            theta = None
            pd = np.zeros_like(x)
        pw = np.exp(half - logz)
        pl = np.exp(-half - logz)
        return half, theta, logz, pw, pd, pl

    def loglik(self, p) -> float:
        """Log-likelihood of the games alone (no prior, no ridge)."""
        half, theta, logz, *_ = self._probs(p)
        ll = np.sum((self.nw - self.nl) * half - self.N * logz)
        if theta is not None:
            ll += theta * self.nd.sum()
        return float(ll)

    def objective(self, p, eps) -> float:
        f = self.loglik(p)
        if self.prior > 0:
            s = p[: self.n]
            f -= 0.5 * self.prior * float(np.sum(np.logaddexp(0.0, s) + np.logaddexp(0.0, -s)))
        if eps > 0:
            f -= 0.5 * eps * float(p @ p)
        return f

    def grad_hess(self, p, eps):
        n, fi, si = self.n, self.fi, self.si
        half, theta, logz, pw, pd, pl = self._probs(p)
        N = self.N
        diff = pw - pl
        gx = 0.5 * (self.nw - self.nl) - 0.5 * N * diff
        hxx = -N * (0.25 * (pw + pl) - 0.25 * diff * diff)
        dim = self.dim

        def scatter(v):   # Σ_pairs v·(e_first − e_second), as a length-dim vector
            return np.bincount(fi, v, dim) - np.bincount(si, v, dim)

        g = scatter(gx)
        H = (np.bincount(fi * dim + fi, hxx, dim * dim) + np.bincount(si * dim + si, hxx, dim * dim)
             - np.bincount(fi * dim + si, hxx, dim * dim) - np.bincount(si * dim + fi, hxx, dim * dim)
             ).reshape(dim, dim)
        if self.ieta is not None:
            k = self.ieta
            g[k] = gx.sum()
            col = scatter(hxx)
            col[k] = hxx.sum()
            H[:, k] += col
            H[k, :n] += col[:n]
        if self.itheta is not None:
            k = self.itheta
            g[k] = float(np.sum(self.nd - N * pd))
            hxt = N * 0.5 * diff * pd
            col = scatter(hxt)
            if self.ieta is not None:
                col[self.ieta] = hxt.sum()
            col[k] = -float(np.sum(N * pd * (1.0 - pd)))
            H[:, k] += col
            H[k, :k] += col[:k]
        if self.prior > 0:
            s = p[:n]
            sig = 0.5 * (1.0 + np.tanh(0.5 * s))
            g[:n] += self.prior * (0.5 - sig)
            H[np.arange(n), np.arange(n)] -= self.prior * sig * (1.0 - sig)
        if eps > 0:
            g -= eps * p
            H[np.diag_indices(self.dim)] -= eps
        return g, H


def _maximize(model: _Davidson, p0, free, eps, max_iter=300, tol=1e-10):
    """Damped Newton ascent on model.objective over the indices `free`. Returns (p, converged)."""
    p = p0.copy()
    f = model.objective(p, eps)
    if len(free) == 0:
        return p, True
    for _ in range(max_iter):
        g, H = model.grad_hess(p, eps)
        gF = g[free]
        A = -H[np.ix_(free, free)]
        try:   # symmetric eigen-solve: robust when divergent directions make A ill-conditioned
            lam, V = np.linalg.eigh(A)
        except np.linalg.LinAlgError:
            return p, False
        lam = np.maximum(lam, max(lam[-1], 1.0) * 1e-15)
        d = V @ ((V.T @ gF) / lam)
        if not np.all(np.isfinite(d)):
            return p, False
        big = np.max(np.abs(d))
        if big > 10.0:                      # at most 10 nats per parameter per step
            d *= 10.0 / big
        slope = float(gF @ d)
        if slope <= 0:                      # numerically flat: nothing left to gain
            return p, True
        t, accepted = 1.0, False
        for _ in range(60):
            q = p.copy()
            q[free] += t * d
            fq = model.objective(q, eps)
            if fq >= f + 1e-4 * t * slope:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            # No sufficient increase even for tiny steps: converged to rounding level.
            return p, fq >= f - 1e-9 * (1.0 + abs(f)) or slope < 1e-12 * (1.0 + abs(f))
        p, f = q, fq
        if t * np.max(np.abs(d)) < tol:
            return p, True
    return p, False


# --------------------------------------------------------------------------- results

def _finite_or_none(v):
    v = float(v)
    return v if math.isfinite(v) else None


@dataclass
class Ratings:
    """Maximum-likelihood ratings (Elo, relative to ``anchor``) and their uncertainty.

    ``stderr`` is the standard error of each rating minus the anchor's (0 for the anchor,
    inf for an unbounded rating), from the inverse Hessian of the log-likelihood.
    ``first_move_advantage`` (Elo) is added to the first player's rating. ``draw_param`` is
    Davidson's ν: equal players draw with probability ν/(2+ν). ``games``/``wins``/``draws``/
    ``losses`` count each player's games against others (self-play games only inform the
    first-move advantage and ν).
    """

    elo: dict[str, float]
    stderr: dict[str, float]
    first_move_advantage: float
    first_move_advantage_stderr: float
    draw_param: float
    games: dict[str, int]
    wins: dict[str, int]
    draws: dict[str, int]
    losses: dict[str, int]
    anchor: str
    prior_games: float = 0.0
    unbounded: tuple[str, ...] = ()
    unbounded_params: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    log_likelihood: float = 0.0
    total_games: int = 0
    converged: bool = True
    _names: tuple[str, ...] = field(default=(), repr=False, compare=False)
    _cov: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def draw_rate_equal(self) -> float:
        """Draw probability of two equal players (colours aside): ν/(2+ν)."""
        nu = self.draw_param
        return nu / (2.0 + nu) if math.isfinite(nu) else 1.0

    def interval(self, name: str, z: float = 1.96) -> tuple[float, float]:
        """Wald interval elo ± z·stderr (Elo). (0, 0) for the anchor; (-inf, inf) when unbounded."""
        if name not in self.elo:
            raise KeyError(name)
        if name in self.unbounded:
            return (-math.inf, math.inf)
        e, s = self.elo[name], self.stderr[name]
        return (e - z * s, e + z * s)

    def score(self, name: str) -> float:
        """Points per game of `name` against other players (draw = 1/2)."""
        g = self.games[name]
        return (self.wins[name] + 0.5 * self.draws[name]) / g if g else math.nan

    def difference(self, a: str, b: str) -> tuple[float, float]:
        """(elo[b] - elo[a], its standard error) in Elo, using the full covariance."""
        for name in (a, b):
            if name not in self.elo:
                raise KeyError(name)
        diff = self.elo[b] - self.elo[a]
        if a == b:
            return 0.0, 0.0
        if a in self.unbounded or b in self.unbounded or self._cov is None:
            return diff, math.inf
        idx = {nm: i for i, nm in enumerate(self._names)}
        i, j = idx[a], idx[b]
        var = self._cov[i, i] + self._cov[j, j] - 2.0 * self._cov[i, j]
        return diff, math.sqrt(max(var, 0.0))

    def predict(self, first: str, second: str) -> tuple[float, float, float]:
        """Model probabilities (first wins, draw, second wins) for a game first vs second."""
        x = (self.elo[first] + self.first_move_advantage - self.elo[second]) / ELO_PER_NAT
        nu = self.draw_param
        w, l = math.exp(min(0.5 * x, 700)), math.exp(min(-0.5 * x, 700))
        z = w + l + nu
        return w / z, nu / z, l / z

    def table(self, z: float = 1.96) -> str:
        """Text table sorted by Elo: rank, name, Elo, ±z·stderr, games, score%."""
        names = sorted(self.elo, key=lambda nm: (-self.elo[nm], nm))
        w = max([6] + [len(nm) for nm in names])
        ci_head = "±95%" if abs(z - 1.96) < 1e-9 else f"±{z:g}σ"
        lines = [f"{'#':>3}  {'player':<{w}}  {'Elo':>8}  {ci_head:>9}  {'games':>7}  {'score':>6}"]
        for rank, nm in enumerate(names, 1):
            if nm == self.anchor:
                ci = "anchor"
            elif nm in self.unbounded:
                ci = "unbounded"
            else:
                ci = f"{z * self.stderr[nm]:.1f}"
            sc = self.score(nm)
            sc_s = f"{100 * sc:5.1f}%" if math.isfinite(sc) else "     -"
            lines.append(f"{rank:>3}  {nm:<{w}}  {self.elo[nm]:>8.1f}  {ci:>9}  {self.games[nm]:>7}  {sc_s:>6}")
        if "first_move_advantage" in self.unbounded_params:
            fma = f"{self.first_move_advantage:+.1f} Elo (unbounded)"
        elif math.isfinite(self.first_move_advantage_stderr):
            fma = f"{self.first_move_advantage:+.1f} ± {z * self.first_move_advantage_stderr:.1f} Elo"
        else:
            fma = f"{self.first_move_advantage:+.1f} Elo (fixed)"
        lines.append(f"first-move advantage: {fma}")
        dr = "unbounded" if "draw_param" in self.unbounded_params else f"{self.draw_param:.4g}"
        lines.append(f"draw parameter nu: {dr} (equal players draw {100 * self.draw_rate_equal:.1f}%)")
        lines.append(f"{self.total_games} games, {len(names)} players, anchor {self.anchor!r}"
                     + (f", prior {self.prior_games:g} games" if self.prior_games else ""))
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-safe dict of all fields (non-finite numbers become None) plus ci95 and score."""
        out = {
            "anchor": self.anchor,
            "elo": {k: _finite_or_none(v) for k, v in self.elo.items()},
            "stderr": {k: _finite_or_none(v) for k, v in self.stderr.items()},
            "ci95": {k: [_finite_or_none(v) for v in self.interval(k)] for k in self.elo},
            "games": dict(self.games),
            "wins": dict(self.wins),
            "draws": dict(self.draws),
            "losses": dict(self.losses),
            "score": {k: _finite_or_none(self.score(k)) for k in self.elo},
            "first_move_advantage": _finite_or_none(self.first_move_advantage),
            "first_move_advantage_stderr": _finite_or_none(self.first_move_advantage_stderr),
            "draw_param": _finite_or_none(self.draw_param),
            "draw_rate_equal": _finite_or_none(self.draw_rate_equal),
            "prior_games": self.prior_games,
            "unbounded": list(self.unbounded),
            "unbounded_params": list(self.unbounded_params),
            "notes": list(self.notes),
            "log_likelihood": _finite_or_none(self.log_likelihood),
            "total_games": self.total_games,
            "converged": self.converged,
        }
        return out


# --------------------------------------------------------------------------- fitting

def _tally(records):
    pairs: dict[tuple[str, str], list[int]] = {}
    names: set[str] = set()
    total = 0
    for rec in records:
        first, second, result = _check_record(rec)
        names.add(first)
        names.add(second)
        c = pairs.setdefault((first, second), [0, 0, 0])
        c[{FIRST_WINS: 0, DRAW: 1, SECOND_WINS: 2}[result]] += 1
        total += 1
    return sorted(names), pairs, total


def _components(n, edges):
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))


def _eta_identifiable(n, edges) -> bool:
    """False if a potential φ with φ[second] = φ[first] − 1 on every game exists.

    Then shifting a by t and every rating by −t·φ leaves all games' x unchanged, so the
    first-move advantage is confounded with the ratings. Assumes a connected graph.
    """
    if any(a == b for a, b in edges):
        return True
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b in edges:
        adj[a].append((b, -1))
        adj[b].append((a, +1))
    phi: list[int | None] = [None] * n
    phi[0] = 0
    todo = deque([0])
    while todo:
        u = todo.popleft()
        for v, dv in adj[u]:
            want = phi[u] + dv
            if phi[v] is None:
                phi[v] = want
                todo.append(v)
            elif phi[v] != want:
                return True
    return False


def _fmt_group(names, limit=8):
    shown = ", ".join(names[:limit])
    return "{" + shown + (f", ... (+{len(names) - limit})" if len(names) > limit else "") + "}"


def fit_ratings(records: Iterable[Mapping], anchor: str | None = None, prior_games: float = 0.0) -> Ratings:
    """Maximum-likelihood Davidson/Bradley–Terry ratings with first-move advantage (see module doc).

    anchor: the player reported at exactly 0 Elo (default: "random" if present, else the
    alphabetically first player). prior_games: weight of the optional prior in virtual
    games per player (0 = pure MLE). Raises ValueError for fewer than 2 players, players
    not connected by games (naming the groups), an unknown anchor or a bad record.
    """
    prior_games = float(prior_games)
    if not math.isfinite(prior_games) or prior_games < 0:
        raise ValueError(f"prior_games must be a finite number >= 0, got {prior_games}")
    names, pairs, total = _tally(records)
    if len(names) < 2:
        raise ValueError(f"need games between at least 2 players, got {len(names)} player(s)")
    idx = {nm: i for i, nm in enumerate(names)}
    n = len(names)
    if anchor is None:
        anchor = "random" if "random" in idx else names[0]
    elif anchor not in idx:
        known = ", ".join(names[:10]) + (", ..." if n > 10 else "")
        raise ValueError(f"unknown anchor {anchor!r}; players: {known}")
    ia = idx[anchor]

    keys = list(pairs)
    fi = np.array([idx[a] for a, _ in keys], dtype=np.int64)
    si = np.array([idx[b] for _, b in keys], dtype=np.int64)
    counts = np.array([pairs[k] for k in keys], dtype=np.float64)
    nw, nd, nl = counts[:, 0], counts[:, 1], counts[:, 2]
    cross = [(int(a), int(b)) for a, b in zip(fi, si) if a != b]
    groups = _components(n, cross)
    if len(groups) > 1:
        desc = " | ".join(_fmt_group([names[i] for i in g]) for g in groups[:6])
        more = f" | ... (+{len(groups) - 6} groups)" if len(groups) > 6 else ""
        raise ValueError(f"players form {len(groups)} groups with no games between them, "
                         f"so their relative ratings are undefined: {desc}{more}")

    notes: list[str] = []
    fit_eta = _eta_identifiable(n, list(zip(fi.tolist(), si.tolist())))
    if not fit_eta:
        notes.append("first-move advantage not identifiable from these colour assignments "
                     "(e.g. each pair always met with the same player first): fixed at 0")
    n_draws = int(nd.sum())
    fit_theta = n_draws > 0
    if not fit_theta:
        notes.append("no draws: draw parameter fixed at 0")
    self_games = int(counts[fi == si].sum())
    if self_games:
        notes.append(f"{self_games} self-play game(s) used only for the first-move advantage and draws")

    model = _Davidson(fi, si, nw, nd, nl, n, fit_eta, fit_theta, prior_games)
    p = np.zeros(model.dim)
    if fit_theta:
        dr = min(n_draws / total, 0.99)
        p[model.itheta] = math.log(2.0 * dr / (1.0 - dr))
    # Without a prior the likelihood only sees differences: pin the anchor at 0.
    all_free = [i for i in range(model.dim) if not (prior_games == 0 and i == ia)]
    if prior_games > 0:
        eps1 = max(min(_EPS_PROBE, 1e-3 * prior_games), 1e-7)
        eps2 = max(eps1 * (_EPS_FINAL / _EPS_PROBE), 1e-11)
    else:
        eps1, eps2 = _EPS_PROBE, _EPS_FINAL
    p1, ok1 = _maximize(model, p, all_free, eps1)
    p2, ok2 = _maximize(model, p1, all_free, eps2)

    rel1, rel2 = p1[:n] - p1[ia], p2[:n] - p2[ia]
    unbounded = [names[i] for i in range(n) if abs(rel2[i] - rel1[i]) > _DIVERGED_NATS]
    unb_idx = {idx[nm] for nm in unbounded}
    unbounded_params = []
    if fit_eta and abs(p2[model.ieta] - p1[model.ieta]) > _DIVERGED_NATS:
        unbounded_params.append("first_move_advantage")
        unb_idx.add(model.ieta)
    if fit_theta and abs(p2[model.itheta] - p1[model.itheta]) > _DIVERGED_NATS:
        unbounded_params.append("draw_param")
        unb_idx.add(model.itheta)
    if unbounded:
        per_player = np.bincount(np.concatenate([fi, si]), weights=np.concatenate([nw + nd + nl] * 2),
                                 minlength=n)
        busiest = max(unbounded, key=lambda nm: (per_player[idx[nm]], nm))
        prior_hint = "a stronger prior" if prior_games > 0 else "a prior (prior_games > 0)"
        hint = (f"{prior_hint} or another anchor (e.g. {busiest!r}) may bound them"
                if len(unbounded) > 1 else f"{prior_hint} bounds it")
        notes.append("unbounded ratings relative to the anchor (MLE diverges: a player or group "
                     "never lost, or never won, against the others): "
                     + ", ".join(unbounded[:8]) + (" ..." if len(unbounded) > 8 else "")
                     + f"; shown at an arbitrary large value; {hint}")
    if "first_move_advantage" in unbounded_params:
        notes.append("first-move advantage unbounded (the colours alone explain the decisive "
                     "results, e.g. the first player won every game); shown at an arbitrary large value")
    if "draw_param" in unbounded_params:
        notes.append("draw parameter unbounded (draws where no decisive game bounds it)")

    # Final fit: plain MLE (+ prior) over the bounded parameters, divergent ones at their limit.
    free = [i for i in all_free if i not in unb_idx]
    p3, ok3 = _maximize(model, p2, free, 0.0)
    _, H = model.grad_hess(p3, 0.0)
    A = -H[np.ix_(free, free)]
    try:
        np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        p3, ok3 = p2, ok2
        _, H = model.grad_hess(p3, eps2)
        A = -H[np.ix_(free, free)]
        notes.append("some parameters are only weakly identified: tiny ridge kept")
    converged = bool(ok1 and ok2 and ok3)
    if not converged:
        notes.append("optimizer did not fully converge")
    try:
        cov_free = np.linalg.inv(A) if len(free) else np.zeros((0, 0))
    except np.linalg.LinAlgError:
        cov_free = np.linalg.pinv(A)
    pos = {k: j for j, k in enumerate(free)}
    if len(free) and np.max(np.diag(cov_free)) * ELO_PER_NAT ** 2 > 1e8:
        notes.append("some estimates are essentially undetermined by the data (stderr > 10000 Elo)")

    # Covariance of (r_i - r_anchor) in Elo^2.
    C = np.zeros((n, len(free)))
    for i in range(n):
        if i == ia or i in unb_idx:
            continue
        C[i, pos[i]] += 1.0
        if ia in pos:
            C[i, pos[ia]] -= 1.0
    cov_players = (C @ cov_free @ C.T) * ELO_PER_NAT ** 2

    elo, stderr = {}, {}
    for i, nm in enumerate(names):
        elo[nm] = 0.0 if i == ia else float((p3[i] - p3[ia]) * ELO_PER_NAT)
        if i == ia:
            stderr[nm] = 0.0
        elif i in unb_idx:
            stderr[nm] = math.inf
        else:
            stderr[nm] = float(math.sqrt(max(cov_players[i, i], 0.0)))
    if fit_eta:
        fma = float(p3[model.ieta] * ELO_PER_NAT)
        k = model.ieta
        fma_se = math.inf if k in unb_idx else float(math.sqrt(max(cov_free[pos[k], pos[k]], 0.0)) * ELO_PER_NAT)
    else:
        fma, fma_se = 0.0, math.inf
    nu = float(math.exp(p3[model.itheta])) if fit_theta else 0.0

    games = {nm: 0 for nm in names}
    wins, draws, losses = dict(games), dict(games), dict(games)
    for (a, b), (cw, cd, cl) in pairs.items():
        if a == b:
            continue
        games[a] += cw + cd + cl
        games[b] += cw + cd + cl
        wins[a] += cw
        losses[b] += cw
        draws[a] += cd
        draws[b] += cd
        losses[a] += cl
        wins[b] += cl

    return Ratings(
        elo=elo, stderr=stderr, first_move_advantage=fma, first_move_advantage_stderr=fma_se,
        draw_param=nu, games=games, wins=wins, draws=draws, losses=losses, anchor=anchor,
        prior_games=prior_games, unbounded=tuple(unbounded), unbounded_params=tuple(unbounded_params),
        notes=tuple(notes), log_likelihood=model.loglik(p3), total_games=total, converged=converged,
        _names=tuple(names), _cov=cov_players,
    )


# --------------------------------------------------------------------------- score interval

def score_interval(wins: float, draws: float, losses: float, z: float = 1.96,
                   method: str = "wilson") -> tuple[float, float, float]:
    """Score fraction (draw = 1/2) and its confidence interval: (score, lo, hi).

    method="wilson" (default): Wilson score interval on w + d/2 points out of n games. It
    stays inside [0, 1] and is never degenerate (e.g. 10/0/0 gives hi = 1, lo < 1). It uses
    the binomial variance p(1-p), which is conservative when there are draws (the
    trinomial variance is p(1-p) - P(draw)/4).
    method="normal": score ± z·sqrt(var/n) with the empirical trinomial variance
    var = (w + d/4)/n - score², clipped to [0, 1] (zero width when all results are equal).
    """
    w, d, l = float(wins), float(draws), float(losses)
    if min(w, d, l) < 0 or not all(map(math.isfinite, (w, d, l))):
        raise ValueError(f"counts must be finite and >= 0, got {wins}, {draws}, {losses}")
    n = w + d + l
    if n <= 0:
        raise ValueError("no games: the score is undefined")
    if not z > 0:
        raise ValueError(f"z must be > 0, got {z}")
    s = (w + 0.5 * d) / n
    if method == "wilson":
        z2 = z * z
        denom = 1.0 + z2 / n
        centre = (s + z2 / (2 * n)) / denom
        half = z / denom * math.sqrt(max(s * (1 - s), 0.0) / n + z2 / (4 * n * n))
        return s, min(s, max(0.0, centre - half)), max(s, min(1.0, centre + half))
    if method == "normal":
        var = max((w + 0.25 * d) / n - s * s, 0.0)
        half = z * math.sqrt(var / n)
        return s, max(0.0, s - half), min(1.0, s + half)
    raise ValueError(f"method must be 'wilson' or 'normal', got {method!r}")


# --------------------------------------------------------------------------- SPRT

def _logistic_score(elo: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def _mle_with_mean(freq: np.ndarray, values: np.ndarray, s: float) -> np.ndarray:
    """argmax_p Σ f_j log p_j subject to Σ p_j = 1, Σ p_j v_j = s (all f_j > 0, min v < s < max v).

    Lagrange: p_j = f_j / (1 + λ (v_j - s)) with λ the root of Σ f_j (v_j - s)/(1 + λ(v_j - s)),
    which decreases in λ from +inf to -inf on the admissible interval: bisection.
    """
    dv = values - s
    lo, hi = -1.0 / dv.max(), -1.0 / dv.min()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if float(np.sum(freq * dv / (1.0 + mid * dv))) > 0:
            lo = mid
        else:
            hi = mid
    lam = 0.5 * (lo + hi)
    p = freq / (1.0 + lam * dv)
    return p / p.sum()


def sprt(records: Iterable[Mapping], a: str, b: str, elo0: float = 0.0, elo1: float = 20.0,
         alpha: float = 0.05, beta: float = 0.05) -> dict:
    """Generalized SPRT of H1 "b is elo1 stronger than a" against H0 "elo0 stronger".

    Uses the games between a and b (either colour), scored from b's side as a trinomial
    (loss 0, draw 1/2, win 1). Elo here is logistic: expected score 1/(1+10^(-elo/400)),
    colours averaged. The LLR is the GSPRT statistic Σ_j n_j log(p1_j/p0_j), p_k the
    maximum-likelihood outcome distribution whose expected score is that of elo_k (zero
    counts replaced by 1e-3 first). The statistic is evaluated on all the given games;
    call it after each game or batch and stop at the first decision. Bounds:
    lower = log(beta/(1-alpha)) (accept H0), upper = log((1-beta)/alpha) (accept H1).
    """
    if a == b:
        raise ValueError("sprt needs two different players")
    if not (0 < alpha < 1 and 0 < beta < 1 and alpha + beta < 1):
        raise ValueError(f"need 0 < alpha, beta and alpha + beta < 1, got {alpha}, {beta}")
    if not (math.isfinite(elo0) and math.isfinite(elo1)) or elo1 <= elo0:
        raise ValueError(f"need finite elo0 < elo1, got {elo0}, {elo1}")
    seen: set[str] = set()
    w = d = l = 0
    for rec in records:
        first, second, result = _check_record(rec)
        seen.update((first, second))
        if {first, second} != {a, b}:
            continue
        if result == DRAW:
            d += 1
        elif (result == FIRST_WINS) == (first == b):
            w += 1
        else:
            l += 1
    for name in (a, b):
        if name not in seen:
            raise ValueError(f"unknown player {name!r}: no games in the records")
    lower = math.log(beta / (1 - alpha))
    upper = math.log((1 - beta) / alpha)
    n = w + d + l
    if n == 0:
        llr = 0.0
    else:
        counts = np.array([l, d, w], dtype=np.float64)
        counts[counts == 0] = 1e-3
        freq = counts / counts.sum()
        values = np.array([0.0, 0.5, 1.0])
        p0 = _mle_with_mean(freq, values, _logistic_score(elo0))
        p1 = _mle_with_mean(freq, values, _logistic_score(elo1))
        llr = float(np.sum(counts * (np.log(p1) - np.log(p0))))
    decision = "H1" if llr >= upper else "H0" if llr <= lower else "continue"
    return {"llr": llr, "lower": lower, "upper": upper, "decision": decision, "games": n,
            "wins": w, "draws": d, "losses": l, "a": a, "b": b, "elo0": elo0, "elo1": elo1,
            "alpha": alpha, "beta": beta}


# --------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m selfplay.evaluation.elo",
        description="Maximum-likelihood Elo ratings (Davidson model with first-move advantage) "
                    "from arena JSON-lines game records, and an optional SPRT.",
        epilog="Exit codes: 0 ok, 2 bad arguments or input (one error line on stderr).")
    ap.add_argument("files", nargs="+", metavar="GAMES.jsonl", help="JSON-lines game records")
    ap.add_argument("--anchor", default=None,
                    help="player shown at 0 Elo (default: 'random' if present, else the first name)")
    ap.add_argument("--prior-games", type=float, default=0.0,
                    help="virtual 50%%-score games of each player against the origin (default 0)")
    ap.add_argument("--sprt", nargs=2, metavar=("A", "B"), default=None,
                    help="also run the SPRT 'B is stronger than A' on their games")
    ap.add_argument("--elo0", type=float, default=0.0, help="SPRT H0 Elo of B over A (default 0)")
    ap.add_argument("--elo1", type=float, default=20.0, help="SPRT H1 Elo of B over A (default 20)")
    ap.add_argument("--alpha", type=float, default=0.05, help="SPRT false-H1 rate (default 0.05)")
    ap.add_argument("--beta", type=float, default=0.05, help="SPRT false-H0 rate (default 0.05)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        records = load_records(args.files)
        ratings = fit_ratings(records, anchor=args.anchor, prior_games=args.prior_games)
        test = None
        if args.sprt:
            test = sprt(records, args.sprt[0], args.sprt[1], elo0=args.elo0, elo1=args.elo1,
                        alpha=args.alpha, beta=args.beta)
    except (ValueError, OSError) as e:
        msg = " ".join(str(e).split())
        print(f"error: {msg}", file=sys.stderr)
        return 2
    if args.json:
        out = {"ratings": ratings.to_dict()}
        if test is not None:
            out["sprt"] = test
        print(json.dumps(out, indent=1, allow_nan=False))
    else:
        print(ratings.table())
        if test is not None:
            print(f"SPRT {test['b']} vs {test['a']} (elo0={test['elo0']:g}, elo1={test['elo1']:g}): "
                  f"LLR {test['llr']:.3f} in [{test['lower']:.3f}, {test['upper']:.3f}] -> "
                  f"{test['decision']} ({test['games']} games, +{test['wins']} ={test['draws']} -{test['losses']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
