"""Evaluation: paired matches (`arena`), Elo fits (`elo`), rating checkpoints (`rate`,
and the loop's `periodic` evaluation), paired comparisons (`compare`) and exact 6x7 play
(`solverbench`)."""
