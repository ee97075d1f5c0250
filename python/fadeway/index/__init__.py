"""Search over a memory's facts and passages (ARCHITECTURE: "Embeddings and search"): BM25 and
vector indexes kept in step with the store (`search`, `vectors`), passages of sealed
conversation (`passages`), embedding in the lane (`embedding`), and where indexes live on disk
(`paths`, `indexes`)."""
