"""selfplay: self-play workers, arena, Elo, baseline bots and the Saiblo protocol player."""
