"""``python -m bench.world load SPEC.json RESULT.json``: one load generator process of
``bench world``."""

from __future__ import annotations

import sys

from bench.world.load import main

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "load":
        sys.exit("usage: python -m bench.world load SPEC.json RESULT.json")
    main(sys.argv[2], sys.argv[3])
