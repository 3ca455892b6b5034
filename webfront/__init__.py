"""The player-facing web tier (aiohttp): auth, snapshots, commands, the browser client."""
