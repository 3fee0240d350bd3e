"""`python -m vitviz ...`: the `vitviz` command (vitviz.cli)."""

from vitviz.cli import main

raise SystemExit(main())
