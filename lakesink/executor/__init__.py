"""What runs in Spark's Python workers: Arrow batches of one Kafka partition in, objects uploaded and
manifest rows out (:mod:`.task` is the ``mapInArrow`` body, :mod:`.archiver` the per-partition state,
:mod:`.columnar` the whole-batch fast path)."""
