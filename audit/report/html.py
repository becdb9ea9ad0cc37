"""``report.html``: a report's Markdown as one self-contained HTML page that a data scientist can
send: every figure embedded as a ``data:`` URI, the style inline, no script and no network
access, so that it opens from a file (or a mail attachment) anywhere.

The Markdown is converted with Python-Markdown (its ``tables`` extension reads the report's pipe
tables); an image ``![name](file.png)`` is replaced by the bytes of ``file.png`` beside the
Markdown file. A referenced image that is missing is an error (a page with a broken image is not
sent silently).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import markdown

from audit import io

REPORT_HTML = "report.html"

_MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_IMG_SRC = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]+)(")')

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1.5em; color: #1d1d1f; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #bbb; margin-top: 2.2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: .86em; display: block;
        overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: .3em .55em; text-align: left; vertical-align: top; }
th { background: #f0f0f3; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; display: block; margin: 1em 0;
      border: 1px solid #e3e3e3; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; }
blockquote { border-left: 4px solid #c33; margin: 1em 0; padding: .3em 1em; background: #fff5f5; }
"""


def _data_uri(path: Path) -> str:
    mime = _MIME.get(path.suffix.lower())
    if mime is None:
        raise ValueError(f"{path}: cannot embed a {path.suffix or 'suffix-less'} file in HTML")
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def render_html(text: str, *, base: Path, title: str) -> str:
    """The HTML page of Markdown ``text`` whose images are files relative to ``base``."""
    body = markdown.markdown(text, extensions=["tables", "fenced_code"], output_format="html")

    def embed(match: re.Match[str]) -> str:
        src = html.unescape(match.group(2))
        if src.startswith("data:"):
            return match.group(0)
        path = base / src
        if not path.is_file():
            raise FileNotFoundError(f"{path}: a figure the report shows is missing")
        return match.group(1) + _data_uri(path) + match.group(3)

    body = _IMG_SRC.sub(embed, body)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def write_html(markdown_path: Path) -> Path:
    """Write ``report.html`` beside ``markdown_path`` (a report.md whose figures lie beside it),
    atomically; returns its path."""
    markdown_path = Path(markdown_path)
    text = markdown_path.read_text(encoding="utf-8")
    first = next((line for line in text.splitlines() if line.startswith("# ")), "# Report")
    page = render_html(text, base=markdown_path.parent, title=first.removeprefix("# ").strip())
    out = markdown_path.parent / REPORT_HTML
    io.write_text(out, page)
    return out
