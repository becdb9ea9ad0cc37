"""MotionSense's download path, offline: a fake archive in the real layout stands in for the
network (``audit.datasets.motionsense.fetch`` is monkeypatched; no test touches the internet)."""

from __future__ import annotations

import shutil
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pytest

from audit import io
from audit.datasets import DatasetUnavailable, load_dataset, motionsense
from audit.datasets.motionsense import DOWNLOAD_MANIFEST, FOLDER, URL, sha256_of

from .fixtures import FIXTURE_SUBJECTS, FIXTURE_TRIALS, build_motionsense_fixture


def build_archive(path: Path, source: Path, *, junk: bool = True) -> Path:
    """A zip like the real one: ``A_DeviceMotion_data/<trial>/sub_<n>.csv`` plus macOS metadata
    (stored uncompressed, so that a flipped byte is a CRC-32 error, not a zlib one)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for csv in sorted((source / FOLDER).rglob("*.csv")):
            zf.write(csv, csv.relative_to(source).as_posix())
        if junk:
            zf.writestr(f"__MACOSX/{FOLDER}/._dws_1", b"\x00\x05\x16\x07")
            zf.writestr(f"{FOLDER}/.DS_Store", b"\x00\x00\x00\x01Bud1")
    return path


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    source = build_motionsense_fixture(tmp_path / "source")
    return build_archive(tmp_path / "A_DeviceMotion_data.zip", source)


@pytest.fixture
def served(monkeypatch, archive):
    """``fetch`` copies ``archive`` (whatever it holds when called); returns the list of URLs
    fetched."""
    calls: list[str] = []

    def fake_fetch(url: str, dest: Path) -> None:
        calls.append(url)
        shutil.copyfile(archive, dest)

    monkeypatch.setattr(motionsense, "fetch", fake_fetch)
    return calls


def offline(monkeypatch) -> None:
    def no_network(url: str, dest: Path) -> None:
        raise urllib.error.URLError(OSError(-2, "Name or service not known"))

    monkeypatch.setattr(motionsense, "fetch", no_network)


def test_absent_data_is_downloaded_verified_and_recorded(tmp_path, archive, served, monkeypatch):
    home = tmp_path / "home"
    data = load_dataset("motionsense", data_home=home)
    assert served == [URL]
    direct = load_dataset("motionsense", data_home=tmp_path / "source")
    np.testing.assert_array_equal(data.x, direct.x)
    np.testing.assert_array_equal(data.y, direct.y)
    assert sorted(p.name for p in home.iterdir()) == [FOLDER, DOWNLOAD_MANIFEST]  # no junk, no zip
    assert not (home / FOLDER / ".DS_Store").exists()
    manifest = io.read_json(home / DOWNLOAD_MANIFEST)
    assert manifest["archive_sha256"] == sha256_of(archive) and manifest["url"] == URL
    assert len(manifest["files"]) == len(FIXTURE_TRIALS) * len(FIXTURE_SUBJECTS)
    offline(monkeypatch)  # the next run reads the files, checked against the manifest
    again = load_dataset("motionsense", data_home=home)
    np.testing.assert_array_equal(again.x, data.x)


def test_offline_is_one_line_naming_data_home_and_the_url(tmp_path, monkeypatch):
    offline(monkeypatch)
    home = tmp_path / "home"
    with pytest.raises(DatasetUnavailable) as info:
        load_dataset("motionsense", data_home=home)
    message = str(info.value)
    assert "\n" not in message and "--data-home" in message and URL in message
    assert "Name or service not known" in message
    assert not home.exists()  # nothing written


def test_without_data_home_the_default_home_is_used(tmp_path, served, monkeypatch):
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "sk"))
    load_dataset("motionsense")
    assert (tmp_path / "sk" / "motionsense" / DOWNLOAD_MANIFEST).is_file()


def _flip_member_byte(path: Path, member: str) -> None:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw = bytearray(path.read_bytes())
    offset = start + 200
    raw[offset] = ord("7") if raw[offset] != ord("7") else ord("3")
    path.write_bytes(bytes(raw))


def _refused(tmp_path: Path) -> str:
    home = tmp_path / "home"
    with pytest.raises(DatasetUnavailable) as info:
        load_dataset("motionsense", data_home=home)
    message = str(info.value)
    assert "\n" not in message and "refused" in message and URL in message
    assert not (home / FOLDER).exists() and not (home / DOWNLOAD_MANIFEST).exists()
    return message


def test_a_corrupted_member_is_refused_by_its_crc(tmp_path, archive, served):
    _flip_member_byte(archive, f"{FOLDER}/jog_9/sub_2.csv")
    assert f"member '{FOLDER}/jog_9/sub_2.csv' fails its CRC-32 check" in _refused(tmp_path)


def test_a_truncated_or_foreign_file_is_refused(tmp_path, archive, served):
    archive.write_bytes(archive.read_bytes()[:5000])
    assert "not a readable zip archive" in _refused(tmp_path)
    archive.write_bytes(b"<html>rate limited</html>")
    assert "not a readable zip archive" in _refused(tmp_path)


def test_a_wrong_layout_is_refused(tmp_path, archive, served):
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("elsewhere/sub_1.csv", "a,b\n1,2\n")
    assert "CSV member(s) outside A_DeviceMotion_data" in _refused(tmp_path)
    source = build_motionsense_fixture(tmp_path / "other")
    csv = source / FOLDER / "sit_5" / "sub_3.csv"
    csv.write_text(csv.read_text().replace("gravity.z", "gravity_z", 1))
    build_archive(archive, source)
    assert f"'{FOLDER}/sit_5/sub_3.csv' lacks column(s) ['gravity.z']" in _refused(tmp_path)


def test_a_changed_file_after_download_is_refused(tmp_path, served):
    home = tmp_path / "home"
    load_dataset("motionsense", data_home=home)
    csv = home / FOLDER / "dws_1" / "sub_4.csv"
    csv.write_text(csv.read_text().replace("0", "1", 1))
    with pytest.raises(DatasetUnavailable, match="sub_4.csv' differs from the verified download"):
        load_dataset("motionsense", data_home=home)
    csv.unlink()
    with pytest.raises(DatasetUnavailable, match="sub_4.csv' is missing"):
        load_dataset("motionsense", data_home=home)


def test_a_changed_archive_upstream_is_refused(tmp_path, archive, served):
    home = tmp_path / "home"
    load_dataset("motionsense", data_home=home)
    recorded = io.read_json(home / DOWNLOAD_MANIFEST)["archive_sha256"]
    shutil.rmtree(home / FOLDER)  # the data is gone, the manifest stays: download again
    build_archive(archive, build_motionsense_fixture(tmp_path / "v2", seed=1))
    with pytest.raises(DatasetUnavailable, match=f"differs from the {recorded} recorded") as info:
        load_dataset("motionsense", data_home=home)
    assert "\n" not in str(info.value) and not (home / FOLDER).exists()


def test_a_folder_in_the_way_is_named_not_overwritten(tmp_path, served):
    home = tmp_path / "home"
    (home / FOLDER / "notes").mkdir(parents=True)  # not the layout: find nothing, fetch nothing
    with pytest.raises(DatasetUnavailable, match="exists without <activity>_<trial> folders"):
        load_dataset("motionsense", data_home=home)
    assert served == [] and (home / FOLDER / "notes").is_dir()
