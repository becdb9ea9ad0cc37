"""report.html: one self-contained page (figures as data URIs, no network), rendered in a real
headless browser where one is installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from audit.report import write_report
from audit.report.html import render_html, write_html

from .synthetic import synthetic_runs, write_runs, write_scores

#: Where a screenshot of the rendered report is kept for a person to look at (the slow test).
SCREENSHOT_DIR = Path(os.environ.get("REPORT_SCREENSHOT_DIR", "/tmp"))


def test_figures_are_embedded_and_a_missing_one_is_an_error(tmp_path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    page = render_html(
        "# T\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n![a](a.png)", base=tmp_path, title="T"
    )
    assert 'src="data:image/png;base64,' in page and "<table>" in page
    assert "a.png" not in page.split("<body>")[1]
    md = tmp_path / "report.md"
    md.write_text("# T\n\n![b](b.png)\n")
    with pytest.raises(FileNotFoundError, match="b.png: a figure the report shows is missing"):
        write_html(md)
    assert not (tmp_path / "report.html").exists()


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.mark.slow
def test_report_html_renders_in_a_real_browser(tmp_path):
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    browser_path = _chromium()
    if browser_path is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    frame = synthetic_runs()
    run_dir = write_runs(tmp_path / "run", frame)
    write_scores(run_dir, frame)
    report = write_report(run_dir, formats=("png",), images=False)
    assert report.html is not None
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=browser_path,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.html.resolve().as_uri())
        page.wait_for_load_state("load")
        images = page.evaluate(
            "Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt])"
        )
        first_heading = page.evaluate("document.querySelector('h2').textContent")
        shot = SCREENSHOT_DIR / "report-html-screenshot.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert len(images) == len([f for f in report.figures if f.suffix == ".png"])
    assert all(complete and width > 0 for complete, width, _ in images), images
    assert images[0][2].endswith("frontier")  # the summary figure first
    assert first_heading == "Recommendation"
    assert errors == []
    # nothing but the file itself and its inline images was requested
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    from PIL import Image

    pixels = Image.open(shot).convert("L")
    low, high = pixels.getextrema()
    assert high - low > 100 and pixels.size[1] > 2000  # not blank; the whole report
