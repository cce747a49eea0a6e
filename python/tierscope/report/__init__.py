"""`tierscope report DIR`: one self-contained HTML page for a run or a sweep directory,
readable offline (styles inline, images as data URIs, no scripts from anywhere)."""

from tierscope.report.build import write_report

__all__ = ["write_report"]
