"""Games built on the framework's public API (``gameapi``) only: run one with
``GAME=examples.<name>`` from the repository root."""
