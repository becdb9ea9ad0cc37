"""The sweep: which cells it has (:mod:`.plan`), where they run (:mod:`.executors`, :mod:`.jobs`)
and the driver that caches, resumes and writes ``runs.csv`` (:mod:`.runner`)."""
