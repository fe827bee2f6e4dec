"""The web board against a hostile page, a hostile client and a careless operator (issue 37):
real `python -m selfplay.apps.web` servers on loopback, real engines, files crafted here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from test_web_api import ROOT, _post_raw, http_request, running_server, web_server  # noqa: E402,F401

GENERIC = "model not available (see the server log)"
JSON = {"Content-Type": "application/json"}
NEW_6X7 = b'{"height": 6, "width": 7, "forbidden": null, "engine": "greedy"}'


def _port(server) -> int:
    return int(server.url.rsplit(":", 1)[1])


# ---------------------------------------------------------------- other sites' pages
@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", "application/jsonx"])
def test_a_post_without_a_json_content_type_is_refused(web_server, ctype):
    before = web_server.ok("/api/health")["games"]
    headers = {"Content-Type": ctype} if ctype else {}
    st, err = http_request(web_server.url, "POST", "/api/new", NEW_6X7, headers)
    assert st == 415 and "application/json" in err["error"]
    assert web_server.ok("/api/health")["games"] == before
    st, _ = http_request(web_server.url, "POST", "/api/new", NEW_6X7,
                         {"Content-Type": "application/json; charset=utf-8"})
    assert st == 200


def test_a_foreign_origin_is_refused_and_the_own_origin_accepted(web_server):
    port = _port(web_server)
    for origin in ("http://attacker.example", f"http://attacker.example:{port}", "null",
                   f"https://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"):
        st, err = http_request(web_server.url, "POST", "/api/new", NEW_6X7, {**JSON, "Origin": origin})
        assert st == 403 and "another site" in err["error"], origin
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        st, _ = http_request(web_server.url, "POST", "/api/new", NEW_6X7,
                             {**JSON, "Origin": origin, "Host": origin[7:]})
        assert st == 200


def test_only_the_servers_own_names_are_accepted_in_host(web_server):
    """DNS rebinding: a page of attacker.example whose name now points at 127.0.0.1 sends
    Host: attacker.example, so it can neither act nor read the answers."""
    port = _port(web_server)
    for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", ""):
        for method, path, data in (("GET", "/api/health", None), ("POST", "/api/new", NEW_6X7),
                                   ("GET", "/static/index.html", None)):
            st, err = http_request(web_server.url, method, path, data, {**JSON, "Host": host})
            assert st == 400 and "is not this server's name" in err["error"], (host, path)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        st, h = http_request(web_server.url, "GET", "/api/health", None, {"Host": host})
        assert st == 200 and h["ok"], host


# --------------------------------------------------------------------- bad bodies
@pytest.mark.parametrize("data", [b"[" * 5000 + b"]" * 5000, b'{"a":' * 2000 + b"1" + b"}" * 2000,
                                  b'{"replay": "6x7:3,,3"}', b'{"replay": "6x7:3\\n3"}',
                                  b'{"replay": "6x7:,3"}', b'{"replay": "6x7:3 3"}'],
                         ids=["5000-lists", "2000-objects", "empty-move", "newline", "leading-comma", "space"])
def test_deep_json_and_malformed_replay_strings_get_400(web_server, data):
    before = web_server.ok("/api/health")["games"]
    for path in ("/api/new", "/api/move", "/api/analyse"):
        st, err = _post_raw(web_server.url + path, data)
        assert st == 400 and err["error"], (path, err)
    assert web_server.ok("/api/health")["games"] == before


def test_a_bad_engine_in_analyse_is_refused_before_the_solver_is_asked(web_server):
    s = web_server.new(replay="6x7:3,3", engine="greedy")
    calls = web_server.ok("/api/health")["solver_calls"]
    for engine in ("bogus", "uct:lots", "net:/etc/hostname"):
        st, err = web_server.post("/api/analyse", {"game": s["game"], "engine": engine})
        assert st == 400, err
    assert web_server.ok("/api/health")["solver_calls"] == calls


# ---------------------------------------------------------------- model directories
def test_engine_models_come_only_from_the_model_directories(tmp_path):
    models, outside = tmp_path / "models", tmp_path / "outside"
    models.mkdir()
    outside.mkdir()
    shutil.copy(os.path.join(ROOT, "models", "c4fast_cpu.npz"), models / "mine.npz")
    (outside / "secret.txt").write_text("vbrhst-secret\n")
    (models / "link.npz").symlink_to(outside / "secret.txt")
    (models / "linkdir").symlink_to(outside)
    (models / "text.npz").write_text("vbrhst not a model\n")
    (models / "empty").mkdir()
    log = tmp_path / "server.log"
    with running_server(log, "--workers", "1", "--engine", "greedy", "--model-dir", str(models)) as srv:
        assert srv.new(height=6, width=7, forbidden=None, engine=f"net:{models / 'mine.npz'}:8")["engine"]
        assert srv.new(height=6, width=7, forbidden=None, engine="net:models/c4fast_cpu.npz:8")["engine"]
        refused = ["net:/etc/hostname", "net:/etc", "net:/no/such/file.pt", f"net:{outside / 'secret.txt'}",
                   f"net:{models}/../outside/secret.txt:8", f"net:{models / 'link.npz'}",
                   f"net:{models / 'linkdir' / 'secret.txt'}", f"net:{models / 'missing.pt'}",
                   f"net:{models / 'text.npz'}:8", f"net:{models / 'empty'}", f"net:{models / 'empty'}:0.2s"]
        for engine in refused:
            st, err = srv.post("/api/new", {"height": 6, "width": 7, "forbidden": None, "engine": engine})
            assert (st, err) == (400, {"error": GENERIC}), engine  # one answer, never the file's bytes
        text = log.read_text()
    assert "text.npz" in text and "empty" in text  # the reasons are in the server log


# ------------------------------------------------------------------ fair scheduling
def test_two_slow_requests_of_one_client_do_not_starve_another(tmp_path):
    # the cap (20 s) lies below 0.45 of the slow engine's budget (27 s), where alpha-beta's
    # iterative deepening may stop on its own: the first slow request always hits the cap
    with running_server(tmp_path / "server.log", "--workers", "2", "--engine-seconds", "20",
                        "--queue-seconds", "3") as srv:
        slow = [srv.new(height=9, width=9, forbidden=[0, 0], engine="alphabeta:60") for _ in range(2)]
        fast = srv.new(height=9, width=9, forbidden=[0, 0], engine="greedy")
        answers = [None, None]

        def move(i):
            answers[i] = srv.post("/api/move", {"game": slow[i]["game"], "col": 4})

        threads = [threading.Thread(target=move, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        while srv.ok("/api/health")["client_requests"] < 2:  # both slow requests are in the server
            time.sleep(0.02)
        h = srv.ok("/api/health")
        assert h["busy"] == 1 and h["clients"] == 1  # the second one waits in its client's own queue
        moved = srv.ok("/api/move", {"game": fast["game"], "col": 4}, source="127.0.0.2")
        assert len(moved["moves"]) == 2
        assert srv.ok("/api/health")["busy"] == 1  # the first slow request is still searching
        for t in threads:
            t.join()
        statuses = sorted(a[0] for a in answers)
        assert statuses == [429, 504], answers  # one waited 3 s for its client's slot, one hit the cap
        assert "engine request(s) running" in next(a[1]["error"] for a in answers if a[0] == 429)


# -------------------------------------------------------------------- the command
@pytest.mark.parametrize("flags,message", [
    (["--port", "70000"], "--port must be in 0..65535"),
    (["--port", "-1"], "--port must be in 0..65535"),
    (["--workers", "0"], "--workers must be in 1..64"),
    (["--workers", "100000"], "--workers must be in 1..64"),
    (["--engine", "bogus"], "unknown player kind 'bogus'"),
    (["--engine", "uct:lots"], "ROLLOUTS must be an integer"),
    (["--engine", "net:/etc/hostname"], "not an existing file or directory in the model directories"),
    (["--engine-seconds", "nan"], "--engine-seconds must be in"),
    (["--analysis-seconds", "0"], "--analysis-seconds must be in"),
    (["--solver-seconds", "inf"], "--solver-seconds must be in"),
    (["--queue-seconds", "-1"], "--queue-seconds must be in"),
    (["--max-games", "0"], "--max-games must be in"),
    (["--client-requests", "3"], "--client-requests must be in 0..--workers"),
    (["--model-dir", "/no/such/dir"], "--model-dir '/no/such/dir' is not a directory"),
    (["--allow-host", "a b"], "--allow-host 'a b' is not a host name"),
    (["--seed", "-3"], "--seed must be >= 0"),
])
def test_every_option_is_checked_at_start(flags, message):
    r = subprocess.run([sys.executable, "-m", "selfplay.apps.web", *flags], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr


def test_engine_processes_start_one_after_another(tmp_path):
    log = tmp_path / "server.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "selfplay.apps.web", "--port", "0", "--workers", "3",
                                 "--engine", "greedy"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = None
        while url is None:
            assert proc.poll() is None, log.read_text()
            for line in log.read_text().splitlines():
                if "Uvicorn running on " in line:
                    url = line.split("Uvicorn running on ")[1].split()[0]
            time.sleep(0.02)
        seen = []
        while True:  # the server answers while its engines start; at most one warms up at a time
            st, h = http_request(url, "GET", "/api/health")
            assert st == 200
            seen.append(h)
            assert h["started"] - h["idle"] - h["busy"] <= 1, h
            if h["idle"] == 3:
                break
            time.sleep(0.02)
        assert seen[0]["idle"] < 3 and seen[0]["starting"] >= 1
    finally:
        proc.terminate()
        proc.wait(30)


def test_engine_budgets_are_bounded_before_allocation(web_server):
    """The probe's net:...:20000000 (a 1.3 GB graph) and friends: a 400 naming the limit,
    before the engine worker allocates anything (selfplay.apps.web.security.WEB_LIMITS)."""
    import json

    npz = os.path.join(ROOT, "models", "c4fast_cpu.npz")
    for spec, limit in ((f"net:{npz}:20000000", "100000"), ("uct:5000000", "100000"),
                        (f"net:{npz}:200:leaves_per_step=65", "64"), ("alphabeta:3000", "60")):
        body = json.dumps({"height": 12, "width": 12, "forbidden": None, "engine": spec}).encode()
        st, err = http_request(web_server.url, "POST", "/api/new", body, JSON)
        assert st == 400 and "over the limit" in err["error"] and limit in err["error"], (spec, err)
    body = json.dumps({"height": 6, "width": 7, "forbidden": None, "engine": f"net:{npz}:100000",
                       "human_first": True}).encode()
    st, state = http_request(web_server.url, "POST", "/api/new", body, JSON)
    assert st == 200, state
