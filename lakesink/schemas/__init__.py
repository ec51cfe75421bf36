"""Value schemas: Avro schema identity, parsing and conversion (:mod:`.avro`) and the compatibility rules
that decide when files rotate and how records are projected (:mod:`.compatibility`)."""
