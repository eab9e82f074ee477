"""The untrusted side: what runs in the candidate's own sandboxed process, the only place candidate code runs.
``runner.py`` (a cold runner) and ``zygote.py`` (a warm one, forking a runner per candidate) are run as scripts by
path (``judge/spawn.py``, ``judge/warm.py``) and load ``guard.py``, ``wire.py`` and ``fake_gpu.py`` from this folder
by path too: no ``tritondx.tools.verify`` module is imported in that process, and this file imports nothing. The
judge imports ``wire`` (the framed pipe protocol, never pickle) and ``guard``'s constants; nothing the runner
reports is believed, it can only reject a candidate.
"""
