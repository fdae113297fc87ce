"""The ``ctxengine`` command line: an application of the kernel, shipped and released with it.

It builds on the SDK (:mod:`ctxengine`) and, for plugin discovery and the configuration
reference, on a few private kernel modules; the kernel never imports it. Entry point:
:func:`ctxengine_cli.main.main` (the ``ctxengine`` console script and ``python -m ctxengine``).
"""
