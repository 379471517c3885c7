"""``python -m dpkit``: the ``dpkit`` command."""

from ._command import main

if __name__ == "__main__":  # not when a test collector imports every module
    main()
