"""`python -m vitviz.average`: the older form of `vitviz average` (vitviz.training.average), kept working."""

from vitviz.training.average import main

if __name__ == "__main__":
    raise SystemExit(main())
