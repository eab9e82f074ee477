"""The tuner: find the launches that carry the time by running them, time many launch configurations in one
sandboxed job, and hand only the winners to the verifier.

- ``record``: every kernel launch of a task's ``launch()`` (kernel, grid, constexprs, options, calls, device time);
- ``tunables``: which constexprs are tiles, read from how the kernel uses them;
- ``space``: the knobs of a task (each value where it is defined), the instrumented source the job loads and the
  readable source of one configuration;
- ``search``: the order configurations are tried in (sweeps per knob, then coordinate descent), under a budget;
- ``job``: the sandboxed job (kind ``tune``): outputs screened against the initial kernel's, times measured the way
  the bench measures them.
"""
