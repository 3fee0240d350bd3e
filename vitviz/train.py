"""`python -m vitviz.train`: the older form of `vitviz train` (vitviz.training.command), kept working."""

from vitviz.training.command import main

if __name__ == "__main__":
    raise SystemExit(main())
