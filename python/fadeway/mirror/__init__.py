"""In-memory mirrors of what the store holds for a memory, kept in step by reading only what is
new: its history (`history`), episodes (`episode_table`), trace log (`trace_log`) and facts
(`facts`), and the mirrors of recently used memories (`mirrors`). The store stays the truth."""
