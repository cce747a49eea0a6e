"""Small HTML helpers: escaping, tables, figures as data URIs, the page around them."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
.meta { color: #555; } code { background: #f4f4f4; padding: 0 0.2em; }
"""

#: Marks the page when every image decoded, and each image with its decoded size (checked
#: by the browser test).
CHECK = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  imgs.forEach(function (i) {
    i.setAttribute("data-decoded", i.complete ? i.naturalWidth + "x" + i.naturalHeight : "no");
  });
  var ok = imgs.every(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute("data-images", ok ? "ok" : "broken");
  document.body.setAttribute("data-image-count", String(imgs.length));
});
"""


def esc(v: Any) -> str:
    return html.escape(str(v))


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["<table><tr>", *(f"<th>{esc(h)}</th>" for h in head), "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{esc(fmt(v))}</td>" for v in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def figure(fig: Any, alt: str) -> str:
    """A matplotlib figure as an inline PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return png(buf.getvalue(), alt)


def png(data: bytes, alt: str) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{b64}">'


def page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}</style>"
        f"<script>{CHECK}</script></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
