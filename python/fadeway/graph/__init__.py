"""The memory's knowledge graph (MECHANISM: "The note ask and sealing"): the graph as held
(`held`) and a note's additions to it, planned and applied in the lane (`update`)."""
