"""`python -m gitreg` runs the command line."""

from gitreg.cli import main

raise SystemExit(main())
