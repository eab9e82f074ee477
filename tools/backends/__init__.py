"""Hardware and toolchains behind one interface: ``base`` (the questions a backend and a family of compile
targets answer), one package per backend (``cuda/``, ``npu/``, ``interpreter/``: its ``backend`` and, where it
compiles for targets of its own, its ``target`` family), ``registry`` (a backend by name) and ``targets`` (the
``--target`` a run names, checked against the toolchains before anything is made, and the family answering for it).
Trusted side, except ``interpreter.libdevice.install`` and ``interpreter.memcheck.install``, which run inside
sandboxed jobs. Nothing outside this folder compares a backend or target by name: it asks the adapter.
"""
