"""``python -m benchmarks.fidelity``: see :mod:`benchmarks.fidelity.run`."""

from benchmarks.fidelity.run import main

raise SystemExit(main())
