"""Chaos run: the real stack under faults and a scripted population, then SQL invariant checks.

``python -m chaos --minutes 10`` starts a private PostgreSQL cluster, a private
Redis, two ``webfront`` and three ``gameserver`` processes; drives them with
players through the HTTP API while killing, pausing and restarting servers;
lets everything due complete; and checks the invariants of ``DESIGN.md`` with
SQL. ``python -m chaos fuzz`` runs schemathesis against a private web server.

Modules: ``cluster`` (private servers and processes), ``players`` (the
population and its ledger), ``faults`` (what is injected when), ``checks``
(the invariants), ``runner`` (one run, start to summary), ``fuzz``.
"""
