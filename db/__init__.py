"""The DB tier: models, migrations, the engine/session factory and the world generator."""
