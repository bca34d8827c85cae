"""space code-interpreter: a matplotlib Figure described as E2B's chart JSON (the `e2b/chart` MIME type).

Loaded into each Python kernel by startup.py. figure_to_chart(fig) gives a dict the SDKs' chart classes read:
{type, title, elements, ...}; 2-D types add x_label, y_label, x_unit, y_unit; line and scatter add
x_ticks, x_tick_labels, x_scale, y_ticks, y_tick_labels, y_scale. Several axes give a `superchart`
whose elements are the charts of the axes. A blank figure gives {}.
"""
import datetime
import re
from decimal import Decimal, localcontext

_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def _round(x):
    """x to 8 significant digits, as a float (keeps 0.1+0.2 from showing as 0.30000000000000004)."""
    d = Decimal(str(float(x)))
    with localcontext() as ctx:
        ctx.prec = max(1, 8 - d.adjusted()) if d else 1
        return float(+d)


def _jsonable(v):
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    try:
        import numpy
        if isinstance(v, numpy.datetime64):
            return str(v.astype("datetime64[s]"))
        if isinstance(v, numpy.generic):
            v = v.item()
    except ImportError:
        pass
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    return v if isinstance(v, str) else str(v)


def _is_grid_line(line):
    xs, ys = line.get_xdata(), line.get_ydata()
    if len(xs) != 2 or len(ys) != 2:
        return False
    return xs[0] == xs[1] or ys[0] == ys[1]


def _kind(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text

    artists = [a for a in ax.get_children() if a in ax._children and not isinstance(a, Text)] \
        if hasattr(ax, "_children") else []
    if all(isinstance(a, Line2D) for a in artists):
        return "line"
    if all(isinstance(a, (PathPatch, Line2D)) for a in artists):
        return "box_and_whisker"
    artists = [a for a in artists if not (isinstance(a, Line2D) and _is_grid_line(a))]
    if all(isinstance(a, PathCollection) for a in artists):
        return "scatter"
    if all(isinstance(a, Wedge) for a in artists):
        return "pie"
    if all(isinstance(a, Rectangle) for a in artists):
        return "bar"
    return "unknown"


def _text_or_none(s):
    return s if s else None


def _base(ax, kind):
    return {"type": kind, "title": _text_or_none(ax.get_title()), "elements": []}


def _with_axes_labels(chart, ax):
    for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        label = _text_or_none(label)
        chart[axis + "_label"] = label
        unit = None
        if label:
            m = _UNIT.search(label)
            if m:
                unit = m.group(1) or m.group(2)
        chart[axis + "_unit"] = unit
    return chart


def _swap_axes(chart):
    chart["x_label"], chart["y_label"] = chart["y_label"], chart["x_label"]
    chart["x_unit"], chart["y_unit"] = chart["y_unit"], chart["x_unit"]


def _is_date_axis(axis):
    import matplotlib.dates as mdates
    conv = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    return isinstance(conv, (mdates.DateConverter, mdates.ConciseDateConverter)) or \
        type(conv).__name__ == "_SwitchableDateConverter"


def _ticks(ax, name):
    import matplotlib.dates as mdates
    axis = ax.xaxis if name == "x" else ax.yaxis
    labels = [t.get_text() for t in (ax.get_xticklabels() if name == "x" else ax.get_yticklabels())]
    raw = ax.get_xticks() if name == "x" else ax.get_yticks()
    dates = _is_date_axis(axis)
    if dates:
        ticks = [mdates.num2date(t).isoformat() for t in raw]
        scale = "datetime"
    else:
        ticks = [float(t) for t in raw]
        scale = ax.get_xscale() if name == "x" else ax.get_yscale()
        if scale == "linear" and ticks and all(t == i and str(i) != lab for i, (t, lab) in enumerate(zip(ticks, labels))):
            scale = "categorical"
    return ticks, labels, scale


def _point_chart(ax, kind):
    chart = _with_axes_labels(_base(ax, kind), ax)
    for n in ("x", "y"):
        ticks, labels, scale = _ticks(ax, n)
        chart[n + "_ticks"], chart[n + "_tick_labels"], chart[n + "_scale"] = ticks, labels, scale
    if kind == "line":
        for line in ax.get_lines():
            if _is_grid_line(line):
                continue
            label = str(line.get_label())
            if label.startswith("_child"):
                label = "Line " + label[len("_child"):]
            pts = [[_jsonable(x), _jsonable(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]
            chart["elements"].append({"label": label, "points": pts})
    else:
        for coll in ax.collections:
            pts = [[_jsonable(x), _jsonable(y)] for x, y in coll.get_offsets()]
            chart["elements"].append({"label": str(coll.get_label()), "points": pts})
    return chart


def _bar_chart(ax):
    chart = _with_axes_labels(_base(ax, "bar"), ax)
    swapped = False
    for container in ax.containers:
        group = str(container.get_label())
        if group.startswith("_container"):
            group = "Group " + group[len("_container"):]
        rects = list(container)
        heights = [r.get_height() for r in rects]
        if heights and all(h == heights[0] for h in heights) and len(heights) > 1 and \
                not all(r.get_width() == rects[0].get_width() for r in rects):
            # horizontal bars (barh): the values are the widths, the labels on the y axis
            if not swapped:
                _swap_axes(chart)
                swapped = True
            labels = [t.get_text() for t in ax.get_yticklabels()]
            values = [r.get_width() for r in rects]
        else:
            labels = [t.get_text() for t in ax.get_xticklabels()]
            values = heights
        # a bar's label is the tick label at its centre when there is one, else its position
        ticks = list(ax.get_yticks() if swapped else ax.get_xticks())
        for r, v in zip(rects, values):
            centre = (r.get_y() + r.get_height() / 2) if swapped else (r.get_x() + r.get_width() / 2)
            label = None
            for t, lab in zip(ticks, labels):
                if abs(t - centre) < 1e-6:
                    label = lab
                    break
            if label is None:
                label = repr(_round(centre))
            chart["elements"].append({"label": label, "group": group, "value": float(v)})
    return chart


def _box_chart(ax):
    chart = _with_axes_labels(_base(ax, "box_and_whisker"), ax)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    boxes = []
    for label, patch in zip(labels, ax.patches):
        v = patch.get_path().vertices
        xs = [_round(x) for x in v[:, 0]]
        ys = [_round(y) for y in v[:, 1]]
        boxes.append({"x": min(xs), "y": min(ys), "w": max(xs) - min(xs), "h": max(ys) - min(ys),
                      "label": label, "outliers": []})
    if not boxes:
        return chart
    b0 = boxes[0]
    centre_x = b0["x"] + b0["w"] / 2
    horizontal = not any(abs(t - centre_x) < 1e-6 for t in ax.get_xticks())
    if horizontal:
        _swap_axes(chart)
        labels = [t.get_text() for t in ax.get_yticklabels()]
        for b, lab in zip(boxes, labels):
            b["x"], b["y"], b["w"], b["h"] = b["y"], b["x"], b["h"], b["w"]
            b["label"] = lab
    for line in ax.lines:
        xs = [_round(x) for x in line.get_xdata()]
        ys = [_round(y) for y in line.get_ydata()]
        if horizontal:
            xs, ys = ys, xs
        if not xs:
            continue
        box = next((b for b in boxes if b["x"] <= xs[0] <= b["x"] + b["w"]), None)
        if box is None:
            continue
        if line.get_linestyle() in ("None", "none", "", " "):
            box["outliers"].extend(ys)
            continue
        if len(ys) != 2:
            continue
        if len(xs) == 2 and not (box["x"] <= xs[1] <= box["x"] + box["w"]):
            continue
        if ys[0] == ys[1] and box["y"] <= ys[0] <= box["y"] + box["h"] and xs[0] != xs[1] and \
                abs((xs[1] - xs[0]) - box["w"]) < 1e-9 * max(1.0, box["w"]) + 1e-12:
            box["median"] = ys[0]
            continue
        lo, hi = min(ys), max(ys)
        if hi == box["y"]:
            box["min"] = lo
        elif lo == box["y"] + box["h"]:
            box["max"] = hi
    for b in boxes:
        chart["elements"].append({
            "label": b["label"], "min": b.get("min", b["y"]), "first_quartile": b["y"],
            "median": b.get("median", b["y"] + b["h"] / 2), "third_quartile": b["y"] + b["h"],
            "max": b.get("max", b["y"] + b["h"]), "outliers": b["outliers"],
        })
    return chart


def _pie_chart(ax):
    chart = _base(ax, "pie")
    for w in ax.patches:
        chart["elements"].append({"label": str(w.get_label()), "angle": abs(_round(float(w.theta2) - float(w.theta1))),
                                  "radius": float(w.r)})
    return chart


def axes_to_chart(ax):
    kind = _kind(ax)
    if kind in ("line", "scatter"):
        return _point_chart(ax, kind)
    if kind == "bar":
        return _bar_chart(ax)
    if kind == "box_and_whisker":
        return _box_chart(ax)
    if kind == "pie":
        return _pie_chart(ax)
    return _base(ax, "unknown")


def figure_to_chart(fig):
    axes = fig.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return {}
    if len(axes) > 1:
        title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else None
        return {"type": "superchart", "title": title or None, "elements": [axes_to_chart(ax) for ax in axes]}
    return axes_to_chart(axes[0])
