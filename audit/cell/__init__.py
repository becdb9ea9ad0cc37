"""One grid cell, stage by stage: its records, its target's training, D_gen and the classifier,
the attacks on what it releases, and the outcome saved."""
