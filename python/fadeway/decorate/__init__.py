"""The two calls around the provider (MECHANISM: "When each part runs"): decorate (`call`:
recall, store what is new, take notes, forget, assemble) and report (`report`). Alignment with
what is stored (`align`), storing new messages (`ingest`), the view (`view`) and the request
around it (`assemble`)."""
