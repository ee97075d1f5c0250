"""Forgetting (MECHANISM: "The ceiling and the landing", "Forgetting", "Sleep"): the budget and the
landing (`budget`), sealing (`seal`), the fade (`fade`: where it runs, and its picks), the facts
block (`facts_block`), sleep (`sleep`), and the traces that a note's facts leave on the episodes
they are about (`scoring`, the lane's `score` job)."""
