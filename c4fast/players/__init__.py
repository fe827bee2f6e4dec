"""The torch-free players: baseline bots, the exact 6x7 solver, the endgame solver.

Every module here that defines a player kind registers it with
:mod:`c4fast.players.registry` when imported; the registry imports them all on first use.
"""
