"""selfplay.cluster: transfer and guard units, node identity, and a real local Ray cluster
(dummy preset, two self-play nodes) with a self-play actor killed mid-shard and the
trainer crashed between storing a shard and acknowledging it."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import leaked_shm, shm_snapshot, wait_for

from c4fast.runtime import read_json
from selfplay.cluster.transfer import Blob, Spool, TransferError, install_model, remove_temporaries, \
    sha256_bytes, store_blob
from nets.shards import list_shards, read_shard, validate_shard
from selfplay.generation.worker import WorkerSpec, game_id_stream, node_hash

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- helpers
def processes_with_env(marker: str) -> list[int]:
    """Live processes whose environment carries C4FAST_CLUSTER_RUN=marker."""
    needle = f"C4FAST_CLUSTER_RUN={marker}".encode() + b"\0"
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes() + b"\0"
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in env and state != "Z":
                out.append(int(pid))
    return out


# ---------------------------------------------------------------- units (no Ray)
def test_store_is_idempotent_checksummed_and_atomic(tmp_path):
    blob = Blob("a_00000.h5", sha256_bytes(b"shard"), b"shard")
    assert store_blob(str(tmp_path), blob) is True
    assert store_blob(str(tmp_path), blob) is False  # a retried upload is a no-op
    assert (tmp_path / "a_00000.h5").read_bytes() == b"shard"
    with pytest.raises(TransferError, match="sha256 mismatch"):
        store_blob(str(tmp_path), Blob("b_00000.h5", blob.sha256, b"shard, damaged"))
    assert not (tmp_path / "b_00000.h5").exists()
    with pytest.raises(TransferError, match="exists"):
        store_blob(str(tmp_path), Blob("a_00000.h5", sha256_bytes(b"other"), b"other"))
    for bad in ("../x.h5", "x/y.h5", ".hidden.tmp", ""):
        with pytest.raises(TransferError):
            store_blob(str(tmp_path), Blob(bad, sha256_bytes(b""), b""))
    (tmp_path / "a_00001.h5.k3x9q.tmp").write_bytes(b"half")  # a receiver killed mid-write
    assert list_shards([tmp_path]) == [str(tmp_path / "a_00000.h5")]
    assert remove_temporaries(str(tmp_path)) == 1
    assert sorted(os.listdir(tmp_path)) == ["a_00000.h5"]


def test_spool_deletes_only_after_a_matching_ack(tmp_path):
    spool = Spool(str(tmp_path / "spool"))
    (tmp_path / "spool" / "s_00000.h5").write_bytes(b"one")
    (tmp_path / "spool" / "s_00001.h5.tmp").write_bytes(b"being written")
    assert spool.ready() == ["s_00000.h5"]
    blob = spool.read("s_00000.h5")
    assert blob.sha256 == hashlib.sha256(b"one").hexdigest()
    with pytest.raises(TransferError):
        spool.ack("s_00000.h5", sha256_bytes(b"two"))
    assert spool.ready() == ["s_00000.h5"]
    assert spool.ack("s_00000.h5", blob.sha256) is True
    assert spool.ack("s_00000.h5", blob.sha256) is False  # a repeated ack
    assert spool.ready() == []


def test_install_model_keeps_the_newest_three(tmp_path):
    for step in (5, 10, 15, 20):
        data = f"net {step}".encode()
        install_model(str(tmp_path), Blob(f"model_{step:08d}.pt", sha256_bytes(data), data))
    assert sorted(os.listdir(tmp_path)) == ["model_00000010.pt", "model_00000015.pt", "model_00000020.pt"]
    with pytest.raises(TransferError):
        install_model(str(tmp_path), Blob("notes.txt", sha256_bytes(b""), b""))


def test_guard_stops_its_command_cleanly_when_the_watched_process_dies(tmp_path):
    from selfplay.cluster import guard

    script = ("import signal, sys, time\n"
              "def stop(*a):\n"
              f"    open({str(tmp_path / 'stopped')!r}, 'w').write('clean')\n"
              "    sys.exit(0)\n"
              "signal.signal(signal.SIGINT, stop)\n"
              f"open({str(tmp_path / 'ready')!r}, 'w').close()\n"
              "time.sleep(120)\n")
    actor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    pidfile = str(tmp_path / "guard.json")
    guard.launch([sys.executable, "-c", script], actor.pid, pidfile, str(tmp_path / "log"), grace=30,
                 env=dict(os.environ, PYTHONPATH=str(ROOT)))
    info = guard.read_pidfile(pidfile)
    assert guard.process_alive(info["child"])
    wait_for(lambda: (tmp_path / "ready").exists(), 120, "the command to install its handler")
    actor.kill()
    actor.wait()
    wait_for(lambda: not guard.group_members(info["pgid"]), 30, "the guard's group to end")
    assert (tmp_path / "stopped").read_text() == "clean"
    assert guard.read_pidfile(pidfile)["exit"] == 0


def test_every_node_incarnation_worker_and_restart_has_its_own_seed_and_game_ids():
    base = dict(slot=0, out_dir="", sizes=((6, 7),), games_per_worker=1, search=None, policy=None,
                seed=0, run_prefix="sp", samples_per_shard=1, config_json="{}")
    specs = [WorkerSpec(index=w, node_tag=t, incarnation=i, restart=r, **base)
             for t in ("n0", "n1") for i in (1, 2) for w in (0, 1) for r in (0, 1)]
    ids = [[next(s) for _ in range(50)] for s in map(game_id_stream, specs)]
    flat = [x for s in ids for x in s]
    assert len(set(flat)) == len(flat) and all(0 < x < 2**63 for x in flat)
    seeds = {(s.seed, node_hash(s.node_tag), s.incarnation, s.index, s.restart) for s in specs}
    assert len(seeds) == len(specs)
    assert node_hash("n0") != node_hash("n1")


def _supervisor(tmp_path, name="selfplay", run_id="run-2"):
    """An actor's counter logic without Ray: the attributes _Supervisor._setup sets first."""
    from selfplay.cluster.actors import _Supervisor

    sup = _Supervisor.__new__(_Supervisor)
    sup.name, sup.run_id = name, run_id
    sup.logs, sup.state_path = str(tmp_path / "logs"), str(tmp_path / "actor.json")
    os.makedirs(sup.logs, exist_ok=True)
    return sup


def _touch_logs(tmp_path, *names):
    for n in names:
        (tmp_path / "logs" / n).write_text("")


@pytest.mark.parametrize("content, incarnation", [
    (b"{\"incarnation\": 7, \"run_id\": \"run-2\", \"act", 4),  # torn mid-write: the logs' 4
    (b"\xff\xfe\x00garbage", 4), (b"[1, 2]", 4), (b"[" * 100_000, 4),  # binary, not a dict, too deep for json
    (b'{"incarnation": "3"}', 4), (b'{"incarnation": -1}', 4), (b'{"incarnation": true}', 4),
    (b'{"incarnation": 2, "run_id": "run-2", "actor_starts": 1}', 4),  # this run's, counters missing
    (b'{"run_id": "run-2", "actor_starts": 1, "child_starts": 1, "logs": []}', 4),  # no incarnation
    (b'{"incarnation": 9, "run_id": "run-2", "actor_starts": 1, "child_starts": 1, "logs": [null]}', 9),
    (b'{"incarnation": 5, "run_id": "run-2", "actor_starts": 1, "child_starts": 1, "logs": [3]}', 5),
    (b'{"incarnation": 9223372036854775808}', 4), (b'{"incarnation": 1e400}', 4),  # none a command accepts
    (b'{"incarnation": 123456789012345678901234567890, "run_id": "run-1"}', 4)])
def test_an_unreadable_actor_json_never_gives_back_an_incarnation(tmp_path, content, incarnation):
    # a torn, binary or wrongly shaped actor.json: the incarnation is the highest of the logs
    # on disk and a whole one the file still holds (the next start takes a fresh seed, game
    # ids and shard names), the counters start again for the run, and the file is kept
    # aside, byte for byte
    sup = _supervisor(tmp_path)
    _touch_logs(tmp_path, "selfplay_i1.log", "selfplay_i4.log", "train_i9.log", "selfplay_i2.log.old")
    (tmp_path / "actor.json").write_bytes(content)
    st = sup._load_state()
    assert st == {"incarnation": incarnation, "run_id": "run-2", "actor_starts": 0, "child_starts": 0, "logs": []}
    assert (tmp_path / "actor.json.unreadable").read_bytes() == content
    assert not (tmp_path / "actor.json").exists()


def test_bad_actor_json_files_are_all_kept_and_absurd_logs_ignored(tmp_path):
    # a second and third bad file go to .unreadable.1 and .2 (the first is never
    # overwritten); a log named past the last incarnation a command accepts is ignored, and a
    # state at that last incarnation (saved, then loaded again) refuses to start rather than
    # hand out a rejected or a reused one
    from selfplay.cluster.actors import MAX_INCARNATION

    sup = _supervisor(tmp_path)
    _touch_logs(tmp_path, "selfplay_i3.log", f"selfplay_i{MAX_INCARNATION + 1}.log", f"selfplay_i{2**70}.log")
    for i, content in enumerate([b"{", b"[]", b"\x00"]):
        (tmp_path / "actor.json").write_bytes(content)
        assert sup._load_state()["incarnation"] == 3
        assert (tmp_path / ("actor.json.unreadable" + (f".{i}" if i else ""))).read_bytes() == content
    last = {"incarnation": MAX_INCARNATION, "run_id": "run-2", "actor_starts": 0, "child_starts": 0, "logs": []}
    (tmp_path / "actor.json").write_text(json.dumps(last))
    sup.state = sup._load_state()
    assert sup.state == last
    with pytest.raises(RuntimeError, match="last a command accepts"):
        sup._start(lambda inc: ["true"])
    assert sup.state["incarnation"] == MAX_INCARNATION and json.loads((tmp_path / "actor.json").read_text()) == last
    (tmp_path / "actor.json").unlink()
    _touch_logs(tmp_path, f"selfplay_i{MAX_INCARNATION}.log")  # the last one's log floors it too
    assert sup._load_state()["incarnation"] == MAX_INCARNATION


def test_actor_counters_survive_and_the_incarnation_never_goes_back(tmp_path):
    sup = _supervisor(tmp_path)
    same_run = {"incarnation": 2, "run_id": "run-2", "actor_starts": 3, "child_starts": 5, "logs": ["a.log"]}
    (tmp_path / "actor.json").write_text(json.dumps(same_run))
    assert sup._load_state() == same_run  # the same run: counters kept
    _touch_logs(tmp_path, "selfplay_i6.log")  # a log newer than the file (e.g. a file restored from a backup)
    assert sup._load_state() == {**same_run, "incarnation": 6}
    (tmp_path / "actor.json").write_text(json.dumps({**same_run, "run_id": "run-1", "incarnation": 11}))
    assert sup._load_state() == {"incarnation": 11, "run_id": "run-2", "actor_starts": 0, "child_starts": 0,
                                 "logs": []}  # a new run: fresh counters, the incarnation kept
    os.remove(tmp_path / "actor.json")
    assert sup._load_state()["incarnation"] == 6  # no file: the logs
    assert _supervisor(tmp_path / "other")._load_state()["incarnation"] == 0  # a new node


# ---------------------------------------------------------------- a real local cluster
def cluster_cmd(run_dir, minutes):
    return [sys.executable, "-m", "selfplay.cluster", "--address", "local", "--selfplay-nodes", "2",
            "--preset", "dummy", "--dir", str(run_dir), "--minutes", str(minutes), "--sizes", "6x7",
            "--status-every", "5", "--grace", "60", "--max-restarts", "3",
            "--selfplay.solve-max-empty", "12", "--selfplay.solve-rescore"]


def shard_node(path) -> tuple[str, int]:
    m = re.search(r"_p\d+_([A-Za-z0-9-]+)_i(\d+)_r\d+_\d+\.h5$", os.path.basename(path))
    assert m, path
    return m.group(1), int(m.group(2))


def trainer_logs(run) -> list:
    """The trainer's logs of the run, one per incarnation, in incarnation order."""
    return sorted((run / "trainer" / "logs").glob("train_i*.log"), key=lambda p: int(p.stem.split("_i")[1]))


def run_env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """One cluster run (dummy preset, 2 nodes) with both faults injected, stopped with Ctrl-C
    once everything the tests check has happened (however slow the machine: the run's
    budget is only a cap); returns what it left."""
    pytest.importorskip("ray")
    run = tmp_path_factory.mktemp("cluster") / "run"
    shm_before = shm_snapshot()
    err_path = run.parent / "driver.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cluster_cmd(run, 12), cwd=ROOT, env=run_env(), stdout=subprocess.PIPE,
                                stderr=err, text=True)
    shards = lambda: list_shards([run / "data"]) if (run / "data").is_dir() else []  # noqa: E731
    try:
        # 1. a self-play actor killed mid-shard: once node n0 has delivered a shard
        wait_for(lambda: any(shard_node(p)[0] == "n0" for p in shards()), 180, "a shard from n0 in DIR/data")
        state = json.loads((run / "nodes" / "n0" / "actor.json").read_text())
        os.kill(state["pid"], signal.SIGKILL)
        # 2. a self-play worker process killed on node n1 (selfplay.generation.run restarts it)
        victim = wait_for(lambda: [pid for pid in (int(re.search(r"_p(\d+)_", os.path.basename(p)).group(1))
                                                   for p in shards() if shard_node(p)[0] == "n1")
                                   if os.path.exists(f"/proc/{pid}")], 120, "a live self-play worker on n1")[0]
        os.kill(victim, signal.SIGKILL)
        # 3. the trainer crashes between storing the next shard and acknowledging it, once it has trained
        # (a trainer stopped while still importing has nothing to save, and the resume check needs a step)
        wait_for(lambda: any(re.search(r"nets\.train: step \d+ loss", log.read_text()) for log in trainer_logs(run)),
                 240, "the trainer's first logged step")
        (run / "faults").mkdir()
        (run / "faults" / "trainer_exit_after_store").write_text("")
        # 4. Ctrl-C once all of it shows: the fault fired and the shard was sent again, the trainer
        # resumed, n0's new actor and n1's new worker delivered shards, a checkpoint was rated
        for cond, what in [
                (lambda: (run / "faults" / "trainer_exit_after_store.fired").exists(), "the trainer's fault"),
                (lambda: "already stored" in err_path.read_text(), "the unacknowledged shard sent again"),
                (lambda: len(trainer_logs(run)) >= 2 and "resumed at step" in trainer_logs(run)[-1].read_text(),
                 "the trainer's resume"),
                (lambda: len({shard_node(p)[1] for p in shards() if shard_node(p)[0] == "n0"}) >= 2,
                 "a shard of n0's restarted actor"),
                (lambda: any("_r1_" in os.path.basename(p) for p in shards() if shard_node(p)[0] == "n1"),
                 "a shard of n1's restarted worker"),
                (lambda: read_json(str(run / "cluster.json")).get("evaluated"), "a rated checkpoint")]:
            wait_for(cond, 300, what)
            assert proc.poll() is None, f"the run ended before {what}: {err_path.read_text()[-4000:]}"
    finally:
        proc.send_signal(signal.SIGINT)  # a clean stop (also after a failed wait, so that the cluster goes too)
        try:
            stdout, _ = proc.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, _ = proc.communicate(timeout=60)  # a child left holding the pipe fails the test, not hangs it
    logs = sorted((run / "nodes").glob("*/logs/selfplay_i*.log"))  # this run's (later tests add more)
    return {"dir": run, "rc": proc.returncode, "stdout": stdout, "stderr": err_path.read_text(),
            "shm_before": shm_before, "selfplay_logs": logs}


@pytest.mark.slow
def test_local_cluster_survives_a_killed_selfplay_actor_and_a_trainer_crash(faulty_run):
    run, out = faulty_run["dir"], faulty_run["stdout"] + faulty_run["stderr"]
    assert faulty_run["rc"] == 0, out[-4000:]
    summary = json.loads(faulty_run["stdout"].strip().splitlines()[-1])
    print("fault run summary:", json.dumps(summary))
    print("\n".join(ln for ln in faulty_run["stderr"].splitlines() if "already stored" in ln or "failed" in ln
                    or "unreachable" in ln))
    assert summary["nodes"] == ["n0", "n1"]
    assert summary["restarts"]["selfplay_actors"] >= 1 and summary["restarts"]["trainer_actor"] >= 1, summary
    assert (run / "faults" / "trainer_exit_after_store.fired").exists()
    assert summary["uploads"]["duplicates"] >= 1, summary  # the unacknowledged shard was sent again...
    assert "already stored" in faulty_run["stderr"]
    assert summary["left_in_spools"] == {} and summary["steps"] > 0 and summary["latest_checkpoint"]

    # every finished shard reached DIR/data exactly once; spools are empty; no temporaries
    shards = list_shards([run / "data"])
    assert summary["shards"] == len(shards) > 0
    digests = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in shards]
    assert len(set(digests)) == len(digests)  # ...and not stored twice
    assert not [n for n in os.listdir(run / "data") if n.endswith(".tmp")]
    for tag in ("n0", "n1"):
        assert not [n for n in os.listdir(run / "nodes" / tag / "spool") if n.endswith(".h5")]
    assert {shard_node(p)[0] for p in shards} == {"n0", "n1"}
    assert len({shard_node(p)[1] for p in shards if shard_node(p)[0] == "n0"}) >= 2  # n0 restarted

    # valid shards, and no two games anywhere share an id
    game_ids = []
    games_in_shards: dict = {}
    for p in shards:
        validate_shard(p)
        ids = read_shard(p)["games"]["game_id"].tolist()
        game_ids += ids
        games_in_shards[shard_node(p)] = games_in_shards.get(shard_node(p), 0) + len(ids)
    assert len(set(game_ids)) == len(game_ids)

    # the self-play counts add up the summary line of every self-play command of the run: n0's two
    # or more (the killed actor's guard stopped its command cleanly) and n1's
    ended = [json.loads(lines[-1]) for log in faulty_run["selfplay_logs"]
             if (lines := [ln for ln in log.read_text().splitlines() if ln.startswith("{")])]
    sp = summary["selfplay"]
    assert sp["commands"] == len(ended) >= 3 and sp["unreported_nodes"] == [], (sp, len(ended))
    for key in ("games", "samples", "games_played", "solved_samples", "solve_tries", "rescored_samples"):
        assert sp[key] == sum(e[key] for e in ended), (key, sp)
    assert 0 < sp["games"] <= sp["games_played"] and 0 <= sp["solved_samples"] <= sp["solve_tries"], sp

    # the killed worker was restarted with a new identity (fresh seed, new game ids)
    assert summary["restarts"]["selfplay_workers"] >= 1, summary
    assert any("_r1_" in os.path.basename(p) for p in shards if shard_node(p)[0] == "n1")

    # a killed actor loses at most unfinished games: every game its self-play run counted
    # is in a shard (a SIGKILLed worker, on n1, also loses the games of its shard in progress)
    for log in sorted((run / "nodes" / "n0" / "logs").glob("selfplay_i*.log")):
        inc = int(log.stem.split("_i")[1])
        last = [ln for ln in log.read_text().splitlines() if ln.startswith("{")]
        assert last, f"{log} has no summary: the run was not stopped cleanly"
        assert json.loads(last[-1])["games"] == games_in_shards.get(("n0", inc), 0), log

    # the trainer stopped cleanly when its actor died and resumed exactly where it stopped
    logs = trainer_logs(run)
    assert len(logs) >= 2
    first, second = logs[-2].read_text(), logs[-1].read_text()
    saved = re.findall(r"interrupted at step (\d+): saving", first)
    resumed = re.findall(r"resumed at step (\d+)", second)
    assert saved and resumed and saved[-1] == resumed[0], (first[-500:], second[:500])

    assert list((run / "train" / "models").glob("model_*.pt"))
    assert (run / "ratings.json").exists() and summary["evaluated"] >= 1


@pytest.mark.slow
def test_nothing_is_left_behind_and_the_same_command_resumes(faulty_run):
    run = faulty_run["dir"]
    assert faulty_run["rc"] == 0
    assert not processes_with_env(str(run)), "processes of the run are still alive"
    # a real leak never clears; entries of other jobs on the machine do, once their owners exit
    wait_for(lambda: not leaked_shm(faulty_run["shm_before"]), 60, "no leaked /dev/shm entry")
    before = json.loads(faulty_run["stdout"].strip().splitlines()[-1])
    n_logs = len(trainer_logs(run))
    seen = {shard_node(p) for p in list_shards([run / "data"])}
    shm_before = shm_snapshot()
    # the same command resumes; Ctrl-C once the trainer resumed and a new incarnation delivered a shard
    proc = subprocess.Popen(cluster_cmd(run, 30), cwd=ROOT, env=run_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(trainer_logs(run)) > n_logs and "resumed at step" in trainer_logs(run)[-1].read_text(),
                 180, "the trainer to resume")
        wait_for(lambda: {shard_node(p) for p in list_shards([run / "data"])} - seen, 180,
                 "a shard of a new self-play incarnation")
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=400)
    assert proc.returncode == 0, (stdout + stderr)[-4000:]
    after = json.loads(stdout.strip().splitlines()[-1])
    print("resumed run summary:", json.dumps(after))
    assert re.search(rf"resumed at step {before['steps']}\b", trainer_logs(run)[n_logs].read_text())
    assert after["elapsed_s"] > before["elapsed_s"] and after["steps"] >= before["steps"]
    assert after["shards"] > before["shards"] and after["left_in_spools"] == {}
    ids = [i for p in list_shards([run / "data"]) for i in read_shard(p)["games"]["game_id"].tolist()]
    assert len(set(ids)) == len(ids)
    assert not processes_with_env(str(run))
    assert not leaked_shm(shm_before)


@pytest.mark.slow
def test_restarts_are_logged_and_a_resume_after_kill9_of_the_driver_keeps_the_time_budget(tmp_path):
    pytest.importorskip("ray")
    run, log = tmp_path / "run", tmp_path / "driver.log"
    # two minutes: Ray's restart of a killed actor took over 26 s on a loaded 2-core Zen 3,
    # past the end of a one-minute run whose first n0 shard came at 20 s
    cmd = cluster_cmd(run, 2.0)
    cmd[cmd.index("--status-every") + 1] = "2"
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=run_env(), stdout=subprocess.DEVNULL, stderr=err)
    saved = lambda: json.loads((run / "cluster.json").read_text())  # noqa: E731
    try:
        wait_for(lambda: (run / "data").is_dir() and
                 any(shard_node(p)[0] == "n0" for p in list_shards([run / "data"])), 180, "a shard from n0")
        os.kill(json.loads((run / "nodes" / "n0" / "actor.json").read_text())["pid"], signal.SIGKILL)
        wait_for(lambda: "n0: actor restarted by Ray (incarnation" in log.read_text(), 120,
                 "the restart logged while the run goes on")
        assert proc.poll() is None
        wait_for(lambda: saved()["elapsed"] >= 20, 120, "cluster.json saved with the run time so far")
    finally:
        proc.kill()  # kill -9 of the driver: its cluster is left behind, as after a crash
        proc.wait()
        for pid in processes_with_env(str(run)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    wait_for(lambda: not processes_with_env(str(run)), 60, "the killed run's processes to go")
    elapsed = saved()["elapsed"]
    assert 20 <= elapsed < 120
    r = subprocess.run(cluster_cmd(run, 2.0), cwd=ROOT, env=run_env(), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    after = json.loads(r.stdout.strip().splitlines()[-1])
    # the resumed run used only what was left of the two minutes (its own clock: at most a status interval more)
    assert elapsed <= after["elapsed_s"] <= 120 + 5
    assert saved()["runs"] == 2 and saved()["elapsed"] == pytest.approx(after["elapsed_s"], abs=0.1)
    assert not processes_with_env(str(run))


def test_help_and_bad_arguments():
    proc = subprocess.run([sys.executable, "-m", "selfplay.cluster", "--help"], cwd=ROOT, env=run_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for flag in ("--address", "--selfplay-nodes", "--preset", "--dir", "--minutes", "--shared-fs",
                 "--max-inflight", "--max-restarts"):
        assert flag in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "selfplay.cluster", "--preset", "nope"], cwd=ROOT,
                         env=run_env(), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_c4fast_and_nets_never_import_ray():
    code = ("import sys, c4fast, nets.train, nets.server, selfplay.generation.run, selfplay.generation.loop\n"
            "assert 'ray' not in sys.modules, 'ray imported'\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=run_env(), check=True, timeout=120)


def test_every_loop_knob_is_a_cluster_flag_and_reaches_the_children(tmp_path):
    """One config path: the cluster command takes the local loop's flags (preset knobs such
    as --train.lr included), and its children get the configs the local loop would give them."""
    from c4fast.cli import config_from_args
    from selfplay.cluster.driver import ClusterConfig, RayPlacement, _child_flags, build_parser
    from selfplay.generation.loop import PRESETS, LocalPlacement, LoopConfig
    from selfplay.generation.orchestrator import Orchestrator

    args = build_parser().parse_args(["--preset", "dummy", "--train.lr", "0.05", "--eval.pairs", "3",
                                      "--selfplay.c-puct", "1.7", "--max-inflight", "2"])
    cfg = config_from_args(LoopConfig, args, PRESETS["dummy"])
    assert cfg.train.train.lr == 0.05 and cfg.eval.pairs == 3 and cfg.selfplay.search.c_puct == 1.7
    ray_run = Orchestrator(cfg, str(tmp_path / "c"), RayPlacement(ClusterConfig(max_inflight=2)))
    sp_flags, tr_flags, node_gpus, trainer_gpus = _child_flags(ClusterConfig(), ray_run, 60)
    sp, tr = json.loads(sp_flags[1]), json.loads(tr_flags[1])
    local_sp, local_tr = Orchestrator(cfg, str(tmp_path / "c"), LocalPlacement()).child_configs(60)
    assert tr["train"]["lr"] == 0.05 == local_tr.train.lr and sp["search"]["c_puct"] == 1.7
    assert sp["preset"] == local_sp.preset == "tiny" and sp["seed"] == local_sp.seed
    assert tr["sizes"] == local_tr.sizes == cfg.sizes  # the trainer knows the run's sizes
    assert (node_gpus, trainer_gpus) == (0, 0) and sp["status_file"] is None


def test_the_last_json_line_of_a_log_is_found_however_long(tmp_path):
    """A self-play summary lists every shard, so it can be longer than the chunk the log is
    read in; the reader must return it, not an older summary or nothing (against a
    reference that reads the whole file)."""
    pytest.importorskip("ray")
    from selfplay.cluster.actors import _last_json

    def reference(path):
        for line in reversed(path.read_bytes().split(b"\n")):
            if line.startswith(b"{"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    return value
        return None

    big = {"games": 7, "worker_restarts": 1, "shards": [f"sp_{i:08d}_n1_i1_r0.h5" for i in range(6000)]}
    cases = {
        "long_last": ["log line", json.dumps({"games": 1}), "interrupted", json.dumps(big), ""],
        "long_then_text": [json.dumps({"games": 1}), json.dumps(big), "a line after the summary"],
        "partial_last": [json.dumps(big), '{"games": 3, "trunc'],
        "no_json": ["x" * 200_000, "y"],
        "list_not_object": [json.dumps({"games": 2}), "[1, 2]"],
        "empty": [],
    }
    for name, lines in cases.items():
        path = tmp_path / f"{name}.log"
        path.write_bytes("\n".join(lines).encode())
        for chunk in (7, 4096, 1 << 16):
            assert _last_json(str(path), chunk=chunk) == reference(path), (name, chunk)
    assert _last_json(str(tmp_path / "long_last.log"))["worker_restarts"] == 1
    assert _last_json(str(tmp_path / "missing.log")) is None
