"""``python -m ctxengine``: the same as the ``ctxengine`` command."""

from ctxengine.cli import main

raise SystemExit(main())
