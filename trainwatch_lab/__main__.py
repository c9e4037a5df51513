"""``python -m trainwatch_lab`` is the ``trainwatch-lab`` command."""

from trainwatch_lab.cli import main

raise SystemExit(main())
