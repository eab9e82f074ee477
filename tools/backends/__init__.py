"""Hardware and toolchains behind one interface: ``base`` (the interface), ``cuda``, ``npu`` and
``interpreter`` backends; ``interpreter_libdevice`` (libdevice under the Triton interpreter);
``targets`` (the ``--target`` a run names, checked against the toolchains before anything is made).
Trusted side, except ``interpreter_libdevice.install``, which runs inside sandboxed jobs.
"""
