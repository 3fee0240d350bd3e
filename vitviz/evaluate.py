"""`python -m vitviz.evaluate`: the older form of `vitviz evaluate` (vitviz.training.evaluate), kept working."""

from vitviz.training.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
