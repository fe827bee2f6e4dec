"""nets: the PyTorch network, the inference server and the trainer (torch lives here only)."""
