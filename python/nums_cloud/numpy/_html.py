"""Jupyter's view of an array (``_repr_html_``): what it is and how it is split into
blocks, as Dask and Cubed show theirs, drawn from the graph without computing."""

import html
import math

# The grid drawn is at most this many cells along a side (more blocks are drawn as
# lines this far apart, as Dask draws them).
_CELLS = 20
_SIZE = 120


def _bytes(n):
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def _grid(shape, blocks):
    """An SVG of the block grid of the last two axes (one axis: a strip)."""
    if not shape:
        return ""
    rows, cols = (shape[-2], shape[-1]) if len(shape) > 1 else (1, shape[-1])
    brow, bcol = (blocks[-2], blocks[-1]) if len(blocks) > 1 else (1, blocks[-1])
    nr, nc = math.ceil(rows / max(brow, 1)), math.ceil(cols / max(bcol, 1))
    # Sides proportional to the array's, within limits that keep it readable.
    ratio = (rows / cols) if cols else 1
    w = _SIZE if ratio <= 1 else max(_SIZE / ratio, 20)
    h = _SIZE * ratio if ratio <= 1 else _SIZE
    h = max(h, 12)
    lines = []
    for i in range(min(nr, _CELLS) + 1):
        y = h * i / min(nr, _CELLS)
        lines.append(f'<line x1="0" y1="{y:.1f}" x2="{w:.1f}" y2="{y:.1f}" />')
    for j in range(min(nc, _CELLS) + 1):
        x = w * j / min(nc, _CELLS)
        lines.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{h:.1f}" />')
    return (f'<svg width="{w + 2:.0f}" height="{h + 2:.0f}" style="stroke:#444;stroke-width:1">'
            f'<rect width="{w:.1f}" height="{h:.1f}" style="fill:#ecb172a0" />'
            + "".join(lines) + "</svg>")


def summary(x):
    """The HTML table of ``x``: shape, dtype, blocks, bytes, state, and the grid."""
    a = x._a
    shape, blocks = tuple(a.shape), tuple(a.blocks)
    count = math.prod(math.ceil(n / max(b, 1)) for n, b in zip(shape, blocks)) if shape else 1
    block_bytes = math.prod(blocks) * x.dtype.itemsize
    state = "computed" if a.computed else "lazy"
    rows = [
        ("", "Array", "Block"),
        ("Bytes", _bytes(x.nbytes), _bytes(block_bytes)),
        ("Shape", shape, blocks),
        ("Count", f"{count} blocks", ""),
        ("Type", str(x.dtype), f"{state}: {a.label}"),
    ]
    body = "".join(
        "<tr>" + "".join(f"<{'th' if i == 0 or r[0] == '' else 'td'}>{html.escape(str(c))}"
                         f"</{'th' if i == 0 or r[0] == '' else 'td'}>"
                         for i, c in enumerate(r)) + "</tr>"
        for r in rows)
    return (f"<table><tr><td><table>{body}</table></td>"
            f"<td>{_grid(shape, blocks)}</td></tr></table>")
