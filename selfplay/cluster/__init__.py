"""Self-play on many nodes and one trainer, on Ray (`python -m selfplay.cluster`).

Ray only places processes, restarts them and moves bytes; the data contract is the
one of the single-node loop (atomic shards, atomic checkpoints, hot reload,
``nets.train --follow``). Modules:

* `transfer` – checksummed, idempotent, atomic file moves (no Ray).
* `guard`    – runs a command for an actor and never outlives it (no Ray).
* `actors`   – `TrainerActor` (head node) and `SelfPlayActor` (one per node).
* `driver`   – the command: local or remote cluster, placement, the upload and
  model-sync pump, evaluation, resume, summary.

Only this package imports ray (install it with ``pip install -e '.[cluster]'``);
`c4fast` and `nets` never do.
"""
