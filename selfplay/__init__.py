"""selfplay: processes and user commands (self-play, the loop, arena, Elo, Saiblo, web, cluster).

One numpy BLAS thread per process unless the user says otherwise: every command here runs
several processes on few cores, and OpenBLAS's spinning threads made a single-position
numpy forward pass 300x slower under load (0.33-0.47 s instead of ~1 ms on 2 cores).
"""

import os as _os

_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
