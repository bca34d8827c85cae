# space code-interpreter: run in each Python kernel when it starts (IPKernelApp.exec_files, see
# ipython_kernel_config.py). It registers the formatters that give E2B's extra MIME types, e2b/data for a
# pandas DataFrame and e2b/chart for a matplotlib Figure, a JSON formatter for plain lists and dicts, and
# imports numpy, pandas and matplotlib so that the first run of a sandbox does not pay for them. It runs in
# the user's namespace, so everything is done inside a function and only that function's name is removed.
def __space_ci_setup():
    import datetime
    import importlib.util
    import json
    import os
    import sys

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter, JSONFormatter
    from traitlets import ObjectName, Unicode

    here = os.environ.get("SPACE_CI_DIR", "/opt/space-ci")
    spec = importlib.util.spec_from_file_location("space_ci_charts", os.path.join(here, "charts.py"))
    charts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(charts)
    sys.modules["space_ci_charts"] = charts

    def plain(v):
        """A value JSON can carry: numpy scalars to Python ones, timestamps to ISO text."""
        np = sys.modules.get("numpy")
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(v, pd.Timestamp):
            return v.isoformat()
        if isinstance(v, (datetime.date, datetime.datetime, datetime.time)):
            return v.isoformat()
        if np is not None:
            if isinstance(v, np.generic):
                v = v.item()
            elif isinstance(v, np.ndarray):
                return [plain(x) for x in v.tolist()]
        if isinstance(v, float) and v != v:
            return None
        return v

    class DataFrameFormatter(BaseFormatter):
        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")
        _return_type = (dict, str)

        def __call__(self, obj):
            pd = sys.modules.get("pandas")
            if pd is None or not isinstance(obj, pd.DataFrame):
                return super().__call__(obj)
            cols = obj.to_dict(orient="list")
            return {str(k): [plain(x) for x in v] for k, v in cols.items()}

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (dict, str)

        def __call__(self, obj):
            if "matplotlib" not in sys.modules:
                return super().__call__(obj)
            from matplotlib.figure import Figure
            if not isinstance(obj, Figure):
                return super().__call__(obj)
            try:
                return charts.figure_to_chart(obj)
            except Exception:
                return {}

    class PlainJSONFormatter(JSONFormatter):
        def __call__(self, obj):
            if isinstance(obj, (list, dict)):
                try:
                    return json.loads(json.dumps(obj, default=plain, allow_nan=False)), {"expanded": True}
                except (TypeError, ValueError):
                    pass
            return super().__call__(obj)

    ip = get_ipython()
    fmt = ip.display_formatter
    fmt.formatters["e2b/data"] = DataFrameFormatter(parent=fmt)
    fmt.formatters["e2b/chart"] = ChartFormatter(parent=fmt)
    fmt.formatters["application/json"] = PlainJSONFormatter(parent=fmt)

    # Output in messages of at most about 256 KiB: a write that fills the buffer past that waits for it to
    # be sent. Without this, a loop that prints makes one message of whatever it printed in 0.2 s (hundreds
    # of MB), which the server would have to hold whole; with it, a client that reads slowly slows the code.
    try:
        from ipykernel.iostream import OutStream

        limit = 1 << 18
        if not getattr(OutStream, "_space_ci", False):
            original = OutStream.write

            def write(self, string):
                if not isinstance(string, str) or len(string) <= limit:
                    n = original(self, string)
                    try:
                        if self._buffer.tell() > limit and self._is_master_process():
                            self.flush()
                    except Exception:
                        pass
                    return n
                for i in range(0, len(string), limit):
                    write(self, string[i:i + limit])
                return len(string)

            OutStream.write = write
            OutStream._space_ci = True
    except Exception:
        pass

    # PIL: Image.show() displays the image instead of looking for a viewer.
    try:
        from PIL import ImageShow
        from IPython.display import display

        class InlineViewer(ImageShow.Viewer):
            def show(self, image, **options):
                display(image)
                return 1

        ImageShow.register(InlineViewer, 0)
    except Exception:
        pass

    # Warm up: the imports a first run most likely needs, so a sandbox restored from the snapshot has them.
    if os.environ.get("SPACE_CI_WARM", "1") != "0":
        import numpy  # noqa: F401
        import pandas  # noqa: F401
        import matplotlib
        import matplotlib.pyplot as plt
        fig = plt.figure()
        fig.canvas.draw()          # font cache and the Agg renderer
        plt.close(fig)
        charts.figure_to_chart(fig)


__space_ci_setup()
del __space_ci_setup
