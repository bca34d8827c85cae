# space code-interpreter: configuration of the Python kernels (ipykernel), passed as --config by server.py.
c = get_config()  # noqa: F821
c.InteractiveShell.colors = "NoColor"          # tracebacks without ANSI colours
c.HistoryManager.enabled = False               # no history database in ~/.ipython
c.PlainTextFormatter.max_seq_length = 0        # do not truncate long lists in text/plain
c.IPKernelApp.exec_files = ["/opt/space-ci/startup.py"]
