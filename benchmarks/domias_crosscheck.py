"""The suite's DOMIAS attack and the authors' ``domias`` package on the same release: prints
both AUCs and the AUC's sampling band (Hanley and McNeil standard error at these counts).

    python benchmarks/domias_crosscheck.py DIR [--seed S]

DIR holds members.npz, non-members.npz, reference.npz and samples.npz (as written by
examples/own_release.py or audit.release.export). Needs the optional extra ``crosscheck``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from audit.release import ReleaseAttackConfig, Role, attack_release, read_records
from audit.release.crosscheck import domias_package_auc
from audit.release.record_sets import ReleaseRecords


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = {
        Role.MEMBERS: "members",
        Role.NON_MEMBERS: "non-members",
        Role.REFERENCE: "reference",
        Role.SAMPLES: "samples",
    }
    sets = {
        role: read_records(args.dir / f"{name}.npz", role, modality="image")
        for role, name in names.items()
    }
    records = ReleaseRecords(*(sets[role] for role in names))
    config = ReleaseAttackConfig(attacks=("domias",), seed=args.seed)
    ours = attack_release(records, config=config).rows[0]
    data = records.attack_data()
    theirs = domias_package_auc(
        data.x[data.is_member],
        data.x[~data.is_member],
        records.records(Role.REFERENCE),
        records.records(Role.SAMPLES),
        seed=args.seed,
    )
    print(
        f"{args.dir}: {int(data.is_member.sum())} members, {int((~data.is_member).sum())} "
        f"non-members, {len(sets[Role.REFERENCE])} reference, {len(sets[Role.SAMPLES])} samples"
    )
    print(
        f"ours AUC {ours.mi_auc:.4f}; domias package AUC {theirs.auc:.4f}; difference "
        f"{ours.mi_auc - theirs.auc:+.4f}; band (AUC standard error) {theirs.band:.4f}"
    )


if __name__ == "__main__":
    main()
