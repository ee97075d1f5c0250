"""Exports (ARCHITECTURE: "Export"): a memory as one document (`document`), the checks an import
makes (`checks`), restoring one (`restore`), and JSONL files of them (`files`)."""
