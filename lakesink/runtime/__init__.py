"""The runtime of a lakesink run, for the CLI and notebooks alike: the Spark session (:mod:`.session`, built from a
config, or started in advance), the engine choice (:mod:`.engine`: local worker processes or Spark, one
:class:`~lakesink.runners.TaskRunner` per run), the log policy (:mod:`.logs`), the Spark session factory and
its jars (:mod:`.spark`, :mod:`.class_archive`). The CLI keeps arguments, signals and rendering."""
