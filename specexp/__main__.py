"""``python -m specexp [overrides] [-m]``: hands argv to the Hydra app."""

from specexp.app import main

if __name__ == "__main__":
    main()
