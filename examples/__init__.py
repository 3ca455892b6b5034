"""Example games built only on the public game API (``gameapi``)."""
