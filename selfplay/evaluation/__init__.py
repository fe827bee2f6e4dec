"""Evaluation: paired matches (`arena`), Elo fits (`elo`), rating checkpoints (`rate`,
and the loop's `periodic` evaluation), paired comparisons (`compare`), exact 6x7 play
(`solverbench`) and the final board fill of games (`fill`)."""
