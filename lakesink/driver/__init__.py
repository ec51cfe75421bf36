"""The driver's jobs: the sink batch (:mod:`.sink`), the Kafka metadata it plans from (:mod:`.kafka_admin`),
reading objects back through the manifest (:mod:`.archive`) and orphan removal (:mod:`.vacuum`)."""
