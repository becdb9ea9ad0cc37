"""MotionSense (Malekzadeh et al.; the trade-off paper, Section 4): iPhone device-motion recordings
of 24 subjects in six activities, read in the dataset's own layout.

Layout: ``A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv`` with an unnamed index column and
the 12 columns of :data:`SENSOR_COLUMNS`, sampled at 50 Hz. Each recording is cut into 10 s windows
(500 samples; non-overlapping unless a stride is given), each labelled by its activity.

Where the data comes from: ``--data-home DIR`` (``DIR/A_DeviceMotion_data`` or DIR itself), else
scikit-learn's data home (``~/scikit_learn_data/motionsense``, ``$SCIKIT_LEARN_DATA``). When
the CSVs are not there, the archive :data:`URL` is downloaded once and verified before anything
is extracted; without a network that fails with one line naming ``--data-home`` and the URL.

Verification: no checksum of the archive is published (the MotionSense repository gives none, and no
public code we could find pins one), so none can be pinned here. What can be verified is: every
member's CRC-32 (``ZipFile.testzip``: the archive is intact as its author zipped it), the layout
(every CSV member is ``A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv``; macOS metadata and
other non-CSV members are skipped) and every CSV's header (the 12 device-motion columns). The
archive's SHA-256 and each extracted file's CRC-32 and size then go into :data:`DOWNLOAD_MANIFEST`
beside the data: later runs check the files against it (a changed or missing file is refused), and a
later download must hash to the recorded SHA-256, so a changed archive upstream is detected rather
than silently mixed into results (trust on first use).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import math
import os
import re
import shutil
import tempfile
import time
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit import io
from audit.datasets.dataset import Dataset, DatasetSpec, DatasetUnavailable
from audit.datasets.series import GYRO_RAD_S, ChannelScaler, windows
from dpvae_core.records import Modality

log = logging.getLogger(__name__)

NAME = "motionsense"
FOLDER = "A_DeviceMotion_data"
#: The device-motion archive in the MotionSense repository (github.com/mmalekzadeh/motion-sense).
URL = f"https://github.com/mmalekzadeh/motion-sense/raw/master/data/{FOLDER}.zip"
#: Written beside ``FOLDER`` after a verified download: the archive's SHA-256, the files' CRC-32.
DOWNLOAD_MANIFEST = f"{FOLDER}.manifest.json"
DOWNLOAD_TIMEOUT_S = 60
#: Activity codes in the MotionSense repository's label order (the trade-off paper, Figure 7:
#: classes 0-3 are movements, 4 and 5 standing and sitting).
ACTIVITIES = ("dws", "ups", "wlk", "jog", "std", "sit")
SENSOR_COLUMNS = (
    "attitude.roll", "attitude.pitch", "attitude.yaw",
    "gravity.x", "gravity.y", "gravity.z",
    "rotationRate.x", "rotationRate.y", "rotationRate.z",
    "userAcceleration.x", "userAcceleration.y", "userAcceleration.z",
)  # fmt: skip
SAMPLE_RATE_HZ = 50
WINDOW = 10 * SAMPLE_RATE_HZ
#: The trade-off paper: 10 % D_train, 10 % D_val, 80 % D_test.
SPLIT_FRACTIONS = (0.1, 0.1, 0.8)
#: Fixed ranges of :data:`SENSOR_COLUMNS` in their own units (Core Motion device motion of the
#: iPhone 6s MotionSense used), not taken from the records: attitude angles in radians [-pi, pi];
#: gravity, a unit vector in g, [-1, 1]; rotationRate in rad/s within the gyroscope's
#: +-2000 deg/s full scale; userAcceleration in g within the accelerometer's +-8 g full scale.
RANGES = ChannelScaler(
    lower=np.array([-math.pi] * 3 + [-1.0] * 3 + [-GYRO_RAD_S] * 3 + [-8.0] * 3),
    upper=np.array([math.pi] * 3 + [1.0] * 3 + [GYRO_RAD_S] * 3 + [8.0] * 3),
    source="MotionSense iPhone device motion: attitude +-pi rad, gravity +-1 g, rotationRate "
    "+-2000 deg/s in rad/s, userAcceleration +-8 g",
)

_TRIAL = re.compile(rf"^({'|'.join(ACTIVITIES)})_(\d+)$")
_SUBJECT = re.compile(r"^sub_(\d+)\.csv$")
_MEMBER = re.compile(rf"^{FOLDER}/({'|'.join(ACTIVITIES)})_\d+/sub_\d+\.csv$")
_SKIPPED_MEMBER = re.compile(r"(^__MACOSX/)|(/$)|((^|/)\.DS_Store$)")


def _unavailable(data_home: Path | None, reason: str) -> DatasetUnavailable:
    where = f"--data-home {data_home}" if data_home else "no --data-home given"
    return DatasetUnavailable(
        f"dataset {NAME!r} needs the MotionSense device-motion CSVs "
        f"({FOLDER}/<activity>_<trial>/sub_<n>.csv): {reason} ({where}); fetch {URL} where the "
        f"internet is reachable, unzip it into DIR and pass --data-home DIR"
    )


def default_home() -> Path:
    """Where MotionSense is looked for and downloaded to without ``--data-home``: the
    ``motionsense`` folder of scikit-learn's data home (not created here)."""
    base = os.environ.get("SCIKIT_LEARN_DATA", str(Path.home() / "scikit_learn_data"))
    return Path(base).expanduser() / NAME


def find_root(data_home: Path | None) -> Path:
    """The folder holding the ``<activity>_<trial>`` folders: ``DIR/A_DeviceMotion_data`` or DIR."""
    if data_home is None:
        raise _unavailable(None, "no data folder")
    for root in (Path(data_home) / FOLDER, Path(data_home)):
        if root.is_dir() and any(_TRIAL.match(p.name) and p.is_dir() for p in root.iterdir()):
            return root
    raise _unavailable(data_home, f"no {FOLDER} folder with <activity>_<trial> folders found")


# ---- download and verification -----------------------------------------------------------------


def fetch(url: str, dest: Path) -> None:
    """Download ``url`` to ``dest``; raises OSError (or an HTTPException) when it cannot."""
    request = urllib.request.Request(url, headers={"User-Agent": "dpvae-audit"})
    with (
        urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response,
        open(dest, "wb") as out,
    ):
        shutil.copyfileobj(response, out)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _refuse(archive: str, reason: str) -> DatasetUnavailable:
    return DatasetUnavailable(
        f"dataset {NAME!r}: the downloaded archive {archive} is refused: {reason}; nothing was "
        f"extracted (fetch {URL} yourself, check it, unzip it into DIR and pass --data-home DIR)"
    )


def verify_archive(path: Path, *, source: str = URL) -> list[zipfile.ZipInfo]:
    """The archive's CSV members after checking every member's CRC-32, the layout and each CSV's
    header; raises DatasetUnavailable (one line) on the first problem."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # reads every member and checks its CRC-32
            if bad is not None:
                raise _refuse(source, f"member {bad!r} fails its CRC-32 check (corrupted)")
            members = [m for m in archive.infolist() if not _SKIPPED_MEMBER.search(m.filename)]
            stray = [m.filename for m in members if m.filename.lower().endswith(".csv")
                     and not _MEMBER.match(m.filename)]  # fmt: skip
            if stray:
                raise _refuse(
                    source,
                    f"{len(stray)} CSV member(s) outside {FOLDER}/<activity>_<trial>/sub_<n>.csv, "
                    f"e.g. {stray[0]!r}",
                )
            csvs = [m for m in members if _MEMBER.match(m.filename)]
            if not csvs:
                raise _refuse(source, f"no {FOLDER}/<activity>_<trial>/sub_<n>.csv member")
            for member in csvs:
                with archive.open(member) as fh:
                    header = fh.readline().decode("utf-8", "replace")
                fields = {f.strip().strip('"') for f in header.split(",")}
                missing = [c for c in SENSOR_COLUMNS if c not in fields]
                if missing:
                    raise _refuse(source, f"{member.filename!r} lacks column(s) {missing}")
            return csvs
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise _refuse(source, f"not a readable zip archive ({exc})") from None


def _recorded(manifest: Path) -> dict[str, Any] | None:
    if not manifest.is_file():
        return None
    try:
        data = io.read_json(manifest)
        if not (
            isinstance(data.get("archive_sha256"), str) and isinstance(data.get("files"), dict)
        ):
            raise ValueError("no archive_sha256 and files")
    except ValueError as exc:
        raise DatasetUnavailable(
            f"dataset {NAME!r}: manifest {str(manifest)!r} is unreadable ({exc}); delete it and "
            f"{FOLDER} beside it to download the archive again"
        ) from None
    return data


def download(home: Path, *, data_home_given: bool = True) -> Path:
    """Download :data:`URL`, verify it (:func:`verify_archive`; against the SHA-256 of an earlier
    download where :data:`DOWNLOAD_MANIFEST` records one), extract its CSVs into ``home/FOLDER`` and
    write the manifest; returns ``home/FOLDER``. Nothing is written to ``home`` unless all checks
    pass.
    """
    home = Path(home)
    named = home if data_home_given else None
    if (home / FOLDER).exists():
        raise _unavailable(
            named, f"{home / FOLDER} exists without <activity>_<trial> folders; move it away"
        )
    with tempfile.TemporaryDirectory(prefix="motionsense-") as tmp:
        archive = Path(tmp) / f"{FOLDER}.zip"
        try:
            fetch(URL, archive)
        except (OSError, http.client.HTTPException) as exc:
            reason = str(getattr(exc, "reason", "") or exc) or type(exc).__name__
            raise _unavailable(
                named, f"they are not in {home} and downloading failed ({reason})"
            ) from None
        digest = sha256_of(archive)
        previous = _recorded(home / DOWNLOAD_MANIFEST)
        if previous is not None and previous["archive_sha256"] != digest:
            raise _refuse(
                URL,
                f"its SHA-256 {digest} differs from the {previous['archive_sha256']} recorded in "
                f"{home / DOWNLOAD_MANIFEST} at the first download (the file changed upstream)",
            )
        csvs = verify_archive(archive)
        staging = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.", dir=_made(home)))
        try:
            with zipfile.ZipFile(archive) as zf:
                for member in csvs:  # names matched _MEMBER: no absolute paths, no '..'
                    zf.extract(member, staging)
            (staging / FOLDER).rename(home / FOLDER)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        files = {m.filename.removeprefix(f"{FOLDER}/"): _entry(m) for m in csvs}
        io.write_json(
            home / DOWNLOAD_MANIFEST,
            {
                "url": URL,
                "archive_sha256": digest,
                "archive_bytes": archive.stat().st_size,
                "downloaded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "files": files,
            },
        )
    log.info("MotionSense: %d CSVs from %s (SHA-256 %s) in %s", len(files), URL, digest, home)
    return home / FOLDER


def _made(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    return home


def _entry(member: zipfile.ZipInfo) -> dict[str, Any]:
    return {"crc32": f"{member.CRC:08x}", "bytes": member.file_size}


def crc32_of(path: Path) -> str:
    crc = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def check_against_manifest(root: Path) -> None:
    """Where ``root`` came from a verified download (a manifest beside it), every file it lists
    must be there with its recorded size and CRC-32; raises DatasetUnavailable otherwise."""
    recorded = _recorded(root.parent / DOWNLOAD_MANIFEST) if root.name == FOLDER else None
    if recorded is None:
        return
    for name, entry in recorded["files"].items():
        path = root / name
        if not path.is_file():
            problem = "is missing"
        elif path.stat().st_size != entry["bytes"] or crc32_of(path) != entry["crc32"]:
            problem = "differs from the verified download (size or CRC-32)"
        else:
            continue
        raise DatasetUnavailable(
            f"dataset {NAME!r}: {str(path)!r} {problem} recorded in "
            f"{root.parent / DOWNLOAD_MANIFEST}; "
            f"delete {root} and the manifest to download the archive again"
        )


def locate(data_home: Path | None, *, allow_download: bool = True) -> Path:
    """The folder of ``<activity>_<trial>`` folders: found under ``data_home`` (or
    :func:`default_home`), else downloaded there when ``allow_download``; checked against its
    manifest when it has one."""
    home = Path(data_home) if data_home is not None else default_home()
    try:
        root = find_root(home)
    except DatasetUnavailable:
        if not allow_download:
            raise
        root = download(home, data_home_given=data_home is not None)
    check_against_manifest(root)
    return root


# ---- reading -----------------------------------------------------------------------------------


def recordings(root: Path) -> list[tuple[str, int, int, Path]]:
    """(activity, trial, subject, path) of every CSV, sorted by activity order, trial, subject."""
    found = []
    for trial_dir in root.iterdir():
        trial = _TRIAL.match(trial_dir.name)
        if not (trial and trial_dir.is_dir()):
            continue
        for path in trial_dir.iterdir():
            subject = _SUBJECT.match(path.name)
            if subject:
                found.append((trial[1], int(trial[2]), int(subject[1]), path))
    return sorted(found, key=lambda r: (ACTIVITIES.index(r[0]), r[1], r[2]))


def read_recording(path: Path) -> np.ndarray:
    """The 12 device-motion columns of one CSV as float32 (n, 12); the index column is ignored."""
    header = pd.read_csv(path, nrows=0).columns
    missing = [c for c in SENSOR_COLUMNS if c not in header]
    if missing:
        raise DatasetUnavailable(f"MotionSense file {str(path)!r} lacks column(s) {missing}")
    try:
        frame = pd.read_csv(path, usecols=list(SENSOR_COLUMNS), dtype=np.float64)
    except ValueError as exc:
        raise DatasetUnavailable(f"MotionSense file {str(path)!r} is malformed: {exc}") from None
    return frame[list(SENSOR_COLUMNS)].to_numpy(dtype=np.float32)


def load_motionsense(
    data_home: Path | None,
    *,
    window: int = WINDOW,
    stride: int | None = None,
    allow_download: bool = True,
) -> Dataset:
    """MotionSense windows (N, ``window``, 12) in sensor units, labelled by activity.

    ``stride`` (default ``window``: non-overlapping) is the step between window starts within
    one recording; windows never cross recordings. Class names are the activities present, in
    :data:`ACTIVITIES` order. The fixed channel ranges :data:`RANGES` clip and scale them to
    [-1, 1] in the pipeline. Where the CSVs come from: :func:`locate`.
    """
    stride = window if stride is None else stride
    if not (isinstance(stride, int) and stride >= 1):
        raise ValueError(f"window stride must be a positive integer, got {stride!r}")
    root = locate(data_home, allow_download=allow_download)
    found = recordings(root)
    if not found:
        raise _unavailable(data_home, f"no sub_<n>.csv files under {root}")
    present = [a for a in ACTIVITIES if any(r[0] == a for r in found)]
    xs, ys = [], []
    for activity, _, _, path in found:
        cut = windows(read_recording(path), length=window, stride=stride)
        xs.append(cut)
        ys.append(np.full(len(cut), present.index(activity), dtype=np.int64))
    x = np.concatenate(xs)
    if len(x) == 0:
        raise _unavailable(data_home, f"no recording under {root} has {window} samples")
    log.info("MotionSense: %d windows of %d samples from %d recordings", len(x), window, len(found))
    return Dataset(
        NAME,
        x,
        np.concatenate(ys),
        tuple(present),
        split_fractions=SPLIT_FRACTIONS,
        modality=Modality.SERIES,
        channel_ranges=RANGES,
    )


def _load(data_home: Path | None, *, window_stride: int | None = None) -> Dataset:
    """MotionSense device-motion windows (10 s at 50 Hz, a new one every ``window_stride``
    samples; default 500, non-overlapping) from ``--data-home``, downloaded there if absent."""
    return load_motionsense(data_home, stride=window_stride)


SPEC = DatasetSpec(
    name=NAME,
    modality=Modality.SERIES,
    loader=_load,
    split_fractions=SPLIT_FRACTIONS,
    window_stride=WINDOW,
    channel_ranges=RANGES,
    reads_data_home=True,
)
