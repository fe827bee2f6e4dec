"""The web board's JSON API against a real server (`python -m selfplay.apps.web` on loopback)
with real engines, plus its notations. Browser tests: test_web_browser.py."""

import contextlib
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import c4fast  # noqa: E402
from c4fast.players.solver import Solver  # noqa: E402
from selfplay.apps.web import games as gm  # noqa: E402
from selfplay.apps.web.engines import policy_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NET = "net:models/c4fast_cpu.npz"
MAX_GAMES = 12
SLOW_CAP_S = 10.0  # the engine cap of the time-cap test: room for a cold worker on a loaded machine


# ------------------------------------------------------------------------- the server
def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _post_raw(url: str, data: bytes):
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def http_request(url: str, method: str, path: str, data: bytes | None = None, headers: dict | None = None,
                 source: str | None = None):
    """(status, JSON answer) of one request; `source` is the client's own loopback address
    (e.g. 127.0.0.2: another client, as the server's per-client limits see it)."""
    host, port = url.split("//")[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120,
                                      source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body=data, headers=headers or {})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


class Server:
    """A running `python -m selfplay.apps.web` on a free loopback port."""

    def __init__(self, url: str, proc: subprocess.Popen):
        self.url = url
        self.proc = proc

    def get(self, path: str):
        return _get(self.url + path)

    def post(self, path: str, body, source: str | None = None):
        if source:
            return http_request(self.url, "POST", path, json.dumps(body).encode(),
                                {"Content-Type": "application/json"}, source)
        return _post_raw(self.url + path, json.dumps(body).encode())

    def ok(self, path: str, body=None, source: str | None = None) -> dict:
        status, data = self.get(path) if body is None else self.post(path, body, source)
        assert status == 200, data
        return data

    def new(self, **body) -> dict:
        return self.ok("/api/new", body)

    def wait_idle(self) -> dict:
        """Wait until every engine process is started and free (e.g. after a replacement)."""
        while True:
            h = self.ok("/api/health")
            if h["idle"] == h["workers"] and h["busy"] == 0:
                return h
            time.sleep(0.05)


@contextlib.contextmanager
def running_server(log_path: Path, *args: str):
    """`python -m selfplay.apps.web --port 0 ARGS` until the block ends; yields a Server."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "selfplay.apps.web", "--port", "0", *args],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = None
    try:
        while url is None:
            assert proc.poll() is None, log_path.read_text()
            for line in log_path.read_text().splitlines():
                if "Uvicorn running on " in line:
                    url = line.split("Uvicorn running on ")[1].split()[0]
            time.sleep(0.05)
        server = Server(url, proc)
        server.wait_idle()
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_SHARED: dict = {"server": None, "stack": None, "users": 0}


@pytest.fixture(scope="session")
def web_server(tmp_path_factory):
    """The server most tests share (test_web_browser.py too): generous caps, so a loaded
    machine never hits them."""
    if _SHARED["server"] is None:
        log_path = tmp_path_factory.mktemp("web") / "server.log"
        full = ["--analysis-seconds", "60"] if os.environ.get("C4FAST_WEB_SCREENSHOT") else []  # no partial
        stack = contextlib.ExitStack()
        _SHARED["server"] = stack.enter_context(running_server(
            log_path, "--workers", "2", "--seed", "7", "--engine", "greedy",
            "--max-games", str(MAX_GAMES), "--engine-seconds", "120", *full))
        _SHARED["stack"] = stack
    _SHARED["users"] += 1
    yield _SHARED["server"]
    _SHARED["users"] -= 1
    if _SHARED["users"] == 0:
        _SHARED["stack"].close()
        _SHARED["server"] = None


def replayed(state: dict) -> c4fast.Game:
    """The game a state describes, replayed locally from its moves."""
    return c4fast.Game.from_moves(state["height"], state["width"],
                                  tuple(state["forbidden"]) if state["forbidden"] else None, state["moves"])


def assert_consistent(state: dict) -> None:
    g = replayed(state)
    assert state["board"] == g.board().tolist()
    assert state["to_move"] == g.to_move
    assert state["result"] == g.result
    assert state["legal"] == (g.legal_moves() if g.result is None else [])


# ----------------------------------------------------------------------------- basics
def test_help():
    r = subprocess.run([sys.executable, "-m", "selfplay.apps.web", "--help"], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0 and "--host" in r.stdout and "loopback" in r.stdout


def test_health_and_the_page_is_served_from_the_package(web_server):
    h = web_server.ok("/api/health")
    assert h["ok"] and h["workers"] == 2 and h["default_engine"] == "greedy"
    with urllib.request.urlopen(web_server.url + "/") as r:  # redirects to the page
        page = r.read().decode()
    assert "<svg id=\"board\"" in page and "board.js" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # no CDN: everything is local
    for name in ("board.js", "style.css"):
        with urllib.request.urlopen(f"{web_server.url}/static/{name}") as r:
            assert r.status == 200 and len(r.read()) > 1000


def test_new_saiblo_game_with_a_chosen_forbidden_cell(web_server):
    s = web_server.new(height=9, width=11, forbidden=[0, 4], engine="greedy")
    assert (s["height"], s["width"], s["forbidden"]) == (9, 11, [0, 4])
    assert len(s["board"]) == 9 and all(len(row) == 11 for row in s["board"])
    assert s["board"][0][4] == -1 and sum(v != 0 for row in s["board"] for v in row) == 1
    assert (s["to_move"], s["moves"], s["result"], s["human"]) == (1, [], None, 1)
    assert s["replay"] == "9x11@0,4:" and s["saiblo"] == []


def test_random_board_and_random_forbidden_cell_are_saiblo_setups(web_server):
    s = web_server.new(engine="random")
    assert 9 <= s["height"] <= 12 and 9 <= s["width"] <= 12
    r, c = s["forbidden"]
    assert s["board"][r][c] == -1


def test_engine_moves_first_when_the_person_plays_second(web_server):
    s = web_server.new(height=6, width=7, forbidden=None, engine="greedy", human_first=False)
    assert s["human"] == 2 and len(s["moves"]) == 1 and s["to_move"] == 2
    assert s["last_engine"]["col"] == s["moves"][0]
    assert_consistent(s)


@pytest.mark.parametrize("engine", ["greedy", "random", "uct:200", "alphabeta:0.05", f"{NET}:16",
                                    f"{NET}:policy"])
def test_a_move_gets_the_engines_reply(web_server, engine):
    s = web_server.new(height=9, width=10, forbidden=[0, 4], engine=engine)
    s2 = web_server.ok("/api/move", {"game": s["game"], "col": 4, "ply": 0})
    assert s2["moves"][0] == 4 and len(s2["moves"]) == 2
    assert s2["board"][1][4] == 1  # the stone hopped over the forbidden cell (0, 4)
    assert s2["last_engine"]["col"] == s2["moves"][1]
    assert_consistent(s2)


def test_solver_engine_on_6x7(web_server):
    s = web_server.new(replay="6x7:3,3,3,3,2,4,2,4", engine="solver")
    s2 = web_server.ok("/api/move", {"game": s["game"], "col": 1})
    best = Solver(20).best_moves(replayed({**s2, "moves": s2["moves"][:-1]}))
    assert s2["moves"][-1] in best
    assert s2["last_engine"]["wdl"] is not None


def test_saiblo_notation_and_the_replay_string(web_server):
    s = web_server.new(height=9, width=10, forbidden=[0, 4], engine="greedy")
    s = web_server.ok("/api/move", {"game": s["game"], "col": 4})
    s = web_server.ok("/api/move", {"game": s["game"], "col": 0})
    g = c4fast.Game(9, 10, (0, 4))
    for i, col in enumerate(s["moves"]):
        row = int(g.state[0]["top"][col])
        assert s["saiblo"][i] == "%d %d" % c4fast.to_saiblo(row, col, 9)
        g.play(col)
    assert s["saiblo"][0] == "7 4"  # row 1 from the bottom is row 7 from the top
    assert s["replay"] == "9x10@0,4:" + ",".join(map(str, s["moves"]))
    again = web_server.new(replay=s["replay"], engine="greedy")
    assert again["board"] == s["board"] and again["moves"] == s["moves"]


def test_undo_takes_back_the_persons_move_and_the_reply(web_server):
    s0 = web_server.new(height=6, width=7, forbidden=None, engine="uct:200")
    s1 = web_server.ok("/api/move", {"game": s0["game"], "col": 3})
    s2 = web_server.ok("/api/move", {"game": s0["game"], "col": 2})
    back = web_server.ok("/api/undo", {"game": s0["game"]})
    assert back["moves"] == s1["moves"] and back["board"] == s1["board"]
    back = web_server.ok("/api/undo", {"game": s0["game"]})
    assert back["moves"] == [] and s2["moves"][:2] == s1["moves"]
    status, err = web_server.post("/api/undo", {"game": s0["game"]})
    assert status == 400 and "nothing to undo" in err["error"]
    assert web_server.ok(f"/api/game/{s0['game']}")["moves"] == []


def test_undo_when_the_engine_moved_first_keeps_its_first_move(web_server):
    s = web_server.new(height=6, width=7, forbidden=None, engine="greedy", human_first=False)
    s2 = web_server.ok("/api/move", {"game": s["game"], "col": 0})
    back = web_server.ok("/api/undo", {"game": s["game"]})
    assert back["moves"] == s["moves"] and len(s2["moves"]) == 3
    status, _ = web_server.post("/api/undo", {"game": s["game"]})
    assert status == 400


def test_a_finished_game_has_a_result_and_the_winning_line(web_server):
    # red plays column 0 four times; the replayed yellow moves never block
    s = web_server.new(replay="6x7:0,6,0,6,0,5", engine="random")
    assert s["to_move"] == 1
    end = web_server.ok("/api/move", {"game": s["game"], "col": 0})
    assert end["result"] == 1 and end["legal"] == [] and end["last_engine"] is None
    assert end["win_line"] == [[0, 0], [1, 0], [2, 0], [3, 0]]
    status, err = web_server.post("/api/move", {"game": s["game"], "col": 1})
    assert status == 400 and "over" in err["error"]
    status, err = web_server.post("/api/analyse", {"game": s["game"]})
    assert status == 400 and "over" in err["error"]


def test_playing_to_the_end_against_an_engine(web_server):
    s = web_server.new(height=6, width=7, forbidden=None, engine="greedy")
    while s["result"] is None:
        s = web_server.ok("/api/move", {"game": s["game"], "col": s["legal"][0], "ply": len(s["moves"])})
        assert_consistent(s)
    assert s["result"] in (0, 1, 2)
    if s["result"]:
        line = s["win_line"]
        assert len(line) >= 4 and all(s["board"][r][c] == s["result"] for r, c in line)


# -------------------------------------------------------------------------- bad input
BAD_MOVES = [
    ({"col": 7}, 400, "'col' must be in 0..6"),
    ({"col": -1}, 400, "'col'"),
    ({"col": "3"}, 400, "'col' must be an integer"),
    ({"col": True}, 400, "'col' must be an integer"),
    ({"col": 3.0}, 400, "'col' must be an integer"),
    ({}, 400, "'col'"),
    ({"col": 0}, 400, "column 0 is full"),
    ({"col": 1, "ply": 3}, 409, "reload"),
    ({"col": 1, "ply": "6"}, 400, "'ply'"),
    ({"col": 1, "game": "no-such-game"}, 404, "unknown game"),
    ({"col": 1, "game": 5}, 400, "'game'"),
]


@pytest.mark.parametrize("body,status,message", BAD_MOVES)
def test_bad_moves_get_a_4xx_and_leave_the_game_unchanged(web_server, body, status, message):
    s = web_server.new(replay="6x7:0,0,0,0,0,0", engine="greedy")
    st, err = web_server.post("/api/move", {"game": s["game"], **body})
    assert st == status and message in err["error"], err
    assert web_server.ok(f"/api/game/{s['game']}") == s


@pytest.mark.parametrize("data,status,message", [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b"\xff\xfe", 400, "not valid JSON"),
    (b'{"game": "x", "pad": "' + b"a" * 20000 + b'"}', 413, "over 16384 bytes"),
])
def test_malformed_and_oversized_bodies(web_server, data, status, message):
    before = web_server.ok("/api/health")["games"]
    for path in ("/api/move", "/api/new", "/api/analyse", "/api/undo"):
        st, err = _post_raw(web_server.url + path, data)
        assert st == status and message in err["error"], (path, err)
    assert web_server.ok("/api/health")["games"] == before


def test_bad_new_game_requests_create_no_game(web_server, tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"this is not a checkpoint")
    bad = [
        ({"height": 13, "width": 9}, "'height' must be in 4..12"),
        ({"height": 9, "width": "9"}, "'width' must be an integer"),
        ({"height": 9, "width": 9, "forbidden": [9, 0]}, "off the 9x9 board"),
        ({"height": 9, "width": 9, "forbidden": "corner"}, "'forbidden' must be"),
        ({"height": 6, "width": 7, "forbidden": None, "moves": [0, 7]}, "illegal move list"),
        ({"replay": "6x7:3,3,9"}, "illegal move list"),
        ({"replay": "seven by six"}, "a replay string looks like"),
        ({"replay": "6x7:3", "height": 6}, "either 'replay'"),
        ({"human_first": "yes"}, "'human_first'"),
        ({"engine": "minimax:3"}, "unknown player kind 'minimax'"),
        ({"engine": "uct:lots"}, "ROLLOUTS must be an integer"),
        ({"engine": 42}, "'engine' must be a player spec"),
        ({"engine": "net:/no/such/model.pt"}, "model not available"),
        ({"engine": f"net:{broken}:16"}, "model not available"),
    ]
    before = web_server.ok("/api/health")["games"]
    for body, message in bad:
        st, err = web_server.post("/api/new", body)
        assert st == 400 and message in err["error"], (body, err)
    assert web_server.ok("/api/health")["games"] == before


def test_unknown_routes_and_methods(web_server):
    assert web_server.get("/api/game/nope")[0] == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(web_server.url + "/api/move")  # GET on a POST route
    assert e.value.code == 405


def test_games_are_kept_in_memory_with_a_bound(web_server):
    first = web_server.new(engine="greedy", height=6, width=7, forbidden=None)["game"]
    for _ in range(MAX_GAMES):
        web_server.new(engine="greedy", height=6, width=7, forbidden=None)
    assert web_server.ok("/api/health")["games"] == MAX_GAMES
    st, err = web_server.get(f"/api/game/{first}")
    assert st == 404 and "evicted" in err["error"]


def test_a_slow_engine_is_capped_and_does_not_block_other_requests(tmp_path):
    with running_server(tmp_path / "server.log", "--workers", "2", "--engine-seconds", str(SLOW_CAP_S)) as srv:
        fast = srv.new(height=9, width=9, forbidden=[0, 0], engine="greedy")
        # a 60-second alpha-beta engine: far past this server's cap
        slow = srv.new(height=9, width=9, forbidden=[0, 0], engine="alphabeta:60")
        result = {}
        t = threading.Thread(target=lambda: result.update(
            r=srv.post("/api/move", {"game": slow["game"], "col": 4})))
        t.start()
        while srv.ok("/api/health")["busy"] == 0:  # the server answers while the engine searches
            time.sleep(0.02)
        st, err = srv.post("/api/move", {"game": slow["game"], "col": 5})
        assert st == 409 and "still working" in err["error"]
        # another client is served by the other process (one client may hold only one)
        moved = srv.ok("/api/move", {"game": fast["game"], "col": 4}, source="127.0.0.2")
        assert len(moved["moves"]) == 2
        t.join()
        st, err = result["r"]
        assert st == 504 and f"longer than {SLOW_CAP_S:g} s" in err["error"]
        assert srv.ok(f"/api/game/{slow['game']}") == slow  # unchanged
        h = srv.wait_idle()  # the stopped process was replaced
        assert h["restarts"] == 1
        again = srv.ok("/api/move", {"game": fast["game"], "col": 4})
        assert len(again["moves"]) == 4


# ---------------------------------------------------------------------------- analysis
def test_analysis_of_a_network_engine(web_server):
    s = web_server.new(height=9, width=10, forbidden=[0, 4], engine=f"{NET}:32")
    s = web_server.ok("/api/move", {"game": s["game"], "col": 5})
    a = web_server.ok("/api/analyse", {"game": s["game"]})
    legal = s["legal"]
    assert a["ply"] == 2 and a["to_move"] == 1 and a["engine"] == f"{NET}:32"
    assert a["best"] in legal and a["pv"][0] == a["best"] and 1 <= len(a["pv"]) <= 8
    assert len(a["policy"]) == 10 and abs(sum(p for p in a["policy"] if p) - 1) < 1e-6
    assert 16 <= sum(a["visits"][c] for c in legal) <= 32
    assert all(a["visits"][c] is None for c in range(10) if c not in legal)
    assert all(0 <= a["values"][c] <= 1 for c in legal if a["values"][c] is not None)
    assert a["values_from"].startswith("the search's root values")  # at least the most visited column's
    top = max(legal, key=lambda c: a["visits"][c])
    assert a["values"][top] is not None
    assert abs(sum(a["wdl"]) - 1) < 1e-6 and abs(sum(a["raw_wdl"]) - 1) < 1e-6
    g = replayed(s)
    for (r, c), col in zip(a["pv_cells"], a["pv"]):  # the line is legal, cell by cell
        assert (r, c) == (int(g.state[0]["top"][col]), col)
        g.play(col)
    assert a["solver"] is None and "6x7" in a["solver_note"]
    assert web_server.ok("/api/analyse", {"game": s["game"]}) == a  # cached per position


def test_analysis_with_the_exact_solver_verdict_on_6x7(web_server):
    s = web_server.new(replay="6x7:3,3,3,3,2,4,2,4", engine="uct:200")
    a = web_server.ok("/api/analyse", {"game": s["game"]})
    exact = Solver(20).move_scores(replayed(s))
    assert [v and v["score"] for v in a["solver"]] == [exact.get(c) for c in range(7)]
    for c, v in enumerate(a["solver"]):
        assert v["verdict"] == ("win" if exact[c] > 0 else "draw" if exact[c] == 0 else "loss")
    assert a["policy"] is None and sum(a["visits"]) >= 199
    assert a["values_from"] == "engine search after each column"


def test_root_values_take_proofs_exactly_and_q_only_where_the_search_looked():
    from selfplay.apps.web.engines import root_values

    a = {"wdl": (0.5, 0.2, 0.3), "q": {0: 0.5, 1: -1.0, 2: 0.2, 3: 1.0, 6: 0.9},
         "visits": {0: 40, 1: 9, 2: 10, 3: 3, 6: 12}, "proven": {3: "win", 4: "draw"}}
    # 9 < 40 / 4 <= 10; a proof stands whatever the visits; column 6 is not legal
    assert root_values(a, [0, 1, 2, 3, 4, 5]) == {0: 0.75, 2: 0.6, 3: 1.0, 4: 0.5}
    assert root_values({"wdl": (1.0, 0.0, 0.0), "policy": {0: 1.0}}, [0, 1]) == {}  # no search, no values
    assert root_values({"wdl": (0.0, 0.0, 1.0), "proven": {0: "loss", 2: "win"}, "solved": True},
                       [0, 1, 2]) == {0: 0.0, 2: 1.0}  # the endgame solver's proofs, no q


@pytest.mark.parametrize("moves", [[4, 5], [0, 1, 2, 3, 4, 5, 6, 7, 8]])
def test_a_net_searchs_values_are_its_root_q_where_it_looked_and_a_search_of_their_own_elsewhere(moves):
    """In-process against the player's own analysis: the well-visited columns take the root's
    (Q + 1) / 2 (exact where proven), the others the value of a search from the column's
    child, the same player's, as before root values were used."""
    from selfplay.apps.web.engines import ROOT_Q_SHARE, Engines, _expected, analyse

    spec = f"{NET}:48"
    game = c4fast.Game.from_moves(9, 10, (0, 4), moves)
    a = analyse(Engines(seed=3), spec, game, pv_plies=1, soft_seconds=600)
    ref = Engines(seed=3).player(spec)
    ref.reset(game)
    assert ref.choose(game.copy()) == a["best"]
    r = ref.analysis()
    most = max(r["visits"].values())
    legal = game.legal_moves()
    searched = [c for c in legal if c not in r["proven"] and r["visits"].get(c, 0) < max(1, ROOT_Q_SHARE * most)]
    for c in sorted(legal, key=lambda c: -r["visits"].get(c, 0)):  # analyse's order: the graph is kept
        if c in r["proven"]:
            assert a["values"][c] == {"win": 1.0, "draw": 0.5, "loss": 0.0}[r["proven"][c]]
        elif c not in searched:
            assert a["values"][c] == pytest.approx((r["q"][c] + 1) / 2, abs=1e-12)
        else:  # the child position's own search, from the same player
            child = game.copy()
            child.play(c)
            ref.choose(child.copy())
            assert a["values"][c] == pytest.approx(1 - _expected(ref.analysis()["wdl"]), abs=1e-12)
    assert not a["partial"] and all(a["values"][c] is not None for c in legal)
    assert a["values_from"] == ("the search's root values" if not searched else
                                "the search's root values, engine search after the other columns")


def test_analysis_of_alphabeta_uses_its_root_values_and_may_use_another_engine(web_server):
    s = web_server.new(height=9, width=9, forbidden=[4, 4], engine="greedy")
    a = web_server.ok("/api/analyse", {"game": s["game"], "engine": "alphabeta:0.05"})
    assert a["engine"] == "alphabeta:0.05" and a["values_from"] == "alpha-beta root values"
    assert all(0 <= v <= 1 for v in a["values"]) and a["visits"] is None
    st, err = web_server.post("/api/analyse", {"game": s["game"], "engine": "bogus"})
    assert st == 400 and "bogus" in err["error"]


# ------------------------------------------------------------------------- notations
def test_replay_strings_round_trip_and_reject_garbage():
    g = c4fast.Game.from_moves(9, 10, (0, 4), [4, 5, 4])
    assert gm.replay_string(g) == "9x10@0,4:4,5,4"
    assert gm.parse_replay("9x10@0,4:4,5,4") == (9, 10, (0, 4), [4, 5, 4])
    assert gm.parse_replay("6x7:") == (6, 7, None, [])
    for bad in ("9x10@0,4", "9x10@0:1", "x7:1", "6x7:a", None, 5, "13x9:"):
        with pytest.raises(gm.BadRequest) as e:
            gm.parse_replay(bad)
        assert e.value.status == 400


def test_win_line_finds_every_direction():
    assert gm.win_line(c4fast.Game.from_moves(6, 7, None, [0, 1, 0, 1])) is None  # running
    anti = c4fast.Game.from_moves(6, 7, None, [6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3])
    assert anti.result == 1 and gm.win_line(anti) == [[0, 6], [1, 5], [2, 4], [3, 3]]
    horiz = c4fast.Game.from_moves(6, 7, None, [0, 0, 1, 1, 2, 2, 3])
    assert gm.win_line(horiz) == [[0, 0], [0, 1], [0, 2], [0, 3]]
    diag = c4fast.Game.from_moves(6, 7, None, [0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3])
    assert diag.result == 1 and gm.win_line(diag) == [[0, 0], [1, 1], [2, 2], [3, 3]]


def test_policy_spec_of_network_engines():
    assert policy_spec("net:models/x.npz") == "net:models/x.npz:policy"
    assert policy_spec("net:models/x.npz:400") == "net:models/x.npz:policy"
    assert policy_spec("net:models/x.npz:1.5s") == "net:models/x.npz:policy"
    assert policy_spec("net:models/x.npz:0.2s:c_puct=1.5,max_empty=0") == "net:models/x.npz:policy"
    assert policy_spec("uct:200") is None
