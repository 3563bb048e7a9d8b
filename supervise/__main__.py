"""``python -m supervise``: the same as the ``supervise`` command."""

from supervise.cli import main

if __name__ == "__main__":
    main()
