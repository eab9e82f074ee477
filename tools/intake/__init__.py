"""Bring your own code: capture kernels from a running program (hook, capture), write them as oracle-mode tasks (taskgen, oracle), and patch the result back (apply)."""
