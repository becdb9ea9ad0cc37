"""Empirical privacy audits: what an auditor can prove against the claimed epsilon.

- :mod:`audit.empirical.bounds`: the statistics (Clopper-Pearson threshold-test bound; the
  one-run bound of Steinke, Nasr and Jagielski 2023 with its delta term), torch-free.
- :mod:`audit.empirical.local`: black-box audits of the local randomizers (ldp pixelization
  and series Laplace, vae-ldp's release) on worst-case neighbouring inputs.
- :mod:`audit.empirical.estimators`: the one-run f-DP bound, Clopper-Pearson at a threshold
  fixed in advance and the GDP estimate over canary scores, torch-free.
- :mod:`audit.empirical.guesses`: how many guesses a one-run audit makes (fixed in advance).
- :mod:`audit.empirical.one_run`: the one-run audit of a DP-SGD cell with gradient or input
  canaries (:mod:`audit.empirical.input_canaries`) in one extra training run.
- :mod:`audit.empirical.multi_run`: R such runs, cached, and the several-run estimators.
- :mod:`audit.cli.audit_command`: ``benchmark.py audit``.

A lower bound above the claim is a bug in the mechanism or its accounting.
"""
