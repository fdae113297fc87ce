"""``python -m ctxengine``: the same as the ``ctxengine`` command."""

from ctxengine._cli.main import main

raise SystemExit(main())
