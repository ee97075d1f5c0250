"""Episodes (MECHANISM: "Episodes", "Encoding and traces"): turns and units (`units`), cutting
closed history into episodes (`cut`, the lane's CUT job), and the fact traces judged against
them (`traces`, the SCORE job)."""
