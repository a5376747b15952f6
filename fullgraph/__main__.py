"""``python -m fullgraph`` is the same as the ``fullgraph`` command."""

from fullgraph.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
