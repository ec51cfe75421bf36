"""lakesink: Kafka → S3 archives with Confluent S3-sink naming and a Delta manifest."""
__version__ = "0.1.0"
