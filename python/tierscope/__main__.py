"""`python -m tierscope` is the `tierscope` command."""

import sys

from tierscope.cli import main

sys.exit(main())
