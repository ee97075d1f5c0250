"""Forgetting (MECHANISM: "The ceiling and the landing", "Forgetting", "Sleep"): the budget and the
landing (`budget`), sealing (`seal`), the fade (`fade`: where it runs, and its picks), the facts
block (`facts_block`), and sleep (`sleep`)."""
