"""nets: the PyTorch network, the inference server and the trainer (torch lives here only)."""

from pathlib import Path

#: The shipped models (package data): c4fast_cpu, c4fast_gpu and c4fast_std6x7, each as a
#: ``.pt`` checkpoint and a torch-free ``.npz`` export; ``models/`` in a source checkout
#: points here.
MODELS_DIR = Path(__file__).resolve().parent / "models"
