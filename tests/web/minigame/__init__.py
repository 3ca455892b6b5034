"""A tiny game for the web tier's tests: the reference game's world plus one test command.

It shows the command extension point (``commands.ROUTES``) working before the
reference game's own commands exist.
"""
