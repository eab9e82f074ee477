"""What a candidate is checked on, decided before any candidate code runs (trusted): ``cases`` (the plan the judge
reads its case list from: listed, derived and stressed cases, fresh seeds), ``shapes``, ``tiles`` and ``stress``
(the sizes and value ranges it derives), ``branches``, ``launch_walk``, ``original_path`` and ``evaluator`` (the
branches a candidate adds and which input reaches each side, read from the source with ``ast`` only), ``buffers``
(a destination buffer told from a degenerate input, by running the reference), ``flip`` (the device flip's
rewritten source and cases). Nothing here imports the candidate, the judge or the runner.
"""
