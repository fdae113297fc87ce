"""``python -m ctxengine``: the same as the ``ctxengine`` command.

The entry point, run by the interpreter and never imported by the kernel: the command line is an
application of the kernel (:mod:`ctxengine_cli`), so it is imported only when this runs.
"""

if __name__ == "__main__":
    from ctxengine_cli.main import main

    raise SystemExit(main())
