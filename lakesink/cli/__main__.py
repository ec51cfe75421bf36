from lakesink.cli.process import entry_point

entry_point()
