#!/usr/bin/env python
"""Privacy-auditing benchmark for differentially private VAEs: the command line
(``audit/cli/``; ``python benchmark.py --help`` and ``python benchmark.py COMMAND --help``)."""

import sys

from audit.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
