"""Question answering on LoCoMo and LongMemEval, three ways on one answerer: fadeway, the full
context and plain retrieval (`fadeway eval`; docs/design/eval.md)."""
