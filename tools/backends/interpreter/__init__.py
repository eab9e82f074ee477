"""The Triton interpreter backend (CPU): ``backend``; ``libdevice`` (libdevice functions under the interpreter)
and ``memcheck`` (bounds checks of every access), both installed inside sandboxed jobs."""
