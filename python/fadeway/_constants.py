"""Every tunable of fadeway, named once. Settings override these per engine."""

from __future__ import annotations

#: The context window the ceiling assumes, in tokens, for every model (MECHANISM: "The ceiling").
DEFAULT_CEILING = 200_000

#: A user message after this much silence makes the turn sleep first (MECHANISM: "Sleep").
SLEEP_GAP_SECONDS = 24 * 60 * 60

# -- token estimation -----------------------------------------------------------------------

#: Tokens a provider adds around every message (role, separators), per OpenAI's published recipe.
TOKENS_PER_MESSAGE = 3
#: Extra token when a message carries a `name`.
TOKENS_PER_NAME = 1
#: Tokens that prime the reply (`<|start|>assistant<|message|>`).
TOKENS_REPLY_PRIMING = 3
#: Overhead of each tool definition beyond its JSON text.
TOKENS_PER_TOOL = 8
#: Fixed estimates for media whose size the text does not show.
TOKENS_PER_IMAGE = 765
TOKENS_PER_AUDIO = 200
TOKENS_PER_FILE = 1_000

#: A correction ratio (provider count / our estimate) outside this range is not kept.
PLAUSIBLE_RATIO = (0.5, 2.0)

# -- engine --------------------------------------------------------------------------------

#: How many memories' stored histories an engine mirrors in memory (least recently used leave).
HISTORY_CACHE_MEMORIES = 256

# -- store ----------------------------------------------------------------------------------

#: How long a writer waits for another to finish before giving up, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 30_000

# -- segmentation / embedding ---------------------------------------------------------------
# Offline boundary scores (`fadeway.cohesion`). Tuned on TIAGE train + dev only, by ranking
# quality (Pk of the top-k slots at the gold count, since sizes decide how many cuts and the
# scores only where); `benches/segmentation_tiage.py --tune` repeats the search.

#: Units compared on each side of a gap.
COHESION_WINDOW = 4
#: Size of the hashing embeddings the embedding view uses.
COHESION_EMBED_DIM = 256
#: Share of the lexical (tf-idf) view in the cohesion; the rest is the embedding view.
COHESION_LEXICAL_WEIGHT = 0.75
#: Width of the moving average over the cohesion curve (1 = none).
COHESION_SMOOTHING = 3
#: Where a yes/no boundary is needed without sizes: a gap whose score (first[j+1] + last[j])
#: exceeds the mean of its conversation's gap scores by this many standard deviations.
BOUNDARY_THRESHOLD_STD = 1.75
