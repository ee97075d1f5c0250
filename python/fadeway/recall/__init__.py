"""Recall (MECHANISM: "Recall"), a staged pipeline (`pipeline`): parts, searches, the walk,
grouping and the block; the block's turn and distill (`turns`, `distill`)."""
