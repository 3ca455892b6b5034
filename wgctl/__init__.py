"""The management CLI: migrate, generate worlds, inspect, and run the local stack."""
