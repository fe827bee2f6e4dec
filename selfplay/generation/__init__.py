"""Generation: self-play workers (`worker`), one node's self-play run (`run`), the run
orchestrator (`orchestrator`) and the local loop with its presets (`loop`)."""
