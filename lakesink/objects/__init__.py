"""What an archive is made of, as pure functions of records and settings: object naming, time formats,
partitioners, rotation and the file formats. Nothing here imports Spark, boto3, a registry client or the
config: :mod:`lakesink.wiring` builds these objects from a config and hands each only its own settings."""
