"""`python -m kerasgen ...`: the `kerasgen` command line."""

import sys

from kerasgen.cli import main

if __name__ == "__main__":
    sys.exit(main())
