"""One home for a ``runs.csv`` row: its columns (:mod:`.row`), how a cell fills them
(:mod:`.filling`, :mod:`.uncertainty`, :mod:`.threat`) and the columns derived across rows
(:mod:`.derived`, :mod:`.tradeoff`)."""
