#!/usr/bin/env python
"""A benchmark of the privacy-accuracy trade-off of differentially private VAEs: the command line
(``audit/cli/``; ``python benchmark.py --help`` and ``python benchmark.py COMMAND --help``)."""

import sys

from audit.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
