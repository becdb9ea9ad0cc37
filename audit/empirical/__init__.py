"""Empirical privacy audits: what an auditor can prove against the claimed epsilon.

- :mod:`audit.empirical.bounds`: the statistics (Clopper-Pearson threshold-test bound; the
  one-run bound of Steinke, Nasr and Jagielski 2023 with its delta term), torch-free.
- :mod:`audit.empirical.local`: black-box audits of the local randomizers (ldp pixelization
  and series Laplace, vae-ldp's release) on worst-case neighbouring inputs.
- :mod:`audit.empirical.one_run`: the one-run audit of a cdp cell with gradient or input
  canaries in one extra DP-Adam run.
- :mod:`audit.cli.audit_command`: ``benchmark.py audit``.

A lower bound above the claim is a bug in the mechanism or its accounting.
"""
