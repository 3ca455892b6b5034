from __future__ import annotations

from gameserver.main import main

main()
