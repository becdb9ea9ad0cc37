"""The command line: one parser class (:mod:`audit.cli.parsing`), one logging set-up
(:mod:`audit.cli.logs`), one module per subcommand turning its arguments into a frozen request
(:mod:`audit.cli.run_command`, :mod:`audit.cli.epsilon_command`, :mod:`audit.cli.audit_command`,
:mod:`audit.cli.results_commands`), and the dispatch (:mod:`audit.cli.main`). Only this package
prints; the library logs.
"""
