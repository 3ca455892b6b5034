"""Pieces every tier shares: settings, the clock, ids, fixed-point amounts, Redis connections."""
