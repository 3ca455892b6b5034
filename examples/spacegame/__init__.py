"""An OGame-like example game: planets, metal/crystal/deuterium, mines and storages,
a build and a research queue, a shipyard, fleets (transport, attack, return, recall)
and a deterministic battle. Built only on ``gameapi``; run it with
``GAME=examples.spacegame``."""
